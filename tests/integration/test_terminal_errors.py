#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Terminal errors against kube-apisim (docs/plugins.md "Terminal errors").

tests/integration/plugins/statuspatch.c merge-patches the status of
ConfigMaps named status-* (ConfigMaps have no status subresource: kube-apisim
answers 404 NotFound naming no object, as kube-apiserver does) and returns an
ordinary error with the return code. The daemon makes it terminal: one
"Reconciler error terminal=true" line naming the subresource,
controller_runtime_terminal_reconcile_errors_total 1 (and the error counters
1), and no retry: while other ConfigMaps are created and changed and
reconciled (each a success the test waits for, event by event), the
status-* key is not reconciled again, although the default backoff (5ms
doubling) would have retried it many times by then. A change of the object
reconciles it again. Once in-process, once with `isolation: process` (the
child's host tells the failure from the Status fields the daemon passes on).
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import taplib  # noqa: E402
from taplib import ROOT, Apisim, run_tests, wait_for  # noqa: E402

NS = "default"
CMS = "/api/v1/namespaces/%s/configmaps" % NS


def put_cm(sim, name, seq):
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS},
            "data": {"seq": str(seq)}}
    st, _ = sim.json("PUT", CMS + "/" + name, body)
    if st == 404:
        sim.json("POST", CMS, body, expect=201)
    else:
        assert st == 200, st


def seen(sim, name):
    _, cm = sim.json("GET", CMS + "/" + name, expect=200)
    return (cm["metadata"].get("annotations") or {}).get("test.kctrld.io/seen")


def run(isolation):
    tmp = tempfile.mkdtemp(prefix="kctrld-terminal-")
    so = taplib.build_plugin(os.path.join(ROOT, "tests", "integration", "plugins", "statuspatch.c"), tmp)
    with Apisim() as sim:
        put_cm(sim, "status-x", 1)
        config = ("metrics: { bindAddress: \"127.0.0.1:0\" }\n"
                  "controllers:\n"
                  "  - name: statuspatch\n    plugin: %s\n"
                  "    for: { apiVersion: v1, kind: ConfigMap }\n"
                  "    workers: 2\n" % so)
        if isolation:
            config += "    isolation: process\n"
        with taplib.Kctrld(config, sim.kubeconfig) as k:
            k.metrics_port()

            def m(name, contains=""):
                return k.metric(k.scrape(), name, contains)
            wait_for(lambda: m("controller_runtime_terminal_reconcile_errors_total") >= 1 or not k.alive(),
                     what="the terminal error")
            assert k.alive(), k.log()[-3000:]
            # Other keys proceed, one event after the other: each change is
            # reconciled (its annotation written) before the next.
            for i in range(6):
                name = "ok-%d" % (i % 2)
                put_cm(sim, name, i)
                wait_for(lambda: seen(sim, name) == str(i), what="%s reconciled at seq %d" % (name, i))
            snap = k.scrape()
            assert k.metric(snap, "controller_runtime_terminal_reconcile_errors_total") == 1, snap
            assert k.metric(snap, "controller_runtime_reconcile_errors_total") == 1, snap
            assert k.metric(snap, "controller_runtime_reconcile_total", 'result="error"') == 1, snap
            assert k.metric(snap, "workqueue_retries_total") == 0, snap
            log = k.log()
            lines = [ln for ln in log.splitlines() if "Reconciler error" in ln]
            assert len(lines) == 1, lines
            line = lines[0]
            assert " error " in line and "terminal=true" in line, line
            assert "key=default/status-x" in line and "reconcileID=" in line, line
            assert "patch default/status-x: -95: configmaps has no status subresource (HTTP 404 on PATCH)" \
                in line, line
            # A change of the object: reconciled again, terminal again.
            put_cm(sim, "status-x", 2)
            wait_for(lambda: m("controller_runtime_terminal_reconcile_errors_total") >= 2,
                     what="the second terminal error")
            assert m("workqueue_retries_total") == 0
            assert k.stop() == 0, k.log()[-3000:]


def test_terminal_in_process():
    run(False)


def test_terminal_isolated():
    run(True)


if __name__ == "__main__":
    run_tests(globals())
