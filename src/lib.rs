//! mimeref-milter: keeps the references inside MIME messages well-formed.
//!
//! [`engine`] is the pure analysis library; everything else is glue around it, in layers
//! that point one way, each using only those before it:
//!
//! engine → [`policy`] (direction, actions, intake, the planner) → [`config`] (the file,
//! grouped by when a key takes effect) → [`milter`] (the protocol, buffering, sending a
//! plan) → [`daemon`] (sockets, signals, reload, the HTTP endpoint; entry point
//! [`daemon::serve`]) → [`cli`].

#![forbid(unsafe_code)]

pub mod cli;
pub mod config;
pub mod daemon;
pub mod engine;
pub mod milter;
pub mod policy;

/// The layer rule, checked on the sources: no module names a later layer.
#[cfg(test)]
mod layers {
    const ORDER: [&str; 6] = ["engine", "policy", "config", "milter", "daemon", "cli"];

    /// The layers named after `crate::` in `text`, braces included.
    fn named(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        for (i, _) in text.match_indices("crate::") {
            let rest = &text[i + "crate::".len()..];
            let names = match rest.strip_prefix('{') {
                Some(inner) => &inner[..inner.find('}').unwrap_or(inner.len())],
                None => &rest[..rest.find(':').unwrap_or(rest.len())],
            };
            for name in names.split(',') {
                let name = name.trim();
                let end = name
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(name.len());
                out.push(&name[..end]);
            }
        }
        out
    }

    fn sources(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                sources(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    #[test]
    fn no_layer_uses_a_later_one() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut bad = Vec::new();
        for (rank, layer) in ORDER.iter().enumerate() {
            // A layer is `src/LAYER/` or `src/LAYER.rs`, or both (a file with its
            // submodules in the folder of the same name).
            let mut files = Vec::new();
            let dir = src.join(layer);
            if dir.is_dir() {
                sources(&dir, &mut files);
            }
            let file = src.join(format!("{layer}.rs"));
            if file.is_file() {
                files.push(file);
            }
            for f in files {
                let text = std::fs::read_to_string(&f).unwrap();
                for name in named(&text) {
                    if ORDER[rank + 1..].contains(&name) {
                        bad.push(format!("{}: crate::{name}", f.display()));
                    }
                }
            }
        }
        assert!(bad.is_empty(), "later layers used:\n{}", bad.join("\n"));
    }
}
