/* log.h - log lines routed to the host's callback (or stderr). */
#ifndef LUDO_BASE_LOG_H
#define LUDO_BASE_LOG_H

#include <stddef.h>

#include "ludo_defs.h"

typedef struct ludo__log_s {
  ludo_log_cb cb; /* NULL: WARN and above to stderr */
  void *ud;
} ludo__log_t;

void ludo__log_write(const ludo__log_t *lg, ludo_log_level_t level,
                     const char *who, const char *msg, size_t len);
void ludo__log(const ludo__log_t *lg, ludo_log_level_t level,
               const char *who, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
