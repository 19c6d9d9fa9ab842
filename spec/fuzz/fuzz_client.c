/* fuzz_client.c - the client's parsers on any bytes: an HTTP response read
 * by a client (net/reply.c, in two reads cut anywhere, then the end of
 * the connection) with the handshake's check of it, and a frame decoded
 * as the reply to each request (net/clientproto.c). Nothing may crash,
 * leak or read outside the input; a result handed back lies inside the
 * frame and is itself valid JSON; a request accepted is valid JSON. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/jsonparse.h"
#include "net/clientproto.h"
#include "net/handshake.h"
#include "net/reply.h"

static ludo__alloc_t heap;

static int valid_json(const char *s, size_t n) {
  static const ludo__jsonparse_cb_t none;
  ludo__jsonparse_err_t err;
  ludo__jsonparse_cb_t cb = none;
  int rc;
  rc = ludo__jsonparse_run(s, n, -1, &cb, NULL, &err);
  /* Escaped strings need a scratch buffer: no callback asks for them. */
  return rc == 0 || rc == LUDO_ENOMEM;
}

static void response(const char *s, size_t n, size_t cut) {
  ludo__reply_t r;
  size_t used = 0;
  const char *why;
  int rc;
  ludo__reply_init(&r, &heap, 4096, 8192);
  rc = ludo__reply_feed(&r, s, cut, &used);
  if (rc == 0) rc = ludo__reply_feed(&r, s + cut, n - cut, &used);
  if (rc == 0) rc = ludo__reply_eof(&r);
  if (rc == 1 && used > n) abort();
  if (ludo__reply_status(&r) != 0)
    ludo__handshake_check_reply(&r, "dGhlIHNhbXBsZSBub25jZQ==", &why);
  ludo__reply_free(&r);
}

static void frames(const char *s, size_t n) {
  ludo__buf_t scratch, msg, req;
  int kind;
  ludo__buf_init(&scratch, ludo__alloc_fn, &heap);
  ludo__buf_init(&msg, ludo__alloc_fn, &heap);
  ludo__buf_init(&req, ludo__alloc_fn, &heap);
  for (kind = LUDO__CP_RESET; kind <= LUDO__CP_CALL_TOOL; kind++) {
    const char *res = NULL;
    size_t rlen = 0;
    int fatal;
    int rc = ludo__clientproto_reply(kind, 1, s, n, &scratch, &res, &rlen,
                                     &msg, &fatal);
    if (rc == 0 && (res < s || res + rlen > s + n || !valid_json(res, rlen)))
      abort();
    if (rc != 0 && (msg.p == NULL || msg.len == 0)) abort();
    ludo__buf_reset(&req);
    if (ludo__clientproto_request(&req, kind, s, n, 1, &scratch, &msg) == 0 &&
        !valid_json(req.p, req.len))
      abort();
  }
  ludo__buf_free(&scratch);
  ludo__buf_free(&msg);
  ludo__buf_free(&req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *s = (const char *)data + 2;
  size_t n;
  if (size < 2) return 0;
  n = size - 2;
  ludo__alloc_init(&heap, NULL, NULL);
  if (data[0] & 1)
    response(s, n, n ? data[1] % (n + 1) : 0);
  else
    frames(s, n);
  if (heap.live != 0) abort(); /* everything given back */
  return 0;
}
