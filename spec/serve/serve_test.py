#!/usr/bin/python3
"""Functional tests of `ludo serve` with an independent client: Python's
http.client and websockets (Debian's python3-websockets), speaking
OpenEnv's protocol as its stock clients do (OPENENV.md 1, 2, 4).

Usage: serve_test.py LUDO_BINARY. Prints "ok NAME" or "FAIL NAME: why" per
test and ends with "N passed, N failed"; exit status 1 on any failure."""
import asyncio
import http.client
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time

import websockets

LUDO = sys.argv[1] if len(sys.argv) > 1 else "build/ludo"
results = {"passed": 0, "failed": 0}


class Server:
    """A `ludo serve` process on a free port."""

    def __init__(self, env="examples/echo", *args):
        self.p = subprocess.Popen([LUDO, "serve", env, "--port", "0", *args],
                                  stderr=subprocess.PIPE, text=True)
        line = self.p.stderr.readline()
        m = re.search(r"http://[^:]+:(\d+)", line)
        if not m:
            raise RuntimeError("no port in: " + line)
        self.port = int(m.group(1))

    def http(self, method, path, body=None, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        data = body if isinstance(body, (bytes, str)) or body is None \
            else json.dumps(body)
        c.request(method, path, body=data, headers=headers or {})
        r = c.getresponse()
        text = r.read()
        c.close()
        try:
            value = json.loads(text) if text else None
        except ValueError:
            value = text.decode()
        return r.status, value, dict(r.getheaders())

    def ws(self, path="/ws", **kw):
        return websockets.connect(f"ws://127.0.0.1:{self.port}{path}",
                                  max_size=100 * 2 ** 20, **kw)

    def stop(self, sig=signal.SIGTERM):
        if self.p.poll() is None:
            self.p.send_signal(sig)
        try:
            return self.p.wait(timeout=20)
        finally:
            self.p.stderr.close()


def check(cond, why):
    if not cond:
        raise AssertionError(why)


def test(fn):
    name = fn.__name__
    try:
        r = fn()
        if asyncio.iscoroutine(r):
            asyncio.run(asyncio.wait_for(r, 60))
        print("ok", name)
        results["passed"] += 1
    except Exception as e:  # noqa: BLE001 - report every failure
        print(f"FAIL {name}: {type(e).__name__}: {e}")
        results["failed"] += 1
    return fn


async def rpc(ws, msg):
    await ws.send(json.dumps(msg))
    return json.loads(await ws.recv())


S = Server()


@test
def routes_read_only():
    st, v, _ = S.http("GET", "/health")
    check(st == 200 and v == {"status": "healthy"}, v)
    st, v, _ = S.http("GET", "/metadata")
    check(st == 200 and v["name"] == "echo_env" and
          isinstance(v["description"], str) and v["version"] == "1.0.0", v)
    st, v, _ = S.http("GET", "/schema")
    check(st == 200 and all(isinstance(v[k], dict) for k in
                            ("action", "observation", "state", "reset")), v)
    check(v["action"]["properties"]["message"]["type"] == "string", v)
    st, v, _ = S.http("GET", "/nope")
    check(st == 404 and v == {"detail": "Not Found"}, v)
    st, v, _ = S.http("POST", "/health")
    check(st == 405 and v == {"detail": "Method Not Allowed"}, v)


@test
def openenv_validate_criteria():
    # openenv validate --url: the six criteria (OPENENV.md 7.2)
    st, v, _ = S.http("GET", "/openapi.json")
    check(st == 200 and isinstance(v["info"]["version"], str), v)
    paths = v["paths"]
    check(all(p in paths for p in ("/reset", "/step", "/state")), paths)
    st, v, _ = S.http("POST", "/mcp", {})
    check(st == 200 and v["jsonrpc"] == "2.0" and "error" in v, v)


@test
def metrics_text():
    S.http("POST", "/step", {"action": {"message": "hi"}})
    st, v, h = S.http("GET", "/metrics")
    check(st == 200 and h["Content-Type"].startswith("text/plain"), h)
    for name in ("ludo_sessions_open", "ludo_sessions_opened_total",
                 "ludo_step_seconds_bucket", "ludo_errors_total",
                 "ludo_received_bytes_total", "ludo_sent_bytes_total"):
        check(name in v, name)
    m = re.search(r"^ludo_step_seconds_count (\d+)$", v, re.M)
    check(m and int(m.group(1)) >= 1, "no step counted")


@test
def http_session_flow():
    st, v, h = S.http("POST", "/reset", {"seed": 3})
    check(st == 200 and "observation" in v and v["done"] is False, v)
    sid = h["X-Session-Id"]
    st, v, _ = S.http("POST", "/step", {"action": {"message": "hello"}},
                      {"X-Session-Id": sid})
    check(st == 200 and v["observation"]["echoed_message"] == "hello", v)
    check(v["metadata"] == v["observation"]["metadata"], v)
    check(abs(v["reward"] - v["metadata"]["rubrics"]["total"]) < 1e-12, v)
    st, v, _ = S.http("GET", "/state?session_id=" + sid)
    check(st == 200 and v["step_count"] == 1, v)
    st, v, _ = S.http("GET", "/state", headers={"X-Session-Id": "nope"})
    check(st == 404 and "nope" in v["detail"], v)


@test
def http_stateless_and_validation():
    # OpenEnv's tests/envs/test_websockets.py: step without reset
    st, v, _ = S.http("POST", "/step", {"action": {
        "type": "call_tool", "tool_name": "echo_message",
        "arguments": {"message": "Hi"}}})
    check(st == 200 and v["observation"]["result"]["data"] == "Hi", v)
    st, v, _ = S.http("GET", "/state")
    check(st == 200 and v["step_count"] == 0, v)
    st, v, _ = S.http("POST", "/step", {})
    check(st == 422 and v["detail"][0]["loc"] == ["body", "action"], v)
    st, v, _ = S.http("POST", "/reset", {"seed": -1})
    check(st == 422 and v["detail"][0]["type"] == "greater_than_equal", v)
    st, v, _ = S.http("POST", "/step", {"action": {"message": 5}})
    check(st == 422 and v["detail"][0]["loc"] == ["message"], v)
    st, v, _ = S.http("POST", "/reset", "{not json")
    check(st == 422, v)


@test
async def ws_appendix_b():
    async with S.ws() as ws:
        v = await rpc(ws, {"type": "reset", "data": {}})
        check(v["type"] == "observation" and
              v["data"]["observation"]["echoed_message"] ==
              "Echo environment ready!" and v["data"]["done"] is False, v)
        v = await rpc(ws, {"type": "step", "data": {"type": "list_tools"}})
        names = [t["name"] for t in v["data"]["observation"]["tools"]]
        check(names == ["echo_message", "echo_with_length"], v)
        check(v["data"]["reward"] is None, v)
        v = await rpc(ws, {"type": "step", "data": {
            "type": "call_tool", "tool_name": "echo_message",
            "arguments": {"message": "Hello"}}})
        obs = v["data"]["observation"]
        check(obs["tool_name"] == "echo_message" and obs["error"] is None and
              obs["result"]["data"] == "Hello" and
              obs["result"]["content"][0]["text"] == "Hello", v)
        v = await rpc(ws, {"type": "step", "data": {
            "type": "call_tool", "tool_name": "echo_with_length",
            "arguments": {"message": "abc"}}})
        check(v["data"]["observation"]["result"]["data"] ==
              {"message": "abc", "length": 3}, v)
        v = await rpc(ws, {"type": "state"})
        check(v == {"type": "state", "data": {
            "episode_id": v["data"]["episode_id"], "step_count": 3}}, v)
        await ws.send(json.dumps({"type": "close"}))
        try:
            await asyncio.wait_for(ws.recv(), 5)
            check(False, "a reply to close")
        except websockets.ConnectionClosed as e:
            check(e.code == 1000, e)


@test
async def ws_error_codes():
    async with S.ws() as ws:
        v = await rpc(ws, "not json" and "{oops")
        check(v["type"] == "error" and
              v["data"]["code"] == "INVALID_JSON", v)
        v = await rpc(ws, {"type": "fly"})
        check(v["data"]["code"] == "UNKNOWN_TYPE" and
              v["data"]["message"] == "Unknown message type: fly", v)
        v = await rpc(ws, {"data": {}})
        check(v["data"]["code"] == "UNKNOWN_TYPE", v)
        v = await rpc(ws, {"type": "state", "data": {}})
        check(v["data"]["code"] == "VALIDATION_ERROR" and
              v["data"]["errors"][0]["type"] == "extra_forbidden", v)
        v = await rpc(ws, {"type": "step"})
        check(v["data"]["code"] == "VALIDATION_ERROR" and
              v["data"]["errors"][0]["type"] == "missing", v)
        v = await rpc(ws, {"type": "step", "data": {"message": 7}})
        check(v["data"]["code"] == "VALIDATION_ERROR" and
              v["data"]["errors"][0]["loc"] == ["message"], v)
        v = await rpc(ws, {"type": "step", "data": {"message": "still"}})
        check(v["type"] == "observation", v)   # the session stayed open
        await ws.send("[]")
        v = json.loads(await ws.recv())
        check(v["data"]["code"] == "SESSION_ERROR", v)
        try:
            await asyncio.wait_for(ws.recv(), 5)
            check(False, "still open after a non-object frame")
        except websockets.ConnectionClosed:
            pass
    async with S.ws() as ws:
        await ws.send(b"\x01\x02")
        v = json.loads(await ws.recv())
        check(v["data"]["code"] == "SESSION_ERROR", v)
        try:
            await asyncio.wait_for(ws.recv(), 5)
            check(False, "still open after a binary frame")
        except websockets.ConnectionClosed:
            pass


@test
async def ws_fast_and_full_paths():
    """Messages of the common shape are scanned (their data goes to the
    session as sent), the others decoded with jansson: alike answers."""
    async def send(text):
        await ws.send(text)
        return json.loads(await ws.recv())
    async with S.ws() as ws:
        v = await send('{"type": "reset", "data" : { } }')
        check(v["type"] == "observation", v)
        v = await send('{"data" : {"message" : "h\\u00e9\\"llo"},'
                       ' "type":"step"}')
        check(v["data"]["observation"]["echoed_message"] == 'h\u00e9"llo', v)
        v = await send(' {"type":"state"}')   # leading space: jansson
        check(v["type"] == "state" and v["data"]["step_count"] == 1, v)
        v = await send('{"type":"fly","type":"state"}')  # the last wins
        check(v["type"] == "state", v)
        v = await send('{"type":"step","data":{"message":"a\\u0000b"}}')
        check(v["data"]["code"] == "INVALID_JSON", v)  # as jansson says
        v = await send('{"type":"reset","data":null}')
        check(v["type"] == "observation", v)
        v = await send('{"type":"step","data":null}')
        check(v["data"]["code"] == "VALIDATION_ERROR" and
              v["data"]["errors"][0]["type"] == "dict_type", v)
        for i in range(20):   # sent ahead: replies in order
            await ws.send(json.dumps({"type": "step",
                                      "data": {"message": f"m{i}"}}))
        for i in range(20):
            v = json.loads(await ws.recv())
            check(v["data"]["observation"]["echoed_message"] == f"m{i}", v)
        big = "x" * 70000     # a reply frame with a 64-bit length
        v = await send(json.dumps({"type": "step",
                                   "data": {"message": big}}))
        check(v["data"]["observation"]["echoed_message"] == big and
              v["data"]["observation"]["message_length"] == 70000,
              "the long message came back changed")


@test
async def ws_execution_error():
    b = Server("spec/fixtures/serve/boom")
    try:
        async with b.ws() as ws:
            v = await rpc(ws, {"type": "step", "data": {"boom": True}})
            check(v["data"]["code"] == "EXECUTION_ERROR" and
                  "boom on purpose" in v["data"]["message"], v)
            v = await rpc(ws, {"type": "step", "data": {"boom": False}})
            check(v["data"]["observation"] == {"fine": True,
                                               "metadata": {}}, v)
            v = await rpc(ws, {"type": "mcp", "data": {
                "jsonrpc": "2.0", "method": "tools/list", "id": 3}})
            check(v["data"]["error"]["code"] == -32603, v)
    finally:
        check(b.stop() == 0, "exit status")


@test
async def ws_mcp_frames():
    async with S.ws() as ws:
        v = await rpc(ws, {"type": "mcp", "data": {
            "jsonrpc": "2.0", "method": "tools/list", "params": {},
            "id": 1}})
        check(v["type"] == "mcp" and v["data"]["id"] == 1 and
              v["data"]["jsonrpc"] == "2.0", v)
        check(v["data"]["result"]["tools"][0]["inputSchema"]["type"] ==
              "object", v)
        v = await rpc(ws, {"type": "mcp", "data": {
            "jsonrpc": "2.0", "method": "tools/call", "id": "x",
            "params": {"name": "echo_message",
                       "arguments": {"message": "via mcp"}}}})
        check(v["data"]["id"] == "x" and
              v["data"]["result"]["structuredContent"]["result"] ==
              "via mcp", v)
        v = await rpc(ws, {"type": "mcp", "data": {
            "jsonrpc": "2.0", "method": "invalid/method", "id": 2}})
        check(v["data"]["error"]["code"] == -32601 and "result" not in
              v["data"], v)
        v = await rpc(ws, {"type": "mcp", "data": {
            "jsonrpc": "2.0", "method": "openenv/session/create", "id": 4}})
        sid = v["data"]["result"]["session_id"]
        v = await rpc(ws, {"type": "mcp", "data": {
            "jsonrpc": "2.0", "method": "openenv/session/close", "id": 5,
            "params": {"session_id": sid}}})
        check(v["data"]["error"]["code"] == -32600, v)
        v = await rpc(ws, {"type": "step", "data": {"message": "after"}})
        check(v["type"] == "observation", v)


@test
def http_mcp():
    def call(body):
        st, v, _ = S.http("POST", "/mcp", body)
        check(st == 200, (st, v))
        return v
    v = call("{bad")
    check(v["error"]["code"] == -32700 and v["id"] is None, v)
    v = call({"jsonrpc": "1.0", "method": "x", "id": 1})
    check(v["error"]["code"] == -32600, v)
    v = call({"jsonrpc": "2.0", "method": "tools/list", "id": 7})
    check(v["id"] == 7 and len(v["result"]["tools"]) == 2, v)
    v = call({"jsonrpc": "2.0", "method": "tools/call", "id": 8,
              "params": {"name": "echo_message",
                         "arguments": {"message": "x"}}})
    check(v["result"]["data"] == "x" and v["result"]["isError"] is False, v)
    v = call({"jsonrpc": "2.0", "method": "tools/call", "id": 9,
              "params": {"name": "nope"}})
    check(v["error"]["code"] == -32602 and "nope" in
          v["error"]["message"], v)
    v = call({"jsonrpc": "2.0", "method": "tools/call", "id": 10,
              "params": {}})
    check(v["error"]["message"] == "Missing 'name' in params", v)
    v = call({"jsonrpc": "2.0", "method": "openenv/session/create",
              "id": 11})
    sid = v["result"]["session_id"]
    v = call({"jsonrpc": "2.0", "method": "tools/call", "id": 12,
              "params": {"name": "echo_message", "session_id": sid,
                         "arguments": {"message": "kept"}}})
    check(v["result"]["data"] == "kept", v)
    v = call({"jsonrpc": "2.0", "method": "openenv/session/close", "id": 13,
              "params": {"session_id": sid}})
    check(v["result"] == {"session_id": sid, "closed": True}, v)
    v = call({"jsonrpc": "2.0", "method": "openenv/session/close", "id": 14,
              "params": {"session_id": sid}})
    check(v["error"]["code"] == -32602, v)
    v = call({"jsonrpc": "2.0", "method": "openenv/session/close", "id": 15})
    check(v["error"]["message"] ==
          "Invalid params - 'session_id' is required", v)


@test
def mcp_initialize_flow():
    v = S.http("POST", "/mcp", {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}})[1]
    check(v["result"]["protocolVersion"] == "2025-03-26" and
          "tools" in v["result"]["capabilities"], v)
    v = S.http("POST", "/mcp", {"jsonrpc": "2.0", "id": 2,
                                "method": "initialize",
                                "params": {"protocolVersion": "1999"}})[1]
    check(v["result"]["protocolVersion"] == "2025-06-18", v)
    st, v, _ = S.http("POST", "/mcp", {"jsonrpc": "2.0",
                                       "method": "notifications/initialized"})
    check(st == 202 and v is None, (st, v))
    v = S.http("POST", "/mcp", {"jsonrpc": "2.0", "id": 3,
                                "method": "ping"})[1]
    check(v["result"] == {}, v)


@test
async def ws_mcp_endpoint():
    async with S.ws("/mcp") as ws:
        v = await rpc(ws, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"protocolVersion": "2025-06-18"}})
        check(v["result"]["serverInfo"]["name"] == "echo_env", v)
        v = await rpc(ws, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                           "params": {"name": "echo_with_length",
                                      "arguments": {"message": "ab"}}})
        check(v["result"]["structuredContent"] ==
              {"message": "ab", "length": 2}, v)


@test
async def ws_attach_session():
    sid = S.http("POST", "/mcp", {"jsonrpc": "2.0", "id": 1,
                                  "method": "openenv/session/create"}
                 )[1]["result"]["session_id"]
    async with S.ws("/ws?session_id=" + sid) as ws:
        v = await rpc(ws, {"type": "reset"})
        check(v["type"] == "observation", v)
        async with S.ws("/ws?session_id=" + sid) as ws2:
            v = json.loads(await ws2.recv())
            check(v["data"]["code"] == "SESSION_ERROR" and
                  "already has" in v["data"]["message"], v)
    async with S.ws("/ws?session_id=nope") as ws:
        v = json.loads(await ws.recv())
        check("Unknown session_id" in v["data"]["message"], v)


@test
async def capacity():
    c = Server("examples/echo", "--max-sessions", "2")
    try:
        async with c.ws() as a, c.ws() as b:
            await rpc(a, {"type": "reset"})
            await rpc(b, {"type": "reset"})
            async with c.ws() as third:
                v = json.loads(await third.recv())
                check(v["data"]["code"] == "CAPACITY_REACHED" and
                      v["data"]["max_sessions"] == 2 and
                      v["data"]["active_sessions"] == 2, v)
                check(v["data"]["message"] == "Server at capacity: 2/2 "
                      "sessions active. Cannot accept new connections.", v)
            v = c.http("POST", "/mcp", {"jsonrpc": "2.0", "id": 1,
                                        "method": "openenv/session/create"})[1]
            check(v["error"]["code"] == -32000 and
                  v["error"]["data"]["max_sessions"] == 2, v)
        # the slots come back when the sockets close
        for _ in range(50):
            if "ludo_sessions_open 0" in c.http("GET", "/metrics")[1]:
                break
            time.sleep(0.1)
        async with c.ws() as again:
            v = await rpc(again, {"type": "reset"})
            check(v["type"] == "observation", v)
    finally:
        check(c.stop() == 0, "exit status")


@test
async def idle_timeout_closes_socket():
    c = Server("examples/echo", "--session-timeout", "1")
    try:
        async with c.ws() as ws:
            await rpc(ws, {"type": "reset"})
            v = json.loads(await asyncio.wait_for(ws.recv(), 10))
            check(v["data"]["code"] == "SESSION_ERROR" and
                  "idle" in v["data"]["message"], v)
            try:
                await asyncio.wait_for(ws.recv(), 10)
                check(False, "socket still open")
            except websockets.ConnectionClosed:
                pass
    finally:
        check(c.stop() == 0, "exit status")


@test
def production_mode():
    c = Server("examples/echo", "--mode", "production")
    try:
        for m, p in (("POST", "/reset"), ("POST", "/step"), ("GET", "/state")):
            st, _, _ = c.http(m, p, {})
            check(st in (404, 405), (p, st))
        check(c.http("GET", "/health")[0] == 200, "health")
        v = c.http("GET", "/openapi.json")[1]
        check("/reset" not in v["paths"] and "/step" not in v["paths"], v)
    finally:
        check(c.stop() == 0, "exit status")


@test
async def token_auth():
    c = Server("examples/echo", "--token", "s3cret")
    try:
        check(c.http("GET", "/health")[0] == 200, "health needs no token")
        st, v, h = c.http("GET", "/metadata")
        check(st == 401 and h.get("WWW-Authenticate") == "Bearer", (st, h))
        st, v, _ = c.http("GET", "/metadata",
                          headers={"Authorization": "Bearer wrong"})
        check(st == 401, st)
        st, v, _ = c.http("GET", "/metadata",
                          headers={"Authorization": "Bearer s3cret"})
        check(st == 200, st)
        try:
            async with c.ws():
                check(False, "WebSocket without a token")
        except websockets.InvalidStatusCode as e:
            check(e.status_code == 401, e)
        async with c.ws(extra_headers={"Authorization": "Bearer s3cret"}) \
                as ws:
            check((await rpc(ws, {"type": "reset"}))["type"] ==
                  "observation", "reset")
    finally:
        check(c.stop() == 0, "exit status")


def raw_ws(port):
    """A WebSocket opened by hand, to see frames the library hides."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
              b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    check(head.startswith(b"HTTP/1.1 101"), head)
    return s


def read_frame(s):
    b0, b1 = s.recv(1)[0], s.recv(1)[0]
    n = b1 & 0x7f
    if n == 126:
        n = struct.unpack(">H", s.recv(2))[0]
    elif n == 127:
        n = struct.unpack(">Q", s.recv(8))[0]
    data = b""
    while len(data) < n:
        data += s.recv(n - len(data))
    return b0 & 0x0f, data


@test
def keepalive_pings():
    c = Server("examples/echo", "--ping-interval", "1")
    try:
        s = raw_ws(c.port)
        op, data = read_frame(s)
        check(op == 0x9, "expected a ping, got opcode %d" % op)
        # answer the pong, masked as a client must
        mask = b"\x01\x02\x03\x04"
        s.sendall(bytes([0x8A, 0x80 | len(data)]) + mask +
                  bytes(x ^ mask[i % 4] for i, x in enumerate(data)))
        # and our own ping is answered with a pong
        s.sendall(bytes([0x89, 0x82]) + mask + bytes([ord("h") ^ 1,
                                                      ord("i") ^ 2]))
        for _ in range(3):
            op, data = read_frame(s)
            if op == 0xA:
                break
        check(op == 0xA and data == b"hi", (op, data))
        s.close()
    finally:
        check(c.stop() == 0, "exit status")


@test
async def graceful_shutdown():
    c = Server()
    async with c.ws() as ws:
        await rpc(ws, {"type": "reset"})
        c.p.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(ws.recv(), 10)
            check(False, "no close")
        except websockets.ConnectionClosed as e:
            check(e.code == 1001, e)
    check(c.p.wait(timeout=20) == 0, "exit status")
    c.p.stderr.close()


check_status = S.stop()
if check_status != 0:
    print("FAIL server_exit: status", check_status)
    results["failed"] += 1
else:
    print("ok server_exit")
    results["passed"] += 1
print(f"{results['passed']} passed, {results['failed']} failed")
sys.exit(1 if results["failed"] else 0)
