#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Read your own writes (docs/design.md "Read your own writes") against
kube-apisim with every answer 200 ms late, watch events included
(/_apisim/latency with watchEvents).

The counter: an exec hook that adds one to data.count of a ConfigMap with a
merge patch carrying the cached resourceVersion, and asks to run again after
1 ms. Without the wait, the reconcile that follows a write reads the cache
before the write's watch event arrived: its patch names the old
resourceVersion and gets a 409. With it (the default), the key waits until
the informer has observed the write, so no patch conflicts and no increment
is lost. Both runs in one test, WINDOW seconds each: the issue's bound (at
least 8 increments and at most 1 conflict in 10 s) scaled to the window.

Cost: about 13 s of wall time, the two windows and two daemon starts; the
measurement is of writes per unit of real time with real latency, which
no manual clock can stand in for.

Witnesses: the simulator's request log (each PATCH of the counter and its
code), the ConfigMap itself (its count equals the successful PATCHes), and
the daemon's kctrld_stale_sync_skips_total / kctrld_read_your_writes_*.
"""
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from taplib import Apisim, Kctrld, run_tests, wait_for  # noqa: E402

CMS = "/api/v1/namespaces/%s/configmaps"  # one namespace per run: each daemon sees one counter
LATENCY_MS = 200
WINDOW = 5.0

HOOK = r'''
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    cm = req["object"]
    if cm is None:
        print(json.dumps({"result": "done"}), flush=True)
        continue
    md = cm["metadata"]
    n = int((cm.get("data") or {}).get("count", "0"))
    patch = {"metadata": {"resourceVersion": md["resourceVersion"]}, "data": {"count": str(n + 1)}}
    print(json.dumps({"result": "requeueAfter", "requeueAfter": "1ms", "actions": [
        {"action": "patch", "apiVersion": "v1", "kind": "ConfigMap", "namespace": md["namespace"],
         "name": md["name"], "patch": patch}]}), flush=True)
'''

CONFIG = """
metrics: { bindAddress: "127.0.0.1:0" }
informers:
  - apiVersion: v1
    kind: ConfigMap
    namespaces: [%(ns)s]
controllers:
  - name: counter
    for: { apiVersion: v1, kind: ConfigMap }
    readYourOwnWrites: %(ryow)s
    rateLimit: { baseDelay: 5ms, maxDelay: 1s }
    hook:
      exec:
        command: [python3, %(hook)s]
        mode: persistent
"""


def patches(sim, name):
    """Codes of the PATCH requests to the counter in namespace name so far
    (the request log)."""
    log = sim.control("GET", "requests")["requests"]
    path = CMS % name + "/counter"
    return [r["code"] for r in log if r["method"] == "PATCH" and r["path"] == path]


def run_counter(sim, tmp, name, ryow):
    """Runs the counter in namespace name for WINDOW seconds; returns
    (increments, conflicts, metrics snapshot)."""
    hook = os.path.join(tmp, "counter.py")
    with open(hook, "w") as f:
        f.write(HOOK)
    sim.json("POST", "/api/v1/namespaces",
             {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, expect=201)
    sim.json("POST", CMS % name, {"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "counter"}, "data": {"count": "0"}}, expect=201)
    cfg = CONFIG % {"ns": name, "ryow": "true" if ryow else "false", "hook": hook}
    with Kctrld(cfg, sim.kubeconfig, dir=os.path.join(tmp, name)) as k:
        k.metrics_port()
        wait_for(lambda: patches(sim, name), timeout=30, what="the first patch of " + name)
        start = time.monotonic()
        first = len(patches(sim, name))
        time.sleep(WINDOW)  # the measurement window itself: counts over a fixed time
        codes = patches(sim, name)[first - 1:]
        snap = k.scrape()
        took = time.monotonic() - start
        assert not k.log().count("\nerror "), k.log()[-3000:]
    _, doc = sim.json("GET", CMS % name + "/counter", expect=200)
    ok_total = sum(1 for c in patches(sim, name) if c == 200)
    assert int(doc["data"]["count"]) == ok_total, (doc["data"], ok_total)  # no lost increment
    inc = sum(1 for c in codes if c == 200)
    conflicts = sum(1 for c in codes if c == 409)
    print("# readYourOwnWrites=%s: %d increments, %d conflicts in %.1f s; skips %d, timeouts %d"
          % (ryow, inc, conflicts, took, Kctrld.metric(snap, "kctrld_stale_sync_skips_total"),
             Kctrld.metric(snap, "kctrld_read_your_writes_timeouts_total")), flush=True)
    return inc, conflicts, snap


def test_counter_reads_its_own_writes():
    tmp = tempfile.mkdtemp(prefix="ryow-")
    with Apisim() as sim:
        sim.control("POST", "latency", {"ms": LATENCY_MS, "watchEvents": True})
        scale = WINDOW / 10.0
        inc, conflicts, snap = run_counter(sim, tmp, "ryow-on", True)
        assert inc >= 8 * scale, inc
        assert conflicts <= 1, conflicts
        assert Kctrld.metric(snap, "kctrld_stale_sync_skips_total") >= inc - 1, snap
        assert Kctrld.metric(snap, "kctrld_read_your_writes_wait_seconds_count") >= inc - 1
        assert Kctrld.metric(snap, "kctrld_read_your_writes_timeouts_total") == 0
        inc, conflicts, snap = run_counter(sim, tmp, "ryow-off", False)
        assert conflicts >= 2, (inc, conflicts)  # switched off: it reads its stale cache
        assert Kctrld.metric(snap, "kctrld_stale_sync_skips_total") == 0


if __name__ == "__main__":
    run_tests(globals())
