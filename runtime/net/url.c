/* url.c - an OpenEnv server's address (see url.h). */
#include "net/url.h"

#include <http_parser.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The text of field `f` of a parsed URL. */
static int field(const struct http_parser_url *p, const char *s, int f,
                 const char **out, size_t *len) {
  if (!(p->field_set & (1u << f))) return 0;
  *out = s + p->field_data[f].off;
  *len = p->field_data[f].len;
  return 1;
}

int ludo__url_parse(const char *in, ludo__url_t *u, char *err, size_t n) {
  struct http_parser_url p;
  char buf[LUDO__URL_MAX + 8];
  const char *scheme, *host, *path = "", *query = "";
  size_t slen = 0, hlen = 0, plen = 0, qlen = 0, len;
  int is_ws, v6;
  memset(u, 0, sizeof *u);
  if (in == NULL || *in == '\0') {
    snprintf(err, n, "no URL given");
    return -1;
  }
  len = strlen(in);
  if (len > LUDO__URL_MAX) {
    snprintf(err, n, "the URL is longer than %d bytes", LUDO__URL_MAX);
    return -1;
  }
  /* No scheme: ws://, as OpenEnv's client does. */
  snprintf(buf, sizeof buf, "%s%s", strstr(in, "://") ? "" : "ws://", in);
  len = strlen(buf);
  while (len > 0 && buf[len - 1] == '/') buf[--len] = '\0';
  http_parser_url_init(&p);
  if (http_parser_parse_url(buf, len, 0, &p) != 0 ||
      !field(&p, buf, UF_SCHEMA, &scheme, &slen) ||
      !field(&p, buf, UF_HOST, &host, &hlen) || hlen == 0) {
    snprintf(err, n, "'%s' is not a URL (expected http://HOST:PORT or "
             "ws://HOST:PORT/ws)", in);
    return -1;
  }
  if ((slen == 5 && strncasecmp(scheme, "https", 5) == 0) ||
      (slen == 3 && strncasecmp(scheme, "wss", 3) == 0)) {
    snprintf(err, n, "'%s' needs TLS, which ludo's client does not speak: "
             "use http:// or ws://, or a TLS-terminating proxy on this "
             "machine", in);
    return -1;
  }
  is_ws = slen == 2 && strncasecmp(scheme, "ws", 2) == 0;
  if (!is_ws && !(slen == 4 && strncasecmp(scheme, "http", 4) == 0)) {
    snprintf(err, n, "'%s': the scheme must be http:// or ws:// (got "
             "'%.*s')", in, (int)slen, scheme);
    return -1;
  }
  if (p.field_set & (1u << UF_USERINFO)) {
    snprintf(err, n, "'%s': user information in the URL is not supported "
             "(give a token in the client's options)", in);
    return -1;
  }
  if ((p.field_set & (1u << UF_PORT)) && p.port == 0) {
    snprintf(err, n, "'%s': port 0 cannot be connected to", in);
    return -1;
  }
  if (hlen >= sizeof u->host) {
    snprintf(err, n, "'%s': the host name is too long", in);
    return -1;
  }
  field(&p, buf, UF_PATH, &path, &plen);
  field(&p, buf, UF_QUERY, &query, &qlen);
  memcpy(u->host, host, hlen);
  u->host[hlen] = '\0';
  u->port = (p.field_set & (1u << UF_PORT)) ? p.port : 80;
  v6 = strchr(u->host, ':') != NULL;
  snprintf(u->hostfield, sizeof u->hostfield, "%s%s%s:%d", v6 ? "[" : "",
           u->host, v6 ? "]" : "", u->port);
  /* A ws:// URL with a path is the route itself; otherwise /ws follows
   * the path (the trailing slashes are gone). */
  if (is_ws && plen > 0) {
    const char *slash = path + plen;
    while (slash > path && slash[-1] != '/') slash--;
    snprintf(u->prefix, sizeof u->prefix, "%.*s",
             (int)(slash > path ? slash - 1 - path : 0), path);
    snprintf(u->target, sizeof u->target, "%.*s", (int)plen, path);
  } else {
    snprintf(u->prefix, sizeof u->prefix, "%.*s", (int)plen, path);
    snprintf(u->target, sizeof u->target, "%.*s/ws", (int)plen, path);
  }
  if (qlen > 0) {
    size_t t = strlen(u->target);
    snprintf(u->target + t, sizeof u->target - t, "?%.*s", (int)qlen, query);
  }
  snprintf(u->base, sizeof u->base, "http://%.300s%.2047s", u->hostfield,
           u->prefix);
  snprintf(u->ws, sizeof u->ws, "ws://%.300s%.2055s", u->hostfield,
           u->target);
  return 0;
}
