/* sigpipe.h - keeping a peer's closed socket from ending the process.
 * libuv writes to sockets with write(2), not send(2) with MSG_NOSIGNAL, so
 * a write to a connection the peer closed raises SIGPIPE, whose default
 * action ends the process: a server's client hanging up, or the server a
 * client talks to going away, would kill the host. */
#ifndef LUDO_NET_SIGPIPE_H
#define LUDO_NET_SIGPIPE_H

/* Sets SIGPIPE to ignored when its disposition is still the default (a
 * host that set its own keeps it): writes then fail with EPIPE, which the
 * connection reports. Called before ludo opens a socket (listening,
 * dialling). Process-wide, idempotent. */
void ludo__net_ignore_sigpipe(void);

#endif
