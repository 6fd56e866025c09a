//! rspamd as a milter on a loopback port, run as bench/e2e runs it: a proxy worker in
//! milter mode scanning in process (self_scan), no rules and no redis, with the modules a
//! test names: for tests/mta/rspamd_e2e.rs and tests/mta/verified_e2e.rs.

use super::*;

use std::fs;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// `rspamd -f` with its own configuration and state directory, stopped on drop.
pub struct Rspamd {
    dir: TempDir,
    port: u16,
    child: Child,
}

impl Rspamd {
    /// `filters`: the C modules to run (`""`, `"dkim"`); `dns_port`: the loopback DNS
    /// server it asks (none: 127.0.0.1:53, which nothing here answers); `modules`: the
    /// rest of the configuration (Lua modules and their sections).
    pub fn start(filters: &str, dns_port: Option<u16>, modules: &str) -> Rspamd {
        let dir = TempDir::new("rspamd");
        let state = dir.path().join("state");
        fs::create_dir_all(state.join("db")).unwrap();
        // The workers drop to _rspamd and write their caches, log and pid file here.
        chown(&state, "_rspamd:_rspamd");
        chown(&state.join("db"), "_rspamd:_rspamd");
        let port = free_port();
        // Debian's public suffix list (9,600 entries) takes rspamd 3.4 about 15 s of
        // hyperscan compilation at every start, 30 s and more on a loaded 2-core
        // machine; these messages only need their own domains.
        let tld = dir.path().join("effective_tld_names.dat");
        fs::write(&tld, "com\norg\nnet\nexample\n").unwrap();
        let conf = dir.path().join("rspamd.conf");
        fs::write(
            &conf,
            format!(
                r#"options {{
    pidfile = "{s}/rspamd.pid";
    filters = "{filters}";
    tempdir = "{s}";
    cache_file = "{s}/db/symbols.cache";
    hs_cache_dir = "{s}/db/";
    control_socket = "{s}/db/rspamd.sock mode=0600";
    url_tld = "{tld}";
    local_addrs = [127.0.0.0/8];
    task_timeout = 20s;
    dns {{ nameserver = ["127.0.0.1:{dns}"]; timeout = 1s; retransmits = 1; }}
}}
# info: one line per scanned message (queue id, size), for the failure messages.
logging {{ type = "file"; filename = "{s}/rspamd.log"; level = "info"; }}
worker "rspamd_proxy" {{
    bind_socket = "127.0.0.1:{port}";
    milter = yes;
    timeout = 30s;
    count = 1;
    upstream "local" {{ default = yes; self_scan = yes; }}
}}
{modules}"#,
                s = state.display(),
                tld = tld.display(),
                dns = dns_port.unwrap_or(53),
            ),
        )
        .unwrap();
        let out = fs::File::create(dir.path().join("rspamd.out")).unwrap();
        let mut child = Command::new("/usr/bin/rspamd")
            .args(["-f", "-u", "_rspamd", "-g", "_rspamd", "-c"])
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("start rspamd");
        wait_listening("rspamd", &mut child, port, WAIT, || {
            fs::read_to_string(dir.path().join("rspamd.out")).unwrap_or_default()
        });
        Rspamd { dir, port, child }
    }

    pub fn postfix_spec(&self) -> String {
        format!("inet:127.0.0.1:{}", self.port)
    }

    pub fn sendmail_spec(&self) -> String {
        libmilter_spec(self.port)
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("state/rspamd.log")).unwrap_or_default()
    }
}

impl Drop for Rspamd {
    fn drop(&mut self) {
        // The main process stops its workers on SIGTERM.
        terminate_child(&mut self.child, Duration::from_secs(10));
    }
}
