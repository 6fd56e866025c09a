//! [`PeerName`]: how log lines name the other end of a milter connection.

/// The other end of a connection as log lines name it: "127.0.0.1:41234" (or
/// "[::1]:41234"), or "unix socket".
pub trait PeerName {
    fn peer_name(&self) -> String;
}

impl PeerName for tokio::net::TcpStream {
    fn peer_name(&self) -> String {
        // Fails only when the peer has already gone (ENOTCONN).
        self.peer_addr()
            .map_or_else(|_| "unknown peer".to_string(), |a| a.to_string())
    }
}

impl PeerName for tokio::net::UnixStream {
    fn peer_name(&self) -> String {
        "unix socket".to_string()
    }
}

impl<T: PeerName, U: PeerName> PeerName for indymilter::EitherStream<T, U> {
    fn peer_name(&self) -> String {
        match self {
            indymilter::EitherStream::Tcp(s) => s.peer_name(),
            indymilter::EitherStream::Unix(s) => s.peer_name(),
        }
    }
}
