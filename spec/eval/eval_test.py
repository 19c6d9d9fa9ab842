#!/usr/bin/env python3
"""Tests of `ludo eval` (docs/eval.md) through the binary, as a user runs
it: output folder and results format, determinism, concurrency, refusing a
non-empty folder, resume after kill -9 (and a torn last line), shards and
merge, invalid actions, failed episodes, Ctrl-C, the progress line with and
without a terminal, run files (tasks, repeats, success function, flags over
fields, errors), and a remote run against `ludo serve`.

usage: spec/eval/eval_test.py BUILD/ludo     (from the repository root)
Prints "ok NAME" or "FAIL NAME" per test; exits 1 when any failed."""
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from urllib.request import urlopen

LUDO = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/ludo")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
os.chdir(ROOT)
ENV = dict(os.environ)
ENV.pop("LUDO_TOKEN", None)
TMP = tempfile.mkdtemp(prefix="ludo-eval-test-")
FIX = "spec/fixtures/eval"
SLOW = FIX + "/slow_policy.lua"
failures = 0


def ludo(*args, **kw):
    return subprocess.run([LUDO, *args], env=ENV, capture_output=True,
                          text=True, timeout=kw.get("timeout", 120))


def out(name):
    return os.path.join(TMP, name)


def results(d):
    with open(os.path.join(d, "results.jsonl")) as f:
        return [json.loads(line) for line in f]


def untimed(recs):
    """Records by episode without the fields that measure time."""
    keep = {}
    for r in recs:
        r = dict(r)
        r.pop("wall_ms")
        r.pop("cpu_ms")
        keep[r["episode"]] = r
    return [keep[k] for k in sorted(keep)]


def summary(d):
    with open(os.path.join(d, "summary.json")) as f:
        s = json.load(f)
    s.pop("timing", None)
    return s


def test(fn):
    global failures
    only = os.environ.get("EVAL_ONLY")  # a regex of names, to iterate
    if only and not re.search(only, fn.__name__):
        return fn
    try:
        fn()
        print("ok", fn.__name__)
    except Exception as e:  # noqa: BLE001 - any failure is the test's
        failures += 1
        print("FAIL", fn.__name__, "-", repr(e)[:2000])
    sys.stdout.flush()
    return fn


def wait_records(path, n):
    """Waits (up to a minute) until results.jsonl at path has n lines."""
    deadline = time.time() + 60
    while time.time() < deadline:
        if os.path.exists(path) and open(path).read().count("\n") >= n:
            return
        time.sleep(0.02)


def run_ok(*args):
    r = ludo(*args)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    return r


@test
def writes_the_output_folder():
    d = out("basic")
    run_ok("eval", "examples/echo", "--episodes", "6", "--seed", "3",
           "--max-steps", "4", "--out", d, "--quiet")
    names = sorted(os.listdir(d))
    assert names == [".lock", "report.html", "results.jsonl", "run.json",
                     "summary.json", "trajectories"], names
    recs = results(d)
    assert sorted(r["episode"] for r in recs) == list(range(6))
    want = {"episode", "task", "repeat", "seed", "steps", "reward",
            "rubrics", "done", "truncated", "success", "invalid_actions",
            "error", "wall_ms", "cpu_ms", "llm", "trajectory"}
    for r in recs:
        assert set(r) == want, set(r) ^ want
        assert r["steps"] == 4 and r["truncated"] and not r["done"]
        assert r["error"] is None and r["task"] is None
        assert 0 <= r["seed"] < 2 ** 53
        assert abs(r["rubrics"]["total"] - r["reward"]) < 1e-9
        assert set(r["llm"]) == {"calls", "failures", "prompt_tokens",
                                 "completion_tokens"}
        with open(os.path.join(d, r["trajectory"])) as f:
            lines = [json.loads(x) for x in f]
        assert "reset" in lines[0] and "observation" in lines[0]
        assert [x["step"] for x in lines[1:]] == [1, 2, 3, 4]
        assert abs(sum(x["reward"] for x in lines[1:]) - r["reward"]) < 1e-9
    run = json.load(open(os.path.join(d, "run.json")))
    assert run["episodes_total"] == 6 and run["seed"] == 3
    assert run["shard"] is None and run["pass_k"] == []
    assert run["policy"] == {"kind": "random"}
    assert len({r["seed"] for r in recs}) == 6


@test
def same_seed_same_results_whatever_the_concurrency():
    a, b, c = out("det-a"), out("det-b"), out("det-c")
    args = ["eval", "examples/echo", "--episodes", "12", "--seed", "9",
            "--max-steps", "5", "--quiet"]
    run_ok(*args, "--out", a, "--concurrency", "4")
    run_ok(*args, "--out", b, "--concurrency", "4")
    run_ok(*args, "--out", c, "--concurrency", "1")
    assert untimed(results(a)) == untimed(results(b))
    assert untimed(results(a)) == untimed(results(c))
    assert summary(a) == summary(c)
    for i in range(12):
        t = "trajectories/%06d.jsonl" % i
        assert open(os.path.join(a, t)).read() == \
            open(os.path.join(c, t)).read()
    d = out("det-d")
    run_ok("eval", "examples/echo", "--episodes", "12", "--seed", "10",
           "--max-steps", "5", "--quiet", "--out", d)
    assert untimed(results(a)) != untimed(results(d))


@test
def episodes_overlap_on_one_loop():
    d = out("conc")
    run_ok("eval", "examples/echo", "--policy", SLOW, "--episodes", "16",
           "--max-steps", "5", "--concurrency", "16", "--out", d, "--quiet")
    recs = results(d)
    busy = sum(r["wall_ms"] for r in recs) / 1000.0
    wall = json.load(open(os.path.join(d, "summary.json")))["timing"][
        "wall_s"]
    # Each episode waits 5 x 20 ms; one after the other they would fill
    # the run's whole wall time, concurrently they overlap many times.
    assert busy > 4 * wall, (busy, wall)
    assert all(r["cpu_ms"] < r["wall_ms"] for r in recs)


@test
def a_non_concurrent_environment_runs_one_episode_at_a_time():
    d = out("single")
    r = run_ok("eval", "spec/fixtures/serve/single", "--episodes", "5",
               "--concurrency", "4", "--max-steps", "3", "--out", d)
    assert "is not concurrent: one episode at a time" in r.stderr, r.stderr
    recs = results(d)
    assert len(recs) == 5 and all(x["error"] is None for x in recs), recs
    run = json.load(open(os.path.join(d, "run.json")))
    assert run["execution"]["concurrency"] == 1


@test
def refuses_a_non_empty_folder():
    d = out("basic")
    before = open(os.path.join(d, "results.jsonl")).read()
    r = ludo("eval", "examples/echo", "--episodes", "2", "--out", d)
    assert r.returncode == 1, r.returncode
    assert "is not empty" in r.stderr and "--resume" in r.stderr, r.stderr
    assert open(os.path.join(d, "results.jsonl")).read() == before


@test
def resume_after_kill_9_gives_the_same_summary():
    args = ["eval", "examples/echo", "--policy", SLOW, "--episodes", "60",
            "--max-steps", "6", "--seed", "4", "--quiet"]
    full, cut = out("res-full"), out("res-cut")
    run_ok(*args, "--out", full, "--concurrency", "8")
    p = subprocess.Popen([LUDO, *args, "--out", cut, "--concurrency", "8"],
                         env=ENV, stderr=subprocess.DEVNULL)
    path = os.path.join(cut, "results.jsonl")
    wait_records(path, 10)
    p.kill()
    p.wait()
    n = open(path).read().count("\n")
    assert 10 <= n < 60, n
    with open(path, "a") as f:  # a line cut short by the kill
        f.write('{"episode": 59, "task": nu')
    r = ludo(*args, "--out", cut, "--concurrency", "3", "--resume")
    assert r.returncode == 0, r.stderr
    assert "cut short" in r.stderr, r.stderr
    recs = results(cut)  # the torn line is gone, nothing twice
    assert sorted(x["episode"] for x in recs) == list(range(60))
    assert summary(cut) == summary(full)
    assert untimed(recs) == untimed(results(full))
    r = ludo(*args, "--out", cut, "--resume")  # nothing left to run
    assert r.returncode == 0 and len(results(cut)) == 60, r.stderr


def timing(d):
    with open(os.path.join(d, "summary.json")) as f:
        return json.load(f)["timing"]


def close_to(want, got):
    return abs(want - got) <= 1e-9 * max(1.0, abs(want))


@test
def throughput_after_resume_is_over_the_episodes_it_ran():
    """summary.json's timing after --resume: episodes_run and steps_run
    are the attempts the resuming process ran, and episodes_per_s divides
    them (not every record of the folder) by its wall_s; a resume with
    nothing left has no rate; merge sums the shards' and takes the
    longest wall time."""
    args = ["eval", "examples/echo", "--policy", SLOW, "--episodes", "40",
            "--max-steps", "4", "--seed", "9", "--quiet"]
    d = out("tp-resume")
    p = subprocess.Popen([LUDO, *args, "--out", d, "--concurrency", "4"],
                         env=ENV, stderr=subprocess.DEVNULL)
    path = os.path.join(d, "results.jsonl")
    wait_records(path, 8)
    p.kill()
    p.wait()
    before = len(open(path).read().splitlines())
    assert 8 <= before < 40, before
    run_ok(*args, "--out", d, "--resume")
    mine = results(d)[before:]
    t = timing(d)
    assert t["episodes_run"] == len(mine) == 40 - before, (t, before)
    assert t["steps_run"] == sum(r["steps"] for r in mine), t
    assert close_to(t["episodes_run"] / t["wall_s"], t["episodes_per_s"]), t
    assert close_to(t["steps_run"] / t["wall_s"], t["steps_per_s"]), t
    run_ok(*args, "--out", d, "--resume")  # nothing left to run
    t = timing(d)
    assert t["episodes_run"] == 0 and t["episodes_per_s"] is None, t
    assert t["steps_per_s"] is None, t
    shards = [out("tp-s%d" % i) for i in range(2)]
    for i, sd in enumerate(shards):
        run_ok(*args, "--out", sd, "--shard", "%d/2" % i)
    m = out("tp-merged")
    run_ok("eval", "merge", *shards, "--out", m)
    t, ts = timing(m), [timing(sd) for sd in shards]
    assert t["episodes_run"] == 40 == sum(x["episodes_run"] for x in ts), t
    assert t["wall_s"] == max(x["wall_s"] for x in ts), (t, ts)
    assert close_to(40 / t["wall_s"], t["episodes_per_s"]), t


@test
def resume_refuses_another_run():
    d = out("basic")
    r = ludo("eval", "examples/echo", "--episodes", "6", "--seed", "4",
             "--max-steps", "4", "--out", d, "--resume")
    assert r.returncode == 1 and "differs in: seed" in r.stderr, r.stderr


@test
def shards_merge_into_the_unsharded_run():
    args = ["eval", "examples/echo", "--episodes", "25", "--seed", "7",
            "--max-steps", "3", "--quiet"]
    whole = out("sh-whole")
    run_ok(*args, "--out", whole)
    shards = [out("sh-%d" % i) for i in range(3)]
    for i, d in enumerate(shards):
        run_ok(*args, "--out", d, "--shard", "%d/3" % i)
        eps = [r["episode"] for r in results(d)]
        assert all(e % 3 == i for e in eps) and eps, eps
    merged = out("sh-merged")
    r = run_ok("eval", "merge", *shards, "--out", merged)
    assert "25 episodes" in r.stdout, r.stdout
    assert summary(merged) == summary(whole)
    assert untimed(results(merged)) == untimed(results(whole))
    run = json.load(open(os.path.join(merged, "run.json")))
    assert run["shard"] is None
    for rec in results(merged):
        assert os.path.exists(os.path.join(merged, rec["trajectory"]))
    r = ludo("eval", "merge", shards[0], shards[1], "--out", out("sh-x"))
    assert r.returncode == 1 and "are in none of the folders" in r.stderr
    r = ludo("eval", "merge", shards[0], shards[0], shards[1], shards[2],
             "--out", out("sh-y"))
    assert r.returncode == 1 and "are both shard 0/3: the same shard " \
        "twice" in r.stderr, r.stderr
    other = out("sh-other")
    run_ok("eval", "examples/echo", "--episodes", "25", "--seed", "8",
           "--max-steps", "3", "--quiet", "--shard", "1/3", "--out", other)
    r = ludo("eval", "merge", shards[0], other, shards[2], "--out",
             out("sh-z"))
    assert r.returncode == 1 and "differs in seed" in r.stderr, r.stderr
    r = ludo("eval", "--shard", "3/3", "examples/echo")
    assert r.returncode == 2 and "--shard" in r.stderr


def echo_shards(name, n, episodes=9):
    """The folders of an echo run in n shards (TMP/name-I)."""
    args = ["eval", "examples/echo", "--episodes", str(episodes), "--seed",
            "7", "--max-steps", "2", "--quiet"]
    shards = [out("%s-%d" % (name, i)) for i in range(n)]
    for i, d in enumerate(shards):
        run_ok(*args, "--out", d, "--shard", "%d/%d" % (i, n))
    return shards


@test
def merge_says_the_shard_counts_differ():
    two, three = echo_shards("cnt-two", 2), echo_shards("cnt-three", 3)
    r = ludo("eval", "merge", two[0], three[1], "--out", out("cnt-m"))
    assert r.returncode == 1, r.stderr
    assert "is shard 0/2 and" in r.stderr and "is shard 1/3" in r.stderr \
        and "shard counts differ" in r.stderr, r.stderr
    assert "the same shard twice" not in r.stderr, r.stderr
    whole = out("cnt-whole")
    run_ok("eval", "examples/echo", "--episodes", "9", "--seed", "7",
           "--max-steps", "2", "--quiet", "--out", whole)
    r = ludo("eval", "merge", two[0], whole, "--out", out("cnt-m2"))
    assert r.returncode == 1 and "is not a shard" in r.stderr, r.stderr


def edit_record(d, line, **fields):
    """Sets fields of the record on line `line` (from 0) of d's results."""
    path = os.path.join(d, "results.jsonl")
    lines = open(path).read().splitlines()
    rec = json.loads(lines[line])
    rec.update(fields)
    lines[line] = json.dumps(rec, separators=(",", ":"))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


@test
def merge_never_follows_a_path_from_a_record():
    shards = echo_shards("mesc", 2)
    victim = out("victim")
    with open(victim, "w") as f:
        f.write("ORIGINAL")
    edit_record(shards[0], 0, trajectory="../../victim")
    merged = os.path.join(out("mesc-m"), "out")
    r = ludo("eval", "merge", *shards, "--out", merged)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "mesc-0/results.jsonl:1: episode 0: the field \"trajectory\"" \
        in r.stderr, r.stderr
    assert open(victim).read() == "ORIGINAL"
    # The record's own name again; its file a link to a file elsewhere:
    # not followed (said, not copied).
    edit_record(shards[0], 0, trajectory="trajectories/000000.jsonl")
    own = os.path.join(shards[0], "trajectories", "000000.jsonl")
    os.remove(own)
    os.symlink(victim, own)
    r = ludo("eval", "merge", *shards, "--out", merged + "2")
    assert r.returncode == 0, r.stderr
    assert "1 records point to trajectory files that are missing" in \
        r.stderr, r.stderr
    assert not os.path.exists(os.path.join(merged + "2", own[len(
        shards[0]) + 1:]))
    edit_record(shards[1], 0, trajectory="/etc/passwd")
    args = ["eval", "examples/echo", "--episodes", "9", "--seed", "7",
            "--max-steps", "2", "--quiet", "--shard", "1/2", "--resume"]
    r = ludo(*args, "--out", shards[1])
    assert r.returncode == 1 and "results.jsonl:1: episode 1: the field" \
        in r.stderr, r.stderr


@test
def merge_checks_records_as_resume_does():
    shards = echo_shards("mchk", 2)
    seed = results(shards[0])[1]["seed"]
    edit_record(shards[0], 1, seed=seed + 1)
    m = out("mchk-m")
    r = ludo("eval", "merge", *shards, "--out", m)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "mchk-0/results.jsonl:2: episode %d has seed %d, not this " \
        "run's %d" % (results(shards[0])[1]["episode"], seed + 1, seed) \
        in r.stderr, r.stderr
    edit_record(shards[0], 1, seed=seed)
    with open(os.path.join(shards[1], "results.jsonl")) as f:
        first = f.readline()
    with open(os.path.join(shards[1], "results.jsonl"), "a") as f:
        f.write(first)
    r = ludo("eval", "merge", *shards, "--out", m)
    assert r.returncode == 1, (r.returncode, r.stderr)
    want = "mchk-1/results.jsonl:5: episode %d has a final record on an " \
        "earlier line already" % json.loads(first)["episode"]
    assert want in r.stderr, r.stderr
    r = ludo("eval", "examples/echo", "--episodes", "9", "--seed", "7",
             "--max-steps", "2", "--quiet", "--shard", "1/2", "--resume",
             "--out", shards[1])
    assert r.returncode == 1 and want in r.stderr, r.stderr
    assert not os.path.exists(os.path.join(m, "results.jsonl"))


@test
def a_trajectory_that_cannot_be_written_is_null_and_the_run_exits_1():
    import resource
    d = out("fd-short")

    def few_fds():
        resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))
    args = [LUDO, "eval", "examples/echo", "--policy", SLOW, "--episodes",
            "400", "--concurrency", "350", "--max-steps", "2", "--quiet"]
    r = subprocess.run(args + ["--out", d], env=ENV, capture_output=True,
                       text=True, timeout=300, preexec_fn=few_fds)
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    assert re.search(r"warning: \d+ trajectories could not be written "
                     r"\(the first: cannot open .*trajectories/\d{6}"
                     r"\.jsonl: Too many open files\)", r.stderr), r.stderr
    recs = results(d)
    assert sorted(x["episode"] for x in recs) == list(range(400))
    lost = [x for x in recs if x["trajectory"] is None]
    assert lost and len(lost) < 400, len(lost)
    for x in recs:
        if x["trajectory"] is not None:
            assert os.path.exists(os.path.join(d, x["trajectory"])), x
        else:
            assert not os.path.exists(os.path.join(
                d, "trajectories", "%06d.jsonl" % x["episode"])), x
    html = open(os.path.join(d, "report.html")).read()
    assert "%06d.jsonl" % lost[0]["episode"] not in html
    # The records are complete: --resume has nothing to run, merge takes
    # the null trajectories as they are.
    r = ludo(*args[1:], "--out", d, "--resume")
    assert r.returncode == 0, r.stderr[-2000:]
    assert len(results(d)) == 400
    m = out("fd-short-merged")
    run_ok("eval", "merge", d, "--out", m)
    assert untimed(results(m)) == untimed(recs)
    # With worker processes, a worker's lost trajectories are not a failed
    # worker: its records are complete, no --resume is asked for.
    # (each worker runs half the concurrency: 350 each)
    d = out("fd-short-workers")
    wargs = [a if a != "350" else "700" for a in args]
    r = subprocess.run(wargs + ["--workers", "2", "--out", d], env=ENV,
                       capture_output=True, text=True, timeout=300,
                       preexec_fn=few_fds)
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    assert "could not write some trajectories (said above); its records " \
        "are complete" in r.stderr, r.stderr[-2000:]
    assert "run again with --resume" not in r.stderr, r.stderr[-2000:]
    assert sorted(x["episode"] for x in results(d)) == list(range(400))


@test
def invalid_actions_are_recorded_not_fatal():
    d = out("invalid")
    run_ok("eval", "examples/echo", "--policy", FIX + "/invalid_policy.lua",
           "--episodes", "3", "--max-steps", "6", "--out", d, "--quiet",
           "--concurrency", "1")
    actions = []
    for r in results(d):
        assert r["error"] is None and r["steps"] == 6, r
        assert r["invalid_actions"] == 3, r
        lines = [json.loads(x) for x in open(os.path.join(d,
                                                          r["trajectory"]))]
        assert len(lines) == 1 + 6, lines  # the reset and every step
        bad = [x for x in lines[1:] if x.get("invalid")]
        assert len(bad) == 3, bad
        assert all("ESCHEMA" in x["error"] for x in bad), bad
        actions += [x["action"] for x in bad]
    # a refused action is kept as the policy gave it, a table or not
    assert {"message": 5} in actions and 42 in actions, actions


def lua_tostring(r):
    """What Lua's tostring says of the number %.17g writes for r."""
    if r == int(r) and abs(r) < 1e17:
        return "%d|integer" % int(r)
    s = "%.14g" % r
    return (s + ".0" if re.fullmatch(r"-?\d+", s) else s) + "|float"


@test
def the_policy_gets_the_reward_and_its_first_value_is_the_action():
    """context.reward is the last step's reward as %.17g writes it (an
    integer when integral: the runner makes it without printf when it
    can), and a policy's second return value is not part of its action."""
    d = out("reward-context")
    run_ok("eval", "examples/echo", "--policy",
           FIX + "/reward_policy.lua", "--episodes", "2", "--max-steps",
           "9", "--out", d, "--quiet")
    kinds = set()
    for rec in results(d):
        assert rec["invalid_actions"] == 0 and rec["error"] is None, rec
        with open(os.path.join(d, rec["trajectory"])) as f:
            lines = [json.loads(x) for x in f][1:]
        said = [x["action"]["message"].rstrip("x") for x in lines]
        assert said[0] == "nil|nil|", said
        for prev, now in zip(lines, said[1:]):
            assert now == lua_tostring(prev["reward"]) + "|", (prev, now)
            kinds.add(now.split("|")[1])
    assert kinds == {"integer", "float"}, kinds


@test
def a_result_the_walk_gives_up_on_still_reaches_the_policy_whole():
    """A rubric name with a quote makes the runner read the result with
    jansson: the policy then decodes the whole result itself, and gets
    the same observation and context.result."""
    d = out("escaped-keys")
    run_ok("eval", FIX + "/escaped_keys", "--policy",
           FIX + "/next_policy.lua", "--episodes", "2", "--max-steps", "4",
           "--out", d, "--quiet")
    for rec in results(d):
        assert rec["error"] is None and rec["steps"] == 4, rec
        assert rec["rubrics"]['say "hi"'] == 4.0, rec["rubrics"]
        with open(os.path.join(d, rec["trajectory"])) as f:
            lines = [json.loads(x) for x in f]
        assert [x["action"]["n"] for x in lines[1:]] == [1, 2, 3, 4], lines


def lua_number(v):
    """Lua's tostring of a JSON number as ludo decodes it (the text's kind
    kept: 1 an integer, 1.0 a float), for one Python's json read."""
    if isinstance(v, int):
        return str(v)
    s = "%.14g" % v
    return s + ".0" if re.fullmatch(r"-?\d+", s) else s


@test
def a_policy_reads_the_whole_result_in_its_context():
    """context.result is decoded when the policy first reads it (by index
    or through pairs): the step's whole result, its observation the table
    the policy got. The policy writes what it read into its action."""
    d = out("result-context")
    run_ok("eval", "examples/echo", "--policy", FIX + "/result_policy.lua",
           "--episodes", "2", "--max-steps", "5", "--concurrency", "2",
           "--out", d, "--quiet")
    for rec in results(d):
        assert rec["error"] is None and rec["steps"] == 5, rec
        with open(os.path.join(d, rec["trajectory"])) as f:
            lines = [json.loads(x) for x in f]
        for prev, now in zip(lines, lines[1:]):
            total = prev.get("metadata", {}).get("rubrics", {}).get("total")
            want = "%d|%s|%s" % (prev["observation"]["message_length"],
                                 lua_number(prev["reward"]),
                                 "none" if total is None
                                 else lua_number(total))
            assert now["action"]["message"] == want, (prev, now)


@test
def whole_rewards_past_2_53_reach_the_policy_as_integers():
    """From 2^53 to 1e17 a whole reward is written by ludo with an
    exponent (1e+16) but %.17g writes it as an integer: the policy's
    context.reward is an integer there, a float from 1e17 on."""
    d = out("big-rewards")
    run_ok("eval", FIX + "/big_rewards", "--policy",
           FIX + "/reward_policy.lua", "--episodes", "1", "--max-steps",
           "12", "--out", d, "--quiet")
    rec = results(d)[0]
    assert rec["error"] is None and rec["steps"] == 12, rec
    with open(os.path.join(d, rec["trajectory"])) as f:
        lines = [json.loads(x) for x in f][1:]
    said = [x["action"]["message"].rstrip("x") for x in lines]
    for prev, now in zip(lines, said[1:]):
        assert now == lua_tostring(prev["reward"]) + "|", (prev, now)
    assert said[1] == "10000000000000000|integer|", said
    assert said[5] == "1e+17|float|", said


@test
def a_failing_policy_fails_its_episode_only():
    d = out("raising")
    run_ok("eval", "examples/echo", "--policy", FIX + "/raising_policy.lua",
           "--episodes", "3", "--out", d, "--quiet")
    for rec in results(d):
        assert rec["error"]["class"] == "ESCRIPT", rec
        assert "this policy gives up" in rec["error"]["message"]
        assert rec["steps"] == 2 and rec["success"] is False
    assert summary(d)["errors"] == {"ESCRIPT": 3}, summary(d)


@test
def a_failed_episode_s_trajectory_ends_saying_why():
    d = out("raising-traj")
    run_ok("eval", "examples/echo", "--policy", FIX + "/raising_policy.lua",
           "--episodes", "2", "--out", d, "--quiet")
    for rec in results(d):
        lines = [json.loads(x) for x in open(os.path.join(
            d, rec["trajectory"]))]
        assert [x.get("step") for x in lines[1:-1]] == [1, 2], lines
        assert lines[-1] == {"end": "error", "steps": 2,
                             "error": rec["error"]}, lines[-1]
    d = out("fine-traj")  # a finished episode has no such line
    run_ok("eval", "examples/echo", "--episodes", "2", "--max-steps", "2",
           "--out", d, "--quiet")
    for rec in results(d):
        lines = [json.loads(x) for x in open(os.path.join(
            d, rec["trajectory"]))]
        assert all("end" not in x for x in lines), lines


@test
def ctrl_c_cancels_and_writes_the_summary():
    d = out("sigint")
    p = subprocess.Popen([LUDO, "eval", "examples/echo", "--policy", SLOW,
                          "--episodes", "500", "--max-steps", "10",
                          "--concurrency", "6", "--out", d, "--quiet"],
                         env=ENV, stderr=subprocess.PIPE, text=True)
    path = os.path.join(d, "results.jsonl")
    wait_records(path, 6)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, (p.returncode, err)
    recs = results(d)
    cancelled = [r for r in recs if r["error"] and
                 r["error"]["class"] == "ECANCELED"]
    assert 1 <= len(cancelled) <= 6, len(cancelled)
    assert len(recs) < 500
    s = json.load(open(os.path.join(d, "summary.json")))
    assert s["episodes"]["cancelled"] == len(cancelled), s
    assert "ECANCELED" not in s["errors"], s
    assert os.path.exists(os.path.join(d, "report.html"))
    # --resume runs the cancelled episodes again.
    r = ludo("eval", "examples/echo", "--policy", SLOW, "--episodes", "500",
             "--max-steps", "10", "--concurrency", "6", "--out", d,
             "--quiet", "--resume", "--episodes", "500")
    assert r.returncode == 0, r.stderr
    again = {x["episode"] for x in results(d)[len(recs):]}
    assert {x["episode"] for x in cancelled} <= again
    assert summary(d)["episodes"]["cancelled"] == 0, summary(d)


@test
def progress_line_on_a_terminal():
    d = out("tty")
    cmd = " ".join([LUDO, "eval", "examples/echo", "--policy", SLOW,
                    "--episodes", "40", "--max-steps", "10",
                    "--concurrency", "4", "--out", d])
    r = subprocess.run(["script", "-qec", cmd, "/dev/null"], env=ENV,
                       capture_output=True, timeout=120)
    text = r.stdout.decode()
    assert r.returncode == 0, text[-500:]
    # One line rewritten in place: \r, the line, clear to its end.
    assert re.search(r"\r40/40 episodes +[0-9.]+/s +ETA \S+ +mean reward "
                     r"[0-9.]+ +errors 0\x1b\[K", text), repr(text[-300:])
    assert len(re.findall(r"\r\d+/40 episodes", text)) >= 2, repr(text)
    assert "ludo eval:" not in text


@test
def progress_lines_without_a_terminal_and_quiet():
    d = out("notty")
    r = run_ok("eval", "examples/echo", "--episodes", "5", "--out", d)
    assert "\r" not in r.stderr
    assert re.search(r"^ludo eval: 5/5 episodes .* errors 0$", r.stderr,
                     re.M), r.stderr
    r = run_ok("eval", "examples/echo", "--episodes", "5", "--out",
               out("quiet"), "--quiet")
    assert r.stderr == "", r.stderr


@test
def run_file_tasks_repeats_and_success_function():
    d = out("arith")
    run_ok("eval", FIX + "/arith_run.lua", "--out", d, "--quiet")
    recs = untimed(results(d))
    assert len(recs) == 15
    assert [x["task"] for x in recs[:4]] == ["test-0"] * 3 + ["test-1"]
    assert [x["repeat"] for x in recs[:4]] == [0, 1, 2, 0]
    for x in recs:
        assert x["reward"] == 1.0 and x["done"]
        assert x["success"] == (x["task"] != "test-1"), x
    run = json.load(open(os.path.join(d, "run.json")))
    assert run["tasks"] == {"split": "test"} and run["repeats"] == 3
    assert run["pass_k"] == [1, 2] and run["success"]["kind"] == "function"
    # A flag overrides the run file's field.
    d2 = out("arith-flags")
    run_ok("eval", FIX + "/arith_run.lua", "--out", d2, "--quiet",
           "--repeats", "1")
    assert len(results(d2)) == 5


@test
def run_file_task_ids_from_any_split():
    d = out("arith-ids")
    run_ok("eval", FIX + "/arith_ids_run.lua", "--out", d, "--quiet")
    recs = untimed(results(d))
    assert [x["task"] for x in recs] == ["test-3", "train-7", "test-0"]
    assert all(x["reward"] == 1.0 for x in recs), recs
    first = json.loads(open(os.path.join(d, recs[1]["trajectory"]))
                       .readline())
    assert first["reset"]["split"] == "train", first
    assert first["reset"]["index"] == 7 and first["observation"]["id"] == \
        "train-7", first
    r = ludo("eval", FIX + "/arith_badid_run.lua", "--out", out("badid"))
    assert r.returncode == 1, r.returncode
    assert "no task 'test-99' in split test" in r.stderr, r.stderr


@test
def run_file_errors_say_what_is_wrong():
    cases = [
        ("bad_field_run.lua", "polcy is not a field of a run file"),
        ("key_run.lua", "never put a key in a run file"),
        ("repeats_episodes_run.lua", "repeats needs tasks"),
    ]
    for name, want in cases:
        r = ludo("eval", FIX + "/" + name, "--out", out("bad-" + name))
        assert r.returncode == 1, (name, r.returncode)
        assert want in r.stderr, (name, r.stderr)
        assert not os.path.exists(out("bad-" + name))
    r = ludo("eval", "examples/echo", "--policy", FIX + "/nosuch.lua",
             "--out", out("bad-policy"))
    assert r.returncode == 1 and "nosuch" in r.stderr, r.stderr


@test
def a_success_function_must_answer_true_or_false():
    # "maybe" used to count as a success; now the record fails, saying why
    d = out("success-maybe")
    run_ok("eval", FIX + "/success_maybe_run.lua", "--out", d, "--quiet")
    for rec in results(d):
        assert rec["success"] is False, rec
        assert rec["error"]["class"] == "ESCRIPT", rec
        assert "success(result) must return true or false, got string" in \
            rec["error"]["message"], rec


@test
def remote_run_against_ludo_serve():
    p = subprocess.Popen([LUDO, "serve", "examples/echo", "--port", "0"],
                         stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        m = re.search(r"http://[^:]+:(\d+)", p.stderr.readline())
        url = "ws://127.0.0.1:%s/ws" % m.group(1)
        remote, local = out("remote"), out("remote-local")
        args = ["--episodes", "8", "--seed", "2", "--max-steps", "4",
                "--quiet", "--policy", FIX + "/invalid_policy.lua",
                "--concurrency", "1"]
        run_ok("eval", url, *args, "--out", remote)
        run_ok("eval", "examples/echo", *args, "--out", local)
        a, b = untimed(results(remote)), untimed(results(local))
        assert len(a) == 8 and a == b, (a[:1], b[:1])
        # the policy saw the same observations: no metadata nested in
        # them by the wire form (a refusal's words are the server's)
        def traj(d, r):
            lines = [json.loads(x) for x in open(os.path.join(
                d, r["trajectory"]))]
            for x in lines:
                if x.get("invalid"):
                    x.pop("error")
            return lines
        for r in a:
            ta, tb = traj(remote, r), traj(local, r)
            assert ta == tb, (ta[:2], tb[:2])
        run = json.load(open(os.path.join(remote, "run.json")))
        assert run["env"] == url
    finally:
        p.terminate()
        p.wait()


def serve_echo(port="0"):
    """`ludo serve examples/echo` on `port`; returns (process, port)."""
    p = subprocess.Popen([LUDO, "serve", "examples/echo", "--port", port],
                         stderr=subprocess.PIPE, text=True, env=ENV)
    m = re.search(r"http://[^:]+:(\d+)", p.stderr.readline())
    return p, m.group(1)


@test
def a_server_outage_loses_episodes_then_resume_runs_them():
    """A server that dies mid-run: its episodes end ECONNECT or
    EDISCONNECTED, which are not failed attempts (summary: episodes.lost,
    not errors, not in the success rate); the run says to --resume and
    exits 75; a resume once the server is back completes the run."""
    p, port = serve_echo()
    url = "ws://127.0.0.1:%s/ws" % port
    d = out("outage")
    args = ["eval", url, "--policy", SLOW, "--episodes", "40",
            "--max-steps", "5", "--seed", "3", "--concurrency", "2",
            "--out", d]
    try:
        run = subprocess.Popen([LUDO, *args], env=ENV, text=True,
                               stderr=subprocess.PIPE)
        wait_records(os.path.join(d, "results.jsonl"), 4)
    finally:
        p.kill()
        p.wait()
    err = run.communicate(timeout=120)[1]
    assert run.returncode == 75, (run.returncode, err)
    assert "lost to a server outage" in err and "--resume" in err, err
    s = json.load(open(os.path.join(d, "summary.json")))
    lost = sum(1 for r in results(d)
               if r["error"] and r["error"]["class"] in
               ("ECONNECT", "EDISCONNECTED"))
    assert lost > 0 and s["episodes"]["lost"] == lost, (lost, s)
    assert "ECONNECT" not in s["errors"], s["errors"]
    assert "EDISCONNECTED" not in s["errors"], s["errors"]
    ep = s["episodes"]
    assert s["success"]["n"] == ep["finished"] + ep["failed"], s
    assert ep["missing"] == 40 - ep["finished"] - ep["failed"], ep
    p, _ = serve_echo(port)  # back on the same port
    try:
        r = ludo(*args, "--resume", "--quiet")
    finally:
        p.terminate()
        p.wait()
    assert r.returncode == 0, (r.returncode, r.stderr)
    s = json.load(open(os.path.join(d, "summary.json")))
    assert s["episodes"]["lost"] == 0, s["episodes"]
    assert s["episodes"]["finished"] + s["episodes"]["failed"] == 40, s


@test
def rubric_sums_count_only_the_steps_a_rubric_scored_in():
    """A rubric that did not run in a step (a Sequential stopped before
    it) is null in that step's metadata.rubrics, not its previous score,
    and adds nothing to the record's sum; one that never scored has no
    value in the record (not 0) and no statistics in the summary."""
    d = out("some-steps")
    run_ok("eval", FIX + "/some_steps", "--policy", FIX + "/step_policy.lua",
           "--episodes", "3", "--max-steps", "4", "--out", d, "--quiet")
    for r in results(d):
        assert r["rubrics"]["seq.second"] == 2.0, r["rubrics"]  # steps 1, 3
        assert r["rubrics"]["seq.odd"] == 2.0, r["rubrics"]
        assert "gate.never" not in r["rubrics"], r["rubrics"]
        assert r["rubrics"]["gate.closed"] == 0.0, r["rubrics"]
        lines = [json.loads(x) for x in open(os.path.join(d,
                                                          r["trajectory"]))]
        seconds = [x["metadata"]["rubrics"]["seq.second"] for x in lines[1:]]
        assert seconds == [None, 1.0, None, 1.0], seconds
    s = summary(d)
    assert "gate.never" not in s["rubrics"], s["rubrics"]
    assert s["rubrics"]["seq.second"]["mean"] == 2.0, s["rubrics"]


def sessions_closed(base, timeout=20.0):
    """Waits until the server at `base` has no session open (/metrics)."""
    end = time.time() + timeout
    while True:
        text = urlopen(base + "/metrics").read().decode()
        if re.search(r"^ludo_sessions_open 0$", text, re.M):
            return
        assert time.time() < end, "sessions still open:\n" + text[:300]
        time.sleep(0.05)


@test
def a_server_at_capacity_loses_episodes_then_resume_runs_them():
    """A server refusing sessions over its --max-sessions (ECAPACITY) is
    the server's refusal, not the policy's failure: those episodes are
    lost, as in an outage (not errors, not in the success rate, exit 75),
    and a resume at a concurrency the server takes completes the run."""
    p = subprocess.Popen([LUDO, "serve", "examples/echo", "--port", "0",
                          "--max-sessions", "2"], stderr=subprocess.PIPE,
                         text=True, env=ENV)
    try:
        m = re.search(r"http://[^:]+:(\d+)", p.stderr.readline())
        d = out("capacity")
        args = ["eval", "ws://127.0.0.1:%s/ws" % m.group(1), "--policy",
                SLOW, "--episodes", "24", "--max-steps", "3", "--out", d,
                "--quiet"]
        r = ludo(*args, "--concurrency", "8")
        assert r.returncode == 75, (r.returncode, r.stderr)
        s = json.load(open(os.path.join(d, "summary.json")))
        refused = [x for x in results(d) if x["error"] and
                   x["error"]["class"] == "ECAPACITY"]
        assert refused and s["episodes"]["lost"] == len(refused), s
        assert s["errors"] == {}, s["errors"]
        assert s["success"]["n"] == s["episodes"]["finished"], s
        # The first run's sessions close on the server once it reads their
        # connections' ends: wait for that, or the resume may find them
        # still counted against --max-sessions (a loaded host).
        sessions_closed("http://127.0.0.1:%s" % m.group(1))
        r = ludo(*args, "--concurrency", "2", "--resume")
        assert r.returncode == 0, (r.returncode, r.stderr)
        s = json.load(open(os.path.join(d, "summary.json")))
        assert s["episodes"]["lost"] == 0, s["episodes"]
        assert s["episodes"]["finished"] == 24, s["episodes"]
    finally:
        p.terminate()
        p.wait()


def write(name, text):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def non_finite_episodes(fixture, cls, message):
    """Runs 2 episodes of `fixture`: each fails with `cls` and `message`,
    the run goes on, and the summary counts them."""
    d = out(fixture)
    run_ok("eval", FIX + "/" + fixture, "--episodes", "2", "--max-steps",
           "4", "--out", d, "--quiet")
    recs = results(d)
    assert len(recs) == 2, recs
    for r in recs:
        assert r["error"]["class"] == cls, r
        assert message in r["error"]["message"], r
        assert r["success"] is False, r
    assert summary(d)["errors"] == {cls: 2}, summary(d)
    return d


@test
def a_reward_sum_that_overflows_fails_the_episode_only():
    d = non_finite_episodes("huge_reward", "EVALUE",
                            "step 2's reward sum is not a finite number")
    r = ludo("eval", FIX + "/huge_reward", "--episodes", "2", "--max-steps",
             "4", "--out", d, "--quiet", "--resume")
    assert r.returncode == 0, r.stderr


@test
def a_nan_reward_fails_the_episode_not_counted_as_zero():
    non_finite_episodes("nan_reward", "ESCRIPT", "observation.reward must "
                        "be a finite number or nil, got nan")


@test
def a_step_refused_at_once_keeps_its_error_class():
    d = out("big-action")
    run_ok("eval", "examples/echo", "--policy",
           FIX + "/big_action_policy.lua", "--episodes", "1", "--out", d,
           "--quiet")
    err = results(d)[0]["error"]
    assert err["class"] == "ETOOBIG", err
    assert err["message"].startswith("ETOOBIG"), err


@test
def an_empty_out_is_a_usage_error():
    r = ludo("eval", "examples/echo", "--episodes", "1", "--out", "")
    assert r.returncode == 2 and "--out" in r.stderr, r.stderr
    r = ludo("eval", "merge", out("basic"), "--out", "")
    assert r.returncode == 2 and "--out" in r.stderr, r.stderr
    run = write("emptyout_run.lua", 'return { env = %s, out = "" }'
                % json.dumps(os.path.join(ROOT, "examples/echo")))
    r = ludo("eval", run)
    assert r.returncode == 1 and "out must be" in r.stderr, r.stderr


@test
def run_file_field_errors_are_one_clear_line():
    echo = json.dumps(os.path.join(ROOT, "examples/echo"))
    cases = [
        ('episodes = "3"', 'episodes must be a whole number (got the '
         'string "3")'),
        ("seed = 2^53", "seed must be a whole number from 0 to 2^53 - 1 "
         "(got 9007199254740992)"),
        ("success = math.huge", "success must be a finite reward threshold"),
        ("success = 0/0", "success must be a finite reward threshold"),
        ('tasks = { "te\\0st" }', "tasks[1] holds a NUL byte"),
        ('tasks = { split = "te\\0st" }', "fields cannot be read"),
    ]
    for i, (field, want) in enumerate(cases):
        run = write("field%d_run.lua" % i,
                    "return { env = %s, %s }" % (echo, field))
        r = ludo("eval", run, "--out", out("field%d" % i))
        assert r.returncode == 1, (field, r.returncode)
        assert want in r.stderr, (field, r.stderr)
        assert r.stderr.count("\n") == 1, (field, r.stderr)
    r = ludo("eval", os.path.join(TMP, "nosuch_run.lua"))
    assert r.returncode == 1 and "run file" in r.stderr and \
        "does not exist" in r.stderr, r.stderr
    r = ludo("eval", "examples/echo", "--shard", "3/3")
    assert r.returncode == 2 and "(got '3/3')" in r.stderr, r.stderr
    # I/N as two plain decimal numbers: no sign, space or leading zero
    for bad in (" 1/2", "+1/2", "01/2", "1/ 2", "1/2x", "-1/2", "1/0"):
        r = ludo("eval", "examples/echo", "--shard", bad)
        assert r.returncode == 2 and "(got '%s')" % bad in r.stderr, \
            (bad, r.stderr)
    r = ludo("eval", "examples/echo", "--shard", "0/2000000")
    assert r.returncode == 2 and "at most 1000000 shards" in r.stderr, \
        r.stderr


@test
def run_json_names_code_by_absolute_path_and_digest():
    # two folders, each with an env "e" and a policy "p.lua" of its own
    root = out("code-id")
    for sub, steps in (("a", 3), ("b", 1)):
        os.makedirs(os.path.join(root, sub, "e"))
        write(os.path.join("code-id", sub, "e", "env.lua"),
              "local env = {name = 'e', concurrent = true, action = "
              "{x = 'integer'}}\nlocal n = 0\nfunction env.reset() n = 0 "
              "return {t = 0} end\nfunction env.step() n = n + 1 return "
              "{t = n, reward = 1, done = n >= %d} end\nreturn env\n" % steps)
        write(os.path.join("code-id", sub, "p.lua"),
              "return function() return {x = 1} end\n")
    d = out("code-id-out")
    args = ["eval", "e", "--policy", "p.lua", "--episodes", "6", "--out", d,
            "--quiet"]

    def run_in(sub, *more):
        return subprocess.run([LUDO, *args, *more], env=ENV, text=True,
                              capture_output=True, timeout=120,
                              cwd=os.path.join(root, sub))
    r = run_in("a")
    assert r.returncode == 0, r.stderr
    run = json.load(open(os.path.join(d, "run.json")))
    assert run["env"] == os.path.realpath(os.path.join(root, "a", "e"))
    assert run["policy"]["file"] == os.path.realpath(
        os.path.join(root, "a", "p.lua"))
    assert run["code"]["env"].startswith("fnv1a64:"), run["code"]
    # the same names from another folder are other code: refused
    r = run_in("b", "--resume")
    assert r.returncode == 1 and "differs in: code, env, policy" in \
        r.stderr, r.stderr
    # the same code named from elsewhere is the same run
    r = subprocess.run([LUDO, "eval", os.path.join(root, "a", "e"),
                        "--policy", "a/p.lua", "--episodes", "6", "--out", d,
                        "--quiet", "--resume"], env=ENV, text=True,
                       capture_output=True, timeout=120, cwd=root)
    assert r.returncode == 0, r.stderr
    # an edit at the same path is another run
    with open(os.path.join(root, "a", "p.lua"), "a") as f:
        f.write("-- edited\n")
    r = run_in("a", "--resume")
    assert r.returncode == 1 and "differs in: code" in r.stderr, r.stderr


@test
def an_edit_of_a_module_the_policy_requires_is_another_run():
    """code.policy covers the Lua files of the policy's folder (what its
    require loads), not the policy file alone; an output folder inside it
    or an empty folder made there is no edit."""
    root = out("req-code")
    os.makedirs(os.path.join(root, "lib"))
    write("req-code/helper.lua", "return {x = 1}\n")
    write("req-code/lib/more.lua", "return 2\n")
    pol = write("req-code/p.lua", "local h = require('helper')\n"
                "local m = require('lib.more')\n"
                "return function() return {x = h.x + m} end\n")
    d = os.path.join(root, "out")  # inside the policy's folder
    args = ["eval", "examples/echo", "--policy", pol, "--episodes", "4",
            "--max-steps", "2", "--out", d, "--quiet"]
    run_ok(*args)
    os.makedirs(os.path.join(root, "empty", "sub"))
    run_ok(*args, "--resume")
    for name in ("helper.lua", "lib/more.lua"):
        path = os.path.join(root, name)
        text = open(path).read()
        with open(path, "a") as f:
            f.write("-- edited\n")
        r = ludo(*args, "--resume")
        assert r.returncode == 1 and "differs in: code" in r.stderr, \
            (name, r.stderr)
        assert "policy's Lua files were edited" in r.stderr, r.stderr
        with open(path, "w") as f:
            f.write(text)
    run_ok(*args, "--resume")
    # a shard run after the edit does not merge with one from before
    s0, s1 = out("req-code-s0"), out("req-code-s1")
    run_ok(*args[:-3], "--out", s0, "--shard", "0/2")
    with open(os.path.join(root, "helper.lua"), "a") as f:
        f.write("-- edited\n")
    run_ok(*args[:-3], "--out", s1, "--shard", "1/2")
    r = ludo("eval", "merge", s0, s1, "--out", out("req-code-m"))
    assert r.returncode == 1 and "differs in code" in r.stderr, r.stderr


LLM_EDIT_RUN = """
return {
  env = %(env)s, episodes = 2, max_steps = 1, concurrency = 1,
  policy = {
    llm = { base_url = "http://127.0.0.1:1/v1", model = "m", retries = 0 },
    prompt = function(observation)
      return { { role = "user", content = "q" } }
    end,
    parse = function(text) return { text = text } end,
  },
}
"""


@test
def an_edit_of_an_llm_policy_in_the_run_file_is_another_run():
    """An LLM policy's prompt and parse are the run file's code: run.json's
    code.policy is the digest of its folder's Lua files."""
    os.makedirs(out("llm-edit"), exist_ok=True)
    rf = write("llm-edit/run.lua", LLM_EDIT_RUN % {
        "env": json.dumps(os.path.join(ROOT, "examples/echo"))})
    d = out("llm-edit-out")
    run_ok("eval", rf, "--out", d)  # the episodes fail (ELLM): no server
    run = json.load(open(os.path.join(d, "run.json")))
    assert run["code"]["policy"].startswith("fnv1a64:"), run["code"]
    run_ok("eval", rf, "--out", d, "--resume")
    text = open(rf).read()
    with open(rf, "w") as f:
        f.write(text.replace("{ text = text }", "{ text = text .. '!' }"))
    r = ludo("eval", rf, "--out", d, "--resume")
    assert r.returncode == 1 and "differs in: code" in r.stderr, r.stderr
    write("llm-edit/run.lua", text)
    write("llm-edit/helpers.lua", "return {}\n")  # a module it may require
    r = ludo("eval", rf, "--out", d, "--resume")
    assert r.returncode == 1 and "differs in: code" in r.stderr, r.stderr


SUCCESS_EDIT_RUN = """
return {
  env = %(env)s, episodes = 2, max_steps = 2, concurrency = 1,
  policy = %(policy)s,
  success = function(result) return result.reward > 0 end,
}
"""


@test
def an_edit_of_a_success_function_is_another_run():
    """A Lua policy's code is its own folder's, not the run file's: the
    success function there has its own digest (run.json's success.code),
    over the run file's folder's Lua files."""
    os.makedirs(out("success-edit"), exist_ok=True)
    rf = write("success-edit/run.lua", SUCCESS_EDIT_RUN % {
        "env": json.dumps(os.path.join(ROOT, "examples/echo")),
        "policy": json.dumps(os.path.join(ROOT, "examples/echo/policy.lua"))})
    d = out("success-edit-out")
    run_ok("eval", rf, "--out", d, "--quiet")
    run = json.load(open(os.path.join(d, "run.json")))
    assert run["success"]["kind"] == "function", run["success"]
    assert run["success"]["code"].startswith("fnv1a64:"), run["success"]
    run_ok("eval", rf, "--out", d, "--resume", "--quiet")
    text = open(rf).read()
    with open(rf, "w") as f:
        f.write(text.replace("result.reward > 0", "result.reward > 1"))
    r = ludo("eval", rf, "--out", d, "--resume", "--quiet")
    assert r.returncode == 1 and "differs in: success" in r.stderr, r.stderr
    write("success-edit/run.lua", text)
    run_ok("eval", rf, "--out", d, "--resume", "--quiet")
    write("success-edit/rules.lua", "return {}\n")  # it may require it
    r = ludo("eval", rf, "--out", d, "--resume", "--quiet")
    assert r.returncode == 1 and "differs in: success" in r.stderr, r.stderr


@test
def episodes_flag_and_run_file_tasks_conflict():
    """--episodes with a run file's tasks: the flag's mistake, a usage
    error (exit 2, as docs/eval.md says of flags), as --repeats without
    tasks is."""
    r = ludo("eval", FIX + "/arith_run.lua", "--episodes", "5", "--out",
             out("ep-tasks"))
    assert r.returncode == 2, r.returncode
    assert "give tasks or episodes, not both" in r.stderr, r.stderr
    assert not os.path.exists(os.path.join(out("ep-tasks"),
                                           "results.jsonl"))


@test
def a_plan_too_big_for_one_process_asks_for_shards():
    r = ludo("eval", "examples/echo", "--episodes", "100000000", "--out",
             out("huge-plan"), "--quiet")
    assert r.returncode == 1, r.returncode
    assert "split it with --shard I/N" in r.stderr, r.stderr
    # one shard of it plans its own episodes only, and starts at once
    d = out("huge-plan-shard")
    p = subprocess.Popen([LUDO, "eval", "examples/echo", "--episodes",
                          "100000000", "--shard", "7/1000", "--out", d,
                          "--quiet", "--concurrency", "1"], env=ENV)
    deadline = time.time() + 20
    while time.time() < deadline and not (
            os.path.exists(os.path.join(d, "results.jsonl")) and
            os.path.getsize(os.path.join(d, "results.jsonl")) > 0):
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=30) == 130
    recs = results(d)
    assert recs and all(r["episode"] % 1000 == 7 for r in recs), recs[:2]


def rewrite_error(d, episodes, cls):
    """Appends records of `episodes` failed with error class `cls` (as a
    later run would have written them: the last record counts)."""
    recs = {r["episode"]: r for r in results(d)}
    with open(os.path.join(d, "results.jsonl"), "a") as f:
        for ep in episodes:
            r = dict(recs[ep])
            r["error"] = {"class": cls, "message": cls + ": lost"}
            r["success"] = False
            f.write(json.dumps(r, separators=(",", ":")) + "\n")


ECHO3 = ["eval", "examples/echo", "--episodes", "10", "--seed", "5",
         "--max-steps", "3", "--quiet"]


@test
def resume_reruns_episodes_the_transport_lost():
    whole, d = out("tr-whole"), out("tr-lost")
    run_ok(*ECHO3, "--out", whole)
    run_ok(*ECHO3, "--out", d)
    rewrite_error(d, [2], "ECONNECT")
    rewrite_error(d, [5], "EDISCONNECTED")
    run_ok(*ECHO3, "--out", d, "--resume")
    again = [x["episode"] for x in results(d)[12:]]
    assert sorted(again) == [2, 5], again
    assert summary(d) == summary(whole)
    assert untimed(results(d)) == untimed(results(whole))
    # The policy's error is final (a record edited in place: a second
    # final record of an episode is refused).
    line = [x["episode"] for x in results(d)].index(7)
    edit_record(d, line, error={"class": "ETIMEOUT", "message": "late"})
    run_ok(*ECHO3, "--out", d, "--resume")
    assert len(results(d)) == 14
    recs = {x["episode"]: x for x in results(d)}
    assert recs[7]["error"]["class"] == "ETIMEOUT", recs[7]


@test
def merge_refuses_cancelled_episodes():
    args = ECHO3 + ["--shard"]
    a, b = out("mc-0"), out("mc-1")
    run_ok(*args, "0/2", "--out", a)
    run_ok(*args, "1/2", "--out", b)
    rewrite_error(b, [3], "ECANCELED")
    r = ludo("eval", "merge", a, b, "--out", out("mc-merged"))
    assert r.returncode == 1, r.returncode
    assert "unfinished: --resume it" in r.stderr and b in r.stderr, r.stderr
    assert not os.path.exists(os.path.join(out("mc-merged"),
                                            "results.jsonl"))


@test
def resume_refuses_records_of_another_run():
    d, other = out("foreign"), out("foreign-6")
    run_ok(*ECHO3, "--out", d)
    run_ok("eval", "examples/echo", "--episodes", "10", "--seed", "6",
           "--max-steps", "3", "--quiet", "--out", other)
    with open(os.path.join(other, "results.jsonl")) as f:
        line = f.readline()
    with open(os.path.join(d, "results.jsonl"), "a") as f:
        f.write(line)
    r = ludo(*ECHO3, "--out", d, "--resume")
    assert r.returncode == 1, r.returncode
    assert "results.jsonl:11: episode 0 has seed" in r.stderr, r.stderr
    d2 = out("foreign-range")
    run_ok(*ECHO3, "--out", d2)
    rec = results(d2)[0]
    rec["episode"] = 500
    with open(os.path.join(d2, "results.jsonl"), "a") as f:
        f.write(json.dumps(rec) + "\n")
    r = ludo(*ECHO3, "--out", d2, "--resume")
    assert r.returncode == 1, r.returncode
    assert "results.jsonl:11: episode 500 is not one of this run's" in \
        r.stderr, r.stderr


@test
def a_folder_a_failed_setup_left_is_taken_over():
    d = out("failed-setup")
    r = ludo(*ECHO3, "--out", d, "--policy", FIX + "/nosuch.lua")
    assert r.returncode == 1, r.stderr
    r = run_ok(*ECHO3, "--out", d)  # the corrected command
    assert len(results(d)) == 10


@test
def resume_without_run_json_says_so():
    d = out("no-run-json")
    run_ok(*ECHO3, "--out", d)
    os.remove(os.path.join(d, "run.json"))
    r = ludo(*ECHO3, "--out", d, "--resume")
    assert r.returncode == 1, r.returncode
    assert "run.json is missing" in r.stderr, r.stderr


@test
def one_process_per_output_folder():
    d = out("locked")
    p = subprocess.Popen([LUDO, "eval", "examples/echo", "--policy", SLOW,
                          "--episodes", "500", "--max-steps", "10",
                          "--out", d, "--quiet"], env=ENV)
    try:
        path = os.path.join(d, "results.jsonl")
        deadline = time.time() + 60
        while time.time() < deadline and not os.path.exists(path):
            time.sleep(0.02)
        r = ludo("eval", "examples/echo", "--policy", SLOW, "--episodes",
                 "500", "--max-steps", "10", "--out", d, "--quiet",
                 "--resume")
        assert r.returncode == 1, r.returncode
        assert "another ludo eval is writing into" in r.stderr, r.stderr
        r = ludo("eval", "merge", out("basic"), "--out", d)
        assert r.returncode == 1 and "another ludo eval" in r.stderr, \
            r.stderr
    finally:
        p.kill()
        p.wait()


@test
def resume_progress_and_missing_trajectories():
    d = out("res-progress")
    run_ok(*ECHO3, "--out", d)
    mean = sum(x["reward"] for x in results(d)) / 10
    shutil.rmtree(os.path.join(d, "trajectories"))
    r = ludo(*ECHO3[:-1], "--out", d, "--resume")
    assert r.returncode == 0, r.stderr
    assert "warning: 10 records" in r.stderr and "missing" in r.stderr, \
        r.stderr
    m = re.search(r"10/10 episodes .* mean reward (\S+)", r.stderr)
    assert m and abs(float(m.group(1)) - mean) < 1e-3 * mean, r.stderr


@test
def a_shard_summary_describes_the_shard():
    d = out("shard-summary")
    run_ok(*ECHO3, "--shard", "1/3", "--out", d)
    eps = summary(d)["episodes"]
    assert eps["total"] == 3 and eps["missing"] == 0, eps
    run = json.load(open(os.path.join(d, "run.json")))
    assert run["episodes_total"] == 10, run
    empty = out("shard-empty")
    run_ok("eval", "examples/echo", "--episodes", "3", "--shard", "4/5",
           "--out", empty, "--quiet")
    eps = summary(empty)["episodes"]
    assert eps["total"] == 0 and eps["missing"] == 0, eps
    assert os.path.exists(os.path.join(empty, "report.html"))


@test
def an_episode_failing_at_reset_has_its_reset_line():
    d = out("reset-fails")
    run_ok("eval", FIX + "/reset_fails", "--episodes", "2", "--out", d,
           "--quiet")
    for rec in results(d):
        assert rec["error"]["class"] == "ESCRIPT", rec
        lines = [json.loads(x) for x in open(os.path.join(
            d, rec["trajectory"]))]
        assert len(lines) == 1, lines
        assert lines[0]["reset"] == {"seed": rec["seed"]}, lines[0]
        assert lines[0]["error"]["class"] == "ESCRIPT", lines[0]
        assert "this reset fails" in lines[0]["error"]["message"]


@test
def errors_that_are_not_utf8_are_still_recorded():
    # Bytes that are not UTF-8 become U+FFFD (the runtime's messages are
    # UTF-8); a message cut at 2,000 bytes is cut between characters.
    d = out("bad-utf8")
    run_ok("eval", FIX + "/bad_utf8", "--policy", "examples/echo/policy.lua",
           "--episodes", "8", "--seed", "5", "--out", d, "--quiet")
    recs = results(d)
    assert len(recs) == 8, recs
    kinds = set()
    for rec in recs:
        assert rec["error"]["class"] == "ESCRIPT", rec
        msg = rec["error"]["message"]
        if "bad" in msg:
            assert "bad \ufffd\ufffd bytes" in msg, msg
            kinds.add("reset")
        else:
            assert msg.startswith("ESCRIPT: aaa"), msg[:40]
            # "ESCRIPT: " and 1,990 a's are 1,999 bytes; the first e-acute
            # would end at byte 2,001, so the cut comes before it.
            assert msg.endswith("a"), msg[-20:]
            assert len(msg.encode()) == 1999, len(msg.encode())
            kinds.add("step")
    assert kinds == {"reset", "step"}, kinds
    assert summary(d)["errors"] == {"ESCRIPT": 8}, summary(d)


@test
def ctrl_c_while_the_report_is_written_lets_it_finish():
    d = out("sig-report")
    n = 20000  # the summary and report of 20,000 records take a while
    p = subprocess.Popen([LUDO, "eval", "examples/echo", "--episodes",
                          str(n), "--max-steps", "1", "--out", d,
                          "--quiet"], env=ENV, stderr=subprocess.PIPE,
                         text=True)
    path = os.path.join(d, "results.jsonl")
    deadline = time.time() + 120
    while time.time() < deadline:  # every record written: the report next
        if os.path.exists(path) and open(path).read().count("\n") >= n:
            break
        time.sleep(0.02)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, (p.returncode, err)
    s = json.load(open(os.path.join(d, "summary.json")))
    assert s["episodes"]["finished"] == n, s["episodes"]
    assert os.path.exists(os.path.join(d, "report.html"))


def spin_run(d):
    return subprocess.Popen([LUDO, "eval", "examples/echo", "--policy",
                             FIX + "/spin_policy.lua", "--episodes", "8",
                             "--max-steps", "3", "--concurrency", "4",
                             "--cpu-budget", "120000", "--out", d,
                             "--quiet"], env=ENV, stderr=subprocess.PIPE,
                            text=True)


@test
def ctrl_c_during_a_long_policy_call_cancels():
    for workers in ("1", "2"):
        d = out("forever-" + workers)
        p = subprocess.Popen([LUDO, "eval", "examples/echo", "--policy",
                              FIX + "/forever_policy.lua", "--episodes", "8",
                              "--max-steps", "3", "--concurrency", "4",
                              "--cpu-budget", "600000", "--out", d,
                              "--quiet", "--workers", workers], env=ENV,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)  # inside the first policy calls, which never end
        p.send_signal(signal.SIGINT)
        # The call running is stopped: without that, this waits for the
        # ten-minute budget and fails on the timeout.
        _, err = p.communicate(timeout=60)
        assert p.returncode == 130, (p.returncode, err)
        recs = results(d)
        assert recs and all(r["error"]["class"] == "ECANCELED"
                            for r in recs), recs
        assert os.path.exists(os.path.join(d, "summary.json"))
        assert os.path.exists(os.path.join(d, "report.html"))


@test
def a_second_ctrl_c_exits_at_once():
    d = out("spin-twice")
    p = spin_run(d)
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    # Each policy call spins seconds of CPU, four are queued: waiting for
    # them would take over 10 s; the second Ctrl-C does not wait.
    try:
        p.communicate(timeout=5)
    finally:
        p.kill()
        p.wait()
    assert p.returncode == 130, p.returncode


@test
def task_counts_beyond_the_split_fail_at_setup_local_and_remote():
    p = subprocess.Popen([LUDO, "serve", "examples/arith", "--port", "0"],
                         stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        m = re.search(r"http://[^:]+:(\d+)", p.stderr.readline())
        url = "ws://127.0.0.1:%s/ws" % m.group(1)
        arith = os.path.join(ROOT, "examples/arith")
        for i, (env, split) in enumerate([(arith, "test"), (url, "test"),
                                          (url, "nosuch")]):
            run = write("count%d_run.lua" % i, "return { env = %s, tasks = "
                        "{ split = %s, count = 50 } }"
                        % (json.dumps(env), json.dumps(split)))
            d = out("count%d" % i)
            r = ludo("eval", run, "--out", d)
            assert r.returncode == 1, (env, split, r.returncode)
            assert "not the 50 the run asks for" in r.stderr, r.stderr
            assert not os.path.exists(os.path.join(d, "results.jsonl"))
        run = write("count_ok_run.lua", "return { env = %s, tasks = { split"
                    " = \"test\", count = 5 }, max_steps = 2 }"
                    % json.dumps(url))
        run_ok("eval", run, "--out", out("count-ok"), "--quiet")
        assert len(results(out("count-ok"))) == 5
    finally:
        p.terminate()
        p.wait()


LLM_RUN = """
-- An LLM policy on arith's test split, against the mock LLM server.
return {
  env = %(env)s,
  tasks = { split = "test" },
  max_steps = 2,
  concurrency = 3,
  policy = {
    llm = { api = "openai", base_url = %(url)s, model = "mock",
            retries = 0, timeout_ms = 10000 },
    prompt = function(observation, history)
      local m = { { role = "system", content = "Answer with a number." } }
      for _, h in ipairs(history) do
        m[#m + 1] = { role = "user", content = h.observation.question }
        m[#m + 1] = { role = "assistant", content = h.text }
        if h.error then
          m[#m + 1] = { role = "user", content = "not a number: " .. h.error }
        end
      end
      m[#m + 1] = { role = "user", content = observation.question }
      return m
    end,
    parse = function(text)
      if text == "float" then return { answer = 0.5 } end -- off the schema
      local n = math.tointeger(tonumber(text:match("^%%-?%%d+$") or ""))
      if n == nil then error("no number in " .. text, 0) end
      return { answer = n }
    end,
  },
}
"""

LLM_SCRIPT = {"default": "42", "rules": [
    {"match": "^12 \\* 12$", "reply": "144"},
    {"match": "^7 \\+ 35$", "reply": "forty-two"},
    {"match": "^81 / 9$", "reply": "float"},
    {"match": "^2 \\^ 10$", "status": 500, "message": "mock is down"}]}


def llm_policy_end_to_end():
    """An LLM policy through `ludo eval` against spec/llm/mock_llm.js:
    answers, an unparseable answer and one the action schema refuses
    (invalid actions, kept with the model's text), a failing server
    (error class ELLM), token counts."""
    script = os.path.join(TMP, "llm_script.json")
    json.dump(LLM_SCRIPT, open(script, "w"))
    mock = subprocess.Popen(["node", "spec/llm/mock_llm.js", "--script",
                             script], stdout=subprocess.PIPE, text=True)
    try:
        port = re.search(r":(\d+)", mock.stdout.readline()).group(1)
        run = os.path.join(TMP, "llm_run.lua")
        with open(run, "w") as f:
            f.write(LLM_RUN % {
                "env": json.dumps(os.path.join(ROOT, "examples/arith")),
                "url": json.dumps("http://127.0.0.1:%s/v1" % port)})
        d = out("llm")
        run_ok("eval", run, "--out", d, "--quiet")
        recs = {r["task"]: r for r in untimed(results(d))}
        assert recs["test-0"]["reward"] == 1.0, recs["test-0"]
        assert recs["test-0"]["llm"]["calls"] == 1
        assert recs["test-0"]["llm"]["completion_tokens"] == 1
        assert recs["test-0"]["llm"]["prompt_tokens"] > 0
        bad = recs["test-1"]
        assert bad["invalid_actions"] == 2 and bad["truncated"], bad
        assert bad["error"] is None and bad["llm"]["calls"] == 2, bad
        lines = [json.loads(x) for x in open(os.path.join(
            d, bad["trajectory"]))]
        assert lines[1]["invalid"] and lines[1]["text"] == "forty-two"
        assert "no number in forty-two" in lines[1]["error"], lines[1]
        assert recs["test-2"]["reward"] == 1.0
        step = [json.loads(x) for x in open(os.path.join(
            d, recs["test-2"]["trajectory"]))][1]
        assert step["text"] == "42" and step["action"] == {"answer": 42}
        refused = recs["test-3"]  # parsed, then refused by the schema
        assert refused["invalid_actions"] == 2, refused
        lines = [json.loads(x) for x in open(os.path.join(
            d, refused["trajectory"]))]
        assert lines[1]["invalid"] and lines[1]["text"] == "float"
        assert "ESCHEMA" in lines[1]["error"], lines[1]
        down = recs["test-4"]
        assert down["error"]["class"] == "ELLM", down
        assert down["error"]["message"].startswith("ELLM: 500"), down
        assert down["llm"]["failures"] == 1, down
        runj = json.load(open(os.path.join(d, "run.json")))
        assert runj["policy"]["kind"] == "llm"
        assert runj["policy"]["model"] == "mock"
    finally:
        mock.terminate()
        mock.wait()


PARSE_RUN = """
-- parse returns nil at the first step, raises a table at the second,
-- text that is not UTF-8 at the third and an action holding NaN at the
-- fourth.
return {
  env = %(env)s, episodes = 1, max_steps = 4,
  policy = {
    llm = { api = "openai", base_url = %(url)s, model = "mock",
            retries = 0 },
    prompt = function(_, history)
      return { { role = "user", content = ({ "first", "second", "third" })[
        #history + 1] or "fourth" } }
    end,
    parse = function(text)
      if text == "nil" then return nil end
      if text == "nan" then return { message = 0 / 0 } end
      if text == "bytes" then error("bad \\xff" .. text, 0) end
      error({ why = text })
    end,
  },
}
"""


def llm_parse_nil_and_raised_tables_are_invalid_actions():
    """parse returning nil, raising a table or text that is not UTF-8,
    or an action holding NaN: invalid actions, recorded with a message
    that is the same in every run (and UTF-8: bad bytes become U+FFFD)."""
    script = write("parse_script.json", json.dumps({"default": "x", "rules": [
        {"match": "^first$", "reply": "nil"},
        {"match": "^second$", "reply": "table"},
        {"match": "^third$", "reply": "bytes"},
        {"match": "^fourth$", "reply": "nan"}]}))
    mock = subprocess.Popen(["node", "spec/llm/mock_llm.js", "--script",
                             script], stdout=subprocess.PIPE, text=True)
    try:
        port = re.search(r":(\d+)", mock.stdout.readline()).group(1)
        run = write("parse_run.lua", PARSE_RUN % {
            "env": json.dumps(os.path.join(ROOT, "examples/echo")),
            "url": json.dumps("http://127.0.0.1:%s/v1" % port)})
        d = out("llm-parse")
        run_ok("eval", run, "--out", d, "--quiet")
        rec = results(d)[0]
        assert rec["error"] is None and rec["invalid_actions"] == 4, rec
        lines = [json.loads(x) for x in open(os.path.join(
            d, rec["trajectory"]))]
        assert lines[1]["error"] == "parse returned nil", lines[1]
        assert lines[1]["text"] == "nil", lines[1]
        assert lines[2]["error"] == '{"why":"table"}', lines[2]
        assert lines[3]["error"] == "bad \ufffdbytes", lines[3]
        assert lines[4]["error"] == "action.message is nan: an action's " \
            "numbers must be finite (JSON has no NaN or infinity)", lines[4]
        assert lines[4]["text"] == "nan", lines[4]
    finally:
        mock.terminate()
        mock.wait()


def example_llm_policy_and_judge():
    """examples/eval/run.sh: an LLM policy and an LLM judge (in the
    sessions) against the mock, every LLM call counted per episode."""
    d = out("example")
    r = subprocess.run(["examples/eval/run.sh", d], env=ENV,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    recs = {(x["task"], x["repeat"]): x for x in results(d)}
    assert len(recs) == 15
    right = recs[("q0", 0)]
    assert right["rubrics"]["exact"] == 1.0, right
    assert abs(right["rubrics"]["judge"] - 0.95) < 1e-9, right
    assert right["llm"]["calls"] == 2, right  # the policy's and the judge's
    wrong = recs[("q2", 0)]
    assert wrong["rubrics"]["exact"] == 0.0 and not wrong["success"]
    # Hamlet: "I am not sure." at the first try, right at the second.
    assert sum(x["invalid_actions"] for x in recs.values()) == 3
    for r in range(3):
        assert recs[("q4", r)]["invalid_actions"] == 1, recs[("q4", r)]
        assert recs[("q4", r)]["success"], recs[("q4", r)]
    assert os.path.exists(os.path.join(d, "report.html"))
    one = out("example-1")  # the same, one episode at a time
    r = subprocess.run(["examples/eval/run.sh", one, "--concurrency", "1"],
                       env=ENV, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert untimed(results(one)) == untimed(results(d))


def start_mock(script):
    """Starts spec/llm/mock_llm.js with `script`: (process, base URL)."""
    path = write("mock_%d.json" % len(os.listdir(TMP)), json.dumps(script))
    mock = subprocess.Popen(["node", "spec/llm/mock_llm.js", "--script",
                             path], stdout=subprocess.PIPE, text=True)
    port = re.search(r":(\d+)", mock.stdout.readline()).group(1)
    return mock, "http://127.0.0.1:%s/v1" % port


def llm_totals(recs):
    keys = ("calls", "failures", "prompt_tokens", "completion_tokens")
    return {k: sum(r["llm"][k] for r in recs) for k in keys}


def interrupted(args, env, stats, n):
    """Runs `ludo eval ARGS`, Ctrl-C once the mock LLM server at `stats`
    (its /_mock/stats) has had n requests: the records."""
    d = args[args.index("--out") + 1]
    p = subprocess.Popen([LUDO, "eval", *args, "--quiet"], env=env,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and \
            json.load(urlopen(stats))["requests"] < n:
        time.sleep(0.005)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, (p.returncode, err)
    return results(d)


def llm_usage_is_each_episode_s_own_even_cancelled():
    """Each record counts the LLM calls its episode made, once: 2 a step
    with an LLM policy and an LLM judge (in the session), 1 with a Lua
    policy; so the records' sum is what the server answered. Episodes
    cancelled by Ctrl-C (their policy script freed, their session closed
    before the record is made) count what they spent too: never negative,
    never 0 after steps that called, never the previous episode's; the
    summary's totals are the records' sums. A judge's LLM outage is an
    ELLM error, as a policy's is."""
    mock, url = start_mock({"default": "3", "delay_ms": 20})
    env = dict(ENV, LUDO_JUDGE_URL=url)
    base = url[:-len("/v1")]
    try:
        d = out("llm-count")
        r = subprocess.run([LUDO, "eval", FIX + "/judged_llm_run.lua",
                            "--episodes", "12", "--concurrency", "3",
                            "--out", d, "--quiet"], env=env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        recs = results(d)
        assert all(x["llm"]["calls"] == 2 * x["steps"] == 8
                   for x in recs), [x["llm"] for x in recs]
        stats = json.load(urlopen(base + "/_mock/stats"))
        assert llm_totals(recs)["calls"] == stats["requests"], stats
        # A judge's LLM outage is ELLM, as the policy's is.
        urlopen(base + "/_mock/script", data=json.dumps({"rules": [
            {"match": "^Rate", "status": 500, "message": "judge down"}]})
            .encode())
        d = out("judge-down")
        r = subprocess.run([LUDO, "eval", FIX + "/judged_steps",
                            "--policy", FIX + "/count_policy.lua",
                            "--episodes", "2", "--out", d, "--quiet"],
                           env=env, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        for x in results(d):
            assert x["error"]["class"] == "ELLM", x["error"]
            assert x["error"]["message"].startswith(
                "ESCRIPT: rubric judge (LLMJudge): "), x["error"]
            assert "ELLM: 500 judge down" in x["error"]["message"], x
        assert summary(d)["errors"] == {"ELLM": 2}, summary(d)["errors"]
        urlopen(base + "/_mock/script", data=json.dumps(
            {"default": "3", "delay_ms": 20}).encode())
        # 4 episodes of 12 steps at a time: Ctrl-C in the second 4, some
        # steps in.
        for name, args, per_step in [
                ("llm-cancel", [FIX + "/judged_llm_run.lua"], 2),
                ("lua-cancel", [FIX + "/judged_steps", "--policy",
                                FIX + "/count_policy.lua", "--episodes",
                                "400", "--concurrency", "4"], 1)]:
            d = out(name)
            urlopen(base + "/_mock/reset", data=b"")
            recs = interrupted([*args, "--max-steps", "12", "--out", d],
                               env, base + "/_mock/stats",
                               per_step * 4 * (12 + 4))
            cancelled = [x for x in recs if x["error"] and
                         x["error"]["class"] == "ECANCELED"]
            assert cancelled, recs
            for x in recs:
                calls = x["llm"]["calls"]
                assert min(x["llm"].values()) >= 0, x
                # A cancelled call in flight is not counted; those that
                # answered before their step did are.
                assert per_step * x["steps"] <= calls <= \
                    per_step * (x["steps"] + 1), (name, x)
            assert any(x["steps"] > 0 for x in cancelled), cancelled
            s = json.load(open(os.path.join(d, "summary.json")))
            assert s["llm"] == llm_totals(recs), (s["llm"], llm_totals(recs))
    finally:
        mock.terminate()
        mock.wait()


# ---- --workers: the episodes spread over worker processes --------------


def pids_writing(d):
    """Pids of processes (but this one) with a file of folder d open."""
    real, found = os.path.realpath(d), []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            fds = os.listdir("/proc/%s/fd" % pid)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink("/proc/%s/fd/%s" % (pid, fd))
            except OSError:
                continue
            if target.startswith(real + "/"):
                found.append(int(pid))
                break
    return found


@test
def workers_give_the_records_of_one_process():
    args = ["eval", "examples/echo", "--policy", SLOW, "--episodes", "40",
            "--max-steps", "5", "--seed", "9", "--quiet"]
    one, many = out("w-one"), out("w-many")
    run_ok(*args, "--out", one, "--concurrency", "4")
    run_ok(*args, "--out", many, "--concurrency", "4", "--workers", "3")
    assert untimed(results(many)) == untimed(results(one))
    assert summary(many) == summary(one), (summary(many), summary(one))
    for r in results(many):  # every trajectory written, by its worker
        with open(os.path.join(many, r["trajectory"])) as f:
            assert f.read() == open(os.path.join(one, r["trajectory"])).read()
    run = json.load(open(os.path.join(many, "run.json")))
    assert run["execution"]["workers"] == 3, run
    # More workers than episodes: one each; a second run resumes nothing.
    few = out("w-few")
    run_ok("eval", "examples/echo", "--episodes", "2", "--out", few,
           "--quiet", "--workers", "8")
    assert sorted(r["episode"] for r in results(few)) == [0, 1]
    run_ok("eval", "examples/echo", "--episodes", "2", "--out", few,
           "--quiet", "--workers", "8", "--resume")
    assert len(results(few)) == 2


@test
def workers_flag_and_run_file_field():
    r = ludo("eval", "examples/echo", "--workers", "0", "--out",
             out("w-zero"))
    assert r.returncode == 2 and "--workers" in r.stderr, r.stderr
    rf = write("workers_run.lua", 'return { env = "%s/examples/echo", '
               'episodes = 6, max_steps = 3, workers = 2 }\n' % ROOT)
    d = out("w-runfile")
    run_ok("eval", rf, "--out", d, "--quiet")
    run = json.load(open(os.path.join(d, "run.json")))
    assert run["execution"]["workers"] == 2, run
    assert len(results(d)) == 6
    bad = write("workers_bad_run.lua", 'return { env = "%s/examples/echo",'
                ' workers = 999 }\n' % ROOT)
    r = ludo("eval", bad, "--out", out("w-bad"))
    assert r.returncode == 1 and "workers must be 1 to 256" in r.stderr, \
        r.stderr


@test
def workers_show_one_progress_line():
    d = out("w-progress")
    r = ludo("eval", "examples/echo", "--policy", SLOW, "--episodes", "30",
             "--max-steps", "4", "--out", d, "--workers", "2")
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if "episodes" in x]
    assert lines and "30/30 episodes" in lines[-1], r.stderr


@test
def a_worker_that_fails_fails_the_run():
    d = out("w-fail")
    pol = write("broken_policy.lua", "error('broken at load')\n")
    r = ludo("eval", "examples/echo", "--policy", pol, "--episodes", "4",
             "--out", d, "--quiet", "--workers", "2")
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "broken at load" in r.stderr, r.stderr
    assert re.search(r"worker [01] failed \(exit status 1\)", r.stderr), \
        r.stderr


@test
def ctrl_c_with_workers_cancels_then_resume_completes():
    args = ["eval", "examples/echo", "--policy", SLOW, "--episodes", "300",
            "--max-steps", "10", "--concurrency", "6", "--quiet",
            "--workers", "2"]
    d = out("w-sigint")
    p = subprocess.Popen([LUDO, *args, "--out", d], env=ENV,
                         stderr=subprocess.PIPE, text=True)
    path = os.path.join(d, "results.jsonl")
    wait_records(path, 6)
    p.send_signal(signal.SIGINT)  # to the parent alone: it passes it on
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, (p.returncode, err)
    recs = results(d)
    cancelled = [r for r in recs if r["error"] and
                 r["error"]["class"] == "ECANCELED"]
    assert 1 <= len(cancelled) <= 6 and len(recs) < 300, len(cancelled)
    assert pids_writing(d) == [], pids_writing(d)
    s = json.load(open(os.path.join(d, "summary.json")))
    assert s["episodes"]["cancelled"] == len(cancelled), s
    r = ludo(*args, "--out", d, "--resume")
    assert r.returncode == 0, r.stderr
    assert sorted({x["episode"] for x in results(d)}) == list(range(300))
    assert summary(d)["episodes"]["cancelled"] == 0, summary(d)


@test
def kill_9_of_the_parent_ends_its_workers():
    args = ["eval", "examples/echo", "--policy", SLOW, "--episodes", "60",
            "--max-steps", "6", "--seed", "4", "--quiet"]
    full, cut = out("w-full"), out("w-cut")
    run_ok(*args, "--out", full, "--concurrency", "4")
    p = subprocess.Popen([LUDO, *args, "--out", cut, "--concurrency", "4",
                          "--workers", "2"], env=ENV,
                         stderr=subprocess.DEVNULL)
    path = os.path.join(cut, "results.jsonl")
    wait_records(path, 10)
    p.kill()
    p.wait()
    deadline = time.time() + 10  # the workers die with their parent
    while pids_writing(cut) and time.time() < deadline:
        time.sleep(0.02)
    assert pids_writing(cut) == [], pids_writing(cut)
    r = ludo(*args, "--out", cut, "--concurrency", "4", "--workers", "2",
             "--resume")
    assert r.returncode == 0, r.stderr
    assert untimed(results(cut)) == untimed(results(full))
    assert summary(cut) == summary(full)


def lines_are_records(path):
    """The file's text ends a line and every line is a JSON object."""
    text = open(path).read()
    assert text == "" or text.endswith("\n"), repr(text[-200:])
    return [json.loads(x) for x in text.splitlines()]


@test
def a_record_that_cannot_be_written_is_cut_and_the_run_stops():
    """A full disk, here the file size limit (a short write, then EFBIG,
    as ENOSPC gives): the record's part written is cut from
    results.jsonl, the run stops with exit 1 naming the file and the OS
    error, the records before it stand, and --resume completes the run."""
    args = ["eval", "examples/echo", "--episodes", "30", "--seed", "5",
            "--max-steps", "3", "--quiet", "--no-trajectories",
            "--concurrency", "1"]
    full, d = out("fsz-full"), out("fsz-cut")
    run_ok(*args, "--out", full)
    lines = open(os.path.join(full, "results.jsonl")).read().splitlines()
    limit = sum(len(x) + 1 for x in lines[:10]) + len(lines[10]) // 2

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead

    r = subprocess.run([LUDO, *args, "--out", d], env=ENV, text=True,
                       capture_output=True, timeout=120,
                       preexec_fn=small_files)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "cannot write %s/results.jsonl: File too large; episode 10's " \
        "record is not in it, the file is as it was before it\n" % d \
        in r.stderr, r.stderr
    assert "the run stops here (--resume runs the episodes without a " \
        "record once %s/results.jsonl can be written)" % d in r.stderr, \
        r.stderr
    recs = lines_are_records(os.path.join(d, "results.jsonl"))
    assert untimed(recs) == untimed(results(full)[:10]), recs
    r = ludo(*args, "--out", d, "--resume")
    assert r.returncode == 0, r.stderr
    assert untimed(results(d)) == untimed(results(full))
    assert summary(d) == summary(full)


@test
def a_reward_is_recorded_as_the_run_computed_it():
    """0.7 + -0.4 is 0.29999999999999993: the record says so (not 0.3),
    and the threshold 0.3 and a success function reading the record
    agree that it is below 0.3."""
    for run in ("inexact_sum_run.lua", "inexact_sum_fn_run.lua"):
        d = out("inexact-" + run)
        run_ok("eval", FIX + "/" + run, "--out", d, "--quiet")
        rec = results(d)[0]
        assert rec["reward"] == 0.7 + -0.4 and rec["success"] is False, rec
        assert '"reward":0.29999999999999993,' in \
            open(os.path.join(d, "results.jsonl")).read()
        assert summary(d)["success"]["successes"] == 0, summary(d)


ECHO6 = ["eval", "examples/echo", "--episodes", "6", "--seed", "5",
         "--max-steps", "3", "--quiet", "--no-trajectories"]


def set_line(d, line, text):
    """Replaces line `line` (from 0) of d's results.jsonl by `text`."""
    path = os.path.join(d, "results.jsonl")
    lines = open(path).read().splitlines()
    lines[line] = text
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return open(path).read()


def refused_by_resume_and_merge(d, want):
    """--resume and merge both refuse d's records saying `want`; resume
    leaves results.jsonl as it was and merge writes nothing."""
    path = os.path.join(d, "results.jsonl")
    before = open(path).read()
    r = ludo(*ECHO6, "--out", d, "--resume")
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert want in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert open(path).read() == before
    m = d + "-merged"
    r = ludo("eval", "merge", d, "--out", m)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert want in r.stderr and "out of memory" not in r.stderr, r.stderr
    assert not os.path.exists(m) or sorted(os.listdir(m)) == [".lock"], \
        os.listdir(m)
    shutil.rmtree(m, ignore_errors=True)


@test
def a_line_two_records_run_into_is_refused_naming_it():
    """The line a failed append used to leave (a record cut, the next
    written after it) is malformed JSON, named with its line, though it
    starts and ends as a record does."""
    d = out("two-in-one")
    run_ok(*ECHO6, "--out", d)
    lines = open(os.path.join(d, "results.jsonl")).read().splitlines()
    cut = lines[2].index('"wall_ms"') + 8  # in a key: '"wall_ms{"ep...'
    set_line(d, 2, lines[2][:cut] + lines[3])
    refused_by_resume_and_merge(d, "%s/results.jsonl:3: not a result record "
                                "(malformed JSON: ':' expected near "
                                "'episode\"' at column %d)" % (d, cut + 3))


@test
def a_reward_beyond_the_double_range_is_refused_naming_its_line():
    d = out("reward-1e999")
    run_ok(*ECHO6, "--out", d)
    line = open(os.path.join(d, "results.jsonl")).read().splitlines()[1]
    set_line(d, 1, re.sub(r'"reward":[^,]*', '"reward":1e999', line))
    refused_by_resume_and_merge(d, "%s/results.jsonl:2: not a result record "
                                "(malformed JSON: number out of range" % d)


@test
def a_field_of_the_wrong_type_is_refused_naming_its_line():
    """A record's fields must have the types ludo writes: said by
    --resume and merge with the file and line, never later by the
    summary (a traceback, "results[1]")."""
    d = out("wrong-type")
    run_ok(*ECHO6, "--out", d)
    rec = results(d)[1]
    cases = [("reward", "lots", "a number, not a string"),
             ("reward", {}, "a number, not an object"),
             ("reward", True, "a number, not a boolean"),
             ("reward", None, "a number, not null"),
             ("steps", 1.5, "a whole number, not a number with a fraction "
              "or exponent"),
             ("success", "yes", "true or false, not a string"),
             ("error", {"message": "x"},
              "null or an object with a string \"class\""),
             ("rubrics", {"a": "b"}, "an object of numbers (it holds a "
              "string)")]
    for field, value, want in cases:
        edit_record(d, 1, **rec)
        edit_record(d, 1, **{field: value})
        refused_by_resume_and_merge(
            d, '%s/results.jsonl:2: not a result record (the field "%s" '
            'must be %s' % (d, field, want))
    edit_record(d, 1, **rec)
    bare = dict(rec)
    del bare["reward"]
    set_line(d, 1, json.dumps(bare, separators=(",", ":")))
    refused_by_resume_and_merge(d, '%s/results.jsonl:2: not a result record '
                                '(no field "reward")' % d)
    set_line(d, 1, json.dumps(rec, separators=(",", ":")))
    r = ludo(*ECHO6, "--out", d, "--resume")  # whole again: it resumes
    assert r.returncode == 0, r.stderr


@test
def a_merge_that_fails_writing_leaves_its_folder_empty():
    """A merge that cannot write its --out whole (the file size limit
    here, as a full disk) removes what it wrote: the next merge into the
    same folder works."""
    shards = echo_shards("mfail", 2)
    m = out("mfail-m")

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (600, 600))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    r = subprocess.run([LUDO, "eval", "merge", *shards, "--out", m],
                       env=ENV, text=True, capture_output=True, timeout=120,
                       preexec_fn=small_files)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "File too large" in r.stderr, r.stderr
    assert "nothing was merged: %s is left empty" % m in r.stderr, r.stderr
    assert sorted(os.listdir(m)) == [".lock"], os.listdir(m)
    r = ludo("eval", "merge", *shards, "--out", m)
    assert r.returncode == 0, r.stderr


@test
def an_action_holding_nan_or_infinity_is_invalid():
    """JSON has no NaN or infinity (the encoder writes null): a policy's
    action holding one is an invalid action naming the field and the
    value, not an action without the field."""
    d = out("nan-action")
    run_ok("eval", FIX + "/optional_x", "--policy", FIX + "/nan_policy.lua",
           "--episodes", "1", "--max-steps", "2", "--out", d, "--quiet")
    rec = results(d)[0]
    assert rec["invalid_actions"] == 2 and rec["success"] is False, rec
    assert rec["reward"] == 0 and rec["error"] is None, rec
    with open(os.path.join(d, rec["trajectory"])) as f:
        steps = [json.loads(x) for x in f][1:]
    why = ": an action's numbers must be finite (JSON has no NaN or " \
        "infinity)"
    assert [x["error"] for x in steps] == ["action.x is -inf" + why,
                                           "action.x is nan" + why], steps
    assert all(x["invalid"] and x["action"] is None for x in steps), steps


# The LLM client and its mock server are helper L's (ludo.llm,
# spec/llm/): the end-to-end tests run once they are in the tree.
if os.path.exists("spec/llm/mock_llm.js"):
    test(llm_policy_end_to_end)
    test(llm_parse_nil_and_raised_tables_are_invalid_actions)
    test(example_llm_policy_and_judge)
    test(llm_usage_is_each_episode_s_own_even_cancelled)
else:
    print("skip llm_policy_end_to_end, example_llm_policy_and_judge "
          "(no spec/llm/mock_llm.js yet)")

shutil.rmtree(TMP, ignore_errors=True)
print("%d failed" % failures)
sys.exit(1 if failures else 0)
