#!/usr/bin/python3
"""The report of `ludo eval` in a real browser: writes report.html with
ludo.eval.report (spec/report/make_report.lua, stock lua5.4) for the
fixture run (spec/report/fixtures/), one episode and no episode, opens each
in headless Chromium (Debian's `chromium`) at 1200 px through the DevTools
protocol (Debian's python3-websockets) and checks in the page that every
chart rendered (a non-empty box, the bars and points the results call
for, tick labels), that nothing overflows 1200 px, that the page logged no
error and fetched nothing but itself, and that hostile strings stayed text.
It also takes a full-page screenshot of each (kept in the folder
REPORT_SHOTS names, if set).

Usage: report_test.py [LUDO_BUILD] (LUDO_PRELOAD: libraries to preload into
lua5.4, for an ASan build). Prints "ok NAME" or "FAIL NAME: why"
per check and ends with "N passed, N failed"; exit status 1 on a failure.
"""
import asyncio
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import websockets

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
FIXTURES = "spec/report/fixtures"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
results = {"passed": 0, "failed": 0}


def ok(name):
    print("ok", name)
    results["passed"] += 1


def fail(name, why):
    print(f"FAIL {name}: {why}")
    results["failed"] += 1


def check(name, cond, why=""):
    if cond:
        ok(name)
    else:
        fail(name, why)
    return cond


# ---- the expected figures, computed here from the records --------------

def load_records(folder):
    with open(os.path.join(folder, "results.jsonl")) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    # one record per episode: a non-cancelled record beats a cancelled
    # one, otherwise the later wins (docs/eval-report.md)
    by_ep = {}
    for r in recs:
        prev = by_ep.get(r["episode"])
        if prev is None or status(r) != "cancelled" or \
                status(prev) == "cancelled":
            by_ep[r["episode"]] = r
    return [by_ep[k] for k in sorted(by_ep)]


def status(r):
    if r.get("error") is None:
        return "finished"
    return "cancelled" if r["error"]["class"] == "ECANCELED" else "failed"


def expected(folder):
    eps = load_records(folder)
    fin = [r for r in eps if status(r) == "finished"]
    paths = {p for r in fin for p in (r.get("rubrics") or {})}
    classes = {r["error"]["class"] for r in eps if status(r) == "failed"}
    cancelled = any(status(r) == "cancelled" for r in eps)
    steps = sorted({r["steps"] for r in eps if status(r) != "cancelled"})
    rank = {"failed": 0, "cancelled": 1, "finished": 2}
    failing = sorted((r for r in eps if status(r) != "finished" or
                      r.get("success") is False),
                     key=lambda r: (rank[status(r)], r["episode"]))
    return {
        "reward_sum": len(fin),
        "steps_sum": sum(1 for r in eps if status(r) != "cancelled"),
        "steps_bars": (steps[-1] - steps[0] + 1) if steps else 0,
        "rubric_bars": len(paths),
        "rubric_whiskers": sum(
            1 for p in paths
            if sum(1 for r in fin if p in (r.get("rubrics") or {})) >= 2),
        "points": len(fin),
        "error_bars": len(classes) + (1 if cancelled else 0),
        "failing_rows": len(failing),
        "links": [r["trajectory"] for r in failing
                  if re.fullmatch(r"trajectories/\d+\.jsonl",
                                  r.get("trajectory") or "")],
    }


# ---- the DevTools protocol --------------------------------------------

class DevTools:
    """One WebSocket to the browser; flat sessions per page."""

    def __init__(self, ws):
        self.ws, self.next_id, self.pending = ws, 0, {}
        self.events = []
        self.reader = asyncio.ensure_future(self.read())

    async def read(self):
        async for text in self.ws:
            m = json.loads(text)
            if "id" in m and m["id"] in self.pending:
                self.pending.pop(m["id"]).set_result(m)
            else:
                self.events.append(m)

    async def call(self, method, params=None, session=None, timeout=15):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        fut = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = fut
        await self.ws.send(json.dumps(msg))
        m = await asyncio.wait_for(fut, timeout)
        if "error" in m:
            raise RuntimeError(f"{method}: {m['error']}")
        return m["result"]

    async def wait_event(self, method, session, timeout=15):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for e in self.events:
                if e.get("method") == method and \
                        e.get("sessionId") == session:
                    return e
            await asyncio.sleep(0.02)
        raise TimeoutError(f"no {method} within {timeout} s")

    def session_events(self, session):
        return [e for e in self.events if e.get("sessionId") == session]


def start_chromium(tmp):
    log = open(os.path.join(tmp, "chromium.log"), "w+")
    args = [CHROMIUM, "--headless", "--disable-gpu", "--hide-scrollbars",
            "--no-first-run", "--no-default-browser-check",
            "--disable-extensions", "--disable-background-networking",
            "--disable-sync", "--remote-debugging-port=0",
            "--remote-debugging-address=127.0.0.1",
            f"--user-data-dir={os.path.join(tmp, 'profile')}",
            "about:blank"]
    if os.geteuid() == 0:
        args.insert(1, "--no-sandbox")   # Chromium refuses root otherwise
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log,
                         start_new_session=True)
    end = time.monotonic() + 20
    while time.monotonic() < end:
        log.seek(0)
        m = re.search(r"DevTools listening on (ws://\S+)", log.read())
        if m:
            return p, m.group(1)
        if p.poll() is not None:
            break
        time.sleep(0.05)
    p.kill()
    log.seek(0)
    raise RuntimeError("chromium gave no DevTools URL: " + log.read()[-2000:])


# What the page says about itself, evaluated in the page.
PAGE_FACTS = r"""
(() => {
  const charts = {};
  for (const s of document.querySelectorAll('svg.chart')) {
    const r = s.getBoundingClientRect();
    const bars = [...s.querySelectorAll('rect.bar')];
    const inside = (el) => {
      const b = el.getBoundingClientRect();
      return b.left >= r.left - 1 && b.right <= r.right + 1 &&
             b.top >= r.top - 1 && b.bottom <= r.bottom + 1;
    };
    charts[s.id] = {
      width: r.width, height: r.height,
      bars: bars.length,
      // bars with a count > 0 (all of them in bar charts without
      // data-count) that have a visible box inside the chart
      bars_drawn: bars.filter(b => b.getBoundingClientRect().width > 0 &&
                                   b.getBoundingClientRect().height > 0 &&
                                   inside(b)).length,
      bars_nonzero: bars.filter(b => b.dataset.count === undefined ||
                                     +b.dataset.count > 0).length,
      count_sum: bars.reduce((a, b) => a + (+b.dataset.count || 0), 0),
      data_bars: +(s.dataset.bars || 0),
      data_points: +(s.dataset.points || 0),
      whiskers: s.querySelectorAll('path.whisker').length,
      points: s.querySelectorAll('circle.point').length,
      points_inside: [...s.querySelectorAll('circle.point')]
        .filter(inside).length,
      lines: s.querySelectorAll('path.line').length,
      ticks: s.querySelectorAll('text.tick').length,
      labels: [...s.querySelectorAll('text.label')].map(t => t.textContent),
    };
  }
  const failing = document.querySelectorAll('#failing tr').length - 1;
  return {
    charts,
    failing,
    links: [...document.querySelectorAll('#failing a.traj')]
      .map(a => a.getAttribute('href')),
    hrefs: [...document.querySelectorAll('[href]')]
      .map(a => a.getAttribute('href')),
    scripts: document.querySelectorAll('script').length,
    imgs: document.querySelectorAll('img, iframe, object, embed').length,
    overflow: document.documentElement.scrollWidth - window.innerWidth,
    height: document.documentElement.scrollHeight,
    title: document.title,
    text: document.body.innerText,
  };
})()
"""

CHART_IDS = ["reward-hist", "steps-hist", "rubric-bars", "reward-series",
             "errors-chart"]


async def check_page(dt, name, html, want, shots):
    url = "file://" + os.path.abspath(html)
    target = (await dt.call("Target.createTarget",
                            {"url": "about:blank"}))["targetId"]
    sid = (await dt.call("Target.attachToTarget",
                         {"targetId": target, "flatten": True}))["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        await dt.call(domain + ".enable", session=sid)
    await dt.call("Emulation.setDeviceMetricsOverride",
                  {"width": 1200, "height": 900, "deviceScaleFactor": 1,
                   "mobile": False}, session=sid)
    await dt.call("Page.navigate", {"url": url}, session=sid)
    await dt.wait_event("Page.loadEventFired", sid)
    facts = (await dt.call("Runtime.evaluate",
                           {"expression": PAGE_FACTS, "returnByValue": True},
                           session=sid))["result"]["value"]
    charts = facts["charts"]

    check(f"{name}: every chart is in the page",
          sorted(charts) == sorted(CHART_IDS), sorted(charts))
    boxes = {k: (round(c["width"]), round(c["height"]))
             for k, c in charts.items()}
    check(f"{name}: every chart has a non-empty box",
          all(w > 300 and h > 80 for w, h in boxes.values()), boxes)
    check(f"{name}: every chart has axis ticks and labels",
          all(c["ticks"] >= 2 and c["labels"] for c in charts.values()),
          {k: (c["ticks"], c["labels"]) for k, c in charts.items()})
    if "reward-hist" in charts and "steps-hist" in charts:
        rh, sh = charts["reward-hist"], charts["steps-hist"]
        check(f"{name}: reward histogram bars add up to the finished "
              "episodes, all drawn",
              rh["count_sum"] == want["reward_sum"] and
              rh["bars_drawn"] == rh["bars_nonzero"] and
              rh["bars"] == rh["data_bars"] and
              (rh["bars"] > 0) == (want["reward_sum"] > 0),
              (rh, want["reward_sum"]))
        check(f"{name}: episode-length histogram: a bar per step count",
              sh["bars"] == want["steps_bars"] and
              sh["count_sum"] == want["steps_sum"] and
              sh["bars_drawn"] == sh["bars_nonzero"], (sh, want))
    if "rubric-bars" in charts:
        rb = charts["rubric-bars"]
        check(f"{name}: a rubric bar per path, whiskers where n >= 2",
              rb["bars"] == want["rubric_bars"] and
              rb["bars_drawn"] == rb["bars"] and
              rb["whiskers"] == want["rubric_whiskers"], (rb, want))
    if "reward-series" in charts:
        rs = charts["reward-series"]
        check(f"{name}: a point per finished episode, inside the chart, "
              "and the running mean",
              rs["points"] == rs["points_inside"] == want["points"] and
              rs["lines"] == (1 if want["points"] else 0), (rs, want))
    if "errors-chart" in charts:
        ec = charts["errors-chart"]
        check(f"{name}: a bar per error class and for the cancelled",
              ec["bars"] == ec["bars_drawn"] == want["error_bars"],
              (ec, want))
    check(f"{name}: the failing episodes are listed with their "
          "trajectories",
          (facts["failing"] == want["failing_rows"] or
           (want["failing_rows"] == 0 and facts["failing"] == 1)) and
          facts["links"] == want["links"], (facts["failing"],
                                            facts["links"], want))
    check(f"{name}: nothing wider than 1200 px", facts["overflow"] <= 0,
          facts["overflow"])
    check(f"{name}: no script, image or frame in the page",
          facts["scripts"] == 0 and facts["imgs"] == 0, facts)

    await asyncio.sleep(0.2)   # late console messages and requests
    evs = dt.session_events(sid)
    errors = [e for e in evs if
              (e["method"] == "Runtime.consoleAPICalled" and
               e["params"]["type"] in ("error", "warning", "assert")) or
              e["method"] == "Runtime.exceptionThrown" or
              (e["method"] == "Log.entryAdded" and
               e["params"]["entry"]["level"] in ("error", "warning"))]
    check(f"{name}: no console errors", not errors, errors[:3])
    urls = [e["params"]["request"]["url"] for e in evs
            if e["method"] == "Network.requestWillBeSent"]
    check(f"{name}: no request but the page itself",
          urls == [url], urls)

    metrics = await dt.call("Page.getLayoutMetrics", session=sid)
    height = min(int(metrics["cssContentSize"]["height"]) + 1, 16000)
    shot = await dt.call("Page.captureScreenshot",
                         {"format": "png", "captureBeyondViewport": True,
                          "clip": {"x": 0, "y": 0, "width": 1200,
                                   "height": height, "scale": 1}},
                         session=sid, timeout=30)
    png = base64.b64decode(shot["data"])
    path = os.path.join(shots, f"report-{name}.png")
    with open(path, "wb") as f:
        f.write(png)
    check(f"{name}: screenshot taken ({path})",
          png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10000, len(png))
    await dt.call("Target.closeTarget", {"targetId": target})
    return facts


def write_case(folder, run, records):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "run.json"), "w") as f:
        json.dump(run, f)
    with open(os.path.join(folder, "results.jsonl"), "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def make_report(src, out):
    os.makedirs(out, exist_ok=True)
    env = {**os.environ, "LUDO_BUILD": BUILD}
    if os.environ.get("LUDO_PRELOAD", "").strip():
        # the sanitizer runtimes an ASan build's C modules need (make
        # asan), for lua5.4 only: never for Chromium
        env["LD_PRELOAD"] = os.environ["LUDO_PRELOAD"]
        env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=1"
    p = subprocess.run(["lua5.4", "spec/report/make_report.lua", src, out],
                       env=env, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError("make_report.lua: " + p.stderr[-2000:])
    return os.path.join(out, "report.html")


async def main(tmp, shots):
    with open(os.path.join(FIXTURES, "results.jsonl")) as f:
        one = json.loads(f.readline())
    one.update({"episode": 0, "error": None, "success": True,
                "trajectory": "trajectories/000000.jsonl"})
    write_case(os.path.join(tmp, "one"), {"env": "examples/echo"}, [one])
    write_case(os.path.join(tmp, "empty"),
               {"env": "examples/echo", "episodes_total": 0}, [])
    cases = [("fixture", FIXTURES), ("one", os.path.join(tmp, "one")),
             ("empty", os.path.join(tmp, "empty"))]
    proc, ws_url = start_chromium(tmp)
    try:
        async with websockets.connect(ws_url, max_size=None) as ws:
            dt = DevTools(ws)
            for name, src in cases:
                html = make_report(src, os.path.join(tmp, "out-" + name))
                facts = await check_page(dt, name, html, expected(src),
                                         shots)
                if name == "fixture":
                    check("fixture: hostile strings stay text",
                          '<img src=x onerror="console.error(1)">' in
                          facts["text"] and "<script>console.error('pwned')"
                          "</script>" in facts["text"] and
                          "javascript:alert(1)" not in facts["hrefs"],
                          facts["hrefs"])
            dt.reader.cancel()
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


if __name__ == "__main__":
    started = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="ludo-report-")
    shots = os.environ.get("REPORT_SHOTS") or tmp
    os.makedirs(shots, exist_ok=True)
    try:
        asyncio.run(main(tmp, shots))
    except Exception as e:  # noqa: BLE001 - report, do not hide
        fail("report in Chromium", f"{type(e).__name__}: {e}")
    if os.environ.get("REPORT_SHOTS"):
        print(f"screenshots in {shots}")
    else:
        print("(REPORT_SHOTS=DIR keeps the screenshots)")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{time.monotonic() - started:.1f} s")
    print(f"{results['passed']} passed, {results['failed']} failed")
    sys.exit(1 if results["failed"] else 0)
