//! The milter: `callbacks` (translate each protocol stage), `session` (accumulate one
//! message within the limits), `actions` (decide and send everything at end of message),
//! `metrics`.

pub mod actions;
pub mod callbacks;
pub mod metrics;
pub mod session;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use crate::config::Config;

/// State shared by all connections: the current configuration (swapped whole on reload;
/// a connection keeps the snapshot it started with), the count of messages in flight,
/// and whether shutdown has begun.
#[derive(Debug)]
pub struct Shared {
    config: RwLock<Arc<Config>>,
    pub in_flight: Arc<AtomicUsize>,
    closing: AtomicBool,
}

impl Shared {
    pub fn new(config: Config) -> Shared {
        Shared {
            config: RwLock::new(Arc::new(config)),
            in_flight: Arc::new(AtomicUsize::new(0)),
            closing: AtomicBool::new(false),
        }
    }

    pub fn config(&self) -> Arc<Config> {
        match self.config.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub fn replace_config(&self, config: Config) {
        let new = Arc::new(config);
        match self.config.write() {
            Ok(mut g) => *g = new,
            Err(poisoned) => *poisoned.into_inner() = new,
        }
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    pub fn start_closing(&self) {
        self.closing.store(true, Ordering::SeqCst);
    }

    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }
}
