/* realtext.c - a double as its shortest exact text (see realtext.h). A
 * double has 15 to 17 significant digits: when %.15g reads back, no
 * shorter text does that %.15g does not already give (%g drops trailing
 * zeros), so trying 15, 16 and 17 finds the shortest. */
#include "base/realtext.h"

#include <stdio.h>
#include <stdlib.h>

void ludo__real_text(double d, char *out, size_t n) {
  int prec;
  for (prec = 15; prec < 17; prec++) {
    snprintf(out, n, "%.*g", prec, d);
    if (strtod(out, NULL) == d) return;
  }
  snprintf(out, n, "%.17g", d);
}
