/* jsonsax.h - the strict JSON parser (base/jsonparse.h) behind the public
 * callbacks of ludo_defs.h (ludo_json_cb_t), for ludo_json_parse. */
#ifndef LUDO_BASE_JSONSAX_H
#define LUDO_BASE_JSONSAX_H

#include <stddef.h>

#include "ludo_defs.h"

/* ludo_json_parse's work (see ludo.h), arguments checked: text may be
 * NULL only when len is 0, cb is not NULL. */
int ludo__json_sax(const char *text, size_t len, int max_depth,
                   const ludo_json_cb_t *cb, void *ud,
                   ludo_json_error_t *err);

#endif
