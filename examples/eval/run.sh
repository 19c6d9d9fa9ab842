#!/usr/bin/env bash
# examples/eval: starts the mock LLM server of spec/llm on a free port,
# runs `ludo eval examples/eval/run.lua` into OUT (default /tmp/ludo-eval-
# example) with both LLMs pointed at it (LUDO_POLICY_URL, LUDO_JUDGE_URL:
# the base_url_env of the run file's policy and of the judge), stops the
# server. Open OUT/report.html in a browser.
# usage: examples/eval/run.sh [OUT]     (from anywhere)
set -eu
cd "$(dirname "$0")/../.."
OUT=${1:-/tmp/ludo-eval-example}
[ $# -gt 0 ] && shift  # the rest: flags of ludo eval
BUILD=${BUILD:-build}
log=$(mktemp)
node spec/llm/mock_llm.js --port 0 --script examples/eval/mock.json \
  >"$log" &
mock=$!
trap 'kill $mock 2>/dev/null; rm -f "$log"' EXIT
port=""
for _ in $(seq 200); do
  port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log")
  [ -n "$port" ] && break
  sleep 0.05
done
[ -n "$port" ] || { echo "run.sh: the mock LLM server did not start" >&2; exit 1; }
export LUDO_POLICY_URL="http://127.0.0.1:$port/v1"
export LUDO_JUDGE_URL="$LUDO_POLICY_URL"
rm -rf "$OUT"
"$BUILD/ludo" eval examples/eval/run.lua --out "$OUT" "$@"
echo "report: $OUT/report.html"
