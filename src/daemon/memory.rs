//! Whether the daemon's worst case fits the memory the host gives it: the limit of the
//! memory cgroup it runs in (cgroup v2 `memory.max`, v1 `memory.limit_in_bytes`,
//! the smallest on the way up to the root), against SECURITY.md's formula
//! ([`Limits::worst_case_memory`]); and whether spilled messages are memory too (a
//! spill directory on tmpfs). `config-check` run from a shell sees its own cgroup,
//! not the unit's: `serve` says it again at start.

use std::path::{Path, PathBuf};

use crate::config::{Config, Limits};

/// One line per problem, for `config-check` and `serve` to print as warnings.
pub fn warnings(cfg: &Config) -> Vec<String> {
    let mut out = Vec::new();
    let limits = cfg.limits();
    if limits.spill_in_memory {
        out.push(format!(
            "[limits] spill_directory {} is on tmpfs: spilled messages are memory, not \
             disk, and count against memory_budget (the budget, not the disk, then limits \
             how much mail is in flight); use a directory on disk (e.g. /var/tmp or \
             /var/spool/mimeref-milter)",
            limits.spill_directory.display()
        ));
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let worst = limits.worst_case_memory(cfg.listen().max_connections, cpus);
    if let Some((limit, file)) =
        cgroup_limit(Path::new("/proc/self/cgroup"), Path::new(CGROUP_ROOT))
    {
        if worst > limit {
            out.push(over_limit(
                limits,
                cfg.listen().max_connections,
                cpus,
                worst,
                limit,
                &file,
            ));
        }
    }
    out
}

const CGROUP_ROOT: &str = "/sys/fs/cgroup";

fn mib(n: u64) -> String {
    format!("{:.0} MiB", n as f64 / f64::from(1 << 20))
}

fn over_limit(
    limits: &Limits,
    max_connections: usize,
    cpus: usize,
    worst: u64,
    limit: u64,
    file: &Path,
) -> String {
    format!(
        "the worst case in memory, memory_budget {} + {cpus} CPUs × 2 × max_message_size {} \
         + max_connections {max_connections} × {} KiB + {} = {}, is above the memory \
         limit of this process's cgroup, {} ({}): under load the kernel kills the daemon \
         before memory_budget tempfails anything; lower memory_budget, max_message_size \
         or max_connections, or raise the limit (MemoryMax= in the unit)",
        mib(limits.memory_budget as u64),
        mib(limits.max_message_size as u64),
        crate::config::CONNECTION_MEMORY >> 10,
        mib(crate::config::DAEMON_MEMORY as u64),
        mib(worst),
        mib(limit),
        file.display(),
    )
}

/// The smallest memory limit set on this process's cgroup or its ancestors, and the
/// file that sets it; None when nothing limits it (or no cgroup can be read).
fn cgroup_limit(proc_cgroup: &Path, root: &Path) -> Option<(u64, PathBuf)> {
    let text = std::fs::read_to_string(proc_cgroup).ok()?;
    let mut found: Option<(u64, PathBuf)> = None;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        let (base, file) = if controllers.is_empty() {
            (root.to_path_buf(), "memory.max")
        } else if controllers.split(',').any(|c| c == "memory") {
            (root.join("memory"), "memory.limit_in_bytes")
        } else {
            continue;
        };
        let mut dir = base.join(path.trim_start_matches('/'));
        // In a container the path may be the host's; only the dirs that exist count.
        loop {
            let candidate = dir.join(file);
            if let Some(limit) = read_limit(&candidate) {
                if found.as_ref().is_none_or(|(l, _)| limit < *l) {
                    found = Some((limit, candidate));
                }
            }
            if dir == base || !dir.pop() {
                break;
            }
        }
    }
    found
}

/// A limit file's value; None for "max" and for v1's "no limit" (a page-rounded
/// i64::MAX).
fn read_limit(file: &Path) -> Option<u64> {
    let v: u64 = std::fs::read_to_string(file).ok()?.trim().parse().ok()?;
    (v < 1 << 62).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("mimeref-cgroup-unit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn the_smallest_limit_on_the_way_up_counts_v1_and_v2() {
        let d = tree("v1v2");
        let root = d.join("sys");
        let v1 = root.join("memory/system.slice/mimeref-milter.service");
        std::fs::create_dir_all(&v1).unwrap();
        std::fs::write(v1.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        std::fs::write(
            root.join("memory/system.slice/memory.limit_in_bytes"),
            "536870912\n",
        )
        .unwrap();
        let v2 = root.join("user.slice/a");
        std::fs::create_dir_all(&v2).unwrap();
        std::fs::write(v2.join("memory.max"), "max\n").unwrap();
        std::fs::write(root.join("user.slice/memory.max"), "268435456\n").unwrap();
        let proc = d.join("cgroup");
        std::fs::write(
            &proc,
            "4:memory:/system.slice/mimeref-milter.service\n3:cpu:/x\n",
        )
        .unwrap();
        assert_eq!(
            cgroup_limit(&proc, &root),
            Some((
                512 << 20,
                root.join("memory/system.slice/memory.limit_in_bytes")
            ))
        );
        std::fs::write(&proc, "0::/user.slice/a\n").unwrap();
        assert_eq!(
            cgroup_limit(&proc, &root),
            Some((256 << 20, root.join("user.slice/memory.max")))
        );
        std::fs::write(&proc, "0::/elsewhere\n").unwrap();
        assert_eq!(cgroup_limit(&proc, &root), None, "no limit anywhere");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_issue_configuration_is_worth_the_formula() {
        let cfg = Config::parse(
            "max_connections = 40\n[limits]\nspill_threshold = 1048576\n\
             memory_budget = 67108864\nmax_message_size = 25165824\n",
            "t",
        )
        .unwrap();
        // 64 + 2 × 2 × 24 + 40 × 0.125 + 32 MiB.
        assert_eq!(cfg.limits().worst_case_memory(40, 2), 197 << 20);
        let text = over_limit(cfg.limits(), 40, 2, 197 << 20, 128 << 20, Path::new("/x"));
        assert!(
            text.contains("= 197 MiB") && text.contains("128 MiB (/x)"),
            "{text}"
        );
    }
}
