#!/usr/bin/env bash
# Installs ludo into a temporary prefix and checks it as a user would:
# builds the gridworld example with `pkg-config` alone and runs it, runs a
# busted spec with the installed Lua and C modules only, then uninstalls
# and checks that nothing is left. Prints "ok NAME" / "FAIL NAME" lines
# (counted by scripts/test.sh). Environment: BUILD (default build).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
src=$PWD
prefix=$(mktemp -d)
work=$(mktemp -d)
status=0
say() { if [ "$1" = 0 ]; then echo "ok $2"; else echo "FAIL $2"; status=1; fi; }

make --no-print-directory BUILD="$BUILD" install PREFIX="$prefix" \
  >"$work/install.log" 2>&1
say $? "make install PREFIX=... from the tree"

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cc -o "$work/gridworld" examples/gridworld/game.c examples/gridworld/main.c \
  $(pkg-config --cflags --libs ludo jansson) >"$work/cc.log" 2>&1
say $? "gridworld builds with pkg-config --cflags --libs ludo alone"
"$work/gridworld" 2 examples/gridworld >"$work/grid.log" 2>&1
say $? "the installed gridworld runs (libludo.so found through its rpath)"
readelf -d "$work/gridworld" 2>/dev/null | grep -q 'NEEDED.*libludo.so.0'
say $? "programs record the SONAME libludo.so.0"

# The library carries ludo's patched Lua (docs/embedding.md): the table
# loops end at the CPU budget; a program that links the system's Lua as
# well is told so when it registers host functions.
cc -o "$work/patched" spec/install/patched_lua.c \
  $(pkg-config --cflags --libs ludo) >"$work/cc-patched.log" 2>&1 &&
  timeout 60 "$work/patched" spec/fixtures/c/abuse ours >"$work/patched.log" 2>&1
say $? "a program on libludo.so runs ludo's patched Lua"
cc -o "$work/foreign" spec/install/patched_lua.c $(pkg-config --cflags ludo) \
  -llua5.4 $(pkg-config --libs ludo) >"$work/cc-foreign.log" 2>&1 &&
  timeout 60 "$work/foreign" spec/fixtures/c/abuse foreign >"$work/foreign.log" 2>&1
say $? "a second Lua in the program is refused for host functions"

(
  cd "$work" &&
  eval "$("$prefix/bin/ludo" lua-path)" &&
  [ -n "${LUA_CPATH:-}" ] &&
  LUDO_PREFIX="$prefix" LUDO_SRC="$src" busted --lua=lua5.4 \
    -o utfTerminal "$src/spec/install/installed_spec.lua"
) >"$work/busted.log" 2>&1
say $? "busted with the installed modules (eval \"\$(ludo lua-path)\")"

make --no-print-directory BUILD="$BUILD" uninstall PREFIX="$prefix" \
  >"$work/uninstall.log" 2>&1
left=$(find "$prefix" -mindepth 1 | head -n 5)
[ -z "$left" ]
say $? "make uninstall leaves nothing behind"
[ -n "$left" ] && echo "    left: $left"

if [ $status != 0 ]; then
  for f in "$work"/*.log; do echo "--- $f"; tail -n 15 "$f"; done
fi
rm -rf "$prefix" "$work"
exit $status
