#!/usr/bin/env bash
# Runs the benchmarks and prints every figure with its baseline.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
echo "== core (C API; bench/core_bench.c)"
"$BUILD/ludo-bench" "${1:-1}"
echo "== memory of a session, module by module (bench/session_memory.c)"
"$BUILD/ludo-memory"
echo "== rubrics (pure Lua; bench/rubrics_bench.lua)"
LUA_PATH="lua/?.lua;lua/?/init.lua;./?.lua;;" lua5.4 bench/rubrics_bench.lua
