#!/usr/bin/env bash
# The runtime-core issue's "1-session echo step >= 1.4x today's", measured
# as a ratio in one run: the library of the commit the issue was measured
# on (THEN, default a99bfe9, the last commit before the issue's work; its
# echo step ran at 285-320k/s then) and today's library each step their
# own tree's examples/echo through the same driver (bench/echo_rate.c, the
# API both share), alternated ROUNDS times; the medians and their ratio are
# printed in the table format of ludo-bench; the figure is the median of
# the rounds' ratios. THEN's tree is checked out
# into a temporary git worktree and built with its own Makefile (stock
# Debian Lua 5.4, as it was); nothing of it is kept. Today's is $(BUILD)'s,
# profile-guided by default (docs/performance.md, "Profile-guided build");
# BUILD=build-nopgo after `make BUILD=build-nopgo LUA_DIR=build-lua-nopgo
# PGO=0 build-nopgo/ludo-echo-rate` measures it without.
# usage: bench/then_and_now.sh [ROUNDS [STEPS]]   (make bench-then)
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
THEN=${THEN:-a99bfe9}
ROUNDS=${1:-7}
STEPS=${2:-300000}
root=$(pwd)
tmp=$(mktemp -d)
cleanup() { git worktree remove --force "$tmp/then" >/dev/null 2>&1 || true
            rm -rf "$tmp"; }
trap cleanup EXIT
KEEP=${KEEP:-}; [ -n "$KEEP" ] && trap - EXIT && echo "kept $tmp"
git worktree add --detach "$tmp/then" "$THEN" >/dev/null 2>&1
make -C "$tmp/then" -s BUILD=build build/libludo.a >/dev/null
# THEN's link line (its Makefile's LIBS): stock Lua, no net libraries.
cc -std=c11 -O2 -D_GNU_SOURCE -I"$tmp/then/include" -o "$tmp/echo-rate-then" \
  bench/echo_rate.c "$tmp/then/build/libludo.a" \
  /usr/lib/x86_64-linux-gnu/liblua5.4.a -luv -ljansson -lpcre2-8 -lm \
  -lpthread -ldl
now_bin=$root/$BUILD/ludo-echo-rate
then_r=() now_r=()
for ((r = 0; r < ROUNDS; r++)); do
  then_r+=("$(cd "$tmp/then" && "$tmp/echo-rate-then" "$STEPS")")
  now_r+=("$(cd "$root" && "$now_bin" "$STEPS")")
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {
  print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2 }'; }
m_then=$(median "${then_r[@]}")
m_now=$(median "${now_r[@]}")
ratios=()
for ((r = 0; r < ROUNDS; r++)); do
  ratios+=("$(awk -v n="${now_r[r]}" -v t="${then_r[r]}" \
    'BEGIN { printf "%.3f", n / t }')")
done
echo "rounds (today/then steps/s, ratio): $(for ((r = 0; r < ROUNDS; r++)); do
  printf '%s/%s %sx  ' "${now_r[r]}" "${then_r[r]}" "${ratios[r]}"; done)"
# The figure is the median of the rounds' ratios: each round runs the two
# back to back, so a change of the host's speed between rounds cancels.
awk -v n="$m_now" -v t="$m_then" -v c="$THEN" -v r="$(median "${ratios[@]}")" \
  'BEGIN {
  printf "%-38s %8.1fk/s %8.1fk/s %-28s %6.2fx  >= 1.40x   %s\n",
    "step.echo blocking @1, today", n / 1000, t / 1000,
    "the same at " c, r, (r >= 1.4 ? "met" : "MISSED") }'
