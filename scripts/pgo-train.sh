#!/usr/bin/env bash
# The training run of the profile-guided build (Makefile, PGO): what the
# instrumented programs do here is what GCC optimises the final build for.
# It is the product's own work through its front doors, on the examples:
# episodes in-process (`ludo run`, each environment's policy and random
# actions drawn from its schema), evaluation runs (`ludo eval`: concurrent
# sessions, two worker processes, records and trajectories written), an
# environment served over OpenEnv's protocol and driven by ludo's client
# (`ludo serve`, then `ludo eval` on its ws:// URL and `ludo run` on its
# http:// one), and the rubric library's example scripts on the patched
# Lua interpreter.
#
# The echo environment is left out on purpose: every benchmark of
# docs/performance.md steps it, so its figures measure the profile on work
# it was not trained on, as a user's own environment is.
# usage: scripts/pgo-train.sh BUILD_DIR   (the instrumented build; ~15 s)
set -eu
cd "$(dirname "$0")/.."
dir=$1
ludo=$dir/ludo
tmp=$(mktemp -d)
server=
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

q() { "$@" >/dev/null; }

# serve LOG ENV [OPTION...]: starts `ludo serve` on a free port in the
# background ($server) and sets $url once it listens.
serve() {
  local log=$1
  shift
  "$ludo" serve "$@" --port 0 >"$log" 2>&1 &
  server=$!
  url=
  for _ in $(seq 200); do
    url=$(grep -o 'http://[0-9.]*:[0-9]*' "$log" 2>/dev/null) && return 0
    sleep 0.05
  done
  echo "pgo-train: ludo serve did not start" >&2
  exit 1
}
stop() {
  kill -TERM "$server"
  wait "$server" || true
  server=
}

# In-process episodes: each example with its policy, then random actions.
q "$ludo" run examples/arith --policy examples/arith/policy.lua \
  --episodes 2000 --seed 1
q "$ludo" run examples/arith --episodes 500 --seed 2 --json
q "$ludo" run examples/tutorial/quiz --policy examples/tutorial/policy.lua \
  --episodes 1000 --seed 3
q "$ludo" run examples/tutorial/quiz --episodes 300 --seed 4
q "$ludo" run examples/gridworld --policy examples/gridworld/policy.lua \
  --host-lib "$dir/gridworld-host.so" --episodes 300 --seed 5

# Evaluation runs: many sessions in flight, records and trajectories.
q "$ludo" eval examples/arith --episodes 2000 --concurrency 16 \
  --out "$tmp/e1" --quiet
q "$ludo" eval examples/tutorial/quiz --policy examples/tutorial/policy.lua \
  --episodes 1000 --concurrency 16 --workers 2 --out "$tmp/e2" --quiet

# Served: the server, its WebSocket and HTTP paths, ludo's client.
serve "$tmp/serve.log" examples/arith
q "$ludo" eval "ws://${url#http://}/ws" --policy examples/arith/policy.lua \
  --episodes 2000 --concurrency 32 --out "$tmp/e3" --quiet
q "$ludo" run "$url" --policy examples/arith/policy.lua --episodes 300
stop

# Many sessions on one loop, as a server holds them: two evaluations of
# 256 sessions each against one server worker (512 states, 20 MiB: the
# loop's run queue, the connections and the collector at that scale).
serve "$tmp/serve2.log" examples/tutorial/quiz --workers 1 --max-sessions 600
pids=
for i in 1 2; do
  "$ludo" eval "ws://${url#http://}/ws" \
    --policy examples/tutorial/policy.lua --episodes 3000 --concurrency 256 \
    --no-trajectories --out "$tmp/m$i" --quiet >/dev/null &
  pids="$pids $!"
done
for p in $pids; do wait "$p"; done
stop

# The rubric library on the interpreter (its VM paths: calls through
# __call and __index, the combinators).
for f in code_grading chess_trajectory llm_judge format_check; do
  LUA_PATH='lua/?.lua;lua/?/init.lua;./?.lua;;' q "$dir/lua" \
    "examples/rubrics/$f.lua"
done

# The rubric library's specs (busted, when installed: make test installs
# it), on the same interpreter.
if command -v busted >/dev/null; then
  q busted --lua="$dir/lua" -o TAP spec/rubrics
fi
