"""Private Dovecot and Cyrus IMAP servers for the IMAP readers of the interop matrix.

Each server runs from a configuration of its own under a temporary directory, listens
on 127.0.0.1 on unprivileged ports picked free at start, and is no system service.
scripts/interop starts each server once per run (`started`), hands its address to the
readers in MIMEREF_IMAP_<NAME> and stops it at the end; a reader run by hand without it
starts one for itself (`connect`), at the cost of a start per message.

A message is delivered the way mail reaches a mailbox, over LMTP (Dovecot's lmtp, Cyrus'
lmtpd), to a user name of its own, so that every delivery is alone in its INBOX (UID 1)
and readers running at once never see each other's messages. Dovecot accepts any user
with one password (static passdb); Cyrus creates the INBOX on delivery
(autocreate_post) and the readers log in as its admin on behalf of the user (SASL PLAIN
with an authorization id), so that no per-user secret is needed.

Standard library only (scripts/interop imports it).
"""
import contextlib
import imaplib
import json
import os
import pwd
import grp
import shutil
import smtplib
import socket
import subprocess
import tempfile
import time
import uuid

CYRUS_ROOT = os.environ.get("MIMEREF_CYRUS_ROOT", "/opt/mimeref-test/cyrus")
PASSWORD = "interop"
ADMIN = "cyrus"
START_TIMEOUT = 20.0
SERVERS = ("dovecot", "cyrus")


def log(msg):
    import sys
    print("imapserver: " + msg, file=sys.stderr, flush=True)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, logfile, what):
    """Until `port` on 127.0.0.1 answers with a greeting, the server exits, or time runs out."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("%s exited with %s at start: %s" % (what, proc.returncode, tail(logfile)))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                s.settimeout(5)
                if s.recv(200):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("%s did not answer on 127.0.0.1:%d within %g s: %s"
                       % (what, port, START_TIMEOUT, tail(logfile)))


def tail(path, n=5):
    try:
        with open(path, errors="replace") as f:
            return " | ".join(l.strip() for l in f.readlines()[-n:])
    except OSError:
        return "(no log)"


def mail_owner():
    """The account mail files belong to: the caller, or `nobody` when root (neither
    server keeps mail as root)."""
    if os.geteuid() != 0:
        u = pwd.getpwuid(os.geteuid())
        return u.pw_name, u.pw_uid, u.pw_gid, grp.getgrgid(u.pw_gid).gr_name
    u = pwd.getpwnam("nobody")
    return u.pw_name, u.pw_uid, u.pw_gid, grp.getgrgid(u.pw_gid).gr_name


def chown_tree(path, uid, gid):
    if os.geteuid() != 0:
        return
    for d, dirs, files in os.walk(path):
        os.chown(d, uid, gid)
        for f in files:
            os.chown(os.path.join(d, f), uid, gid)


class Server:
    name = None

    def __init__(self, base):
        # The servers drop to the mail owner, who must reach its files from the top.
        os.chmod(base, 0o755)
        self.dir = os.path.join(base, self.name)
        os.makedirs(self.dir)
        self.proc = None
        self.imap = self.lmtp = None
        self.version = None
        self.logfile = os.path.join(self.dir, "server.log")

    def address(self):
        return {"imap": self.imap, "lmtp": self.lmtp, "version": self.version}

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


class Dovecot(Server):
    name = "dovecot"

    def start(self):
        user, uid, gid, group = mail_owner()
        login = "dovenull" if os.geteuid() == 0 else user
        internal = "dovecot" if os.geteuid() == 0 else user
        self.imap, self.lmtp = free_port(), free_port()
        d = self.dir
        for sub in ("run", "state", "mail"):
            os.makedirs(os.path.join(d, sub))
        chown_tree(os.path.join(d, "mail"), uid, gid)
        conf = os.path.join(d, "dovecot.conf")
        with open(conf, "w") as f:
            f.write(f"""# private interop instance (tests/interop/lib/imapserver.py)
base_dir = {d}/run
state_dir = {d}/state
log_path = {self.logfile}
instance_name = mimeref-interop-{os.getpid()}
protocols = imap lmtp
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_login_user = {login}
default_internal_user = {internal}
default_internal_group = {grp.getgrgid(pwd.getpwnam(internal).pw_gid).gr_name}
first_valid_uid = {min(uid, 500)}
mail_location = maildir:{d}/mail/%n
mail_uid = {uid}
mail_gid = {gid}
passdb {{
  driver = static
  args = password={PASSWORD}
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={d}/mail/%n
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {self.imap}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service lmtp {{
  inet_listener lmtp {{
    address = 127.0.0.1
    port = {self.lmtp}
  }}
}}
service stats {{
  unix_listener stats-reader {{
    mode = 0600
  }}
  unix_listener stats-writer {{
    mode = 0666
  }}
}}
""")
        os.chmod(d, 0o755)
        self.version = "Dovecot " + subprocess.run(["dovecot", "--version"], capture_output=True,
                                                   text=True).stdout.split()[0]
        self.proc = subprocess.Popen(["dovecot", "-F", "-c", conf], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=open(self.logfile, "a"))
        wait_port(self.imap, self.proc, self.logfile, "dovecot imap")
        wait_port(self.lmtp, self.proc, self.logfile, "dovecot lmtp")


class Cyrus(Server):
    name = "cyrus"

    def start(self):
        user, uid, gid, _ = mail_owner()
        bindir = os.path.join(CYRUS_ROOT, "usr/lib/cyrus/bin")
        libdir = os.path.join(CYRUS_ROOT, "usr/lib/x86_64-linux-gnu")
        for b in ("master", "imapd", "lmtpd"):
            if not os.access(os.path.join(bindir, b), os.X_OK):
                raise RuntimeError("cyrus %s not found under %s (scripts/install-test-deps)" % (b, CYRUS_ROOT))
        if not shutil.which("saslpasswd2"):
            raise RuntimeError("saslpasswd2 not found (sasl2-bin; scripts/install-test-deps)")
        self.imap, self.lmtp = free_port(), free_port()
        d = self.dir
        for sub in ("config", "config/socket", "config/lock", "config/log", "spool", "sieve", "run"):
            os.makedirs(os.path.join(d, sub))
        conf = os.path.join(d, "imapd.conf")
        sasldb = os.path.join(d, "config", "sasldb2")
        host = "localhost"
        with open(conf, "w") as f:
            f.write(f"""# private interop instance (tests/interop/lib/imapserver.py)
configdirectory: {d}/config
defaultpartition: default
partition-default: {d}/spool
sievedir: {d}/sieve
cyrus_user: {user}
servername: {host}
admins: {ADMIN}
proxyservers: {ADMIN}
allowplaintext: yes
sasl_pwcheck_method: auxprop
sasl_auxprop_plugin: sasldb
sasl_sasldb_path: {sasldb}
sasl_mech_list: PLAIN
autocreate_post: yes
autocreate_quota: 0
lmtp_strict_rfc2821: no
lmtp_downcase_rcpt: yes
syslog_prefix: mimeref-interop
""")
        cconf = os.path.join(d, "cyrus.conf")
        with open(cconf, "w") as f:
            f.write(f"""# private interop instance (tests/interop/lib/imapserver.py)
START {{
  recover cmd="{bindir}/ctl_cyrusdb -C {conf} -r"
}}
SERVICES {{
  imap cmd="{bindir}/imapd -C {conf}" listen="127.0.0.1:{self.imap}" prefork=1
  lmtp cmd="{bindir}/lmtpd -C {conf} -a" listen="127.0.0.1:{self.lmtp}" prefork=1
}}
EVENTS {{
}}
DAEMON {{
}}
""")
        p = subprocess.run(["saslpasswd2", "-f", sasldb, "-p", "-c", "-u", host, ADMIN],
                           input=PASSWORD, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError("saslpasswd2: " + p.stderr.strip())
        chown_tree(d, uid, gid)
        os.chmod(d, 0o755)
        env = dict(os.environ, LD_LIBRARY_PATH=libdir)
        self.version = "Cyrus IMAP " + cyrus_version()
        self.proc = subprocess.Popen([os.path.join(bindir, "master"), "-C", conf, "-M", cconf,
                                      "-D", "-L", self.logfile, "-p", os.path.join(d, "run", "master.pid")],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=open(self.logfile + ".stderr", "a"), env=env)
        wait_port(self.imap, self.proc, self.logfile, "cyrus imapd")
        wait_port(self.lmtp, self.proc, self.logfile, "cyrus lmtpd")


def cyrus_version():
    """The unpacked package's version, from its Debian changelog (the binaries have no
    version option)."""
    import gzip
    path = os.path.join(CYRUS_ROOT, "usr/share/doc/cyrus-common/changelog.Debian.gz")
    try:
        with gzip.open(path, "rt", errors="replace") as f:
            first = f.readline()
        return first.split("(", 1)[1].split(")", 1)[0] + " (Debian)"
    except (OSError, IndexError):
        return "(version unknown)"


KINDS = {"dovecot": Dovecot, "cyrus": Cyrus}


@contextlib.contextmanager
def started(names, base=None):
    """Start the named servers once; yields {name: address} and the environment that
    hands them to the readers; stops them (and removes their files) at the end."""
    unknown = [n for n in names if n not in KINDS]
    if unknown:
        raise RuntimeError("no such IMAP server: %s (known: %s)" % (", ".join(unknown), ", ".join(KINDS)))
    tmp = tempfile.mkdtemp(prefix="mimeref-imap-", dir=base)
    servers = []
    try:
        addrs = {}
        for n in names:
            s = KINDS[n](tmp)
            servers.append(s)
            s.start()
            addrs[n] = s.address()
        env = {"MIMEREF_IMAP_" + n.upper(): json.dumps(a) for n, a in addrs.items()}
        yield addrs, env
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)


_own = {}


def connect(name):
    """The address of server `name`: the harness's, else one started for this process."""
    v = os.environ.get("MIMEREF_IMAP_" + name.upper())
    if v and v.startswith("unavailable:"):
        raise RuntimeError("%s did not start for this run: %s" % (name, v[len("unavailable:"):].strip()))
    if v:
        return json.loads(v)
    if name not in _own:
        import atexit
        cm = started([name])
        addrs, _ = cm.__enter__()
        atexit.register(cm.__exit__, None, None, None)
        _own[name] = addrs[name]
    return _own[name]


def deliver(name, addr, data):
    """Deliver `data` over LMTP to a new user; returns that user's login name."""
    user = "u" + uuid.uuid4().hex[:16]
    rcpt = user + "@localhost" if name == "dovecot" else user
    with smtplib.LMTP("127.0.0.1", addr["lmtp"], timeout=30) as l:
        l.sendmail("interop@localhost", [rcpt], data)
    return user


def login(name, addr, user):
    m = imaplib.IMAP4("127.0.0.1", addr["imap"], timeout=30)
    if name == "cyrus":
        m.authenticate("PLAIN", lambda _: ("%s\0%s\0%s" % (user, ADMIN, PASSWORD)).encode())
    else:
        m.login(user, PASSWORD)
    return m


def credentials(name, addr, user):
    """What another IMAP client (Roundcube, Camel) needs to log in as `user`:
    (login, password, authorization-as-admin or None)."""
    if name == "cyrus":
        return user, PASSWORD, ADMIN
    return user, PASSWORD, None
