#!/usr/bin/env bash
# Builds the Lua 5.4 that ludo's programs link statically: Debian's lua5.4
# source package (the same 5.4.4 with Debian's patches as liblua5.4-dev)
# plus ludo's patches in scripts/patches/ (each file says why). Usage:
#   scripts/lua-build.sh OUTDIR      -> OUTDIR/liblua.a
# LUA_CFLAGS adds compiler flags (make asan: the sanitizers, so ASan sees
# Lua's own reads and writes too).
# LUA_SRC_DIR (default OUTDIR/src) is where the patched source is
# unpacked, once per set of patches: the profile-guided build (Makefile,
# PGO) compiles the same files from the same path for its instrumented
# and its final Lua, as GCC's profiles require.
# Needs deb-src in apt's sources (scripts/deps.sh sets that up) and
# dpkg-dev. Does nothing when OUTDIR/liblua.a exists.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out=$1
[ -f "$out/liblua.a" ] && exit 0
work="$out/src"
srcdir=${LUA_SRC_DIR:-$work}
patches=$(cat "$root"/scripts/patches/lua-*.patch | cksum)
if [ "$(cat "$srcdir/.ludo-patches" 2>/dev/null)" != "$patches" ]; then
  rm -rf "$srcdir"
  mkdir -p "$srcdir"
  (cd "$srcdir" && apt-get source -qq lua5.4 >/dev/null 2>&1) || {
    echo "lua-build: 'apt-get source lua5.4' failed (is deb-src enabled? run" \
         "scripts/deps.sh)" >&2
    exit 1
  }
  for p in "$root"/scripts/patches/lua-*.patch; do
    patch -s -d "$(ls -d "$srcdir"/lua5.4-*/ | head -n 1)" -p1 < "$p"
  done
  echo "$patches" > "$srcdir/.ludo-patches"
fi
mkdir -p "$work"
rm -f "$work"/l*.o
src=$(ls -d "$srcdir"/lua5.4-*/ | head -n 1)
objs=()
for c in "$src"/src/l*.c; do
  case "$(basename "$c")" in lua.c|luac.c) continue ;; esac
  o="$work/$(basename "${c%.c}").o"
  # Fat LTO objects (Makefile, LTO): programs linked with -flto optimise
  # across Lua and ludo; other links use the code as it is.
  ${CC:-cc} -std=gnu99 -O2 -g -fPIC -flto=auto -ffat-lto-objects \
    -DLUA_COMPAT_5_3 -DLUA_USE_LINUX ${LUA_CFLAGS:-} \
    -c "$c" -o "$o"
  objs+=("$o")
done
ar rcs "$out/liblua.a.tmp" "${objs[@]}"
mv "$out/liblua.a.tmp" "$out/liblua.a"
echo "lua-build: $out/liblua.a ($(basename "$src") + $(ls "$root"/scripts/patches/lua-*.patch | wc -l) ludo patch)" >&2
