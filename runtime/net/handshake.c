/* handshake.c - the WebSocket opening handshake (see handshake.h). */
#include "net/handshake.h"

#include <nettle/base64.h>
#include <nettle/sha1.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

#include "ludo_defs.h"

/* RFC 6455 section 1.3. */
static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/* 1 when the comma-separated field value `v` holds `token` (any case). */
static int has_token(const char *v, const char *token) {
  size_t n = strlen(token);
  while (v && *v) {
    size_t len;
    while (*v == ' ' || *v == '\t' || *v == ',') v++;
    len = strcspn(v, ",");
    while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t')) len--;
    if (len == n && strncasecmp(v, token, n) == 0) return 1;
    v += strcspn(v, ",");
  }
  return 0;
}

/* 1 when a field named `name` (any of them: a list may be split over
 * several fields) holds `token`. */
static int field_has_token(const ludo__http_req_t *req, const char *name,
                           const char *token) {
  size_t i, n = ludo__http_req_nheaders(req);
  for (i = 0; i < n; i++) {
    ludo__http_header_t h = ludo__http_req_header_at(req, i);
    if (strcasecmp(h.name, name) == 0 && has_token(h.value, token)) return 1;
  }
  return 0;
}

/* How many fields are named `name`. */
static size_t field_count(const ludo__http_req_t *req, const char *name) {
  size_t i, c = 0, n = ludo__http_req_nheaders(req);
  for (i = 0; i < n; i++)
    if (strcasecmp(ludo__http_req_header_at(req, i).name, name) == 0) c++;
  return c;
}

/* 1 when `key` is the base64 of exactly 16 bytes (24 characters ending
 * in "=="). */
static int valid_key(const char *key) {
  struct base64_decode_ctx ctx;
  uint8_t raw[BASE64_DECODE_LENGTH(24)];
  size_t n = sizeof raw;
  if (strlen(key) != 24 || strcmp(key + 22, "==") != 0) return 0;
  base64_decode_init(&ctx);
  if (!base64_decode_update(&ctx, &n, raw, 24, key)) return 0;
  return base64_decode_final(&ctx) && n == 16;
}

int ludo__handshake_check(const ludo__http_req_t *req, const char **why) {
  const char *v;
  if (strcmp(ludo__http_req_method(req), "GET") != 0) {
    *why = "a WebSocket handshake must use GET";
    return 400;
  }
  if (ludo__http_req_version(req) < 11) {
    *why = "a WebSocket handshake needs HTTP/1.1";
    return 400;
  }
  if (!field_has_token(req, "upgrade", "websocket")) {
    *why = "the Upgrade header field must name websocket";
    return 400;
  }
  if (!field_has_token(req, "connection", "upgrade")) {
    *why = "the Connection header field must name upgrade";
    return 400;
  }
  /* These two fields must not repeat (RFC 6455 11.3.1, 11.3.5): which
   * one counts would be a guess, and a bad handshake gets 400 (4.2.1). */
  if (field_count(req, "sec-websocket-key") > 1) {
    *why = "Sec-WebSocket-Key must not appear more than once";
    return 400;
  }
  if (field_count(req, "sec-websocket-version") > 1) {
    *why = "Sec-WebSocket-Version must not appear more than once";
    return 400;
  }
  v = ludo__http_req_header(req, "sec-websocket-key");
  if (v == NULL || !valid_key(v)) {
    *why = "Sec-WebSocket-Key must be the base64 of 16 bytes";
    return 400;
  }
  v = ludo__http_req_header(req, "sec-websocket-version");
  if (v == NULL || strcmp(v, "13") != 0) {
    *why = "only WebSocket version 13 is served";
    return 426;
  }
  return 0;
}

void ludo__handshake_accept_key(const char *key, char *out) {
  struct sha1_ctx ctx;
  uint8_t digest[SHA1_DIGEST_SIZE];
  sha1_init(&ctx);
  sha1_update(&ctx, strlen(key), (const uint8_t *)key);
  sha1_update(&ctx, sizeof ws_guid - 1, (const uint8_t *)ws_guid);
  sha1_digest(&ctx, sizeof digest, digest);
  base64_encode_raw(out, sizeof digest, digest);
  out[LUDO__HANDSHAKE_ACCEPT_LEN] = '\0';
}

/* ---- the client's side ------------------------------------------------ */

int ludo__handshake_new_key(char *key) {
  uint8_t raw[16];
  if (uv_random(NULL, NULL, raw, sizeof raw, 0, NULL) != 0) return LUDO_EIO;
  base64_encode_raw(key, sizeof raw, raw);
  key[LUDO__HANDSHAKE_KEY_LEN] = '\0';
  return 0;
}

int ludo__handshake_request(ludo__buf_t *b, const char *target,
                            const char *host, const char *key,
                            const char *token) {
  int rc = ludo__buf_printf(b,
                            "GET %s HTTP/1.1\r\n"
                            "Host: %s\r\n"
                            "Upgrade: websocket\r\n"
                            "Connection: Upgrade\r\n"
                            "Sec-WebSocket-Key: %s\r\n"
                            "Sec-WebSocket-Version: 13\r\n"
                            "User-Agent: ludo/" LUDO_VERSION_STRING "\r\n",
                            target, host, key);
  if (rc == 0 && token != NULL)
    rc = ludo__buf_printf(b, "Authorization: Bearer %s\r\n", token);
  if (rc == 0) rc = ludo__buf_adds(b, "\r\n");
  return rc == 0 ? 0 : LUDO_ENOMEM;
}

/* 1 when a field of the response named `name` holds `token`. */
static int reply_has_token(const ludo__reply_t *r, const char *name,
                           const char *token) {
  size_t i, n = ludo__reply_nheaders(r);
  for (i = 0; i < n; i++) {
    const char *k, *v;
    ludo__reply_header_at(r, i, &k, &v);
    if (strcasecmp(k, name) == 0 && has_token(v, token)) return 1;
  }
  return 0;
}

int ludo__handshake_check_reply(const ludo__reply_t *r, const char *key,
                                const char **why) {
  char want[LUDO__HANDSHAKE_ACCEPT_LEN + 1];
  const char *v;
  if (ludo__reply_status(r) != 101) {
    *why = "the server did not switch protocols";
    return -1;
  }
  if (!reply_has_token(r, "upgrade", "websocket")) {
    *why = "the server's 101 has no Upgrade field naming websocket";
    return -1;
  }
  if (!reply_has_token(r, "connection", "upgrade")) {
    *why = "the server's 101 has no Connection field naming upgrade";
    return -1;
  }
  ludo__handshake_accept_key(key, want);
  v = ludo__reply_header(r, "sec-websocket-accept");
  if (v == NULL || strcmp(v, want) != 0) {
    *why = "the server's Sec-WebSocket-Accept does not match the key";
    return -1;
  }
  if (ludo__reply_header(r, "sec-websocket-extensions") != NULL) {
    *why = "the server chose a WebSocket extension, none was offered";
    return -1;
  }
  if (ludo__reply_header(r, "sec-websocket-protocol") != NULL) {
    *why = "the server chose a subprotocol, none was offered";
    return -1;
  }
  return 0;
}
