#!/usr/bin/env bash
# Checks the layering of runtime/ (DESIGN.md): a file includes only headers
# of its own layer or of layers below it, the public header ludo.h is used
# only by the API (runtime/ludo.c) and its clients (bind/, cli/), the
# transport of runtime/net stays generic (below), and the project's headers
# include each other without cycles. Prints one line per violation and
# exits 1 when there is any.
set -u
cd "$(dirname "$0")/.."
status=0
rank() {
  case "$1" in
    base) echo 1 ;; core) echo 2 ;; script) echo 3 ;; sandbox) echo 4 ;;
    env) echo 5 ;; net) echo 6 ;; serve) echo 7 ;; *) echo 0 ;;
  esac
}
for f in $(find runtime -name '*.[ch]' | sort); do
  layer=$(echo "$f" | cut -d/ -f2)
  [ "$layer" = "ludo.c" ] && continue
  mine=$(rank "$layer")
  while read -r inc; do
    if [ "$inc" = "ludo.h" ]; then
      case "$layer" in bind|cli) ;; *)
        echo "layering: $f includes ludo.h"; status=1 ;;
      esac
      continue
    fi
    [ "$inc" = "ludo_defs.h" ] && continue
    dep=$(echo "$inc" | cut -d/ -f1)
    case "$layer" in
      bind|cli)
        [ "$dep" = "$layer" ] && continue
        echo "layering: $f ($layer) uses $inc; it may use only ludo.h"
        status=1 ;;
      *)
        theirs=$(rank "$dep")
        if [ "$theirs" -eq 0 ] || [ "$theirs" -gt "$mine" ]; then
          echo "layering: $f ($layer) includes $inc from above it"
          status=1
        fi ;;
    esac
  done < <(sed -n 's/^#include "\(.*\)"/\1/p' "$f")
done
# The transport of runtime/net (byte stream, HTTP/1.1, WebSocket, TCP
# server, and the client's: outgoing connections, responses read, URLs,
# GETs; SIGPIPE ignored for both) knows no Lua, sessions or OpenEnv: it uses base/, core/ and its
# own headers only, so the protocol layers above it (OpenEnv routes, MCP,
# the OpenEnv client) build on it, never the other way round.
TRANSPORT="conn http response ws handshake server dial reply url fetch sigpipe"
for f in $(find runtime/net -name '*.[ch]' 2>/dev/null | sort); do
  stem=$(basename "$f"); stem=${stem%.*}
  case " $TRANSPORT " in *" $stem "*) ;; *) continue ;; esac
  while read -r inc; do
    dep=$(echo "$inc" | cut -d/ -f1)
    istem=$(basename "$inc"); istem=${istem%.h}
    case "$dep" in
      base|core|ludo_defs.h) continue ;;
      net) case " $TRANSPORT " in *" $istem "*) continue ;; esac ;;
    esac
    echo "layering: $f is net's transport and may not use $inc"
    status=1
  done < <(sed -n 's/^#include "\(.*\)"/\1/p' "$f")
done
# Cycles among headers: tsort reports them.
edges=$(for h in $(find runtime -name '*.h' | sort); do
  for inc in $(sed -n 's/^#include "\(.*\)"/\1/p' "$h"); do
    [ -f "runtime/$inc" ] && echo "${h#runtime/} $inc"
  done
done)
if [ -n "$edges" ] && ! echo "$edges" | tsort >/dev/null 2>/tmp/ludo-tsort.$$; then
  echo "layering: include cycle among headers:"; cat /tmp/ludo-tsort.$$
  status=1
fi
rm -f /tmp/ludo-tsort.$$
exit $status
