"""A headless Chromium driven through its DevTools protocol over a pipe (--remote-debugging-pipe), for
the report tests (report_test.py). No port, no network, no extra package: the browser reads commands on
fd 3 and writes replies on fd 4, each a JSON message ending in a NUL byte.

What it records for a page: console messages of level error, uncaught exceptions, log entries of level
error (a Content-Security-Policy refusal lands there), and every network request the page makes.
Usage:
    with Browser(work_dir) as b:
        page = b.open("file:///.../report.html")
        page.errors, page.requests; page.eval("document.title"); page.screenshot_element("#view-gate", "gate.png")
"""
import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time

CHROMIUM = os.environ.get("SP_CHROMIUM", "/usr/bin/chromium")
# As root Chromium needs --no-sandbox; the rest keeps it from reaching anything on its own.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-extensions", "--disable-default-apps",
         "--mute-audio", "--hide-scrollbars", "--remote-debugging-pipe"]


class BrowserError(Exception):
    pass


class Browser:
    def __init__(self, work_dir, timeout=60):
        self.work_dir = work_dir
        self.timeout = timeout
        self.proc = None
        self.next_id = 0
        self.buffer = b""
        self.events = []

    def __enter__(self):
        self.profile = tempfile.mkdtemp(prefix="chromium-", dir=self.work_dir)
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()
        # The child sees the command pipe as fd 3 and the reply pipe as fd 4. The pipes' own descriptors
        # are moved above 10 first (so dup2 cannot overwrite one with the other) and are close-on-exec,
        # like every descriptor Python opens: only 3 and 4 (dup2 clears the flag) reach chromium.
        hi_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD_CLOEXEC, 10)
        hi_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(to_browser_r)
        os.close(from_browser_w)

        def child_fds():
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)
        self.log = open(os.path.join(self.work_dir, "chromium.log"), "wb")
        self.proc = subprocess.Popen([CHROMIUM] + FLAGS + ["--user-data-dir=" + self.profile, "about:blank"],
                                     stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL,
                                     preexec_fn=child_fds, close_fds=False)
        to_browser_r, from_browser_w = hi_r, hi_w
        os.close(to_browser_r)
        os.close(from_browser_w)
        return self

    def __exit__(self, *exc):
        try:
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_browser)
        os.close(self.from_browser)
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            if time.time() > deadline:
                raise BrowserError("no reply from chromium within the timeout (see chromium.log)")
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise BrowserError("chromium closed its DevTools pipe (see chromium.log)")
            self.buffer += chunk
        msg, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_browser, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method, session, deadline):
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == method and e.get("sessionId") == session:
                    return self.events.pop(i)
            self.events.append(self._read_message(deadline))

    def open(self, url, width=1400, height=1000):
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(domain + ".enable", session=session)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=session)
        self.call("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired", session, time.time() + self.timeout)
        deadline = time.time() + self.timeout
        while page.eval("document.body && document.body.getAttribute('data-sp-ready')") != "1":
            if time.time() > deadline:
                break  # the page never finished drawing: the caller sees it in errors / missing views
            time.sleep(0.05)
        page.url = url
        page.collect()
        return page


class Page:
    def __init__(self, browser, session):
        self.b = browser
        self.session = session
        self.url = None
        self.errors = []
        self.requests = []

    def collect(self):
        """Moves this page's recorded events into errors and requests."""
        keep = []
        for e in self.b.events:
            if e.get("sessionId") != self.session:
                keep.append(e)
                continue
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                self.errors.append("console." + p["type"] + ": " + " ".join(str(a.get("value", a.get("description", "")))
                                                                          for a in p.get("args", [])))
            elif m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                self.errors.append("exception: " + str(d.get("exception", {}).get("description", d.get("text"))))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                self.errors.append("log: " + p["entry"].get("text", "") + " " + p["entry"].get("url", ""))
            elif m == "Network.requestWillBeSent":
                self.requests.append(p.get("request", {}).get("url", ""))
        self.b.events = keep

    def eval(self, expression):
        r = self.b.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                        session=self.session)
        if "exceptionDetails" in r:
            raise BrowserError(f"evaluate {expression[:80]!r}: {r['exceptionDetails'].get('text')} "
                               f"{r['exceptionDetails'].get('exception', {}).get('description', '')}")
        return r.get("result", {}).get("value")

    def network_requests(self):
        """Requests other than the page's own document."""
        self.collect()
        return [u for u in self.requests if u != self.url]

    def screenshot_element(self, selector, path):
        box = self.eval(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
            if (!e) return null; const r = e.getBoundingClientRect();
            return [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height]; }})()""")
        if box is None:
            raise BrowserError(f"no element {selector}")
        x, y, w, h = box
        shot = self.b.call("Page.captureScreenshot",
                           {"format": "png", "captureBeyondViewport": True,
                            "clip": {"x": x, "y": y, "width": max(w, 1), "height": max(h, 1), "scale": 1}},
                           session=self.session)
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        return path
