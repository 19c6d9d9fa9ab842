/* log.c - log routing. */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *level_name(ludo_log_level_t level) {
  switch (level) {
    case LUDO_LOG_DEBUG: return "debug";
    case LUDO_LOG_INFO: return "info";
    case LUDO_LOG_WARN: return "warn";
    default: return "error";
  }
}

void ludo__log_write(const ludo__log_t *lg, ludo_log_level_t level,
                     const char *who, const char *msg, size_t len) {
  if (lg != NULL && lg->cb != NULL) {
    lg->cb(lg->ud, level, who, msg, len);
    return;
  }
  if (level < LUDO_LOG_WARN) return;
  fprintf(stderr, "ludo: %s: %s: %.*s\n", level_name(level), who, (int)len,
          msg);
}

void ludo__log(const ludo__log_t *lg, ludo_log_level_t level,
               const char *who, const char *fmt, ...) {
  char tmp[1024];
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n >= sizeof tmp) n = sizeof tmp - 1;
  ludo__log_write(lg, level, who, tmp, (size_t)n);
}
