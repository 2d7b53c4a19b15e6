#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`isolation: process` (daemon/hooks/isolate.h, docs/plugins.md "Process
isolation") against kube-apisim: a plugin that crashes, aborts, hangs or
breaks the protocol on one key leaves the daemon serving.

tests/integration/plugins/isolated.c picks its failure from the name of the
ConfigMap it reconciles: "segv" dereferences NULL, "abort" calls abort(),
"hang" sleeps past the controller's reconcileTimeout (1s in that case) and
"garbage" writes a line of its own onto the child's channel to the daemon;
"printf" printf()s a debugging line to stdout and then labels the object
like every other name. One test per failure kind (the same test,
parametrised: KINDS), each with two controllers running the plugin in child
processes on the same ConfigMaps: "iso", and "other" with the setting safe
(no failure) and a label of its own. The failing key must be retried with
the per-key backoff (growing attempt numbers), every other key of both
controllers must still be reconciled (also keys created after the failures,
by restarted children), /readyz must stay 200, the daemon must stay up with
no zombie child left, controller_runtime_reconcile_panics_total
{controller="iso"} must count the failures, and the log must name the cause
(signal / "hung past reconcileTimeout" / "broke the protocol"), the plugin
and the key (for the SIGSEGV also in the child's own crash report with a
backtrace, daemon/base/crashreport.h, relayed from its stderr). The printf line
must reach the log (the child points its fd 1 at stderr) without breaking
the protocol.
"""
import os
import re
import subprocess
import sys
import time
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
%(timeout)s    settings: { greeting: hello }
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


def attempts(log, key):
    return [int(a) for a in re.findall(r"Reconciler error .*key=%s .*attempt=(\d+)" % re.escape(key), log)]


def zombies(pid):
    """The children of pid that are zombies (exited, not reaped), by ps."""
    ps = subprocess.run(["ps", "-o", "pid=,stat=", "--ppid", str(pid)], capture_output=True, text=True,
                        timeout=10)
    return [int(line.split()[0]) for line in ps.stdout.splitlines() if line.split()[1].startswith("Z")]


# kind: (the reconcileTimeout of "iso" or None, how the log names the cause)
KINDS = {
    # an ASan build's child reports the SEGV itself and exits 1
    "segv": (None, r"(was killed by signal 11 \(SIGSEGV: [^)]*\)|exited with status 1)"),
    "abort": (None, r"was killed by signal 6 \(SIGABRT: [^)]*\)"),
    "hang": ("1s", r"hung past reconcileTimeout \(1000ms\); killed"),
    "garbage": (None, r"broke the protocol \(an unparsable or unexpected line\); killed"),
}


def failure_costs_only_its_key(kind):
    timeout, cause = KINDS[kind]
    bad = "default/" + kind
    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="kctrld-isolate-")
    so = taplib.build_plugin(os.path.join(ROOT, "tests", "integration", "plugins", "isolated.c"), tmp)
    config = CONFIG % {"so": so, "timeout": "    reconcileTimeout: %s\n" % timeout if timeout else ""}
    with Apisim() as sim:
        cm(sim, "default", "ok1")
        with taplib.Kctrld(config, sim.kubeconfig, dir=os.path.join(tmp, "run")) as k:
            wait_for(lambda: "ready:" in k.log() or not k.alive(), what="kctrld ready")
            assert k.alive(), k.log()[-3000:]
            wait_for(lambda: readyz(k)[0] == 200, what="/readyz 200")
            cm(sim, "default", kind)
            cm(sim, "default", "printf")
            wait_for(lambda: label(sim, "default", "ok1") == "hello", what="default/ok1 labelled", timeout=30)
            wait_for(lambda: label(sim, "default", "ok1", "other") == "there", what="default/ok1 labelled by other",
                     timeout=30)
            wait_for(lambda: label(sim, "default", kind, "other") == "there",
                     what="%s labelled by other" % bad, timeout=30)
            # A plugin's printf to stdout does not break the protocol.
            wait_for(lambda: label(sim, "default", "printf") == "hello", what="default/printf labelled", timeout=30)
            # The failing key is retried with backoff: attempts 1, 2, 3, ...
            wait_for(lambda: len(attempts(k.log(), bad)) >= 3 or not k.alive(), what="3 attempts of " + bad,
                     timeout=30)
            assert k.alive(), k.log()[-3000:]
            assert attempts(k.log(), bad)[:3] == [1, 2, 3], attempts(k.log(), bad)
            assert readyz(k)[0] == 200, readyz(k)
            # Keys created after the failures are reconciled by new children,
            # in both controllers.
            cm(sim, "default", "ok3")
            wait_for(lambda: label(sim, "default", "ok3") == "hello", what="default/ok3 labelled", timeout=30)
            wait_for(lambda: label(sim, "default", "ok3", "other") == "there", what="default/ok3 labelled by other",
                     timeout=30)
            assert readyz(k)[0] == 200, readyz(k)
            # Every dead child was reaped (the one of a failure in flight may
            # not be yet: bounded poll).
            wait_for(lambda: not zombies(k.proc.pid), what="no zombie child of kctrld", timeout=10)
            # /metrics is a snapshot up to 100 ms old: poll for the third panic.
            snap = wait_for(lambda: (lambda s: s if k.metric(s, "controller_runtime_reconcile_panics_total",
                                                              'controller="iso"') >= 3 else None)(k.scrape()),
                            what="three panics of controller iso in /metrics", timeout=10)
            assert k.metric(snap, "controller_runtime_reconcile_panics_total", 'controller="other"') == 0
            assert k.metric(snap, "workqueue_retries_total", 'controller="iso"') >= 2
            log = k.log()
            # The log names the cause, the plugin and the key.
            m = re.search(r"plugin child .*\d+ \(%s\) %s reconciling %s" % (re.escape(so), cause, re.escape(bad)),
                          log)
            assert m, log[-4000:]
            assert not re.search(r"plugin child .* reconciling default/(ok\d|printf)", log), log[-4000:]
            if kind == "segv":
                assert "about to crash on default/segv" in log  # the child's stderr, relayed
                if "fatal-signal report off" not in log:  # (not an ASan build) the child's crash report
                    crash = [ln for ln in log.splitlines()
                             if "stderr: kctrld: fatal signal SIGSEGV " in ln and " while reconciling" in ln]
                    assert crash, log[-4000:]
                    assert all(f in crash[0].split() for f in
                               ("controller=iso", "plugin=%s" % so, "key=default/segv")), crash
                    assert "stderr: kctrld: backtrace:" in log
            assert k.alive(), log[-3000:]
        assert k.code == 0, (k.code, k.log()[-3000:])
        # The printf line went to the log through the child's stderr (all
        # of it is forwarded by the time the children are stopped and the
        # daemon exits).
        assert "printf debugging in reconcile of default/printf" in k.log(), k.log()[-4000:]
    print("# %s: %.1fs" % (kind, time.monotonic() - t0), flush=True)


for _kind in KINDS:
    globals()["test_%s_costs_only_its_key" % _kind] = (lambda kind: lambda: failure_costs_only_its_key(kind))(_kind)


def test_poison_keys_cost_healthy_keys_nothing():
    """7 ConfigMaps whose reconcile kills the plugin's child and 5 healthy
    ones, on 2 workers: every healthy key is labelled within 2 s and never
    failed (no error, no child lost on it); each poison key pays alone."""
    tmp = tempfile.mkdtemp(prefix="kctrld-isolate-poison-")
    so = taplib.build_plugin(os.path.join(ROOT, "tests", "integration", "plugins", "isolated.c"), tmp)
    config = CONFIG.split("  - name: other")[0] % {"so": so, "timeout": ""}
    with Apisim() as sim:
        cm(sim, "default", "warm")
        with taplib.Kctrld(config, sim.kubeconfig, dir=os.path.join(tmp, "run")) as k:
            wait_for(lambda: label(sim, "default", "warm") == "hello", what="default/warm labelled", timeout=30)
            poison = ["exit-%d" % i for i in range(7)]
            healthy = ["ok%d" % i for i in range(5)]
            for n in poison:  # first: the healthy keys queue behind them
                cm(sim, "default", n)
            for n in healthy:
                cm(sim, "default", n)
            t0 = time.monotonic()
            took = {}
            while len(took) < len(healthy) and time.monotonic() - t0 < 3.0:
                for n in healthy:
                    if n not in took and label(sim, "default", n) == "hello":
                        took[n] = time.monotonic() - t0
                time.sleep(0.02)
            print("# healthy keys labelled after %s s" % ", ".join("%.2f" % took.get(n, -1) for n in healthy),
                  flush=True)
            assert len(took) == len(healthy) and max(took.values()) <= 2.0, (took, k.log()[-3000:])
            wait_for(lambda: all(2 in attempts(k.log(), "default/" + n) for n in poison),
                     what="every poison key failed twice", timeout=30)
            log = k.log()
            for n in healthy:
                assert not attempts(log, "default/" + n), log[-3000:]
                assert "reconciling default/%s;" % n not in log, log[-3000:]
            assert "backs off" not in log, log[-3000:]  # 7 poison keys: the plugin works
            assert k.alive(), log[-3000:]
        assert k.code == 0, (k.code, k.log()[-3000:])


def children(pid):
    """The pids of pid's children (taplib.children)."""
    return [c[0] for c in taplib.children(pid)]


def test_idle_child_death_reaped():
    """A child SIGKILLed between reconciles is reaped and logged within the
    daemon's 1 s tick, with no reconcile, and the next key still works."""
    tmp = tempfile.mkdtemp(prefix="kctrld-isolate-idle-")
    so = taplib.build_plugin(os.path.join(ROOT, "tests", "integration", "plugins", "isolated.c"), tmp)
    with Apisim() as sim:
        cm(sim, "default", "ok1")
        with taplib.Kctrld(CONFIG % {"so": so, "timeout": ""}, sim.kubeconfig, dir=os.path.join(tmp, "run")) as k:
            wait_for(lambda: label(sim, "default", "ok1") == "hello", what="default/ok1 labelled", timeout=30)
            wait_for(lambda: label(sim, "default", "ok1", "other") == "there", what="ok1 labelled by other",
                     timeout=30)
            kids = wait_for(lambda: [c for c in children(k.proc.pid) if c not in zombies(k.proc.pid)] or None,
                            what="a plugin child of kctrld", timeout=10)
            victim = kids[0]
            os.kill(victim, 9)
            wait_for(lambda: re.search(r"plugin child %d \(%s\) was killed by signal 9 [^\n]*while idle "
                                       r"\(between reconciles\); reaped" % (victim, re.escape(so)), k.log()),
                     what="the idle death of pid %d logged" % victim, timeout=10)
            wait_for(lambda: not zombies(k.proc.pid), what="no zombie child of kctrld", timeout=10)
            assert victim not in children(k.proc.pid)
            # Counted as an idle exit, not as a panic (/metrics: a snapshot up to 100 ms old).
            snap = wait_for(lambda: (lambda s: s if k.metric(s, "kctrld_plugin_child_idle_exits_total") >= 1
                                     else None)(k.scrape()), what="the idle exit in /metrics", timeout=10)
            assert k.metric(snap, "kctrld_plugin_child_idle_exits_total") == 1, snap
            assert k.metric(snap, "controller_runtime_reconcile_panics_total") == 0, snap
            cm(sim, "default", "ok2")
            wait_for(lambda: label(sim, "default", "ok2") == "hello", what="default/ok2 labelled", timeout=30)
            wait_for(lambda: label(sim, "default", "ok2", "other") == "there", what="ok2 labelled by other",
                     timeout=30)
            assert not re.search(r"reconciling default/ok\d", k.log()), k.log()[-3000:]
            assert k.alive(), k.log()[-3000:]
        assert k.code == 0, (k.code, k.log()[-3000:])


if __name__ == "__main__":
    run_tests(globals())
