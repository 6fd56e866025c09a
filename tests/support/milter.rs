//! The daemon in-process, for tests/milter and the engine tests that go through it:
//! runs the real `daemon::run()` on 127.0.0.1:0 with a config file of its own and
//! talks to it with indymilter-test the way Postfix does (values with their leading
//! space, folds as "\n", body with CRLF).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use indymilter_test::{EomActions, MacroStage, ProtoOpts, Status, TestConnection};
use mimeref_milter::Config;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

pub use super::message::{fixture, milter_heading, to_crlf};

pub struct Milter {
    pub addr: SocketAddr,
    /// The HTTP endpoint (metrics, health), when started with [`Milter::start_http`].
    pub http: Option<SocketAddr>,
    pub config_path: PathBuf,
    reload: mpsc::Sender<mimeref_milter::Reload>,
    shutdown: Option<oneshot::Sender<()>>,
    handle: JoinHandle<Result<(), mimeref_milter::DaemonError>>,
}

impl Milter {
    /// `name` must be unique per test (it names the config file).
    pub async fn start(name: &str, config: &str) -> Milter {
        Milter::start_inner(name, config, false).await
    }

    /// With the HTTP endpoint of `metrics_listen` on a port of its own (the metrics
    /// recorder is process-wide, so `/metrics` shows what every test in this binary
    /// recorded).
    pub async fn start_http(name: &str, config: &str) -> Milter {
        Milter::start_inner(name, config, true).await
    }

    async fn start_inner(name: &str, config: &str, http: bool) -> Milter {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("milter-tests");
        std::fs::create_dir_all(&dir).unwrap();
        let config_path = dir.join(format!("{name}.toml"));
        std::fs::write(&config_path, config).unwrap();
        let cfg = Config::load(Some(&config_path)).unwrap_or_else(|e| panic!("{e}"));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (reload, reload_rx) = mpsc::channel(1);
        let (tx, rx) = oneshot::channel::<()>();
        let (http, http_addr) = if http {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let a = l.local_addr().unwrap();
            (Some(l), Some(a))
        } else {
            (None, None)
        };
        let sockets = mimeref_milter::Sockets {
            milter: listener,
            http,
            unix: None,
        };
        let handle = tokio::spawn(mimeref_milter::run(sockets, cfg, reload_rx, async {
            let _ = rx.await;
        }));
        let http = http_addr;
        Milter {
            addr,
            http,
            config_path,
            reload,
            shutdown: Some(tx),
            handle,
        }
    }

    /// A connection that offers what Postfix and Sendmail offer (every protocol option,
    /// "no reply" stages included).
    pub async fn conn(&self) -> TestConnection {
        TestConnection::configure()
            .exact_leading_space(true)
            .open_tcp(self.addr)
            .await
            .unwrap()
    }

    /// A connection from an MTA that offers no "no reply" stage (libmilter protocol
    /// before version 6): every stage is answered.
    pub async fn conn_replying(&self) -> TestConnection {
        TestConnection::configure()
            .exact_leading_space(true)
            .available_opts(ProtoOpts::all() - NO_REPLY_ALL)
            .open_tcp(self.addr)
            .await
            .unwrap()
    }

    /// Rewrites the config file, asks for a reload (as SIGHUP does) and waits until it
    /// is over.
    pub async fn reload_with(&self, config: &str) {
        std::fs::write(&self.config_path, config).unwrap();
        let (req, done) = mimeref_milter::Reload::with_reply();
        self.reload.send(req).await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), done)
            .await
            .expect("the reload ends within 10 s")
            .expect("the daemon answers the reload");
    }

    /// Begins shutdown and returns the task, which ends once run() has returned.
    pub fn begin_shutdown(mut self) -> JoinHandle<Result<(), mimeref_milter::DaemonError>> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.handle
    }

    pub async fn stop(self) {
        let h = self.begin_shutdown();
        tokio::time::timeout(Duration::from_secs(10), h)
            .await
            .expect("run() did not return after shutdown")
            .unwrap()
            .unwrap();
    }
}

/// A connection to a daemon on 127.0.0.1:`port` (a spawned binary), negotiated as
/// Postfix does, within 10 s.
pub async fn open_local(port: u16) -> TestConnection {
    tokio::time::timeout(
        Duration::from_secs(10),
        TestConnection::configure()
            .exact_leading_space(true)
            .open_tcp(("127.0.0.1", port)),
    )
    .await
    .expect("negotiation answered within 10 s")
    .expect("negotiation")
}

/// `GET path` on the daemon's HTTP endpoint: the status code and the body.
pub async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf))
        .await
        .expect("HTTP response within 10 s")
        .unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_string());
    (code, body)
}

/// Polls `/readyz` until it answers `code` (10 s at most): the status and the body.
pub async fn readyz_turns(http: SocketAddr, code: u16) -> (u16, String) {
    super::wait_until(
        &format!("/readyz to answer {code}"),
        Duration::from_secs(10),
        Duration::from_millis(20),
        || async {
            let r = http_get(http, "/readyz").await;
            if r.0 == code {
                Ok(r)
            } else {
                Err(format!("{r:?}"))
            }
        },
    )
    .await
}

/// A message split the way an MTA hands it to a milter.
#[derive(Debug, Clone)]
pub struct Eml {
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    pub body: Vec<u8>,
}

/// The message as Postfix hands it over: the heading field by field (see
/// [`milter_heading`]), the body with CRLF. Panics on a heading line that is no field.
pub fn eml(raw: &[u8]) -> Eml {
    let h = milter_heading(raw);
    assert!(
        h.stray.is_empty(),
        "heading lines that are no field: {:?}",
        h.stray
    );
    Eml {
        headers: h.fields,
        body: to_crlf(&raw[h.body_at..]),
    }
}

/// The envelope of one message.
#[derive(Debug, Clone, Default)]
pub struct Envelope {
    pub queue_id: Option<&'static str>,
    pub auth: Option<&'static str>,
}

/// Every "no reply" option an MTA may offer.
pub const NO_REPLY_ALL: ProtoOpts = ProtoOpts::NOREPLY_CONNECT
    .union(ProtoOpts::NOREPLY_HELO)
    .union(ProtoOpts::NOREPLY_MAIL)
    .union(ProtoOpts::NOREPLY_RCPT)
    .union(ProtoOpts::NOREPLY_DATA)
    .union(ProtoOpts::NOREPLY_HEADER)
    .union(ProtoOpts::NOREPLY_EOH)
    .union(ProtoOpts::NOREPLY_BODY)
    .union(ProtoOpts::NOREPLY_UNKNOWN);

/// What a stage that only accumulates must answer: nothing where "no reply" was
/// negotiated for it (indymilter-test then reports `Noreply`), CONTINUE otherwise.
pub fn accumulating(conn: &TestConnection, stage: ProtoOpts) -> Status {
    if conn.negotiated_opts().contains(stage) {
        Status::Noreply
    } else {
        Status::Continue
    }
}

pub async fn connect(conn: &mut TestConnection, client: &str, daemon_name: Option<&str>) {
    if let Some(d) = daemon_name {
        conn.macros(MacroStage::Connect, [("{daemon_name}", d)])
            .await
            .unwrap();
    }
    let ip: IpAddr = client.parse().unwrap();
    let st = conn.connect("client.example", (ip, 50000)).await.unwrap();
    assert_eq!(st, accumulating(conn, ProtoOpts::NOREPLY_CONNECT));
}

/// CONNECT from `client`, then one message from the fixture `rel` (no envelope
/// macros), which must be accepted. The connection stays open.
pub async fn accept_one(conn: &mut TestConnection, client: &str, rel: &str) {
    connect(conn, client, None).await;
    let (_, st) = send(conn, &Envelope::default(), &eml(&fixture(rel))).await;
    assert_eq!(st, Status::Accept);
}

/// MAIL through end of message; returns what end of message answered.
pub async fn send(conn: &mut TestConnection, env: &Envelope, m: &Eml) -> (EomActions, Status) {
    if let Some(a) = env.auth {
        conn.macros(
            MacroStage::Mail,
            [("{auth_authen}", a), ("{auth_type}", "PLAIN")],
        )
        .await
        .unwrap();
    }
    assert_eq!(
        conn.mail(["<alice@example.org>"]).await.unwrap(),
        Status::Continue
    );
    send_data(conn, env, m).await
}

pub async fn send_data(conn: &mut TestConnection, env: &Envelope, m: &Eml) -> (EomActions, Status) {
    send_headers(conn, m).await;
    let want = accumulating(conn, ProtoOpts::NOREPLY_BODY);
    for chunk in m.body.chunks(65535) {
        assert_eq!(conn.body(chunk.to_vec()).await.unwrap(), want);
    }
    if let Some(q) = env.queue_id {
        conn.macros(MacroStage::Eom, [("i", q)]).await.unwrap();
    }
    conn.eom().await.unwrap()
}

pub async fn send_headers(conn: &mut TestConnection, m: &Eml) {
    for (n, v) in &m.headers {
        let n = std::ffi::CString::new(n.clone()).unwrap();
        let v = std::ffi::CString::new(v.clone()).unwrap();
        let want = accumulating(conn, ProtoOpts::NOREPLY_HEADER);
        assert_eq!(conn.header(n, v).await.unwrap(), want);
    }
    let want = accumulating(conn, ProtoOpts::NOREPLY_EOH);
    assert_eq!(conn.eoh().await.unwrap(), want);
}

/// The message as the daemon reassembles it from the milter stages (fields with their
/// values as sent, CRLF, then the body), and the length of its heading.
pub fn as_received(m: &Eml) -> (Vec<u8>, usize) {
    let mut wire = Vec::new();
    for (n, v) in &m.headers {
        wire.extend_from_slice(n);
        wire.push(b':');
        wire.extend_from_slice(v);
        wire.extend_from_slice(b"\r\n");
    }
    wire.extend_from_slice(b"\r\n");
    let header_len = wire.len();
    wire.extend_from_slice(&m.body);
    (wire, header_len)
}

/// A remote client (192.0.2.10, so inbound unless the config says otherwise).
pub const REMOTE: &str = "192.0.2.10";

/// One message from a fixture through a fresh daemon on one connection: the
/// end-of-message actions and the final status.
pub async fn one_message(
    name: &str,
    config: &str,
    fixture_name: &str,
    queue_id: &'static str,
) -> (EomActions, Status) {
    let m = Milter::start(name, config).await;
    let mut c = m.conn().await;
    connect(&mut c, REMOTE, None).await;
    let msg = eml(&fixture(fixture_name));
    let env = Envelope {
        queue_id: Some(queue_id),
        auth: None,
    };
    let r = send(&mut c, &env, &msg).await;
    c.close().await.unwrap();
    m.stop().await;
    r
}

/// The replaced body, concatenated, if the milter replaced it.
pub fn replaced_body(a: &EomActions) -> Option<Vec<u8>> {
    let mut out: Option<Vec<u8>> = None;
    for act in &a.actions {
        if let indymilter_test::EomAction::ReplaceBody { chunk } = act {
            out.get_or_insert_with(Vec::new).extend_from_slice(chunk);
        }
    }
    out
}

/// (name, index, value) of every change_header (value None: deletion).
pub fn header_changes(a: &EomActions) -> Vec<(String, i32, Option<Vec<u8>>)> {
    use indymilter_test::EomAction;
    a.actions
        .iter()
        .filter_map(|act| match act {
            EomAction::ChangeHeader { name, index, value } => Some((
                name.to_string_lossy().into_owned(),
                *index,
                Some(value.as_bytes().to_vec()),
            )),
            EomAction::DeleteHeader { name, index } => {
                Some((name.to_string_lossy().into_owned(), *index, None))
            }
            _ => None,
        })
        .collect()
}

/// The value of the added report header, if any, unfolded (the daemon folds it at 78
/// octets: before a space, or after a comma with an added SP).
pub fn report(a: &EomActions, name: &str) -> Option<String> {
    a.actions.iter().find_map(|act| match act {
        indymilter_test::EomAction::AddHeader { name: n, value }
            if n.to_bytes() == name.as_bytes() =>
        {
            let v = value.to_string_lossy();
            assert!(
                v.split('\n').all(|l| l.len() <= 78),
                "report header line over 78 octets: {v:?}"
            );
            Some(v.replace(",\n ", ",").replace('\n', ""))
        }
        _ => None,
    })
}
