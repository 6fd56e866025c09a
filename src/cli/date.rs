//! When a message was written, as a survey buckets and bounds it: its `Date` field
//! (RFC 5322 §3.3, obsolete forms included), else the date of its mbox `From ` line
//! (asctime, as the delivery agent wrote it). All in UTC seconds since 1970.
//!
//! A date before 1980 or more than a day ahead of the clock is not believed: such
//! messages are "undated", as are those whose date cannot be read. Spam forges dates,
//! and a timeline stretched to 2099 by one message would show nothing else; a clock
//! that was never set writes 1970-01-01 (288 of 50,000 messages of a spam archive).

use crate::policy::matching::TopFields;

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's `days_from_civil`).
pub(super) fn days(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The (year, month, day) of a day number of [`days`].
pub(super) fn civil(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

fn month(s: &str) -> Option<i64> {
    let s = s.get(..3)?;
    MONTHS
        .iter()
        .position(|m| m.eq_ignore_ascii_case(s))
        .map(|i| i as i64 + 1)
}

/// `HH:MM[:SS]` in seconds.
fn clock(s: &str) -> Option<i64> {
    let mut it = s.split(':');
    let h: i64 = it.next()?.parse().ok()?;
    let m: i64 = it.next()?.parse().ok()?;
    let sec: i64 = it.next().map_or(Some(0), |x| x.parse().ok())?;
    // `then`, not `then_some`: the sum of an hour out of range may not fit.
    (it.next().is_none() && (0..24).contains(&h) && (0..60).contains(&m) && (0..=60).contains(&sec))
        .then(|| h * 3600 + m * 60 + sec)
}

fn valid(y: i64, m: i64, d: i64) -> bool {
    (1..=12).contains(&m) && (1..=31).contains(&d) && civil(days(y, m, d)) == (y, m, d)
}

/// A four-digit year, or a two- or three-digit one of the obsolete syntax (§4.3).
fn year(s: &str) -> Option<i64> {
    if !s.bytes().all(|b| b.is_ascii_digit()) || s.is_empty() || s.len() > 4 {
        return None;
    }
    let y: i64 = s.parse().ok()?;
    Some(match s.len() {
        2 if y < 50 => 2000 + y,
        2 | 3 => 1900 + y,
        _ => y,
    })
}

/// The offset of a zone in seconds east of UTC; unknown zones count as UTC (§4.3).
fn zone(s: Option<&str>) -> i64 {
    let Some(s) = s else { return 0 };
    let b = s.as_bytes();
    if b.len() == 5 && matches!(b[0], b'+' | b'-') && b[1..].iter().all(u8::is_ascii_digit) {
        let n: i64 = s[1..].parse().unwrap_or(0);
        let off = (n / 100) * 3600 + (n % 100) * 60;
        return if b[0] == b'-' { -off } else { off };
    }
    let hours = match s.to_ascii_uppercase().as_str() {
        "EDT" => -4,
        "EST" | "CDT" => -5,
        "CST" | "MDT" => -6,
        "MST" | "PDT" => -7,
        "PST" => -8,
        _ => 0,
    };
    hours * 3600
}

/// A `Date` field's value: `[day-of-week ,] day month year time [zone] [(comment)]`.
pub(super) fn rfc5322(v: &str) -> Option<i64> {
    let v = v.split_once(',').map_or(v, |(_, rest)| rest);
    let words: Vec<&str> = v.split_whitespace().collect();
    let [d, m, y, t, rest @ ..] = words.as_slice() else {
        return None;
    };
    let (d, m, y) = (d.parse().ok()?, month(m)?, year(y)?);
    if !valid(y, m, d) {
        return None;
    }
    Some(days(y, m, d) * 86_400 + clock(t)? - zone(rest.first().copied()))
}

/// An mbox `From ` line: `From sender Www Mmm dd hh:mm:ss [zone] yyyy`, in local time
/// of the writer, taken as UTC.
pub(crate) fn from_line(line: &[u8]) -> Option<i64> {
    let line = std::str::from_utf8(line).ok()?;
    let words: Vec<&str> = line.split_whitespace().collect();
    // The sender may hold spaces: the date is found by its month, from the end.
    (2..words.len().saturating_sub(2)).rev().find_map(|i| {
        let m = month(words[i]).filter(|_| words[i].len() == 3)?;
        let d: i64 = words[i + 1].parse().ok()?;
        let t = clock(words.get(i + 2)?)?;
        let y = words[i + 3..]
            .iter()
            .find_map(|w| (w.len() == 4).then(|| year(w)).flatten())?;
        valid(y, m, d).then(|| days(y, m, d) * 86_400 + t)
    })
}

/// 1980-01-01: see the top.
const EARLIEST: i64 = 3652 * 86_400;

/// When `bytes` (a message) was written, if it can be told and believed: see the top.
/// A `Date` field that cannot be read or believed gives way to the `From ` line's.
pub(super) fn of_message(bytes: &[u8], envelope: Option<i64>, now: i64) -> Option<i64> {
    let field = TopFields::read(bytes)
        .first_text("Date")
        .and_then(|v| rfc5322(&v));
    let believed = |t: &i64| *t >= EARLIEST && *t <= now + 86_400;
    field.filter(believed).or(envelope.filter(believed))
}

/// A bound of `--since`/`--until`: `YYYY-MM-DD` or `YYYY-MM`, in UTC. Returns the first
/// and the last second it covers, so that `--since 2025-05 --until 2025-05` is May.
pub(super) fn bound(s: &str) -> Result<(i64, i64), String> {
    let bad = || format!("{s:?} is not a date: YYYY-MM-DD or YYYY-MM (UTC)");
    let parts: Vec<&str> = s.split('-').collect();
    let num = |p: &str, n: usize| {
        (p.len() == n && p.bytes().all(|b| b.is_ascii_digit()))
            .then(|| p.parse::<i64>().ok())
            .flatten()
    };
    match parts.as_slice() {
        [y, m, d] => {
            let (y, m, d) = (
                num(y, 4).ok_or_else(bad)?,
                num(m, 2).ok_or_else(bad)?,
                num(d, 2).ok_or_else(bad)?,
            );
            if !valid(y, m, d) {
                return Err(bad());
            }
            let start = days(y, m, d) * 86_400;
            Ok((start, start + 86_399))
        }
        [y, m] => {
            let (y, m) = (num(y, 4).ok_or_else(bad)?, num(m, 2).ok_or_else(bad)?);
            if !(1..=12).contains(&m) {
                return Err(bad());
            }
            let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
            Ok((days(y, m, 1) * 86_400, days(ny, nm, 1) * 86_400 - 1))
        }
        _ => Err(bad()),
    }
}

/// `YYYY-MM-DD` of a day number.
pub(super) fn ymd(day: i64) -> String {
    let (y, m, d) = civil(day);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_of_fields_and_from_lines() {
        let t = rfc5322("Thu, 13 Feb 2025 23:31:30 +0100").unwrap();
        assert_eq!(ymd(t.div_euclid(86_400)), "2025-02-13");
        assert_eq!(t % 86_400, 22 * 3600 + 31 * 60 + 30);
        assert_eq!(rfc5322("1 Jan 70 00:00 GMT"), Some(0));
        assert_eq!(
            rfc5322("1 Jan 49 00:00 GMT"),
            Some(days(2049, 1, 1) * 86_400)
        );
        assert_eq!(rfc5322("31 Feb 2025 10:00 +0000"), None);
        assert_eq!(rfc5322("yesterday"), None);
        assert_eq!(rfc5322("Mon, 3 Mar 2025 25:00:00 +0000"), None);
        // Found by the mailbox fuzz target: an hour that does not fit the sum.
        assert_eq!(rfc5322("3 Mar 2025 9223372036854775807:00 +0000"), None);
        assert_eq!(
            from_line(b"From a Mon Mar  3 9223372036854775807:00:01 2025"),
            None
        );
        assert_eq!(rfc5322("3 Mar 2025 -1:00 +0000"), None);
        let f = from_line(b"From alice@example.org Mon Mar  3 10:00:01 2025").unwrap();
        assert_eq!(f, days(2025, 3, 3) * 86_400 + 36_001);
        assert_eq!(
            from_line(b"From MAILER-DAEMON Fri Jul  8 12:08:34 2011"),
            Some(days(2011, 7, 8) * 86_400 + 43_714)
        );
        assert_eq!(from_line(b"From nobody"), None);
        assert_eq!(civil(days(2024, 2, 29)), (2024, 2, 29));
    }

    #[test]
    fn bounds_cover_a_day_or_a_month() {
        assert_eq!(
            bound("2025-02").unwrap(),
            (days(2025, 2, 1) * 86_400, days(2025, 3, 1) * 86_400 - 1)
        );
        assert_eq!(bound("2025-12").unwrap().1, days(2026, 1, 1) * 86_400 - 1);
        assert_eq!(
            bound("2025-02-28").unwrap().1 - bound("2025-02-28").unwrap().0,
            86_399
        );
        for bad in [
            "2025-02-30",
            "2025-13",
            "25-01-01",
            "2025/01/01",
            "",
            "2025-1-1",
        ] {
            assert!(bound(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn future_and_ancient_dates_are_undated() {
        let now = days(2025, 6, 1) * 86_400;
        let msg = |d: &str| format!("Date: {d}\r\nSubject: x\r\n\r\nbody\r\n").into_bytes();
        assert!(of_message(&msg("1 Jun 2025 10:00 +0000"), None, now).is_some());
        assert_eq!(of_message(&msg("1 Jun 2031 10:00 +0000"), None, now), None);
        assert_eq!(
            of_message(&msg("garbage"), Some(EARLIEST + 5), now),
            Some(EARLIEST + 5)
        );
        assert_eq!(of_message(&msg("garbage"), None, now), None);
        assert_eq!(
            of_message(&msg("Thu, 1 Jan 1970 00:00:00 +0000"), None, now),
            None
        );
        assert_eq!(
            of_message(&msg("Tue, 1 Jan 1980 00:00:00 +0000"), None, now),
            Some(EARLIEST)
        );
        assert_eq!(civil(EARLIEST / 86_400), (1980, 1, 1));
    }
}
