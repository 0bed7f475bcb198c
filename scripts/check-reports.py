#!/usr/bin/env python3
"""Renders report pages in headless Chromium and fails on what a reader would see broken.

    check-reports.py [--out DIR] [--browser CMD] [--width PX] [--height PX] PAGE...
    check-reports.py --self-test

Each page is opened from disk at a 1400 x 900 viewport. A page fails when it scrolls
horizontally (the elements that stick out are named, widest first), when an <img> or an
inline <svg> does not render (an image that did not decode, an <svg> of zero size, an
<svg> whose <image> is broken), or when the console shows an error (console.error, an
uncaught exception, a resource that failed to load). Each page leaves two screenshots in
DIR: <name>.png (the first screen) and <name>.full.png (the whole page).

Only the standard library is used: Chromium is driven over the DevTools protocol on a
pipe (--remote-debugging-pipe: it reads commands on fd 3 and writes replies on fd 4,
each a JSON message ended by a NUL byte), so nothing but the browser is installed. Every
read has a deadline and the browser is killed at the end, also on error, so a check
never hangs. Exit status: 0 when every page passes, 1 when one fails, 2 when the browser
could not be driven at all.

--self-test checks the checker: it renders small pages with one known fault each (too
wide, a broken image, a zero-size SVG, an SVG with a broken image, a console error, an
uncaught exception, a missing resource, a page that never finishes) and a good page, and
fails unless each bad page fails for its reason alone and the good page passes.
"""

import argparse
import base64
import fcntl
import json
import os
import pathlib
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

# Generous for a 2.4 MB page with 85 plots on a busy 2-core machine (it loads in ~2 s).
PAGE_TIMEOUT_S = 60.0
# A reply that takes longer than this means the browser is stuck, not slow.
CALL_TIMEOUT_S = 30.0
# Full-page screenshots are clipped here, a bound on their size and time: a whole report
# of 84 plots is 37,000 px tall, 5 MB, and takes 4 s to capture.
MAX_CAPTURE_HEIGHT = 50000
# Problems listed per kind on a page; the rest are counted.
MAX_LISTED = 5

# Runs in the page once it has loaded. Returns what the page measures and what failed in
# it, as plain data. Kept in one function so that the page's own state (after load,
# fonts ready) is what is measured.
CHECK_JS = r"""
(async () => {
  const IMAGE_TIMEOUT_MS = 5000;
  if (document.readyState !== 'complete') {
    await new Promise(r => addEventListener('load', r, { once: true }));
  }
  // Folded sections are measured open: a reader opens them, and what they hold must fit
  // and render too. They are folded again before the screenshots.
  const folded = [...document.querySelectorAll('details:not([open])')];
  for (const d of folded) d.open = true;
  const root = document.documentElement;
  // The viewport less a vertical scrollbar: wider content than this scrolls sideways.
  const viewport = root.clientWidth;
  await document.fonts.ready;
  await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));

  const describe = el => {
    let s = el.localName;
    if (el.id) s += '#' + el.id;
    const cls = typeof el.className === 'string' ? el.className.trim() : '';
    if (cls) s += '.' + cls.split(/\s+/).join('.');
    return s;
  };
  const headings = [...document.querySelectorAll('h1,h2,h3,h4,h5,h6')];
  // The last heading before el: says where on the page el is.
  const section = el => {
    let last = null;
    for (const h of headings) {
      if (h.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING) last = h;
      else break;
    }
    return last ? last.textContent.trim().replace(/\s+/g, ' ').slice(0, 80) : null;
  };
  // What the element says, to recognise it by; a table is told by its columns instead.
  const snippet = el => el.localName === 'table' ? ''
    : (el.innerText || el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 60);
  // hidden, clip, auto and scroll all keep what sticks out inside the box.
  const clipsX = el => getComputedStyle(el).overflowX !== 'visible';

  // Elements sticking out on the right. Those inside a box that clips or scrolls them
  // within the viewport do not make the page scroll and are left out. An element is
  // named when its parent fits (or is <body>): it is where the overflow starts.
  const scrollWidth = root.scrollWidth;
  const overflowing = new Set();
  const culprits = [];
  if (scrollWidth > viewport) {
    for (const el of document.body.querySelectorAll('*')) {
      const r = el.getBoundingClientRect();
      if (r.right + window.scrollX <= viewport + 0.5 || r.width === 0) continue;
      let clipped = false;
      for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
        if (clipsX(a) && a.getBoundingClientRect().right <= viewport + 0.5) {
          clipped = true;
          break;
        }
      }
      if (clipped) continue;
      overflowing.add(el);
      const parent = el.parentElement;
      if (parent === document.body || !overflowing.has(parent)) {
        const item = {
          element: describe(el), width: Math.round(r.width),
          left: Math.round(r.left + window.scrollX), right: Math.round(r.right + window.scrollX),
          section: section(el), text: snippet(el), columns: null,
        };
        // For a table, its widest columns: where the layout can give width back.
        const head = el.localName === 'table' ? el.querySelector('tr') : null;
        if (head) {
          item.columns = [...head.children]
            .map(c => ({ name: c.textContent.trim().slice(0, 30), width: Math.round(c.getBoundingClientRect().width) }))
            .sort((a, b) => b.width - a.width);
        }
        culprits.push(item);
      }
    }
    culprits.sort((a, b) => b.width - a.width);
  }

  // Loads an image address on its own: an <svg> <image> reports no load state, and a
  // data: address that does not decode raises no network error either.
  const decodes = href => {
    const img = new Image();
    img.src = href;
    return Promise.race([
      img.decode().then(() => img.naturalWidth > 0 ? null : 'decoded to zero width',
                        () => 'does not decode'),
      new Promise(r => setTimeout(() => r('not loaded after ' + IMAGE_TIMEOUT_MS + ' ms'), IMAGE_TIMEOUT_MS)),
    ]);
  };
  const shortHref = h => h.length > 80 ? h.slice(0, 77) + '...' : h;

  const images = [...document.images];
  const brokenImages = [];
  for (const img of images) {
    let why = null;
    if (!img.complete) why = await decodes(img.currentSrc || img.src);
    else if (img.naturalWidth === 0) why = 'not rendered (naturalWidth 0)';
    if (why) {
      brokenImages.push({ element: describe(img), src: shortHref(img.currentSrc || img.src || ''),
                          why, section: section(img) });
    }
  }

  // Outermost <svg> elements only: a nested <svg> is part of its parent's drawing.
  const svgs = [...document.querySelectorAll('svg')].filter(s => !s.parentElement.closest('svg'));
  const brokenSvgs = [];
  for (const [i, svg] of svgs.entries()) {
    const r = svg.getBoundingClientRect();
    const where = { element: describe(svg), index: i + 1, section: section(svg) };
    if (r.width === 0 || r.height === 0) {
      brokenSvgs.push({ ...where, why: `zero size (${Math.round(r.width)} x ${Math.round(r.height)} px)` });
    }
    for (const image of svg.querySelectorAll('image')) {
      const raw = image.getAttribute('href') || image.getAttribute('xlink:href');
      const why = raw ? await decodes(new URL(raw, document.baseURI).href) : 'has no href';
      if (why) brokenSvgs.push({ ...where, why: `its <image> ${shortHref(raw || '')} ${why}` });
    }
  }

  for (const d of folded) d.open = false;
  return {
    url: location.href, viewport, scrollWidth, innerWidth: window.innerWidth,
    foldedCount: folded.length,
    scrollHeight: root.scrollHeight,
    svgCount: svgs.length, imageCount: images.length,
    culprits, brokenImages, brokenSvgs,
  };
})()
"""


class CheckError(Exception):
    """The browser could not be driven (not a page failing its checks)."""


class Browser:
    """One headless Chromium, driven over --remote-debugging-pipe."""

    def __init__(self, executable, width, height):
        self.profile = tempfile.mkdtemp(prefix="check-reports-")
        # Our ends: we write commands to `to_browser`, read replies from `from_browser`.
        browser_in, self.to_browser = os.pipe()
        self.from_browser, browser_out = os.pipe()
        args = [
            executable,
            "--headless=new",
            "--disable-gpu",
            "--remote-debugging-pipe",
            f"--user-data-dir={self.profile}",
            f"--window-size={width},{height}",
            "--force-device-scale-factor=1",
            "--hide-crash-restore-bubble",
            # This machine's network is closed: background fetches only add noise.
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--disable-default-apps",
            "--no-first-run",
            "--no-default-browser-check",
            "--mute-audio",
            # Containers often have a small /dev/shm, which crashes renderers.
            "--disable-dev-shm-usage",
            "about:blank",
        ]
        # Chromium's sandbox refuses to run as root.
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")
        # The pipe's ends must be fds 3 and 4 in the browser. Each goes above 4 first,
        # so that placing one cannot overwrite the other.
        def child_fds():
            high_in = fcntl.fcntl(browser_in, fcntl.F_DUPFD, 10)
            high_out = fcntl.fcntl(browser_out, fcntl.F_DUPFD, 10)
            os.dup2(high_in, 3)
            os.dup2(high_out, 4)

        self.log = open(os.path.join(self.profile, "stderr.log"), "wb")
        try:
            # A session of its own, so that the browser and its helpers are killed as one.
            self.proc = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                pass_fds=(3, 4), preexec_fn=child_fds,
                start_new_session=True)
        except OSError as e:
            for fd in (self.to_browser, self.from_browser):
                os.close(fd)
            self.log.close()
            shutil.rmtree(self.profile, ignore_errors=True)
            raise CheckError(f"could not start {executable}: {e}") from e
        finally:
            os.close(browser_in)
            os.close(browser_out)
        # A write to a browser that stopped reading must time out, not block.
        os.set_blocking(self.to_browser, False)
        self.buffer = b""
        self.next_id = 0
        self.events = []  # (sessionId, method, params), in arrival order

    def close(self):
        """Asks the browser to quit, then kills what is left; removes its profile."""
        try:
            if self.proc.poll() is None:
                try:
                    self.call("Browser.close", timeout=5)
                except (CheckError, OSError):
                    pass
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            # Helper processes (renderer, GPU, zygote) share the session's process group.
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        finally:
            for fd in (self.to_browser, self.from_browser):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.log.close()
            shutil.rmtree(self.profile, ignore_errors=True)

    def exit_status(self):
        """The browser's exit status, once it has exited (it may take a moment)."""
        try:
            return self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "none yet: still running"

    def stderr_tail(self, lines=10):
        try:
            with open(os.path.join(self.profile, "stderr.log"), "rb") as f:
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CheckError("no reply from the browser in time")
            ready, _, _ = select.select([self.from_browser], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise CheckError(f"the browser closed its pipe (exit status {self.exit_status()})")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method, params=None, session=None, timeout=CALL_TIMEOUT_S):
        """Sends one command and returns its result; events read meanwhile are kept."""
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        deadline = time.monotonic() + timeout
        while data:
            _, ready, _ = select.select([], [self.to_browser], [], max(0, deadline - time.monotonic()))
            if not ready:
                raise CheckError(f"{method}: the browser takes no commands")
            try:
                data = data[os.write(self.to_browser, data):]
            except BlockingIOError:
                continue
            except BrokenPipeError as e:
                raise CheckError(f"{method}: the browser is gone "
                                 f"(exit status {self.exit_status()})") from e
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise CheckError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append((reply.get("sessionId"), reply["method"], reply.get("params", {})))

    def wait_event(self, session, method, deadline, since=0):
        """Waits for an event of the session, among those read from index `since` on."""
        seen = since
        while True:
            for sid, name, params in self.events[seen:]:
                if sid == session and name == method:
                    return params
            seen = len(self.events)
            reply = self._read_message(deadline)
            if "method" in reply:
                self.events.append((reply.get("sessionId"), reply["method"], reply.get("params", {})))


def where(url, line):
    """A source location as file:line (1-based), short enough for one line."""
    if not url:
        return ""
    name = url.rsplit("/", 1)[-1] or url
    if len(name) > 60:
        name = name[:57] + "..."
    return f" ({name}:{line + 1})" if line is not None and line >= 0 else f" ({name})"


def console_problems(events, session):
    """Console errors, uncaught exceptions and failed loads, as readable lines."""
    problems = []
    urls = {}
    failed_urls = set()
    for sid, method, p in events:
        if sid != session:
            continue
        if method == "Network.requestWillBeSent":
            urls[p["requestId"]] = p["request"]["url"]
        elif method == "Network.loadingFailed":
            url = urls.get(p["requestId"], "?")
            failed_urls.add(url)
            problems.append(f"failed to load {url}: {p.get('errorText', '?')}")
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            text = " ".join(str(a.get("value", a.get("description", a.get("type"))))
                            for a in p.get("args", []))
            frames = (p.get("stackTrace") or {}).get("callFrames") or [{}]
            src = where(frames[0].get("url"), frames[0].get("lineNumber"))
            problems.append(f"console.{p['type']}: {text}{src}")
        elif method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            text = (d.get("exception") or {}).get("description") or d.get("text", "?")
            problems.append(f"uncaught exception: {text.splitlines()[0]}"
                            f"{where(d.get('url'), d.get('lineNumber'))}")
        elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
            e = p["entry"]
            # A failed load is also logged; Network.loadingFailed already named it.
            if e.get("source") == "network" and e.get("url") in failed_urls:
                continue
            problems.append(f"console ({e.get('source', '?')}): {e.get('text', '?')}"
                            f"{where(e.get('url'), e.get('lineNumber'))}")
    return problems


def listed(kind, texts):
    """The first MAX_LISTED problems of a kind as (kind, text), then how many more."""
    out = [(kind, t) for t in texts[:MAX_LISTED]]
    if len(texts) > MAX_LISTED:
        out.append((kind, f"... and {len(texts) - MAX_LISTED} more"))
    return out


def png_size(path):
    """Width and height of a PNG, from its header."""
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return struct.unpack(">II", head[16:24])


def check_page(browser, page, shots, name, width, height, timeout=PAGE_TIMEOUT_S):
    """Renders one page; returns (result line, problems as (kind, text))."""
    deadline = time.monotonic() + timeout
    problems = []
    target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    try:
        session = browser.call("Target.attachToTarget",
                               {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            browser.call(f"{domain}.enable", session=session)
        browser.call("Emulation.setDeviceMetricsOverride",
                     {"width": width, "height": height, "deviceScaleFactor": 1,
                      "mobile": False}, session=session)
        url = page.resolve().as_uri()
        nav = browser.call("Page.navigate", {"url": url}, session=session)
        if nav.get("errorText"):
            return f"could not open: {nav['errorText']}", [("load", nav["errorText"])]
        # Only a load after the navigation was committed is the page's (not about:blank's).
        committed = len(browser.events)
        try:
            browser.wait_event(session, "Page.loadEventFired", deadline, since=committed)
            left = max(1.0, deadline - time.monotonic())
            result = browser.call("Runtime.evaluate",
                                  {"expression": CHECK_JS, "awaitPromise": True,
                                   "returnByValue": True},
                                  session=session, timeout=left)
        except CheckError as e:
            # A stuck page fails; the browser goes on with the next one.
            return (f"did not finish within {timeout:.0f} s",
                    [("timeout", f"the page did not load and settle within {timeout:.0f} s ({e})")]
                    + listed("console", console_problems(browser.events, session)))
        if "exceptionDetails" in result:
            raise CheckError(f"the check script failed: {result['exceptionDetails'].get('text')}")
        m = result["result"]["value"]
        if m["url"] != url:
            raise CheckError(f"checked {m['url']} instead of {url}")

        def under(item):
            return f" under \"{item['section']}\"" if item["section"] else ""

        widths = []
        for c in m["culprits"]:
            text = (f"{c['element']} is {c['width']} px wide (x {c['left']}..{c['right']}, "
                    f"{c['right'] - m['viewport']} px past the viewport){under(c)}"
                    + (f": \"{c['text']}\"" if c["text"] else ""))
            if c["columns"]:
                widest = ", ".join(f"{col['name'] or '?'} {col['width']}"
                                   for col in c["columns"][:4])
                text += f"; {len(c['columns'])} columns, the widest: {widest}"
            widths.append(text)
        if m["scrollWidth"] > m["viewport"] and not widths:
            widths.append(f"the page is {m['scrollWidth']} px wide; "
                          "no single element found sticking out")
        problems += listed("width", widths)
        problems += listed("image", [f"{b['element']} {b['src']}: {b['why']}{under(b)}"
                                     for b in m["brokenImages"]])
        problems += listed("svg", [f"svg {s['index']} of {m['svgCount']} ({s['element']}): "
                                   f"{s['why']}{under(s)}" for s in m["brokenSvgs"]])
        problems += listed("console", console_problems(browser.events, session))

        shots.mkdir(parents=True, exist_ok=True)
        first = shots / f"{name}.png"
        first.write_bytes(base64.b64decode(browser.call(
            "Page.captureScreenshot", {"format": "png"}, session=session)["data"]))
        metrics = browser.call("Page.getLayoutMetrics", session=session)
        size = metrics["cssContentSize"]
        full_height = min(size["height"], MAX_CAPTURE_HEIGHT)
        full = shots / f"{name}.full.png"
        full.write_bytes(base64.b64decode(browser.call(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": True,
             "clip": {"x": 0, "y": 0, "width": max(size["width"], width),
                      "height": full_height, "scale": 1}},
            session=session)["data"]))
        clipped = " (clipped)" if size["height"] > MAX_CAPTURE_HEIGHT else ""
        summary = (f"page width {m['scrollWidth']} px, viewport {m['viewport']} px, {m['svgCount']} svg, "
                   f"{m['imageCount']} img, {shown(first)} (+ {full.name}, "
                   f"{round(size['height'])} px tall{clipped})")
        return summary, problems
    finally:
        try:
            browser.call("Target.closeTarget", {"targetId": target}, timeout=10)
        except CheckError:
            pass
        # Events of a closed page are no longer needed.
        browser.events = [e for e in browser.events if e[0] is None]


def shot_name(page):
    """.../<leg>/<profile>/report.html -> <leg>; any other page -> its file name's stem."""
    if page.name == "report.html" and len(page.resolve().parts) >= 3:
        return page.resolve().parent.parent.name
    return page.stem


def shown(path):
    """A path as printed: relative to the working directory when it lies below it."""
    try:
        return str(pathlib.Path(path).resolve().relative_to(pathlib.Path.cwd()))
    except ValueError:
        return str(path)


def check_pages(browser_name, pages, shots, width, height, timeout=PAGE_TIMEOUT_S, quiet=False):
    """Checks each page in one browser; returns {page: [(kind, text)]} and prints lines."""
    executable = shutil.which(browser_name)
    if not executable:
        raise CheckError(f"no browser: {browser_name} is not on PATH")
    outcome = {}
    browser = Browser(executable, width, height)
    try:
        version = browser.call("Browser.getVersion").get("product", "?")
        if not quiet:
            print(f"{version}, viewport {width}x{height}, screenshots in {shown(shots)}/")
        for page in pages:
            start = time.monotonic()
            summary, problems = check_page(browser, page, shots, shot_name(page),
                                           width, height, timeout)
            outcome[page] = problems
            if not quiet:
                verdict = "FAIL" if problems else "PASS"
                took = time.monotonic() - start
                print(f"{verdict} {shown(page)}: {summary}, {took:.1f} s")
                for kind, text in problems:
                    print(f"  {kind}: {text}")
    except CheckError as e:
        tail = browser.stderr_tail()
        raise CheckError(f"{e}" + (f"\nbrowser's stderr (last lines):\n{tail}" if tail else "")) from e
    finally:
        browser.close()
    return outcome


# The self-test's pages: name -> (page, the kinds of problem it must fail with).
# A 1x1 PNG that decodes, and bytes that do not.
GOOD_PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYPj/HwADAgH/"
            "o2PKWQAAAABJRU5ErkJggg==")
BAD_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB"
PAGE = ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{name}</title>"
        "<style>body{{font-family:sans-serif;margin:2rem auto;max-width:1280px}}"
        "svg{{max-width:100%;height:auto}}</style></head><body><h1>{name}</h1>{body}</body></html>")
PLOT = ("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"600\" height=\"200\" viewBox=\"0 0 600 200\">"
        "<rect x=\"10\" y=\"10\" width=\"580\" height=\"180\" fill=\"#0072b2\"/></svg>")
FIXTURES = {
    "good": ("<p>A table, a plot, an image and an SVG image, all of which fit.</p>"
             "<table><tr><th>cell</th><td>1.0us</td></tr></table>" + PLOT +
             f"<img alt=\"dot\" src=\"data:image/png;base64,{GOOD_PNG}\" width=\"20\" height=\"20\">"
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"40\" height=\"40\">"
             f"<image href=\"data:image/png;base64,{GOOD_PNG}\" width=\"40\" height=\"40\"/></svg>",
             set()),
    "too-wide": ("<div id=\"wide\" style=\"width:1600px;background:#eee\">1600 px wide</div>",
                 {"width"}),
    # A folded section is checked open: its table must fit too.
    "too-wide-folded": ("<details><summary>folded</summary><div id=\"folded\" style=\"width:1700px\">"
                        "1700 px wide</div></details>",
                        {"width"}),
    "broken-img": (f"<img alt=\"broken\" src=\"data:image/png;base64,{BAD_PNG}\">", {"image"}),
    "svg-zero-size": ("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"0\" height=\"0\">"
                      "<rect width=\"10\" height=\"10\"/></svg>", {"svg"}),
    "svg-broken-image": ("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"40\" height=\"40\">"
                         f"<image href=\"data:image/png;base64,{BAD_PNG}\" width=\"40\" height=\"40\"/>"
                         "</svg>", {"svg"}),
    "console-error": ("<script>console.error('fixture: a deliberate console error')</script>",
                      {"console"}),
    "exception": ("<script>null.f()</script>", {"console"}),
    "missing-resource": ("<link rel=\"stylesheet\" href=\"missing.css\">", {"console"}),
    # Never settles: the deadline must end it, and the next page must still be checked.
    "never-settles": ("<script>addEventListener('load', () => { for (;;) {} })</script>",
                      {"timeout"}),
}
# The stuck page waits this long, not the full page timeout.
SELF_TEST_TIMEOUT_S = 5.0


def self_test(browser_name, width, height):
    """Renders each fixture; returns 0 when each fails with exactly its expected kinds."""
    failures = 0
    with tempfile.TemporaryDirectory(prefix="check-reports-self-test-") as tmp:
        tmp = pathlib.Path(tmp)
        pages = []
        for name, (body, _) in FIXTURES.items():
            path = tmp / f"{name}.html"
            path.write_text(PAGE.format(name=name, body=body), encoding="utf-8")
            pages.append(path)
        # The good page last too: a stuck page before it must not spoil it.
        last = tmp / "good-after-stuck.html"
        last.write_text(PAGE.format(name="good-after-stuck", body=FIXTURES["good"][0]),
                        encoding="utf-8")
        pages.append(last)
        shots = tmp / "screenshots"
        outcome = check_pages(browser_name, pages, shots, width, height,
                              SELF_TEST_TIMEOUT_S, quiet=True)
        for page in pages:
            expected = FIXTURES.get(page.stem, FIXTURES["good"])[1]
            problems = outcome[page]
            kinds = {kind for kind, _ in problems}
            ok = kinds == expected
            if not expected and ok:
                # A passing page must also leave its two screenshots, the first at the viewport.
                first, full = shots / f"{page.stem}.png", shots / f"{page.stem}.full.png"
                if png_size(first) != (width, height) or png_size(full) is None:
                    ok = False
                    problems = problems + [("screenshot", f"{first}: {png_size(first)}")]
            failures += not ok
            want = "PASS" if not expected else "FAIL with " + ", ".join(sorted(expected))
            print(f"{'ok' if ok else 'WRONG'} self-test {page.stem}: expected {want}, "
                  f"got {', '.join(f'{k}: {t}' for k, t in problems) or 'PASS'}")
    print(f"self-test: {len(pages) - failures} passed, {failures} failed")
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", type=pathlib.Path, help="HTML files to check")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("target/ipc-matrix/screenshots"),
                        help="where the screenshots go (default: %(default)s)")
    parser.add_argument("--browser", default="chromium",
                        help="the browser's command or path (default: %(default)s)")
    parser.add_argument("--width", type=int, default=1400, help="viewport width (default: %(default)s)")
    parser.add_argument("--height", type=int, default=900, help="viewport height (default: %(default)s)")
    parser.add_argument("--self-test", action="store_true",
                        help="check that each kind of fault is caught, on small fixture pages")
    args = parser.parse_args()
    # A terminated check still kills its browser (the finally blocks run on SystemExit).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        if args.self_test:
            return self_test(args.browser, args.width, args.height)
        if not args.pages:
            parser.error("no page to check")
        missing = [str(p) for p in args.pages if not p.is_file()]
        if missing:
            parser.error(f"no such page: {', '.join(missing)}")
        outcome = check_pages(args.browser, args.pages, args.out, args.width, args.height)
    except CheckError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    failed = sum(1 for p in outcome.values() if p)
    print(f"pages: {len(outcome) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
