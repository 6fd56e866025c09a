//! The value checks several sections share: an integer within bounds, an action, a
//! set of directions.

use toml::Spanned;

use super::Validator;
use crate::policy::Action;

impl Validator<'_> {
    pub(super) fn int(
        &mut self,
        v: Option<Spanned<i64>>,
        key: &str,
        min: i64,
        max: i64,
        default: i64,
    ) -> i64 {
        match v {
            None => default,
            Some(s) => {
                let n = *s.get_ref();
                if n < min || n > max {
                    self.err(
                        s.span(),
                        format!("{key} = {n}: must be between {min} and {max}"),
                    );
                    default
                } else {
                    n
                }
            }
        }
    }

    pub(super) fn action(&mut self, v: &Spanned<String>, what: &str) -> Option<Action> {
        let a = Action::parse(v.get_ref());
        if a.is_none() {
            // From the list itself, so that no action can be left out of the message.
            let valid: Vec<&str> = Action::ALL.iter().map(|a| a.as_str()).collect();
            self.err(
                v.span(),
                format!(
                    "{what}: unknown action {:?} ({})",
                    v.get_ref(),
                    valid.join(", ")
                ),
            );
        }
        a
    }

    /// `"inbound"`, `"outbound"`, `"both"` or `"none"`, as (inbound, outbound).
    pub(super) fn direction_set(&mut self, s: &Spanned<String>, key: &str) -> Option<(bool, bool)> {
        match s.get_ref().as_str() {
            "both" => Some((true, true)),
            "inbound" => Some((true, false)),
            "outbound" => Some((false, true)),
            "none" => Some((false, false)),
            other => {
                self.err(
                    s.span(),
                    format!(
                        "{key} {other:?}: expected \"inbound\", \"outbound\", \"both\" or \"none\""
                    ),
                );
                None
            }
        }
    }
}
