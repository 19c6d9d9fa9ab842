/* handshake.c - the WebSocket opening handshake (see handshake.h). */
#include "net/handshake.h"

#include <nettle/base64.h>
#include <nettle/sha1.h>
#include <string.h>
#include <strings.h>

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
