#!/usr/bin/env node
// The survey's HTML page in a real browser: headless Chromium (the interop reader's,
// driven by the same playwright-core) opens PAGE.html with the network cut off,
// takes a full-page screenshot at 1280 px and at 390 px (a phone), and fails on
// any console message of level error or warning (a CSP violation is one), any page
// error, any request other than the page itself, any element whose text overflows
// its box, and a page wider than the window.
//
// The page forbids scripts; the measurements run through the DevTools protocol
// (page.evaluate), which the page's Content-Security-Policy does not govern.
//
// Usage: page.js PAGE.html OUTDIR   (screenshots OUTDIR/page-1280.png, page-390.png,
// and of the first screen page-1280-top.png, page-390-top.png; prints one line per
// width with the screenshot's size). Exit 1 on any failure.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

const CHROMIUM = process.env.MIMEREF_CHROMIUM || '/usr/bin/chromium';
const [input, outdir] = process.argv.slice(2);
if (!input || !outdir) {
  process.stderr.write('usage: page.js PAGE.html OUTDIR\n');
  process.exit(2);
}
const playwright = require('playwright-core');
const pageUrl = 'file://' + path.resolve(input);
const problems = [];

// Every element whose content is wider than its box (text that runs out of it),
// unless it scrolls on purpose; and the document against the window.
function overflowing() {
  const out = [];
  for (const el of document.querySelectorAll('body *')) {
    if (el.closest('svg')) continue;
    const cs = getComputedStyle(el);
    if (cs.display === 'none' || cs.overflowX === 'auto' || cs.overflowX === 'scroll') continue;
    if (el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0) {
      out.push(`${el.tagName.toLowerCase()}${el.id ? '#' + el.id : ''}.${el.className}: ` +
        `content ${el.scrollWidth} px in ${el.clientWidth} px: ${el.textContent.slice(0, 60)}`);
    }
    const r = el.getBoundingClientRect();
    if (r.right > document.documentElement.clientWidth + 1 && r.width > 0) {
      out.push(`${el.tagName.toLowerCase()}.${el.className}: right edge ${Math.round(r.right)} past the window`);
    }
  }
  if (document.documentElement.scrollWidth > window.innerWidth) {
    out.push(`page ${document.documentElement.scrollWidth} px wide in a ${window.innerWidth} px window`);
  }
  return out.slice(0, 20);
}

async function main() {
  fs.mkdirSync(outdir, { recursive: true });
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'mimeref-page-'));
  const context = await playwright.chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    offline: true,
    viewport: { width: 1280, height: 900 },
    deviceScaleFactor: 1,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-extensions', '--disable-default-apps', '--hide-scrollbars',
      '--host-resolver-rules=MAP * ~NOTFOUND', '--proxy-server=127.0.0.1:9',
    ],
    timeout: 30000,
  });
  try {
    const page = context.pages()[0] || await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    // Every request is seen here first: only the page itself may load.
    await page.route('**/*', (route) => {
      const url = route.request().url();
      if (url === pageUrl) return route.continue();
      problems.push(`request: ${url.slice(0, 120)}`);
      return route.abort();
    });
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 900 });
      await page.goto(pageUrl, { waitUntil: 'load', timeout: 20000 });
      for (const p of await page.evaluate(overflowing)) problems.push(`${width} px: ${p}`);
      const shot = path.join(outdir, `page-${width}.png`);
      await page.screenshot({ path: shot, fullPage: true });
      // The first screen alone, to look at.
      const top = path.join(outdir, `page-${width}-top.png`);
      await page.screenshot({ path: top, fullPage: false });
      const height = await page.evaluate(() => document.documentElement.scrollHeight);
      console.log(`${width} px: ${shot} ${fs.statSync(shot).size} octets, ${width}x${height} px`);
    }
    // A script the page carried would have run by now; there must be none.
    const scripts = await page.evaluate(() => document.scripts.length);
    if (scripts !== 0) problems.push(`${scripts} script element(s)`);
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

main().then(() => {
  if (problems.length) {
    for (const p of problems) process.stderr.write(`page.js: ${p}\n`);
    process.exit(1);
  }
}, (e) => {
  process.stderr.write(`page.js: ${e.stack || e}\n`);
  process.exit(1);
});
