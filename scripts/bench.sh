#!/usr/bin/env bash
# Runs the benchmarks: the runtime's figures, each beside a baseline from
# the same run, as a table and as $BUILD/bench.json (bench/core_bench.c;
# docs/performance.md says what each figure measures), then the memory of
# a session module by module, the rubric library in stock Lua, and `ludo
# serve` over loopback ($BUILD/bench-serve.json, bench/serve_bench.c).
# usage: scripts/bench.sh [scale]   (make bench; scale multiplies samples)
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
echo "== runtime figures (C API; bench/core_bench.c)"
"$BUILD/ludo-bench" --json "$BUILD/bench.json" "${1:-1}"
echo "== memory of a session, module by module (bench/session_memory.c)"
"$BUILD/ludo-memory"
if [ -x "$BUILD/ludo-json-bench" ]; then
  echo "== JSON text <-> Lua (bench/json_bench.c)"
  "$BUILD/ludo-json-bench"
fi
echo "== rubrics (pure Lua; bench/rubrics_bench.lua)"
LUA_PATH="lua/?.lua;lua/?/init.lua;./?.lua;;" lua5.4 bench/rubrics_bench.lua
if [ -x "$BUILD/ludo-serve-bench" ]; then
  echo "== ludo serve over loopback (bench/serve_bench.c; make bench-serve)"
  "$BUILD/ludo-serve-bench" --ludo "$BUILD/ludo" \
    --json "$BUILD/bench-serve.json"
fi
