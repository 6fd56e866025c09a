//! The documentation names every rule: the README's table and the man page.

use std::fs;
use std::path::Path;

use mimeref_milter::engine::Rule;

fn read(rel: &str) -> String {
    fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

#[test]
fn readme_table_lists_every_rule_with_its_severity() {
    let readme = read("README.md");
    for &rule in Rule::ALL {
        let row = format!("| `{}` | {} |", rule.id(), rule.severity());
        assert!(readme.contains(&row), "README.md lacks the row {row}");
        let fix_documented = readme
            .lines()
            .any(|l| l.starts_with(&row) && l.contains("fix"));
        assert_eq!(
            fix_documented,
            rule.has_fix(),
            "README.md default action of {} disagrees with has_fix",
            rule.id()
        );
    }
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

/// The README sends admins to mimeref-milter(8) for the catalogue "with conditions and
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
    let readme = read("README.md");
    assert!(readme.contains("The catalogue with conditions and standards is\n`mimeref-milter(8)`"));
}
