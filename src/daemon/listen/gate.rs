//! The [`Gate`] around the milter listener: closes at shutdown, turns away
//! connections past `max_connections`, rides out failed accepts.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use indymilter::Listener;

use super::accept::{accept_failed, Socket, ACCEPT_PAUSE};
use super::counted::{next_connection, Counted};
use super::PeerName;
use crate::daemon::health::Health;

/// Stops accepting as soon as shutdown begins (the listening socket is closed, so the
/// MTA gets "connection refused" and uses another milter or its default action), while
/// open connections finish their messages.
///
/// Also enforces `max_connections`: a connection over the limit is accepted and closed
/// at once, so that the MTA applies its default action straight away. Left unaccepted
/// (what indymilter's own limit does) it would wait in the kernel's backlog until the
/// MTA's connect timeout, 30 s with Postfix, holding up the SMTP session meanwhile.
///
/// A failed accept never ends the daemon (indymilter's loop would stop on the first
/// one): it is logged and counted, and after one that would recur at once (no file
/// descriptor left) accepting pauses for [`ACCEPT_PAUSE`] while the open connections
/// go on being served.
pub(in crate::daemon) struct Gate<L> {
    inner: Option<L>,
    state: Arc<GateState>,
    health: Arc<Health>,
    max_connections: usize,
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
}

#[derive(Default)]
pub(in crate::daemon) struct GateState {
    closed: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl GateState {
    pub(in crate::daemon) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let w = match self.waker.lock() {
            Ok(mut g) => g.take(),
            Err(p) => p.into_inner().take(),
        };
        if let Some(w) = w {
            w.wake();
        }
    }
}

impl<L> Gate<L> {
    /// A gate around `inner`, and the state that closes it.
    pub(in crate::daemon) fn new(
        inner: L,
        health: Arc<Health>,
        max_connections: usize,
    ) -> (Gate<L>, Arc<GateState>) {
        let state = Arc::new(GateState::default());
        let gate = Gate {
            inner: Some(inner),
            state: state.clone(),
            health,
            max_connections,
            pause: None,
        };
        (gate, state)
    }

    fn refuse(&mut self, open: usize, peer: impl FnOnce() -> String) {
        let id = next_connection();
        crate::milter::metrics::connection_refused();
        let max = self.max_connections;
        crate::milter::throttle::CONNECTIONS_REFUSED.hit(|| {
            format!(
                "among them connection {id} from {}: {open} open, max_connections = {max}",
                peer()
            )
        });
    }
}

impl<L: Listener> Listener for Gate<L>
where
    L::Io: PeerName,
{
    type Io = Counted<L::Io>;

    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Self::Io>> {
        if let Ok(mut g) = self.state.waker.lock() {
            *g = Some(cx.waker().clone());
        }
        if self.state.closed.load(Ordering::SeqCst) {
            self.inner = None;
        }
        if let Some(p) = self.pause.as_mut() {
            if p.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.pause = None;
        }
        // A flood of connections over the limit must not keep this task from others.
        for _ in 0..64 {
            let Some(l) = self.inner.as_mut() else {
                return Poll::Pending;
            };
            let io = match l.poll_accept(cx) {
                Poll::Ready(Ok(io)) => io,
                Poll::Ready(Err(e)) => {
                    let open = self.health.open_connections().load(Ordering::SeqCst);
                    if accept_failed(Socket::Milter, &e, open) {
                        let mut p = Box::pin(tokio::time::sleep(ACCEPT_PAUSE));
                        // Polled once so that it wakes this task when it ends.
                        if p.as_mut().poll(cx).is_pending() {
                            self.pause = Some(p);
                            return Poll::Pending;
                        }
                    }
                    continue;
                }
                Poll::Pending => return Poll::Pending,
            };
            let open = self.health.open_connections().load(Ordering::SeqCst);
            if open >= self.max_connections {
                let peer = io.peer_name();
                // Dropping it closes it: the MTA reads end of file (or a reset).
                drop(io);
                self.refuse(open, || peer);
                continue;
            }
            return Poll::Ready(Ok(Counted::new(io, self.health.clone())));
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
