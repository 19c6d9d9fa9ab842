/* eval_json.c - the JSON text of `ludo eval`'s records, trajectory lines
 * and merged records: compact, members in their order, and reals in the
 * shortest form that reads back as the same double. jansson prints a
 * fixed number of digits: 15 lose the value (a reward of
 * 0.29999999999999993 became 0.3, while success was decided on the exact
 * sum), 17 print 0.3 as 0.29999999999999999. */
#include <stdlib.h>
#include <string.h>

#include "cli/eval.h"

static void add_object(ludo__cli_buf_t *b, json_t *v) {
  void *it;
  int first = 1;
  ludo__cli_buf_add(b, "{", 1);
  for (it = json_object_iter(v); it != NULL;
       it = json_object_iter_next(v, it)) {
    if (!first) ludo__cli_buf_add(b, ",", 1);
    first = 0;
    ludo__cli_buf_json_stringn(b, json_object_iter_key(it),
                               json_object_iter_key_len(it));
    ludo__cli_buf_add(b, ":", 1);
    eval_json_add(b, json_object_iter_value(it));
  }
  ludo__cli_buf_add(b, "}", 1);
}

void eval_json_add(ludo__cli_buf_t *b, json_t *v) {
  size_t i;
  char t[32];
  switch (json_typeof(v)) {
    case JSON_OBJECT: add_object(b, v); break;
    case JSON_ARRAY:
      ludo__cli_buf_add(b, "[", 1);
      for (i = 0; i < json_array_size(v); i++) {
        if (i > 0) ludo__cli_buf_add(b, ",", 1);
        eval_json_add(b, json_array_get(v, i));
      }
      ludo__cli_buf_add(b, "]", 1);
      break;
    case JSON_STRING:
      ludo__cli_buf_json_stringn(b, json_string_value(v),
                                 json_string_length(v));
      break;
    case JSON_INTEGER:
      snprintf(t, sizeof t, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
      ludo__cli_buf_add(b, t, strlen(t));
      break;
    case JSON_REAL: ludo__cli_buf_json_real(b, json_real_value(v)); break;
    case JSON_TRUE: ludo__cli_buf_add(b, "true", 4); break;
    case JSON_FALSE: ludo__cli_buf_add(b, "false", 5); break;
    case JSON_NULL: ludo__cli_buf_add(b, "null", 4); break;
  }
}

char *eval_json_dumps(json_t *v) {
  ludo__cli_buf_t b = {0};
  if (v == NULL) return NULL;
  eval_json_add(&b, v);
  return b.p;
}
