//! The documentation names every rule: the rule table of docs/RULES.md and the man pages.

use std::fs;
use std::path::Path;

use mimeref_milter::engine::Rule;

fn read(rel: &str) -> String {
    fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

/// The rows of the rule table of docs/RULES.md (the lines after its heading row up to
/// the first line that is not a table row).
fn rule_table(rules: &str) -> Vec<&str> {
    let rows: Vec<&str> = rules
        .lines()
        .skip_while(|l| *l != "| rule | severity | default action | why |")
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect();
    assert!(!rows.is_empty(), "docs/RULES.md has no rule table");
    rows
}

#[test]
fn rules_doc_table_lists_every_rule_with_its_severity() {
    let rules = read("docs/RULES.md");
    let table = rule_table(&rules);
    for &rule in Rule::ALL {
        let row = format!("| `{}` | {} |", rule.id(), rule.severity());
        assert!(
            table.iter().any(|l| l.starts_with(&row)),
            "docs/RULES.md lacks the row {row}"
        );
        let fix_documented = table
            .iter()
            .any(|l| l.starts_with(&row) && l.contains("fix"));
        assert_eq!(
            fix_documented,
            rule.has_fix(),
            "docs/RULES.md default action of {} disagrees with has_fix",
            rule.id()
        );
    }
}

/// And the other way: every row of the table is a rule of the code, once.
#[test]
fn rules_doc_table_has_no_rule_the_code_lacks() {
    let rules = read("docs/RULES.md");
    let mut seen = Vec::new();
    for row in rule_table(&rules) {
        let id = row
            .strip_prefix("| `")
            .and_then(|r| r.split_once('`'))
            .map(|(id, _)| id)
            .unwrap_or_else(|| panic!("docs/RULES.md: a row without a rule id: {row}"));
        assert!(
            Rule::ALL.iter().any(|r| r.id() == id),
            "docs/RULES.md has a row for {id}, which is no rule of the code"
        );
        assert!(!seen.contains(&id), "docs/RULES.md has two rows for {id}");
        seen.push(id);
    }
    assert_eq!(seen.len(), Rule::ALL.len());
}

#[test]
fn man_page_lists_every_rule() {
    let man = read("packaging/man/mimeref-milter.toml.5");
    for &rule in Rule::ALL {
        // roff escapes hyphens as \-
        let escaped = rule.id().replace('-', "\\-");
        assert!(
            man.contains(rule.id()) || man.contains(&escaped),
            "mimeref-milter.toml(5) does not name {}",
            rule.id()
        );
    }
}

/// docs/RULES.md sends admins to mimeref-milter(8) for the catalogue "with conditions and
/// standards": that page has it, each rule with its severity, when it fires and the
/// standard (or the setting) it checks.
#[test]
fn daemon_page_catalogue_gives_each_rule_its_condition_and_standard() {
    let man = read("packaging/man/mimeref-milter.8");
    let section = man
        .split(".SH RULES\n")
        .nth(1)
        .expect("mimeref-milter(8) has no RULES section")
        .split("\n.SH ")
        .next()
        .unwrap();
    for &rule in Rule::ALL {
        let head = format!(
            ".BR {} \" ({})\"\n",
            rule.id().replace('-', "\\-"),
            rule.severity()
        );
        let at = section
            .find(&head)
            .unwrap_or_else(|| panic!("mimeref-milter(8) RULES lacks {head:?}"));
        let body = section[at + head.len()..]
            .split(".TP")
            .next()
            .unwrap()
            .trim();
        let cited = ["RFC ", "draft\\-", "the limits", "the site's"]
            .iter()
            .any(|s| body.rsplit(" (").next().unwrap_or("").contains(s));
        assert!(
            body.len() > 30 && body.ends_with(')') && cited,
            "{}: no condition and standard in {body:?}",
            rule.id()
        );
    }
    let rules = read("docs/RULES.md");
    assert!(rules.contains("The catalogue with conditions and standards is\n`mimeref-milter(8)`"));
}

/// The three worked examples of scopes, as docs/RULES.md, both man pages and the sample
/// configuration give them: each copy is valid and does what its text says.
mod scope_examples {
    use super::read;
    use mimeref_milter::engine::{Rule, Severity};
    use mimeref_milter::Config;
    use mimeref_milter::Direction;
    use mimeref_milter::Envelope;

    const NAMES: [&str; 3] = ["announce-list", "strict-domain", "partner-relay"];

    /// The lines of `text` from the first line containing `from` up to the next line
    /// containing `to`.
    fn between<'a>(text: &'a str, from: &str, to: &str) -> Vec<&'a str> {
        text.lines()
            .skip_while(|l| !l.contains(from))
            .skip(1)
            .take_while(|l| !l.contains(to))
            .collect()
    }

    /// The TOML of the `.nf` ... `.fi` blocks among roff `lines`, escapes undone.
    fn unroff(lines: &[&str]) -> String {
        let mut out = String::new();
        let mut inside = false;
        for l in lines {
            match *l {
                ".nf" => inside = true,
                ".fi" => inside = false,
                _ if inside => {
                    out.push_str(&l.replace("\\-", "-").replace("\\e", "\\"));
                    out.push('\n');
                }
                _ => {}
            }
        }
        out
    }

    /// The sample's commented examples with their `# ` taken off.
    fn uncommented(lines: &[&str]) -> String {
        lines
            .iter()
            .filter_map(|l| l.strip_prefix("# "))
            .filter(|l| {
                l.starts_with('[')
                    || l.starts_with('"')
                    || l.split_once(" = ")
                        .is_some_and(|(k, _)| k.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
            })
            .map(|l| format!("{l}\n"))
            .collect()
    }

    fn check(what: &str, toml: &str) {
        let cfg = Config::parse(&format!("trusted_networks = []\n{toml}"), what)
            .unwrap_or_else(|e| panic!("{what}:\n{e}\n---\n{toml}"));
        rejects_only_what_readers_show_wrong(what, toml);
        let names: Vec<&str> = cfg.scope_names();
        assert_eq!(names, NAMES, "{what}");
        let scope = |dir, env: &Envelope, raw: &[u8]| cfg.scopes_for(dir, env, raw);
        let list = b"List-Id: Announcements <announce.lists.example.org>\r\n\r\nx\r\n";
        assert_eq!(
            scope(Direction::Inbound, &Envelope::default(), list),
            ["announce-list"],
            "{what}"
        );
        let mut env = Envelope::default();
        cfg.add_recipient(&mut env, b"<user@mx.strict.example.org>");
        assert_eq!(
            scope(Direction::Inbound, &env, b""),
            ["strict-domain"],
            "{what}"
        );
        assert!(
            scope(Direction::Outbound, &env, b"").is_empty(),
            "{what}: inbound only"
        );
        let env = Envelope {
            client_addr: Some("2001:db8:100::25".parse().unwrap()),
            ..Envelope::default()
        };
        assert_eq!(
            scope(Direction::Inbound, &env, b""),
            ["partner-relay"],
            "{what}"
        );
    }

    /// Admins copy the examples as they are: a rule a scope rejects for must be one
    /// readers show wrong (severity error: they disagree on what the message shows),
    /// not one the table of docs/RULES.md says no reader is affected by. `"related-*"` once
    /// rejected 1,124 of 56,788 real messages, most for `related-type-missing`.
    fn rejects_only_what_readers_show_wrong(what: &str, toml: &str) {
        let rules = read("docs/RULES.md");
        let doc: toml::Table = toml.parse().unwrap();
        let mut rejected: Vec<Rule> = Vec::new();
        for scope in doc["scope"].as_array().unwrap() {
            let Some(policy) = scope.get("policy").and_then(|p| p.as_table()) else {
                continue;
            };
            for (key, action) in policy {
                if action.as_str() != Some("reject") {
                    continue;
                }
                let glob = |id: &str| match key.strip_suffix('*') {
                    Some(prefix) => id.starts_with(prefix),
                    None => id == key,
                };
                rejected.extend(Rule::ALL.iter().filter(|r| glob(r.id())));
            }
        }
        assert!(!rejected.is_empty(), "{what}: no scope example rejects");
        for rule in rejected {
            let row = rules
                .lines()
                .find(|l| l.starts_with(&format!("| `{}` |", rule.id())))
                .unwrap();
            let readers = row.trim_end_matches(" |").rsplit(" | ").next().unwrap();
            assert!(
                rule.severity() == Severity::Error
                    && !readers.starts_with("no reader tried")
                    && !readers.starts_with("no renderer tried"),
                "{what}: a scope example rejects for {}, which readers show right:\n{row}",
                rule.id()
            );
        }
    }

    #[test]
    fn rules_doc() {
        let rules = read("docs/RULES.md");
        let block = between(&rules, "Three worked examples", "```\n");
        let toml: String = block
            .iter()
            .skip_while(|l| !l.starts_with("```toml"))
            .skip(1)
            .take_while(|l| !l.starts_with("```"))
            .map(|l| format!("{l}\n"))
            .collect();
        check("docs/RULES.md", &toml);
    }

    #[test]
    fn man_pages() {
        let five = read("packaging/man/mimeref-milter.toml.5");
        check(
            "mimeref-milter.toml.5",
            &unroff(&between(&five, ".SS Examples", ".SH EXAMPLE")),
        );
        let eight = read("packaging/man/mimeref-milter.8");
        check(
            "mimeref-milter.8",
            &unroff(&between(&eight, "has every key. Three examples:", ".RE")),
        );
    }

    #[test]
    fn sample_config() {
        let sample = read("config/mimeref-milter.toml");
        check(
            "config/mimeref-milter.toml",
            &uncommented(&between(&sample, "three examples:", "\u{0}")),
        );
    }
}

/// A `.TP` takes the next line as its tag: a request there (a stray `.TP` before
/// `.IP`, as `[report]` once had) prints an empty item or swallows the paragraph, and
/// groff does not warn about it.
#[test]
fn man_pages_have_a_tag_after_every_tp() {
    const FONT: [&str; 8] = [".B ", ".BR ", ".I ", ".IR ", ".RB ", ".BI ", ".IB ", ".RI "];
    for page in [
        "packaging/man/mimeref-milter.8",
        "packaging/man/mimeref-milter.toml.5",
    ] {
        let text = read(page);
        let lines: Vec<&str> = text.lines().collect();
        for (i, pair) in lines.windows(2).enumerate() {
            if pair[0] == ".TP" {
                let tag = pair[1];
                assert!(
                    !tag.is_empty()
                        && (!tag.starts_with('.') || FONT.iter().any(|f| tag.starts_with(f))),
                    "{page}:{}: .TP without a tag (next line {tag:?})",
                    i + 1
                );
            }
        }
    }
}
