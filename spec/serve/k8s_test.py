#!/usr/bin/python3
"""Checks the Kubernetes manifests of docs/k8s/ (docs/deploy.md): each file
parses (Debian's python3-yaml), the objects fit together (labels,
selectors, ports, the Secret's key, the probes on /health), the Dockerfile
and the Deployment start ludo the same way, and the Deployment's arguments
and LUDO_TOKEN work with the real binary (on a free loopback port).

Usage: k8s_test.py LUDO_BINARY. Prints "ok NAME" or "FAIL NAME: why" per
check and ends with "N passed, N failed"; exit status 1 on any failure."""
import http.client
import json
import os
import re
import signal
import subprocess
import sys

import yaml

LUDO = sys.argv[1] if len(sys.argv) > 1 else "build/ludo"
DIR = "docs/k8s"
results = {"passed": 0, "failed": 0}


def check(cond, why):
    if not cond:
        raise AssertionError(why)


def test(fn):
    try:
        fn()
        print("ok", fn.__name__)
        results["passed"] += 1
    except Exception as e:  # noqa: BLE001 - report every failure
        print(f"FAIL {fn.__name__}: {type(e).__name__}: {e}")
        results["failed"] += 1
    return fn


def load(name):
    with open(os.path.join(DIR, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


# Manifests applied on their own (kubectl apply -f), not by the
# kustomization of `ludo serve`.
STANDALONE = {"eval-job.yaml"}


def one(kind, name=None):
    for f in sorted(os.listdir(DIR)):
        if f.endswith(".yaml") and f != "kustomization.yaml":
            for d in load(f):
                if d["kind"] == kind and (name is None or
                                          d["metadata"]["name"] == name):
                    return d
    raise AssertionError(f"no {kind} {name or ''}")


def container():
    return one("Deployment")["spec"]["template"]["spec"]["containers"][0]


def arg(args, flag):
    return args[args.index(flag) + 1]


@test
def every_file_parses_and_is_listed():
    kust = load("kustomization.yaml")[0]
    files = sorted(f for f in os.listdir(DIR) if f.endswith(".yaml") and
                   f != "kustomization.yaml")
    served = [f for f in files if f not in STANDALONE]
    check(sorted(kust["resources"]) == served, (kust["resources"], served))
    for f in files:
        for d in load(f):
            check(d.get("apiVersion") and d.get("kind") and
                  d["metadata"].get("name"), (f, d))


@test
def deployment_probes_resources_token():
    dep = one("Deployment")
    c = container()
    pod = dep["spec"]["template"]
    check(dep["spec"]["selector"]["matchLabels"].items() <=
          pod["metadata"]["labels"].items(), "selector vs pod labels")
    port = {p["name"]: p["containerPort"] for p in c["ports"]}
    for probe in ("readinessProbe", "livenessProbe"):
        g = c[probe]["httpGet"]
        check(g["path"] == "/health" and g["port"] in port, (probe, g))
    req, lim = c["resources"]["requests"], c["resources"]["limits"]
    check(all(k in req for k in ("cpu", "memory")) and "memory" in lim,
          c["resources"])
    # as many workers as the CPUs requested
    check(arg(c["args"], "--workers") == str(req["cpu"]),
          (c["args"], req["cpu"]))
    check(arg(c["args"], "--port") == str(port["http"]), c["args"])
    check(arg(c["args"], "--host") == "0.0.0.0", c["args"])
    env = {e["name"]: e for e in c["env"]}
    ref = env["LUDO_TOKEN"]["valueFrom"]["secretKeyRef"]
    check(ref == {"name": "ludo-token", "key": "token"}, ref)
    check("--token" not in c["args"], "the token must not be an argument")
    check(pod["spec"]["terminationGracePeriodSeconds"] > 15 + 5,
          "grace period: the 15 s stop deadline and the preStop sleep")


@test
def services_select_the_pods():
    labels = one("Deployment")["spec"]["template"]["metadata"]["labels"]
    for name in ("ludo-echo", "ludo-echo-pods"):
        svc = one("Service", name)
        check(svc["spec"]["selector"].items() <= labels.items(), name)
        check(svc["spec"]["ports"][0]["targetPort"] == "http", name)
    svc = one("Service", "ludo-echo")
    check(svc["spec"]["sessionAffinity"] == "ClientIP", svc["spec"])
    check(one("Service", "ludo-echo-pods")["spec"]["clusterIP"] == "None",
          "headless")
    ing = one("Ingress")
    b = ing["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    check(b["name"] == "ludo-echo" and b["port"]["name"] == "http", b)
    check(ing["metadata"]["annotations"][
        "nginx.ingress.kubernetes.io/affinity"] == "cookie", "affinity")
    pdb = one("PodDisruptionBudget")
    check(pdb["spec"]["selector"]["matchLabels"].items() <= labels.items(),
          "pdb selector")


@test
def dockerfile_matches_the_deployment():
    text = open(os.path.join(DIR, "Dockerfile")).read()
    entry = re.search(r'^ENTRYPOINT \["([^"]+)"\]', text, re.M).group(1)
    cmd = re.search(r"^CMD (\[.*\])$", text, re.M).group(1)
    cmd = yaml.safe_load(cmd)
    c = container()
    check(entry == "/usr/local/bin/ludo" and "command" not in c,
          "the Deployment gives args to the image's entrypoint")
    check(cmd[:2] == c["args"][:2] == ["serve", "/srv/env"], (cmd, c["args"]))
    check("COPY ${ENV_DIR} /srv/env" in text, "the environment's folder")
    check(re.search(r"^USER 10001$", text, re.M) and
          one("Deployment")["spec"]["template"]["spec"]["securityContext"][
              "runAsUser"] == 10001, "the same unprivileged user")


@test
def deployment_args_work():
    # the container's arguments, on a free loopback port, with the token
    # from the environment as the Secret gives it
    args = list(container()["args"])
    args[args.index("/srv/env")] = "examples/echo"
    args[args.index("--port") + 1] = "0"
    args[args.index("--host") + 1] = "127.0.0.1"
    p = subprocess.Popen([LUDO, *args], stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "LUDO_TOKEN": "k8s-secret"})
    try:
        line = p.stderr.readline()
        m = re.search(r"http://[^:]+:(\d+) .*, (\d+) workers\)", line)
        check(m and m.group(2) == arg(args, "--workers"), line)

        def get(path, headers=None):
            c = http.client.HTTPConnection("127.0.0.1", int(m.group(1)),
                                           timeout=10)
            c.request("GET", path, headers=headers or {})
            st = c.getresponse().status
            c.close()
            return st
        check(get("/health") == 200, "the probes' path needs no token")
        check(get("/metadata") == 401, "the token is required")
        check(get("/metadata", {"Authorization": "Bearer k8s-secret"}) ==
              200, "LUDO_TOKEN is the token")
    finally:
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=20)
        p.stderr.close()
    check(rc == 0, f"exit status {rc} after SIGTERM")


# ---- eval-job.yaml: `ludo eval` shards in an Indexed Job, then a merge ----

def eval_objects():
    docs = load("eval-job.yaml")
    jobs = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Job"}
    return docs, jobs["ludo-eval"], jobs["ludo-eval-merge"]


def script(job):
    c = job["spec"]["template"]["spec"]["containers"][0]
    check(c["command"] == ["/bin/sh", "-c"] and len(c["args"]) == 1,
          "a shell script as the one argument")
    return c, c["args"][0]


@test
def eval_job_is_indexed_with_n_shards():
    _, job, merge = eval_objects()
    spec = job["spec"]
    check(job["kind"] == "Job" and job["apiVersion"] == "batch/v1", job)
    check(spec["completionMode"] == "Indexed", spec)
    c, text = script(job)
    m = re.search(r"ludo eval (\S+) .*--shard \$\(JOB_COMPLETION_INDEX\)/(\d+)"
                  r" --out \"\$out\"", text.replace("\\\n", " "), re.S)
    check(m, text)
    n = int(m.group(2))
    check(spec["completions"] == spec["parallelism"] == n,
          (spec["completions"], spec["parallelism"], n))
    check("out=/results/shard-$(JOB_COMPLETION_INDEX)" in text, text)
    _, mtext = script(merge)
    check(re.search(r"^\s*shards=(\d+)$", mtext, re.M).group(1) == str(n),
          "the merge waits for the same N shards")
    check("ludo eval merge /results/shard-* --out /results/all" in mtext,
          mtext)
    # the index is declared, so that $(JOB_COMPLETION_INDEX) expands
    env = {e["name"]: e for e in c["env"]}
    check(env["JOB_COMPLETION_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]
          == "metadata.annotations['batch.kubernetes.io/job-completion-"
          "index']", env)
    for j in (job, merge):
        check(j["spec"]["template"]["spec"]["restartPolicy"] in
              ("Never", "OnFailure"), "a Job's pods do not restart always")


@test
def eval_job_volumes_and_run_file():
    docs, job, merge = eval_objects()
    pvc = [d for d in docs if d["kind"] == "PersistentVolumeClaim"][0]
    cm = [d for d in docs if d["kind"] == "ConfigMap"][0]
    check("ReadWriteMany" in pvc["spec"]["accessModes"],
          "every shard's pod mounts the results volume")
    for j in (job, merge):
        pod = j["spec"]["template"]["spec"]
        vols = {v["name"]: v for v in pod["volumes"]}
        c = pod["containers"][0]
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        check(vols[mounts["/results"]]["persistentVolumeClaim"]["claimName"]
              == pvc["metadata"]["name"], (j["metadata"]["name"], vols))
        check(pod["securityContext"]["fsGroup"] ==
              pod["securityContext"]["runAsUser"] == 10001,
              "the image's user may write the volume")
        check(c["image"] == container()["image"], "the same image")
    pod = job["spec"]["template"]["spec"]
    vols = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"]
              for m in pod["containers"][0]["volumeMounts"]}
    check(vols[mounts["/srv/run"]]["configMap"]["name"] ==
          cm["metadata"]["name"] and "run.lua" in cm["data"],
          "run.lua from the ConfigMap at /srv/run/run.lua")
    _, text = script(job)
    check("/srv/run/run.lua" in text, text)
    check(cm["data"]["run.lua"].lstrip().startswith("return {"),
          "a run file is a Lua module returning a table")


def run_script(text, index, results_dir, bindir, timeout=10):
    # Kubernetes expands $(JOB_COMPLETION_INDEX) before the shell runs.
    text = text.replace("$(JOB_COMPLETION_INDEX)", str(index))
    # the volume's paths (not "$out/results.jsonl")
    text = re.sub(r"(?<=[\s=])/results", results_dir, text)
    return subprocess.run(["/bin/sh", "-c", text], timeout=timeout,
                          env={**os.environ,
                               "PATH": bindir + ":" + os.environ["PATH"]},
                          capture_output=True, text=True)


@test
def eval_job_scripts_run():
    # The two scripts under /bin/sh, with a `ludo` that records its
    # arguments: the shard's command, --resume on a retry, the merge of
    # every shard once all have summaries, and a merge that waits.
    import shutil
    import tempfile
    _, job, merge = eval_objects()
    _, text = script(job)
    _, mtext = script(merge)
    tmp = tempfile.mkdtemp(prefix="ludo-k8s-")
    try:
        bindir, res = os.path.join(tmp, "bin"), os.path.join(tmp, "results")
        os.makedirs(bindir)
        os.makedirs(res)
        log = os.path.join(tmp, "calls")
        with open(os.path.join(bindir, "ludo"), "w") as f:
            f.write(f'#!/bin/sh\necho "$*" >> {log}\n')
        os.chmod(os.path.join(bindir, "ludo"), 0o755)

        def calls():
            if not os.path.exists(log):
                return []
            with open(log) as f:
                return f.read().splitlines()
        n = job["spec"]["completions"]
        p = run_script(text, 3, res, bindir)
        check(p.returncode == 0, p.stderr)
        check(calls() == [f"eval /srv/run/run.lua --quiet --shard 3/{n} "
                          f"--out {res}/shard-3"], calls())
        os.makedirs(os.path.join(res, "shard-3"))
        open(os.path.join(res, "shard-3", "run.json"), "w").close()
        run_script(text, 3, res, bindir)
        check(calls()[-1].endswith(f"--out {res}/shard-3 --resume"),
              calls())
        # the merge waits while a shard has no summary ...
        for i in range(n - 1):
            os.makedirs(os.path.join(res, f"shard-{i}"), exist_ok=True)
            open(os.path.join(res, f"shard-{i}", "summary.json"),
                 "w").close()
        try:
            run_script(mtext, 0, res, bindir, timeout=2)
            check(False, "the merge did not wait for the last shard")
        except subprocess.TimeoutExpired:
            pass
        check(len(calls()) == 2, calls())
        # ... and merges every shard once all have one
        open(os.path.join(res, "shard-3", "summary.json"), "w").close()
        p = run_script(mtext, 0, res, bindir)
        shards = " ".join(f"{res}/shard-{i}" for i in range(n))
        check(p.returncode == 0 and calls()[-1] ==
              f"eval merge {shards} --out {res}/all", (p.stderr, calls()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def eval_job_with_the_real_binary():
    # The Job's two scripts with the real `ludo` and the ConfigMap's run
    # file (the echo environment of the repository in place of the
    # image's /srv/env, 40 episodes): four shards, then the merge, whose
    # summary must equal that of the same run in one piece (timing aside).
    import shutil
    import tempfile
    docs, job, merge = eval_objects()
    run = [d for d in docs if d["kind"] == "ConfigMap"][0]["data"]["run.lua"]
    run = run.replace("/srv/env", os.path.abspath("examples/echo"))
    run = re.sub(r"episodes = \d+", "episodes = 40", run)
    _, text = script(job)
    _, mtext = script(merge)
    tmp = tempfile.mkdtemp(prefix="ludo-k8s-")
    try:
        bindir, res = os.path.join(tmp, "bin"), os.path.join(tmp, "results")
        os.makedirs(bindir)
        os.makedirs(res)
        os.symlink(os.path.abspath(LUDO), os.path.join(bindir, "ludo"))
        runfile = os.path.join(tmp, "run.lua")
        with open(runfile, "w") as f:
            f.write(run)
        text = text.replace("/srv/run/run.lua", runfile)
        for i in range(job["spec"]["completions"]):
            p = run_script(text, i, res, bindir, timeout=60)
            check(p.returncode == 0, (i, p.stderr))
        p = run_script(mtext, 0, res, bindir, timeout=60)
        check(p.returncode == 0, p.stderr)
        whole = os.path.join(tmp, "whole")
        p = subprocess.run([LUDO, "eval", runfile, "--quiet", "--out", whole],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 0, p.stderr)

        def untimed(d):
            with open(os.path.join(d, "summary.json")) as f:
                s = json.load(f)
            del s["timing"]
            return s
        merged = untimed(os.path.join(res, "all"))
        check(merged["episodes"]["finished"] == 40, merged["episodes"])
        check(merged == untimed(whole), "the merged shards' summary")
        check(os.path.getsize(os.path.join(res, "all", "report.html")) >
              1000, "the merged report")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# Needs `ludo eval` (issue 11's runner) in the binary under test; until it
# is there the check is reported as skipped and counted neither way.
if subprocess.run([LUDO, "eval", "--help"], capture_output=True).returncode:
    print("skip eval_job_with_the_real_binary: no `ludo eval` in", LUDO)
else:
    test(eval_job_with_the_real_binary)

print(f"{results['passed']} passed, {results['failed']} failed")
sys.exit(1 if results["failed"] else 0)
