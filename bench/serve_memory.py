#!/usr/bin/python3
"""Memory `ludo serve` holds for clients whose steps return big
observations (docs/performance.md, "Session 20"): N WebSocket clients each
send K steps of spec/fixtures/serve/big answering MIB MiB; with --read the
clients read every reply, without it they read none (slow readers). Prints
the server's RSS and the output it counts (ludo_output_pending_bytes)
after 3 s, then how that count falls as the server ends the slow readers.

usage: bench/serve_memory.py [--ludo build/ludo] [--clients 40]
       [--steps 12] [--mib 4] [--read] [--max-output MB]"""
import argparse
import base64
import os
import re
import socket
import struct
import subprocess
import time
import urllib.request

ap = argparse.ArgumentParser()
ap.add_argument("--ludo", default="build/ludo")
ap.add_argument("--clients", type=int, default=40)
ap.add_argument("--steps", type=int, default=12)
ap.add_argument("--mib", type=int, default=4)
ap.add_argument("--read", action="store_true")
ap.add_argument("--max-output", default=None)
a = ap.parse_args()

args = [a.ludo, "serve", "spec/fixtures/serve/big", "--port", "0",
        "--workers", "1"]
if a.max_output:
    args += ["--max-output", a.max_output]
srv = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
port = int(re.search(r"http://[^:]+:(\d+)", srv.stderr.readline()).group(1))


def rss_mb():
    with open(f"/proc/{srv.pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) // 1024


def pending_mb():
    m = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read()
    v = re.search(rb"^ludo_output_pending_bytes (\d+)", m, re.M)
    return int(v.group(1)) / 2 ** 20


def frame(text):
    p = text.encode()
    n = len(p)
    head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                            bytes([0x80 | 126]) + struct.pack(">H", n))
    return head + b"\0\0\0\0" + p  # mask 0: the payload as it is


def connect():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16))
    s.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
              b"Sec-WebSocket-Key: " + key + b"\r\n\r\n")
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(4096)
    return s, bytearray(buf.split(b"\r\n\r\n", 1)[1])


def read_frame(s, buf):
    def need(n):
        while len(buf) < n:
            d = s.recv(1 << 20)
            if not d:
                raise EOFError
            buf.extend(d)
    need(2)
    n, off = buf[1] & 0x7F, 2
    if n == 126:
        need(4)
        n, off = struct.unpack(">H", buf[2:4])[0], 4
    elif n == 127:
        need(10)
        n, off = struct.unpack(">Q", buf[2:10])[0], 10
    need(off + n)
    op = buf[0] & 0x0F
    del buf[:off + n]
    return op


print(f"ludo serve, {a.clients} clients x {a.steps} steps of {a.mib} MiB, "
      f"{'reading' if a.read else 'not reading'}: RSS at start "
      f"{rss_mb()} MB")
conns = []
for _ in range(a.clients):
    s, buf = connect()
    s.sendall(frame('{"type":"step","data":{"mib":%d}}' % a.mib) * a.steps)
    conns.append((s, buf))
if a.read:
    for s, buf in conns:
        got = 0
        while got < a.steps:
            if read_frame(s, buf) == 1:
                got += 1
t0 = time.time()
for t in (3, 8, 13, 20):
    time.sleep(max(0, t - (time.time() - t0)))
    print(f"  {t:2d} s: RSS {rss_mb()} MB, output counted "
          f"{pending_mb():.1f} MiB")
srv.terminate()
srv.wait()
