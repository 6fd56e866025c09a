// mimeref-milter patch (time limits): why a session ended other than by QUIT.

use std::{
    error::Error,
    fmt::{self, Display, Formatter},
    io::{self, ErrorKind},
};

/// Why a session ended before the MTA said QUIT: what the abort callback (when a
/// mail transaction was open) and the close callback can read with
/// [`Context::cut`][crate::Context::cut].
#[derive(Clone, Copy, Debug, Eq, Hash, PartialEq)]
#[non_exhaustive]
pub enum Cut {
    /// No complete command came within `connection_timeout`.
    ReadTimeout,
    /// The mail transaction went on longer than `transaction_timeout`.
    TransactionTimeout,
    /// The MTA did not read the answer to a command within `reply_timeout`
    /// (`connection_timeout` per packet without it).
    ReplyTimeout,
    /// The MTA closed or reset the connection.
    Closed,
    /// Another I/O error.
    Io,
    /// The MTA sent what the protocol does not allow (an unknown command, a packet
    /// that does not parse, a negotiation the milter refuses).
    Protocol,
    /// The milter is shutting down.
    Shutdown,
}

impl Cut {
    /// One of the three time limits.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::ReadTimeout | Self::TransactionTimeout | Self::ReplyTimeout)
    }

    pub(crate) fn of_limit(e: &io::Error) -> Option<Self> {
        e.get_ref()
            .and_then(|e| e.downcast_ref())
            .map(|LimitPassed(cut)| *cut)
    }

    pub(crate) fn from_io(e: &io::Error) -> Self {
        if let Some(cut) = Self::of_limit(e) {
            return cut;
        }
        match e.kind() {
            ErrorKind::UnexpectedEof
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::BrokenPipe => Self::Closed,
            // A packet longer than the protocol allows.
            ErrorKind::InvalidData => Self::Protocol,
            _ => Self::Io,
        }
    }
}

/// The I/O error of a passed time limit: the session tells the limits apart by it.
#[derive(Debug)]
pub(crate) struct LimitPassed(pub Cut);

impl LimitPassed {
    pub(crate) fn error(cut: Cut) -> io::Error {
        io::Error::new(ErrorKind::TimedOut, LimitPassed(cut))
    }
}

impl Display for LimitPassed {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.0 {
            Cut::ReadTimeout => write!(f, "no complete command within the connection timeout"),
            Cut::TransactionTimeout => write!(f, "transaction time limit passed"),
            Cut::ReplyTimeout => write!(f, "reply not read within the reply timeout"),
            other => write!(f, "{other:?}"),
        }
    }
}

impl Error for LimitPassed {}
