/* errors.c - the table of LUDO_E* codes (see errors.h). */
#include "base/errors.h"

#include <string.h>

static const struct {
  int code;
  const char *name, *msg;
} errtab[] = {
#define LUDO__ERR_ROW(name, code, msg) {code, #name, msg},
    LUDO_ERRNO_MAP(LUDO__ERR_ROW)
#undef LUDO__ERR_ROW
};

#define NERR (sizeof errtab / sizeof errtab[0])

const char *ludo__err_name(int err) {
  size_t i;
  if (err == 0) return "OK";
  for (i = 0; i < NERR; i++)
    if (errtab[i].code == err) return errtab[i].name;
  return "EUNKNOWN";
}

const char *ludo__strerror(int err) {
  size_t i;
  if (err == 0) return "success";
  for (i = 0; i < NERR; i++)
    if (errtab[i].code == err) return errtab[i].msg;
  return "unknown error";
}

int ludo__err_code(const char *name, size_t n) {
  size_t i;
  for (i = 0; i < NERR; i++)
    if (strlen(errtab[i].name) == n && memcmp(errtab[i].name, name, n) == 0)
      return errtab[i].code;
  return 0;
}
