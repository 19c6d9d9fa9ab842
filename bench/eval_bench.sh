#!/usr/bin/env bash
# The figures of `ludo eval` (docs/eval.md), each against a baseline from
# the same run:
#   eval.echo steps/s   a Lua-policy eval of examples/echo (the constant
#                       policy bench/eval/echo_policy.lua, --concurrency 16,
#                       no trajectories), best of 3 runs taken before and
#                       after ludo-bench; baseline ludo-bench's in-process
#                       "step.echo async @16" (bench/core_bench.c, group
#                       scale); target ratio >= 0.8
#   eval.echo vs chain  the same eval against the bare chain of the two
#                       calls an eval step makes (the policy's act, the
#                       step; bench/eval_chain.c), best of 3 each,
#                       interleaved: what the runner itself adds
#   eval.resume         re-reading 100,000 results (bench/eval_resume.c);
#                       target <= 1 s
# usage: bench/eval_bench.sh   (make bench-eval; run from anywhere)
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

eval_rate() { # one eval run; prints its steps/s
  rm -rf "$tmp/out"
  "$BUILD/ludo" eval examples/echo --policy bench/eval/echo_policy.lua \
    --episodes 200 --max-steps 500 --seed 1 --concurrency 16 \
    --no-trajectories --quiet --out "$tmp/out"
  python3 -c 'import json,sys
s = json.load(open(sys.argv[1]))
print(s["steps"]["total"] / s["timing"]["wall_s"])' "$tmp/out/summary.json"
}

best=0
for i in 1 2; do
  r=$(eval_rate)
  best=$(python3 -c "print(max($best, $r))")
done
echo "== ludo-bench --only scale (the in-process baseline, ~30 s)"
"$BUILD/ludo-bench" --only scale --json "$tmp/bench.json" >/dev/null
r=$(eval_rate)
best=$(python3 -c "print(max($best, $r))")
python3 - "$tmp/bench.json" "$best" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["figures"]
base = [r for r in rows if r["figure"] == "step.echo async @16"][0]["measured"]
ev = float(sys.argv[2])
ratio = ev / base
print("eval.echo (Lua policy, @16)   %8.1fk steps/s   baseline step.echo "
      "async @16 %8.1fk/s   ratio %.2fx   target >= 0.8x  %s"
      % (ev / 1e3, base / 1e3, ratio, "met" if ratio >= 0.8 else "MISSED"))
PY
echo "== eval.echo against the bare chain of its calls (bench/eval_chain.c)"
ev=0
ch=0
for i in 1 2 3; do
  ev=$(python3 -c "print(max($ev, $(eval_rate)))")
  ch=$(python3 -c "print(max($ch, $("$BUILD/ludo-eval-chain" 1600000)))")
done
python3 -c "
ev, ch = $ev, $ch
print('eval.echo (Lua policy, @16)   %8.1fk steps/s   baseline act+step '
      'chain @16 %8.1fk/s   ratio %.2fx' % (ev / 1e3, ch / 1e3, ev / ch))"
echo "== eval.resume (bench/eval_resume.c)"
"$BUILD/ludo-eval-resume-bench" 100000
