//! The milter:
//!
//! - `callbacks`: translate each protocol stage; at end of message, log and count what
//!   the session returns
//! - `cuts`: log and count the time limits that pass and the transactions cut short
//! - `session`: one connection, built once: accumulate one message within the limits
//!   (`session/mod.rs`), analyse, plan and answer it at end of message
//!   (`session/eom.rs`), find the copy of the heading Stalwart puts in the body
//!   (`session/heading_copy.rs`)
//! - `in_flight`: the count of messages in flight, which shutdown waits on
//! - `outcome`: what end of message comes to (answered, over the memory budget, or an
//!   `EomError` with its cause)
//! - `eom_log`: the log lines of end of message
//! - `buffer`: the message's octets (in memory, spilled to a file, read back)
//! - `actions`: send the plan to the MTA, and the form header values travel in
//! - `metrics`: the Prometheus series; `throttle`: log lines of events that repeat,
//!   with exact counts
//!
//! The milter uses the engine, the policy (planner, intake) and the configuration
//! (the layers: `lib.rs`); nothing here knows the daemon's sockets or the command line.

pub(crate) mod actions;
pub(crate) mod buffer;
pub(crate) mod callbacks;
pub(crate) mod cuts;
pub(crate) mod eom_log;
pub(crate) mod in_flight;
pub mod metrics;
pub(crate) mod outcome;
pub(crate) mod session;
pub mod throttle;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use crate::config::Config;
use crate::engine;
use crate::policy::Direction;

/// State shared by all connections: the current configuration (swapped whole on reload;
/// a connection keeps the snapshot it started with) with its engine options, the count
/// of messages in flight, the memory held by messages whose spill failed, and whether
/// shutdown has begun.
#[derive(Debug)]
pub(crate) struct Shared {
    config: RwLock<(Arc<Config>, Arc<EngineOptions>)>,
    pub in_flight: Arc<in_flight::InFlightCount>,
    pub budget: Arc<buffer::Budget>,
    closing: AtomicBool,
}

/// The engine options of one configuration, per direction: built once per load, not
/// once per message (they hold the scheme lists and the rewrite rules).
#[derive(Debug)]
pub(crate) struct EngineOptions {
    inbound: engine::Options,
    outbound: engine::Options,
}

impl EngineOptions {
    pub fn new(cfg: &Config) -> EngineOptions {
        EngineOptions {
            inbound: cfg.engine_options(Direction::Inbound),
            outbound: cfg.engine_options(Direction::Outbound),
        }
    }

    pub fn get(&self, dir: Direction) -> &engine::Options {
        dir.pick(&self.inbound, &self.outbound)
    }
}

impl Shared {
    pub fn new(config: Config) -> Shared {
        let options = Arc::new(EngineOptions::new(&config));
        Shared {
            config: RwLock::new((Arc::new(config), options)),
            in_flight: Arc::default(),
            budget: Arc::default(),
            closing: AtomicBool::new(false),
        }
    }

    pub fn config(&self) -> Arc<Config> {
        self.snapshot().0
    }

    /// The current configuration and its engine options, from the same load.
    pub fn snapshot(&self) -> (Arc<Config>, Arc<EngineOptions>) {
        match self.config.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub fn replace_config(&self, config: Config) {
        let options = Arc::new(EngineOptions::new(&config));
        let new = (Arc::new(config), options);
        match self.config.write() {
            Ok(mut g) => *g = new,
            Err(poisoned) => *poisoned.into_inner() = new,
        }
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.get()
    }

    pub fn start_closing(&self) {
        self.closing.store(true, Ordering::SeqCst);
    }

    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }
}
