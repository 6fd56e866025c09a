//! OpenDKIM signing on a loopback port, and DKIM signatures made and checked with
//! python3-dkim against a key generated for the test, without DNS: for
//! tests/mta/dkim_e2e.rs and tests/mta/recipes.rs.

use super::*;
use crate::support::message;

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

pub const DOMAIN: &str = "sender.example";
pub const SELECTOR: &str = "mimeref";

/// A signing key made by opendkim-genkey, and its public key record.
pub struct Key {
    /// Holds the key files.
    _dir: TempDir,
    private: PathBuf,
    /// The TXT record's text (`v=DKIM1; ... p=...`), the quoted strings of the
    /// generated zone snippet joined.
    record: String,
}

impl Key {
    pub fn generate() -> Key {
        let dir = TempDir::new("dkim-key");
        let (ok, out, err) = run_bounded(
            Command::new("/usr/sbin/opendkim-genkey")
                .arg("-D")
                .arg(dir.path())
                .arg("-d")
                .arg(DOMAIN)
                .arg("-s")
                .arg(SELECTOR),
            WAIT,
        );
        assert!(ok, "opendkim-genkey failed: {out}{err}");
        let private = dir.path().join(format!("{SELECTOR}.private"));
        let zone = fs::read_to_string(dir.path().join(format!("{SELECTOR}.txt"))).unwrap();
        let record: String = zone.split('"').skip(1).step_by(2).collect();
        assert!(record.contains("p=MII"), "no public key in {zone}");
        Key {
            _dir: dir,
            private,
            record,
        }
    }
}

/// Verifies the first DKIM-Signature of a message (file 1) with the key record in
/// file 2 as the only answer to the DNS query for `<selector>._domainkey.<domain>`.
const VERIFY_PY: &str = r#"
import sys, dkim
msg = open(sys.argv[1], 'rb').read()
rec = open(sys.argv[2], 'rb').read()
want = sys.argv[3].encode()
def dns(name, timeout=5):
    return rec if name.rstrip(b'.') == want else None
# The delivered copy has LF line ends; DKIM is defined over CRLF.
msg = msg.replace(b'\r\n', b'\n').replace(b'\n', b'\r\n')
sys.exit(0 if dkim.verify(msg, dnsfunc=dns) else 1)
"#;

/// Prints the DKIM-Signature field (CRLF ends) for the message on stdin:
/// relaxed/simple, signing the fields named in argv[4] (colon-separated).
const SIGN_PY: &str = r#"
import sys, dkim
msg = sys.stdin.buffer.read().replace(b'\n', b'\r\n')
key = open(sys.argv[1], 'rb').read()
heads = [h.encode() for h in sys.argv[4].split(':')]
sig = dkim.sign(msg, sys.argv[2].encode(), sys.argv[3].encode(), key,
                canonicalize=(b'relaxed', b'simple'), include_headers=heads)
sys.stdout.buffer.write(sig)
"#;

impl Key {
    /// The message's DKIM-Signature verifies, and no longer once a body byte changes.
    pub fn assert_holds(&self, msg: &[u8], text: &str) {
        assert!(self.verifies(msg), "signature does not verify:\n{text}");
        assert!(
            !self.verifies(&flip_body_byte(msg)),
            "a changed body still verifies"
        );
    }

    /// The DNS name of the public key (`<selector>._domainkey.<domain>`) and its TXT text.
    pub fn dns_record(&self) -> (String, String) {
        (
            format!("{SELECTOR}._domainkey.{DOMAIN}"),
            self.record.clone(),
        )
    }

    /// True when python3-dkim finds the message's DKIM-Signature valid.
    pub fn verifies(&self, msg: &[u8]) -> bool {
        let dir = TempDir::new("dkim-verify");
        let (m, r) = (dir.path().join("m.eml"), dir.path().join("key.txt"));
        fs::write(&m, msg).unwrap();
        fs::write(&r, &self.record).unwrap();
        let (ok, out, err) = run_bounded(
            Command::new("/usr/bin/python3")
                .arg("-c")
                .arg(VERIFY_PY)
                .arg(&m)
                .arg(&r)
                .arg(format!("{SELECTOR}._domainkey.{DOMAIN}")),
            WAIT,
        );
        // A crash (import error, bad arguments) is not a failed verification.
        assert!(
            ok || !err.contains("Traceback"),
            "dkim verify crashed: {out}{err}"
        );
        ok
    }

    /// The message with a DKIM-Signature over `headers` prepended (LF line ends).
    pub fn sign(&self, msg: &[u8], headers: &str) -> Vec<u8> {
        let mut child = Command::new("/usr/bin/python3")
            .arg("-c")
            .arg(SIGN_PY)
            .arg(&self.private)
            .arg(SELECTOR)
            .arg(DOMAIN)
            .arg(headers)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run python3");
        use std::io::Write;
        child.stdin.take().unwrap().write_all(msg).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "dkim sign failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut signed = message::to_lf(&out.stdout);
        assert!(signed.starts_with(b"DKIM-Signature:"), "{signed:?}");
        signed.extend_from_slice(msg);
        signed
    }
}

/// `opendkim -f` with its own config, signing for DOMAIN or verifying, on a loopback
/// port, killed on drop.
pub struct OpenDkim {
    /// Holds its config and log.
    _dir: TempDir,
    /// A verifier's public key file.
    keys: Option<TempDir>,
    port: u16,
    child: Child,
}

impl OpenDkim {
    /// A signer for DOMAIN with `key`.
    pub fn start(key: &Key) -> OpenDkim {
        OpenDkim::launch(&format!(
            "Mode s
Domain {DOMAIN}
Selector {SELECTOR}
KeyFile {key}
Canonicalization relaxed/simple
# Postfix connects from loopback: sign mail from there.
InternalHosts 127.0.0.1
",
            key = key.private.display(),
        ))
    }

    /// A verifier that finds `key` without DNS and records its results in an
    /// Authentication-Results field; `conf`: more opendkim.conf lines (AuthservID, the
    /// recipe's snippet).
    pub fn verifier(key: &Key, conf: &str) -> OpenDkim {
        let keys = TempDir::new("opendkim-keys");
        let (name, text) = key.dns_record();
        let file = keys.path().join("public-keys");
        fs::write(&file, format!("{name} {text}\n")).unwrap();
        let mut od = OpenDkim::launch(&format!(
            "# The key record from a file instead of DNS (opendkim.c hands it to
# libopendkim as DKIM_QUERY_FILE, in milter mode as well).
TestPublicKeys {file}
{conf}",
            file = file.display(),
        ));
        od.keys = Some(keys);
        od
    }

    fn launch(mode: &str) -> OpenDkim {
        let dir = TempDir::new("opendkim");
        let port = free_port();
        let conf = dir.path().join("opendkim.conf");
        let log = dir.path().join("opendkim.log");
        fs::write(
            &conf,
            format!(
                "{mode}
Socket inet:{port}@127.0.0.1
Syslog no
PidFile {pid}
# The key lives under the world-writable temp directory, which OpenDKIM would
# otherwise refuse.
RequireSafeKeys no
",
                pid = dir.path().join("opendkim.pid").display(),
            ),
        )
        .unwrap();
        let f = fs::File::create(&log).unwrap();
        let mut child = Command::new("/usr/sbin/opendkim")
            .arg("-f")
            .arg("-x")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(f.try_clone().unwrap())
            .stderr(f)
            .spawn()
            .expect("start opendkim");
        wait_listening("opendkim", &mut child, port, WAIT, || {
            fs::read_to_string(&log).unwrap_or_default()
        });
        OpenDkim {
            _dir: dir,
            keys: None,
            port,
            child,
        }
    }

    pub fn postfix_spec(&self) -> String {
        format!("inet:127.0.0.1:{}", self.port)
    }

    pub fn sendmail_spec(&self) -> String {
        libmilter_spec(self.port)
    }
}

impl Drop for OpenDkim {
    fn drop(&mut self) {
        // It takes about 3 s to leave after SIGTERM, a wait every test paid; it keeps
        // nothing a test reads afterwards.
        stop_child(&mut self.child);
    }
}

/// The message with one body byte changed (the first lowercase letter after the
/// heading upper-cased), so a check that cannot fail is caught.
pub fn flip_body_byte(msg: &[u8]) -> Vec<u8> {
    let start = msg.windows(2).position(|w| w == b"\n\n").expect("a body") + 2;
    let mut out = msg.to_vec();
    let i = start
        + out[start..]
            .iter()
            .position(u8::is_ascii_lowercase)
            .expect("a letter in the body");
    out[i] = out[i].to_ascii_uppercase();
    out
}
