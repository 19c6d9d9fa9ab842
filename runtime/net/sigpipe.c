/* sigpipe.c - SIGPIPE ignored unless the host chose otherwise (see
 * sigpipe.h). */
#include "net/sigpipe.h"

#include <signal.h>
#include <string.h>

void ludo__net_ignore_sigpipe(void) {
  struct sigaction sa;
  if (sigaction(SIGPIPE, NULL, &sa) != 0) return;
  if (!(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL) {
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPIPE, &sa, NULL);
  }
}
