//! mimeref-milter: keeps the references inside MIME messages well-formed.
//!
//! [`engine`] is the pure analysis library; everything else is glue around it, in layers
//! that point one way, each using only those before it:
//!
//! engine → `policy` (direction, actions, intake, the planner) → `config` (the file,
//! grouped by when a key takes effect) → `milter` (the protocol, buffering, sending a
//! plan) → `daemon` (sockets, signals, reload, the HTTP endpoint) → `cli`.
//! ARCHITECTURE.md maps the tree; each folder's root `//!` doc lists its files.
//!
//! Only the engine is public whole. Of the rest, what a caller needs: the binary's
//! [`main`]; a [`Config`] (loaded or parsed, with its [`ConfigErrors`]), the sections it
//! hands out ([`Listen`], [`Limits`], [`Report`], [`Replies`]) and the [`SocketSpec`] it
//! listens on; the daemon's [`bind`] and [`run`], which the binary and
//! the tests both use, with the [`Reload`] request that answers when the reload is over;
//! and the [`Direction`] and [`Envelope`] (its [`Recipients`]) a message is decided
//! under. Each is public at this one path.
//!
//! Two types are named `Limits`: [`Limits`] here is the configuration's `[limits]`
//! section (sizes, spilling, the memory budget); [`engine::Limits`] is the engine's
//! structural limits, the share of it [`Limits::engine`] gives.

#![forbid(unsafe_code)]

mod cli;
mod config;
mod daemon;
pub mod engine;
mod milter;
mod policy;

#[doc(hidden)]
pub use cli::fuzzing as cli_fuzzing;
pub use cli::main;
pub use config::{
    Config, ConfigError, ConfigErrors, Limits, Listen, Replies, ReplyTemplate, Report, SocketSpec,
    SocketSpecError,
};
pub use daemon::probe::{probe, ProbeTarget};
pub use daemon::{bind, run, AnyListener, DaemonError, Reload, Reloaded, Sockets};
pub use policy::scope::{Envelope, Recipients};
pub use policy::Direction;

/// The tests' pseudo-random generator, shared with the integration tests' support.
#[cfg(test)]
#[path = "../tests/support/xorshift.rs"]
mod xorshift;

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

    /// The modules directly under a layer (file or folder), each with its files.
    fn modules(layer: &std::path::Path) -> Vec<(String, Vec<std::path::PathBuf>)> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(layer).unwrap().flatten() {
            let p = e.path();
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                let mut files = Vec::new();
                sources(&p, &mut files);
                out.push((name, files));
            } else if p.extension().is_some_and(|x| x == "rs") && name != "mod" {
                out.push((name, vec![p]));
            }
        }
        out.sort();
        out
    }

    /// Inside a layer too the modules point one way: a cycle between two of them means
    /// neither can be read, tested or moved without the other.
    #[test]
    fn no_cycle_inside_a_layer() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut cycles = Vec::new();
        for layer in ORDER {
            let dir = src.join(layer);
            if !dir.is_dir() {
                continue;
            }
            let mods = modules(&dir);
            let names: Vec<&str> = mods.iter().map(|(n, _)| n.as_str()).collect();
            // Module i uses module j: `crate::LAYER::j` anywhere in i, or `super::j` in
            // a file directly under the layer (where `super` is the layer).
            let uses = |i: usize, j: usize| {
                let (_, files) = &mods[i];
                files.iter().any(|f| {
                    // Code only: a doc link to a sibling is not a use of it.
                    let text: String = std::fs::read_to_string(f)
                        .unwrap()
                        .lines()
                        .filter(|l| !l.trim_start().starts_with("//"))
                        .collect::<Vec<_>>()
                        .join("\n");
                    let direct = f.parent() == Some(dir.as_path());
                    let names_j = |prefix: &str| {
                        text.match_indices(prefix).any(|(at, _)| {
                            let rest = &text[at + prefix.len()..];
                            let inner = rest
                                .strip_prefix('{')
                                .map(|r| &r[..r.find('}').unwrap_or(r.len())]);
                            match inner {
                                Some(list) => list.split(',').any(|n| {
                                    let n = n.trim();
                                    n == names[j] || n.starts_with(&format!("{}::", names[j]))
                                }),
                                None => {
                                    rest.starts_with(names[j])
                                        && !rest[names[j].len()..].starts_with(|c: char| {
                                            c.is_ascii_alphanumeric() || c == '_'
                                        })
                                }
                            }
                        })
                    };
                    names_j(&format!("crate::{layer}::")) || (direct && names_j("super::"))
                })
            };
            let n = mods.len();
            let edges: Vec<Vec<bool>> = (0..n)
                .map(|i| (0..n).map(|j| i != j && uses(i, j)).collect())
                .collect();
            // A cycle through i: i reaches itself.
            for i in 0..n {
                let mut seen = vec![false; n];
                let mut stack: Vec<(usize, Vec<usize>)> = vec![(i, vec![i])];
                while let Some((at, path)) = stack.pop() {
                    for j in 0..n {
                        if !edges[at][j] {
                            continue;
                        }
                        if j == i {
                            let mut names_on: Vec<&str> = path.iter().map(|&k| names[k]).collect();
                            names_on.push(names[i]);
                            cycles.push(format!("{layer}: {}", names_on.join(" -> ")));
                        } else if !seen[j] {
                            seen[j] = true;
                            let mut p = path.clone();
                            p.push(j);
                            stack.push((j, p));
                        }
                    }
                }
            }
        }
        cycles.sort();
        cycles.dedup();
        assert!(
            cycles.is_empty(),
            "cycles inside a layer:\n{}",
            cycles.join("\n")
        );
    }
}
