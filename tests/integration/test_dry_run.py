#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Dry-run mode against kube-apisim (docs/operations.md "Dry run").

A small persistent exec hook (written here, plain Python) answers every
ConfigMap labelled role=parent with each kind of write: create a child
ConfigMap owned by it, merge-patch a label onto it, server-side apply an
annotation, delete the ConfigMap "<name>-old", and an Event.

- `--dry-run`: every write reaches the server with dryRun=All and is
  answered, nothing is stored (the parent keeps its resourceVersion, no
  child, the old ConfigMap stays, no Event), each would-be write is logged
  at info ("dry run: would create configmaps dr/p1-child", "... would patch
  configmaps dr/p1: metadata.labels.test.kctrld.io/seen", ...) and counted
  in kctrld_dry_run_writes_total{controller,verb}. The controller behaves
  normally otherwise: a change of the parent reconciles it again and the
  same writes are previewed again (no expectations hold the create back),
  and nothing else re-runs it (no hot loop: the dry-run answers change
  nothing the informers see).
- per controller (`dryRun: true` on one of two controllers running the
  same hook in two namespaces): only that one previews; the other writes.
"""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import taplib  # noqa: E402
from taplib import Apisim, Kctrld, run_tests, wait_for  # noqa: E402

HOOK = r'''
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    o = req["object"]
    if o is None or (o["metadata"].get("labels") or {}).get("role") != "parent":
        print(json.dumps({"result": "done"}), flush=True)
        continue
    md = o["metadata"]
    ns, name = md["namespace"], md["name"]
    sys.stderr.write("reconcile %s/%s\n" % (ns, name))
    sys.stderr.flush()
    acts = [
        {"action": "create", "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": name + "-child", "namespace": ns, "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": md["uid"],
                "controller": True}]}, "data": {"from": name}}},
        {"action": "patch", "apiVersion": "v1", "kind": "ConfigMap", "namespace": ns, "name": name,
         "patch": {"metadata": {"labels": {"test.kctrld.io/seen": "yes"}}}},
        {"action": "apply", "fieldManager": "drtest", "object": {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": name, "namespace": ns, "annotations": {"test.kctrld.io/applied": "yes"}}}},
        {"action": "delete", "apiVersion": "v1", "kind": "ConfigMap", "namespace": ns, "name": name + "-old"},
        {"action": "event", "reason": "Previewed", "message": "all kinds of writes"},
    ]
    print(json.dumps({"result": "done", "actions": acts}), flush=True)
'''

CONTROLLER = """  - name: %(name)s
    for: { apiVersion: v1, kind: ConfigMap, informer: %(name)s }
    owns: [ { apiVersion: v1, kind: ConfigMap, informer: %(name)s } ]
    rateLimit: { baseDelay: 50ms, maxDelay: 1s }
%(extra)s    hook:
      exec: { command: [python3, %(hook)s] }
"""
INFORMER = """  - name: %(name)s
    apiVersion: v1
    kind: ConfigMap
    namespaces: [%(name)s]
"""


def config(hook, controllers):
    """controllers: [(name, extra YAML lines)]; each watches the namespace of its name."""
    text = "logLevel: info\nmetrics: { bindAddress: \"127.0.0.1:0\" }\ninformers:\n"
    text += "".join(INFORMER % {"name": n} for n, _ in controllers)
    text += "controllers:\n"
    text += "".join(CONTROLLER % {"name": n, "extra": e, "hook": hook} for n, e in controllers)
    return text


def cm_path(ns, name=""):
    return "/api/v1/namespaces/%s/configmaps%s" % (ns, "/" + name if name else "")


def setup(sim, ns, parent):
    sim.json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": ns}}, expect=201)
    for name, labels in ((parent, {"role": "parent"}), (parent + "-old", {})):
        sim.json("POST", cm_path(ns), {"apiVersion": "v1", "kind": "ConfigMap",
                                       "metadata": {"name": name, "labels": labels}, "data": {"v": "1"}},
                 expect=201)


def get(sim, ns, name):
    st, doc = sim.json("GET", cm_path(ns, name))
    return doc if st == 200 else None


def events(sim, ns):
    _, doc = sim.json("GET", "/api/v1/namespaces/%s/events" % ns, expect=200)
    n = len(doc["items"])
    _, doc = sim.json("GET", "/apis/events.k8s.io/v1/namespaces/%s/events" % ns, expect=200)
    return n + len(doc["items"])


def would(log, what):
    return len(re.findall(r"dry run: would %s(?:$|[\s,])" % re.escape(what), log, re.M))


PREVIEWS = ["create configmaps %(ns)s/%(p)s-child",
            "patch configmaps %(ns)s/%(p)s: metadata.labels.test.kctrld.io/seen",
            "apply configmaps %(ns)s/%(p)s: metadata.annotations.test.kctrld.io/applied",
            "delete configmaps %(ns)s/%(p)s-old"]


def previews(log, ns, p):
    return [would(log, w % {"ns": ns, "p": p}) for w in PREVIEWS] + \
        [len(re.findall(r"dry run: would record Event Normal Previewed about ConfigMap %s/%s:" % (ns, p), log))]


def unchanged(sim, ns, p, rv):
    parent = get(sim, ns, p)
    assert parent["metadata"]["resourceVersion"] == rv, parent
    assert "test.kctrld.io/seen" not in (parent["metadata"].get("labels") or {}), parent
    assert "test.kctrld.io/applied" not in (parent["metadata"].get("annotations") or {}), parent
    assert get(sim, ns, p + "-child") is None
    assert get(sim, ns, p + "-old") is not None
    assert events(sim, ns) == 0


def hook_file():
    d = tempfile.mkdtemp(prefix="kctrld-dryrun-")
    path = os.path.join(d, "hook.py")
    with open(path, "w") as f:
        f.write(HOOK)
    return path


def test_dry_run_flag_writes_nothing_and_logs_each_write():
    with Apisim() as sim:
        setup(sim, "dr", "p1")
        rv = get(sim, "dr", "p1")["metadata"]["resourceVersion"]
        with Kctrld(config(hook_file(), [("dr", "")]), sim.kubeconfig, args=["--dry-run"]) as k:
            wait_for(lambda: min(previews(k.log(), "dr", "p1")) >= 1 or not k.alive(),
                     what="every write of p1 previewed")
            assert k.alive(), k.log()[-3000:]
            assert "controller dr: dry run:" in k.log()
            unchanged(sim, "dr", "p1", rv)
            # Every write the daemon sent carried dryRun=All.
            writes = [r for r in sim.control("GET", "requests")["requests"]
                      if r["method"] in ("POST", "PUT", "PATCH", "DELETE") and "/_apisim/" not in r["path"]
                      and "/namespaces/dr/" in r["path"]]
            assert len(writes) >= 4, writes
            assert all("dryRun=All" in r["query"] for r in writes[-4:]), writes
            wait_for(lambda: all(k.metric(k.scrape(), "kctrld_dry_run_writes_total",
                                          'controller="dr",verb="%s"' % verb) == 1
                                 for verb in ("create", "patch", "apply", "delete", "event")),
                     what="each write counted once")
            # A change reconciles again and previews the same writes again.
            p1 = get(sim, "dr", "p1")
            p1["data"] = {"v": "2"}
            sim.json("PUT", cm_path("dr", "p1"), p1, expect=200)
            rv2 = get(sim, "dr", "p1")["metadata"]["resourceVersion"]
            wait_for(lambda: min(previews(k.log(), "dr", "p1")) >= 2, what="the writes previewed again")
            # No hot loop: a second parent is reconciled from start to end
            # meanwhile, and p1 was reconciled exactly twice.
            sim.json("POST", cm_path("dr"), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                "name": "p2", "labels": {"role": "parent"}}}, expect=201)
            # (p2 has no p2-old: that delete is a 404, done, and previews nothing)
            wait_for(lambda: min(previews(k.log(), "dr", "p2")[:3]) >= 1, what="p2 previewed")
            log = k.log()
            assert previews(log, "dr", "p1") == [2] * 5, previews(log, "dr", "p1")
            assert len(re.findall(r"hook stderr: reconcile dr/p1\b", log)) == 2, log[-3000:]
            unchanged(sim, "dr", "p1", rv2)
            assert get(sim, "dr", "p2-child") is None
            # (/metrics may serve a collection a moment old)
            wait_for(lambda: k.metric(k.scrape(), "kctrld_dry_run_writes_total", 'verb="patch"') == 3,
                     what="3 patches counted")


def test_dry_run_per_controller():
    with Apisim() as sim:
        setup(sim, "dr", "p1")
        setup(sim, "live", "p1")
        rv = get(sim, "dr", "p1")["metadata"]["resourceVersion"]
        cfg = config(hook_file(), [("dr", "    dryRun: true\n"), ("live", "")])
        with Kctrld(cfg, sim.kubeconfig) as k:
            wait_for(lambda: (min(previews(k.log(), "dr", "p1")) >= 1 and get(sim, "live", "p1-child") is not None
                              and get(sim, "live", "p1-old") is None) or not k.alive(),
                     what="dr previewed and live written")
            assert k.alive(), k.log()[-3000:]
            unchanged(sim, "dr", "p1", rv)
            live = get(sim, "live", "p1")
            assert live["metadata"]["labels"]["test.kctrld.io/seen"] == "yes", live
            assert live["metadata"]["annotations"]["test.kctrld.io/applied"] == "yes", live
            wait_for(lambda: events(sim, "live") >= 1, what="the live controller's Event")
            log = k.log()
            assert not re.search(r"dry run: would \w+ configmaps live/", log), log[-3000:]
            wait_for(lambda: k.metric(k.scrape(), "kctrld_dry_run_writes_total", 'controller="dr"') >= 5,
                     what="dr's writes counted")
            assert k.metric(k.scrape(), "kctrld_dry_run_writes_total", 'controller="live"') == 0


def test_dry_run_isolated_plugin():
    """An isolated plugin's writes travel through its child's pipes and go
    out from the daemon: dry-run there too."""
    tmp = tempfile.mkdtemp(prefix="kctrld-dryrun-")
    so = taplib.build_plugin(os.path.join(taplib.ROOT, "tests", "integration", "plugins", "statuspatch.c"), tmp)
    with Apisim() as sim:
        sim.json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": "dr"}}, expect=201)
        sim.json("POST", cm_path("dr"), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ok-1"},
                                         "data": {"seq": "1"}}, expect=201)
        rv = get(sim, "dr", "ok-1")["metadata"]["resourceVersion"]
        cfg = ("metrics: { bindAddress: \"127.0.0.1:0\" }\ncontrollers:\n  - name: iso\n    plugin: %s\n"
               "    for: { apiVersion: v1, kind: ConfigMap }\n    isolation: process\n    dryRun: true\n" % so)
        with Kctrld(cfg, sim.kubeconfig) as k:
            wait_for(lambda: would(k.log(), "patch configmaps dr/ok-1: metadata.annotations.test.kctrld.io/seen")
                     or not k.alive(), what="the isolated plugin's patch previewed")
            assert k.alive(), k.log()[-3000:]
            assert get(sim, "dr", "ok-1")["metadata"]["resourceVersion"] == rv
            wait_for(lambda: k.metric(k.scrape(), "kctrld_dry_run_writes_total", 'controller="iso",verb="patch"') == 1,
                     what="the patch counted")


if __name__ == "__main__":
    run_tests(globals())
