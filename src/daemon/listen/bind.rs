//! Binding the milter socket: a stale unix socket file is probed and removed, one a
//! running daemon answers on stops the start, naming that process.

use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::PathBuf;

use super::holder;
use super::tcp::NoDelay;
use super::AnyListener;
use crate::config::{Config, SocketSpec};
use crate::daemon::error::{BindError, DaemonError, Holder};
use crate::daemon::socket_file::OwnSocket;

/// Binds the listening socket. For unix: sockets, a socket file already at the path is
/// removed only when no process answers on it (a stale one, left by a process that
/// died); one that answers belongs to a running daemon and stops this start with
/// [`DaemonError::SocketInUse`], naming that process. `socket_mode` and
/// `socket_group` are applied; the [`OwnSocket`] returned removes the file when
/// dropped, if it is still this daemon's.
pub async fn bind_milter(
    spec: &SocketSpec,
    cfg: &Config,
) -> Result<(AnyListener, Option<OwnSocket>), DaemonError> {
    match spec {
        SocketSpec::Inet { host, port } => {
            match tokio::net::TcpListener::bind((host.as_str(), *port)).await {
                Ok(l) => Ok((AnyListener::Tcp(NoDelay(l)), None)),
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => Err(DaemonError::SocketInUse {
                    spec: spec.clone(),
                    holder: Holder::Listening(holder::of_tcp_port(*port)),
                }),
                Err(source) => Err(DaemonError::Bind(BindError::Listen {
                    spec: spec.clone(),
                    source,
                })),
            }
        }
        SocketSpec::Unix(path) => {
            let path_err = |f: fn(PathBuf, io::Error) -> BindError| {
                move |source| DaemonError::Bind(f(path.clone(), source))
            };
            if let Ok(m) = std::fs::symlink_metadata(path) {
                if !m.file_type().is_socket() {
                    return Err(DaemonError::Bind(BindError::NotASocket {
                        path: path.clone(),
                    }));
                }
                let holder = match probe(path) {
                    Probe::Stale => {
                        std::fs::remove_file(path).map_err(path_err(|path, source| {
                            BindError::RemoveStale { path, source }
                        }))?;
                        None
                    }
                    Probe::Served(holder) => Some(Holder::Serving(holder)),
                    Probe::Unknown(e) => Some(Holder::Unknown(e)),
                };
                if let Some(holder) = holder {
                    return Err(DaemonError::SocketInUse {
                        spec: spec.clone(),
                        holder,
                    });
                }
            }
            let l = tokio::net::UnixListener::bind(path).map_err(|source| {
                DaemonError::Bind(BindError::Listen {
                    spec: spec.clone(),
                    source,
                })
            })?;
            // Known from here on: removed on the way out whatever fails below.
            let own = OwnSocket::new(path).map_err(path_err(|path, source| {
                BindError::AfterBind { path, source }
            }))?;
            if let Some(mode) = cfg.listen().socket_mode {
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(
                    path_err(|path, source| BindError::SocketMode { path, source }),
                )?;
            }
            if let Some(group) = &cfg.listen().socket_group {
                let gid = crate::config::group_id(group).ok_or_else(|| {
                    DaemonError::Bind(BindError::NoSuchGroup {
                        group: group.clone(),
                    })
                })?;
                // In a set-group-ID directory of that group (as the Debian package
                // makes /var/spool/postfix/mimeref-milter) the socket has it already;
                // chown(2) is then not needed, and the unit's system call filter does
                // not allow it. Under the unit's PrivateUsers= the group shows as
                // nogroup: socket_has_group judges by the directory then.
                if !crate::config::socket_has_group(path, gid) {
                    std::os::unix::fs::chown(path, None, Some(gid)).map_err(path_err(
                        |path, source| BindError::SocketGroup { path, source },
                    ))?;
                }
            }
            Ok((AnyListener::Unix(l), Some(own)))
        }
    }
}

/// What a socket file found at start is.
enum Probe {
    /// Connection refused: no process listens on it any more.
    Stale,
    /// A process listens on it: the one named, if it could be found.
    Served(Option<String>),
    /// Connecting failed otherwise (no permission, for one).
    Unknown(io::Error),
}

/// Connects to the socket at `path` without waiting: a listener answers at once, or
/// with EAGAIN when its backlog is full (alive, only busy); a file nobody listens on
/// refuses. The connection is closed again without a word, which the daemon there
/// takes as a probe (neither logged nor counted as a stranger).
fn probe(path: &std::path::Path) -> Probe {
    use socket2::{Domain, SockAddr, Socket, Type};
    let attempt = || -> io::Result<Socket> {
        let s = Socket::new(Domain::UNIX, Type::STREAM, None)?;
        s.set_nonblocking(true)?;
        s.connect(&SockAddr::unix(path)?)?;
        Ok(s)
    };
    match attempt() {
        Ok(s) => Probe::Served(holder::of_connected(s).or_else(|| holder::of_unix_path(path))),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Probe::Stale,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            Probe::Served(holder::of_unix_path(path))
        }
        Err(e) => Probe::Unknown(e),
    }
}
