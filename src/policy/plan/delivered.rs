//! The message as the MTA delivers it after a plan, for `fix --as-milter` and the
//! reader tests: the offline counterpart of sending the plan to the MTA.

use super::Plan;
use crate::engine::{model::mime, Limits};

/// The message as the MTA delivers it after `plan`: header changes applied in the order
/// they are sent, the body replaced, the report header added as the last field of the
/// heading (where Postfix and Sendmail put `add_header`, tests/mta/QUIRKS.md). None when
/// the plan refuses the message. For `fix --as-milter` and the reader tests.
pub fn delivered(plan: &Plan, raw: &[u8], limits: &Limits) -> Option<Vec<u8>> {
    if plan.dry_run {
        return Some(raw.to_vec());
    }
    if plan.verdict.refuses() {
        return None;
    }
    let msg = mime::Message::parse(raw, limits);
    let Some(e) = msg.entities.first() else {
        return Some(raw.to_vec());
    };
    let eol = e.eol();
    let line_ends = |v: &[u8]| -> Vec<u8> {
        let mut out = Vec::with_capacity(v.len() + 8);
        for (i, &b) in v.iter().enumerate() {
            if b == b'\n' && (i == 0 || v[i - 1] != b'\r') {
                out.extend_from_slice(eol);
            } else {
                out.push(b);
            }
        }
        out
    };
    let fields = msg.fields(e);
    // (name, the whole field as it will be written)
    let mut heading: Vec<(Vec<u8>, Vec<u8>)> = fields
        .iter()
        .map(|f| (raw[f.name.clone()].to_vec(), raw[f.start..f.end].to_vec()))
        .collect();
    for c in &plan.header_changes {
        let Some(at) = heading
            .iter()
            .enumerate()
            .filter(|(_, (n, _))| n.eq_ignore_ascii_case(&c.name))
            .nth(c.index.saturating_sub(1))
            .map(|(i, _)| i)
        else {
            continue;
        };
        match &c.value {
            None => {
                heading.remove(at);
            }
            Some(v) => {
                let mut field = heading[at].0.clone();
                field.push(b':');
                field.extend_from_slice(&line_ends(v));
                field.extend_from_slice(eol);
                heading[at].1 = field;
            }
        }
    }
    if let Some((name, value)) = &plan.report {
        let mut field = name.as_bytes().to_vec();
        field.push(b':');
        field.extend_from_slice(&line_ends(value.as_bytes()));
        field.extend_from_slice(eol);
        heading.push((name.as_bytes().to_vec(), field));
    }
    let fields_end = fields.last().map_or(e.header.start, |f| f.end);
    let body_start = e.body.start.max(fields_end);
    let mut out = Vec::with_capacity(raw.len() + 512);
    out.extend_from_slice(&raw[..e.header.start.min(fields.first().map_or(0, |f| f.start))]);
    for (_, f) in &heading {
        out.extend_from_slice(f);
    }
    out.extend_from_slice(&raw[fields_end..body_start]);
    match &plan.body {
        Some(b) => out.extend_from_slice(b),
        None => out.extend_from_slice(&raw[body_start..]),
    }
    Some(out)
}
