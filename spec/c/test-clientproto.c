/* test-clientproto.c - the client's protocol code without sockets: URL
 * conversion (net/url.c), HTTP responses read by a client, split at every
 * byte (net/reply.c), the client's side of the opening handshake
 * (net/handshake.c), request frames and the decoding of reply frames into
 * results and error codes (net/clientproto.c), and the raw members of a
 * JSON object (base/jsonraw.c). */
#include <stdio.h>
#include <string.h>

#include "base/jsonraw.h"
#include "helpers.h"
#include "net/clientproto.h"
#include "net/handshake.h"
#include "net/reply.h"
#include "net/url.h"

/* ---- URLs ---------------------------------------------------------------- */

TEST_IMPL(client_url_forms) {
  static const struct {
    const char *in, *ws, *base, *target, *host;
    int port;
  } ok[] = {
      /* OpenEnv's convert_to_ws_url: http -> ws, then /ws appended. */
      {"http://localhost:8000", "ws://localhost:8000/ws",
       "http://localhost:8000", "/ws", "localhost", 8000},
      {"http://localhost:8000/", "ws://localhost:8000/ws",
       "http://localhost:8000", "/ws", "localhost", 8000},
      {"localhost:8000", "ws://localhost:8000/ws", "http://localhost:8000",
       "/ws", "localhost", 8000},
      {"http://example.com", "ws://example.com:80/ws",
       "http://example.com:80", "/ws", "example.com", 80},
      {"http://h:1/envs/echo//", "ws://h:1/envs/echo/ws",
       "http://h:1/envs/echo", "/envs/echo/ws", "h", 1},
      {"ws://h:9", "ws://h:9/ws", "http://h:9", "/ws", "h", 9},
      /* A ws:// URL with a path is the route itself. */
      {"ws://h:9/ws", "ws://h:9/ws", "http://h:9", "/ws", "h", 9},
      {"ws://h:9/a/b/ws?session_id=x", "ws://h:9/a/b/ws?session_id=x",
       "http://h:9/a/b", "/a/b/ws?session_id=x", "h", 9},
      {"HTTP://[::1]:7", "ws://[::1]:7/ws", "http://[::1]:7", "/ws", "::1",
       7},
  };
  static const struct {
    const char *in, *why;
  } bad[] = {
      {"https://example.com", "needs TLS"},
      {"wss://example.com/ws", "needs TLS"},
      {"ftp://h/x", "the scheme must be http:// or ws://"},
      {"http://user:pw@h:1", "user information"},
      {"http://h:0", "port 0"},
      {"http://", "is not a URL"},
      {"", "no URL given"},
  };
  size_t i;
  for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    ludo__url_t u;
    char err[256] = "";
    if (ludo__url_parse(ok[i].in, &u, err, sizeof err) != 0)
      FAIL("%s: %s", ok[i].in, err);
    ASSERT_STR_EQ(u.ws, ok[i].ws);
    ASSERT_STR_EQ(u.base, ok[i].base);
    ASSERT_STR_EQ(u.target, ok[i].target);
    ASSERT_STR_EQ(u.host, ok[i].host);
    ASSERT_EQ(u.port, ok[i].port);
  }
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ludo__url_t u;
    char err[256] = "";
    ASSERT_EQ(ludo__url_parse(bad[i].in, &u, err, sizeof err), -1);
    ASSERT_STR_CONTAINS(err, bad[i].why);
  }
}

/* ---- responses ------------------------------------------------------------ */

static ludo__alloc_t heap;

/* Feeds `text` cut at `cut`; returns the outcome of the last feed and the
 * bytes left after the response in *rest. */
static int feed_split(ludo__reply_t *r, const char *text, size_t len,
                      size_t cut, size_t *rest) {
  size_t used = 0;
  int rc = ludo__reply_feed(r, text, cut, &used);
  *rest = 0;
  if (rc == 1) {
    *rest = len - used;
    return rc;
  }
  if (rc != 0) return rc;
  rc = ludo__reply_feed(r, text + cut, len - cut, &used);
  if (rc == 1) *rest = len - cut - used;
  return rc;
}

TEST_IMPL(client_reply_parser) {
  static const char up[] =
      "HTTP/1.1 101 Switching Protocols\r\n"
      "Upgrade: websocket\r\n"
      "Connection: Upgrade\r\n"
      "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo= \r\n"
      "\r\n"
      "\x81\x02hi"; /* a frame sent at once */
  static const char refused[] =
      "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
      "Content-Length: 27\r\n\r\n{\"detail\":\"Unauthorized\"}\r\n";
  static const char chunked[] =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n";
  size_t len = sizeof up - 1, cut, rest, blen;
  const char *why;
  ludo__reply_t r;
  ludo__alloc_init(&heap, test_alloc_fn, &test_heap);
  /* The 101, cut at every byte: the frame after it is left over. */
  for (cut = 0; cut <= len; cut++) {
    ludo__reply_init(&r, &heap, 4096, 4096);
    ASSERT_EQ(feed_split(&r, up, len, cut, &rest), 1);
    ASSERT_EQ(ludo__reply_status(&r), 101);
    ASSERT_UINT_EQ(rest, 4);
    ASSERT_STR_EQ(ludo__reply_header(&r, "sec-websocket-accept"),
                  "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    ASSERT_UINT_EQ(ludo__reply_nheaders(&r), 3);
    /* The RFC's sample key gives that accept value. */
    ASSERT_EQ(ludo__handshake_check_reply(&r, "dGhlIHNhbXBsZSBub25jZQ==",
                                          &why), 0);
    ASSERT_EQ(ludo__handshake_check_reply(&r, "AAAAAAAAAAAAAAAAAAAAAA==",
                                          &why), -1);
    ASSERT_STR_CONTAINS(why, "Sec-WebSocket-Accept");
    ludo__reply_free(&r);
  }
  /* A refusal, its body read to its length. */
  len = sizeof refused - 1;
  for (cut = 0; cut <= len; cut++) {
    ludo__reply_init(&r, &heap, 4096, 4096);
    ASSERT_EQ(feed_split(&r, refused, len, cut, &rest), 1);
    ASSERT_EQ(ludo__reply_status(&r), 401);
    ASSERT_STR_EQ(ludo__reply_body(&r, &blen),
                  "{\"detail\":\"Unauthorized\"}\r\n");
    ASSERT_EQ(ludo__handshake_check_reply(&r, "x", &why), -1);
    ASSERT_STR_CONTAINS(why, "did not switch");
    ludo__reply_free(&r);
  }
  /* A chunked body, and a body running to the end of the connection. */
  ludo__reply_init(&r, &heap, 4096, 4096);
  ASSERT_EQ(feed_split(&r, chunked, sizeof chunked - 1, 40, &rest), 1);
  ASSERT_STR_EQ(ludo__reply_body(&r, &blen), "{\"a\":1}");
  ludo__reply_free(&r);
  ludo__reply_init(&r, &heap, 4096, 4096);
  ASSERT_EQ(ludo__reply_feed(&r, J("HTTP/1.1 200 OK\r\n\r\nabc"), &rest), 0);
  ASSERT_EQ(ludo__reply_eof(&r), 1);
  ASSERT_STR_EQ(ludo__reply_body(&r, &blen), "abc");
  ludo__reply_free(&r);
  /* Bounds and garbage. */
  ludo__reply_init(&r, &heap, 40, 4096);
  ASSERT_ERR(ludo__reply_feed(&r, up, sizeof up - 1, &rest), LUDO_ETOOBIG);
  ASSERT_STR_CONTAINS(r.err, "head is too long");
  ludo__reply_free(&r);
  ludo__reply_init(&r, &heap, 4096, 10);
  ASSERT_ERR(ludo__reply_feed(&r, refused, sizeof refused - 1, &rest),
             LUDO_ETOOBIG);
  ludo__reply_free(&r);
  ludo__reply_init(&r, &heap, 4096, 4096);
  ASSERT_ERR(ludo__reply_feed(&r, J("SSH-2.0-OpenSSH_9.2\r\n"), &rest),
             LUDO_EPROTO);
  ASSERT_STR_CONTAINS(r.err, "not an HTTP response");
  ludo__reply_free(&r);
  ludo__reply_init(&r, &heap, 4096, 4096);
  ASSERT_EQ(ludo__reply_feed(&r, J("HTTP/1.1 200 OK\r\nContent-Le"), &rest),
            0);
  ASSERT_ERR(ludo__reply_eof(&r), LUDO_EPROTO);
  ludo__reply_free(&r);
  ASSERT_UINT_EQ(heap.live, 0);
}

TEST_IMPL(client_handshake_request) {
  char key[LUDO__HANDSHAKE_KEY_LEN + 1], key2[LUDO__HANDSHAKE_KEY_LEN + 1];
  ludo__buf_t b;
  ludo__alloc_init(&heap, test_alloc_fn, &test_heap);
  ludo__buf_init(&b, ludo__alloc_fn, &heap);
  ASSERT_OK(ludo__handshake_new_key(key));
  ASSERT_OK(ludo__handshake_new_key(key2));
  ASSERT_UINT_EQ(strlen(key), 24);
  ASSERT_STR_NE(key, key2);
  ASSERT_STR_EQ(key + 22, "==");
  ASSERT_OK(ludo__handshake_request(&b, "/ws?x=1", "h:8000", key, "tok"));
  ASSERT_TRUE(strncmp(b.p, "GET /ws?x=1 HTTP/1.1\r\nHost: h:8000\r\n", 36) ==
              0);
  ASSERT_STR_CONTAINS(b.p, "\r\nUpgrade: websocket\r\n");
  ASSERT_STR_CONTAINS(b.p, "\r\nConnection: Upgrade\r\n");
  ASSERT_STR_CONTAINS(b.p, "\r\nSec-WebSocket-Version: 13\r\n");
  ASSERT_STR_CONTAINS(b.p, "\r\nAuthorization: Bearer tok\r\n");
  ASSERT_STR_CONTAINS(b.p, key);
  ASSERT_TRUE(b.len > 4 && strcmp(b.p + b.len - 4, "\r\n\r\n") == 0);
  ludo__buf_free(&b);
}

/* ---- frames ---------------------------------------------------------------- */

static ludo__buf_t buf, scratch, msg;

static void bufs_init(void) {
  ludo__alloc_init(&heap, test_alloc_fn, &test_heap);
  ludo__buf_init(&buf, ludo__alloc_fn, &heap);
  ludo__buf_init(&scratch, ludo__alloc_fn, &heap);
  ludo__buf_init(&msg, ludo__alloc_fn, &heap);
}

static void bufs_free(void) {
  ludo__buf_free(&buf);
  ludo__buf_free(&scratch);
  ludo__buf_free(&msg);
  ASSERT_UINT_EQ(heap.live, 0);
}

static const char *request(int kind, const char *json, long long id) {
  ludo__buf_reset(&buf);
  ASSERT_OK(ludo__clientproto_request(&buf, kind, json,
                                      json ? strlen(json) : 0, id, &scratch,
                                      &msg));
  return buf.p;
}

TEST_IMPL(client_request_frames) {
  bufs_init();
  ASSERT_STR_EQ(request(LUDO__CP_RESET, NULL, 0),
                "{\"type\":\"reset\",\"data\":{}}");
  ASSERT_STR_EQ(request(LUDO__CP_RESET, "{\"seed\": 1}", 0),
                "{\"type\":\"reset\",\"data\":{\"seed\": 1}}");
  ASSERT_STR_EQ(request(LUDO__CP_STEP, "{\"message\":\"\\u00e9\"}", 0),
                "{\"type\":\"step\",\"data\":{\"message\":\"\\u00e9\"}}");
  ASSERT_STR_EQ(request(LUDO__CP_STATE, NULL, 0), "{\"type\":\"state\"}");
  ASSERT_STR_EQ(request(LUDO__CP_CLOSE, NULL, 0), "{\"type\":\"close\"}");
  ASSERT_STR_EQ(request(LUDO__CP_TOOLS, NULL, 7),
                "{\"type\":\"mcp\",\"data\":{\"jsonrpc\":\"2.0\",\"id\":7,"
                "\"method\":\"tools/list\",\"params\":{}}}");
  ASSERT_STR_EQ(request(LUDO__CP_CALL_TOOL, "{\"name\":\"x\"}", 8),
                "{\"type\":\"mcp\",\"data\":{\"jsonrpc\":\"2.0\",\"id\":8,"
                "\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}}");
  /* Bad input: nothing written, a message saying what is wrong. */
  ludo__buf_reset(&buf);
  ASSERT_ERR(ludo__clientproto_request(&buf, LUDO__CP_STEP, J("{\"a\":"), 0,
                                       &scratch, &msg), LUDO_EPARSE);
  ASSERT_STR_CONTAINS(msg.p, "EPARSE: the action is not JSON");
  ASSERT_ERR(ludo__clientproto_request(&buf, LUDO__CP_STEP, J("[1]"), 0,
                                       &scratch, &msg), LUDO_EINVAL);
  ASSERT_STR_CONTAINS(msg.p, "the action must be a JSON object");
  ASSERT_ERR(ludo__clientproto_request(&buf, LUDO__CP_STEP, NULL, 0, 0,
                                       &scratch, &msg), LUDO_EINVAL);
  ASSERT_ERR(ludo__clientproto_request(&buf, LUDO__CP_RESET, J("7"), 0,
                                       &scratch, &msg), LUDO_EINVAL);
  ASSERT_ERR(ludo__clientproto_request(&buf, LUDO__CP_CALL_TOOL,
                                       J("{\"name\":1}"), 0, &scratch, &msg),
             LUDO_EINVAL);
  ASSERT_STR_CONTAINS(msg.p, "\"name\" (a string)");
  ASSERT_UINT_EQ(buf.len, 0);
  bufs_free();
}

/* Decodes `frame` as the reply to `kind` (JSON-RPC id 3); returns the
 * code, the result in *res (NUL-terminated copy) or the message. */
static int reply(int kind, const char *frame, char *res, size_t n,
                 int *fatal) {
  const char *r;
  size_t rlen;
  int rc = ludo__clientproto_reply(kind, 3, frame, strlen(frame), &scratch,
                                   &r, &rlen, &msg, fatal);
  if (rc == 0)
    snprintf(res, n, "%.*s", (int)rlen, r);
  else
    snprintf(res, n, "%s", msg.p);
  return rc;
}

TEST_IMPL(client_reply_frames) {
  static const struct {
    int kind;
    const char *frame;
    int code, fatal;
    const char *text; /* the result, or a part of the message */
  } cases[] = {
      /* Results, byte for byte (key order, number forms, whitespace). */
      {LUDO__CP_STEP,
       "{\"type\":\"observation\",\"data\":{\"observation\":{\"x\":1.50},"
       "\"reward\":1,\"done\":false}}",
       0, 0, "{\"observation\":{\"x\":1.50},\"reward\":1,\"done\":false}"},
      {LUDO__CP_RESET,
       "{ \"data\" : {\"observation\": {}, \"reward\": null} , \"type\": "
       "\"observation\" }",
       0, 0, "{\"observation\": {}, \"reward\": null}"},
      /* OpenEnv's wire form: the metadata inside the observation too.
       * The copy inside goes when it is the top-level one's text, or {}
       * without one; an observation's other metadata stays. */
      {LUDO__CP_STEP,
       "{\"type\":\"observation\",\"data\":{\"observation\":{\"t\":1,"
       "\"metadata\":{\"r\":[1]}},\"reward\":0.5,\"done\":false,"
       "\"metadata\":{\"r\":[1]}}}",
       0, 0, "{\"observation\":{\"t\":1},\"reward\":0.5,\"done\":false,"
       "\"metadata\":{\"r\":[1]}}"},
      {LUDO__CP_RESET,
       "{\"type\":\"observation\",\"data\":{\"observation\":{ \"metadata\" "
       ": { } , \"t\":0},\"reward\":null,\"done\":false}}",
       0, 0, "{\"observation\":{ \"t\":0},\"reward\":null,\"done\":false}"},
      {LUDO__CP_STEP,
       "{\"type\":\"observation\",\"data\":{\"observation\":{\"metadata\":"
       "{\"r\":2}},\"metadata\":{\"r\":1}}}",
       0, 0, "{\"observation\":{\"metadata\":{\"r\":2}},\"metadata\":"
       "{\"r\":1}}"},
      {LUDO__CP_STEP,
       "{\"type\":\"observation\",\"data\":{\"observation\":{\"metadata\":"
       "{\"r\":2}}}}",
       0, 0, "{\"observation\":{\"metadata\":{\"r\":2}}}"},
      {LUDO__CP_STATE, "{\"type\":\"state\",\"data\":{\"step_count\":2}}", 0,
       0, "{\"step_count\":2}"},
      {LUDO__CP_TOOLS,
       "{\"type\":\"mcp\",\"data\":{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":"
       "{\"tools\":[]}}}",
       0, 0, "{\"tools\":[]}"},
      /* OpenEnv's error frames. */
      {LUDO__CP_STEP,
       "{\"type\":\"error\",\"data\":{\"message\":\"Invalid JSON: x\","
       "\"code\":\"INVALID_JSON\"}}",
       LUDO_EPARSE, 0, "EPARSE: Invalid JSON: x (INVALID_JSON)"},
      {LUDO__CP_STEP,
       "{\"type\":\"error\",\"data\":{\"message\":\"Invalid message\","
       "\"code\":\"VALIDATION_ERROR\",\"errors\":[{\"type\":\"missing\","
       "\"loc\":[\"tool_name\"],\"msg\":\"Field required\"},{\"loc\":[\"a\","
       "0],\"msg\":\"bad\"}]}}",
       LUDO_ESCHEMA, 0,
       "ESCHEMA: Invalid message: tool_name: Field required; a.0: bad "
       "(VALIDATION_ERROR)"},
      {LUDO__CP_STEP,
       "{\"type\":\"error\",\"data\":{\"message\":\"boom\",\"code\":"
       "\"EXECUTION_ERROR\"}}",
       LUDO_ESCRIPT, 0, "ESCRIPT: boom (EXECUTION_ERROR)"},
      /* A ludo server names its own code: kept, not doubled. */
      {LUDO__CP_STEP,
       "{\"type\":\"error\",\"data\":{\"message\":\"ETIMEOUT: the call "
       "exceeded its CPU budget\",\"code\":\"EXECUTION_ERROR\"}}",
       LUDO_ETIMEOUT, 0,
       "ETIMEOUT: the call exceeded its CPU budget (EXECUTION_ERROR)"},
      {LUDO__CP_RESET,
       "{\"type\":\"error\",\"data\":{\"message\":\"Server at capacity: 1/1 "
       "sessions active.\",\"code\":\"CAPACITY_REACHED\",\"active_sessions\""
       ":1,\"max_sessions\":1}}",
       LUDO_ECAPACITY, 1, "ECAPACITY: Server at capacity"},
      {LUDO__CP_RESET,
       "{\"type\":\"error\",\"data\":{\"message\":\"Environment factory "
       "'x' failed\",\"code\":\"FACTORY_ERROR\"}}",
       LUDO_ELOAD, 1, "(FACTORY_ERROR)"},
      {LUDO__CP_STATE,
       "{\"type\":\"error\",\"data\":{\"message\":\"idle\",\"code\":"
       "\"SESSION_ERROR\"}}",
       LUDO_EDISCONNECTED, 1, "EDISCONNECTED: idle (SESSION_ERROR)"},
      {LUDO__CP_STATE,
       "{\"type\":\"error\",\"data\":{\"message\":\"Unknown message type: "
       "x\",\"code\":\"UNKNOWN_TYPE\"}}",
       LUDO_EPROTO, 0, "(UNKNOWN_TYPE)"},
      /* JSON-RPC errors. */
      {LUDO__CP_CALL_TOOL,
       "{\"type\":\"mcp\",\"data\":{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":"
       "{\"code\":-32602,\"message\":\"Tool 'x' not found\"}}}",
       LUDO_ENOENT, 0, "ENOENT: Tool 'x' not found (JSON-RPC -32602)"},
      {LUDO__CP_CALL_TOOL,
       "{\"type\":\"mcp\",\"data\":{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":"
       "{\"code\":-32602,\"message\":\"Invalid params: a: expected "
       "integer\"}}}",
       LUDO_ESCHEMA, 0, "ESCHEMA: Invalid params: a: expected integer"},
      {LUDO__CP_CALL_TOOL,
       "{\"type\":\"mcp\",\"data\":{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":"
       "{\"code\":-32603,\"message\":\"it broke\",\"data\":null}}}",
       LUDO_ESCRIPT, 0, "ESCRIPT: it broke (JSON-RPC -32603)"},
      {LUDO__CP_TOOLS,
       "{\"type\":\"mcp\",\"data\":{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":"
       "{\"code\":-32603,\"message\":\"Environment does not support "
       "MCP\"}}}",
       LUDO_ENOENT, 0, "does not support MCP"},
      {LUDO__CP_TOOLS,
       "{\"type\":\"mcp\",\"data\":{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":"
       "{\"code\":-32000,\"message\":\"Server at capacity\",\"data\":"
       "{\"max_sessions\":1}}}}",
       LUDO_ECAPACITY, 1, "ECAPACITY"},
      /* Frames that break the protocol. */
      {LUDO__CP_STEP, "{\"type\":\"state\",\"data\":{}}", LUDO_EPROTO, 1,
       "answered step with a frame of type \"state\""},
      {LUDO__CP_STEP, "{\"type\":\"observation\"}", LUDO_EPROTO, 1,
       "has no data"},
      {LUDO__CP_STEP, "[1,2]", LUDO_EPROTO, 1, "not a JSON object"},
      {LUDO__CP_STEP, "{\"type\":", LUDO_EPROTO, 1, "is not JSON"},
      {LUDO__CP_STEP, "{\"type\":\"error\",\"data\":{\"message\":\"m\"}}",
       LUDO_EPROTO, 1, "without a code"},
      {LUDO__CP_TOOLS,
       "{\"type\":\"mcp\",\"data\":{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":"
       "{}}}",
       LUDO_EPROTO, 1, "not the JSON-RPC response to request 3"},
  };
  size_t i;
  char res[512];
  int fatal;
  bufs_init();
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int rc = reply(cases[i].kind, cases[i].frame, res, sizeof res, &fatal);
    if (rc != cases[i].code || fatal != cases[i].fatal)
      FAIL("case %zu: got %s (fatal %d), want %s (fatal %d): %s", i,
           ludo_err_name(rc), fatal, ludo_err_name(cases[i].code),
           cases[i].fatal, res);
    if (rc == 0)
      ASSERT_STR_EQ(res, cases[i].text);
    else
      ASSERT_STR_CONTAINS(res, cases[i].text);
  }
  bufs_free();
}

TEST_IMPL(client_jsonraw_members) {
  ludo__jsonraw_t m[3] = {{"a", NULL, 0}, {"b\"c", NULL, 0}, {"z", NULL, 0}};
  ludo__jsonparse_err_t err;
  static const char text[] =
      "{\"x\":[1,{\"a\":2}], \"a\" :\t[ 1, \"]\" ] ,\"b\\\"c\":\"s\\n\","
      "\"a\":{\"k\":null}}";
  bufs_init();
  ASSERT_OK(ludo__jsonraw_members(J(text), 64, m, 3, &scratch, &err));
  /* The last "a" wins; the nested "a" is not a member of the top. */
  ASSERT_TRUE(m[0].text != NULL && m[0].len == 10 &&
              memcmp(m[0].text, "{\"k\":null}", 10) == 0);
  ASSERT_TRUE(m[1].text != NULL && m[1].len == 5 &&
              memcmp(m[1].text, "\"s\\n\"", 5) == 0);
  ASSERT_NULL(m[2].text);
  ASSERT_ERR(ludo__jsonraw_object(J("[]"), 64, &scratch, &err), LUDO_EINVAL);
  ASSERT_ERR(ludo__jsonraw_object(J("{\"a\":}"), 64, &scratch, &err),
             LUDO_EPARSE);
  ASSERT_ERR(ludo__jsonraw_object(J("\"x\""), 64, &scratch, &err),
             LUDO_EINVAL);
  ASSERT_OK(ludo__jsonraw_object(J(" {} "), 64, &scratch, &err));
  /* A text ending right after a wanted key (found by fuzz_client: the
   * value's start was looked for past the end). */
  m[0].key = "type";
  ASSERT_ERR(ludo__jsonraw_members(J("{\"type\":"), 64, m, 1, &scratch,
                                   &err), LUDO_EPARSE);
  ASSERT_ERR(ludo__jsonraw_members(J("{\"type\""), 64, m, 1, &scratch,
                                   &err), LUDO_EPARSE);
  bufs_free();
}
