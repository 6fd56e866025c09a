//! The listening socket and what wraps it, one job a file:
//!
//! - `bind`: binding the milter socket, probing and removing a stale unix socket file;
//!   `holder`: which process holds a socket that is taken, for the error line.
//! - `tcp`: TCP connections that acknowledge and send at once ([`NoDelay`]);
//!   `peer`: how log lines name the other end ([`PeerName`]).
//! - `gate`: the [`Gate`] that closes at shutdown, refuses connections past
//!   `max_connections` and rides out failed accepts; `accept`: what a failed accept
//!   logs, counts and pauses (the HTTP endpoint's too).
//! - `counted`: [`Counted`] connections, numbered and counted as open, which also turn
//!   away peers that do not speak milter.

mod accept;
mod bind;
mod counted;
mod gate;
mod holder;
mod peer;
mod tcp;

pub(super) use accept::{accept_failed, Socket, ACCEPT_PAUSE};
pub use bind::bind_milter;
pub use counted::Counted;
pub(super) use gate::Gate;
pub use peer::PeerName;
pub use tcp::NoDelay;

/// Either kind of listening socket.
pub type AnyListener = indymilter::EitherListener<NoDelay, tokio::net::UnixListener>;
