#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The fault campaign: kctrld under churn, one
fault per case, then a key-by-key comparison of the daemon's cache with a
fresh LIST.

Per case: a fresh kube-apisim seeded with N ConfigMaps (build/kube-apisim,
or $KCTRLD_BUILD), tests/faults/faultproxy.py in front of it, kctrld with
tests/faults/plugins/recorder.c (one controller for ConfigMaps, built here
like an out-of-tree plugin) talking to the proxy. Churn starts (the
simulator's modification stream plus creates, deletes and patches from a
thread), the fault is injected (through the simulator's /_apisim controls or
the proxy), churn stops and the fault is cleared ("quiet"); then, until the
case's deadline:

  cache == LIST   the recorder dumps the daemon's whole ConfigMap cache when
                  the probe ConfigMap changes; the dump must equal a fresh
                  LIST by key, uid and resourceVersion;
  no lost update  every key of the LIST was reconciled last at its final
                  resourceVersion and uid, and every key the recorder ever
                  saw that is gone from the LIST was reconciled last as
                  absent.

The case passes when both hold (and, for the 429 storm, when the blind time
is within 2x of the server's own outage, docs/reliability.md), the
daemon is still running and exits 0 on SIGTERM without a sanitizer report.
"converged" is the time from quiet to the first check that held, "blind" the
time from the fault's start to it.

Prints TAP ("ok N - case", "not ok N - case") and a table.

    tests/faults/run_faults.py [--quick] [--objects N] [--cases a,b] [--list]

--quick: 500 objects, the fast cases, short churn (the version run by `make
test` through tests/faults/test_faults_short.py).
"""
import argparse
import http.client
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import taplib  # noqa: E402
from faultproxy import FaultProxy, Rule  # noqa: E402
from taplib import BUILD, ROOT, Skip  # noqa: E402

NAMESPACES = ["fault-%d" % i for i in range(4)]
PROBE_NS, PROBE_NAME = "faults-probe", "probe"
PROBE_KEY = PROBE_NS + "/" + PROBE_NAME
CMS = "/api/v1/configmaps"


def log(msg):
    print("# " + msg, flush=True)


# --------------------------------------------------------------------------
# seeds and the simulator

def cm(ns, name, data, uid=None):
    md = {"name": name, "namespace": ns, "labels": {"app": "app-%d" % (hash(name) % 10)}}
    if uid:
        md["uid"] = uid
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": data}


def write_seed(path, items, kind="ConfigMapList"):
    with open(path, "w") as f:
        json.dump({"apiVersion": "v1", "kind": kind, "items": items}, f)
    return path


def base_seed(tmp, n):
    items = [cm(NAMESPACES[i % len(NAMESPACES)], "cm-%05d" % i, {"v": "0", "payload": "x" * 64})
             for i in range(n)]
    items.append(cm(PROBE_NS, PROBE_NAME, {"seq": "0"}))
    return write_seed(os.path.join(tmp, "00-configmaps.json"), items)


def filler_seed(path, n, prefix):
    """n Secrets: each costs one resourceVersion, none is watched."""
    items = [{"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": "%s-%05d" % (prefix, i), "namespace": "faults-filler"},
              "data": {"k": "dg=="}} for i in range(n)]
    return write_seed(path, items, "SecretList")


class Sim(taplib.Apisim):
    """kube-apisim with bookmarks every 2 s (a healthy watch is never idle
    for the daemon's 5 s watchInactivityTimeout)."""

    def __init__(self, seeds, *args):
        super().__init__("--bookmark-interval-ms", "2000", *args, seeds=seeds)
        u = urllib.parse.urlparse(self.url)
        self.addr = (u.hostname, u.port)

    def rv(self):
        return int(self.control("GET", "counters")["resourceVersion"])

    def list_state(self):
        """{key: (rv, uid)} of every ConfigMap but the probe: one LIST per
        namespace (every ConfigMap of the campaign lives in NAMESPACES), so
        faults injected on the daemon's cluster-wide path /api/v1/configmaps
        never hit the campaign's own reads. Callers stop churn first."""
        out = {}
        for ns in NAMESPACES:
            path = "/api/v1/namespaces/%s/configmaps" % ns
            st, doc = self.json("GET", path)
            if st != 200:
                raise AssertionError("LIST %s: %d %s" % (path, st, str(doc)[:300]))
            for it in doc["items"]:
                md = it["metadata"]
                out[md["namespace"] + "/" + md["name"]] = (md["resourceVersion"], md.get("uid", ""))
        return out

    def patch_cm(self, key, data, conn=None):
        ns, name = key.split("/", 1)
        return self.json("PATCH", "/api/v1/namespaces/%s/configmaps/%s" % (ns, name), {"data": data},
                         headers={"Content-Type": "application/merge-patch+json"})


# --------------------------------------------------------------------------
# churn

class Churn(threading.Thread):
    """Steady writes while a case runs: the simulator's modification stream
    (annotation ticks, round robin) at `modify_rate`/s plus creates, deletes
    and data patches from this thread at `rate`/s, all straight to the
    simulator (not through the proxy)."""

    def __init__(self, sim, keys, rate=30, modify_rate=150):
        super().__init__(daemon=True, name="churn")
        self.sim, self.keys, self.rate, self.modify_rate = sim, list(keys), rate, modify_rate
        self.stopped = threading.Event()
        self.ops = {"create": 0, "delete": 0, "patch": 0, "errors": 0}
        self.seq = 0
        self.conn = http.client.HTTPConnection(*sim.addr, timeout=10)

    def _req(self, method, path, body, ctype="application/json"):
        try:
            self.conn.request(method, path, body=json.dumps(body) if body is not None else None,
                              headers={"Content-Type": ctype})
            r = self.conn.getresponse()
            r.read()
            return r.status
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = http.client.HTTPConnection(*self.sim.addr, timeout=10)
            return 0

    def run(self):
        self.sim.control("POST", "modify", {"resource": "configmaps", "count": 10 ** 9,
                                            "rate": self.modify_rate})
        rnd = random.Random(7)
        period = 1.0 / self.rate
        nxt = time.monotonic()
        while not self.stopped.is_set():
            op = rnd.choice(("create", "delete", "patch", "patch"))
            if op == "create" or len(self.keys) < 10:
                self.seq += 1
                ns = rnd.choice(NAMESPACES)
                name = "churn-%06d" % self.seq
                st = self._req("POST", "/api/v1/namespaces/%s/configmaps" % ns,
                               cm(ns, name, {"v": "1"}))
                if st == 201:
                    self.keys.append(ns + "/" + name)
                op = "create"
            elif op == "delete":
                key = self.keys.pop(rnd.randrange(len(self.keys)))
                ns, name = key.split("/", 1)
                st = self._req("DELETE", "/api/v1/namespaces/%s/configmaps/%s" % (ns, name), None)
            else:
                key = rnd.choice(self.keys)
                ns, name = key.split("/", 1)
                st = self._req("PATCH", "/api/v1/namespaces/%s/configmaps/%s" % (ns, name),
                               {"data": {"v": str(rnd.randrange(10 ** 9))}},
                               "application/merge-patch+json")
            self.ops[op] += 1
            if st not in (200, 201):
                self.ops["errors"] += 1
            nxt += period
            time.sleep(max(0.0, nxt - time.monotonic()))

    def stop(self):
        if self.stopped.is_set():
            return
        self.stopped.set()
        self.join(10)
        try:
            self.sim.control("DELETE", "modify")
        except Exception:  # noqa: BLE001 - the server may be gone (restart cases)
            pass
        self.conn.close()


# --------------------------------------------------------------------------
# the daemon and its witness

CONFIG = """metrics: {{ bindAddress: "127.0.0.1:0" }}
shutdownTimeout: 5s
informers:
  - apiVersion: v1
    kind: ConfigMap
    watchInactivityTimeout: 5s
    streamingList: {streaming}
controllers:
  - name: recorder
    plugin: {so}
    for: {{ apiVersion: v1, kind: ConfigMap }}
    workers: 4
    settings:
      log: {dir}/records
      dumpDir: {dir}/dumps
      probe: {probe}
"""


class Witness:
    """Reads the recorder's files: the per-reconcile log (incrementally) and
    the cache dumps."""

    def __init__(self, d):
        self.dir = d
        self.path = os.path.join(d, "records")
        self.off = 0
        self.last = {}  # key -> (rv, uid) or None (absent)
        self.reconciles = 0
        self.probe_seq = 0

    def read(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.off)
                data = f.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1
        self.off += end
        for line in data[:end].decode().splitlines():
            parts = line.split(" ")
            if len(parts) != 4:
                continue
            _, key, rv, uid = parts
            self.last[key] = None if rv == "-" else (rv, uid)
            self.reconciles += 1

    def dump(self, sim, timeout=3.0):
        """Bumps the probe and returns the daemon's cache {key: (rv, uid)} as
        dumped when it reconciled the probe, or None when no dump came."""
        self.probe_seq += 1
        seq = str(self.probe_seq)
        st, doc = sim.patch_cm(PROBE_KEY, {"seq": seq})
        if st != 200:
            raise AssertionError("probe patch: %d %s" % (st, doc))
        path = os.path.join(self.dir, "dumps", "dump-" + seq)
        deadline = time.monotonic() + timeout
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                return None
            time.sleep(0.02)
        out = {}
        with open(path) as f:
            for line in f:
                key, rv, uid = line.split()
                if key.startswith(PROBE_NS + "/"):
                    continue
                out[key] = (rv, uid)
        return out


def compare(cache, truth, last):
    """Differences between the daemon's cache and the LIST, and between the
    reconcile records and the LIST; {} when they agree."""
    diff = {}
    if cache is None:
        diff["no-dump"] = ["probe %s not reconciled (cache not following the server)" % PROBE_KEY]
    else:
        missing = sorted(k for k in truth if k not in cache)
        extra = sorted(k for k in cache if k not in truth)
        stale = sorted(k for k in truth if k in cache and cache[k] != truth[k])
        for name, keys, src in (("missing", missing, None), ("extra", extra, cache), ("stale", stale, cache)):
            if keys:
                diff[name] = ["%s cache=%s list=%s" % (k, cache.get(k), truth.get(k)) for k in keys]
    unrec = sorted(k for k in truth if last.get(k) != truth[k])
    if unrec:
        diff["not-reconciled-at-final-rv"] = ["%s last=%s list=%s" % (k, last.get(k), truth[k]) for k in unrec]
    gone = sorted(k for k, v in last.items() if v is not None and k not in truth)
    if gone:
        diff["deleted-not-reconciled-absent"] = ["%s last=%s" % (k, last[k]) for k in gone]
    return diff


def summarize(diff):
    return "; ".join("%s: %d (e.g. %s)" % (k, len(v), ", ".join(v[:3])) for k, v in diff.items())


class World:
    """One case's simulator, proxy, daemon and witness."""

    def __init__(self, so, tmp, nobj, streaming="auto", sim_args=()):
        self.tmp, self.nobj = tmp, nobj
        self.seed = base_seed(tmp, nobj)
        self.sim = Sim([self.seed], *sim_args)
        self.old_sims = []
        self.proxy = FaultProxy(self.sim.addr).start()
        self.kubeconfig = os.path.join(tmp, "kubeconfig")
        with open(self.sim.kubeconfig) as f:
            kc = f.read()
        with open(self.kubeconfig, "w") as f:
            f.write(kc.replace(self.sim.url, self.proxy.url))
        self.ddir = os.path.join(tmp, "kctrld")
        os.makedirs(os.path.join(self.ddir, "dumps"), 0o700)
        self.kctrld = taplib.Kctrld(CONFIG.format(so=so, dir=self.ddir, probe=PROBE_KEY, streaming=streaming),
                                    self.kubeconfig, dir=self.ddir)
        self.witness = Witness(self.ddir)
        self.churn = None

    def keys(self):
        return list(self.sim.list_state())

    def start_churn(self, rate, modify_rate):
        self.churn = Churn(self.sim, self.keys(), rate, modify_rate)
        self.churn.start()

    def stop_churn(self):
        if self.churn:
            self.churn.stop()

    def check(self):
        """One comparison; returns the differences ({} = converged)."""
        if not self.kctrld.alive():
            raise AssertionError("kctrld exited with %s:\n%s" % (self.kctrld.proc.returncode, self.kctrld.log()[-3000:]))
        cache = self.witness.dump(self.sim)
        truth = self.sim.list_state()
        self.witness.read()
        return compare(cache, truth, self.witness.last)

    def converge(self, timeout):
        """Checks until converged or timeout; returns (seconds, diff)."""
        t0 = time.monotonic()
        while True:
            diff = self.check()
            if not diff:
                return time.monotonic() - t0, {}
            if time.monotonic() - t0 > timeout:
                return None, diff
            time.sleep(0.25)

    def restart_server(self, seeds, *args):
        """A new server behind the same address: the proxy now forwards to it
        and every open connection is cut. The old server stops."""
        self.stop_churn()
        new = Sim(seeds, *args)
        old = self.sim
        self.sim = new
        self.proxy.set_upstream(*new.addr)
        self.proxy.drop_all()
        old.stop()
        self.old_sims.append(old)
        return new

    def close(self):
        self.stop_churn()
        code = self.kctrld.stop()
        self.proxy.stop()
        self.sim.stop()
        return code


# --------------------------------------------------------------------------
# cases: inject(world) runs during churn; clear(world) after churn stopped

def ctl_faults(w, **body):
    return w.sim.control("POST", "faults", body)


def clear_all(w):
    """Removes the proxy's rules (held stalls stay until the daemon gives
    up). The simulator's faults are all count-limited and left for the
    daemon to use up: a 429 storm is over when the server stops answering
    429, not when the campaign loses patience."""
    w.proxy.clear()


def debug_informers(w):
    url = "http://127.0.0.1:%d/debug/informers" % w.kctrld.metrics_port()
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def ev_relisted(w):
    n = sum(i.get("relists", 0) for i in debug_informers(w))
    return None if n >= 1 else "the fault caused no relist (/debug/informers relists=0)"


def ev_sim_faults_used(w):
    left = [f for f in w.sim.control("GET", "faults")["faults"] if f["remaining"] != 0]
    return None if not left else "simulator faults not used up by the daemon: %s" % left


def ev_proxy(action):
    def ev(w):
        return None if w.proxy.stats.get(action) else "the proxy's %s rule never fired" % action
    return ev


def ev_all(*evs):
    def ev(w):
        return "; ".join(p for p in (e(w) for e in evs) if p) or None
    return ev


def inj_watch_drops(w):
    for _ in range(3 if w.quick else 6):
        w.sim.control("POST", "drop-watches")
        time.sleep(0.7)


def inj_conn_drops(w):
    for _ in range(3 if w.quick else 6):
        w.proxy.drop_all()
        time.sleep(0.7)


def force_410(w):
    """Makes the daemon's next watch start below the history window: with the
    daemon stopped (SIGSTOP), its watch is ended at resourceVersion X, churn
    goes on, and the history is compacted past X; after SIGCONT it re-watches
    at X and gets 410 (a compaction during a network partition). Counted in
    w.expired (the simulator's 410 answers)."""
    pid = w.kctrld.proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(0.3)
        w.sim.control("POST", "drop-watches")
        time.sleep(0.5)
        w.sim.control("POST", "compact")
    finally:
        os.kill(pid, signal.SIGCONT)


def inj_410_event(w):
    w.sim.control("POST", "config", {"watch410": "event"})
    force_410(w)


def inj_410_http(w):
    w.sim.control("POST", "config", {"watch410": "http"})
    force_410(w)


def make_429(n, retry_after):
    def inj(w):
        ctl_faults(w, action="status", code=429, retryAfter=retry_after, count=n, pathPrefix=CMS)
        w.sim.control("POST", "drop-watches")
        w.outage = n * retry_after
    return inj


def inj_5xx(w):
    """A 3 s outage of the daemon's path: 503, 500 and connection resets
    (no Retry-After), then the server recovers."""
    for body in ({"action": "status", "code": 503, "count": 2}, {"action": "reset", "count": 2},
                 {"action": "status", "code": 500, "count": -1}):
        body["pathPrefix"] = CMS
        w.sim.control("POST", "faults", body)
    w.sim.control("POST", "drop-watches")
    time.sleep(3)
    w.sim.control("DELETE", "faults")
    w.outage_5xx = 3


def proxy_fault(w, rule, timeout=8.0):
    """Adds rule, cuts the daemon's connections so its next watch meets the
    rule, and waits (churn going on) until the rule has acted."""
    w.proxy.add(rule)
    w.proxy.drop_all()
    before = w.proxy.stats.get(rule.action, 0)
    taplib.wait_for(lambda: w.proxy.stats.get(rule.action, 0) > before, timeout=timeout,
                    what="the proxy's %s rule to act" % rule.action)


def inj_stalled_watch(w):
    proxy_fault(w, Rule("stall", count=1, after=3, watch=True, path_prefix=CMS))


def inj_stalled_list(w):
    # paginated LIST (streamingList: off): stall the answer after 8 KiB
    w.proxy.add(Rule("stall", count=1, after=8192, watch=False, method="GET", path_prefix=CMS))
    force_410(w)


def inj_stalled_stream_list(w):
    # streaming list (sendInitialEvents): the relist stream stalls after 20 initial events
    w.proxy.add(Rule("stall", count=1, after=20, watch=True, path_prefix=CMS, query="sendInitialEvents=true"))
    force_410(w)


def inj_truncated(w):
    proxy_fault(w, Rule("truncate", count=3, after=5, watch=True, path_prefix=CMS))


def inj_malformed(w):
    proxy_fault(w, Rule("garbage", count=3, after=5, watch=True, path_prefix=CMS))


def inj_tiny(w):
    w.proxy.add(Rule("tiny", count=-1, chunk=5, path_prefix=CMS))
    w.proxy.drop_all()
    time.sleep(0.5)
    force_410(w)  # the relist goes through tiny chunks too


def settle(w):
    """Stops churn and waits until the daemon follows the old server, so its
    last resourceVersion is the old server's last one."""
    w.stop_churn()
    t, diff = w.converge(30)
    if t is None:
        raise AssertionError("no convergence before the restart: " + summarize(diff))
    return w.sim.rv()


def inj_restart_smaller(w):
    old_rv = settle(w)
    new = w.restart_server([w.seed])  # same names, fresh uids, the counter starts over
    log("restart: old server at RV %d, new server at RV %d" % (old_rv, new.rv()))


def inj_restart_larger(w):
    old_rv = settle(w)
    d = tempfile.mkdtemp(prefix="seeds-", dir=w.tmp)
    # the counter passes the old RV: fillers, 40 ConfigMaps that land at or
    # below it (a resumed watch never delivers them), more fillers above
    below = max(0, old_rv - w.nobj - 80)
    late = [cm(NAMESPACES[i % 4], "late-%03d" % i, {"v": "late"}) for i in range(40)]
    seeds = [w.seed, filler_seed(os.path.join(d, "10-filler.json"), below, "a"),
             write_seed(os.path.join(d, "20-late.json"), late),
             filler_seed(os.path.join(d, "30-filler.json"), 100, "b")]
    new = w.restart_server(seeds)
    log("restart: old server at RV %d, new server at RV %d (40 ConfigMaps created at or below %d)"
        % (old_rv, new.rv(), old_rv))


def inj_restart_same(w):
    old_rv = settle(w)
    # an etcd restore without --bump-revision: the same objects (same uids),
    # the counter lands on the old RV exactly
    st, doc = w.sim.json("GET", CMS, expect=200)  # no fault is installed here
    items = []
    for it in doc["items"]:
        md = it["metadata"]
        items.append({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": md["name"], "namespace": md["namespace"], "uid": md["uid"],
                                   "labels": md.get("labels", {}), "annotations": md.get("annotations", {})},
                      "data": it.get("data", {})})
    rnd = random.Random(3)
    rnd.shuffle(items)  # restored in another order: same objects, other resourceVersions
    d = tempfile.mkdtemp(prefix="seeds-", dir=w.tmp)
    seed = write_seed(os.path.join(d, "00-restore.json"), items)
    probe = Sim([seed])
    base = probe.rv()
    probe.stop()
    need = old_rv - base
    if need < 0:
        raise AssertionError("restore alone passes the old RV (%d > %d)" % (base, old_rv))
    # (the fillers' namespace costs one RV as well; the rest is fixed up below)
    seeds = [seed] + ([filler_seed(os.path.join(d, "10-filler.json"), need - 2, "f")] if need > 2 else [])
    new = w.restart_server(seeds)
    got = new.rv()
    # namespaces of the filler seed cost resourceVersions too: fix up exactly
    if got > old_rv:
        raise AssertionError("new server at RV %d past the old %d" % (got, old_rv))
    n = 0
    while got < old_rv:
        n += 1
        st, doc = new.json("POST", "/api/v1/namespaces/default/secrets",
                           {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "fix-%d" % n}})
        if st != 201:
            raise AssertionError("filler secret: %d %s" % (st, doc))
        got = new.rv()
    log("restart: old server at RV %d, new server at RV %d (same objects and uids)" % (old_rv, got))


def inj_identity_change(w):
    """Another cluster behind the same endpoint (an L7 proxy re-pointed): the
    simulator reseeds itself as a new cluster (new kube-system uid) on the
    same port and ends every watch cleanly, no connection failure. Its
    history starts 100 below the daemon's RV and passes it, so a watch
    resumed at that RV is accepted and would silently skip every object
    created at or below it. Half the names come back with new uids and
    other data, the rest are new names."""
    old_rv = settle(w)
    items = [cm(NAMESPACES[i % len(NAMESPACES)], "cm-%05d" % i, {"v": "other-cluster"})
             for i in range(0, w.nobj, 2)]
    items += [cm(NAMESPACES[i % len(NAMESPACES)], "other-%05d" % i, {"v": "other-cluster"})
              for i in range(w.nobj // 2)]
    items.append(cm(PROBE_NS, PROBE_NAME, {"seq": "0"}))
    st, doc = w.sim.json("POST", "/_apisim/reseed", {"cluster": "new", "items": items,
                                                      "resourceVersion": str(max(0, old_rv - 100))})
    if st != 200:
        raise AssertionError("reseed: %d %s" % (st, doc))
    if int(doc["resourceVersion"]) <= old_rv:
        raise AssertionError("the new cluster's RV %s does not pass the daemon's %d" % (doc["resourceVersion"], old_rv))
    log("identity change: old cluster at RV %d, new cluster at RV %s, kube-system uid %s"
        % (old_rv, doc["resourceVersion"], doc["kubeSystemUid"]))


def ev_identity_changed(w):
    if "the API server is another cluster now" in w.kctrld.log():
        return None
    return "the daemon never logged the cluster identity change"


class Case:
    """inject(w) runs during churn; evidence(w) (None or a problem) proves
    the fault really happened; quick: part of --quick; asan: part of the
    --quick run against the ASan build (parser-facing cases).

    A case with `scenario` ("module:function" of tests/integration) brings
    its own world instead, because the fault needs more than the one
    ConfigMap controller: the function raises on failure. `make test` runs
    those modules as integration tests, so they are left out of --quick."""

    def __init__(self, name, inject=None, evidence=None, quick=True, timeout=60, streaming="auto", hold=2.0,
                 asan=False, scenario=None):
        self.name, self.inject, self.evidence, self.quick, self.timeout = name, inject, evidence, quick, timeout
        self.streaming, self.hold, self.asan, self.scenario = streaming, hold, asan, scenario


CASES = [
    Case("watch-drops", inj_watch_drops),
    Case("connection-drops", inj_conn_drops, asan=True),
    Case("watch-410-event", inj_410_event, ev_relisted, asan=True),
    Case("watch-410-http", inj_410_http, ev_relisted),
    Case("429-storm", make_429(6, 2), ev_sim_faults_used, quick=False, timeout=120, hold=0),
    Case("429-storm-short", make_429(3, 1), ev_sim_faults_used, timeout=60, hold=0),
    Case("5xx-burst", inj_5xx, asan=True, hold=0),
    Case("stalled-watch", inj_stalled_watch, ev_proxy("stall")),
    Case("stalled-list", inj_stalled_list, ev_all(ev_proxy("stall"), ev_relisted), quick=False, timeout=120,
         streaming="off"),
    Case("stalled-streaming-list", inj_stalled_stream_list, ev_all(ev_proxy("stall"), ev_relisted),
         quick=False, timeout=120),
    Case("truncated-chunk", inj_truncated, ev_proxy("truncate"), asan=True),
    Case("malformed-event", inj_malformed, ev_proxy("garbage"), asan=True),
    Case("tiny-chunks", inj_tiny, ev_all(ev_proxy("tiny"), ev_relisted), asan=True),
    Case("restart-smaller-rv", inj_restart_smaller, timeout=30),
    Case("restart-larger-rv", inj_restart_larger, timeout=30),
    Case("restart-same-rv", inj_restart_same, timeout=30),
    Case("identity-change", inj_identity_change, ev_identity_changed, timeout=60, streaming="off", asan=True),
    Case("owner-scope", scenario="test_owner_scope:test_namespace_owns_configmaps", quick=False),
    Case("owner-scope-isolated", scenario="test_owner_scope:test_namespace_owns_configmaps_isolated",
         quick=False),
    Case("credential-outage", scenario="test_auth_outage:test_credential_wait_revoked_token_and_recovery",
         quick=False),
]


def run_scenario(case):
    """Runs an integration test's scenario as a case: its own simulator and
    daemon, its own checks and deadlines."""
    import importlib
    mod, fn = case.scenario.split(":")
    res = {"case": case.name, "ok": False, "converged": None, "blind": None, "detail": "", "reconciles": 0}
    t0 = time.monotonic()
    try:
        getattr(importlib.import_module(mod), fn)()
        res["ok"] = True
        res["detail"] = "its own checks held; %.1f s in all" % (time.monotonic() - t0)
    except Skip as e:
        res["ok"] = True
        res["detail"] = "skipped: %s" % e
    except Exception as e:  # noqa: BLE001 - one TAP line per case
        res["detail"] = "%s: %s" % (type(e).__name__, e)
    return res


def run_case(case, so, nobj, churn_s, rate, modify_rate, quick):
    if case.scenario:
        return run_scenario(case)
    tmp = tempfile.mkdtemp(prefix="kctrld-fault-")
    os.chmod(tmp, 0o700)
    w = World(so, tmp, nobj, case.streaming)
    w.quick = quick
    timeout = min(case.timeout, 20) if quick else case.timeout
    hold = min(case.hold, 1.0) if quick else case.hold
    res = {"case": case.name, "ok": False, "converged": None, "blind": None, "detail": "",
           "reconciles": 0}
    try:
        t, diff = w.converge(60)
        if t is None:
            raise AssertionError("initial sync did not converge: " + summarize(diff))
        w.start_churn(rate, modify_rate)
        time.sleep(churn_s / 2)
        t_fault = time.monotonic()
        case.inject(w)
        if w.churn and not w.churn.stopped.is_set():
            time.sleep(hold)
        w.stop_churn()
        clear_all(w)
        t_quiet = time.monotonic()
        t, diff = w.converge(timeout)
        if t is not None:
            res["converged"] = t
            res["blind"] = t_quiet + t - t_fault
        res["reconciles"] = w.witness.reconciles
        problems = []
        if t is None:
            problems.append("not converged after %ds: %s" % (timeout, summarize(diff)))
        if case.evidence:
            e = case.evidence(w)
            if e:
                problems.append(e)
        outage = getattr(w, "outage", None)
        if outage and t is not None and res["blind"] > 2 * outage:
            problems.append("blind %.1fs > 2x the server's %ds outage"
                            % (res["blind"], outage))
        code = w.close()
        text = w.kctrld.log()
        if code != 0:
            problems.append("kctrld exit status %s" % code)
        if "Sanitizer" in text or "runtime error" in text:
            problems.append("sanitizer report in the daemon's log")
        res["ok"] = not problems
        res["detail"] = "; ".join(problems)
        res["proxy"] = dict(w.proxy.stats)
        res["churn"] = dict(w.churn.ops) if w.churn else {}
        if problems:
            for line in text.splitlines()[-30:]:
                log("kctrld: " + line)
    except Exception as e:  # noqa: BLE001 - one TAP line per case
        res["detail"] = "%s: %s" % (type(e).__name__, e)
        try:
            for line in w.kctrld.log().splitlines()[-30:]:
                log("kctrld: " + line)
        except Exception:  # noqa: BLE001
            pass
    finally:
        w.close()
    if res["ok"]:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        res["detail"] += " (files kept in %s)" % tmp
    return res


def fmt_s(v):
    return "-" if v is None else "%.1f s" % v


def table(results):
    lines = ["%-24s %-6s %11s %11s %10s  %s" % ("case", "result", "converged", "since fault", "reconciles", "detail")]
    for r in results:
        lines.append("%-24s %-6s %11s %11s %10d  %s" % (r["case"], "ok" if r["ok"] else "FAIL",
                                                       fmt_s(r["converged"]), fmt_s(r["blind"]),
                                                       r["reconciles"], r["detail"][:200]))
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description="kctrld fault campaign")
    p.add_argument("--quick", action="store_true", help="short version (make test)")
    p.add_argument("--objects", type=int, default=None)
    p.add_argument("--cases", default="", help="comma-separated case names")
    p.add_argument("--list", action="store_true")
    a = p.parse_args(argv)
    if a.list:
        for c in CASES:
            print("%-24s quick=%s timeout=%ds" % (c.name, c.quick, c.timeout))
        return 0
    asan = "asan" in os.path.basename(BUILD)
    cases = [c for c in CASES if not a.quick or (c.asan if asan else c.quick)]
    if a.cases:
        want = a.cases.split(",")
        cases = [c for c in CASES if c.name in want]
        if len(cases) != len(want):
            p.error("unknown case in %s" % want)
    nobj = a.objects or (500 if a.quick else 2000)
    churn_s = 1.0 if a.quick else 6.0
    rate, modify_rate = (20, 80) if a.quick else (40, 200)
    print("1..%d" % len(cases), flush=True)
    for b in ("kctrld", "kube-apisim"):
        if not os.access(os.path.join(BUILD, b), os.X_OK):
            for i, c in enumerate(cases, 1):
                print("ok %d - %s # SKIP %s not built" % (i, c.name, b))
            return 0
    tmp = tempfile.mkdtemp(prefix="kctrld-faults-")
    os.chmod(tmp, 0o700)
    so = taplib.build_plugin(os.path.join(HERE, "plugins", "recorder.c"), tmp, "-pthread")
    log("campaign: %d ConfigMaps, churn %d ops/s + %d modifications/s, build %s"
        % (nobj, rate, modify_rate, os.path.relpath(BUILD, ROOT)))
    results = []
    for i, c in enumerate(cases, 1):
        r = run_case(c, so, nobj, churn_s, rate, modify_rate, a.quick)
        results.append(r)
        print("%s %d - %s" % ("ok" if r["ok"] else "not ok", i, c.name), flush=True)
        log("%s: converged %s, blind %s, %d reconciles, proxy %s, churn %s%s" % (
            c.name, fmt_s(r["converged"]), fmt_s(r["blind"]), r["reconciles"],
            {k: v for k, v in r.get("proxy", {}).items() if v}, r.get("churn", {}),
            ("; " + r["detail"]) if r["detail"] else ""))
    for line in table(results):
        log(line)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
