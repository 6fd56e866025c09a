//! What happens to the references a message carries, whatever its direction (the
//! fixes' keys, with what signed content they may change) and per direction: `[schemes]`, `[schemes.inbound]`,
//! `[schemes.outbound]`, `[[rewrite]]`, `[legacy]`.

use toml::Spanned;

use super::{line_of, Validator};
use crate::config::raw::{RawConfig, RawFixSigned, RawRewrite, RawSchemesDir};
use crate::config::{Fixes, RewriteRule, UrlPolicy, Urls};
use crate::engine::{FixSigned, HostMatch, PathRegex, SchemePolicy, Template, UrlRewrite};

impl Validator<'_> {
    /// `fix_signed`, `trusted_authserv_ids`, `normalize_url_continuations`,
    /// `fold_url_words`.
    pub(super) fn fixes(&mut self, raw: &mut RawConfig) -> Fixes {
        let fix_signed = raw
            .fix_signed
            .take()
            .and_then(|v| self.fix_signed(&v, "fix_signed"))
            .unwrap_or_default();
        let trusted_authserv_ids = self.authserv_ids(raw.trusted_authserv_ids.take());
        Fixes {
            fix_signed,
            trusted_authserv_ids,
            normalize_url_continuations: raw.normalize_url_continuations.unwrap_or(false),
            fold_url_words: raw.fold_url_words.unwrap_or(false),
        }
    }

    /// A `fix_signed` value, top-level or a scope's (`key` names it); None on an error.
    /// Where it says `"verified"`, remembered: without `trusted_authserv_ids` it can
    /// never repair anything ([`Validator::verified_without_ids`]).
    pub(super) fn fix_signed(&mut self, v: &Spanned<RawFixSigned>, key: &str) -> Option<FixSigned> {
        match v.get_ref() {
            RawFixSigned::Switch(true) => Some(FixSigned::Always),
            RawFixSigned::Switch(false) => Some(FixSigned::Never),
            RawFixSigned::Word(w) if w == "verified" => {
                self.verified_at.push((key.to_string(), v.span()));
                Some(FixSigned::Verified)
            }
            RawFixSigned::Word(w) => {
                self.err(
                    v.span(),
                    format!("{key} {w:?}: expected true, false or \"verified\""),
                );
                None
            }
        }
    }

    /// `trusted_authserv_ids`: host names as verifiers write them first in their
    /// Authentication-Results (RFC 8601 §2.5), lower-cased.
    fn authserv_ids(&mut self, ids: Option<Vec<Spanned<String>>>) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for id in ids.unwrap_or_default() {
            let t = id.get_ref();
            // What ends or quotes a value in the field's syntax cannot be in one.
            let bad = t.is_empty()
                || t.bytes()
                    .any(|b| !b.is_ascii_graphic() || b"();\"\\".contains(&b));
            if bad {
                self.err(
                    id.span(),
                    format!(
                        "trusted_authserv_ids {t:?}: an authserv-id is one token, as the \
                         verifier writes it first in its Authentication-Results \
                         (AuthservID in OpenDKIM, authserv_id in rspamd), e.g. \"mx.example.org\""
                    ),
                );
                continue;
            }
            let t = t.to_ascii_lowercase();
            if !out.contains(&t) {
                out.push(t);
            }
        }
        out
    }

    /// Warns where `fix_signed = "verified"` is set while no authserv-id is trusted:
    /// no verdict can then count, and nothing under an intact signature is repaired.
    pub(super) fn verified_without_ids(&mut self, fixes: &Fixes) {
        if !fixes.trusted_authserv_ids.is_empty() {
            return;
        }
        for (key, span) in std::mem::take(&mut self.verified_at) {
            self.warn(
                "fix_signed",
                span,
                format!(
                    "{key} = \"verified\" without trusted_authserv_ids: no \
                     Authentication-Results field can count, so nothing under an intact \
                     DKIM signature is repaired; name the authserv-id your verifier writes"
                ),
            );
        }
    }

    /// `[schemes]`, `[schemes.inbound]`, `[schemes.outbound]`, `[[rewrite]]`, `[legacy]`.
    pub(super) fn urls(&mut self, raw: &mut RawConfig) -> Urls {
        let rs = raw.schemes.take().unwrap_or_default();
        let mut schemes = SchemePolicy::default();
        if let Some(l) = self.scheme_list(rs.allow, "[schemes] allow") {
            schemes.allow = l;
        }
        if let Some(l) = self.scheme_list(rs.deny, "[schemes] deny") {
            schemes.deny = l;
        }
        let strip_denied = rs.strip_denied.unwrap_or(false);
        let mut url_inbound = self.url_policy(rs.inbound, &schemes, strip_denied, "inbound");
        let mut url_outbound = self.url_policy(rs.outbound, &schemes, strip_denied, "outbound");
        let mut rules = Vec::new();
        for (n, r) in raw
            .rewrite
            .take()
            .unwrap_or_default()
            .into_iter()
            .enumerate()
        {
            if let Some((rule, inbound, outbound)) = self.rewrite_rule(n + 1, r) {
                if inbound {
                    url_inbound.rewrites.push(rule.clone());
                }
                if outbound {
                    url_outbound.rewrites.push(rule.clone());
                }
                rules.push(RewriteRule {
                    rule,
                    inbound,
                    outbound,
                });
            }
        }
        let rl = raw.legacy.take().unwrap_or_default();
        if let Some(s) = rl.to_url {
            if let Some((i, o)) = self.direction_set(&s, "[legacy] to_url") {
                url_inbound.legacy_to_url = i;
                url_outbound.legacy_to_url = o;
            }
        }
        let ftp_login = rl.ftp_with_login.unwrap_or(false);
        url_inbound.legacy_ftp_with_login = ftp_login;
        url_outbound.legacy_ftp_with_login = ftp_login;
        Urls {
            inbound: url_inbound,
            outbound: url_outbound,
            rules,
        }
    }

    /// `[schemes.DIR]` over the `[schemes]` defaults: a key given replaces the default.
    fn url_policy(
        &mut self,
        raw: Option<RawSchemesDir>,
        base: &SchemePolicy,
        strip: bool,
        dir: &str,
    ) -> UrlPolicy {
        let raw = raw.unwrap_or_default();
        let mut schemes = base.clone();
        if let Some(l) = self.scheme_list(raw.allow, &format!("[schemes.{dir}] allow")) {
            schemes.allow = l;
        }
        if let Some(l) = self.scheme_list(raw.deny, &format!("[schemes.{dir}] deny")) {
            schemes.deny = l;
        }
        UrlPolicy {
            schemes,
            strip_denied: raw.strip_denied.unwrap_or(strip),
            ..UrlPolicy::default()
        }
    }

    /// A list of URL schemes, lower-cased; None when not given.
    fn scheme_list(&mut self, v: Option<Vec<Spanned<String>>>, key: &str) -> Option<Vec<String>> {
        let list = v?;
        let mut out = Vec::new();
        for s in list {
            let t = s.get_ref().to_ascii_lowercase();
            let ok = t.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
            if ok {
                out.push(t);
            } else {
                self.err(
                    s.span(),
                    format!(
                        "{key}: {:?} is not a URL scheme (RFC 3986 §3.1)",
                        s.get_ref()
                    ),
                );
            }
        }
        Some(out)
    }

    /// One `[[rewrite]]` table: the rule and the directions it applies to.
    fn rewrite_rule(&mut self, n: usize, r: RawRewrite) -> Option<(UrlRewrite, bool, bool)> {
        // The line of the table, for messages: its first key.
        let spans = [
            r.direction.as_ref().map(|s| s.span()),
            r.scheme.as_ref().map(|s| s.span()),
            r.host.as_ref().map(|s| s.span()),
            r.host_suffix.as_ref().map(|s| s.span()),
            r.path.as_ref().map(|s| s.span()),
            r.template.as_ref().map(|s| s.span()),
        ];
        let first = spans.into_iter().flatten().min_by_key(|s| s.start);
        let line = first.as_ref().map_or(0, |s| line_of(self.text, s.start));
        let key = format!("[[rewrite]] #{n}");
        let mark = self.mark();
        let (inbound, outbound) = match &r.direction {
            None => (true, true),
            Some(s) => self
                .direction_set(s, &format!("{key} direction"))
                .unwrap_or((false, false)),
        };
        let scheme = r.scheme.and_then(|s| {
            self.scheme_list(Some(vec![s]), &format!("{key} scheme"))
                .and_then(|l| l.into_iter().next())
        });
        let host = match (r.host, r.host_suffix) {
            (Some(h), Some(_)) => {
                self.err(
                    h.span(),
                    format!("{key}: give host or host_suffix, not both"),
                );
                None
            }
            (Some(h), None) => self.host(h, &key).map(HostMatch::Exact),
            (None, Some(h)) => self.host(h, &key).map(HostMatch::Suffix),
            (None, None) => None,
        };
        let path = r.path.and_then(|p| match PathRegex::new(p.get_ref()) {
            Ok(re) => Some(re),
            Err(e) => {
                self.err(
                    p.span(),
                    format!("{key} path: not a regular expression: {e}"),
                );
                None
            }
        });
        let template = match r.template {
            None => {
                self.err_at_line(line, format!("{key}: template is required"));
                None
            }
            Some(t) => match Template::parse(t.get_ref()) {
                Ok(t) => Some(t),
                Err(e) => {
                    self.err(t.span(), format!("{key} template {:?}: {e}", t.get_ref()));
                    None
                }
            },
        };
        let template = template?;
        // A rule with any error is left out, whichever key it was in.
        if !self.clean_since(mark) {
            return None;
        }
        let rule = UrlRewrite {
            name: if line > 0 {
                format!("rewrite #{n} (line {line})")
            } else {
                format!("rewrite #{n}")
            },
            scheme,
            host,
            path,
            template,
        };
        Some((rule, inbound, outbound))
    }

    fn host(&mut self, h: Spanned<String>, key: &str) -> Option<String> {
        let t = h.get_ref().trim_start_matches('.').to_ascii_lowercase();
        let valid = !t.is_empty()
            && t.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'[' | b']' | b':')
            });
        if valid {
            Some(t)
        } else {
            self.err(
                h.span(),
                format!(
                    "{key}: {:?} is not a host name or [IPv6] address",
                    h.get_ref()
                ),
            );
            None
        }
    }
}
