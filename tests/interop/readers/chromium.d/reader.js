#!/usr/bin/env node
// Interop reader "chromium": opens FILE.eml as a web archive in headless Chromium.
//
// Chromium treats a file:// document as MHTML only from its extension (.mht /
// .mhtml -> multipart/related), so the message is copied to a temporary .mht
// first. Chromium then parses the whole message as an archive: the main
// document is the first part it can render, and every subresource (img, css,
// frames, backgrounds) is served from the archive only, by Content-Location
// or by cid: against Content-ID; what is not in the archive fails without any
// network access. Scripts do not run in MHTML documents; page.evaluate() runs
// through the DevTools protocol all the same.
//
// Prints one JSON object (see ../README-gui.md). Exit 0 whatever the message
// is; exit 1 only when Chromium or playwright-core cannot run.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const crypto = require('crypto');

const CHROMIUM = process.env.MIMEREF_CHROMIUM || '/usr/bin/chromium';
const PAGE_TIMEOUT_MS = 15000;
const WATCHDOG_MS = 45000;

function die(msg) {
  process.stderr.write(`chromium reader: ${msg}\n`);
  process.exit(1);
}

const input = process.argv[2];
if (!input) die('usage: chromium FILE.eml');
let raw;
try { raw = fs.readFileSync(input); } catch (e) { die(`cannot read ${input}: ${e.message}`); }

let playwright, PNG;
try {
  playwright = require('playwright-core');
  ({ PNG } = require('pngjs'));
} catch (e) {
  die(`node modules missing (run scripts/install-test-deps): ${e.message}`);
}
if (!fs.existsSync(CHROMIUM)) die(`${CHROMIUM} not found (apt-get install chromium)`);

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'mimeref-chromium-'));
const mht = path.join(tmp, 'message.mht');
fs.writeFileSync(mht, raw);
const fileUrl = 'file://' + mht;

function cleanup() {
  try { fs.rmSync(tmp, { recursive: true, force: true }); } catch (_) { /* ignore */ }
}

// Where the screenshot goes: $MIMEREF_INTEROP_OUT or a temporary directory
// that is kept (the driver may want to look at it).
function screenshotPath() {
  const abs = path.resolve(input);
  const tag = crypto.createHash('sha256').update(abs).digest('hex').slice(0, 10);
  const base = path.basename(abs).replace(/[^A-Za-z0-9._-]/g, '_');
  let dir = process.env.MIMEREF_INTEROP_OUT;
  if (dir) fs.mkdirSync(dir, { recursive: true });
  else dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mimeref-chromium-shot-'));
  return path.resolve(dir, `${base}.${tag}.chromium.png`);
}

// SHA-256 over the decoded RGBA pixels (with the size), not over the PNG bytes.
function pixelHash(file) {
  const png = PNG.sync.read(fs.readFileSync(file));
  const h = crypto.createHash('sha256');
  h.update(`${png.width}x${png.height}\n`);
  h.update(png.data);
  return h.digest('hex');
}

// The temporary file name must not leak into the JSON: it differs per run.
function scrub(s) {
  return String(s).split(fileUrl).join('file:///MESSAGE.mht').split(mht).join('/MESSAGE.mht')
    .split(tmp).join('/TMP');
}

// Runs inside each frame of the archive.
function inspectFrame() {
  const out = { refs: [], tags: {}, text: '', title: document.title || '', contentType: document.contentType, baseURI: document.baseURI };
  for (const el of document.querySelectorAll('*')) {
    const t = el.tagName.toLowerCase();
    out.tags[t] = (out.tags[t] || 0) + 1;
  }
  out.text = document.body ? document.body.innerText.replace(/\s+/g, ' ').trim() : '';
  for (const img of document.images) {
    const src = img.getAttribute('src');
    const ok = img.complete && img.naturalWidth > 0;
    out.refs.push({ kind: 'img', ref: src, url: img.currentSrc || img.src, to: ok ? `img ${img.naturalWidth}x${img.naturalHeight} ${img.currentSrc}` : null });
  }
  for (const link of document.querySelectorAll('link[rel~="stylesheet" i]')) {
    let to = null;
    try {
      const n = link.sheet ? link.sheet.cssRules.length : 0;
      if (n > 0) to = `css ${n} rules ${link.href}`;
    } catch (e) {
      to = `css loaded (rules not readable: ${e.name}) ${link.href}`;
    }
    out.refs.push({ kind: 'link', ref: link.getAttribute('href'), url: link.href, to });
  }
  for (const s of document.querySelectorAll('script[src]')) {
    out.refs.push({ kind: 'script', ref: s.getAttribute('src'), url: s.src, to: null });
  }
  for (const el of document.querySelectorAll('*')) {
    const bg = getComputedStyle(el).backgroundImage;
    if (!bg || bg === 'none') continue;
    const re = /url\("?([^")]*)"?\)/g;
    let m;
    while ((m = re.exec(bg)) !== null) {
      const id = el.id ? `#${el.id}` : '';
      out.refs.push({ kind: 'background', el: el.tagName.toLowerCase() + id, ref: m[1], url: m[1], to: null });
    }
  }
  return out;
}

// Which part of the message each archive resource came from: digests of the decoded
// part bodies (parts.py) against the bytes Chromium holds for the resource.
function partDigests() {
  const map = new Map();
  map.parts = [];
  try {
    const r = require('child_process').spawnSync('python3', [path.join(__dirname, 'parts.py'), mht], { encoding: 'utf8', timeout: 20000 });
    map.parts = JSON.parse(r.stdout || '[]');
    for (const p of map.parts) {
      for (const d of p.sha256) map.set(d, (map.has(d) ? map.get(d) + '|' : '') + p.part);
    }
  } catch (_) { /* no mapping: refs keep their descriptions */ }
  return map;
}

// A resource Chromium took from the archive but did not keep (an image that did not
// decode): the part with that Content-ID (cid:) or Content-Location, if only one.
function partByHeader(parts, url) {
  let c = [];
  if (/^cid:/i.test(url)) {
    let id = url.slice(4);
    try { id = decodeURIComponent(id); } catch (_) { /* as is */ }
    c = parts.filter((p) => p.content_id === url.slice(4) || p.content_id === id);
  }
  if (c.length === 0) c = parts.filter((p) => p.content_location === url);
  return c.length ? c.map((p) => p.part).join('|') : null;
}

async function resourceParts(page, digests) {
  const byUrl = new Map();
  if (digests.size === 0) return byUrl;
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Page.enable');
  const tree = await cdp.send('Page.getResourceTree');
  const walk = async (ft) => {
    for (const r of ft.resources) {
      try {
        const c = await cdp.send('Page.getResourceContent', { frameId: ft.frame.id, url: r.url });
        const bufs = c.base64Encoded ? [Buffer.from(c.content, 'base64')]
          : [Buffer.from(c.content, 'utf8'), Buffer.from(c.content.replace(/\r\n/g, '\n'), 'utf8'),
            Buffer.from(c.content.replace(/\r\n/g, '\n').replace(/\n+$/, ''), 'utf8')];
        for (const buf of bufs) {
          const d = crypto.createHash('sha256').update(buf).digest('hex');
          if (digests.has(d)) { byUrl.set(r.url, digests.get(d)); break; }
        }
      } catch (_) {
        // listed but not kept: it came from the archive all the same
        const p = partByHeader(digests.parts, r.url);
        if (p !== null) byUrl.set(r.url, p);
      }
    }
    for (const k of ft.childFrames || []) await walk(k);
  };
  await walk(tree.frameTree);
  await cdp.detach();
  return byUrl;
}

async function main() {
  const started = Date.now();
  const userDataDir = path.join(tmp, 'profile');
  let context;
  try {
    context = await playwright.chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM,
      headless: true,
      viewport: { width: 1024, height: 768 },
      deviceScaleFactor: 1,
      offline: true,
      args: [
        '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync',
        '--disable-extensions', '--disable-default-apps', '--hide-scrollbars',
        '--font-render-hinting=none', '--force-color-profile=srgb',
        // Defence in depth: nothing leaves the machine even if the archive
        // loader were bypassed.
        '--host-resolver-rules=MAP * ~NOTFOUND', '--proxy-server=127.0.0.1:9', '--proxy-bypass-list=<-loopback>',
      ],
      timeout: 30000,
    });
  } catch (e) {
    cleanup();
    die(`cannot start ${CHROMIUM}: ${e.message.split('\n')[0]}`);
  }
  const version = `Chromium ${context.browser() ? context.browser().version() : ''}`.trim();
  const result = {
    reader: 'chromium', version: '', ok: true, error: null,
    extbody: [], parts: [], related: [], refs: [], images: [], defects: [], shown: '',
    screenshot: null, screenshot_sha256: null,
  };
  try {
    const page = context.pages()[0] || await context.newPage();
    // Network outcome per URL (for CSS backgrounds and scripts, which have no
    // DOM-visible load state).
    const net = new Map();
    page.on('requestfinished', async (r) => {
      let status = 0;
      try { const resp = await r.response(); status = resp ? resp.status() : 0; } catch (_) { /* ignore */ }
      net.set(r.url(), { ok: status === 0 || (status >= 200 && status < 400), status });
    });
    page.on('requestfailed', (r) => net.set(r.url(), { ok: false, failure: r.failure() && r.failure().errorText }));
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') result.defects.push(scrub(`console ${m.type()}: ${m.text()}`));
    });
    page.on('pageerror', (e) => result.defects.push(scrub(`page error: ${e.message}`)));

    let resp = null;
    try {
      resp = await page.goto(fileUrl, { waitUntil: 'load', timeout: PAGE_TIMEOUT_MS });
    } catch (e) {
      result.ok = false;
      result.error = scrub(e.message.split('\n')[0]);
    }
    try { await page.waitForLoadState('networkidle', { timeout: 3000 }); } catch (_) { /* best effort */ }
    const ctype = resp ? (resp.headers()['content-type'] || null) : null;

    let partOf = new Map();
    const digests = partDigests();
    try { partOf = await resourceParts(page, digests); } catch (e) {
      result.defects.push(scrub(`resource to part mapping failed: ${e.message.split('\n')[0]}`));
    }
    // Chromium has no attachment list: each leaf says so (attachment null), so that
    // the matrix tells "no list" from "not reported".
    for (const p of digests.parts.filter((x) => !x.inner)) {
      result.parts.push({ part: p.part, content_type: p.content_type || null, content_id: null,
        content_location: null, resolved: null, attachment: null });
    }
    const loaded = [];
    const frames = page.frames();
    const shownFrames = [];
    for (let i = 0; i < frames.length; i++) {
      const fr = frames[i];
      let info;
      try { info = await fr.evaluate(inspectFrame); } catch (e) {
        result.defects.push(scrub(`frame ${i}: not inspectable: ${e.message.split('\n')[0]}`));
        continue;
      }
      const from = i === 0 ? 'root html' : `frame ${scrub(fr.url())}`;
      // Frames: their documents have opaque origins, so look at them from
      // the DevTools side rather than through contentDocument.
      try {
        for (const h of await fr.$$('iframe, frame')) {
          const ref = await h.getAttribute('src');
          const cf = await h.contentFrame();
          let to = null;
          if (cf) {
            let text = '';
            try { text = await cf.evaluate(() => (document.body ? document.body.innerText : '').replace(/\s+/g, ' ').trim()); } catch (_) { /* ignore */ }
            if (cf.url() && cf.url() !== 'about:blank' && !cf.url().startsWith('chrome-error:')) to = `frame ${cf.url()} text=${JSON.stringify(text.slice(0, 80))}`;
          }
          info.refs.push({ kind: 'frame', ref, url: cf ? cf.url() : null, to });
        }
      } catch (e) {
        result.defects.push(scrub(`frame ${i}: frames not inspectable: ${e.message.split('\n')[0]}`));
      }
      for (const r of info.refs) {
        let to = r.to;
        if (r.kind === 'background' || r.kind === 'script') {
          const n = net.get(r.url);
          to = n && n.ok ? `${r.kind === 'script' ? 'script' : 'background'} loaded ${r.url}` : null;
        }
        const fromTxt = r.kind === 'background' ? `${from} ${r.el} background` : `${from} ${r.kind}`;
        // A resource that came from a part of the message is named by that part
        // (IMAP section number), even when it did not decode (the reference
        // worked); what it was is listed in `shown`.
        if (r.kind !== 'frame' && partOf.has(r.url)) {
          loaded.push(`${fromTxt} ${r.ref} -> part ${partOf.get(r.url)}: ${to === null ? 'not decoded/applied' : to}`);
          to = partOf.get(r.url);
        } else if (to !== null) {
          loaded.push(`${fromTxt} ${r.ref} -> ${to}`);
        }
        result.refs.push({ from: fromTxt, ref: r.ref, to: to === null ? null : scrub(to) });
        // An image shows the part it came from when it decoded (a broken image, or one
        // not from the message, names no part); `from` as for refs (Chromium does not
        // say which part its document came from).
        if (r.kind === 'img' || r.kind === 'background') {
          const shownImg = r.to !== null || (r.kind === 'background' && to !== null);
          result.images.push({ from: fromTxt, ref: r.ref,
                               to: shownImg && partOf.has(r.url) ? partOf.get(r.url) : null });
        }
      }
      if (i === 0) {
        result.related.push({ part: '0', type: null, root: scrub(`${info.contentType} ${info.baseURI}`) });
      }
      const tags = Object.keys(info.tags).sort().map((k) => `${k}=${info.tags[k]}`).join(' ');
      shownFrames.push(`${i === 0 ? 'page' : 'frame ' + scrub(fr.url())}: title=${JSON.stringify(info.title)} text=${JSON.stringify(info.text.slice(0, 2000))} tags: ${tags}`);
    }
    result.shown = scrub(`served as ${ctype}; ${shownFrames.join('\n')}` + (loaded.length ? `\nloaded: ${loaded.join('; ')}` : ''));

    const shot = screenshotPath();
    try {
      await page.screenshot({ path: shot, fullPage: true, timeout: 10000 });
      result.screenshot = shot;
      result.screenshot_sha256 = pixelHash(shot);
    } catch (e) {
      result.defects.push(`screenshot failed: ${e.message.split('\n')[0]}`);
    }
  } catch (e) {
    result.ok = false;
    result.error = scrub(e.message.split('\n')[0]);
  } finally {
    try { await context.close(); } catch (_) { /* ignore */ }
    cleanup();
  }
  result.version = version.startsWith('Chromium ') && fs.existsSync('/etc/debian_version') ? `${version} (Debian)` : version;
  if (process.env.MIMEREF_READER_VERBOSE) process.stderr.write(`chromium reader: ${path.basename(input)} in ${Date.now() - started} ms\n`);
  process.stdout.write(JSON.stringify(result) + '\n');
}

const watchdog = setTimeout(() => { cleanup(); die(`gave up after ${WATCHDOG_MS} ms`); }, WATCHDOG_MS);
watchdog.unref();
main().then(() => process.exit(0), (e) => { cleanup(); die(e && e.stack || String(e)); });
