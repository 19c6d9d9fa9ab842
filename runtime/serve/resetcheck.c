/* resetcheck.c - OpenEnv's ResetRequest checks of a reset's options, one
 * validator for POST /reset and the /ws reset message, so both answer the
 * same input with the same error types (docs/protocol.md). */
#include "serve/internal.h"

#include "base/utf8.h"

json_t *sv_field_error(const char *type, const char *prefix,
                       const char *field, const char *msg, json_t *input) {
  json_t *loc = field ? json_pack("[s,s]", prefix, field)
                      : json_pack("[s]", prefix);
  return json_pack("[{s:s,s:o,s:s,s:O}]", "type", type, "loc", loc, "msg",
                   msg, "input", input ? input : json_null());
}

json_t *sv_reset_errors(json_t *opts, const char *prefix) {
  json_t *seed = json_object_get(opts, "seed");
  json_t *eid = json_object_get(opts, "episode_id");
  if (seed && !json_is_null(seed) && !json_is_integer(seed))
    return sv_field_error("int_type", prefix, "seed", "Input should be a "
                          "valid integer", seed);
  if (seed && json_is_integer(seed) && json_integer_value(seed) < 0)
    return sv_field_error("greater_than_equal", prefix, "seed", "Input "
                          "should be greater than or equal to 0", seed);
  if (eid && !json_is_null(eid) && !json_is_string(eid))
    return sv_field_error("string_type", prefix, "episode_id", "Input "
                          "should be a valid string", eid);
  if (eid && json_is_string(eid) &&
      ludo__utf8_chars(json_string_value(eid), json_string_length(eid)) > 255)
    return sv_field_error("string_too_long", prefix, "episode_id", "String "
                          "should have at most 255 characters", eid);
  return NULL;
}
