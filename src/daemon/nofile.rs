//! The process's file descriptor limit (RLIMIT_NOFILE). Every milter connection, every
//! message spilled to disk and every HTTP connection to the metrics endpoint takes one
//! descriptor; outside systemd the soft limit is usually 1024, well below what the
//! default `max_connections` may need. So `serve` raises the soft limit to the hard one
//! at start, and says when even that is too small for the configuration.

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
use tracing::{info, warn};

use crate::config::Listen;

/// Descriptors besides connections and spill files: the standard streams, the
/// listening sockets, the runtime's event queue and wakers, the signal pipe, the files
/// read at a reload. An idle daemon with the metrics endpoint holds 14 (Linux); the
/// rest is headroom.
pub const RESERVE: u64 = 32;

/// The limit in force, after [`raise`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub soft: u64,
    /// None: unlimited.
    pub hard: Option<u64>,
}

/// The current limit.
pub fn current() -> Limit {
    let l = getrlimit(Resource::Nofile);
    Limit {
        soft: l.current.unwrap_or(u64::MAX),
        hard: l.maximum,
    }
}

/// Raises the soft limit to the hard limit (an unlimited hard limit: to the kernel's
/// `fs.nr_open`). Returns the limit before and after, or why it could not.
pub fn raise() -> Result<(Limit, Limit), String> {
    let before = current();
    let target = match before.hard {
        Some(h) => h,
        None => std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1 << 20),
    };
    if before.soft >= target {
        return Ok((before, before));
    }
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(target),
            maximum: before.hard,
        },
    )
    .map_err(|e| {
        format!(
            "cannot raise the file descriptor limit from {}: {e}",
            before.soft
        )
    })?;
    Ok((before, current()))
}

/// The most descriptors the configuration may need at once.
pub fn needed(listen: &Listen) -> u64 {
    let conns = listen.max_connections as u64;
    2 * conns + http(listen) + RESERVE
}

fn http(listen: &Listen) -> u64 {
    listen
        .metrics_listen
        .map_or(0, |_| listen.metrics_max_connections as u64)
}

/// What to tell the admin when `limit` descriptors cannot hold what the configuration
/// may need; None when they can.
pub fn advice(listen: &Listen, limit: u64) -> Option<String> {
    let need = needed(listen);
    if need <= limit {
        return None;
    }
    let max = listen.max_connections;
    let http = http(listen);
    let fits = limit.saturating_sub(http + RESERVE) / 2;
    let lower = if fits == 0 {
        String::new()
    } else {
        format!(", or lower max_connections to {fits}")
    };
    let http_part = if http > 0 {
        format!(", {http} for metrics_max_connections")
    } else {
        String::new()
    };
    Some(format!(
        "the file descriptor limit is {limit}, but max_connections = {max} may need {need} \
         (one per connection and one more per message spilled to disk: {}{http_part}, \
         {RESERVE} for the listeners, logging and the runtime); raise LimitNOFILE= in the \
         systemd unit (ulimit -n outside systemd) to at least {need}{lower}. At the limit \
         new MTA connections wait until descriptors are free, and spill files cannot be \
         created",
        2 * max as u64
    ))
}

/// At start: raise the soft limit, then warn if the configuration does not fit.
pub fn at_start(listen: &Listen) {
    let limit = match raise() {
        Ok((before, after)) => {
            if after.soft > before.soft {
                info!(
                    "file descriptor limit raised from {} to {}",
                    before.soft, after.soft
                );
            }
            after.soft
        }
        Err(e) => {
            warn!("{e}");
            current().soft
        }
    };
    if let Some(text) = advice(listen, limit) {
        warn!("{text}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn advice_names_the_numbers_and_what_to_change() {
        let cfg = Config::parse("max_connections = 100\n", "t").unwrap();
        assert_eq!(needed(cfg.listen()), 200 + RESERVE);
        assert_eq!(advice(cfg.listen(), 200 + RESERVE), None);
        let text = advice(cfg.listen(), 64).unwrap();
        assert!(text.contains("limit is 64"), "{text}");
        assert!(
            text.contains(&format!("may need {}", 200 + RESERVE)),
            "{text}"
        );
        assert!(text.contains("LimitNOFILE="), "{text}");
        assert!(text.contains("lower max_connections to 16"), "{text}");

        let cfg = Config::parse(
            "max_connections = 100\nmetrics_listen = \"127.0.0.1:9357\"\n",
            "t",
        )
        .unwrap();
        assert_eq!(needed(cfg.listen()), 200 + 32 + RESERVE);
        let text = advice(cfg.listen(), 256).unwrap();
        assert!(text.contains("32 for metrics_max_connections"), "{text}");
        assert!(text.contains("lower max_connections to 96"), "{text}");
        // Nothing fits: no limit to lower to.
        assert!(!advice(cfg.listen(), 40).unwrap().contains("lower"));
    }
}
