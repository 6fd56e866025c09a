//! The container mail stack recipes (packaging/postfix/recipes/, shown in docs/MTA.md,
//! "Container mail stacks") on the real Postfix of the suite. The stacks' images are
//! not pulled: each test writes the milter lines the stack's own files give its
//! main.cf, applies the recipe file the way the stack applies its override (appended,
//! `postconf -n`, or `postconf -e` per line through a shell), points the container
//! host names at test daemons on loopback, and checks that
//! (a) the signer is handed the fixed message: docker-mailserver's OpenDKIM, run
//!     itself, signs it and the signature verifies; for rspamd a recorder stands in
//!     (a signer signs what it is handed);
//! (b) while mimeref-milter is down, mail gets a 4xx, whatever the stack's
//!     `milter_default_action`;
//! (c) the other milters keep the stack's default action.
//!
//! Then the three Postfix settings people get wrong, each file as docs/MTA.md shows it:
//! the re-injection listener of a content filter without milters
//! (`reinjection-master.cf`), `smtpd_milter_maps` for a relay's network
//! (`smtpd_milter_maps.cf`, `smtpd_milter_map.cidr`), and `non_smtpd_milters` for mail
//! submitted with sendmail(1) (`packaging/postfix/main.cf.snippet`).
//! Needs root, postfix, opendkim and python3-dkim: `sudo scripts/install-test-deps`.
#[path = "../support/mod.rs"]
mod support;

use support::{message, mta};

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use mta::{Daemon, Key, OpenDkim, Postfix, PostfixConfig, TempDir, DOMAIN};
use serde_json::Value;
use support::message::{fixture, with_message_id};

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// How a stack puts its override into main.cf.
#[derive(Clone, Copy, Debug)]
enum Apply {
    /// mailcow (data/Dockerfiles/postfix/postfix.sh): `cat extra.cf >> main.cf`; the
    /// last setting of a parameter wins.
    Append,
    /// docker-mailserver (target/scripts/startup/setup.d/postfix.sh): appended, then
    /// main.cf rewritten from `postconf -n`.
    AppendPostconfN,
    /// Mailu (core/postfix/start.py): `os.system('postconf -e "{}"'.format(line))` for
    /// each line that is neither empty nor a comment.
    PostconfEachLine,
}

struct Stack {
    recipe: &'static str,
    /// main.cf's milter lines as the stack leaves them before the override, with
    /// the stack's own host names.
    base: &'static str,
    apply: Apply,
    /// The signer's milter address in `base`.
    signer: &'static str,
    /// Another milter after the signer (OpenDMARC), if the stack has one.
    other: Option<&'static str>,
    /// The stack's `milter_default_action`.
    default_action: &'static str,
    /// The signer is OpenDKIM, run itself; otherwise a recorder stands in for it.
    opendkim: bool,
}

/// target/postfix/main.cf, then setup.d/dmarc_dkim_spf.sh (`postconf 'dkim_milter =
/// inet:localhost:8891'`, `dmarc_milter = inet:localhost:8893`, each appended to the
/// lists by `_add_to_or_update_postfix_main`), ENABLE_OPENDKIM=1 and
/// ENABLE_OPENDMARC=1 being mailserver.env's defaults.
const DMS_OPENDKIM: Stack = Stack {
    recipe: "docker-mailserver-opendkim.cf",
    base: "milter_protocol = 6
milter_default_action = accept
smtpd_milters = $dkim_milter $dmarc_milter
non_smtpd_milters = $dkim_milter
dkim_milter = inet:localhost:8891
dmarc_milter = inet:localhost:8893
",
    apply: Apply::AppendPostconfN,
    signer: "inet:localhost:8891",
    other: Some("inet:localhost:8893"),
    default_action: "accept",
    opendkim: true,
};

/// target/postfix/main.cf, then setup.d/security/rspamd.sh (`rspamd_milter =
/// inet:localhost:11332`, appended to smtpd_milters only).
const DMS_RSPAMD: Stack = Stack {
    recipe: "docker-mailserver-rspamd.cf",
    base: "milter_protocol = 6
milter_default_action = accept
smtpd_milters = $rspamd_milter
non_smtpd_milters =
rspamd_milter = inet:localhost:11332
",
    apply: Apply::AppendPostconfN,
    signer: "inet:localhost:11332",
    other: None,
    default_action: "accept",
    opendkim: false,
};

/// data/conf/postfix/main.cf.
const MAILCOW: Stack = Stack {
    recipe: "mailcow.cf",
    base: "milter_default_action = tempfail
milter_protocol = 6
smtpd_milters = inet:rspamd:9900
non_smtpd_milters = inet:rspamd:9900
milter_mail_macros = i {mail_addr} {client_addr} {client_name} {auth_authen}
",
    apply: Apply::Append,
    signer: "inet:rspamd:9900",
    other: None,
    default_action: "tempfail",
    opendkim: false,
};

/// core/postfix/conf/main.cf with ANTISPAM_ADDRESS's default (core/base/Dockerfile).
const MAILU: Stack = Stack {
    recipe: "mailu.cf",
    base: "smtpd_milters = inet:antispam:11332
milter_protocol = 6
milter_mail_macros = i {mail_addr} {client_addr} {client_name} {auth_authen}
milter_default_action = tempfail
",
    apply: Apply::PostconfEachLine,
    signer: "inet:antispam:11332",
    other: None,
    default_action: "tempfail",
    opendkim: false,
};

/// Where every recipe names mimeref-milter.
const MIMEREF: &str = "inet:mimeref-milter:8897";

/// tests/miltertest/recorder.py on a loopback port, stopped on drop.
struct Recorder {
    dir: TempDir,
    port: u16,
    child: Option<Child>,
}

impl Recorder {
    fn start() -> Recorder {
        let dir = TempDir::new("recorder");
        let err = fs::File::create(dir.path().join("err")).unwrap();
        let mut child = Command::new("/usr/bin/python3")
            .arg(repo("tests/miltertest/recorder.py"))
            .arg(dir.path().join("seen.jsonl"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .expect("start recorder.py");
        // It prints the port it listens on once it does.
        let mut line = String::new();
        let _ = BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
        let port = line.trim().parse().unwrap_or_else(|_| {
            mta::stop_child(&mut child);
            panic!(
                "recorder.py did not start: {line:?}\n{}",
                fs::read_to_string(dir.path().join("err")).unwrap_or_default()
            )
        });
        Recorder {
            dir,
            port,
            child: Some(child),
        }
    }

    fn spec(&self) -> String {
        format!("inet:127.0.0.1:{}", self.port)
    }

    /// Every message it was handed: header fields and body.
    fn seen(&self) -> Vec<Value> {
        fs::read_to_string(self.dir.path().join("seen.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            mta::stop_child(&mut c);
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop();
    }
}

fn postconf(dir: &Path, args: &[&str]) -> String {
    let (ok, out, err) = mta::run_bounded(
        Command::new(Path::new(mta::SBIN).join("postconf"))
            .arg("-c")
            .arg(dir)
            .args(args),
        mta::WAIT,
    );
    assert!(ok, "postconf {args:?}: {err}{out}");
    out
}

/// main.cf's lines once the stack has applied the recipe, its host names still in.
fn applied(stack: &Stack) -> Vec<String> {
    let recipe = fs::read_to_string(repo("packaging/postfix/recipes").join(stack.recipe))
        .expect("read the recipe");
    let dir = TempDir::new("stack-maincf");
    let main_cf = dir.path().join("main.cf");
    fs::write(&main_cf, stack.base).unwrap();
    let text = match stack.apply {
        // Appended, the last setting of a parameter wins; `postconf -n` gives what
        // Postfix then reads, without the duplicates every Postfix process would warn
        // about at start (DMS runs it itself).
        Apply::Append | Apply::AppendPostconfN => {
            fs::write(&main_cf, format!("{}{recipe}", stack.base)).unwrap();
            // `-c` makes postconf list config_directory, which the stacks'
            // /etc/postfix does not: it would point the test's Postfix at this folder.
            postconf(dir.path(), &["-n"])
                .lines()
                .filter(|l| !l.starts_with("config_directory ="))
                .map(|l| format!("{l}\n"))
                .collect()
        }
        Apply::PostconfEachLine => {
            for line in recipe.trim().split('\n') {
                if line.starts_with('#') || line.is_empty() {
                    continue;
                }
                let (ok, out, err) = mta::run_bounded(
                    Command::new("sh").arg("-c").arg(format!(
                        "{}/postconf -c {} -e \"{line}\"",
                        mta::SBIN,
                        dir.path().display()
                    )),
                    mta::WAIT,
                );
                assert!(ok, "postconf -e {line:?}: {err}{out}");
            }
            fs::read_to_string(&main_cf).unwrap()
        }
    };
    text.lines().map(str::to_string).collect()
}

/// The fixed message's body as mimeref-milter makes it (LF line ends).
fn body_of(msg: &[u8]) -> Vec<u8> {
    let at = msg.windows(2).position(|w| w == b"\n\n").expect("a body") + 2;
    msg[at..].to_vec()
}

fn field<'a>(seen: &'a Value, name: &str) -> Vec<&'a str> {
    seen["headers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h[0].as_str().unwrap().eq_ignore_ascii_case(name))
        .map(|h| h[1].as_str().unwrap())
        .collect()
}

/// The Blink MHTML fixture, from an address at OpenDKIM's signing domain: its
/// stylesheet part gets a Content-ID through a body replacement.
fn input(id: &str) -> Vec<u8> {
    let m = String::from_utf8(fixture("html/chrome-cid-location.eml")).unwrap();
    let m = m.replacen(
        "From: <Saved by Blink>",
        &format!("From: alice@{DOMAIN}"),
        1,
    );
    with_message_id(m.as_bytes(), id)
}

fn run(stack: &Stack) {
    let tag = stack.recipe.trim_end_matches(".cf");

    // docker-mailserver's OpenDKIM is run itself; rspamd takes 15 to 30 s to start
    // here (tests/mta/rspamd_e2e.rs), so a recorder stands in for it.
    let key = stack.opendkim.then(Key::generate);
    let mut opendkim = key.as_ref().map(OpenDkim::start);
    let mut stand_in = (!stack.opendkim).then(Recorder::start);
    let signer_spec = match (&opendkim, &stand_in) {
        (Some(o), _) => o.postfix_spec(),
        (_, Some(r)) => r.spec(),
        _ => unreachable!(),
    };
    let other = stack.other.map(|_| Recorder::start());
    let mut d = Daemon::start("", &[]);
    let mut lines = applied(stack);
    for l in lines.iter_mut() {
        *l = l.replace(MIMEREF, &d.postfix_spec());
        *l = l.replace(stack.signer, &signer_spec);
        if let (Some(o), Some(r)) = (stack.other, &other) {
            *l = l.replace(o, &r.spec());
        }
    }
    // Every container host name was pointed at a test daemon.
    for host in ["mimeref-milter:", "localhost:", "rspamd:", "antispam:"] {
        assert!(
            !lines.iter().any(|l| l.contains(host)),
            "{host} left in {lines:#?}"
        );
    }
    let mut pfc = PostfixConfig::with_milter("");
    pfc.extra_main = lines;
    let pf = Postfix::start(&pfc);
    let effective = postconf(&pf.etc(), &["-x", "-h", "smtpd_milters"]);
    let action = postconf(&pf.etc(), &["-h", "milter_default_action"]);
    eprintln!("{tag}: smtpd_milters = {}", effective.trim());
    eprintln!("{tag}: milter_default_action = {}", action.trim());
    assert_eq!(action.trim(), stack.default_action);
    assert!(
        effective.starts_with(&format!(
            "{{ {}, default_action=tempfail }}",
            d.postfix_spec()
        )),
        "mimeref-milter is not first: {effective}"
    );

    // (a) The signer is handed the fixed message.
    let first = input(&format!("{tag}-1@{DOMAIN}"));
    let r = pf.send(&first);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());
    let got = pf.wait_delivered(&format!("{tag}-1@"));
    let text = String::from_utf8_lossy(&got.message).into_owned();
    let want = mta::as_milter("outbound", "", &first);
    assert_ne!(body_of(&want), body_of(&first), "the fixture needs a fix");
    assert_eq!(body_of(&got.message), body_of(&want), "{text}");
    if let Some(key) = &key {
        // OpenDKIM signed the fixed message: its signature verifies.
        assert_eq!(got.header("DKIM-Signature").len(), 1, "{text}");
        key.assert_holds(&got.message, &text);
        eprintln!("{tag}: (a) OpenDKIM's signature verifies over the fixed message");
    }
    // The recorder after mimeref-milter: the stand-in signer, or the milter after
    // OpenDKIM (OpenDMARC's place).
    let watcher = stand_in.as_ref().or(other.as_ref()).unwrap();
    let seen = watcher.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let report = field(&seen[0], "X-MIMERef");
    assert!(
        report.len() == 1 && report[0].trim_start().starts_with("fix;"),
        "the milter after mimeref-milter was not handed its report: {:?}",
        seen[0]["headers"]
    );
    let handed = message::to_lf(seen[0]["body"].as_str().unwrap().as_bytes());
    assert_eq!(
        handed,
        body_of(&want),
        "the milter after mimeref-milter was not handed the fixed body:\n{}",
        mta::show_diff(&body_of(&want), &handed)
    );
    if key.is_some() {
        assert_eq!(field(&seen[0], "DKIM-Signature").len(), 1, "{seen:?}");
    }
    eprintln!(
        "{tag}: (a) mimeref-milter up: {r}; the milter after it was handed X-MIMERef: {}",
        report[0].trim()
    );

    // (c) The signer down: the stack's own default action, untouched by the recipe.
    // Nothing is restarted: a port let go and bound again could meanwhile be handed to
    // another test's Postfix by free_port().
    drop(opendkim.take());
    if let Some(r) = stand_in.as_mut() {
        r.stop();
    }
    let second = input(&format!("{tag}-2@{DOMAIN}"));
    let r = pf.send(&second);
    eprintln!(
        "{tag}: (c) signer down, milter_default_action = {}: {r}",
        stack.default_action
    );
    match stack.default_action {
        "accept" => {
            assert_eq!(r.code, 250, "{r}");
            let got = pf.wait_delivered(&format!("{tag}-2@"));
            // Unsigned: the signer was down.
            assert!(got.header("DKIM-Signature").is_empty());
            assert_eq!(
                body_of(&got.message),
                body_of(&mta::as_milter("outbound", "", &second))
            );
        }
        _ => assert_eq!(r.class(), 4, "{r}"),
    }

    // (b) mimeref-milter down as well: a 4xx, even where the stack's default is
    // accept (the signer's own outage just let mail through there).
    d.stop();
    let r = pf.send(&input(&format!("{tag}-3@{DOMAIN}")));
    eprintln!("{tag}: (b) mimeref-milter down: {r}");
    assert_eq!(r.class(), 4, "mimeref-milter down must tempfail: {r}");
}

#[test]
fn docker_mailserver_opendkim_recipe() {
    if mta::require_postfix() && mta::require_opendkim() {
        run(&DMS_OPENDKIM);
    }
}

#[test]
fn docker_mailserver_rspamd_recipe() {
    if mta::require_postfix() {
        run(&DMS_RSPAMD);
    }
}

#[test]
fn mailcow_recipe() {
    if mta::require_postfix() {
        run(&MAILCOW);
    }
}

#[test]
fn mailu_recipe() {
    if mta::require_postfix() {
        run(&MAILU);
    }
}

/// Every recipe file, each tested above.
const RECIPES: [&str; 7] = [
    "docker-mailserver-opendkim.cf",
    "docker-mailserver-rspamd.cf",
    "mailcow.cf",
    "mailu.cf",
    "reinjection-master.cf",
    "smtpd_milter_maps.cf",
    "smtpd_milter_map.cidr",
];

/// docs/MTA.md shows each recipe file as it is, so the two cannot drift apart.
#[test]
fn mta_doc_shows_every_recipe_file_verbatim() {
    let doc = fs::read_to_string(repo("docs/MTA.md")).unwrap();
    let mut names = Vec::new();
    for e in fs::read_dir(repo("packaging/postfix/recipes")).unwrap() {
        let path = e.unwrap().path();
        let text = fs::read_to_string(&path).unwrap();
        assert!(
            doc.contains(&format!("```\n{text}```\n")),
            "docs/MTA.md does not show {} as it is",
            path.display()
        );
        names.push(path.file_name().unwrap().to_string_lossy().into_owned());
    }
    names.sort();
    let mut want = RECIPES.map(str::to_string).to_vec();
    want.sort();
    assert_eq!(names, want, "a recipe without a test in this file");
}

/// A recipe file as it is.
fn recipe(name: &str) -> String {
    fs::read_to_string(repo("packaging/postfix/recipes").join(name)).expect("read the recipe")
}

/// The daemon's message lines (one per message it saw), in order.
fn verdicts(d: &Daemon) -> Vec<String> {
    d.log()
        .lines()
        .filter(|l| l.contains(": direction="))
        .map(str::to_string)
        .collect()
}

/// One message from `addr`, which Postfix takes from XCLIENT as the client's address
/// (main.cf: `smtpd_authorized_xclient_hosts`), as though it had connected from there.
fn send_as(pf: &Postfix, addr: &str, message: &[u8]) -> mta::Reply {
    let mut c = pf.smtp();
    let r = c.cmd(&format!("XCLIENT ADDR={addr}"));
    assert_eq!(r.code, 220, "XCLIENT: {r}\n{}", pf.log());
    c.ehlo("client.example");
    let r = c.send("alice@sender.example", &["bob@receiver.example"], message);
    c.quit();
    r
}

/// main.cf lines that let the test client speak for `networks` (XCLIENT) and relay.
fn xclient_from(networks: &str) -> Vec<String> {
    vec![
        "smtpd_authorized_xclient_hosts = 127.0.0.0/8".into(),
        format!("mynetworks = 127.0.0.0/8 {networks}"),
    ]
}

/// A message from 192.0.2.25 (inbound) through a content filter's path, with `master`
/// as the re-injection listener: main.cf's content_filter hands it to a stand-in for
/// amavis, Postfix's own smtp client under another host name (Postfix refuses to
/// deliver to a server that greets with its own), which passes it unscanned to the
/// listener, as amavis passes on what it scanned. The daemon's message lines and the
/// message delivered.
fn through_reinjection(master: &str, tag: &str) -> (Vec<String>, mta::Delivered) {
    let d = Daemon::start("", &[]);
    let port = mta::free_port();
    let mut pfc = PostfixConfig::with_milter(&d.postfix_spec());
    pfc.extra_master = master
        .replace("127.0.0.1:10025", &format!("127.0.0.1:{port}"))
        .lines()
        .map(str::to_string)
        .chain([
            "amavis-stand-in unix - - n - - smtp".into(),
            "  -o myhostname=amavis.localdomain".into(),
        ])
        .collect();
    pfc.extra_main = xclient_from("192.0.2.0/24");
    pfc.extra_main.push(format!(
        "content_filter = amavis-stand-in:[127.0.0.1]:{port}"
    ));
    let pf = Postfix::start(&pfc);
    let (input, _) = mta::nested_fixture(&format!("{tag}@sender.example"));
    let r = send_as(&pf, "192.0.2.25", &input);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());
    let got = pf.wait_delivered(&format!("{tag}@"));
    // Postfix's log: two queue ids, the second one the re-injected copy's.
    eprintln!("{tag}: postfix log:\n{}", pf.log());
    (verdicts(&d), got)
}

/// Without `-o smtpd_milters=` the milter sees the mail twice: as it came in (inbound),
/// then the copy the content filter re-injects from 127.0.0.1, which the default
/// `trusted_networks` makes outbound, and the line says so.
#[test]
fn reinjection_listener_without_smtpd_milters_sees_the_mail_twice() {
    if !mta::require_postfix() {
        return;
    }
    let master = recipe("reinjection-master.cf");
    let without: String = master
        .lines()
        .filter(|l| l.trim() != "-o smtpd_milters=")
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(without, master);
    let (lines, got) = through_reinjection(&without, "reinject-twice");
    eprintln!("without -o smtpd_milters=:\n{}", lines.join("\n"));
    eprintln!("delivered:\n{}", String::from_utf8_lossy(&got.message));
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(
        lines[0].contains(": direction=inbound(default) verdict=fix "),
        "{lines:#?}"
    );
    assert!(
        lines[1].contains(": direction=outbound(trusted_networks:127.0.0.0/8) verdict="),
        "{lines:#?}"
    );
    // The second pass runs the outbound policy on what the first one fixed; the
    // first pass's report field stays (only inbound mail loses forged ones).
    assert!(lines[1].contains(" removed=0 "), "{lines:#?}");
    assert_eq!(got.header("X-MIMERef").len(), 1);
    assert!(got.header("X-MIMERef")[0].trim_start().starts_with("fix;"));
}

/// With the recipe as it is, and with `receive_override_options=no_milters` in its
/// place, the milter sees the mail once, as it came in.
#[test]
fn reinjection_listener_recipe_lets_the_milter_see_the_mail_once() {
    if !mta::require_postfix() {
        return;
    }
    let master = recipe("reinjection-master.cf");
    let no_milters = master.replace(
        "  -o smtpd_milters=\n",
        "  -o receive_override_options=no_milters\n",
    );
    assert_ne!(no_milters, master);
    for (tag, master) in [
        ("reinject-once", master),
        ("reinject-no-milters", no_milters),
    ] {
        let (lines, got) = through_reinjection(&master, tag);
        eprintln!("{tag}:\n{}", lines.join("\n"));
        assert_eq!(lines.len(), 1, "{tag}: {lines:#?}");
        assert!(
            lines[0].contains(": direction=inbound(default) verdict=fix "),
            "{lines:#?}"
        );
        let (_, fixed) = mta::nested_fixture(&format!("{tag}@sender.example"));
        // Two Received: fields, one for each smtpd.
        let got = message::drop_fields(&got.message, "Received");
        assert_eq!(message::drop_fields(&got, "X-MIMERef"), fixed, "{tag}");
    }
}

/// `smtpd_milter_maps` with the relay's network mapped to DISABLE: its mail passes
/// without the milter seeing it, while mail from other clients is checked.
#[test]
fn smtpd_milter_maps_skips_the_milter_for_a_relay_network() {
    if !mta::require_postfix() {
        return;
    }
    let d = Daemon::start("", &[]);
    let maps = TempDir::new("milter-maps");
    fs::write(
        maps.path().join("smtpd_milter_map.cidr"),
        recipe("smtpd_milter_map.cidr"),
    )
    .unwrap();
    let mut pfc = PostfixConfig::with_milter(&d.postfix_spec());
    pfc.extra_main = recipe("smtpd_milter_maps.cf")
        .replace("/etc/postfix/", &format!("{}/", maps.path().display()))
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .chain(xclient_from("192.0.2.0/24 198.51.100.0/24"))
        .collect();
    let pf = Postfix::start(&pfc);
    let version = postconf(&pf.etc(), &["-h", "mail_version"]);
    let v: Vec<u32> = version
        .trim()
        .split('.')
        .map(|n| n.parse().unwrap())
        .collect();
    assert!(
        v >= vec![3, 2],
        "smtpd_milter_maps needs Postfix 3.2: {version}"
    );

    let (relayed, _) = mta::nested_fixture("relay-1@sender.example");
    let r = send_as(&pf, "192.0.2.25", &relayed);
    assert_eq!(r.code, 250, "{r}\n{}", pf.log());
    let (other, fixed) = mta::nested_fixture("other-1@sender.example");
    let r = send_as(&pf, "198.51.100.7", &other);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());
    let (local, _) = mta::nested_fixture("local-1@sender.example");
    let r = pf.send(&local);
    assert_eq!(r.code, 250, "{r}\n{}", d.log());

    // The relay's mail as it came; the other client's fixed.
    assert_eq!(pf.wait_delivered("relay-1@").without_trace(), relayed);
    assert_eq!(
        message::drop_fields(&pf.wait_delivered("other-1@").without_trace(), "X-MIMERef"),
        fixed
    );
    pf.wait_delivered("local-1@");
    let lines = verdicts(&d);
    eprintln!("{version}: {}", lines.join("\n"));
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(
        lines[0].contains(": direction=inbound(default) verdict=fix "),
        "{lines:#?}"
    );
    assert!(
        lines[1].contains(": direction=outbound(trusted_networks:127.0.0.0/8) verdict="),
        "{lines:#?}"
    );
}

/// main.cf.snippet's `non_smtpd_milters = $smtpd_milters`: mail submitted with
/// Postfix's sendmail(1), as cron and scripts send it, goes through the milter too.
#[test]
fn non_smtpd_milters_checks_mail_submitted_with_sendmail() {
    if !mta::require_postfix() {
        return;
    }
    let d = Daemon::start("", &[]);
    let snippet = fs::read_to_string(repo("packaging/postfix/main.cf.snippet")).unwrap();
    let mut pfc = PostfixConfig::with_milter("");
    pfc.extra_main = snippet
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.replace("inet:127.0.0.1:8897", &d.postfix_spec()))
        // smtp-sink offers no SMTPUTF8, which Postfix asks of locally submitted mail
        // with 8-bit headers (smtputf8_autodetect_classes).
        .chain(["smtputf8_enable = no".to_string()])
        .collect();
    let pf = Postfix::start(&pfc);
    let (input, _) = mta::nested_fixture("local-submit-1@sender.example");
    let dir = TempDir::new("sendmail");
    let file = dir.path().join("m.eml");
    fs::write(&file, &input).unwrap();
    let (ok, out, err) = mta::run_bounded(
        Command::new("sh").arg("-c").arg(format!(
            "{}/sendmail -C {} -f alice@sender.example bob@receiver.example < {}",
            mta::SBIN,
            pf.etc().display(),
            file.display()
        )),
        mta::WAIT,
    );
    assert!(ok, "sendmail: {out}{err}\n{}", pf.log());
    let got = pf.wait_delivered("local-submit-1@");
    let lines = verdicts(&d);
    eprintln!("{}", lines.join("\n"));
    eprintln!("delivered:\n{}", String::from_utf8_lossy(&got.message));
    assert_eq!(lines.len(), 1, "{lines:#?}\n{}", pf.log());
    // Postfix hands the milter 127.0.0.1 as the client of mail that came through
    // pickup, so the default trusted_networks make it outbound.
    let (head, _) = lines[0]
        .split_once(": direction=outbound(trusted_networks:127.0.0.0/8) verdict=fix ")
        .unwrap_or_else(|| panic!("{lines:#?}"));
    let queue_id = head.rsplit(' ').next().unwrap();
    let picked_up = format!(" {queue_id}: uid=0 from=<alice@sender.example>");
    // Written by postlogd, which may not have caught up with the delivery.
    let logged = mta::wait_for(mta::WAIT, || {
        pf.log()
            .lines()
            .any(|l| l.contains("postfix/pickup[") && l.contains(&picked_up))
            .then_some(())
    });
    assert!(
        logged.is_some(),
        "{queue_id} is not the queue id pickup gave:\n{}",
        pf.log()
    );
    // Postfix adds Date: and its Received: (from userid 0) to local mail.
    let bare = |m: &[u8]| {
        ["Received", "Date", "X-MIMERef"]
            .iter()
            .fold(m.to_vec(), |m, f| message::drop_fields(&m, f))
    };
    let want = mta::as_milter("outbound", "", &input);
    assert_ne!(bare(&want), bare(&input), "the fixture needs a fix");
    assert_eq!(bare(&got.message), bare(&want));
    assert_eq!(got.header("X-MIMERef").len(), 1);
}
