//! Scope selection, the decisions over several scopes and the checks for scopes that
//! can never match, on scopes as the configuration builds them.

use ipnet::IpNet;

use super::*;
use crate::engine::{Finding, Rule, Severity};
use crate::policy::decide::{self, Decider, Overrides};
use crate::policy::matching::{Address, HeaderMatch, Matcher};
use crate::policy::report::Report;
use crate::policy::{Action, Direction, Pattern, Policies, Policy};

fn addr(s: &str) -> Address {
    Address::parse(s).unwrap_or_else(|e| panic!("{e}"))
}

fn scope(name: &str, m: Matcher, effect: Effect) -> Scope {
    Scope {
        name: name.into(),
        line: 1,
        inbound: true,
        outbound: true,
        matcher: m,
        effect,
    }
}

fn rcpt(list: &[&str]) -> Matcher {
    Matcher {
        recipients: Some(list.iter().map(|s| addr(s)).collect()),
        ..Matcher::default()
    }
}

fn overriding(entries: &[(&str, Action)]) -> Effect {
    let e: Vec<(Pattern, Action)> = entries
        .iter()
        .map(|(p, a)| (Pattern::parse(p).unwrap(), *a))
        .collect();
    let base = Policy::builtin(Direction::Inbound);
    Effect::Override(Box::new(Overrides {
        inbound: Policy::layered(&base, e.clone()),
        outbound: Policy::layered(&base, e),
        fix_signed: None,
        report: None,
        always: None,
        min_severity: None,
    }))
}

fn env(scopes: &Scopes, rcpts: &[&str]) -> Envelope {
    let mut r = scopes.recipients();
    for a in rcpts {
        r.add(scopes, format!("<{a}>").as_bytes());
    }
    Envelope {
        recipients: r,
        ..Envelope::default()
    }
}

fn names(s: &Selection) -> Vec<String> {
    s.names()
}

#[test]
fn first_matching_scope_wins_per_recipient() {
    let scopes = Scopes::new(vec![
        scope(
            "vip",
            rcpt(&["boss@example.org"]),
            Effect::Exempt(Action::Ignore),
        ),
        scope(
            "strict",
            rcpt(&["@example.org"]),
            overriding(&[("*", Action::Reject)]),
        ),
    ]);
    let dir = Direction::Inbound;
    let sel = |r: &[&str]| names(&scopes.select(dir, &env(&scopes, r), b""));
    assert_eq!(sel(&["boss@example.org"]), ["vip"]);
    assert_eq!(sel(&["ann@example.org"]), ["strict"]);
    assert!(sel(&["ann@example.net"]).is_empty());
    assert_eq!(
        sel(&[
            "ann@example.net",
            "ann@example.org",
            "Boss@Example.org",
            "x@example.org"
        ]),
        ["vip", "strict", "default"]
    );
    // Without recipients, a scope that asks for one cannot match.
    assert!(sel(&[]).is_empty());
    // Many recipients of the same scopes cost one entry each combination.
    let mut e = env(&scopes, &[]);
    for i in 0..5000 {
        e.recipients
            .add(&scopes, format!("<u{i}@example.org>").as_bytes());
    }
    assert_eq!(e.recipients.masks.len(), 1);
    assert_eq!(e.recipients.count(), 5000);
    assert!(e.recipients.fits(&scopes));
}

#[test]
fn every_key_must_match() {
    let m = Matcher {
        senders: Some(vec![addr("@partner.example")]),
        client_networks: Some(vec!["198.51.100.0/24".parse().unwrap()]),
        header: Some(HeaderMatch::new("List-Id", Some(r"<announce\.example\.org>")).unwrap()),
        ..Matcher::default()
    };
    let scopes = Scopes::new(vec![scope("s", m, Effect::Exempt(Action::Log))]);
    let raw = b"List-Id: Announce <ANNOUNCE.example.org>\r\n\r\nbody\r\n";
    let mut e = Envelope {
        sender: Some("news@partner.example".into()),
        client_addr: Some("198.51.100.7".parse().unwrap()),
        ..Envelope::default()
    };
    let sel = |e: &Envelope, raw: &[u8]| scopes.select(Direction::Inbound, e, raw).scoped();
    assert!(sel(&e, raw));
    assert!(!sel(
        &e,
        b"Subject: x\r\n\r\nList-Id: <announce.example.org>\r\n"
    ));
    e.client_addr = Some("::ffff:198.51.100.9".parse().unwrap());
    assert!(sel(&e, raw), "IPv4-mapped addresses count as IPv4");
    e.client_addr = Some("203.0.113.1".parse().unwrap());
    assert!(!sel(&e, raw));
    e.client_addr = Some("198.51.100.7".parse().unwrap());
    e.sender = Some(String::new());
    assert!(!sel(&e, raw));
    e.sender = None;
    assert!(!sel(&e, raw));
    // --header stands in for a field of the message.
    e.sender = Some("news@partner.example".into());
    e.extra_headers = vec![("list-id".into(), b"<announce.example.org>".to_vec())];
    assert!(sel(&e, b"Subject: x\r\n\r\n"));
}

#[test]
fn sasl_logins_ignore_case_and_directions_restrict() {
    let m = Matcher {
        sasl_logins: Some(vec!["alice".into()]),
        ..Matcher::default()
    };
    let mut s = scope("s", m, Effect::Exempt(Action::Ignore));
    s.inbound = false;
    let scopes = Scopes::new(vec![s]);
    let e = Envelope {
        sasl_login: Some("Alice".into()),
        ..Envelope::default()
    };
    assert!(scopes.select(Direction::Outbound, &e, b"").scoped());
    assert!(!scopes.select(Direction::Inbound, &e, b"").scoped());
}

fn finding(rule: Rule, fixable: bool) -> Finding {
    let mut f = Finding::new(rule, "1", "x");
    f.fixable = fixable;
    f
}

fn policies() -> Policies {
    Policies {
        inbound: Policy::builtin(Direction::Inbound),
        outbound: Policy::builtin(Direction::Outbound),
        oversize_action: Action::Report,
        scopes: Scopes::default(),
    }
}

fn report() -> Report {
    Report {
        header: Some("X-MIMERef".into()),
        always: false,
        remove_forged: true,
        min_severity: Severity::Warning,
        redact_urls: true,
    }
}

#[test]
fn decisions_over_several_scopes() {
    let scopes = Scopes::new(vec![
        scope(
            "list",
            rcpt(&["@lists.example.org"]),
            Effect::Exempt(Action::Ignore),
        ),
        scope(
            "strict",
            rcpt(&["@strict.example"]),
            overriding(&[("related-*", Action::Reject)]),
        ),
    ]);
    let (p, r, dir) = (policies(), report(), Direction::Inbound);
    let decider = Decider {
        dir,
        policies: &p,
        report: &r,
        fix_signed: crate::engine::FixSigned::Never,
        broken_signatures: false,
    };
    let fixable = finding(Rule::ExtbodyUrlUnquoted, true);
    let dup = finding(Rule::RelatedCidDuplicate, false);
    let decide = |rc: &[&str], f: &Finding| {
        let sel = scopes.select(dir, &env(&scopes, rc), b"");
        decider.finding(sel.effects(), f)
    };
    assert_eq!(decide(&["a@x.example"], &fixable), Action::Fix);
    assert_eq!(decide(&["l@lists.example.org"], &fixable), Action::Ignore);
    assert_eq!(
        decide(&["a@x.example", "l@lists.example.org"], &fixable),
        Action::Report,
        "a fix an exempt recipient does not want is reported instead"
    );
    assert_eq!(
        decide(&["a@x.example", "s@strict.example"], &fixable),
        Action::Fix
    );
    assert_eq!(
        decide(&["l@lists.example.org", "s@strict.example"], &dup),
        Action::Reject,
        "the strictest refusal wins"
    );
    let sel = scopes.select(
        dir,
        &env(&scopes, &["l@lists.example.org", "s@strict.example"]),
        b"",
    );
    let findings = [fixable.clone(), dup.clone()];
    assert_eq!(
        sel.decided_by(&decider, &findings, false, Action::Reject),
        "strict"
    );
    let sel = scopes.select(
        dir,
        &env(&scopes, &["a@x.example", "l@lists.example.org"]),
        b"",
    );
    assert_eq!(
        sel.decided_by(
            &decider,
            std::slice::from_ref(&fixable),
            false,
            Action::Report
        ),
        "default"
    );
    assert!(decide::wants_header(sel.effects(), &r, Action::Report));
    let sel = scopes.select(dir, &env(&scopes, &["l@lists.example.org"]), b"");
    assert!(
        !decide::wants_header(sel.effects(), &r, Action::Report),
        "exempt mail gets no header"
    );
    assert_eq!(decider.oversize(sel.effects()), Action::Ignore);
}

#[test]
fn fix_signed_needs_every_fixing_scope() {
    use crate::engine::FixSigned::{Always, Never, Verified};
    let with = |v: Option<crate::engine::FixSigned>| {
        let Effect::Override(mut o) = overriding(&[]) else {
            unreachable!()
        };
        o.fix_signed = v;
        Effect::Override(o)
    };
    let scopes = Scopes::new(vec![
        scope("signer", rcpt(&["@a.example"]), with(Some(Always))),
        scope("plain", rcpt(&["@b.example"]), with(None)),
        scope("list", rcpt(&["@c.example"]), Effect::Exempt(Action::Log)),
        scope("local", rcpt(&["@d.example"]), with(Some(Verified))),
    ]);
    let dir = Direction::Outbound;
    let fs = |r: &[&str], global| scopes.select(dir, &env(&scopes, r), b"").fix_signed(global);
    assert_eq!(fs(&["x@a.example"], Never), Always);
    assert_eq!(fs(&["x@a.example", "y@b.example"], Never), Never);
    assert_eq!(fs(&["x@a.example", "y@b.example"], Always), Always);
    assert_eq!(fs(&["x@a.example", "y@elsewhere.example"], Never), Never);
    assert_eq!(
        fs(&["x@a.example", "y@c.example"], Never),
        Always,
        "exempt scopes make no fix"
    );
    // The least any fixing scope allows: a recipient whose mail is relayed (the
    // direction's own `false`) keeps a local recipient's "verified" from changing it.
    assert_eq!(fs(&["x@d.example"], Never), Verified);
    assert_eq!(fs(&["x@d.example", "y@elsewhere.example"], Never), Never);
    assert_eq!(fs(&["x@d.example", "y@a.example"], Never), Verified);
}

/// The inline rules logged on inbound mail are fixed there once repairs reach signed
/// content: by `fix_signed` in force for the scope that decides, or by a message whose
/// signatures are broken; never where a key names the rule.
#[test]
fn inbound_inline_defaults_follow_what_repairs_reach() {
    use crate::engine::FixSigned::{Never, Verified};
    let with = |v: Option<crate::engine::FixSigned>, entries: &[(&str, Action)]| {
        let Effect::Override(mut o) = overriding(entries) else {
            unreachable!()
        };
        o.fix_signed = v;
        Effect::Override(o)
    };
    let scopes = Scopes::new(vec![
        scope(
            "local",
            rcpt(&["@local.example"]),
            with(Some(Verified), &[]),
        ),
        scope(
            "named",
            rcpt(&["@named.example"]),
            with(
                Some(Verified),
                &[("related-part-disposition-missing", Action::Report)],
            ),
        ),
    ]);
    let (p, r, dir) = (policies(), report(), Direction::Inbound);
    let missing = finding(Rule::RelatedPartDispositionMissing, true);
    let decide = |rc: &[&str], global, broken| {
        let decider = Decider {
            dir,
            policies: &p,
            report: &r,
            fix_signed: global,
            broken_signatures: broken,
        };
        let sel = scopes.select(dir, &env(&scopes, rc), b"");
        decider.finding(sel.effects(), &missing)
    };
    assert_eq!(decide(&["a@elsewhere.example"], Never, false), Action::Log);
    assert_eq!(
        decide(&["a@elsewhere.example"], Verified, false),
        Action::Fix
    );
    assert_eq!(decide(&["a@elsewhere.example"], Never, true), Action::Fix);
    assert_eq!(decide(&["a@local.example"], Never, false), Action::Fix);
    assert_eq!(
        decide(&["a@local.example", "b@elsewhere.example"], Never, false),
        Action::Report,
        "a fix only when every scope fixes"
    );
    assert_eq!(decide(&["a@named.example"], Never, true), Action::Report);
    // Not fixable (withheld): reported, as outbound.
    let decider = Decider {
        dir,
        policies: &p,
        report: &r,
        fix_signed: Verified,
        broken_signatures: false,
    };
    let sel = scopes.select(dir, &env(&scopes, &["a@elsewhere.example"]), b"");
    let withheld = finding(Rule::RelatedPartDispositionMissing, false);
    assert_eq!(decider.finding(sel.effects(), &withheld), Action::Log);
}

#[test]
fn shadowed_scopes_are_found() {
    let earlier = scope(
        "all-of-example",
        rcpt(&["@example.org", "@.example.org"]),
        Effect::Exempt(Action::Ignore),
    );
    let later = |m| scope("later", m, Effect::Exempt(Action::Log));
    assert!(later(rcpt(&["bob@example.org"])).shadowed_by(&earlier));
    assert!(later(rcpt(&["@a.example.org", "x@b.example.org"])).shadowed_by(&earlier));
    assert!(!later(rcpt(&["bob@example.org", "bob@example.net"])).shadowed_by(&earlier));
    // A key the earlier scope does not have narrows nothing it matches.
    let mut m = rcpt(&["bob@example.org"]);
    m.senders = Some(vec![addr("<>")]);
    assert!(later(m).shadowed_by(&earlier));
    // A key the earlier scope has and the later one lacks: the later one is wider.
    let nets = Matcher {
        client_networks: Some(vec!["192.0.2.0/24".parse().unwrap()]),
        ..Matcher::default()
    };
    let narrow = Matcher {
        client_networks: Some(vec!["192.0.2.128/25".parse().unwrap()]),
        ..Matcher::default()
    };
    assert!(later(narrow.clone()).shadowed_by(&scope(
        "n",
        nets.clone(),
        Effect::Exempt(Action::Log)
    )));
    assert!(!later(nets).shadowed_by(&scope("n", narrow, Effect::Exempt(Action::Log))));
    let mut outbound_only = earlier.clone();
    outbound_only.inbound = false;
    assert!(!later(rcpt(&["bob@example.org"])).shadowed_by(&outbound_only));
    let h = |p: Option<&str>| Matcher {
        header: Some(HeaderMatch::new("List-Id", p).unwrap()),
        ..Matcher::default()
    };
    let any_list = scope("lists", h(None), Effect::Exempt(Action::Log));
    assert!(later(h(Some("announce"))).shadowed_by(&any_list));
    assert!(!later(h(None)).shadowed_by(&scope(
        "a",
        h(Some("announce")),
        Effect::Exempt(Action::Log)
    )));
}

#[test]
fn scopes_that_can_never_match() {
    let trusted: Vec<IpNet> = vec!["127.0.0.0/8".parse().unwrap()];
    let mut s = scope(
        "auth",
        Matcher {
            sasl_logins: Some(vec!["alice".into()]),
            ..Matcher::default()
        },
        Effect::Exempt(Action::Log),
    );
    assert!(never_matches(&s, &[], &trusted).is_none());
    s.outbound = false;
    assert!(never_matches(&s, &[], &trusted)
        .unwrap()
        .contains("outbound"));
    let mut local = scope(
        "local",
        Matcher {
            client_networks: Some(vec!["127.0.0.1/32".parse().unwrap()]),
            ..Matcher::default()
        },
        Effect::Exempt(Action::Log),
    );
    local.outbound = false;
    assert!(never_matches(&local, &[], &trusted)
        .unwrap()
        .contains("trusted_networks"));
    let first = scope(
        "first",
        rcpt(&["@example.org"]),
        Effect::Exempt(Action::Log),
    );
    let second = scope(
        "second",
        rcpt(&["bob@example.org"]),
        Effect::Exempt(Action::Log),
    );
    let why = never_matches(&second, std::slice::from_ref(&first), &trusted).unwrap();
    assert!(why.contains("\"first\" (line 1)"), "{why}");
    assert!(never_matches(&first, std::slice::from_ref(&second), &trusted).is_none());
}
