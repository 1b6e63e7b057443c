#!/usr/bin/env python3
"""The HTML report in a real browser: Debian's headless Chromium, driven over the DevTools protocol on a
pipe (--remote-debugging-pipe: no network port, no package beyond chromium and python3's standard library).

For a measured result (docs/results, re-rendered by `nibble report`) and two predictions (`nibble bench
--gpu`: H200, which nibble measured, and B200, whose times carry a prediction interval), each page is
loaded in a 1280 x 800 viewport and must:
  - not overflow sideways (document scrollWidth <= 1280), also with every <details> section open;
  - show the headline chart and the summary table whole within the first 800 px;
  - log no console error or exception, and request nothing but the file itself (self-contained);
  - have no table column whose every cell is blank or zero and no empty table cell;
  - predicted: a PREDICTED banner and PREDICTED in every chart title; measured: neither.
A screenshot of each viewport lands in the output folder (NIBBLE_HTML_FULL_PAGE=1: also of the whole page with
its sections open).

Usage: check_html_in_browser.py NIBBLE_BINARY OUTPUT_DIR   (run from the repository root)
Exit status: 0 all checks passed, 1 a check failed, 2 chromium is missing or the browser failed.
"""
import base64
import glob
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

VIEW_W, VIEW_H = 1280, 800
# NIBBLE_HTML_FULL_PAGE=1: also a screenshot of the whole page with its sections open (<name>-open.png).
FULL_PAGE = os.environ.get("NIBBLE_HTML_FULL_PAGE") == "1"
# Every measured benchmark result the docs quote (files of several dates: older ones lack newer fields).
MEASURED = sorted(glob.glob("docs/results/*/bench-*.json"))

# Runs in the page; returns what the checks below judge.
PAGE_FACTS = r"""
(() => {
  const box = (sel) => {
    const e = document.querySelector(sel);
    if (!e) return null;
    const r = e.getBoundingClientRect();
    return {top: r.top + window.scrollY, bottom: r.bottom + window.scrollY, left: r.left, right: r.right};
  };
  const blankCell = (t) => t === '' || t === '-' || /^0[.0]*[x%]?$/.test(t);
  const tables = () => {
    const blankColumns = [], emptyCells = [];
    document.querySelectorAll('table').forEach((t, ti) => {
      const rows = [...t.rows].filter((r) => r.querySelector('td'));
      if (!rows.length) return;
      const n = Math.max(...rows.map((r) => r.cells.length));
      for (let c = 0; c < n; ++c) {
        const cells = rows.map((r) => r.cells[c]).filter((x) => x);
        if (cells.every((x) => blankCell(x.textContent.trim())))
          blankColumns.push(`table ${ti} (${t.className || 'plain'}) column ${c}: ` +
                            ((t.rows[t.rows.length - rows.length - 1] || {cells: []}).cells[c] || {}).textContent);
        cells.filter((x) => x.textContent.trim() === '')
             .forEach((x) => emptyCells.push(`table ${ti} column ${c}`));
      }
    });
    return {blankColumns, emptyCells};
  };
  const facts = {
    scrollWidth: document.documentElement.scrollWidth,
    headline: box('#headline svg'),
    summary: box('#summary table'),
    charts: document.querySelectorAll('svg').length,
    chartTitles: [...document.querySelectorAll('svg text.chart-title')].map((t) => t.textContent),
    banner: [...document.querySelectorAll('.banner')].map((b) => b.textContent),
    ...tables(),
  };
  document.querySelectorAll('details').forEach((d) => { d.open = true; });
  facts.details = document.querySelectorAll('details').length;
  facts.scrollWidthOpen = document.documentElement.scrollWidth;
  facts.pageHeightOpen = document.documentElement.scrollHeight;
  return JSON.stringify(facts);
})()
"""


class Browser:
    """Headless Chromium over --remote-debugging-pipe: commands on fd 3, answers and events on fd 4,
    each message one JSON text ended by a NUL byte."""

    def __init__(self, chromium, profile_dir, log):
        cmd_r, self.cmd_w = os.pipe()
        self.res_r, res_w = os.pipe()
        args = [chromium, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                f"--user-data-dir={profile_dir}", f"--window-size={VIEW_W},{VIEW_H}", "about:blank"]
        # bash puts the pipe ends on the fds the protocol names (3: commands in, 4: messages out).
        self.proc = subprocess.Popen(["bash", "-c", f'exec "$@" 3<&{cmd_r} 4>&{res_w}', "chromium", *args],
                                     pass_fds=(cmd_r, res_w), stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        os.close(cmd_r)
        os.close(res_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.res_r], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self.res_r, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe (see its log)")
            self.buffer += chunk
        text, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(text)

    def send(self, method, params=None, tab=None, timeout=30):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if tab:
            message["sessionId"] = tab
        os.write(self.cmd_w, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method, tab, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == method and e.get("sessionId") == tab:
                    return self.events.pop(i)
            self.events.append(self._read_message(deadline))

    def close(self):
        try:
            self.send("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def render_pages(nibble, out_dir):
    """The pages under test: (name, path, predicted)."""
    pages = [("measured-" + os.path.basename(os.path.dirname(f)) + "-" + os.path.basename(f)[:-5],
              [nibble, "report", f], False) for f in MEASURED]
    if not pages:
        raise SystemExit("check_html_in_browser: no docs/results/*/bench-*.json: run from the repository root")
    pages += [("predicted-h200", [nibble, "bench", "--gpu", "H200", "--quiet"], True),
             ("predicted-b200", [nibble, "bench", "--gpu", "B200", "--mode", "all", "--quiet"], True),
             ("predicted-moe", [nibble, "bench", "--gpu", "H100", "--experts", "8", "--top-k", "2", "--moe-ffn",
                               "4096", "--token-imbalance", "2", "--keep-bf16", "first:2,last:2", "--grad-accum", "4",
                               "--quiet"], True)]
    out = []
    for name, cmd, predicted in pages:
        path = os.path.join(out_dir, name + ".html")
        subprocess.run(cmd + ["--html", path], check=True, stdout=subprocess.DEVNULL)
        out.append((name, path, predicted))
    return out


def page_problems(facts, predicted, console):
    """Every failed check of one page, as sentences."""
    bad = []
    if facts["scrollWidth"] > VIEW_W:
        bad.append(f"the page overflows sideways: scrollWidth {facts['scrollWidth']} > {VIEW_W}")
    if facts["scrollWidthOpen"] > VIEW_W:
        bad.append(f"with its sections open the page overflows sideways: scrollWidth {facts['scrollWidthOpen']}")
    for what in ("headline", "summary"):
        b = facts[what]
        if b is None:
            bad.append(f"no {what} element")
        elif b["top"] < 0 or b["bottom"] > VIEW_H or b["left"] < 0 or b["right"] > VIEW_W:
            bad.append(f"the {what} is not whole above the fold of {VIEW_W}x{VIEW_H}: {b}")
    bad += [f"blank column: {c}" for c in facts["blankColumns"]]
    bad += [f"empty cell: {c}" for c in facts["emptyCells"]]
    if facts["details"] < 2:
        bad.append(f"{facts['details']} collapsed sections; the per-GEMM and per-layer detail belong in <details>")
    titles = facts["chartTitles"]
    if len(titles) != facts["charts"] or facts["charts"] < 3:
        bad.append(f"{facts['charts']} charts with {len(titles)} titles (expected at least 3, each titled)")
    if predicted:
        bad += [f"chart title without PREDICTED: {t!r}" for t in titles if "PREDICTED" not in t]
        if not any("PREDICTED" in b for b in facts["banner"]):
            bad.append("no PREDICTED banner")
    else:
        bad += [f"a measured page says PREDICTED: {t!r}" for t in titles + facts["banner"] if "PREDICTED" in t]
    bad += [f"console: {c}" for c in console]
    return bad


def console_problems(events, tab):
    """Console errors, exceptions and requests for anything but local files, from the page's events."""
    out = []
    for e in events:
        if e.get("sessionId") != tab:
            continue
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console." + p["type"] + ": " + " ".join(str(a.get("value", a.get("description")))
                                                                  for a in p.get("args", [])))
        elif m == "Runtime.exceptionThrown":
            out.append("exception: " + p.get("exceptionDetails", {}).get("text", ""))
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append("log error: " + p["entry"].get("text", "") + " " + p["entry"].get("url", ""))
        elif m == "Network.requestWillBeSent":
            url = p.get("request", {}).get("url", "")
            if not url.startswith(("file:", "data:", "about:")):
                out.append("requested " + url + " (the report must be self-contained)")
    return out


def check_page(browser, name, path, predicted, out_dir):
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    tab = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.send(domain + ".enable", tab=tab)
    browser.send("Emulation.setDeviceMetricsOverride",
                 {"width": VIEW_W, "height": VIEW_H, "deviceScaleFactor": 1, "mobile": False}, tab=tab)
    browser.send("Page.navigate", {"url": "file://" + os.path.abspath(path)}, tab=tab)
    browser.wait_event("Page.loadEventFired", tab)
    shot = browser.send("Page.captureScreenshot", {"format": "png"}, tab=tab)
    with open(os.path.join(out_dir, name + ".png"), "wb") as f:
        f.write(base64.b64decode(shot["data"]))
    result = browser.send("Runtime.evaluate", {"expression": PAGE_FACTS, "returnByValue": True}, tab=tab)
    if "exceptionDetails" in result:
        raise RuntimeError(f"{name}: the page checks threw: {result['exceptionDetails']}")
    facts = json.loads(result["result"]["value"])
    if FULL_PAGE:
        full = browser.send("Page.captureScreenshot",
                            {"format": "png", "captureBeyondViewport": True,
                             "clip": {"x": 0, "y": 0, "width": VIEW_W, "height": min(facts["pageHeightOpen"], 16000),
                                      "scale": 1}},
                            tab=tab)
        with open(os.path.join(out_dir, name + "-open.png"), "wb") as f:
            f.write(base64.b64decode(full["data"]))
    problems = page_problems(facts, predicted, console_problems(browser.events, tab))
    browser.send("Target.closeTarget", {"targetId": target})
    return facts, problems


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    nibble, out_dir = sys.argv[1], sys.argv[2]
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("check_html_in_browser: chromium not found: install the Debian package chromium "
              "(bash tools/setup.sh installs it)", file=sys.stderr)
        return 2
    os.makedirs(out_dir, exist_ok=True)
    pages = render_pages(nibble, out_dir)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="nibble-chromium-") as profile, \
            open(os.path.join(out_dir, "chromium.log"), "w") as log:
        browser = Browser(chromium, profile, log)
        try:
            for name, path, predicted in pages:
                facts, problems = check_page(browser, name, path, predicted, out_dir)
                print(f"{name}: scrollWidth {facts['scrollWidth']} (sections open: {facts['scrollWidthOpen']}), "
                      f"headline chart y {facts['headline']['top']:.0f}-{facts['headline']['bottom']:.0f}, "
                      f"summary y {facts['summary']['top']:.0f}-{facts['summary']['bottom']:.0f}, "
                      f"{facts['charts']} charts, {facts['details']} collapsed sections; "
                      f"screenshot {os.path.join(out_dir, name + '.png')}")
                for p in problems:
                    print(f"  FAILED {name}: {p}")
                failed += bool(problems)
        finally:
            browser.close()
    print(f"{len(pages) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
