#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Two kctrld replicas with leader election against kube-apisim: exactly one
reconciles.

The controller runs tests/integration/plugins/stamp.c (built here like an
out-of-tree plugin), which stamps each ConfigMap with "<identity>/<data.seq>",
so every write names the process that made it. Witnesses: the ConfigMaps'
watch history (every stamp ever written), each process's own
controller_runtime_reconcile_total, and the simulator's request log (PATCHes
are only ever the plugin's: the test itself writes with PUT).

Steps: replica-a leads and stamps everything, replica-b never reconciles;
SIGSTOP replica-a at a quiet moment, change every ConfigMap: replica-b takes
over within leaseDuration + retryPeriod and stamps them; SIGCONT replica-a:
it notices the loss and neither reconciles nor writes while more changes
arrive. Timings: leaseDuration 3s, renewDeadline 2s, retryPeriod 500ms.
"""
import os
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import taplib  # noqa: E402
from taplib import BUILD, ROOT, Apisim, Skip, run_tests, wait_for  # noqa: E402

LD, RP = 3.0, 0.5
NS = "single"
NKEYS = 12
CMS = "/api/v1/namespaces/%s/configmaps" % NS
LEASE = "/apis/coordination.k8s.io/v1/namespaces/%s/leases/kctrld-single" % NS
STAMP = "test.kctrld.io/stamp"


def build_plugin(tmp):
    return taplib.build_plugin(os.path.join(ROOT, "tests", "integration", "plugins", "stamp.c"), tmp)


class Replica(taplib.Kctrld):
    def __init__(self, sim, tmp, so, identity):
        self.identity = identity
        super().__init__("leaderElection:\n  enabled: true\n  namespace: %s\n  name: kctrld-single\n"
                         "  leaseDuration: 3s\n  renewDeadline: 2s\n  retryPeriod: 500ms\n"
                         "shutdownTimeout: 2s\n"
                         "metrics: { bindAddress: \"127.0.0.1:0\" }\n"
                         "controllers:\n"
                         "  - name: stamp\n    plugin: %s\n"
                         "    for: { apiVersion: v1, kind: ConfigMap }\n"
                         "    workers: 2\n"
                         "    settings: { identity: %s }\n" % (NS, so, identity),
                         sim.kubeconfig, args=["--identity", identity], dir=os.path.join(tmp, identity))
        self.metrics_port()

    def metrics(self):
        """{name: sum of its samples} of the current /metrics."""
        out = {}
        for (name, _), v in self.scrape().items():
            out[name] = out.get(name, 0.0) + v
        return out

    def reconciles(self):
        return self.metrics().get("controller_runtime_reconcile_total", 0.0)

    def stop(self):
        """SIGTERM (after SIGCONT); returns the exit code."""
        return super().stop(10, cont=True)


def holder(sim):
    st, obj = sim.json("GET", LEASE)
    return obj["spec"].get("holderIdentity") if st == 200 else None


def stamps(sim):
    _, lst = sim.json("GET", CMS, expect=200)
    return {i["metadata"]["name"]: (i["metadata"].get("annotations") or {}).get(STAMP)
            for i in lst["items"]}


def all_stamped(sim, want):
    s = stamps(sim)
    return len(s) == NKEYS and all(v == want for v in s.values())


def set_seq(sim, seq):
    """Updates data.seq of every ConfigMap with GET + PUT (never PATCH)."""
    for i in range(NKEYS):
        path = "%s/cm-%02d" % (CMS, i)
        for _ in range(5):
            _, obj = sim.json("GET", path, expect=200)
            obj["data"]["seq"] = str(seq)
            st, _ = sim.json("PUT", path, obj)
            if st == 200:
                break
            assert st == 409, st  # raced with a stamp: read again
        else:
            raise AssertionError("PUT %s kept conflicting" % path)


def snapshot(sim):
    """(resourceVersion, {name: stamp}) from one LIST."""
    _, lst = sim.json("GET", CMS, expect=200)
    return lst["metadata"]["resourceVersion"], {
        i["metadata"]["name"]: (i["metadata"].get("annotations") or {}).get(STAMP) for i in lst["items"]}


def history(sim, snap):
    """Every stamp value written after the snapshot, in order."""
    rv, before = snap
    st, evs = sim.watch("%s?watch=1&resourceVersion=%s" % (CMS, rv), timeout=1.0)
    assert st == 200, evs
    seen, out = dict(before), []
    for e in evs:
        if e.get("type") not in ("ADDED", "MODIFIED"):
            continue
        md = e["object"]["metadata"]
        v = (md.get("annotations") or {}).get(STAMP)
        if v is not None and seen.get(md["name"]) != v:
            out.append(v)
        seen[md["name"]] = v
    return out


def patches(sim):
    reqs = sim.control("GET", "requests")["requests"]
    return [r for r in reqs if r["method"] == "PATCH" and r["path"].startswith(CMS + "/")]


def dump(*replicas):
    for r in replicas:
        for line in r.log().splitlines()[-25:]:
            print("# %s: %s" % (r.identity, line))


def test_exactly_one_replica_reconciles():
    for b in ("kctrld", "kube-apisim"):
        if not os.access(os.path.join(BUILD, b), os.X_OK):
            raise Skip("%s not built" % b)
    tmp = tempfile.mkdtemp(prefix="kctrld-single-")
    os.chmod(tmp, 0o700)
    so = build_plugin(tmp)
    with Apisim() as sim:
        sim.json("POST", "/api/v1/namespaces",
                 {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, expect=201)
        for i in range(NKEYS):
            sim.json("POST", CMS, {"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": "cm-%02d" % i, "namespace": NS},
                                   "data": {"seq": "0"}}, expect=201)
        snap0 = snapshot(sim)
        sim.control("DELETE", "counters")
        a = Replica(sim, tmp, so, "replica-a")
        b = None
        try:
            wait_for(lambda: holder(sim) == "replica-a", timeout=10, what="replica-a to lead")
            b = Replica(sim, tmp, so, "replica-b")
            wait_for(lambda: "new leader holder=replica-a" in b.log(), timeout=10,
                     what="replica-b to observe the leader")
            wait_for(lambda: all_stamped(sim, "replica-a/0"), timeout=10, what="stamps a/0")

            # 1. Only the leader reconciles and writes.
            set_seq(sim, 1)
            wait_for(lambda: all_stamped(sim, "replica-a/1"), timeout=10, what="stamps a/1")
            time.sleep(2 * RP)  # give a wrongly active standby time to show itself
            ma, mb = a.metrics(), b.metrics()
            assert ma.get("leader_election_master_status") == 1, ma
            assert mb.get("leader_election_master_status") == 0, mb
            assert mb.get("controller_runtime_reconcile_total", 0) == 0, mb
            assert ma["controller_runtime_reconcile_total"] >= 2 * NKEYS, ma
            h = history(sim, snap0)
            assert all(v.startswith("replica-a/") for v in h), h
            assert len(h) == 2 * NKEYS, h  # exactly one write per change
            assert all(p["code"] == 200 for p in patches(sim))
            # PATCHes are the plugin's only; a no-op repeat would show up here
            assert len(patches(sim)) == 2 * NKEYS, patches(sim)
            print("# phase 1: replica-a %d reconciles, replica-b 0, %d stamp writes, all by replica-a"
                  % (ma["controller_runtime_reconcile_total"], len(h)), flush=True)

            # 2. Stop the leader at a quiet moment; the standby takes over.
            wait_for(lambda: a.metrics().get("workqueue_depth") == 0
                     and a.metrics().get("controller_runtime_active_workers") == 0,
                     timeout=5, what="replica-a idle")
            ra = a.reconciles()
            snap_stop = snapshot(sim)
            a.proc.send_signal(signal.SIGSTOP)
            t_stop = time.monotonic()
            set_seq(sim, 2)
            wait_for(lambda: holder(sim) == "replica-b", timeout=LD + 2.2 * RP + 3,
                     interval=0.02, what="replica-b to take over")
            took = time.monotonic() - t_stop
            wait_for(lambda: all_stamped(sim, "replica-b/2"), timeout=10, what="stamps b/2")
            print("# phase 2: SIGSTOP replica-a -> replica-b leads after %.2f s and stamped all"
                  % took, flush=True)
            assert took <= LD + 2.2 * RP + 1.5, took

            # 3. The stopped leader resumes: it must not reconcile or write.
            n_patches = len(patches(sim))
            a.proc.send_signal(signal.SIGCONT)
            for seq in (3, 4, 5, 6):
                set_seq(sim, seq)
                wait_for(lambda: all_stamped(sim, "replica-b/%d" % seq), timeout=10,
                         what="stamps b/%d" % seq)
                time.sleep(0.4)
            wait_for(lambda: "leadership lost" in a.log(), timeout=5,
                     what="replica-a to notice the loss")
            time.sleep(2 * RP)
            ma, mb = a.metrics(), b.metrics()
            assert ma.get("controller_runtime_reconcile_total", 0) == ra, (ra, ma)
            assert ma.get("leader_election_master_status") == 0, ma
            assert mb.get("leader_election_master_status") == 1, mb
            assert mb.get("controller_runtime_reconcile_total", 0) >= 5 * NKEYS, mb
            h = history(sim, snap_stop)
            assert h and all(v.startswith("replica-b/") for v in h), h
            assert len(h) == 5 * NKEYS, h
            assert len(patches(sim)) == n_patches + 4 * NKEYS, (n_patches, patches(sim))
            assert holder(sim) == "replica-b"
            assert a.proc.poll() is None and b.proc.poll() is None
            print("# phase 3: replica-a resumed: 0 reconciles, 0 writes; replica-b %d reconciles"
                  % mb["controller_runtime_reconcile_total"], flush=True)
            for r in (a, b):
                assert r.stop() == 0, (r.identity, r.proc.returncode)
                text = r.log()
                assert "Sanitizer" not in text and "runtime error" not in text, text[-3000:]
        except BaseException:
            dump(a, *([b] if b else []))
            raise
        finally:
            a.stop()
            if b:
                b.stop()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    run_tests(globals())
