#!/usr/bin/env python3
"""Interop reader "thunderbird": Thunderbird opening FILE.eml under Xvfb, offline.

A fresh profile (user.js: no wizards, no telemetry, no updates, offline, proxy to a
closed port, a Local Folders account only) and a private Xvfb display (-displayfd picks
a free one). `thunderbird -file MESSAGE.eml` opens the message in a message window;
Marionette (loopback, port chosen by Thunderbird, `-remote-allow-system-access` for the
chrome context) reads the rendered message pane: Thunderbird rewrites a `cid:` src/href
it can resolve into `mailbox:…?part=N` (libmime part numbers, turned into IMAP section
numbers here), and leaves an unresolved one as it is (it then counts as remote content
and is blocked). The window is resized to 1000x800 and captured (`import -window`);
`screenshot_sha256` is ImageMagick's pixel signature.

Prints one JSON object; exit 0 whatever the message; exit 1 only when Thunderbird, Xvfb
or ImageMagick cannot run.
"""
import email
import email.policy
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

NAME = "thunderbird"
DEADLINE = 60.0
WIN_W, WIN_H = 1000, 800

USER_JS = """\
user_pref("browser.shell.checkDefaultClient", false);
user_pref("mail.shell.checkDefaultClient", false);
user_pref("mail.shell.checkDefaultMail", false);
user_pref("mail.provider.enabled", false);
user_pref("mail.provider.suppress_dialog_on_startup", true);
user_pref("mailnews.start_page.enabled", false);
user_pref("mailnews.start_page_override.mstone", "ignore");
user_pref("mail.rights.override", true);
user_pref("mail.rights.version", 1);
user_pref("toolkit.telemetry.enabled", false);
user_pref("toolkit.telemetry.unified", false);
user_pref("toolkit.telemetry.server", "");
user_pref("toolkit.telemetry.archive.enabled", false);
user_pref("datareporting.healthreport.uploadEnabled", false);
user_pref("datareporting.policy.dataSubmissionEnabled", false);
user_pref("app.update.enabled", false);
user_pref("app.update.auto", false);
user_pref("app.update.checkInstallTime", false);
user_pref("app.normandy.enabled", false);
user_pref("extensions.update.enabled", false);
user_pref("extensions.getAddons.cache.enabled", false);
user_pref("network.dns.disableIPv6", true);
user_pref("network.proxy.type", 1);
user_pref("network.proxy.http", "127.0.0.1");
user_pref("network.proxy.http_port", 9);
user_pref("network.proxy.ssl", "127.0.0.1");
user_pref("network.proxy.ssl_port", 9);
user_pref("network.proxy.no_proxies_on", "");
user_pref("network.online", false);
user_pref("offline.startup_state", 2);
user_pref("mailnews.message_display.disable_remote_image", true);
user_pref("mail.accountmanager.accounts", "account1");
user_pref("mail.account.account1.server", "server1");
user_pref("mail.accountmanager.localfoldersserver", "server1");
user_pref("mail.server.server1.type", "none");
user_pref("mail.server.server1.hostname", "Local Folders");
user_pref("mail.server.server1.userName", "nobody");
user_pref("mail.server.server1.name", "Local Folders");
user_pref("messenger.startup.action", 0);
user_pref("mail.spotlight.firstRunDone", true);
user_pref("mail.winsearch.firstRunDone", true);
user_pref("browser.crashReports.unsubmittedCheck.enabled", false);
user_pref("browser.safebrowsing.malware.enabled", false);
user_pref("browser.safebrowsing.phishing.enabled", false);
user_pref("mail.phishing.detection.enabled", false);
user_pref("mail.inappnotifications.enabled", false);
user_pref("mail.biff.show_alert", false);
user_pref("mail.biff.play_sound", false);
user_pref("marionette.port", 0);
"""

# Runs in Marionette's chrome context. Returns null until the message window shows a
# fully loaded message.
PROBE_JS = r"""
const w = Services.wm.getMostRecentWindow("mail:messageWindow");
if (!w || w.document.readyState !== "complete") return null;
const mb = w.document.getElementById("messageBrowser");
const aw = mb && mb.contentWindow;
if (!aw || !aw.document || aw.document.readyState !== "complete") return null;
const pane = aw.document.getElementById("messagepane");
if (!pane || !pane.contentDocument || pane.contentDocument.readyState !== "complete") return null;
if (!pane.currentURI || !pane.currentURI.spec.startsWith("mailbox:")) return null;
const d = pane.contentDocument;
if (![...d.images].every(i => i.complete)) return null;
if (arguments[0]) { w.moveTo(0, 0); w.resizeTo(arguments[1], arguments[2]); w.focus(); }
const refs = [];
for (const img of d.images) {
  refs.push({kind: "img", ref: img.getAttribute("src"), url: img.currentSrc || img.src,
             loaded: img.naturalWidth > 0, size: img.naturalWidth + "x" + img.naturalHeight,
             attached: img.classList.contains("moz-attached-image")});
}
for (const l of d.querySelectorAll('link[rel~="stylesheet" i]')) {
  if (/^(chrome|resource):/.test(l.href)) continue;  // Thunderbird's own message CSS
  let n = -1;
  try { n = l.sheet ? l.sheet.cssRules.length : 0; } catch (e) { n = -2; }
  refs.push({kind: "link", ref: l.getAttribute("href"), url: l.href, loaded: n !== 0, size: "css " + n + " rules"});
}
for (const el of d.body ? d.body.querySelectorAll("*") : []) {
  const bg = d.defaultView.getComputedStyle(el).backgroundImage;
  if (!bg || bg === "none") continue;
  // a blocked (remote) one is computed as about:blank: the style attribute has it
  const st = [...(el.getAttribute("style") || "").matchAll(/url\(\s*["']?([^"')]*)["']?\s*\)/g)].map(m => m[1]);
  let i = 0;
  for (const m of bg.matchAll(/url\("?([^")]*)"?\)/g)) {
    const ref = (m[1] === "about:blank" && st[i] !== undefined) ? st[i] : m[1];
    refs.push({kind: "background", ref, url: m[1], loaded: m[1] !== "about:blank", size: ""});
    i++;
  }
}
const atts = (aw.currentAttachments || []).map(a => ({name: a.name, url: a.url, contentType: a.contentType,
  external: !!a.isExternalAttachment, link: !!a.isLinkAttachment,
  size: (typeof a.size === "number") ? a.size : null}));
// a forwarded message libmime shows inline: its header table (Subject, From, ...)
const fwd = [...d.querySelectorAll(".moz-header-part1, .moz-header-part2")].map(t => t.textContent.replace(/\s+/g, " ").trim());
const notif = [...aw.document.querySelectorAll("notification-message")].map(n => n.getAttribute("value"));
const hdr = [];
for (const t of d.querySelectorAll("table.moz-main-header td")) hdr.push(t.textContent.replace(/\s+/g, " ").trim());
return {title: w.document.title, paneURL: pane.currentURI.spec, fwd,
        text: d.body ? d.body.innerText : "", refs, atts, notif, hdr,
        tags: [...d.querySelectorAll("body *")].map(e => e.localName)};
"""


def die(msg):
    sys.stderr.write("%s reader: %s\n" % (NAME, msg))
    sys.exit(1)


class Marionette:
    def __init__(self, port, timeout):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.id = 0
        self.buf = b""
        self._recv()

    def _recv(self):
        while b":" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("marionette closed")
            self.buf += chunk
        n, rest = self.buf.split(b":", 1)
        n = int(n)
        while len(rest) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("marionette closed")
            rest += chunk
        self.buf = rest[n:]
        return json.loads(rest[:n])

    def cmd(self, name, params=None):
        self.id += 1
        data = json.dumps([0, self.id, name, params or {}]).encode()
        self.s.sendall(str(len(data)).encode() + b":" + data)
        while True:
            r = self._recv()
            if r[0] == 1 and r[1] == self.id:
                break
        if r[2]:
            raise RuntimeError("%s: %s" % (name, r[2].get("message", r[2])))
        return r[3]

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def imap_path(tb_part, top_multipart):
    """libmime part number (1 = the message body, 1.2 = its second child) -> IMAP."""
    if tb_part in ("1", "0"):
        return "0" if not top_multipart else "0"
    if top_multipart and tb_part.startswith("1."):
        return tb_part[2:]
    return tb_part


def source_refs(raw, img_from=None):
    """src/href of img and stylesheet links per text/html part, in document order, as
    written (Thunderbird replaces resolved cid: URLs before display); img_from, when
    given, gets the part (IMAP section number) of each img."""
    imgs, links = [], []
    try:
        msg = email.message_from_bytes(raw, policy=email.policy.compat32)
        paths = {}

        def number(part, path):
            paths[id(part)] = path
            if part.is_multipart() and isinstance(part.get_payload(), list):
                for i, k in enumerate(part.get_payload(), 1):
                    number(k, str(i) if path == "0" else "%s.%d" % (path, i))

        try:
            number(msg, "0")
        except Exception:
            pass
        for part in msg.walk():
            if part.get_content_type() != "text/html":
                continue
            if (part.get("Content-Disposition") or "").strip().lower().startswith("attachment"):
                continue
            body = part.get_payload(decode=True) or b""
            html = body.decode(part.get_content_charset() or "utf-8", "replace")
            for m in re.finditer(r"<(img|link)\b([^>]*)>", html, re.I):
                tag, attrs = m.group(1).lower(), m.group(2)
                if tag == "link" and not re.search(r"\brel\s*=\s*[\"']?[^\"'>]*stylesheet", attrs, re.I):
                    continue
                a = re.search(r"\b(src|href)\s*=\s*(\"([^\"]*)\"|'([^']*)'|([^\s>]+))", attrs, re.I)
                if a:
                    v = a.group(3) if a.group(3) is not None else a.group(4) if a.group(4) is not None else a.group(5)
                    v = (v.replace("&amp;", "&").replace("&quot;", '"').replace("&#39;", "'")
                         .replace("&lt;", "<").replace("&gt;", ">").strip())
                    (imgs if tag == "img" else links).append(v)
                    if tag == "img" and img_from is not None:
                        img_from.append(paths.get(id(part)))
        top_multipart = msg.get_content_maintype() == "multipart"
    except Exception:
        top_multipart = False
    return imgs, links, top_multipart


def leaves(raw):
    """(IMAP section number, media type) of each leaf of the message, in order; the
    parts of an attached message are not opened (Thunderbird lists it whole)."""
    out = []
    try:
        msg = email.message_from_bytes(raw, policy=email.policy.compat32)

        def walk(part, path):
            kids = part.get_payload() if part.is_multipart() else None
            if part.get_content_maintype() == "multipart" and isinstance(kids, list):
                for i, k in enumerate(kids, 1):
                    walk(k, str(i) if path == "0" else "%s.%d" % (path, i))
            else:
                out.append((path, part.get_content_type()))

        walk(msg, "0")
    except Exception:
        return []
    return out


def main():
    if len(sys.argv) != 2:
        die("usage: thunderbird FILE.eml")
    path = os.path.abspath(sys.argv[1])
    for prog in ("thunderbird", "Xvfb", "import", "identify"):
        if shutil.which(prog) is None:
            die("%s not found (run scripts/install-test-deps)" % prog)
    try:
        raw = open(path, "rb").read()
    except OSError as e:
        die("cannot read %s: %s" % (path, e))
    started = time.monotonic()
    try:
        version = subprocess.run(["thunderbird", "--version"], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, timeout=30).stdout.decode(
                                     "utf-8", "replace").strip().splitlines()[-1]
    except Exception as e:
        die("thunderbird --version failed: %s" % e)

    out = {"reader": NAME, "version": version, "ok": True, "error": None, "extbody": [],
           "parts": [], "related": [], "refs": [], "images": [], "defects": [], "shown": "",
           "screenshot": None, "screenshot_sha256": None}
    tmp = tempfile.mkdtemp(prefix="mimeref-thunderbird-")
    msgfile = os.path.join(tmp, "message.eml")
    with open(msgfile, "wb") as f:
        f.write(raw)
    prof = os.path.join(tmp, "profile")
    os.mkdir(prof)
    with open(os.path.join(prof, "user.js"), "w") as f:
        f.write(USER_JS)

    xvfb = tb = mn = None
    try:
        # Xvfb on a free display (it writes the number to the pipe when ready).
        rfd, wfd = os.pipe()
        xvfb = subprocess.Popen(["Xvfb", "-displayfd", str(wfd), "-nolisten", "tcp",
                                 "-screen", "0", "1280x1024x24"], pass_fds=(wfd,),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        os.close(wfd)
        disp = b""
        while not disp.endswith(b"\n"):
            if time.monotonic() - started > 20:
                raise TimeoutError("Xvfb did not start")
            chunk = os.read(rfd, 16)
            if not chunk:
                break
            disp += chunk
        os.close(rfd)
        if not disp.strip():
            die("Xvfb did not start")
        display = ":" + disp.decode().strip()

        env = dict(os.environ, DISPLAY=display, HOME=tmp, XDG_CONFIG_HOME=os.path.join(tmp, ".config"),
                   XDG_CACHE_HOME=os.path.join(tmp, ".cache"), TMPDIR=tmp,
                   MOZ_CRASHREPORTER_DISABLE="1", MOZ_DISABLE_AUTO_SAFE_MODE="1",
                   LANG="C.UTF-8", LC_ALL="C.UTF-8", TZ="UTC")
        for k in ("WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "XAUTHORITY"):
            env.pop(k, None)
        tb = subprocess.Popen(["thunderbird", "--profile", prof, "--no-remote", "-offline",
                               "--marionette", "-remote-allow-system-access", "-file", msgfile],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
        portfile = os.path.join(prof, "MarionetteActivePort")
        while not (os.path.exists(portfile) and open(portfile).read().strip()):
            if tb.poll() is not None:
                die("thunderbird exited with %s before Marionette started" % tb.returncode)
            if time.monotonic() - started > DEADLINE / 2:
                raise TimeoutError("Marionette did not start")
            time.sleep(0.2)
        mn = Marionette(int(open(portfile).read().strip()), timeout=20)
        mn.cmd("WebDriver:NewSession", {"capabilities": {}})
        mn.cmd("Marionette:SetContext", {"value": "chrome"})

        # Wait for the message window, size it, then wait until the rendering is
        # the same twice in a row (DOM summary and pixels).
        info, sized, last, shot_prev = None, False, None, None
        shot = None
        outdir = os.environ.get("MIMEREF_INTEROP_OUT")
        if outdir:
            os.makedirs(outdir, exist_ok=True)
        else:
            outdir = tempfile.mkdtemp(prefix="mimeref-thunderbird-shot-")
        import hashlib
        tag = hashlib.sha256(path.encode()).hexdigest()[:10]
        shot = os.path.abspath(os.path.join(outdir, "%s.%s.thunderbird.png" % (
            re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(path)), tag)))
        sig = None
        while True:
            if time.monotonic() - started > DEADLINE:
                raise TimeoutError("the message window did not settle")
            info = mn.cmd("WebDriver:ExecuteScript", {"script": PROBE_JS,
                                                      "args": [not sized, WIN_W, WIN_H]})["value"]
            if info is None:
                time.sleep(0.25)
                continue
            if not sized:
                sized = True
                time.sleep(0.5)
                continue
            wid = subprocess.run(["xdotool", "search", "--onlyvisible", "--name",
                                  "^" + re.escape(info["title"]) + "$"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 text=True, timeout=10).stdout.split()
            if not wid:
                # title not found (odd subject): the visible window of the size we set
                for w in subprocess.run(["xdotool", "search", "--onlyvisible", "--name", "."],
                                        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True, timeout=10).stdout.split():
                    g = subprocess.run(["xdotool", "getwindowgeometry", w], env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                       text=True, timeout=10).stdout
                    if "Geometry: %dx%d" % (WIN_W, WIN_H) in g:
                        wid = [w]
            target = wid[-1] if wid else "root"
            if wid:
                # No window manager: give the message window the input focus, or the
                # toolbars are drawn active or inactive depending on timing.
                subprocess.run(["xdotool", "windowfocus", "--sync", target], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
            subprocess.run(["import", "-window", target, shot], env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=20)
            sig = subprocess.run(["identify", "-format", "%#", shot], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True, timeout=20).stdout.strip()
            key = json.dumps(info, sort_keys=True)
            if key == last and sig == shot_prev:
                break
            last, shot_prev = key, sig
            time.sleep(0.4)
        if target == "root":
            out["defects"].append("message window not found by title: screenshot of the whole screen")
        out["screenshot"] = shot
        out["screenshot_sha256"] = sig or None

        # What it showed.
        img_from = []
        imgs, links, top_multipart = source_refs(raw, img_from)
        loaded = []
        msgurl_re = re.compile(r"^mailbox://.*?[?&]part=([0-9.]+)")
        dom_imgs = [r for r in info["refs"] if r["kind"] == "img"]
        dom_links = [r for r in info["refs"] if r["kind"] == "link"]
        for kind, dom, src in (("img", dom_imgs, imgs), ("link", dom_links, links)):
            same = len(dom) == len(src)
            for i, r in enumerate(dom):
                ref = src[i] if same else r["ref"]
                to = None
                m = msgurl_re.match(r["url"] or "")
                # a reference Thunderbird resolved to a part names that part, even
                # when the part did not decode; `shown` says what loaded
                if m:
                    to = imap_path(m.group(1), top_multipart)
                elif r["loaded"]:
                    to = "%s %s" % (r["size"], r["url"])
                loaded.append("%s %s -> %s: %s" % (kind, ref, to, r["size"] if r["loaded"] else "not loaded"))
                out["refs"].append({"from": "message pane " + kind, "ref": ref, "to": to})
            if not same and dom:
                out["defects"].append("%s refs: %d in the pane, %d in the source; refs as rewritten" % (kind, len(dom), len(src)))
        for r in info["refs"]:
            if r["kind"] == "background":
                m = msgurl_re.match(r["url"] or "")
                to = None
                if r["loaded"]:
                    to = imap_path(m.group(1), top_multipart) if m else "background %s" % r["url"]
                out["refs"].append({"from": "message pane background", "ref": r["ref"], "to": to})
        # Images: the pane's img elements a reference put there (not the images libmime
        # appends after the body, class moz-attached-image), matched to the img src of
        # the source by order, and CSS backgrounds; the part when it loaded from one.
        ref_imgs = [r for r in dom_imgs if not r.get("attached")]
        same = len(ref_imgs) == len(imgs)
        for i, r in enumerate(ref_imgs):
            m = msgurl_re.match(r["url"] or "")
            out["images"].append({"from": (img_from[i] if same and img_from[i] else "message pane"),
                                  "ref": imgs[i] if same else r["ref"],
                                  "to": imap_path(m.group(1), top_multipart) if m and r["loaded"] else None})
        for r in info["refs"]:
            if r["kind"] == "background":
                m = msgurl_re.match(r["url"] or "")
                out["images"].append({"from": "message pane background", "ref": r["ref"],
                                      "to": imap_path(m.group(1), top_multipart) if m and r["loaded"] else None})
        appended = set()
        for r in dom_imgs:
            m = msgurl_re.match(r["url"] or "")
            if r.get("attached") and m:
                appended.add(imap_path(m.group(1), top_multipart))
        listed = set()
        for a in info["atts"]:
            m = msgurl_re.match(a["url"] or "")
            p = imap_path(m.group(1), top_multipart) if m else None
            listed.add(p)
            out["parts"].append({"part": p, "content_type": a["contentType"], "content_id": None,
                                 "content_location": None, "resolved": None,
                                 "attachment_name": a["name"], "attachment": True,
                                 "name": a["name"]})
            ct = (a["contentType"] or "").lower()
            if ct in ("message/rfc822", "message/global"):
                # libmime shows a forwarded message inline, with a header table of its
                # own (the reader cannot tell two forwarded messages apart)
                fwd = any(re.search(r"\b(Subject|From):", t) for t in info.get("fwd") or [])
                out["parts"][-1]["opens"] = ("message" if fwd else "empty" if a.get("size") == 0
                                             else "undecodable")
            elif ct == "application/octet-stream":
                out["parts"][-1]["opens"] = "empty" if a.get("size") == 0 else "file"
            if p in appended:
                out["parts"][-1]["appended"] = True
            if a["external"] or a["link"] or a["contentType"] == "message/external-body":
                out["extbody"].append({"part": p, "access_type": None, "url": a["url"]})
        # The parts Thunderbird does not list, so that a part that leaves the list (now
        # shown in the body) or is only appended after it, or shown nowhere, says so
        # instead of looking lost: the message's leaves, numbered as above.
        for p, ctype in leaves(raw):
            if p not in listed:
                out["parts"].append({"part": p, "content_type": ctype, "content_id": None,
                                     "content_location": None, "resolved": None,
                                     "attachment": False, "appended": p in appended, "name": None})
        for n in info["notif"]:
            if n:
                out["defects"].append("notification: %s" % n)
        text = re.sub(r"\n{3,}", "\n\n", info["text"].replace("\r", "")).strip()
        tags = {}
        for t in info["tags"]:
            tags[t] = tags.get(t, 0) + 1
        out["shown"] = ("headers: %s\nattachments: %s\ntext: %s\ntags: %s" % (
            " | ".join(info["hdr"]),
            ", ".join("%s (%s)" % (a["name"], a["contentType"]) for a in info["atts"]) or "none",
            text, " ".join("%s=%d" % kv for kv in sorted(tags.items())))).replace(tmp, "TMP")
        if loaded:
            out["shown"] += "\nloaded: " + "; ".join(loaded)
    except (TimeoutError, RuntimeError, ConnectionError, OSError, subprocess.SubprocessError) as e:
        out["ok"] = False
        out["error"] = str(e).replace(tmp, "TMP")
    finally:
        if mn:
            mn.close()
        for p in (tb, xvfb):
            if p and p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
                try:
                    p.wait(timeout=10)
                except Exception:
                    pass
        shutil.rmtree(tmp, ignore_errors=True)
    if os.environ.get("MIMEREF_READER_VERBOSE"):
        sys.stderr.write("%s reader: %s in %.2f s\n" % (NAME, os.path.basename(path),
                                                        time.monotonic() - started))
    # the temporary directory differs per run: keep it out of the JSON
    sys.stdout.write(json.dumps(out).replace(tmp, "TMP") + "\n")


if __name__ == "__main__":
    main()
