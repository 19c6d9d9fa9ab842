#!/usr/bin/python3
"""What it costs when a request reaches a worker that does not own its
session (docs/serve-workers.md): `ludo serve examples/echo --workers 2`,
one keep-alive HTTP connection on each worker, an X-Session-Id session
owned by worker 0, stepped N times through each connection. Prints the
median and p99 round trip of both, and their difference (the forwarding:
two messages between the loops). No thresholds: figures only.

Usage: bench/serve_forward.py [LUDO_BINARY] [N]"""
import http.client
import json
import re
import signal
import statistics
import subprocess
import sys
import time

LUDO = sys.argv[1] if len(sys.argv) > 1 else "build/ludo"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 3000


def start():
    p = subprocess.Popen([LUDO, "serve", "examples/echo", "--port", "0",
                          "--workers", "2"], stderr=subprocess.PIPE,
                         text=True)
    port = int(re.search(r":(\d+) \(", p.stderr.readline()).group(1))
    return p, port


def call(c, method, path, body=None, headers=None):
    c.request(method, path, body=None if body is None else json.dumps(body),
              headers=headers or {})
    r = c.getresponse()
    return r.status, r.read(), dict(r.getheaders())


def conns_by_worker(port):
    got = {}
    while len(got) < 2:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        sid = call(c, "POST", "/reset", {})[2]["X-Session-Id"]
        got.setdefault(int(sid[1]), (c, sid))
    return got


def run(c, sid, n):
    body = {"action": {"message": "hello"}}
    h = {"X-Session-Id": sid}
    times = []
    for _ in range(n):
        t = time.perf_counter()
        st, _, _ = call(c, "POST", "/step", body, h)
        times.append(time.perf_counter() - t)
        assert st == 200, st
    times.sort()
    return statistics.median(times) * 1e6, times[int(len(times) * .99)] * 1e6


def main():
    p, port = start()
    try:
        got = conns_by_worker(port)
        (c0, sid), (c1, _) = got[0], got[1]
        run(c0, sid, 200)  # warm up both paths
        run(c1, sid, 200)
        local = run(c0, sid, N)
        fwd = run(c1, sid, N)
        print(f"HTTP /step on an X-Session-Id session, {N} calls each, "
              "one keep-alive connection:")
        print(f"  on the owning worker:     p50 {local[0]:7.1f} us  "
              f"p99 {local[1]:7.1f} us")
        print(f"  on the other (forwarded): p50 {fwd[0]:7.1f} us  "
              f"p99 {fwd[1]:7.1f} us")
        print(f"  forwarding adds (p50):    {fwd[0] - local[0]:7.1f} us")
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=20)


main()
