//! The charts of the page, drawn as inline SVG: bars only, sized by a viewBox so that
//! they scale with the column they stand in, with their figures written beside them
//! (a chart must not be the only place a number is).

use std::fmt::Write as _;

use super::super::summary::Summary;
use super::{action_colour, escape, text};
use crate::cli::date::{civil, days, ymd};
use crate::policy::Action;

/// Width of every chart's viewBox; the label column and the bar column share it.
const W: u32 = 640;
const LABEL: u32 = 250;
const ROW: u32 = 22;
/// Buckets of the timeline at most: past them a coarser unit is taken.
const MAX_BUCKETS: i64 = 120;

fn open(h: &mut String, id: &str, title: &str, height: u32, desc: &str) -> std::fmt::Result {
    writeln!(
        h,
        "<figure class=\"chart\" id=\"{id}\"><figcaption>{title}</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {height}\" role=\"img\" aria-label=\"{}\" preserveAspectRatio=\"xMinYMin meet\">",
        escape(desc)
    )
}

fn close(h: &mut String) -> std::fmt::Result {
    writeln!(h, "</svg></figure>")
}

fn bar_len(n: u64, max: u64, room: u32) -> f64 {
    if max == 0 {
        0.0
    } else {
        n as f64 / max as f64 * f64::from(room)
    }
}

pub(super) fn verdicts(s: &Summary, h: &mut String) -> std::fmt::Result {
    let st = s.stats;
    let shown: Vec<Action> = Action::ALL.iter().rev().copied().collect();
    let max = st.verdicts.iter().copied().max().unwrap_or(0);
    open(
        h,
        "chart-verdicts",
        "Verdicts (messages)",
        ROW * shown.len() as u32 + 4,
        "messages per verdict",
    )?;
    for (i, a) in shown.iter().enumerate() {
        let n = st.verdicts[*a as usize];
        let y = i as u32 * ROW + 2;
        let len = bar_len(n, max, W - LABEL - 80);
        writeln!(
            h,
            "<g data-verdict=\"{a}\" data-value=\"{n}\"><text x=\"{lx}\" y=\"{ty}\" text-anchor=\"end\">{a}</text><rect x=\"{LABEL}\" y=\"{y}\" width=\"{len:.1}\" height=\"{bh}\" fill=\"{c}\"/><text x=\"{nx:.1}\" y=\"{ty}\">{n}</text></g>",
            lx = LABEL - 8,
            ty = y + 14,
            bh = ROW - 6,
            c = action_colour(*a),
            nx = f64::from(LABEL) + len + 6.0,
        )?;
    }
    close(h)
}

/// Messages per rule, each bar cut by the action the rule got, its label marked by
/// severity.
pub(super) fn rules(s: &Summary, h: &mut String, shown: usize) -> std::fmt::Result {
    let rules = s.rules();
    if rules.is_empty() {
        return Ok(());
    }
    let rules = &rules[..rules.len().min(shown)];
    let max = rules.iter().map(|r| r.stats.messages).max().unwrap_or(0);
    let legend = 24;
    open(
        h,
        "chart-rules",
        "Rules (messages per rule, by the action taken; the dot is the severity)",
        ROW * rules.len() as u32 + 4 + legend,
        "messages per rule by action",
    )?;
    for (i, r) in rules.iter().enumerate() {
        let y = i as u32 * ROW + 2;
        let sev = match r.rule.severity() {
            crate::engine::Severity::Error => "#b22222",
            crate::engine::Severity::Warning => "#c47f00",
            crate::engine::Severity::Info => "#2f6fb3",
        };
        write!(
            h,
            "<g data-rule=\"{id}\" data-value=\"{n}\"><title>{id}: {n} messages, {sevname}</title><circle cx=\"8\" cy=\"{cy}\" r=\"5\" fill=\"{sev}\"/><text x=\"{lx}\" y=\"{ty}\" text-anchor=\"end\" class=\"small\">{id}</text>",
            id = r.rule.id(),
            n = r.stats.messages,
            sevname = r.rule.severity(),
            cy = y + 9,
            lx = LABEL - 8,
            ty = y + 14,
        )?;
        let mut x = f64::from(LABEL);
        for (a, n) in Summary::actions(&r.stats.actions).iter().rev() {
            let len = bar_len(*n, max, W - LABEL - 80);
            write!(
                h,
                "<rect x=\"{x:.1}\" y=\"{y}\" width=\"{len:.1}\" height=\"{}\" fill=\"{}\"><title>{a}: {n}</title></rect>",
                ROW - 6,
                action_colour(*a)
            )?;
            x += len;
        }
        writeln!(
            h,
            "<text x=\"{:.1}\" y=\"{}\">{}</text></g>",
            x + 6.0,
            y + 14,
            r.stats.messages
        )?;
    }
    // The legend: the actions that occur.
    let mut used = [false; Action::ALL.len()];
    for r in rules {
        for (a, _) in Summary::actions(&r.stats.actions) {
            used[a as usize] = true;
        }
    }
    let y = ROW * rules.len() as u32 + 8;
    let mut x = 10;
    for a in Action::ALL.iter().filter(|a| used[**a as usize]) {
        writeln!(
            h,
            "<rect x=\"{x}\" y=\"{y}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"{}\" class=\"small\">{a}</text>",
            action_colour(*a),
            x + 16,
            y + 11
        )?;
        x += 100;
    }
    close(h)
}

/// A unit of the timeline.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Unit {
    Day,
    Month,
    Year,
}

/// The first day of the bucket `day` falls in.
fn bucket(unit: Unit, day: i64) -> i64 {
    let (y, m, _) = civil(day);
    match unit {
        Unit::Day => day,
        Unit::Month => days(y, m, 1),
        Unit::Year => days(y, 1, 1),
    }
}

fn next(unit: Unit, start: i64) -> i64 {
    let (y, m, _) = civil(start);
    match unit {
        Unit::Day => start + 1,
        Unit::Month if m == 12 => days(y + 1, 1, 1),
        Unit::Month => days(y, m + 1, 1),
        Unit::Year => days(y + 1, 1, 1),
    }
}

fn label(unit: Unit, start: i64) -> String {
    let d = ymd(start);
    match unit {
        Unit::Day => d,
        Unit::Month => d[..7].to_string(),
        Unit::Year => d[..4].to_string(),
    }
}

/// Per day when the dates span two months at most, else per month, else per year:
/// (unit, buckets of (first day, messages, with findings)).
fn buckets(days_: &std::collections::BTreeMap<i64, [u64; 2]>) -> (Unit, Vec<(i64, u64, u64)>) {
    let (Some(&first), Some(&last)) = (days_.keys().next(), days_.keys().next_back()) else {
        return (Unit::Day, Vec::new());
    };
    let unit = if last - first < 62 {
        Unit::Day
    } else {
        let (y0, m0, _) = civil(first);
        let (y1, m1, _) = civil(last);
        if (y1 - y0) * 12 + (m1 - m0) < MAX_BUCKETS {
            Unit::Month
        } else {
            Unit::Year
        }
    };
    let mut out: Vec<(i64, u64, u64)> = Vec::new();
    let mut b = bucket(unit, first);
    while b <= last {
        out.push((b, 0, 0));
        b = next(unit, b);
    }
    for (&d, &[n, f]) in days_ {
        let k = bucket(unit, d);
        if let Ok(i) = out.binary_search_by_key(&k, |x| x.0) {
            out[i].1 += n;
            out[i].2 += f;
        }
    }
    (unit, out)
}

/// Messages and messages with findings per day, month or year, and the undated.
pub(super) fn timeline(s: &Summary, h: &mut String) -> std::fmt::Result {
    let d = &s.stats.dates;
    let (unit, mut bars) = buckets(&d.days);
    let undated = d.undated;
    let labelled: Vec<(String, String, u64, u64)> = bars
        .drain(..)
        .map(|(b, n, f)| (label(unit, b), label(unit, b), n, f))
        .chain(std::iter::once((
            "undated".to_string(),
            "undated".to_string(),
            undated[0],
            undated[1],
        )))
        .collect();
    let max = labelled.iter().map(|b| b.2).max().unwrap_or(0);
    let height = 200;
    let base = 160.0;
    let unit_name = match unit {
        Unit::Day => "day",
        Unit::Month => "month",
        Unit::Year => "year",
    };
    open(
        h,
        "chart-timeline",
        &format!("Messages over time, per {unit_name} (UTC; dark: with findings; by the Date field, else the mbox From line)"),
        height,
        "messages and messages with findings over time",
    )?;
    let room = f64::from(W - 20);
    let step = room / labelled.len() as f64;
    let every = (labelled.len() / 8).max(1);
    for (i, (key, lab, n, f)) in labelled.iter().enumerate() {
        let x = 10.0 + i as f64 * step;
        let hn = if max == 0 {
            0.0
        } else {
            *n as f64 / max as f64 * 140.0
        };
        let hf = if max == 0 {
            0.0
        } else {
            *f as f64 / max as f64 * 140.0
        };
        let w = (step * 0.8).max(0.5);
        write!(
            h,
            "<g data-bucket=\"{key}\" data-messages=\"{n}\" data-findings=\"{f}\"><title>{}: {n} messages, {f} with findings</title><rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{hn:.1}\" fill=\"#c9d3dd\"/><rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{hf:.1}\" fill=\"{}\"/>",
            escape(lab),
            base - hn,
            base - hf,
            if key == "undated" { "#7a4fa0" } else { "#2f6fb3" }
        )?;
        if i % every == 0 || i + 1 == labelled.len() {
            // The last label ends at its bar, or it would run out of the chart.
            let (lx, anchor) = if i + 1 == labelled.len() {
                (x + w, "end")
            } else {
                (x + w / 2.0, "middle")
            };
            write!(
                h,
                "<text x=\"{lx:.1}\" y=\"{}\" text-anchor=\"{anchor}\" class=\"small\">{}</text>",
                if i % (2 * every) == 0 { 176 } else { 192 },
                escape(lab)
            )?;
        }
        writeln!(h, "</g>")?;
    }
    close(h)
}

/// The senders of the most messages with findings.
pub(super) fn senders(s: &Summary, h: &mut String) -> std::fmt::Result {
    let top = s.top_senders();
    if top.is_empty() {
        return Ok(());
    }
    let max = top.iter().map(|t| t.1.messages).max().unwrap_or(0);
    let row = 2 * ROW;
    open(
        h,
        "chart-senders",
        "Top senders of messages with findings (X-Mailer, User-Agent or Message-ID domain; green: fixed)",
        row * top.len() as u32 + 4,
        "messages with findings per sender",
    )?;
    for (i, (who, x)) in top.iter().enumerate() {
        let y = i as u32 * row + 2;
        let len = bar_len(x.messages, max, W - 100);
        let fixed = bar_len(x.repaired, max, W - 100);
        writeln!(
            h,
            "<g data-sender=\"{}\" data-value=\"{}\"><text x=\"4\" y=\"{}\" class=\"small\">{}</text><rect x=\"4\" y=\"{}\" width=\"{len:.1}\" height=\"{}\" fill=\"#6b7c8f\"/><rect x=\"4\" y=\"{}\" width=\"{fixed:.1}\" height=\"{}\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{}\">{}</text></g>",
            text(who),
            x.messages,
            y + 13,
            text(&super::cut(who, 70)),
            y + 18,
            ROW - 8,
            y + 18,
            ROW - 8,
            action_colour(Action::Fix),
            4.0 + len + 6.0,
            y + 31,
            x.messages
        )?;
    }
    close(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeline_takes_the_unit_the_span_needs() {
        let mut m = std::collections::BTreeMap::new();
        m.insert(days(2025, 3, 1), [2, 1]);
        m.insert(days(2025, 3, 31), [1, 0]);
        let (u, b) = buckets(&m);
        assert_eq!((u, b.len()), (Unit::Day, 31));
        assert_eq!(b.iter().map(|x| x.1).sum::<u64>(), 3);
        m.insert(days(2025, 12, 24), [1, 1]);
        let (u, b) = buckets(&m);
        assert_eq!((u, b.len()), (Unit::Month, 10));
        assert_eq!(b.iter().map(|x| x.2).sum::<u64>(), 2);
        m.insert(days(1971, 1, 1), [1, 1]);
        let (u, b) = buckets(&m);
        assert_eq!((u, b.len()), (Unit::Year, 55));
        assert_eq!(b.iter().map(|x| x.1).sum::<u64>(), 5);
    }
}
