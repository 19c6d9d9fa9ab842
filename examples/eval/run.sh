#!/usr/bin/env bash
# examples/eval: starts the mock LLM server of spec/llm on port 8089, runs
# `ludo eval examples/eval/run.lua` into OUT (default /tmp/ludo-eval-
# example), stops the server. Open OUT/report.html in a browser.
# usage: examples/eval/run.sh [OUT]     (from the repository root)
set -eu
cd "$(dirname "$0")/../.."
OUT=${1:-/tmp/ludo-eval-example}
BUILD=${BUILD:-build}
node spec/llm/mock_llm.js --port 8089 --script examples/eval/mock.json \
  >/dev/null &
mock=$!
trap 'kill $mock 2>/dev/null' EXIT
sleep 0.5
rm -rf "$OUT"
"$BUILD/ludo" eval examples/eval/run.lua --out "$OUT"
echo "report: $OUT/report.html"
