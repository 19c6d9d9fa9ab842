/* response.c - HTTP/1.1 response heads (see response.h). */
#include "net/response.h"

#include <http_parser.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

const char *ludo__response_reason(int status) {
  switch (status) {
#define LUDO__REASON(num, name, string) \
  case num:                             \
    return #string;
    HTTP_STATUS_MAP(LUDO__REASON)
#undef LUDO__REASON
  default:
    return "";
  }
}

size_t ludo__response_date(char *out, int64_t t) {
  static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed",
                                  "Thu", "Fri", "Sat"};
  static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr",
                                     "May", "Jun", "Jul", "Aug",
                                     "Sep", "Oct", "Nov", "Dec"};
  time_t tt = (time_t)t;
  struct tm tm;
  int n;
  if (gmtime_r(&tt, &tm) == NULL) memset(&tm, 0, sizeof tm);
  n = snprintf(out, 30, "%s, %02d %s %04d %02d:%02d:%02d GMT",
               days[tm.tm_wday % 7], tm.tm_mday, months[tm.tm_mon % 12],
               (tm.tm_year + 1900) % 10000, tm.tm_hour, tm.tm_min,
               tm.tm_sec);
  return n > 0 ? (size_t)n : 0;
}

int ludo__http_tchar(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
      (c >= '0' && c <= '9'))
    return 1;
  return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int valid_name(const char *s) {
  if (s == NULL || *s == '\0') return 0;
  for (; *s; s++)
    if (!ludo__http_tchar((unsigned char)*s)) return 0;
  return 1;
}

/* A field value: anything but CR, LF and NUL (the NUL ends the string);
 * other control characters but tab are refused too. */
static int valid_value(const char *s) {
  if (s == NULL) return 0;
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if ((c < 0x20 && c != '\t') || c == 0x7f) return 0;
  }
  return 1;
}

/* Fields whose framing the server owns. */
static int owned(const char *name) {
  static const char *const names[] = {"content-length", "transfer-encoding",
                                      "connection", "upgrade"};
  size_t i;
  for (i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcasecmp(name, names[i]) == 0) return 1;
  return 0;
}

int ludo__response_check(int status, const ludo__http_header_t *h, size_t n,
                         size_t body_len) {
  size_t i;
  if (status < 200 || status > 599) return LUDO_EINVAL;
  if ((status == 204 || status == 304) && body_len > 0) return LUDO_EINVAL;
  if (n > 0 && h == NULL) return LUDO_EINVAL;
  for (i = 0; i < n; i++) {
    if (!valid_name(h[i].name) || !valid_value(h[i].value)) return LUDO_EINVAL;
    if (owned(h[i].name)) return LUDO_EINVAL;
  }
  return 0;
}

int ludo__response_head(ludo__buf_t *b, int status,
                        const ludo__http_header_t *h, size_t n,
                        size_t body_len, unsigned flags) {
  size_t i;
  int has_date = 0;
  char date[32];
  if (ludo__buf_printf(b, "HTTP/1.1 %d %s\r\n", status,
                       ludo__response_reason(status)) != 0)
    return LUDO_ENOMEM;
  for (i = 0; i < n; i++) {
    if (strcasecmp(h[i].name, "date") == 0) has_date = 1;
    if (ludo__buf_adds(b, h[i].name) || ludo__buf_add(b, ": ", 2) ||
        ludo__buf_adds(b, h[i].value) || ludo__buf_add(b, "\r\n", 2))
      return LUDO_ENOMEM;
  }
  if (!has_date) {
    ludo__response_date(date, (int64_t)time(NULL));
    if (ludo__buf_printf(b, "Date: %s\r\n", date) != 0) return LUDO_ENOMEM;
  }
  if (!(flags & LUDO__RESPONSE_NO_LENGTH) &&
      ludo__buf_printf(b, "Content-Length: %zu\r\n", body_len) != 0)
    return LUDO_ENOMEM;
  if ((flags & LUDO__RESPONSE_CLOSE) &&
      ludo__buf_adds(b, "Connection: close\r\n") != 0)
    return LUDO_ENOMEM;
  else if (!(flags & LUDO__RESPONSE_CLOSE) && (flags & LUDO__RESPONSE_KEEP) &&
           ludo__buf_adds(b, "Connection: keep-alive\r\n") != 0)
    return LUDO_ENOMEM;
  return ludo__buf_add(b, "\r\n", 2) == 0 ? 0 : LUDO_ENOMEM;
}

int ludo__response_error(ludo__buf_t *b, int status, const char *msg) {
  static const ludo__http_header_t type = {"Content-Type",
                                           "text/plain; charset=utf-8"};
  const char *reason = ludo__response_reason(status);
  size_t len = strlen(reason) + 2 + strlen(msg) + 1;
  if (ludo__response_head(b, status, &type, 1, len, LUDO__RESPONSE_CLOSE))
    return LUDO_ENOMEM;
  return ludo__buf_printf(b, "%s: %s\n", reason, msg) == 0 ? 0 : LUDO_ENOMEM;
}
