#!/usr/bin/env bash
# Installs the Debian packages ludo needs to build, test and run, when missing.
# Safe to run repeatedly: does nothing when everything is present.
set -eu

# Exactly what the build and the tests use: the C toolchain, Lua 5.4 with
# busted and luacheck, libuv, jansson (schemas), pcre2 (ludo.re), and clang
# with its sanitizer and libFuzzer runtimes (make fuzz, the fuzz smoke of
# make test), valgrind (lifecycle tests under memcheck).
PKGS="build-essential pkg-config liblua5.4-dev lua5.4 libuv1-dev libjansson-dev
libpcre2-dev lua-busted lua-check clang libclang-rt-dev valgrind"

missing=""
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done

if [ -z "$missing" ]; then
  exit 0
fi

echo "deps: installing:$missing" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
echo "deps: done" >&2
