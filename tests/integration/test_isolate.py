#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`isolation: process` (daemon/isolate.h, docs/plugins.md "Process
isolation") against kube-apisim: a plugin that segfaults on one key leaves
the daemon serving.

tests/integration/plugins/isolated.c dereferences NULL when it reconciles a
ConfigMap named "segv" and labels every other one. Two controllers run it in
child processes on the same ConfigMaps: "iso", and "other" with the setting
safe (no crash) and a label of its own. The crashing key must be
retried with the per-key backoff (growing attempt numbers), every other key
of both controllers must still be reconciled (also keys created after the
crashes, by restarted children), /readyz must stay 200, the daemon must stay
up, controller_runtime_reconcile_panics_total{controller="iso"} must count
the crashes, and the log must name the signal, the plugin and the key (also
in the child's own crash report with a backtrace, daemon/crashreport.h,
relayed from its stderr).
"""
import os
import re
import sys
import tempfile
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import taplib  # noqa: E402
from taplib import ROOT, Apisim, run_tests, wait_for  # noqa: E402

CONFIG = """metrics: { bindAddress: "127.0.0.1:0" }
informers:
  - { apiVersion: v1, kind: ConfigMap, namespaces: [default] }
controllers:
  - name: iso
    plugin: %(so)s
    isolation: process
    for: { apiVersion: v1, kind: ConfigMap }
    workers: 2
    rateLimit: { baseDelay: 100ms, maxDelay: 2s }
    settings: { greeting: hello }
  - name: other
    plugin: %(so)s
    isolation: process
    for: { apiVersion: v1, kind: ConfigMap }
    settings: { greeting: there, label: other, safe: true }
"""


def cm(sim, ns, name):
    code, _, body = sim.request("POST", "/api/v1/namespaces/%s/configmaps" % ns,
                                {"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": name}, "data": {"k": "v"}})
    assert code == 201, (code, body)


def label(sim, ns, name, key="isolated"):
    _, body = sim.json("GET", "/api/v1/namespaces/%s/configmaps/%s" % (ns, name), expect=200)
    return ((body.get("metadata") or {}).get("labels") or {}).get(key)


def readyz(k):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % k.metrics_port(), timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def segv_attempts(log):
    return [int(a) for a in re.findall(r"Reconciler error .*key=default/segv .*attempt=(\d+)", log)]


def test_segfault_costs_only_its_key():
    tmp = tempfile.mkdtemp(prefix="kctrld-isolate-")
    so = taplib.build_plugin(os.path.join(ROOT, "tests", "integration", "plugins", "isolated.c"), tmp)
    with Apisim() as sim:
        cm(sim, "default", "ok1")
        with taplib.Kctrld(CONFIG % {"so": so}, sim.kubeconfig, dir=os.path.join(tmp, "run")) as k:
            wait_for(lambda: "ready:" in k.log() or not k.alive(), what="kctrld ready")
            assert k.alive(), k.log()[-3000:]
            wait_for(lambda: readyz(k)[0] == 200, what="/readyz 200")
            cm(sim, "default", "segv")
            wait_for(lambda: label(sim, "default", "ok1") == "hello", what="default/ok1 labelled", timeout=30)
            wait_for(lambda: label(sim, "default", "ok1", "other") == "there", what="default/ok1 labelled by other",
                     timeout=30)
            wait_for(lambda: label(sim, "default", "segv", "other") == "there",
                     what="default/segv labelled by other", timeout=30)
            # The crashing key is retried with backoff: attempts 1, 2, 3, ...
            wait_for(lambda: len(segv_attempts(k.log())) >= 3 or not k.alive(), what="3 attempts of default/segv",
                     timeout=30)
            assert k.alive(), k.log()[-3000:]
            attempts = segv_attempts(k.log())
            assert attempts[:3] == [1, 2, 3], attempts
            assert readyz(k)[0] == 200, readyz(k)
            # Keys created after the crashes are reconciled by new children,
            # in both controllers.
            cm(sim, "default", "ok3")
            wait_for(lambda: label(sim, "default", "ok3") == "hello", what="default/ok3 labelled", timeout=30)
            wait_for(lambda: label(sim, "default", "ok3", "other") == "there", what="default/ok3 labelled by other",
                     timeout=30)
            assert readyz(k)[0] == 200, readyz(k)
            snap = k.scrape()
            panics = k.metric(snap, "controller_runtime_reconcile_panics_total", 'controller="iso"')
            assert panics >= 3, panics
            assert k.metric(snap, "controller_runtime_reconcile_panics_total", 'controller="other"') == 0
            assert k.metric(snap, "workqueue_retries_total", 'controller="iso"') >= 2
            log = k.log()
            # The log names the signal (an ASan build's child reports the
            # SEGV itself and exits 1), the plugin and the key.
            m = re.search(r"plugin child .*pid=\d+ \(%s\) (was killed by signal 11 \(SIGSEGV: [^)]*\)|exited with "
                          r"status 1) reconciling default/segv" % re.escape(so), log)
            assert m, log[-4000:]
            assert "about to crash on default/segv" in log  # the child's stderr, relayed
            if "fatal-signal report off" not in log:  # (not an ASan build) the child's crash report
                assert re.search(r"stderr: kctrld: fatal signal SIGSEGV .* while reconciling controller=iso "
                                 r"plugin=%s key=default/segv" % re.escape(so), log), log[-4000:]
                assert "stderr: kctrld: backtrace:" in log
            assert k.alive(), log[-3000:]
        assert k.code == 0, (k.code, k.log()[-3000:])


if __name__ == "__main__":
    run_tests(globals())
