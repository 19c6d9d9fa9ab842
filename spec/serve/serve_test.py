#!/usr/bin/python3
"""Functional tests of `ludo serve` with an independent client: Python's
http.client and websockets (Debian's python3-websockets), speaking
OpenEnv's protocol as its stock clients do (OPENENV.md 1, 2, 4).

Usage: serve_test.py LUDO_BINARY. Prints "ok NAME" or "FAIL NAME: why" per
test and ends with "N passed, N failed"; exit status 1 on any failure.
SERVE_ONLY=a,b runs only the tests whose names contain one of those words
(the shared servers still start, and are still checked for their exit)."""
import asyncio
import contextlib
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


ONLY = [w for w in os.environ.get("SERVE_ONLY", "").split(",") if w]


def test(fn):
    name = fn.__name__
    if ONLY and not any(w in name for w in ONLY):
        return fn
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
    # OpenEnv's Action/Observation fields: what typed clients send and
    # what every observation carries.
    check(v["action"]["properties"]["metadata"]["type"] == "object", v)
    check(all(k in v["observation"]["properties"]
              for k in ("metadata", "reward", "done")), v)
    # A typed OpenEnv action (pydantic's model_dump) carries metadata.
    st, v, _ = S.http("POST", "/step",
                      {"action": {"message": "hi", "metadata": {}}})
    check(st == 200 and v["observation"]["echoed_message"] == "hi", v)
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
    # pydantic's error types, the field ending loc
    check(v["detail"][0]["type"] == "string_type" and
          v["detail"][0]["msg"] == "expected string, got integer", v)
    st, v, _ = S.http("POST", "/step", {"action": {}})
    check(st == 422 and v["detail"][0]["type"] == "missing" and
          v["detail"][0]["loc"] == ["message"] and
          v["detail"][0]["msg"] == "missing required field 'message'", v)
    st, v, _ = S.http("POST", "/step", {"action": {"message": "m", "x": 1}})
    check(st == 422 and v["detail"][0]["type"] == "extra_forbidden" and
          v["detail"][0]["loc"] == ["x"], v)
    st, v, _ = S.http("POST", "/reset", "{not json")
    check(st == 422, v)


@test
def http_request_fields_as_pydantic_checks_them():
    # lengths in characters (pydantic's max_length), not bytes
    st, v, _ = S.http("POST", "/reset", {"episode_id": "\u00e9" * 255})
    check(st == 200, (st, v))
    st, v, _ = S.http("POST", "/reset", {"episode_id": "\u00e9" * 256})
    check(st == 422 and v["detail"][0]["type"] == "string_too_long", v)
    # StepRequest's request_id: <= 255 characters or null
    act = {"message": "m"}
    for rid, want in (("r" * 255, 200), (None, 200), ("\u00e9" * 255, 200),
                      ("r" * 256, "string_too_long"), (5, "string_type")):
        st, v, _ = S.http("POST", "/step", {"action": act, "request_id": rid})
        if want == 200:
            check(st == 200, (rid, st, v))
        else:
            check(st == 422 and v["detail"][0]["type"] == want and
                  v["detail"][0]["loc"] == ["body", "request_id"], (rid, v))
    # timeout_s: a string is a type error, not a range one
    st, v, _ = S.http("POST", "/step", {"action": act, "timeout_s": "soon"})
    check(st == 422 and v["detail"][0]["type"] == "float_type", v)
    st, v, _ = S.http("POST", "/step", {"action": act, "timeout_s": 0})
    check(st == 422 and v["detail"][0]["type"] == "greater_than", v)
    # the echo environment counts characters, as OpenEnv's len() does
    st, v, _ = S.http("POST", "/step", {"action": {"message": "\u00e9\u20ac"}})
    check(st == 200 and v["observation"]["message_length"] == 2, v)


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
        await ws.send("{oops")  # not JSON (a JSON string is SESSION_ERROR)
        v = json.loads(await ws.recv())
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
              v["data"]["errors"][0]["loc"] == ["message"] and
              v["data"]["errors"][0]["type"] == "string_type", v)
        v = await rpc(ws, {"type": "step", "data": {"message": "m",
                                                    "msg": "m"}})
        check(v["data"]["code"] == "VALIDATION_ERROR" and
              v["data"]["errors"][0]["type"] == "extra_forbidden" and
              v["data"]["errors"][0]["loc"] == ["msg"], v)
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
        check(v["data"]["observation"]["echoed_message"] == "a\x00b", v)
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
            v = await rpc(ws, {"type": "step", "data": {"boom": True,
                                                         "bytes": True}})
            check(v["data"]["code"] == "EXECUTION_ERROR" and
                  "bad \ufffd\ufffd bytes" in v["data"]["message"], v)
            st, v, _ = b.http("POST", "/step", {"action": {"boom": True,
                                                            "bytes": True}})
            check(st == 500 and "\ufffd" in v["detail"], (st, v))
            st, v, _ = b.http("GET", "/state",
                              headers={"X-Session-Id": "caf\xe9"})
            check(st == 404 and "caf\ufffd" in v["detail"], (st, v))
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
    # JSON with an id beyond 64 bits: an invalid request, said so
    v = call('{"jsonrpc":"2.0","id":123456789012345678901234567890,'
             '"method":"tools/list"}')
    check(v["error"]["code"] == -32600 and "64 bits" in
          v["error"]["message"], v)
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
async def mcp_initialize_without_tools():
    # An environment without tools offers no tools capability, so MCP
    # clients do not list them; tools/list still answers as OpenEnv does.
    c = Server("spec/fixtures/serve/slow")
    try:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-03-26"}}
        v = c.http("POST", "/mcp", init)[1]
        check(v["result"]["capabilities"] == {}, v)
        async with c.ws("/mcp") as ws:
            v = await rpc(ws, init)
            check(v["result"]["capabilities"] == {}, v)
        v = c.http("POST", "/mcp", {"jsonrpc": "2.0", "id": 2,
                                    "method": "tools/list"})[1]
        check(v["error"] == {"code": -32603, "message": "Environment does "
                             "not support MCP", "data": None}, v)
        v = S.http("POST", "/mcp", init)[1]
        check(v["result"]["capabilities"] == {"tools": {
            "listChanged": False}}, v)
    finally:
        check(c.stop() == 0, "exit status")


def echo_call(id_, message, sid=None):
    params = {"name": "echo_message", "arguments": {"message": message}}
    if sid is not None:
        params["session_id"] = sid
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call",
            "params": params}


# A batch of every kind of member and what comes back for it, in order:
# notifications and responses get nothing, invalid members their error.
MIXED_BATCH = [
    {"jsonrpc": "2.0", "id": 1, "method": "ping"},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    echo_call("a", "first"),
    7,
    {"jsonrpc": "1.0", "id": 3, "method": "ping"},
    {"jsonrpc": "2.0", "id": 4, "result": {}},
    echo_call("b", "second"),
    {"jsonrpc": "2.0", "id": 5, "method": "nope"},
]


def check_mixed(v):
    check(isinstance(v, list) and [r["id"] for r in v] ==
          [1, "a", None, None, "b", 5], v)
    check(v[0]["result"] == {} and v[1]["result"]["data"] == "first" and
          v[4]["result"]["data"] == "second", v)
    check(v[2]["error"]["code"] == -32600 and
          v[3]["error"]["code"] == -32600 and
          v[5]["error"]["code"] == -32601, v)


@test
def mcp_batch_http():
    # JSON-RPC batches (MCP 2025-03-26): an array of replies, in request
    # order, once every member's call has ended
    st, v, _ = S.http("POST", "/mcp", MIXED_BATCH)
    check(st == 200, (st, v))
    check_mixed(v)
    st, v, _ = S.http("POST", "/mcp", [
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 9, "result": {}}])
    check(st == 202 and v is None, (st, v))
    st, v, _ = S.http("POST", "/mcp", [])
    check(st == 200 and v["id"] is None and v["error"]["code"] == -32600,
          (st, v))
    st, v, _ = S.http("POST", "/mcp", [{"jsonrpc": "2.0", "id": i,
                                        "method": "ping"}
                                       for i in range(65)])
    check(st == 200 and v["error"]["code"] == -32600 and "at most 64" in
          v["error"]["message"], (st, v))
    # members run one at a time: two calls on one session both run
    sid = S.http("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method":
                                  "openenv/session/create"}
                 )[1]["result"]["session_id"]
    st, v, _ = S.http("POST", "/mcp", [echo_call(1, "x", sid),
                                       echo_call(2, "y", sid)])
    check([r["result"]["data"] for r in v] == ["x", "y"], v)
    # ... and a throwaway session's slot is back before the next member
    c = Server("examples/echo", "--max-sessions", "1")
    try:
        st, v, _ = c.http("POST", "/mcp", [echo_call(i, str(i))
                                           for i in range(3)])
        check([r.get("result", {}).get("data") for r in v] ==
              ["0", "1", "2"], v)
    finally:
        check(c.stop() == 0, "exit status")


@test
async def mcp_batch_ws():
    async with S.ws("/mcp") as ws:
        await ws.send(json.dumps(MIXED_BATCH))
        # a message after a batch is answered after the batch's array; a
        # batch of notifications gets nothing
        await ws.send(json.dumps([{"jsonrpc": "2.0", "method": "n/x"}]))
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 6,
                                  "method": "ping"}))
        check_mixed(json.loads(await ws.recv()))
        v = json.loads(await ws.recv())
        check(v == {"jsonrpc": "2.0", "id": 6, "result": {}}, v)
        v = await rpc(ws, [])
        check(v["error"]["code"] == -32600 and v["id"] is None, v)
        v = await rpc(ws, [echo_call(i, str(i)) for i in range(64)])
        check([r["result"]["data"] for r in v] ==
              [str(i) for i in range(64)], v)


# Valid JSON with a number beyond ludo's range (docs/json.md): refused as
# a value out of range, naming where it is, never as text that is not JSON.
BIG = "9223372036854775808"


@test
async def big_numbers_are_named():
    st, v, _ = S.http("POST", "/step", '{"action":{"message":[1,{"a":%s}]}}'
                      % BIG)
    check(st == 422 and v["detail"][0]["loc"] ==
          ["body", "action", "message", 1, "a"] and
          v["detail"][0]["type"] == "value_error" and
          "64 bits" in v["detail"][0]["msg"], (st, v))
    st, v, _ = S.http("POST", "/reset", '{"seed":18446744073709551615}')
    check(st == 422 and v["detail"][0]["loc"] == ["body", "seed"], (st, v))
    st, v, _ = S.http("POST", "/step", '{"action":{"message":"x"},'
                      '"timeout_s":1e400}')
    check(st == 422 and v["detail"][0]["loc"] == ["body", "timeout_s"],
          (st, v))
    async with S.ws() as ws:
        for text, loc in (('{"type":"step","data":{"answer":%s}}' % BIG,
                           ["data", "answer"]),
                          ('{"type":"reset","data":{"seed":-%s1}}' % BIG,
                           ["data", "seed"])):
            await ws.send(text)
            v = json.loads(await ws.recv())
            check(v["data"]["code"] == "VALIDATION_ERROR" and
                  v["data"]["errors"][0]["loc"] == loc, v)
        v = await rpc(ws, {"type": "reset"})  # the connection goes on
        check(v["type"] == "observation", v)
    v = S.http("POST", "/mcp", '{"jsonrpc":"2.0","id":1,"method":'
               '"tools/call","params":{"name":"echo_message",'
               '"arguments":{"message":%s}}}' % BIG)[1]
    check(v["error"]["code"] == -32602 and
          "params.arguments.message" in v["error"]["message"] and
          v["error"]["data"]["errors"][0]["loc"] ==
          ["params", "arguments", "message"], v)


@test
def step_timeout_s():
    # timeout_s bounds the step's wall time; the session's next call has
    # its usual limit again
    c = Server("spec/fixtures/serve/slow")
    try:
        t0 = time.monotonic()
        st, v, _ = c.http("POST", "/step", {"action": {"ms": 3000},
                                            "timeout_s": 0.3})
        check(st == 500 and v["detail"].startswith("ETIMEOUT") and
              "300 ms" in v["detail"] and time.monotonic() - t0 < 2.5,
              (st, v))
        sid = c.http("POST", "/reset", {})[2]["X-Session-Id"]
        h = {"X-Session-Id": sid}
        st, v, _ = c.http("POST", "/step", {"action": {"ms": 3000},
                                            "timeout_s": 0.2}, h)
        check(st == 500 and "200 ms" in v["detail"], (st, v))
        st, v, _ = c.http("POST", "/step", {"action": {"ms": 400},
                                            "timeout_s": 5}, h)
        check(st == 200 and v["observation"]["slept"] == 400, (st, v))
        st, v, _ = c.http("POST", "/step", {"action": {"ms": 400}}, h)
        check(st == 200, (st, v))
    finally:
        check(c.stop() == 0, "exit status")


@test
async def ws_mcp_endpoint():
    # MCP's WebSocket clients offer the "mcp" subprotocol and give up on a
    # 101 that does not name it; /ws names none.
    async with S.ws("/mcp", subprotocols=["mcp"]) as ws:
        check(ws.subprotocol == "mcp", ws.subprotocol)
    async with S.ws("/ws", subprotocols=["mcp"]) as ws:
        check(ws.subprotocol is None, ws.subprotocol)
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
            # one refusal counted once (two WebSockets, one /mcp)
            m = c.http("GET", "/metrics")[1]
            check('ludo_errors_total{code="CAPACITY_REACHED"} 2' in m, m)
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
async def unread_replies_end_the_connection():
    # A client that pipelines small steps with big replies and reads none
    # of them: once more than the connection's queue (32 MiB) would wait,
    # the server ends the connection with 1008 after the queued replies,
    # instead of dropping replies while the client waits for them.
    c = Server("spec/fixtures/serve/big")
    try:
        async with c.ws(max_queue=1) as w:
            await rpc(w, {"type": "reset"})
            for _ in range(20):
                await w.send(json.dumps({"type": "step",
                                         "data": {"mib": 4}}))
            # Reading starts once the server has run all 20 steps: then
            # their 80 MiB of replies were queued or, past the queue, the
            # connection was ended (a fixed 2 s sleep was too short on a
            # loaded host: the client began to read before the queue was
            # full, got all 20 replies and no close, and waited). Steps
            # after the close still run, their replies dropped.
            for _ in range(400):
                m = c.http("GET", "/metrics")[1]
                if re.search(r"^ludo_step_seconds_count 20$", m, re.M):
                    break
                await asyncio.sleep(0.05)
            got, code = 0, None
            try:
                while True:
                    v = json.loads(await asyncio.wait_for(w.recv(), 20))
                    check(v["type"] == "observation", v["type"])
                    got += 1
            except websockets.ConnectionClosed as e:
                code = e.rcvd.code if e.rcvd else None
            check(0 < got < 20 and code == 1008, (got, code))
        # what /metrics counts as sent is what was sent
        m = c.http("GET", "/metrics")[1]
        sent = int(re.search(r"ludo_sent_bytes_total (\d+)", m).group(1))
        check(sent < (got + 2) * (4 * 2 ** 20 + 200), (sent, got))
    finally:
        check(c.stop() == 0, "exit status")


@test
async def a_spinning_step_holds_no_one_else():
    # One worker, a step that spins for its whole CPU budget (3 s): Lua
    # yields to the loop between time slices, so /health and another
    # session are answered while it runs, before its ETIMEOUT.
    c = Server("spec/fixtures/serve/big", "--workers", "1",
               "--cpu-budget", "3000")
    try:
        async with c.ws() as spin, c.ws() as other:
            await rpc(spin, {"type": "reset"})
            await rpc(other, {"type": "reset"})
            await spin.send(json.dumps({"type": "step",
                                        "data": {"mib": -1}}))
            await asyncio.sleep(0.3)
            st, v, _ = await asyncio.to_thread(c.http, "GET", "/health")
            check(st == 200, (st, v))
            v = await rpc(other, {"type": "step", "data": {"mib": 0}})
            check(v["type"] == "observation", v)
            # the spin is still running: its reply has not come yet
            try:
                await asyncio.wait_for(spin.recv(), 0.01)
                check(False, "the spin ended first")
            except asyncio.TimeoutError:
                pass
            v = json.loads(await asyncio.wait_for(spin.recv(), 20))
            check(v["type"] == "error" and "ETIMEOUT" in
                  v["data"]["message"], v)
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
async def not_concurrent_env():
    # concurrent = false: one session by default, more is a start-up error
    p = subprocess.run([LUDO, "serve", "spec/fixtures/serve/single",
                        "--port", "0", "--max-sessions", "2"],
                       capture_output=True, text=True, timeout=20)
    check(p.returncode != 0 and "not concurrent" in p.stderr, p.stderr)
    c = Server("spec/fixtures/serve/single")
    try:
        async with c.ws() as a:
            await rpc(a, {"type": "reset"})
            async with c.ws() as b:
                v = json.loads(await b.recv())
                check(v["data"]["code"] == "CAPACITY_REACHED" and
                      v["data"]["max_sessions"] == 1, v)
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


def raw_ws(port, path="/ws", sport=None):
    """A WebSocket opened by hand, to see frames the library hides; from
    source port `sport` when given (see worker_ports)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10,
                                 source_address=("127.0.0.1", sport or 0))
    s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n"
              b"Upgrade: websocket\r\n"
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


@test
async def graceful_shutdown_finishes_steps():
    # SIGTERM while a step waits: the server stops accepting, lets the step
    # finish and answer, drops the message queued behind it, then closes
    # the WebSocket with 1001 and exits 0.
    c = Server("spec/fixtures/c/sleepy", "--workers", "1")
    async with c.ws() as ws:
        await rpc(ws, {"type": "reset"})
        await ws.send(json.dumps({"type": "step",
                                  "data": {"seconds": 1.0, "tag": "late"}}))
        await ws.send(json.dumps({"type": "step",
                                  "data": {"seconds": 0, "tag": "queued"}}))
        await asyncio.sleep(0.3)
        c.p.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.2)
        refused = False
        try:
            socket.create_connection(("127.0.0.1", c.port), 2).close()
        except OSError:
            refused = True
        check(refused, "a connection was accepted while draining")
        reply = json.loads(await asyncio.wait_for(ws.recv(), 10))
        check(reply.get("type") == "observation", reply)
        obs = reply["data"]["observation"]
        check(obs["tag"] == "late" and obs["count"] == 1, reply)
        try:
            extra = await asyncio.wait_for(ws.recv(), 10)
            check(False, "the queued step ran: %s" % extra)
        except websockets.ConnectionClosed as e:
            check(e.code == 1001, e)
    check(c.p.wait(timeout=20) == 0, "exit status")
    c.p.stderr.close()


@test
async def graceful_shutdown_drain_is_bounded():
    # A step that outlasts --drain-timeout is cancelled: the WebSocket
    # still closes with 1001 and the process exits 0, long before the step
    # would have ended.
    c = Server("spec/fixtures/c/sleepy", "--workers", "1",
               "--drain-timeout", "1")
    async with c.ws() as ws:
        await rpc(ws, {"type": "reset"})
        await ws.send(json.dumps({"type": "step", "data": {"seconds": 600}}))
        await asyncio.sleep(0.2)
        c.p.send_signal(signal.SIGTERM)
        try:
            while True:
                await asyncio.wait_for(ws.recv(), 12)
        except websockets.ConnectionClosed as e:
            check(e.code == 1001, e)
    check(c.p.wait(timeout=12) == 0, "exit status")
    c.p.stderr.close()


@test
async def graceful_shutdown_bounded_when_lua_cannot_yield():
    # Steps that spin inside a table.sort comparator hold their worker's
    # loop (Lua cannot yield there), worker 0's too, with a CPU budget far
    # past the 15 s deadline; more wait behind them. SIGTERM: when the
    # drain (1 s) ends the running calls are interrupted and the queued
    # ones fail before they start, so every WebSocket still closes with
    # 1001 and the process exits 0, long before the budget, and before
    # the deadline would have cut the connections.
    c = Server("spec/fixtures/serve/stuck", "--workers", "2",
               "--cpu-budget", "300000", "--drain-timeout", "1")
    try:
        socks = []
        for _ in range(4):  # all open first: a spinning worker accepts none
            ws = await c.ws()
            await rpc(ws, {"type": "reset"})
            socks.append(ws)
        for ws in socks:
            await ws.send(json.dumps({"type": "step",
                                      "data": {"spin": True}}))
        await asyncio.sleep(0.5)
        c.p.send_signal(signal.SIGTERM)
        for ws in socks:
            try:
                while True:
                    m = json.loads(await asyncio.wait_for(ws.recv(), 30))
                    check(m.get("type") == "error", m)  # never an answer
            except websockets.ConnectionClosed as e:
                check(e.code == 1001, e)
        loop = asyncio.get_running_loop()
        status = await loop.run_in_executor(None, c.p.wait, 30)
        log = c.p.stderr.read()
        check(status == 0, (status, log))
        check("did not close in time" not in log, log)
    finally:
        if c.p.poll() is None:
            c.p.kill()
            c.p.wait()
        c.p.stderr.close()


@test
async def graceful_shutdown_ignores_a_second_signal():
    # A second SIGTERM or SIGINT during the drain changes nothing: the step
    # in flight still answers, the WebSocket closes with 1001 and the exit
    # status is 0 (not death by the signal).
    for second in (signal.SIGTERM, signal.SIGINT):
        c = Server("spec/fixtures/serve/slow", "--workers", "1")
        try:
            async with c.ws() as ws:
                await rpc(ws, {"type": "reset"})
                await ws.send(json.dumps({"type": "step",
                                          "data": {"ms": 1500}}))
                await asyncio.sleep(0.3)
                c.p.send_signal(signal.SIGTERM)
                await asyncio.sleep(0.3)
                c.p.send_signal(second)
                reply = json.loads(await asyncio.wait_for(ws.recv(), 20))
                check(reply.get("type") == "observation" and
                      reply["data"]["observation"]["slept"] == 1500, reply)
                try:
                    await asyncio.wait_for(ws.recv(), 20)
                    check(False, "no close")
                except websockets.ConnectionClosed as e:
                    check(e.code == 1001, e)
            loop = asyncio.get_running_loop()
            status = await loop.run_in_executor(None, c.p.wait, 20)
            check(status == 0, (second, status))
        finally:
            if c.p.poll() is None:
                c.p.kill()
                c.p.wait()
            c.p.stderr.close()


# ---- the Task API (OPENENV.md 1.9) ------------------------------------------

T = Server("spec/fixtures/serve/tasks")
SPLITS = [{"name": "train", "type": "train"},
          {"name": "test", "type": "test"},
          {"name": "holdout", "type": "validation"},
          {"name": "dev", "type": "test", "note": "hand-picked"},
          {"name": "broken", "type": "validation"}]


def ids(tasks):
    return [t["id"] for t in tasks]


@test
def tasks_discovery():
    st, v, _ = T.http("GET", "/list_environments")
    check(st == 200 and v == ["quiz_tasks"], (st, v))
    st, v, _ = T.http("GET", "/quiz_tasks/splits")
    check(st == 200 and v == SPLITS, (st, v))
    # the name is compared without regard to case, after percent-decoding
    for path in ("/QUIZ_Tasks/splits", "/quiz%5Ftasks/splits"):
        st, v, _ = T.http("GET", path)
        check(st == 200 and v == SPLITS, (path, st, v))
    st, v, _ = S.http("GET", "/list_environments")
    check(st == 200 and v == ["echo_env"], (st, v))
    for m, p in (("POST", "/quiz_tasks/splits"), ("GET", "/quiz_tasks/tasks"),
                 ("POST", "/list_environments"), ("PUT", "/quiz_tasks/task")):
        st, v, _ = T.http(m, p, {})
        check(st == 405 and v == {"detail": "Method Not Allowed"}, (p, st, v))
    st, v, _ = T.http("GET", "/quiz_tasks/nothing")
    check(st == 404 and v == {"detail": "Not Found"}, (st, v))


@test
def tasks_routes():
    st, v, _ = T.http("POST", "/quiz_tasks/tasks", {"split": "test"})
    check(st == 200 and v == {"env_name": "quiz_tasks", "tasks": [
        {"id": "test-0", "q": "question 1"},
        {"id": "test-1", "q": "question 2"},
        {"id": "test-2", "q": "question 3"}]}, (st, v))
    st, v, _ = T.http("POST", "/Quiz_Tasks/tasks", {"split": "holdout"})
    check(st == 200 and v == {"tasks": [], "env_name": "quiz_tasks"}, v)
    st, v, _ = T.http("POST", "/quiz_tasks/num_tasks", {"split": "train"})
    check(st == 200 and v == {"num_tasks": 6}, (st, v))
    st, v, _ = T.http("POST", "/quiz_tasks/task",
                      {"split": "train", "index": 4})
    check(st == 200 and v == {"task": {"id": "train-4",
                                       "q": "question 5"}}, (st, v))
    # pydantic's lax int: a whole float or a numeric string is an index
    for index in (2.0, "2"):
        st, v, _ = T.http("POST", "/quiz_tasks/task",
                          {"split": "dev", "index": index})
        check(st == 400, (index, st, v))
        st, v, _ = T.http("POST", "/quiz_tasks/task",
                          {"split": "train", "index": index})
        check(st == 200 and v["task"]["id"] == "train-2", (index, st, v))
    # task_range: Python's slices
    for body, want in (({}, 6), ({"start": 1, "stop": 3}, [1, 2]),
                       ({"start": -2}, [4, 5]), ({"stop": -4}, [0, 1]),
                       ({"start": None, "stop": None}, 6),
                       ({"start": 4, "stop": 2}, []),
                       ({"start": 3, "stop": 99}, [3, 4, 5])):
        st, v, _ = T.http("POST", "/quiz_tasks/task_range",
                          dict(body, split="train"))
        want = list(range(want)) if isinstance(want, int) else want
        check(st == 200 and list(v) == ["tasks"] and
              ids(v["tasks"]) == ["train-%d" % i for i in want],
              (body, st, v))


@test
def tasks_big_numbers_are_named():
    # valid JSON, beyond 64 bits: out of range, not "Invalid JSON"
    st, v, _ = T.http("POST", "/quiz_tasks/task",
                      '{"split":"test","index":%s}' % BIG)
    check(st == 422 and v["detail"][0]["loc"] == ["body", "index"] and
          v["detail"][0]["type"] == "value_error", (st, v))


@test
def tasks_errors():
    # 404: another environment's name, whatever the route
    for m, p, b in (("GET", "/nope/splits", None),
                    ("POST", "/nope/tasks", {"split": "test"}),
                    ("POST", "/nope/num_tasks", {"split": "test"}),
                    ("POST", "/nope/task", {"split": "test", "index": 0}),
                    ("POST", "/nope/task_range", {"split": "test"})):
        st, v, _ = T.http(m, p, b)
        check(st == 404 and v == {"detail": "unknown environment 'nope'"},
              (p, st, v))
    st, v, _ = T.http("GET", "/it's/splits")
    check(st == 404 and v == {"detail": "unknown environment \"it's\""}, v)
    # 400: an index with no task
    for index in (3, -1, 10 ** 12):
        st, v, _ = T.http("POST", "/quiz_tasks/task",
                          {"split": "test", "index": index})
        check(st == 400 and v == {"detail": "Invalid task index"},
              (index, st, v))
    # 422: the body, checked as OpenEnv's request models check it (before
    # the name, as FastAPI validates a request before its handler runs)
    cases = (
        ("/quiz_tasks/tasks", None, [("missing", ["body"])]),
        ("/quiz_tasks/tasks", "{oops", [("json_invalid", ["body", int])]),
        ("/quiz_tasks/tasks", [], [("model_attributes_type", ["body"])]),
        ("/nope/tasks", {}, [("missing", ["body", "split"])]),
        ("/quiz_tasks/num_tasks", {"split": 7},
         [("string_type", ["body", "split"])]),
        ("/quiz_tasks/task", {"split": "test"},
         [("missing", ["body", "index"])]),
        ("/quiz_tasks/task", {"split": "test", "index": "x"},
         [("int_parsing", ["body", "index"])]),
        ("/quiz_tasks/task", {"split": "test", "index": 1.5},
         [("int_from_float", ["body", "index"])]),
        ("/quiz_tasks/task", {"split": "test", "index": 1e30},
         [("int_parsing_size", ["body", "index"])]),
        ("/quiz_tasks/task", {"split": "test", "index": [1]},
         [("int_type", ["body", "index"])]),
        ("/quiz_tasks/task_range", {"split": "test", "start": 0, "n": 2},
         [("extra_forbidden", ["body", "n"])]),
        ("/quiz_tasks/tasks", {"split": "test", "index": 0},
         [("extra_forbidden", ["body", "index"])]),
        ("/quiz_tasks/task", {"index": "?", "x": 1},
         [("missing", ["body", "split"]), ("int_parsing", ["body", "index"]),
          ("extra_forbidden", ["body", "x"])]),
        ("/quiz_tasks/num_tasks", {"split": "nope"},
         [("value_error", ["body", "split"])]),
    )
    for path, body, want in cases:
        st, v, _ = T.http("POST", path, body)
        got = [(e["type"], [type(x) if e["type"] == "json_invalid" and
                            i > 0 else x for i, x in enumerate(e["loc"])])
               for e in v["detail"]] if st == 422 else None
        check(st == 422 and got == want, (path, body, st, v))
    st, v, _ = T.http("POST", "/quiz_tasks/task",
                      {"split": "nope", "index": 0})
    check(v["detail"][0]["input"] == "nope" and "unknown split 'nope' (the "
          "splits are: train, test, holdout, dev, broken)" ==
          v["detail"][0]["msg"], v)
    # 500: the environment's own failure
    st, v, _ = T.http("POST", "/quiz_tasks/num_tasks", {"split": "broken"})
    check(st == 500 and "the dataset is gone" in v["detail"], (st, v))
    # 501: what the environment does not offer
    for m, p, b, name in (
            ("GET", "/echo_env/splits", None, "list_splits"),
            ("POST", "/echo_env/tasks", {"split": "x"}, "list_tasks"),
            ("POST", "/echo_env/num_tasks", {"split": "x"}, "num_tasks"),
            ("POST", "/echo_env/task", {"split": "x", "index": 0},
             "get_task"),
            ("POST", "/ECHO_ENV/task_range", {"split": "x"},
             "get_task_range")):
        st, v, _ = S.http(m, p, b)
        check(st == 501 and v == {"detail": name + " is not supported for "
                                  "this environment"}, (p, st, v))
    g = Server("spec/fixtures/serve/tasks_get")
    try:
        for r, name in (("tasks", "list_tasks"), ("num_tasks", "num_tasks"),
                        ("task_range", "get_task_range")):
            st, v, _ = g.http("POST", "/by_index/" + r, {"split": "test"})
            check(st == 501 and v["detail"] == name + " is not supported "
                  "for this environment", (r, st, v))
        st, v, _ = g.http("POST", "/by_index/task",
                          {"split": "test", "index": 7})
        check(st == 200 and v == {"task": {"index": 7}}, (st, v))
    finally:
        check(g.stop() == 0, "exit status")
    # every task request ran on a throwaway session, now closed
    for _ in range(50):
        if "ludo_sessions_open 0" in T.http("GET", "/metrics")[1]:
            break
        time.sleep(0.1)
    check("ludo_sessions_open 0" in T.http("GET", "/metrics")[1],
          "sessions left open")


@test
async def tasks_reset_selects_ws():
    async with T.ws() as ws:
        v = await rpc(ws, {"type": "reset",
                           "data": {"split": "test", "index": 1}})
        check(v["type"] == "observation" and v["data"]["observation"]["id"]
              == "test-1" and v["data"]["observation"]["q"] == "question 2",
              v)
        v = await rpc(ws, {"type": "reset",
                           "data": {"split": "test", "index": 3}})
        check(v["data"]["code"] == "VALIDATION_ERROR" and
              v["data"]["errors"][0]["loc"] == ["index"] and
              "no task at index 3 of split 'test'" in
              v["data"]["errors"][0]["msg"], v)
        v = await rpc(ws, {"type": "reset", "data": {"split": "tset"}})
        check(v["data"]["code"] == "VALIDATION_ERROR" and
              v["data"]["errors"][0]["loc"] == ["split"], v)
        v = await rpc(ws, {"type": "reset", "data": {"seed": 1}})
        check(v["data"]["observation"]["id"] == "none", v)
        v = await rpc(ws, {"type": "reset",
                           "data": {"split": "dev", "index": 0}})
        check(v["data"]["observation"]["id"] == "dev-0", v)
        v = await rpc(ws, {"type": "step", "data": {}})
        check(v["data"]["observation"]["id"] == "dev-0" and
              v["data"]["done"] is True, v)


@test
def tasks_reset_selects_http():
    st, v, h = T.http("POST", "/reset", {"split": "train", "index": 5})
    check(st == 200 and v["observation"]["id"] == "train-5", (st, v))
    sid = h["X-Session-Id"]
    st, v, _ = T.http("POST", "/step", {"action": {}},
                      {"X-Session-Id": sid})
    check(st == 200 and v["observation"]["id"] == "train-5", (st, v))
    # a selection refused at reset names a request field, as the seed's
    # error does (loc starts with "body"), whatever refused it
    for body, loc in (({"split": "train", "index": 6}, ["body", "index"]),
                      ({"index": 0}, ["body", "split"]),
                      ({"split": "nope"}, ["body", "split"]),
                      ({"split": "test", "index": 0, "task": {}},
                       ["body", "task"]),
                      ({"seed": -1}, ["body", "seed"])):
        st, v, _ = T.http("POST", "/reset", body)
        check(st == 422 and v["detail"][0]["loc"] == loc, (body, st, v))


@test
async def tasks_production_and_capacity():
    c = Server("spec/fixtures/serve/tasks", "--mode", "production",
               "--max-sessions", "1")
    try:
        st, v, _ = c.http("POST", "/quiz_tasks/num_tasks", {"split": "dev"})
        check(st == 200 and v == {"num_tasks": 2}, (st, v))
        paths = c.http("GET", "/openapi.json")[1]["paths"]
        check("get" in paths["/list_environments"] and
              "get" in paths["/{env_name}/splits"] and
              all("post" in paths["/{env_name}/" + r] for r in
                  ("tasks", "num_tasks", "task", "task_range")), paths)
        body = paths["/{env_name}/task"]["post"]["requestBody"]
        check(body["content"]["application/json"]["schema"]["required"] ==
              ["split", "index"], body)
        async with c.ws() as ws:
            await rpc(ws, {"type": "reset"})
            # the one session is taken: a task request has none to run on
            st, v, _ = c.http("GET", "/quiz_tasks/splits")
            check(st == 503 and v["detail"].startswith("Server at capacity"),
                  (st, v))
        for _ in range(50):
            st, v, _ = c.http("GET", "/quiz_tasks/splits")
            if st == 200:
                break
            time.sleep(0.1)
        check(st == 200 and v == SPLITS, (st, v))
    finally:
        check(c.stop() == 0, "exit status")


if T.stop() != 0:
    print("FAIL tasks_server_exit")
    results["failed"] += 1
else:
    print("ok tasks_server_exit")
    results["passed"] += 1


# ---- workers (--workers N; docs/serve-workers.md) --------------------------

def metric(text, name, **labels):
    """The value of a Prometheus series in /metrics text."""
    sel = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pat = "^" + re.escape(name + ("{" + sel + "}" if sel else "")) + r" (\S+)$"
    m = re.search(pat, text, re.M)
    if not m:
        raise AssertionError(f"no {name} {labels} in /metrics")
    return float(m.group(1))


def per_worker(srv, name, n=2):
    text = srv.http("GET", "/metrics")[1]
    return [metric(text, name, worker=i) for i in range(n)]


class Conn:
    """A keep-alive HTTP connection: all its requests reach one worker."""

    def __init__(self, port):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def call(self, method, path, body=None, headers=None):
        self.c.request(method, path, body=None if body is None else
                       json.dumps(body), headers=headers or {})
        r = self.c.getresponse()
        text = r.read()
        return r.status, json.loads(text) if text else None, \
            dict(r.getheaders())

    def rpc(self, method, params=None, id_=1):
        msg = {"jsonrpc": "2.0", "id": id_, "method": method}
        if params is not None:
            msg["params"] = params
        return self.call("POST", "/mcp", msg)[1]


def conns_by_worker(srv):
    """One keep-alive connection on each of two workers: a session made
    on a connection names the worker that made it ("w<N>-")."""
    got = {}
    for _ in range(64):
        c = Conn(srv.port)
        sid = c.call("POST", "/reset", {})[2]["X-Session-Id"]
        c.call("POST", "/mcp", {"jsonrpc": "2.0", "id": 0, "method":
                                "openenv/session/close",
                                "params": {"session_id": sid}})
        got.setdefault(int(sid[1]), c)
        if len(got) == 2:
            return got[0], got[1]
    raise AssertionError("64 connections, all on one worker")


def forwarded(srv):
    return per_worker(srv, "ludo_worker_forwarded_total")


@test
def workers_spread():
    # Every request opens a new connection (Server.http): the kernel's
    # SO_REUSEPORT hash sends each to either worker, and both serve.
    w = Server("examples/echo", "--workers", "2")
    try:
        for _ in range(32):
            check(w.http("GET", "/health")[0] == 200, "health")
        per = per_worker(w, "ludo_worker_http_requests_total")
        check(all(v > 0 for v in per), f"requests by worker: {per}")
    finally:
        check(w.stop() == 0, "exit status")


W2 = Server("examples/echo", "--workers", "2")


@test
def workers_forward_http_sessions():
    c0, c1 = conns_by_worker(W2)
    st, v, h = c0.call("POST", "/reset", {})
    sid = h["X-Session-Id"]
    check(st == 200 and re.match(r"^w0-[0-9a-f-]{36}$", sid), sid)
    before = forwarded(W2)
    for i in range(8):  # worker 1 passes each to worker 0
        st, v, h = c1.call("POST", "/step", {"action": {"message": f"m{i}"}},
                           {"X-Session-Id": sid})
        check(st == 200 and v["observation"]["echoed_message"] == f"m{i}"
              and h["X-Session-Id"] == sid, (st, v))
    st, v, _ = c1.call("GET", "/state?session_id=" + sid)
    check(st == 200 and v["step_count"] == 8, v)
    after = forwarded(W2)
    check(after[1] - before[1] == 9 and after[0] == before[0],
          (before, after))
    # the owner's refusals come back as they are
    st, v, _ = c1.call("POST", "/step", {"action": {"message": 5}},
                       {"X-Session-Id": sid})
    check(st == 422 and v["detail"][0]["loc"] == ["message"], (st, v))
    st, v, _ = c1.call("GET", "/state", headers={"X-Session-Id":
                                                  "w0-" + "0" * 36})
    check(st == 404 and "Unknown session_id" in v["detail"], (st, v))
    v = c1.rpc("openenv/session/close", {"session_id": sid})
    check(v["result"] == {"session_id": sid, "closed": True}, v)
    st, v, _ = c1.call("POST", "/step", {"action": {"message": "x"}},
                       {"X-Session-Id": sid})
    check(st == 404, (st, v))


@test
def workers_mcp_batch_forwarded():
    # a batch's calls on another worker's session: passed on, one at a time
    c0, c1 = conns_by_worker(W2)
    sid = c0.rpc("openenv/session/create")["result"]["session_id"]
    st, v, _ = c1.call("POST", "/mcp", [echo_call(1, "p", sid),
                                        echo_call(2, "q", sid),
                                        {"jsonrpc": "2.0", "id": 3, "method":
                                         "openenv/session/close",
                                         "params": {"session_id": sid}}])
    check(st == 200 and [r["id"] for r in v] == [1, 2, 3], v)
    check(v[1]["result"]["data"] == "q" and v[2]["result"]["closed"], v)


@test
def workers_forward_mcp_sessions():
    # MCPToolClient's production mode: create, then tools/call with the
    # session_id, whichever worker each request reaches
    c0, c1 = conns_by_worker(W2)
    msid = c1.rpc("openenv/session/create")["result"]["session_id"]
    check(msid.startswith("w1-"), msid)
    for i in range(4):
        v = c0.rpc("tools/call", {"name": "echo_message", "session_id": msid,
                                  "arguments": {"message": f"t{i}"}}, 2 + i)
        check(v["id"] == 2 + i and v["result"]["data"] == f"t{i}", v)
    v = c0.rpc("tools/call", {"name": "nope", "session_id": msid}, 7)
    check(v["error"]["code"] == -32602 and "nope" in v["error"]["message"],
          v)
    v = c0.rpc("openenv/session/close", {"session_id": msid}, 8)
    check(v["id"] == 8 and v["result"] == {"session_id": msid,
                                           "closed": True}, v)
    v = c0.rpc("openenv/session/close", {"session_id": msid}, 9)
    check(v["error"]["code"] == -32602 and "Unknown" in
          v["error"]["message"], v)
    v = c0.rpc("tools/call", {"name": "echo_message", "session_id": msid,
                              "arguments": {"message": "x"}}, 10)
    check(v["error"]["code"] == -32602, v)


@contextlib.asynccontextmanager
async def attached(srv, sid, first):
    """A WebSocket attached to session sid, and its reply to `first`. The
    one attached before may still be leaving: when it was on another
    worker than the session's, its detach reaches the owner a moment after
    its client saw the close, and until then an attach is refused
    ("already has an attached WebSocket"): this tries again then."""
    for _ in range(200):
        ws = await srv.ws("/ws?session_id=" + sid)
        try:
            v = await rpc(ws, first)
        except websockets.ConnectionClosed:
            v = None  # refused, and closed before `first` went
        if v is not None and not (v["type"] == "error" and "already has"
                                  in v["data"]["message"]):
            try:
                yield ws, v
            finally:
                await ws.close()
            return
        await ws.close()
        await asyncio.sleep(0.02)
    raise AssertionError(f"session {sid} stayed attached")


@test
async def workers_forward_attached_websocket():
    c0, c1 = conns_by_worker(W2)
    msid = c0.rpc("openenv/session/create")["result"]["session_id"]
    # attach until one WebSocket reached worker 1, which passes its frames
    # to worker 0 (the forwarded count says which did)
    crossed = 0
    for i in range(40):
        before = sum(forwarded(W2))
        async with attached(W2, msid, {"type": "step", "data": {
                "message": f"a{i}"}}) as (ws, v):
            check(v["type"] == "observation" and
                  v["data"]["observation"]["echoed_message"] == f"a{i}", v)
            v = await rpc(ws, {"type": "mcp", "data": {
                "jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
                    "name": "echo_with_length",
                    "arguments": {"message": "ab"}}}})
            check(v["data"]["result"]["structuredContent"] ==
                  {"message": "ab", "length": 2}, v)
            v = await rpc(ws, {"type": "mcp", "data": {
                "jsonrpc": "2.0", "id": 10, "method":
                "openenv/session/close", "params": {"session_id": msid}}})
            check(v["data"]["error"]["code"] == -32600, v)
        after = sum(forwarded(W2))
        if after - before >= 3:  # attach, step, tools/call
            crossed += 1
            break
    check(crossed, "40 WebSockets, none reached worker 1")
    # the detached session stayed; one attached at a time, across workers
    async with attached(W2, msid, {"type": "state"}) as (ws, v):
        check(v["type"] == "state" and v["data"]["step_count"] >= 1, v)
        for _ in range(4):
            async with W2.ws("/ws?session_id=" + msid) as ws2:
                v = json.loads(await ws2.recv())
                check(v["data"]["code"] == "SESSION_ERROR" and
                      "already has" in v["data"]["message"], v)
        # closed from worker 1: the attached WebSocket closes, 1000
        v = c1.rpc("openenv/session/close", {"session_id": msid})
        check(v["result"] == {"session_id": msid, "closed": False,
                              "closing": True}, v)
        try:
            await asyncio.wait_for(ws.recv(), 10)
            check(False, "the attached WebSocket stayed open")
        except websockets.ConnectionClosed as e:
            check(e.code == 1000, e)
    v = c1.rpc("tools/call", {"name": "echo_message", "session_id": msid,
                              "arguments": {"message": "x"}})
    check(v["error"]["code"] == -32602, v)
    async with W2.ws("/ws?session_id=w1-" + "0" * 36) as ws:
        v = json.loads(await ws.recv())
        check("Unknown session_id" in v["data"]["message"], v)
    for _ in range(50):
        if metric(W2.http("GET", "/metrics")[1], "ludo_sessions_open") == 0:
            break
        time.sleep(0.1)
    check(metric(W2.http("GET", "/metrics")[1], "ludo_sessions_open") == 0,
          "sessions left open")


@test
def a_stateless_call_s_slot_is_free_when_its_answer_comes():
    # A server of one session on two workers; a call that names no
    # session (a task request, POST /step, tools/call over POST /mcp)
    # runs on a throwaway session, whose close takes 100 ms here (its
    # close() spins until the cleanup budget stops it). Once its answer
    # came, a reset on the other worker finds the slot free: the slot
    # went back before the answer (it went back at the close, after the
    # answer, and a client quick enough got 503, as tasks_production_and_
    # capacity's WebSocket got CAPACITY_REACHED on a loaded host).
    w = Server("spec/fixtures/serve/slowclose", "--workers", "2",
               "--max-sessions", "1")
    try:
        c0, c1 = conns_by_worker(w)
        calls = (("/slowclose/num_tasks", {"split": "dev"}),
                 ("/step", {"action": {"message": "x"}}),
                 ("/mcp", {"jsonrpc": "2.0", "id": 1, "method":
                           "tools/call", "params": {
                               "name": "echo",
                               "arguments": {"message": "x"}}}))
        for a, b in ((c0, c1), (c1, c0)):
            for path, body in calls:
                st, v, _ = a.call("POST", path, body)
                check(st == 200 and "error" not in v, (path, st, v))
                st, v, h = b.call("POST", "/reset", {})
                check(st == 200, ("after " + path, st, v))
                v = b.rpc("openenv/session/close",
                          {"session_id": h["X-Session-Id"]})
                check(v["result"]["closed"] is True, v)
    finally:
        check(w.stop() == 0, "exit status")


class GenericEnvClientFrames:
    """The frames OpenEnv's GenericEnvClient sends and how it reads the
    answers (OPENENV.md 2.1, 2.2), for the README's snippet: openenv
    cannot be installed here. The URL becomes ws://.../ws; the connection
    offers permessage-deflate (websockets' default) with OpenEnv's
    open_timeout and max_size; reset(**kw) sends {"type":"reset","data":
    kw}, step(action) {"type":"step","data":action}, state() {"type":
    "state"}; each waits for one frame, and an error frame raises
    RuntimeError("Server error: <message> (code: <code>)")."""

    def __init__(self, base_url):
        self.url = base_url.rstrip("/").replace("http://", "ws://") + "/ws"

    async def connect(self):
        self.ws = await websockets.connect(self.url, open_timeout=10.0,
                                           max_size=100 * 1024 * 1024)
        return self

    async def _send_and_receive(self, msg):
        await self.ws.send(json.dumps(msg))
        reply = json.loads(await asyncio.wait_for(self.ws.recv(), 60.0))
        if reply.get("type") == "error":
            d = reply.get("data", {})
            raise RuntimeError(f"Server error: {d.get('message')} "
                               f"(code: {d.get('code')})")
        return reply

    def _parse_result(self, payload):  # StepResult's fields
        return (payload.get("observation", {}), payload.get("reward"),
                payload.get("done", False))

    async def reset(self, **kwargs):
        r = await self._send_and_receive({"type": "reset", "data": kwargs})
        return self._parse_result(r.get("data", {}))

    async def step(self, action, **kwargs):
        r = await self._send_and_receive({"type": "step", "data": action})
        return self._parse_result(r.get("data", {}))

    async def state(self):
        return (await self._send_and_receive({"type": "state"}))["data"]

    async def close(self):
        try:
            await self.ws.send(json.dumps({"type": "close"}))
        except websockets.ConnectionClosed:
            pass
        await self.ws.close()


@test
async def generic_env_client_frames():
    # the README's snippet, as GenericEnvClient runs it, eight at once
    # against the two-worker server
    async def episode(k):
        env = await GenericEnvClientFrames(
            f"http://127.0.0.1:{W2.port}/").connect()
        obs, reward, done = await env.reset(seed=k)
        check(obs["echoed_message"] == "Echo environment ready!" and
              done is False, obs)
        obs, reward, done = await env.step({"message": "hello"})
        check(obs["echoed_message"] == "hello" and obs["message_length"] ==
              5 and reward == obs["metadata"]["rubrics"]["total"] and
              done is False, (obs, reward))
        obs, reward, done = await env.step({
            "type": "call_tool", "tool_name": "echo_message",
            "arguments": {"message": "via a tool"}})
        check(obs["result"]["data"] == "via a tool", obs)
        st = await env.state()
        check(st["step_count"] == 2 and isinstance(st["episode_id"], str),
              st)
        try:
            await env.step({"message": 7})
            check(False, "no error for a bad action")
        except RuntimeError as e:
            check("(code: VALIDATION_ERROR)" in str(e), e)
        await env.close()
    await asyncio.gather(*(episode(k) for k in range(8)))


@test
async def workers_capacity_is_shared():
    w = Server("examples/echo", "--workers", "2", "--max-sessions", "2")
    try:
        async with w.ws() as a, w.ws() as b:
            await rpc(a, {"type": "reset"})
            await rpc(b, {"type": "reset"})
            # the third is refused whichever worker it reaches; many
            # refused at once never hear of more sessions than the maximum
            # (an open counts itself before it checks for room and takes
            # the count back, so the shared count can read one over for a
            # moment: a review saw "9/8 sessions active")
            async def refused(_):
                async with w.ws() as third:
                    return json.loads(await third.recv())["data"]
            for n in (1,) * 8 + (40,) * 3:
                for v in await asyncio.gather(*(refused(k)
                                                for k in range(n))):
                    check(v["code"] == "CAPACITY_REACHED" and
                          v["active_sessions"] == 2 and
                          v["max_sessions"] == 2 and
                          "2/2 sessions active" in v["message"], v)
            for i in range(4):
                v = w.http("POST", "/mcp", {"jsonrpc": "2.0", "id": i,
                                            "method":
                                            "openenv/session/create"})[1]
                check(v["error"]["code"] == -32000, v)
            per = per_worker(w, "ludo_worker_http_requests_total")
            check(all(v > 0 for v in per), f"requests by worker: {per}")
            open_ = per_worker(w, "ludo_worker_sessions_open")
            check(sum(open_) == 2, open_)
    finally:
        check(w.stop() == 0, "exit status")


@test
async def workers_sigterm_closes_everything():
    w = Server("examples/echo", "--workers", "2")
    sockets = []
    try:
        for _ in range(8):
            ws = await w.ws()
            await rpc(ws, {"type": "reset"})
            sockets.append(ws)
        open_ = per_worker(w, "ludo_worker_sessions_open")
        check(sum(open_) == 8, open_)
        w.p.send_signal(signal.SIGTERM)
        for ws in sockets:
            try:
                await asyncio.wait_for(ws.recv(), 10)
                check(False, "no close")
            except websockets.ConnectionClosed as e:
                check(e.code == 1001, e)
        check(w.p.wait(timeout=20) == 0, "exit status")
    finally:
        w.stop()


@test
def workers_not_concurrent():
    def start(*args):
        return subprocess.run([LUDO, "serve", "spec/fixtures/serve/single",
                               "--port", "0", *args], stderr=subprocess.PIPE,
                              text=True, timeout=20)
    r = start("--workers", "2")
    check(r.returncode == 1 and "cannot be served by 2 workers" in
          r.stderr, r.stderr)
    r = start("--max-sessions", "3")
    check(r.returncode == 1 and "cannot serve 3 sessions" in r.stderr,
          r.stderr)
    r = start("--workers", "0")
    check(r.returncode == 2 and "--workers" in r.stderr, r.stderr)
    # by default: one worker (and one session, not_concurrent_env), and a
    # note saying so after the start line
    p = subprocess.Popen([LUDO, "serve", "spec/fixtures/serve/single",
                          "--port", "0"], stderr=subprocess.PIPE, text=True)
    try:
        line = p.stderr.readline()
        check("(simulation mode, 1 worker)" in line, line)
        note = p.stderr.readline()
        check("concurrent = false: one worker, one session" in note, note)
    finally:
        p.send_signal(signal.SIGTERM)
        check(p.wait(timeout=20) == 0, "exit status")
        p.stderr.close()


def raw_http(port, data):
    """Sends raw bytes; returns the status line's code (0: none)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(data)
    head = b""
    try:
        while b"\r\n" not in head:
            b = s.recv(4096)
            if not b:
                break
            head += b
    finally:
        s.close()
    m = re.match(rb"HTTP/1\.1 (\d+)", head)
    return int(m.group(1)) if m else 0


@test
def http_head_strictness():
    # a space before the colon would frame the body by a name that the
    # Host check and a proxy read differently: 400, as RFC 9112 5.1 says
    check(raw_http(S.port, b"POST /reset HTTP/1.1\r\nHost: x\r\n"
                   b"Content-Length : 2\r\n\r\n{}") == 400, "space")
    check(raw_http(S.port, b"GET /health HTTP/1.1\nHost: x\n\n") == 400,
          "bare LF")
    check(raw_http(S.port, b"POST /reset HTTP/1.1\r\nHost: x\r\n"
                   b"Transfer-Encoding: gzip, chunked\r\n\r\n"
                   b"2\r\n{}\r\n0\r\n\r\n") == 501, "gzip")
    check(raw_http(S.port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
          == 200, "a plain request still passes")


@test
def requests_the_transport_refuses_are_counted():
    # answered by the HTTP layer itself (malformed, 431): still requests,
    # and errors, in /metrics
    def counts():
        _, text, _ = S.http("GET", "/metrics")
        return (metric(text, "ludo_http_requests_total"),
                metric(text, "ludo_errors_total", code="HTTP_4XX"))
    req0, err0 = counts()
    check(raw_http(S.port, b"GARBAGE\r\n\r\n") == 400, "garbage")
    check(raw_http(S.port, b"GET / HTTP/1.1\r\nHost: x\r\nX: " +
                   b"a" * 20000 + b"\r\n\r\n") == 431, "big head")
    req1, err1 = counts()
    # (the second /metrics request counts itself: +1)
    check(req1 - req0 == 3 and err1 - err0 == 2, (req0, req1, err0, err1))


@test
async def ws_scalar_frames():
    for text in ("123", "null", "true", '"x"'):
        async with S.ws() as ws:
            await ws.send(text)
            err = json.loads(await ws.recv())
            check(err["data"]["code"] == "SESSION_ERROR", (text, err))
            await ws.wait_closed()
            check(ws.close_code == 1000, (text, ws.close_code))
    status, body, _ = S.http("POST", "/mcp", "5")
    check(body["error"]["code"] == -32600, body)
    status, body, _ = S.http("POST", "/reset", "5")
    check(status == 422 and body["detail"][0]["type"] ==
          "model_attributes_type", body)


def ws_frame(opcode, payload):
    """A masked client frame (mask 0: the payload as it is)."""
    n = len(payload)
    head = bytes([0x80 | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack(">H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack(">Q", n)
    return head + b"\0\0\0\0" + payload


@test
def ws_queue_overflow_in_order():
    # 66 steps at once: 64 may wait; the replies owed come first, in
    # order, then the error and close 1008
    s = raw_ws(S.port)
    s.sendall(ws_frame(1, b'{"type":"reset","data":{}}'))
    read_frame(s)
    s.sendall(b"".join(ws_frame(1, b'{"type":"step","data":{"message":'
                                   b'"m%d"}}' % i) for i in range(66)))
    got = []
    while True:
        op, data = read_frame(s)
        if op == 8:
            break
        got.append(json.loads(data))
    steps = [g for g in got if g["type"] == "observation"]
    check(len(steps) >= 64, len(steps))
    check([g["data"]["observation"]["echoed_message"] for g in steps] ==
          ["m%d" % i for i in range(len(steps))], "order")
    check(got[-1]["type"] == "error" and
          "Too many messages" in got[-1]["data"]["message"], got[-1])
    check(struct.unpack(">H", data[:2])[0] == 1008, data)
    s.close()


@test
def ws_close_frame_one_byte():
    s = raw_ws(S.port)
    s.sendall(ws_frame(8, b"\x03"))
    op, data = read_frame(s)
    check(op == 8 and struct.unpack(">H", data[:2])[0] == 1002, data)
    s.close()


@test
async def ws_mcp_errors_are_json_rpc():
    async with S.ws("/mcp") as ws:
        await ws.send(b"\x01\x02")
        err = json.loads(await ws.recv())
        check(err.get("jsonrpc") == "2.0" and err["error"]["code"] == -32000
              and err["id"] is None, err)


@test
async def idle_timeout_counts_from_the_call_end():
    c = Server("spec/fixtures/serve/slow", "--session-timeout", "1")
    try:
        async with c.ws() as ws:
            await ws.send(json.dumps({"type": "reset", "data": {}}))
            json.loads(await ws.recv())
            await ws.send(json.dumps({"type": "step",
                                      "data": {"ms": 2500}}))
            obs = json.loads(await ws.recv())
            check(obs["type"] == "observation", obs)
            # idle since the reply: well within the 1 s timeout, a step
            await asyncio.sleep(0.3)
            await ws.send(json.dumps({"type": "step", "data": {"ms": 0}}))
            obs = json.loads(await ws.recv())
            check(obs["type"] == "observation", obs)
    finally:
        check(c.stop() == 0, "exit status")


def reset_close(s):
    """Ends a socket with a RST: no TIME_WAIT holds its source port."""
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def worker_ports(srv, n=2):
    """Source ports from which a connection reaches worker 0 and worker 1:
    the kernel's SO_REUSEPORT hash of the 4-tuple is stable, and a session
    made on a connection names the worker that made it ("w<N>-")."""
    got = {0: [], 1: []}
    # Below the kernel's ephemeral range, so no connection made meanwhile
    # (a client's, a worker's to the other) is given one of these ports
    # before the test binds it (it was: EADDRINUSE).
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    span = max(low - 10400, 1)
    base = 10000 + os.getpid() % span
    for sport in range(base, base + 400):
        try:
            s = raw_ws(srv.port, "/mcp", sport)
        except OSError:
            continue
        s.sendall(ws_frame(1, b'{"jsonrpc":"2.0","id":1,"method":'
                              b'"openenv/session/create"}'))
        sid = json.loads(read_frame(s)[1])["result"]["session_id"]
        reset_close(s)
        srv.http("POST", "/mcp", {"jsonrpc": "2.0", "id": 2, "method":
                                  "openenv/session/close",
                                  "params": {"session_id": sid}})
        w = got[int(sid[1])]
        if len(w) < n:
            w.append(sport)
        if min(len(v) for v in got.values()) == n:
            return got
    raise AssertionError(f"400 source ports, workers reached: {got}")


def wait_counted(srv, name, more, polls_count=False):
    """Polls /metrics until counter `name` has grown by `more` from its
    value now: the server has read the request or message sent next (it
    counts them as they come, before their call starts). polls_count: each
    poll is one of the requests counted (ludo_http_requests_total)."""
    base = metric(srv.http("GET", "/metrics")[1], name)

    def wait():
        for polls in range(1, 2000):
            n = metric(srv.http("GET", "/metrics")[1], name)
            if n - base - (polls if polls_count else 0) >= more:
                return
            time.sleep(0.01)
        raise AssertionError(f"{name} did not grow by {more}")
    return wait


def wait_detached(srv, sid):
    """Waits until HTTP calls may name session sid: its last WebSocket's
    detach reached the owner (409 until then)."""
    for _ in range(200):
        st, v, _ = srv.http("GET", "/state?session_id=" + sid)
        if st != 409:
            check(st == 200, (st, v))
            return
        time.sleep(0.02)
    raise AssertionError(f"session {sid} stayed attached")


def attach_raw(port, sid, sport, frames):
    """A raw WebSocket attached to session sid from source port sport, with
    `frames` sent, and its first reply; tried again while the session's
    last WebSocket is still leaving (see attached())."""
    for _ in range(200):
        s = raw_ws(port, "/ws?session_id=" + sid, sport)
        s.sendall(frames)
        v = json.loads(read_frame(s)[1])
        if not (v["type"] == "error" and
                "already has" in v["data"]["message"]):
            return s, v
        reset_close(s)
        time.sleep(0.02)
    raise AssertionError(f"session {sid} stayed attached")


@test
def a_call_answers_the_client_that_made_it():
    # A session with a slow call in flight from a client that left (a
    # WebSocket attached from either worker, or an HTTP request): a
    # WebSocket attached next, on either worker, has its own messages
    # wait for that call and gets exactly their replies, in order. (The
    # slow step is read by the server before its client leaves, and the
    # next client attaches once the last one's detach reached the owner:
    # waited for, not slept for.)
    c = Server("spec/fixtures/serve/slow", "--workers", "2")
    try:
        ports = worker_ports(c)
        sid = c.http("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method":
                                      "openenv/session/create"})[1]
        sid = sid["result"]["session_id"]
        owner = int(sid[1])
        steps = 0
        for first, second in ((0, 0), (1, 0), (0, 1), (1, 1), ("http", 0),
                              ("http", 1)):
            w2 = (owner + second) % 2
            wait_detached(c, sid)  # the last s2 is gone
            if first == "http":
                # the step runs while its HTTP client stays; the WebSocket
                # attaches meanwhile
                import threading
                t = threading.Thread(target=c.http, args=(
                    "POST", "/step", {"action": {"ms": 400}},
                    {"X-Session-Id": sid}))
                read = wait_counted(c, "ludo_http_requests_total", 1, True)
                t.start()
                read()
            else:
                w1 = (owner + first) % 2
                s1 = raw_ws(c.port, "/ws?session_id=" + sid, ports[w1][0])
                read = wait_counted(c, "ludo_ws_messages_total", 1)
                s1.sendall(ws_frame(1, b'{"type":"step","data":{"ms":400}}'))
                read()
                reset_close(s1)  # gone without a close frame
            s2, v = attach_raw(c.port, sid, ports[w2][1],
                               ws_frame(1, b'{"type":"step","data":{"ms":0}}')
                               + ws_frame(1, b'{"type":"state"}'))
            steps += 2
            check(v["type"] == "observation" and
                  v["data"]["observation"].get("slept") == 0,
                  (first, second, v))
            v = json.loads(read_frame(s2)[1])
            check(v["type"] == "state" and v["data"]["step_count"] == steps,
                  (first, second, steps, v))
            s2.sendall(ws_frame(1, b'{"type":"state"}'))
            v = json.loads(read_frame(s2)[1])
            check(v["type"] == "state", ("a reply not asked for",
                                         first, second, v))
            reset_close(s2)
            if first == "http":
                t.join()
    finally:
        check(c.stop() == 0, "exit status")


@test
def unread_replies_share_one_bound():
    # Clients that pipeline steps with big replies and read none, each
    # under its connection's own 32 MiB: together they pass the server's
    # --max-output (16 MiB, all workers), so the ones that add to it while
    # their earlier replies wait end with 1008 after those; the others
    # get every reply, a new client is served, and the bytes counted go
    # back to 0 once they are gone.
    c = Server("spec/fixtures/serve/big", "--workers", "2",
               "--max-output", "16")
    try:
        socks = []
        for _ in range(6):
            s = raw_ws(c.port)
            s.sendall(ws_frame(1, b'{"type":"reset"}'))
            read_frame(s)
            s.sendall(b"".join(ws_frame(1, b'{"type":"step","data":'
                                           b'{"mib":4}}') for _ in range(4)))
            socks.append(s)
        time.sleep(2)
        pending = metric(c.http("GET", "/metrics")[1],
                         "ludo_output_pending_bytes")
        # the bound, plus each connection's one reply that may always go
        check(pending <= (16 + 6 * 4.1) * 2 ** 20, pending)
        ended, whole = 0, 0
        for s in socks:
            got = 0
            while True:
                op, data = read_frame(s)
                if op == 8:
                    check(struct.unpack(">H", data[:2])[0] == 1008 and
                          b"does not read" in data, data)
                    ended += 1
                    break
                check(json.loads(data)["type"] == "observation", data[:80])
                got += 1
                if got == 4:
                    whole += 1
                    break
            s.close()
        check(ended >= 1 and ended + whole == 6, (ended, whole))
        s = raw_ws(c.port)
        s.sendall(ws_frame(1, b'{"type":"step","data":{"mib":1}}'))
        op, data = read_frame(s)
        check(op == 1 and len(data) > 2 ** 20, (op, len(data)))
        s.close()
        for _ in range(50):
            pending = metric(c.http("GET", "/metrics")[1],
                             "ludo_output_pending_bytes")
            if pending == 0:
                break
            time.sleep(0.1)
        check(pending == 0, pending)
    finally:
        check(c.stop() == 0, "exit status")


@test
def graceful_shutdown_with_no_connection_left():
    # SIGTERM while a step runs for a client that has gone (one worker,
    # and two: then neither has a connection left): the drain ends when
    # the step does, not at the 15 s deadline of a worker waiting for
    # connections it no longer has.
    for workers in ("1", "2"):
        c = Server("spec/fixtures/serve/slow", "--workers", workers)
        sid = c.http("POST", "/reset", {})[2]["X-Session-Id"]
        s = socket.create_connection(("127.0.0.1", c.port), timeout=10)
        body = json.dumps({"action": {"ms": 800}}).encode()
        s.sendall(b"POST /step HTTP/1.1\r\nHost: x\r\nContent-Type: "
                  b"application/json\r\nX-Session-Id: " + sid.encode() +
                  b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        time.sleep(0.1)
        reset_close(s)
        c.p.send_signal(signal.SIGTERM)
        t0 = time.time()
        status = c.p.wait(timeout=30)
        log = c.p.stderr.read()
        c.p.stderr.close()
        check(status == 0, (workers, status, log))
        check("did not close in time" not in log,
              (workers, round(time.time() - t0, 1), log))


@test
def an_answer_never_reaches_a_later_client():
    # A WebSocket asks (an mcp frame) to close a session of the other
    # worker, busy with a spinning step so the answer comes late, and
    # leaves; a new client of the same worker, whose record may take the
    # freed one's address, must not get that answer.
    c = Server("spec/fixtures/serve/big", "--workers", "2",
               "--cpu-budget", "20000")
    try:
        ports = worker_ports(c)
        spin = c.http("POST", "/reset", {})[2]["X-Session-Id"]
        sp = raw_ws(c.port, "/ws?session_id=" + spin,
                    ports[int(spin[1])][0])
        sp.sendall(ws_frame(1, b'{"type":"step","data":{"mib":-1}}'))
        other = 1 - int(spin[1])
        for i in range(10):
            v = c.http("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method":
                                        "openenv/session/create"})[1]
            target = v["result"]["session_id"]
            if target[1] != spin[1]:
                continue  # made on the other worker: not busy
            a = raw_ws(c.port, "/ws", ports[other][0])
            a.sendall(ws_frame(1, b'{"type":"state"}'))
            read_frame(a)
            a.sendall(ws_frame(1, json.dumps({"type": "mcp", "data": {
                "jsonrpc": "2.0", "id": "close-%d" % i, "method":
                "openenv/session/close", "params": {"session_id": target}}})
                .encode()))
            reset_close(a)
            b = raw_ws(c.port, "/ws", ports[other][1])
            time.sleep(0.1)
            b.sendall(ws_frame(1, b'{"type":"state"}'))
            v = json.loads(read_frame(b)[1])
            check(v["type"] == "state", ("a reply not asked for", v))
            reset_close(b)
        reset_close(sp)
    finally:
        check(c.stop() == 0, "exit status")


@test
def graceful_shutdown_finishes_forwarded_steps():
    # SIGTERM while a step runs for a WebSocket attached from the other
    # worker, and for an X-Session-Id request from there: both workers
    # drain, so the step answers (as on the owner) before the 1001.
    c = Server("spec/fixtures/serve/slow", "--workers", "2")
    ports = worker_ports(c)
    sid = c.http("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method":
                                  "openenv/session/create"})[1]
    sid = sid["result"]["session_id"]
    other = 1 - int(sid[1])
    sid2 = c.http("POST", "/reset", {})[2]["X-Session-Id"]
    h = socket.create_connection(("127.0.0.1", c.port), timeout=10,
                                 source_address=("127.0.0.1",
                                                 ports[1 - int(sid2[1])][1]))
    body = json.dumps({"action": {"ms": 800}}).encode()
    h.sendall(b"POST /step HTTP/1.1\r\nHost: x\r\nContent-Type: "
              b"application/json\r\nX-Session-Id: " + sid2.encode() +
              b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    s = raw_ws(c.port, "/ws?session_id=" + sid, ports[other][0])
    s.sendall(ws_frame(1, b'{"type":"step","data":{"ms":800}}'))
    time.sleep(0.2)
    c.p.send_signal(signal.SIGTERM)
    op, data = read_frame(s)
    check(op == 1 and json.loads(data)["type"] == "observation", (op, data))
    op, data = read_frame(s)
    check(op == 8 and struct.unpack(">H", data[:2])[0] == 1001, (op, data))
    head = h.recv(65536)
    check(head.startswith(b"HTTP/1.1 200"), head[:200])
    reset_close(s)
    reset_close(h)
    check(c.p.wait(timeout=30) == 0, "exit status")
    c.p.stderr.close()


@test
def graceful_shutdown_cancels_forwarded_steps():
    # A step of a WebSocket attached from the other worker outlasts
    # --drain-timeout: the owner cancels it, the answer ends the asker's
    # drain from inside its continuation (which once freed the proxy
    # under it), and the WebSocket still ends with 1001, the server 0.
    for _ in range(3):
        c = Server("spec/fixtures/serve/slow", "--workers", "2",
                   "--drain-timeout", "1")
        ports = worker_ports(c, 1)
        sid = c.http("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method":
                                      "openenv/session/create"})[1]
        sid = sid["result"]["session_id"]
        s = raw_ws(c.port, "/ws?session_id=" + sid,
                   ports[1 - int(sid[1])][0])
        s.sendall(ws_frame(1, b'{"type":"step","data":{"ms":5000}}'))
        time.sleep(0.3)
        c.p.send_signal(signal.SIGTERM)
        while True:
            op, data = read_frame(s)
            if op == 8:
                break
            check(json.loads(data)["type"] == "error", data)
        check(struct.unpack(">H", data[:2])[0] == 1001, data)
        reset_close(s)
        status = c.p.wait(timeout=30)
        log = c.p.stderr.read()
        c.p.stderr.close()
        check(status == 0, (status, log))


@test
def graceful_shutdown_drops_forwarded_waiting_steps():
    # On each worker a session busy with a step, and a WebSocket from the
    # other worker whose step waits behind it at the owner. SIGTERM: the
    # owners drop the waiting steps, as a local client's queued ones, and
    # say so, so neither worker waits for the other's answer until the
    # drain timeout (they did: 15 s, the deadline); each WebSocket ends
    # with 1001 and no reply, the first steps answer.
    c = Server("spec/fixtures/serve/slow", "--workers", "2",
               "--drain-timeout", "14")
    ports = worker_ports(c, 3)
    hs, ws = [], []
    for w in (0, 1):
        s = socket.create_connection(("127.0.0.1", c.port), timeout=10,
                                     source_address=("127.0.0.1",
                                                     ports[w][0]))
        body = b'{"jsonrpc":"2.0","id":1,"method":"openenv/session/create"}'
        s.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: "
                  b"application/json\r\nContent-Length: %d\r\n\r\n"
                  % len(body) + body)
        got = b""
        while not got.rstrip().endswith(b"}"):
            got += s.recv(65536)
        reset_close(s)
        v = json.loads(got.split(b"\r\n\r\n", 1)[1])
        v = v["result"]["session_id"]  # a session of worker w
        check(int(v[1]) == w, v)
        h = socket.create_connection(("127.0.0.1", c.port), timeout=10,
                                     source_address=("127.0.0.1",
                                                     ports[w][1]))
        body = json.dumps({"action": {"ms": 1000}}).encode()
        h.sendall(b"POST /step HTTP/1.1\r\nHost: x\r\nContent-Type: "
                  b"application/json\r\nX-Session-Id: " + v.encode() +
                  b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        hs.append(h)
        time.sleep(0.1)
        a = raw_ws(c.port, "/ws?session_id=" + v, ports[1 - w][2])
        a.sendall(ws_frame(1, b'{"type":"step","data":{"ms":0}}'))
        ws.append(a)
    time.sleep(0.2)
    c.p.send_signal(signal.SIGTERM)
    t0 = time.time()
    for a in ws:
        a.settimeout(30)
        op, data = read_frame(a)
        check(op == 8 and struct.unpack(">H", data[:2])[0] == 1001,
              (op, data[:120]))
        reset_close(a)
    # the steps end about 1 s in; a drain stuck to its timeout takes 14
    check(time.time() - t0 < 7, ("the drain ran to its timeout",
                                 round(time.time() - t0, 1)))
    for h in hs:
        head = h.recv(65536)
        check(head.startswith(b"HTTP/1.1 200"), head[:200])
        reset_close(h)
    status = c.p.wait(timeout=30)
    log = c.p.stderr.read()
    c.p.stderr.close()
    check(status == 0 and "did not close in time" not in log, (status, log))


def frames_until_close(s):
    """The text frames' JSON up to the close frame, and its code."""
    got = []
    while True:
        op, data = read_frame(s)
        if op == 8:
            return got, struct.unpack(">H", data[:2])[0]
        got.append(json.loads(data))


def create_session(srv):
    return srv.http("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method":
                                     "openenv/session/create"}
                    )[1]["result"]["session_id"]


@test
def ws_binary_frame_keeps_its_turn():
    # A binary frame sent while a step runs is refused after the replies
    # owed to the messages before it, in order (as a non-object frame is):
    # the error, then close 1003.
    c = Server("spec/fixtures/serve/slow")
    try:
        for last in (ws_frame(2, b"x"), ws_frame(1, b"[]")):
            s = raw_ws(c.port)
            s.sendall(ws_frame(1, b'{"type":"reset"}'))
            read_frame(s)
            s.sendall(ws_frame(1, b'{"type":"step","data":{"ms":300}}') +
                      ws_frame(1, b'{"type":"state"}') + last)
            got, code = frames_until_close(s)
            s.close()
            check([g["type"] for g in got] ==
                  ["observation", "state", "error"], got)
            check(got[2]["data"]["code"] == "SESSION_ERROR", got)
            check(code == (1003 if last[0] == 0x82 else 1000), code)
    finally:
        check(c.stop() == 0, "exit status")


@test
def ws_refusal_keeps_the_attached_session():
    # A SESSION_ERROR on a WebSocket attached with ?session_id= ends the
    # socket, not the session (OPENENV.md 1.4): it answers after.
    for last in (ws_frame(2, b"x"), ws_frame(1, b"[]")):
        sid = create_session(S)
        s = raw_ws(S.port, "/ws?session_id=" + sid)
        s.sendall(ws_frame(1, b'{"type":"reset"}'))
        read_frame(s)
        s.sendall(ws_frame(1, b'{"type":"step","data":{"message":"a"}}'))
        read_frame(s)
        s.sendall(last)
        got, code = frames_until_close(s)
        s.close()
        check(got[-1]["data"]["code"] == "SESSION_ERROR", got)
        st, v, _ = S.http("GET", "/state?session_id=" + sid)
        check(st == 200 and v["step_count"] == 1, (st, v))


@test
def ws_queued_bytes_are_bounded():
    # --max-message 1: a connection may hold 2 MiB of messages waiting
    # behind a step; the message past that is refused after the replies
    # owed to those before it (the error, then close 1008).
    c = Server("spec/fixtures/serve/slow", "--max-message", "1")
    try:
        sid = create_session(c)
        s = raw_ws(c.port, "/ws?session_id=" + sid)
        s.sendall(ws_frame(1, b'{"type":"reset"}'))
        read_frame(s)
        big = ws_frame(1, json.dumps({"type": "step", "data": {
            "ms": 0, "pad": "x" * 900000}}).encode())
        s.sendall(ws_frame(1, b'{"type":"step","data":{"ms":500}}') +
                  big * 3)
        got, code = frames_until_close(s)
        s.close()
        check([g["type"] for g in got] ==
              ["observation", "error", "error", "error"], got)
        check([g["data"]["code"] for g in got[1:]] ==
              ["VALIDATION_ERROR", "VALIDATION_ERROR", "SESSION_ERROR"], got)
        check("Too many bytes" in got[3]["data"]["message"], got[3])
        check(code == 1008, code)
        check(c.http("GET", "/state?session_id=" + sid)[0] == 200, "gone")
    finally:
        check(c.stop() == 0, "exit status")


@test
def ws_queued_bytes_share_one_bound():
    # --max-output 1 bounds the messages waiting on all connections
    # together (past 64 KiB each): the connection that would pass it is
    # refused; the one already holding 900 KB is answered and stays.
    c = Server("spec/fixtures/serve/slow", "--max-output", "1",
               "--workers", "1")
    try:
        a, b = raw_ws(c.port), raw_ws(c.port)
        for s in (a, b):
            s.sendall(ws_frame(1, b'{"type":"reset"}'))
            read_frame(s)
        # a's pad waits behind its 2 s step, b's comes meanwhile (once
        # the server has read a's: polled, not slept for)
        step = ws_frame(1, b'{"type":"step","data":{"ms":2000}}')
        a.sendall(step + ws_frame(1, json.dumps({"type": "step", "data": {
            "ms": 0, "pad": "x" * 900000}}).encode()))
        for _ in range(500):
            # the gauge shows what waits past each connection's 64 KiB
            _, text, _ = c.http("GET", "/metrics")
            pending = metric(text, "ludo_input_pending_bytes")
            if pending > 800000:
                break
            time.sleep(0.01)
        check(800000 < pending < 900000, pending)
        b.sendall(step + ws_frame(1, json.dumps({"type": "step", "data": {
            "ms": 0, "pad": "x" * 300000}}).encode()))
        got, code = frames_until_close(b)
        b.close()
        check([g["type"] for g in got] == ["observation", "error"], got)
        check("Too many bytes" in got[1]["data"]["message"] and
              code == 1008, (got, code))
        check(json.loads(read_frame(a)[1])["type"] == "observation", "a")
        check(json.loads(read_frame(a)[1])["data"]["code"] ==
              "VALIDATION_ERROR", "a's second reply")
        a.sendall(ws_frame(1, b'{"type":"state"}'))
        check(json.loads(read_frame(a)[1])["type"] == "state", "a closed")
        _, text, _ = c.http("GET", "/metrics")
        check(metric(text, "ludo_input_pending_bytes") == 0, "gauge at 0")
        a.close()
    finally:
        check(c.stop() == 0, "exit status")


@test
async def mcp_call_on_an_attached_session_names_the_websocket():
    # tools/call naming a session a WebSocket holds: -32600 that says so
    # (it said "busy" while the session was idle)
    sid = create_session(S)
    async with S.ws("/ws?session_id=" + sid) as ws:
        await rpc(ws, {"type": "reset"})
        st, v, _ = S.http("POST", "/mcp", {
            "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "echo_message", "arguments": {"message": "x"},
                "session_id": sid}})
        check(v["error"]["code"] == -32600 and
              "belongs to a WebSocket" in v["error"]["message"], v)


@test
async def session_id_query_is_percent_decoded():
    # ?session_id= is a query value: %2D is "-", as any HTTP client may
    # encode it
    sid = create_session(S)
    enc = sid.replace("-", "%2D")
    st, v, _ = S.http("GET", "/state?session_id=" + enc)
    check(st == 200 and "step_count" in v, (st, v))
    async with S.ws("/ws?session_id=" + enc) as ws:
        v = await rpc(ws, {"type": "state"})
        check(v["type"] == "state", v)


@test
def method_not_allowed_names_the_methods():
    for method, path, allow in (("GET", "/mcp", "POST"),
                                ("DELETE", "/mcp", "POST"),
                                ("POST", "/health", "GET, HEAD"),
                                ("GET", "/step", "POST"),
                                ("POST", "/list_environments", "GET, HEAD")):
        st, v, h = S.http(method, path)
        check(st == 405 and h.get("Allow") == allow, (method, path, st, h))


@test
def origin_of_another_site_is_refused():
    # MCP's transport: Origin is checked against DNS rebinding. The
    # server listens on 127.0.0.1: only loopback pages may call it.
    call = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    for origin, want in (("http://evil.example", 403),
                         ("http://127.0.0.1.evil.example:8000", 403),
                         ("null", 403),
                         ("http://localhost:3000", 200),
                         ("http://127.0.0.1", 200),
                         ("http://[::1]:9", 200)):
        st, v, _ = S.http("POST", "/mcp", call, {"Origin": origin})
        check(st == want, (origin, st, v))
    # a rebound name is the Host as well as the Origin: still refused
    st, v, _ = S.http("POST", "/mcp", call, {"Origin": "http://evil.example",
                                             "Host": "evil.example"})
    check(st == 403, (st, v))
    st, _, _ = S.http("GET", "/health", headers={"Origin": "http://e.x"})
    check(st == 200, st)
    s = socket.create_connection(("127.0.0.1", S.port), timeout=10)
    s.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\nOrigin: http://evil.example"
              b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Version: 13\r\n"
              b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
    head = s.recv(65536)
    s.close()
    check(head.startswith(b"HTTP/1.1 403"), head[:100])


@test
def mcp_protocol_version_and_responses():
    call = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    st, v, _ = S.http("POST", "/mcp", call,
                      {"MCP-Protocol-Version": "1999-01-01"})
    check(st == 400 and "error" in v, (st, v))
    st, v, _ = S.http("POST", "/mcp", call,
                      {"MCP-Protocol-Version": "2025-06-18"})
    check(st == 200 and v["result"] == {}, (st, v))
    # a JSON-RPC response from the client: 202, no body
    for r in ({"jsonrpc": "2.0", "id": 7, "result": {}},
              {"jsonrpc": "2.0", "id": 7, "error": {"code": 1,
                                                    "message": "m"}}):
        st, v, _ = S.http("POST", "/mcp", r)
        check(st == 202 and v is None, (st, v))


@test
def token_from_the_environment_is_announced():
    os.environ["LUDO_TOKEN"] = "zz-secret-zz"
    try:
        c = Server("examples/echo")
    finally:
        del os.environ["LUDO_TOKEN"]
    try:
        # the notice follows the first line at once; without one, the
        # kill ends the wait (select would miss a line read ahead)
        import threading
        timer = threading.Timer(5, c.p.kill)
        timer.start()
        line = c.p.stderr.readline()
        timer.cancel()
        check("LUDO_TOKEN" in line and "Authorization" in line and
              "zz-secret-zz" not in line, line)
        check(c.http("GET", "/metadata")[0] == 401, "no auth")
    finally:
        check(c.stop() == 0, "exit status")


def refused_at_start(args, env=None):
    """Runs ludo serve with args; it must exit at once, non-zero: its
    stderr."""
    e = dict(os.environ)
    e.pop("LUDO_TOKEN", None)
    e.update(env or {})
    p = subprocess.run([LUDO, "serve", "examples/echo", "--port", "0",
                        *args], capture_output=True, text=True, timeout=20,
                       env=e)
    check(p.returncode != 0, (args, p.returncode, p.stderr))
    return p.stderr


@test
def tokens_no_client_could_send_are_refused():
    # an empty token (an unset variable behind --token "$SECRET") would
    # serve with no auth; one with a space, tab or newline at an end can
    # never be matched (HTTP stacks trim header values): both refused,
    # naming where the token came from, never quoting it
    for args, env, want in (
            (["--token", ""], None, "--token: the token is empty"),
            ([], {"LUDO_TOKEN": ""}, "$LUDO_TOKEN: the token is empty"),
            (["--token", "s3cret\n"], None, "a newline at byte 7"),
            (["--token", " s3cret"], None, "a space at byte 1"),
            ([], {"LUDO_TOKEN": "s3cret\t"}, "a tab at byte 7"),
            (["--token", "s3cr\u00e9t"], None, "a non-ASCII byte")):
        err = refused_at_start(args, env)
        check(want in err and "s3cr" not in err, (args, env, err))


@test
def session_timeout_beyond_its_range_is_refused():
    # the server counts it in 32-bit milliseconds: 4294968 s would wrap
    # to 704 ms and close every session at once
    err = refused_at_start(["--session-timeout", "4294968"])
    check("--session-timeout" in err and "4294967" in err, err)
    c = Server("examples/echo", "--session-timeout", "4294967")
    try:
        async def go():
            async with c.ws() as w:
                await w.send(json.dumps({"type": "reset", "data": {}}))
                r = json.loads(await w.recv())
                check(r["type"] == "observation", r)
                await asyncio.sleep(2.5)  # a wrapped timeout reaps by now
                await w.send(json.dumps({"type": "state"}))
                r = json.loads(await w.recv())
                check(r["type"] == "state", r)
        asyncio.run(go())
    finally:
        check(c.stop() == 0, "exit status")


@test
def ipv4_mapped_loopback_is_loopback():
    # ::ffff:127.0.0.1 reaches loopback only: a rebound name (Origin and
    # Host both evil) is refused as on 127.0.0.1; the start-up line's URL
    # has the address in brackets
    p = subprocess.Popen([LUDO, "serve", "examples/echo", "--port", "0",
                          "--host", "::ffff:127.0.0.1"],
                         stderr=subprocess.PIPE, text=True)
    try:
        line = p.stderr.readline()
        m = re.search(r"http://\[::ffff:127\.0\.0\.1\]:(\d+) ", line)
        check(m, line)
        c = http.client.HTTPConnection("127.0.0.1", int(m.group(1)),
                                       timeout=10)
        c.request("POST", "/mcp", body=json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "ping"}),
            headers={"Origin": "http://evil.example", "Host": "evil.example"})
        r = c.getresponse()
        r.read()
        c.close()
        check(r.status == 403, r.status)
    finally:
        p.send_signal(signal.SIGTERM)
        check(p.wait(timeout=20) == 0, "exit status")
        p.stderr.close()


@test
def mcp_tool_error_is_one_line():
    # a tool that raised: -32603 (OpenEnv's MCPToolClient looks for
    # "error") with the first line of its message: no traceback, no code
    c = Server("spec/fixtures/serve/toolboom")
    try:
        st, v, _ = c.http("POST", "/mcp", {
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "boom", "arguments": {}}})
        e = v["error"]
        check(e["code"] == -32603 and "kaboom" in e["message"], v)
        check("\n" not in e["message"] and "traceback" not in e["message"]
              and not e["message"].startswith("ESCRIPT"), e)
    finally:
        check(c.stop() == 0, "exit status")


def cpu_seconds(pid):
    """User plus system CPU time the process has used, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@test
def invalid_json_with_many_keys_is_refused_cheaply():
    # A text of a million keys with its last brace missing, over /ws (twice)
    # and as a POST /step body: the usual refusals (INVALID_JSON; 422
    # json_invalid at a body position), found in one linear pass instead
    # of after building a million-entry tree on the worker's loop (1.8 to
    # 4 s of CPU each). The bound is loose: the pass takes a few tens of ms.
    keys = ",".join('"%d":0' % i for i in range(1000000))
    text = ('{"type":"step","data":{"message":"x","metadata":{' + keys +
            "}}").encode()
    c = Server("examples/echo", "--workers", "1")
    try:
        s = raw_ws(c.port)
        before = cpu_seconds(c.p.pid)
        for _ in range(2):
            s.sendall(ws_frame(1, text))
            op, data = read_frame(s)
            v = json.loads(data)
            check(v["type"] == "error" and
                  v["data"]["code"] == "INVALID_JSON" and
                  v["data"]["message"].startswith("Invalid JSON: "), v)
        body = b'{"action":' + text[len(b'{"type":"step","data":'):]
        st, v, _ = c.http("POST", "/step", body)
        check(st == 422 and v["detail"][0]["type"] == "json_invalid" and
              v["detail"][0]["loc"][0] == "body" and
              isinstance(v["detail"][0]["loc"][1], int) and
              v["detail"][0]["msg"].startswith("JSON decode error: "),
              (st, str(v)[:300]))
        used = cpu_seconds(c.p.pid) - before
        check(used < 2.0, "%.2f s of CPU for three refusals" % used)
        reset_close(s)
    finally:
        check(c.stop() == 0, "exit status")


# ---- HTTP sessions give way (docs/protocol.md, "Sessions and capacity") ----

MADE_ROOM = "closed to make room for other sessions"


def open_sessions(srv):
    return metric(srv.http("GET", "/metrics")[1], "ludo_sessions_open")


def wait_open(srv, n):
    """ludo_sessions_open once it is n (a slot given by another worker's
    session comes back when that worker has closed it)."""
    for _ in range(50):
        got = open_sessions(srv)
        if got == n:
            return
        time.sleep(0.1)
    raise AssertionError(f"ludo_sessions_open {got}, not {n}")


@test
async def http_session_gives_way_to_a_websocket():
    # OpenEnv's tests/envs/test_websockets.py on a server of one session:
    # an HTTP reset then a stateless GET /state; an HTTP reset, then a
    # WebSocket client, then GET /state. The reset's session is idle and
    # no socket holds it: the newcomer takes its slot.
    for env in ("examples/echo", "spec/fixtures/serve/single"):
        args = ("--max-sessions", "1") if env == "examples/echo" else ()
        c = Server(env, *args)
        try:
            st, v, h = c.http("POST", "/reset", {})
            check(st == 200, (st, v))
            st, v, _ = c.http("GET", "/state")
            check(st == 200 and v["step_count"] == 0, (st, v))
            st, v, h = c.http("POST", "/reset", {})
            check(st == 200, (st, v))
            sid = h["X-Session-Id"]
            async with c.ws() as ws:
                v = await rpc(ws, {"type": "reset"})
                check(v["type"] == "observation", v)
                action = {"message": "hi"} if env == "examples/echo" else {}
                v = await rpc(ws, {"type": "step", "data": action})
                check(v["type"] == "observation", v)
            wait_open(c, 0)
            st, v, _ = c.http("GET", "/state")
            check(st == 200 and v["step_count"] == 0, (st, v))
            # the evicted session is gone, as one the idle timeout closed
            # (404), and the message says why
            st, v, _ = c.http("GET", "/state", headers={"X-Session-Id": sid})
            check(st == 404 and v["detail"].startswith(
                "Unknown session_id: " + sid) and MADE_ROOM in v["detail"],
                (st, v))
            # a new HTTP session takes the place of the last one
            sids = [c.http("POST", "/reset", {})[2]["X-Session-Id"]
                    for _ in range(3)]
            st, v, _ = c.http("GET", "/state?session_id=" + sids[-1])
            check(st == 200, (st, v))
            st, v, _ = c.http("GET", "/state?session_id=" + sids[0])
            check(st == 404 and MADE_ROOM in v["detail"], (st, v))
            wait_open(c, 1)  # a session given way on another worker goes
            m = c.http("GET", "/metrics")[1]  # when its loop gets to it
            check(metric(m, "ludo_sessions_open") == 1 and
                  metric(m, "ludo_sessions_reclaimed_total") == 4, m)
        finally:
            check(c.stop() == 0, "exit status")


@test
async def workers_http_sessions_give_way():
    w = Server("examples/echo", "--workers", "2", "--max-sessions", "2")
    try:
        sids = [w.http("POST", "/reset", {})[2]["X-Session-Id"]
                for _ in range(6)]
        check(all(re.match(r"^w[01]-", s) for s in sids), sids)
        async with w.ws() as a, w.ws() as b:
            for ws in (a, b):
                v = await rpc(ws, {"type": "reset"})
                check(v["type"] == "observation", v)
                v = await rpc(ws, {"type": "step",
                                   "data": {"message": "x"}})
                check(v["type"] == "observation", v)
            for sid in sids:
                st, v, _ = w.http("POST", "/step",
                                  {"action": {"message": "late"}},
                                  {"X-Session-Id": sid})
                check(st == 404 and v["detail"].startswith(
                    "Unknown session_id: " + sid) and
                    MADE_ROOM in v["detail"], (sid, st, v))
            wait_open(w, 2)
            check(sum(per_worker(w, "ludo_worker_sessions_open")) == 2,
                  "per worker")
            async with w.ws() as third:
                v = json.loads(await third.recv())
                check(v["data"]["code"] == "CAPACITY_REACHED", v)
        wait_open(w, 0)
        m = w.http("GET", "/metrics")[1]
        check(metric(m, "ludo_sessions_opened_total") ==
              metric(m, "ludo_sessions_closed_total") == 8 and
              metric(m, "ludo_sessions_reclaimed_total") == 6, m)
        # a session of one worker gives way to a request on the other
        c0, c1 = conns_by_worker(w)
        async with w.ws() as a:
            await rpc(a, {"type": "reset"})
            for first, then in ((c0, c1), (c1, c0)):
                st, v, h = first.call("POST", "/reset", {})
                sid = h["X-Session-Id"]
                st, v, h = then.call("POST", "/reset", {})
                check(st == 200 and h["X-Session-Id"][:3] !=
                      sid[:3], (st, v, sid))
                st, v, _ = then.call("POST", "/step", {"action": {
                    "message": "x"}}, {"X-Session-Id": sid})
                check(st == 404 and MADE_ROOM in v["detail"], (st, v))
                st, v, _ = then.call("POST", "/mcp", {
                    "jsonrpc": "2.0", "id": 1, "method":
                    "openenv/session/close",
                    "params": {"session_id": h["X-Session-Id"]}})
                check(v["result"]["closed"] is True, v)
            wait_open(w, 1)
        wait_open(w, 0)
    finally:
        check(w.stop() == 0, "exit status")


@test
async def busy_or_attached_http_sessions_stay():
    # An HTTP session with a call in flight, or with a WebSocket attached
    # (?session_id=), is not taken: the newcomer is refused as before. So
    # is an MCP session (openenv/session/create), which its client closes.
    for workers in ("1", "2"):
        c = Server("spec/fixtures/serve/slow", "--max-sessions", "1",
                   "--workers", workers)
        try:
            st, v, h = c.http("POST", "/reset", {})
            sid = h["X-Session-Id"]
            step = asyncio.create_task(asyncio.to_thread(
                c.http, "POST", "/step", {"action": {"ms": 1500}},
                {"X-Session-Id": sid}))
            await asyncio.sleep(0.5)
            async with c.ws() as ws:
                v = json.loads(await ws.recv())
                check(v["data"]["code"] == "CAPACITY_REACHED", v)
            st, v, _ = c.http("POST", "/reset", {})
            check(st == 503 and v["detail"].startswith("Server at capacity"),
                  (st, v))
            st, v, _ = await step
            check(st == 200 and v["observation"]["slept"] == 1500, (st, v))
            async with c.ws("/ws?session_id=" + sid) as att:
                v = await rpc(att, {"type": "step", "data": {"ms": 0}})
                check(v["type"] == "observation", v)
                async with c.ws() as ws:
                    v = json.loads(await ws.recv())
                    check(v["data"]["code"] == "CAPACITY_REACHED", v)
                st, v, _ = c.http("GET", "/state")
                check(st == 503, (st, v))
            # detached, it is idle again: the next newcomer takes it
            for _ in range(50):
                st, v, _ = c.http("GET", "/state")
                if st == 200:
                    break
                time.sleep(0.1)
            check(st == 200, (st, v))
            st, v, _ = c.http("GET", "/state?session_id=" + sid)
            check(st == 404 and MADE_ROOM in v["detail"], (st, v))
            mcp = create_session(c)
            async with c.ws() as ws:
                v = json.loads(await ws.recv())
                check(v["data"]["code"] == "CAPACITY_REACHED", v)
            st, v, _ = c.http("GET", "/state?session_id=" + mcp)
            check(st == 200, (st, v))
            check(open_sessions(c) == 1, "open")
        finally:
            check(c.stop() == 0, "exit status")


# ---- reviews' finds: pipelining, shutdown, capacity, timeouts, ids ----------

def raw_request(method, path, body=None, headers=None):
    """The bytes of one HTTP/1.1 request with a JSON body."""
    b = b"" if body is None else json.dumps(body).encode()
    h = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    return (f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: "
            f"application/json\r\nContent-Length: {len(b)}\r\n{h}\r\n"
            ).encode() + b


def read_response(f):
    """Status, JSON body and header fields (lowercased names) of the next
    response on f, a socket's binary file."""
    status = f.readline()
    check(status.startswith(b"HTTP/1.1 "), status)
    headers = {}
    while True:
        line = f.readline()
        if line in (b"\r\n", b""):
            break
        k, v = line.decode().split(":", 1)
        headers[k.strip().lower()] = v.strip()
    body = f.read(int(headers.get("content-length", "0")))
    return int(status.split()[1]), json.loads(body) if body else None, \
        headers


@test
def http_pipelined_requests_run_in_order():
    # Three steps and a state pipelined on one connection, all on one
    # session: handled one at a time, in order (RFC 9112 9.3.2), not side
    # by side (a load review got 200, 409, 409, 409).
    s = socket.create_connection(("127.0.0.1", S.port), timeout=10)
    f = s.makefile("rb")
    try:
        s.sendall(raw_request("POST", "/reset", {}))
        st, v, h = read_response(f)
        check(st == 200, (st, v))
        sid = {"X-Session-Id": h["x-session-id"]}
        s.sendall(b"".join(raw_request("POST", "/step", {"action": {
            "message": "m%d" % k}}, sid) for k in range(3)) +
            raw_request("GET", "/state", None, sid))
        got = [read_response(f) for _ in range(4)]
        check([g[0] for g in got] == [200] * 4, got)
        check([g[1]["observation"]["echoed_message"] for g in got[:3]] ==
              ["m0", "m1", "m2"], got)
        check(got[3][1]["step_count"] == 3, got[3])
    finally:
        s.close()


@test
async def graceful_shutdown_refuses_new_http_requests():
    # SIGTERM while a WebSocket step holds the drain: an HTTP request sent
    # before the stop finishes (a stateless step), and requests that come
    # during the drain on connections opened before it get 503 "the server
    # is shutting down" and Connection: close (a review found 500 "out of
    # memory" and "the call could not start").
    c = Server("spec/fixtures/serve/slow", "--workers", "1")
    try:
        sid = c.http("POST", "/reset", {})[2]["X-Session-Id"]
        later = [raw_request("POST", "/step", {"action": {"ms": 1}}),
                 raw_request("POST", "/step", {"action": {"ms": 1}},
                             {"X-Session-Id": sid}),
                 raw_request("POST", "/reset", {}),
                 raw_request("POST", "/mcp", {"jsonrpc": "2.0", "id": 1,
                                              "method": "tools/list"}),
                 raw_request("GET", "/health")]
        conns = []
        for _ in later:
            s = socket.create_connection(("127.0.0.1", c.port), timeout=10)
            conns.append((s, s.makefile("rb")))
        early = socket.create_connection(("127.0.0.1", c.port), timeout=10)
        ef = early.makefile("rb")
        early.sendall(raw_request("POST", "/step", {"action": {"ms": 800}}))
        async with c.ws() as ws:
            await rpc(ws, {"type": "reset"})
            await ws.send(json.dumps({"type": "step", "data": {"ms": 1500}}))
            await asyncio.sleep(0.3)
            c.p.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.3)
            for (s, f), req in zip(conns, later):
                s.sendall(req)
                st, v, h = read_response(f)
                check(st == 503 and v == {"detail": "the server is shutting "
                                          "down"} and
                      h.get("connection") == "close", (req, st, v, h))
                check(f.read() == b"", "the connection stays open")
                s.close()
            # answered during the drain: the answer says the connection
            # ends, and it does (a keep-alive client would otherwise send
            # its next request into a closing socket)
            st, v, h = read_response(ef)
            check(st == 200 and v["observation"]["slept"] == 800 and
                  h.get("connection") == "close", (st, v, h))
            check(ef.read() == b"", "the connection stays open")
            early.close()
            reply = json.loads(await asyncio.wait_for(ws.recv(), 10))
            check(reply.get("type") == "observation", reply)
            try:
                await asyncio.wait_for(ws.recv(), 10)
                check(False, "no close")
            except websockets.ConnectionClosed as e:
                check(e.code == 1001, e)
        loop = asyncio.get_running_loop()
        check(await loop.run_in_executor(None, c.p.wait, 20) == 0, "exit")
    finally:
        if c.p.poll() is None:
            c.p.kill()
            c.p.wait()
        c.p.stderr.close()


@test
def workers_least_recently_used_gives_way():
    # At capacity the least recently used idle HTTP session of the process
    # gives way, not the newest of the worker that needs the slot: three
    # old sessions on worker 0, one just made on worker 1, then another
    # reset on worker 1: the one just made still steps (a load review saw
    # it closed before its first step).
    w = Server("examples/echo", "--workers", "2", "--max-sessions", "4")
    try:
        c0, c1 = conns_by_worker(w)
        old = [c0.call("POST", "/reset", {})[2]["X-Session-Id"]
               for _ in range(3)]
        fresh = c1.call("POST", "/reset", {})[2]["X-Session-Id"]
        st, v, h = c1.call("POST", "/reset", {})
        check(st == 200 and h["X-Session-Id"][:3] == "w1-", (st, v))
        st, v, _ = c1.call("POST", "/step", {"action": {"message": "x"}},
                           {"X-Session-Id": fresh})
        check(st == 200, (fresh, st, v))
        wait_open(w, 4)
        check(per_worker(w, "ludo_worker_sessions_open") == [2, 2],
              per_worker(w, "ludo_worker_sessions_open"))
        gone = [sid for sid in old if c0.call("GET", "/state", None, {
            "X-Session-Id": sid})[0] == 404]
        check(len(gone) == 1, gone)
    finally:
        check(w.stop() == 0, "exit status")


@test
def session_timeout_applies_to_http_and_mcp_sessions():
    # --session-timeout names every session: those of POST /reset and of
    # openenv/session/create close when idle too (they kept 300 s).
    c = Server("examples/echo", "--session-timeout", "1")
    try:
        sid = c.http("POST", "/reset", {})[2]["X-Session-Id"]
        mcp = c.http("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method":
                                      "openenv/session/create"})[1]
        mcp = mcp["result"]["session_id"]
        for _ in range(200):
            if open_sessions(c) == 0:
                break
            time.sleep(0.1)
        st, v, _ = c.http("POST", "/step", {"action": {"message": "x"}},
                          {"X-Session-Id": sid})
        check(st == 404, (st, v))
        v = c.http("POST", "/mcp", {"jsonrpc": "2.0", "id": 2, "method":
                                    "tools/call", "params": {
                                        "name": "x", "session_id": mcp}})[1]
        check(v["error"]["code"] == -32602 and
              "Unknown" in v["error"]["message"], v)
        help_text = subprocess.run([LUDO, "help", "serve"], text=True,
                                   capture_output=True).stdout
        check("of every" in help_text, help_text)
    finally:
        check(c.stop() == 0, "exit status")


@test
async def bad_session_id_in_the_query_is_unknown():
    # A ?session_id= that does not decode (longer than any id, or with
    # %00) names no session: 404 as the header and body forms answer, not
    # a throwaway session's 200; /ws answers SESSION_ERROR.
    for q in ("w1-" + "a" * 200, "abc%00def"):
        st, v, _ = S.http("GET", "/state?session_id=" + q)
        check(st == 404 and v["detail"].startswith("Unknown session_id"),
              (q, st, v))
        st, v, _ = S.http("GET", "/state", None, {"X-Session-Id": q})
        check(st == 404, (q, st, v))
        async with S.ws("/ws?session_id=" + q) as ws:
            v = json.loads(await asyncio.wait_for(ws.recv(), 10))
            check(v["data"]["code"] == "SESSION_ERROR" and
                  "Unknown session_id" in v["data"]["message"], v)


@test
def mcp_tool_error_names_its_code():
    # A tool's error message is its own text, which may look like a limit
    # ("ETIMEOUT: ..."): error.data.code is ludo's code, ESCRIPT for what
    # the tool raised, ETIMEOUT for a real CPU limit.
    c = Server("spec/fixtures/serve/toolboom", "--cpu-budget", "300")
    try:
        def call(name):
            return c.http("POST", "/mcp", {
                "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": name, "arguments": {}}})[1]["error"]
        e = call("spoof")
        check(e["code"] == -32603 and e["message"].startswith("ETIMEOUT") and
              e["data"] == {"code": "ESCRIPT"}, e)
        e = call("spin")
        check(e["code"] == -32603 and e["data"] == {"code": "ETIMEOUT"}, e)
        e = call("boom")
        check(e["data"] == {"code": "ESCRIPT"}, e)
        e = call("nope")
        check(e["code"] == -32602 and e["data"] == {"code": "ENOENT"}, e)
    finally:
        check(c.stop() == 0, "exit status")


async def big_requests(c, big, odd, objs, limit):
    """many_values_hold_no_one_else's requests, over HTTP."""
    st, v, _ = await asyncio.to_thread(c.http, "POST", "/step",
                                       {"action": big})
    check(st == 200 and v["observation"]["echoed_message"] == "big",
          (st, str(v)[:200]))
    st, v, _ = await asyncio.to_thread(c.http, "POST", "/step", odd)
    check(st == 422 and v["detail"][0]["type"] == "value_error" and
          v["detail"][0]["loc"] == ["body"] and
          limit in v["detail"][0]["msg"], (st, v))
    rpc_text = ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":'
                '{"name":"echo_message","arguments":{"message":%s}}}' % objs)
    st, v, _ = await asyncio.to_thread(c.http, "POST", "/mcp", rpc_text)
    check(v["error"]["code"] == -32600 and limit in v["error"]["message"], v)
    st, v, _ = await asyncio.to_thread(
        c.http, "POST", "/reset", '{"seed":null,"seed":null,"x":%s}' % objs)
    check(st == 422 and limit in v["detail"][0]["msg"], (st, v))


@test
async def many_values_hold_no_one_else():
    # POST /step hands the action's bytes to the session, building no tree
    # on the loop: a big legit action works. Any other body, /ws message or
    # JSON-RPC text is decoded into a tree only up to 100000 values: past
    # that, a clear error naming the limit, not a stall of the worker.
    c = Server("examples/echo", "--workers", "1")
    limit = "more than 100000 JSON values"
    big = {"message": "big", "metadata": {"a": list(range(300000))}}
    objs = "[" + ",".join(["{}"] * 1000000) + "]"
    # not the common shape (a repeated field): the tree's path
    odd = ('{"action":{"message":"x","metadata":{"a":%s}},'
           '"request_id":null,"request_id":null}' % objs)
    try:
        async with c.ws() as other:
            await rpc(other, {"type": "reset"})
            done, stop = [], False

            async def step_meanwhile():
                while not stop:
                    v = await rpc(other, {"type": "step",
                                          "data": {"message": "o"}})
                    done.append(v["type"])

            task = asyncio.create_task(step_meanwhile())
            await asyncio.sleep(0.2)
            before = len(done)
            try:
                await big_requests(c, big, odd, objs, limit)
            finally:
                stop = True
            await task
            # the other client was answered while those ran, every time
            check(len(done) > before and
                  set(done) == {"observation"}, done)
        async with c.ws() as ws:
            await ws.send('{"type":"step","data":{"message":"x","a":%s},'
                          '"extra":1}' % objs)
            v = json.loads(await ws.recv())
            check(v["data"]["code"] == "VALIDATION_ERROR" and
                  limit in v["data"]["errors"][0]["msg"], v)
            v = await rpc(ws, {"type": "step", "data": {"message": "y"}})
            check(v["type"] == "observation", v)  # the connection stays
    finally:
        check(c.stop() == 0, "exit status")


@test
def http_body_fields_tree_free_and_not():
    # the same answers whether the body takes the scan or jansson's path
    # (a repeated unknown member is ignored by both; a repeated field sends
    # it to jansson, which keeps the last)
    st, v, h = S.http("POST", "/reset", {"seed": 1})
    sid = h["X-Session-Id"]
    for body in ({"action": {"message": "a"}, "session_id": sid},
                 '{"action":{"message":"b"},"session_id":"%s",'
                 '"session_id":"%s"}' % (sid, sid)):
        st, v, h2 = S.http("POST", "/step", body)
        check(st == 200 and h2.get("X-Session-Id") == sid, (st, v, h2))
    st, v, _ = S.http("GET", "/state", headers={"X-Session-Id": sid})
    check(v["step_count"] == 2, v)
    for body in ({"action": {"message": "a"}, "session_id": ""},
                 '{"action":{"message":"a"},"timeout_s":1,"timeout_s":1,'
                 '"session_id":""}'):
        st, v, _ = S.http("POST", "/step", body)
        check(st == 404, (st, v))
    st, v, _ = S.http("POST", "/step", {"action": {"message": "t"},
                                        "timeout_s": 2.5, "request_id": "r"})
    check(st == 200 and v["observation"]["echoed_message"] == "t", (st, v))


@test
def wrong_typed_session_ids_are_refused():
    st, v, h = S.http("POST", "/reset", {})
    sid = h["X-Session-Id"]
    for path, body in (("/step", {"action": {"message": "a"},
                                  "session_id": 5}),
                       ("/reset", {"session_id": ["x"]})):
        st, v, h2 = S.http("POST", path, body)
        check(st == 422 and v["detail"] == [{
            "type": "string_type", "loc": ["body", "session_id"],
            "msg": "Input should be a valid string",
            "input": body["session_id"]}] and
            "X-Session-Id" not in h2, (path, st, v))
    # null names none: a throwaway session
    st, v, h2 = S.http("POST", "/step", {"action": {"message": "a"},
                                         "session_id": None})
    check(st == 200 and "X-Session-Id" not in h2, (st, v))
    # the header wins over the body and the query (documented)
    st, v, h2 = S.http("POST", "/step", {"action": {"message": "a"},
                                         "session_id": "no-such"},
                       {"X-Session-Id": sid})
    check(st == 200 and h2["X-Session-Id"] == sid, (st, v))

    def mcp(method, params):
        return S.http("POST", "/mcp", {"jsonrpc": "2.0", "id": 1,
                                       "method": method,
                                       "params": params})[1]["error"]
    e = mcp("tools/call", {"name": "echo_message", "session_id": 5,
                           "arguments": {"message": "a"}})
    check(e["code"] == -32602 and
          e["message"] == "Invalid params: 'session_id' must be a string", e)
    e = mcp("openenv/session/close", {"session_id": 5})
    check(e["code"] == -32602 and "'session_id' must be a string" in
          e["message"], e)
    e = mcp("openenv/session/close", {})
    check(e["code"] == -32602 and "'session_id' is required" in
          e["message"], e)
    e = mcp("tools/call", {"name": 5})
    check(e["code"] == -32602 and
          e["message"] == "Invalid params: 'name' must be a string", e)
    e = mcp("tools/call", {})
    check(e["message"] == "Missing 'name' in params", e)


@test
def reset_body_not_an_object():
    # FastAPI, Body(default_factory=ResetRequest): null is the default
    st, v, h = S.http("POST", "/reset", "null")
    check(st == 200 and v["done"] is False and "X-Session-Id" in h, (st, v))
    for text, value in (("[]", []), ("5", 5), ('"x"', "x")):
        st, v, _ = S.http("POST", "/reset", text)
        check(st == 422 and v["detail"] == [{
            "type": "model_attributes_type", "loc": ["body"],
            "msg": "Input should be a valid dictionary or object to "
                   "extract fields from", "input": value}], (text, v))
    st, v, _ = S.http("POST", "/step", "null")  # a required body
    check(st == 422 and v["detail"] == [{
        "type": "missing", "loc": ["body"], "msg": "Field required",
        "input": None}], v)
    st, v, _ = S.http("POST", "/step", "[1]")
    check(st == 422 and v["detail"][0]["loc"] == ["body"] and
          v["detail"][0]["input"] == [1], v)


@test
async def ws_reset_checked_as_http():
    # one validator: the same error types as POST /reset, loc under "data"
    cases = (({"seed": -1}, "greater_than_equal", "seed"),
             ({"seed": "x"}, "int_type", "seed"),
             ({"seed": 1.5}, "int_type", "seed"),
             ({"episode_id": 5}, "string_type", "episode_id"),
             ({"episode_id": "e" * 256}, "string_too_long", "episode_id"))
    async with S.ws() as ws:
        for data, typ, field in cases:
            v = await rpc(ws, {"type": "reset", "data": data})
            check(v["type"] == "error" and
                  v["data"]["code"] == "VALIDATION_ERROR", (data, v))
            e = v["data"]["errors"]
            st, h, _ = S.http("POST", "/reset", data)
            check(st == 422 and len(e) == 1 and e[0]["type"] == typ and
                  e[0]["loc"] == ["data", field] and
                  h["detail"][0]["type"] == typ and
                  e[0]["msg"] == h["detail"][0]["msg"] and
                  e[0]["input"] == h["detail"][0]["input"], (data, e, h))
        # and the connection goes on; valid options pass, on either path
        for msg in ('{"type":"reset","data":{"seed":3,"episode_id":"e"}}',
                    '{"data":{"seed":3,"seed":4},"type":"reset"}',
                    '{"type":"reset","data":{"seed":3},"data":{"seed":4}}'):
            await ws.send(msg)
            v = json.loads(await ws.recv())
            check(v["type"] == "observation", (msg, v))


@test
async def tool_action_errors_as_pydantic():
    cases = (({"type": "call_tool", "arguments": {}},
              "missing", ["tool_name"], "Field required"),
             ({"type": "call_tool", "tool_name": 5},
              "string_type", ["tool_name"], "Input should be a valid string"),
             ({"type": "call_tool", "tool_name": "echo_message",
               "arguments": []},
              "dict_type", ["arguments"], "Input should be a valid dictionary"),
             ({"type": "call_tool", "tool_name": "echo_message", "zz": 1},
              "extra_forbidden", ["zz"], "Extra inputs are not permitted"),
             ({"type": "list_tools", "zz": 1},
              "extra_forbidden", ["zz"], "Extra inputs are not permitted"))
    async with S.ws() as ws:
        for data, typ, loc, msg in cases:
            v = await rpc(ws, {"type": "step", "data": data})
            e = v["data"]["errors"]
            check(v["data"]["code"] == "VALIDATION_ERROR" and len(e) == 1 and
                  e[0]["type"] == typ and e[0]["loc"] == loc and
                  e[0]["msg"] == msg, (data, v))
            st, h, _ = S.http("POST", "/step", {"action": data})
            check(st == 422 and h["detail"] == e, (data, h))


for name, srv in (("workers_server_exit", W2), ("server_exit", S)):
    check_status = srv.stop()
    if check_status != 0:
        print(f"FAIL {name}: status", check_status)
        results["failed"] += 1
    else:
        print("ok", name)
        results["passed"] += 1
print(f"{results['passed']} passed, {results['failed']} failed")
sys.exit(1 if results["failed"] else 0)
