//! The count of messages between MAIL and end of message, which shutdown waits on.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The number of messages between MAIL and end of message, so that shutdown can wait
/// for the last one to end (awaited, not polled). A counter and a wake-up when it
/// reaches zero: a watch channel cost 900 instructions per message in notifications
/// nobody waited for.
#[derive(Debug, Default)]
pub struct InFlightCount {
    n: AtomicUsize,
    zero: tokio::sync::Notify,
}

impl InFlightCount {
    pub fn get(&self) -> usize {
        self.n.load(Ordering::SeqCst)
    }

    /// Returns once no message is in flight.
    pub async fn drained(&self) {
        loop {
            let notified = self.zero.notified();
            tokio::pin!(notified);
            // Registered before the count is read: a drop to zero in between still
            // wakes this waiter.
            notified.as_mut().enable();
            if self.get() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// One message in flight, counted until dropped.
#[derive(Debug)]
pub struct InFlight(Arc<InFlightCount>);

impl InFlight {
    pub fn enter(counter: &Arc<InFlightCount>) -> InFlight {
        counter.n.fetch_add(1, Ordering::SeqCst);
        InFlight(counter.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.n.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.zero.notify_waiters();
        }
    }
}
