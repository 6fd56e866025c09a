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
