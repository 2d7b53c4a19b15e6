#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Integration test of the nsdefault exec hook (plugins/hooks/nsdefault,
bash + jq, per-call mode) against kube-apisim: every Namespace gets its
default ConfigMap (create, owned by the Namespace), a changed annotation
updates it (update with the cached resourceVersion; a 409 is requeued and
retried), a skip label deletes it (delete with a uid precondition), one
deleted by hand comes back within 5 s with resync off (the ConfigMap's
delete event names its owner's key, the Namespace's name) and is created
once per loss (the hook's expectations), an annotation that is not JSON is
an error retried with per-key backoff while other Namespaces go on, and a
deleted Namespace is reconciled as gone without a create."""
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import itest  # noqa: E402
from itest import Cluster, Kctrld, wait_for  # noqa: E402
import taplib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
HOOK = os.path.abspath(os.path.join(HERE, "..", "nsdefault", "nsdefault.sh"))
NAME = "kctrld-defaults"
ANN = "nsdefault.kctrld.io/data"

CONFIG = """
logLevel: info
metrics: { bindAddress: "127.0.0.1:0" }
controllers:
  - name: nsdefault
    for: { apiVersion: v1, kind: Namespace }
    owns: [ { apiVersion: v1, kind: ConfigMap } ]
    rateLimit: { baseDelay: 50ms, maxDelay: 2s }
    hook:
      exec:
        command: [bash, %s]
        mode: per-call
        env: { NSDEFAULT_DATA: '{"team": "unknown", "tier": 1}' }
        timeout: 10s
"""


def cm_path(ns):
    return "/api/v1/namespaces/%s/configmaps/%s" % (ns, NAME)


def data_of(c, ns):
    cm = c.get(cm_path(ns))
    return cm and cm.get("data")


def namespace(c, name, annotations=None):
    md = {"name": name}
    if annotations:
        md["annotations"] = annotations
    c.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": md})


def reconciled(k):
    return k.metric(k.scrape(), "controller_runtime_reconcile_total", 'controller="nsdefault",result="success"')


def creates(sim, ns):
    return requests(sim, "POST", "/api/v1/namespaces/%s/configmaps" % ns)


def requests(sim, method, path):
    return [r["code"] for r in sim.control("GET", "requests")["requests"] if r["method"] == method and r["path"] == path]


def test_nsdefault_keeps_default_configmaps():
    itest.require_binaries()
    if not shutil.which("jq"):
        raise taplib.Skip("jq not installed (.ci/install-deps installs it)")
    with taplib.Apisim() as sim:
        c = Cluster(sim)
        namespace(c, "team-a", {ANN: '{"team": "a"}'})
        with Kctrld(CONFIG % HOOK, sim.kubeconfig) as k:
            # create: defaults merged with the annotation, owned by the Namespace
            wait_for(lambda: data_of(c, "team-a") == {"team": "a", "tier": "1"}, what="team-a defaults", kctrld=k)
            cm = c.get(cm_path("team-a"))
            ns = c.get("/api/v1/namespaces/team-a")
            ref = cm["metadata"]["ownerReferences"][0]
            assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == \
                ("Namespace", "team-a", ns["metadata"]["uid"], True), cm
            namespace(c, "team-b")
            wait_for(lambda: data_of(c, "team-b") == {"team": "unknown", "tier": "1"}, what="team-b defaults", kctrld=k)

            # update: the annotation changes; the first PUT gets a 409 and is retried
            sim.control("POST", "faults", {"action": "status", "code": 409, "count": 1, "method": "PUT",
                                           "pathPrefix": cm_path("team-a")})
            c.merge_patch("/api/v1/namespaces/team-a", {"metadata": {"annotations": {ANN: '{"team": "a2"}'}}})
            wait_for(lambda: data_of(c, "team-a") == {"team": "a2", "tier": "1"}, what="team-a updated", kctrld=k)
            assert requests(sim, "PUT", cm_path("team-a"))[-2:] == [409, 200], requests(sim, "PUT", cm_path("team-a"))
            assert re.search(r"actions\[0\] update v1 ConfigMap team-a/%s: conflict .*requeue .*key=team-a" % NAME,
                             k.log()), k.log()

            # delete: the skip label removes it (with the ConfigMap's uid as precondition)
            c.merge_patch("/api/v1/namespaces/team-b", {"metadata": {"labels": {"nsdefault.kctrld.io/skip": "true"}}})
            wait_for(lambda: c.get(cm_path("team-b")) is None, what="team-b's ConfigMap deleted", kctrld=k)
            assert requests(sim, "DELETE", cm_path("team-b")) == [200], requests(sim, "DELETE", cm_path("team-b"))

            # deleted by hand: its delete event wakes the Namespace's key (no resync)
            assert creates(sim, "team-a") == [201], creates(sim, "team-a")
            old_uid = c.get(cm_path("team-a"))["metadata"]["uid"]
            c.delete(cm_path("team-a"))
            wait_for(lambda: (c.get(cm_path("team-a")) or {}).get("metadata", {}).get("uid") not in (None, old_uid),
                     timeout=5, what="team-a recreated within 5 s", kctrld=k)
            assert data_of(c, "team-a") == {"team": "a2", "tier": "1"}
            assert creates(sim, "team-a") == [201, 201], creates(sim, "team-a")  # once, no 409

            # an annotation that is not JSON: an error, retried with per-key backoff
            namespace(c, "team-c", {ANN: "{not json"})
            wait_for(lambda: len(re.findall(r"Reconciler error controller=nsdefault key=team-c .*error=hook: annotation %s of team-c "
                                                      r"is not a JSON object" % re.escape(ANN), k.log())) >= 3, what="team-c retried", kctrld=k)
            # meanwhile other Namespaces are served
            namespace(c, "team-d")
            wait_for(lambda: data_of(c, "team-d") == {"team": "unknown", "tier": "1"}, what="team-d defaults", kctrld=k)
            c.merge_patch("/api/v1/namespaces/team-c", {"metadata": {"annotations": {ANN: '{"team": "c"}'}}})
            wait_for(lambda: data_of(c, "team-c") == {"team": "c", "tier": "1"}, what="team-c once fixed", kctrld=k)
            evs = c.items("/api/v1/namespaces/default/events")
            assert any(e.get("reason") == "DefaultsCreated" and e["involvedObject"]["name"] == "team-a" for e in evs), evs

            # the owner goes (the simulator empties its namespace): its key is reconciled
            # (the hook gets object null) and no create succeeds after it
            done = reconciled(k)
            c.delete("/api/v1/namespaces/team-d")
            wait_for(lambda: reconciled(k) > done, what="team-d reconciled as gone", kctrld=k)
            assert c.get(cm_path("team-d")) is None
            assert creates(sim, "team-d").count(201) == 1, creates(sim, "team-d")
            assert k.stop() == 0, k.log()


if __name__ == "__main__":
    taplib.run_tests(globals())
