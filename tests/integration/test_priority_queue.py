#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The workqueue's priorities end to end (docs/design.md "Workqueue
priorities").

kube-apisim holds 3,000 ConfigMaps; kctrld lists them at start-up and one
worker reconciles each in 10 ms (tests/integration/plugins/pace.c, which logs
"paced ... n=N key=K" after each), a backlog of about 30 s. Two seconds after
the start, once the backlog is being worked off, a new ConfigMap is created.
Its watch event queues it at normal priority, ahead of the listed keys (low),
so it is reconciled within 2 s of its creation. The order is checked too, as
a bound that holds however slow the build (a sanitizer): fewer than half of
the 3,000 ran before it, where a FIFO would run all of them first. While
the backlog waits, workqueue_depth_by_priority holds it at low and its
priorities add up to workqueue_depth. Prints TAP.
"""
import os
import re
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import taplib  # noqa: E402

BACKLOG = 3000
NEW = "default/prio-new"
PACED = re.compile(r"paced (?:\S+ )*?n=(\d+) key=(\S+)")


def paced(k):
    """[(n, key)] of the reconciles logged so far."""
    return [(int(m.group(1)), m.group(2)) for m in PACED.finditer(k.log())]


def queue_depths(k):
    """(low, sum by priority, workqueue_depth) from one scrape once it shows
    the listed backlog, else None (a scrape may serve an older snapshot)."""
    snap = k.scrape()
    low = k.metric(snap, "workqueue_depth_by_priority", 'priority="low"')
    total = k.metric(snap, "workqueue_depth_by_priority", 'controller="paced"')
    return (low, total, k.metric(snap, "workqueue_depth", 'controller="paced"')) if low else None


def test_event_overtakes_listed_backlog():
    for name in ("kctrld", "kube-apisim"):
        if not os.access(os.path.join(taplib.BUILD, name), os.X_OK):
            raise taplib.Skip("%s not built" % name)
    tmp = tempfile.mkdtemp(prefix="prio-")
    os.chmod(tmp, 0o700)  # plugin directories must not be writable by others
    so = taplib.build_plugin(os.path.join(HERE, "plugins", "pace.c"), tmp, "-O2")
    cfg = ("shutdownTimeout: 3s\n"
           "metrics: { bindAddress: \"127.0.0.1:0\" }\n"
           "informers:\n  - { apiVersion: v1, kind: ConfigMap }\n"
           "controllers:\n  - name: paced\n    plugin: %s\n"
           "    for: { apiVersion: v1, kind: ConfigMap }\n    workers: 1\n"
           "    settings: { sleepMs: 10 }\n" % so)
    with taplib.Apisim("--generate", "configmaps=%d" % BACKLOG) as sim:
        with taplib.Kctrld(cfg, sim.kubeconfig, dir=os.path.join(tmp, "k")) as k:
            started = time.monotonic()
            taplib.wait_for(lambda: len(paced(k)) >= 50, timeout=20, what="the backlog to start")
            depths = taplib.wait_for(lambda: queue_depths(k), timeout=10,
                                     what="the backlog in workqueue_depth_by_priority")
            low, total, depth = depths
            assert low > BACKLOG / 2 and total == depth, depths
            time.sleep(max(0.0, started + 2.0 - time.monotonic()))  # the "2 s after start"

            created = time.monotonic()
            sim.json("POST", "/api/v1/namespaces/default/configmaps",
                     {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "prio-new", "namespace": "default"}}, expect=201)
            hit = taplib.wait_for(lambda: [n for n, key in paced(k) if key == NEW], timeout=20,
                                  what="the new ConfigMap's reconcile")
            latency = time.monotonic() - created
            before = hit[0] - 1
            print("# reconciled %.2f s after its creation, after %d of the %d listed keys"
                  % (latency, before, BACKLOG))
            assert latency < 2.0, latency
            assert before < BACKLOG / 2, before
            assert k.stop() == 0, k.log()[-3000:]


if __name__ == "__main__":
    taplib.run_tests(globals())
