//! A tiny in-test milter (indymilter) that records what the MTA sends and
//! performs scripted end-of-message actions. It proves the MTA harness on
//! its own and pins down MTA quirks (header indices, leading spaces, how
//! folded values arrive) independently of the real daemon.
use indymilter::{Actions, Callbacks, Config, ContextActions, ProtoOpts, SetErrorReply, Status};
use std::ffi::CString;
use std::net::TcpListener as StdListener;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// What the probe does at end of message.
#[derive(Clone, Debug)]
pub enum Action {
    Add(String, String),
    Insert(i32, String, String),
    Change(String, i32, Option<String>),
    ReplaceBody(Vec<u8>),
    Quarantine(String),
    Reject(String, String, String),
    Tempfail,
}

/// What the probe saw of one message.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
    pub macros: Vec<(String, String)>,
}

#[derive(Default)]
struct State {
    actions: Vec<Action>,
    seen: Vec<Seen>,
    current: Seen,
}

pub struct Probe {
    pub port: u16,
    state: Arc<Mutex<State>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

fn lossy(c: &std::ffi::CStr) -> String {
    String::from_utf8_lossy(c.to_bytes()).into_owned()
}

fn record_macros(st: &Arc<Mutex<State>>, m: &indymilter::Macros) {
    let mut s = st.lock().unwrap();
    for (k, v) in m.to_hash_map() {
        let k = lossy(&k);
        if !s.current.macros.iter().any(|(n, _)| *n == k) {
            s.current.macros.push((k, lossy(&v)));
        }
    }
}

impl Probe {
    pub fn start(actions: Vec<Action>) -> Probe {
        Probe::start_with(actions, false)
    }

    /// `leading_space`: negotiate SMFIP_HDR_LEADSPC, under which the MTA
    /// sends values with all their leading white space and writes changed
    /// values right after the colon.
    pub fn start_with(actions: Vec<Action>, leading_space: bool) -> Probe {
        let std_listener = StdListener::bind("127.0.0.1:0").expect("bind probe");
        let port = std_listener.local_addr().expect("addr").port();
        std_listener.set_nonblocking(true).expect("nonblocking");
        let state = Arc::new(Mutex::new(State {
            actions,
            ..State::default()
        }));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let st = state.clone();
        let thread = thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener =
                    tokio::net::TcpListener::from_std(std_listener).expect("tokio listener");
                let (s1, s2, s3, s4, s5) =
                    (st.clone(), st.clone(), st.clone(), st.clone(), st.clone());
                let callbacks = Callbacks::<()>::new()
                    .on_negotiate(move |cx, _, _| {
                        if leading_space {
                            cx.requested_opts |= ProtoOpts::LEADING_SPACE;
                        }
                        Box::pin(async { Status::Continue })
                    })
                    .on_connect(move |cx, _, _| {
                        let st = s1.clone();
                        Box::pin(async move {
                            st.lock().unwrap().current = Seen::default();
                            record_macros(&st, &cx.macros);
                            Status::Continue
                        })
                    })
                    .on_mail(move |cx, _| {
                        let st = s5.clone();
                        Box::pin(async move {
                            record_macros(&st, &cx.macros);
                            Status::Continue
                        })
                    })
                    .on_header(move |_, name, value| {
                        let st = s2.clone();
                        Box::pin(async move {
                            st.lock()
                                .unwrap()
                                .current
                                .headers
                                .push((lossy(&name), value.to_bytes().to_vec()));
                            Status::Continue
                        })
                    })
                    .on_body(move |_, chunk| {
                        let st = s3.clone();
                        Box::pin(async move {
                            st.lock().unwrap().current.body.extend_from_slice(&chunk);
                            Status::Continue
                        })
                    })
                    .on_eom(move |cx| {
                        let st = s4.clone();
                        Box::pin(async move {
                            record_macros(&st, &cx.macros);
                            let actions = {
                                let mut s = st.lock().unwrap();
                                let seen = std::mem::take(&mut s.current);
                                s.seen.push(seen);
                                s.actions.clone()
                            };
                            let c = |s: &str| CString::new(s).expect("no NUL");
                            for a in actions {
                                let r = match a {
                                    Action::Add(n, v) => cx.actions.add_header(c(&n), c(&v)).await,
                                    Action::Insert(i, n, v) => {
                                        cx.actions.insert_header(i, c(&n), c(&v)).await
                                    }
                                    Action::Change(n, i, v) => {
                                        cx.actions.change_header(c(&n), i, v.map(|v| c(&v))).await
                                    }
                                    Action::ReplaceBody(b) => cx.actions.replace_body(&b).await,
                                    Action::Quarantine(r) => cx.actions.quarantine(c(&r)).await,
                                    Action::Reject(code, x, text) => {
                                        let _ = cx.reply.set_error_reply(&code, Some(&x), [text]);
                                        return Status::Reject;
                                    }
                                    Action::Tempfail => return Status::Tempfail,
                                };
                                if r.is_err() {
                                    return Status::Tempfail;
                                }
                            }
                            Status::Continue
                        })
                    });
                let config = Config {
                    actions: Actions::all(),
                    ..Config::default()
                };
                let _ = indymilter::run(listener, callbacks, config, async {
                    let _ = rx.await;
                })
                .await;
            });
        });
        assert!(
            super::wait_port(port, Duration::from_secs(10)),
            "probe not listening"
        );
        Probe {
            port,
            state,
            stop: Some(tx),
            thread: Some(thread),
        }
    }

    /// The `smtpd_milters` value for Postfix.
    pub fn postfix_spec(&self) -> String {
        format!("inet:127.0.0.1:{}", self.port)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Probe {
    /// The `INPUT_MAIL_FILTER` S= value for Sendmail.
    pub fn sendmail_spec(&self) -> String {
        super::libmilter_spec(self.port)
    }
}

// The leading-space scenario both MTAs are held to (tests/mta/QUIRKS.md).

pub const LEADSPC_MSG: &[u8] = b"From: alice@sender.example
Message-ID: <@ID@>
X-Spaces:   three
X-Tab:\ttab
X-NoSpace:tight
X-Fold: a
  b

body
";

/// With SMFIP_HDR_LEADSPC (what mimeref-milter negotiates) values travel
/// with all their leading white space, both ways.
pub fn leading_space_mode(send: impl FnOnce(&[u8]) -> Vec<u8>) {
    let out = send(LEADSPC_MSG);
    let text = String::from_utf8_lossy(&out).into_owned();
    assert!(text.contains("X-Spaces: one\n"), "{text}");
    assert!(text.contains("X-Tab:\tnew\n"), "{text}");
    assert!(text.contains("X-NoSpace:still-tight\n"), "{text}");
    assert!(text.contains("X-Fold: c\n\td\n"), "{text}");
    assert!(text.contains("X-Bare:bare\n"), "{text}");
    assert!(text.contains("X-Added: added\n"), "{text}");
}

pub fn leading_space_probe() -> Probe {
    Probe::start_with(
        vec![
            Action::Change("X-Spaces".into(), 1, Some(" one".into())),
            Action::Change("X-Tab".into(), 1, Some("\tnew".into())),
            Action::Change("X-NoSpace".into(), 1, Some("still-tight".into())),
            Action::Change("X-Fold".into(), 1, Some(" c\n\td".into())),
            Action::Add("X-Bare".into(), "bare".into()),
            Action::Add("X-Added".into(), " added".into()),
        ],
        true,
    )
}

pub fn leading_space_seen(probe: &Probe) {
    let seen = probe.seen();
    assert_eq!(seen.len(), 1);
    let got: Vec<(String, String)> = seen[0]
        .headers
        .iter()
        .filter(|(n, _)| n.starts_with("X-"))
        .map(|(n, v)| (n.clone(), String::from_utf8_lossy(v).into_owned()))
        .collect();
    let want: Vec<(String, String)> = [
        ("X-Spaces", "   three"),
        ("X-Tab", "\ttab"),
        ("X-NoSpace", "tight"),
        ("X-Fold", " a\n  b"),
    ]
    .iter()
    .map(|(n, v)| (n.to_string(), v.to_string()))
    .collect();
    assert_eq!(got, want);
}
