#!/usr/bin/env python3
"""lines_per_step.py - how many distinct 64-byte lines of memory one step
touches, and how many of them belong to the session stepped (so must come
from memory once sessions no longer fit in the caches): the quantity that
bounds the steps/s at 4,096 sessions and the batch of 256
(docs/performance.md, "Session 23").

  python3 bench/lines_per_step.py [--coverage] [ENV ACTION STEPS SESSIONS]
  (default: examples/echo '{"message":"hello"}' 200 2; from the repo root,
  after make bench)

Runs build/ludo-step-count under valgrind's lackey (every load and store),
splits the trace at the stores to ludo_step_marker, drops the first steps,
and counts per step the lines touched (a line counts as the session's when
only steps of that session touched it: with 2 sessions stepped in turn,
code, constants, C statics and shared prototypes are touched by both).
The lines of the session are attributed to the function whose instruction
touched them first. Deterministic: the host's load does not move it.

--coverage: also counts how many of the session's lines are in the memory
the runtime asks for ahead of the session's step (runtime/env/session.c,
prefetch; ranges written by ludo-step-count after the steps), and names
the functions that touched the lines it does not ask for."""
import bisect
import collections
import os
import subprocess
import sys
import tempfile

EXE = "build/ludo-step-count"


def symbols(exe, base):
    out = subprocess.run(["nm", "--defined-only", exe], capture_output=True,
                         text=True).stdout
    syms = []
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 3 and f[1] in "tTwW":
            syms.append((int(f[0], 16) + base, f[2]))
    syms.sort()
    return [a for a, _ in syms], [n for _, n in syms]


def main():
    args = sys.argv[1:]
    coverage = bool(args) and args[0] == "--coverage"
    if coverage:
        args = args[1:]
    args = args or ["examples/echo", '{"message":"hello"}', "200", "2"]
    k = int(args[3]) if len(args) > 3 else 1
    fd, marker_file = tempfile.mkstemp()
    os.close(fd)
    os.unlink(marker_file)
    r, w = os.pipe()
    env = dict(os.environ, LUDO_STEP_MARKER_FILE=marker_file)
    ranges_file = marker_file + ".ranges"
    if coverage:
        env["LUDO_PREFETCH_RANGES"] = ranges_file
    p = subprocess.Popen(["valgrind", "--tool=lackey", "--trace-mem=yes",
                          "--log-fd=%d" % w, EXE] + args, pass_fds=(w,),
                         env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    os.close(w)
    marker, steps, cur, ip, seen = None, [], None, 0, 0
    with os.fdopen(r) as trace:
        for raw in trace:
            if raw[0] == "I":
                ip = int(raw[3:raw.index(",")], 16)
                continue
            if raw[0] != " ":
                continue
            if marker is None:
                seen += 1
                if seen % 100000 == 0 and os.path.exists(marker_file):
                    with open(marker_file) as f:
                        marker = int(f.read().strip(), 16)
                continue
            a = int(raw[3:raw.index(",")], 16)
            if raw[1] == "S" and a == marker:
                cur = {}
                steps.append(cur)
                continue
            if cur is not None and (a >> 6) not in cur:
                cur[a >> 6] = ip
    p.wait()
    os.unlink(marker_file)
    steps = steps[4:-1] if len(steps) > 8 else steps
    if not steps:
        sys.exit("lines_per_step: no steps found (is %s built?)" % EXE)
    owners = collections.defaultdict(set)
    for i, s in enumerate(steps):
        for line in s:
            owners[line].add(i % k)
    # PIE: valgrind loads the program at this base
    addrs, names = symbols(EXE, 0x108000)
    by_fn = collections.Counter()
    own_total = 0
    for s in steps:
        for line, at in s.items():
            if len(owners[line]) == 1:
                own_total += 1
                j = bisect.bisect_right(addrs, at) - 1
                by_fn[names[j] if j >= 0 else hex(at)] += 1
    n = len(steps)
    total = sum(len(s) for s in steps)
    print("%d steps of %s, %d session(s)" % (n, args[0], k))
    print("lines touched per step: %.1f, of them the session's: %.1f "
          "(%.1f KB)" % (total / n, own_total / n, own_total / n * 64 / 1024))
    print("the session's lines by the function that touched them first:")
    for name, c in by_fn.most_common(15):
        print("  %6.1f  %s" % (c / n, name))
    if coverage:
        report_coverage(ranges_file, steps, owners, k, addrs, names)


def report_coverage(path, steps, owners, k, addrs, names):
    asked = collections.defaultdict(set)  # session -> lines asked for
    with open(path) as f:
        for row in f:
            i, a, b = row.split()
            a, b = int(a, 16), int(b, 16)
            asked[int(i)].update(range(a >> 6, ((b - 1) >> 6) + 1))
    os.unlink(path)
    # Which session step i stepped: (i + shift) % k. The trace is split at
    # the marker only once its address is known, so the first steps kept
    # may not be step 0: the shift is the one under which the steps' own
    # lines fall in their session's ranges (the sessions' ranges are
    # disjoint, so a wrong shift finds almost none).
    shift = max(range(k), key=lambda o: sum(
        line in asked[(i + o) % k] for i, s in enumerate(steps)
        for line in s if len(owners[line]) == 1))
    missed = collections.Counter()
    own = hit = 0
    for i, s in enumerate(steps):
        for line, at in s.items():
            if len(owners[line]) != 1:
                continue
            own += 1
            if line in asked[(i + shift) % k]:
                hit += 1
                continue
            j = bisect.bisect_right(addrs, at) - 1
            missed[names[j] if j >= 0 else hex(at)] += 1
    n = len(steps)
    print("asked for ahead: %.1f of the session's %.1f lines per step "
          "(%.0f%%; %.1f lines asked for in all)"
          % (hit / n, own / n, 100.0 * hit / max(own, 1),
             sum(len(v) for v in asked.values()) / max(len(asked), 1)))
    print("the session's lines not asked for, by function:")
    for name, c in missed.most_common(12):
        print("  %6.1f  %s" % (c / n, name))


if __name__ == "__main__":
    main()
