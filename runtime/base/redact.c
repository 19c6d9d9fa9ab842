/* redact.c - hides heap addresses in text that leaves a sandbox: an error
 * message that reaches a host, or a remote client through a server, must
 * not tell where the process's heap lies (docs/sandbox.md). */
#include "base/redact.h"

#include <ctype.h>
#include <string.h>

#define REDACT_MIN_DIGITS 4

size_t ludo__redact_addresses(char *s, size_t len) {
  size_t in = 0, out = 0;
  while (in < len) {
    if (in + 4 <= len && memcmp(s + in, ": 0x", 4) == 0) {
      size_t d = in + 4;
      while (d < len && isxdigit((unsigned char)s[d])) d++;
      if (d - (in + 4) >= REDACT_MIN_DIGITS) {
        memmove(s + out, ": 0x?", 5);
        out += 5;
        in = d;
        continue;
      }
    }
    s[out++] = s[in++];
  }
  if (out < len) s[out] = '\0';
  return out;
}
