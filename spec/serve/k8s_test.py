#!/usr/bin/python3
"""Checks the Kubernetes manifests of docs/k8s/ (docs/deploy.md): each file
parses (Debian's python3-yaml), the objects fit together (labels,
selectors, ports, the Secret's key, the probes on /health), the Dockerfile
and the Deployment start ludo the same way, and the Deployment's arguments
and LUDO_TOKEN work with the real binary (on a free loopback port).

Usage: k8s_test.py LUDO_BINARY. Prints "ok NAME" or "FAIL NAME: why" per
check and ends with "N passed, N failed"; exit status 1 on any failure."""
import http.client
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
    check(sorted(kust["resources"]) == files, (kust["resources"], files))
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


print(f"{results['passed']} passed, {results['failed']} failed")
sys.exit(1 if results["failed"] else 0)
