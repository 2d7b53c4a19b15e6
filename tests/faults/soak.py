#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Bounded soak (`make soak`): kctrld with the recorder plugin on 5000
ConfigMaps under steady churn, with a random fault every few seconds from
tests/faults/faultproxy.py and the simulator's controls (the campaign's
machinery in tests/faults/run_faults.py). kctrld's RSS (/proc/PID/status
VmRSS) is sampled every 10 s.

Flat means: after the warm-up (the first 30 s, at least one sample), the
largest sample of the last third is at most the largest of the first third
plus max(10 %, 8 MiB). At the end churn and faults stop and the daemon's
cache must equal a fresh LIST key by key (and every key must have been
reconciled at its final resourceVersion), as in the campaign.

    tests/faults/soak.py [--seconds S] [--objects N] [--interval S]
Defaults: $SOAK_SECONDS or 300 s ($QUICK set: 60 s), 5000 objects, 10 s.
Prints the samples table and TAP (one line per assertion). Run it against
the plain build: RSS under ASan measures the sanitizer.
"""
import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_faults as rf  # noqa: E402
from faultproxy import Rule  # noqa: E402
from run_faults import CMS, log  # noqa: E402

MiB = 1024 * 1024
# After the soak: the reflector's backoff sits at its 30 s cap under faults
# every few seconds (it resets only after 2 minutes without a failure), so
# each remaining failed attempt costs 30 s.
CONVERGE_S = 300


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS for pid %d" % pid)


def informer_counts(w):
    """(cached objects, watch events received) from /debug/informers: the
    events column shows whether the daemon followed the churn or was blind."""
    try:
        url = "http://127.0.0.1:%d/debug/informers" % w.kctrld.metrics_port()
        with urllib.request.urlopen(url, timeout=5) as r:
            inf = json.loads(r.read())
        return sum(i.get("objects", 0) for i in inf), sum(i.get("events", 0) for i in inf)
    except (OSError, ValueError):
        return -1, -1


FAULTS = [
    ("drop-watches", lambda w: w.sim.control("POST", "drop-watches")),
    ("connection-drop", lambda w: w.proxy.drop_all()),
    ("410", lambda w: (w.sim.control("POST", "compact"), w.sim.control("POST", "drop-watches"))),
    ("5xx", lambda w: (rf.ctl_faults(w, action="status", code=503, count=3, pathPrefix=CMS),
                       w.sim.control("POST", "drop-watches"))),
    ("429", lambda w: (rf.ctl_faults(w, action="status", code=429, retryAfter=1, count=2, pathPrefix=CMS),
                       w.sim.control("POST", "drop-watches"))),
    ("stall", lambda w: (w.proxy.add(Rule("stall", after=2, watch=True, path_prefix=CMS)), w.proxy.drop_all())),
    ("truncate", lambda w: (w.proxy.add(Rule("truncate", after=3, watch=True, path_prefix=CMS)),
                            w.proxy.drop_all())),
    ("garbage", lambda w: (w.proxy.add(Rule("garbage", after=3, watch=True, path_prefix=CMS)),
                           w.proxy.drop_all())),
    # chunks of 1..64 bytes: 1..5 would make a 5000-object streaming list through this Python
    # proxy take minutes (a likely cause of 110 s to converge seen in a soak with chunk=5)
    ("tiny", lambda w: (w.proxy.add(Rule("tiny", count=1, chunk=64, watch=True, path_prefix=CMS)),
                        w.proxy.drop_all())),
]


class Faults(threading.Thread):
    def __init__(self, w, seed=11):
        super().__init__(daemon=True, name="faults")
        self.w, self.rnd = w, random.Random(seed)
        self.stopped = threading.Event()
        self.count = {}
        self.errors = 0
        self.log = []  # "monotonic-time fault" lines

    def run(self):
        while not self.stopped.wait(self.rnd.uniform(3, 8)):
            name, fn = self.rnd.choice(FAULTS)
            self.w.proxy.clear()  # one proxy fault at a time; held stalls stay until the daemon gives up
            try:
                fn(self.w)
                self.count[name] = self.count.get(name, 0) + 1
                self.log.append("%.1f %s" % (time.monotonic(), name))
            except Exception as e:  # noqa: BLE001 - keep soaking, report at the end
                self.errors += 1
                log("fault %s: %s" % (name, e))

    def stop(self):
        self.stopped.set()
        self.join(15)


def last_record_time(path):
    """CLOCK_MONOTONIC seconds of the recorder's last line (0 when none)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 4096))
            lines = f.read().splitlines()
        return int(lines[-1].split()[0]) / 1e9 if lines else 0.0
    except (OSError, ValueError, IndexError):
        return 0.0


def flat(samples, warmup_s):
    """(flat?, first-third max, last-third max, allowance) over the samples
    (t, rss) taken after warmup_s."""
    s = [r for t, r in samples if t >= warmup_s] or [samples[-1][1]]
    k = max(1, len(s) // 3)
    first, last = max(s[:k]), max(s[-k:])
    allow = max(0.10 * first, 8 * MiB)
    return last <= first + allow, first, last, allow


def main(argv=None):
    dflt = 60 if os.environ.get("QUICK") else int(os.environ.get("SOAK_SECONDS") or 300)
    p = argparse.ArgumentParser(description="kctrld soak")
    p.add_argument("--seconds", type=int, default=dflt)
    p.add_argument("--objects", type=int, default=5000)
    p.add_argument("--interval", type=float, default=10.0)
    a = p.parse_args(argv)
    print("1..3", flush=True)
    for b in ("kctrld", "kube-apisim"):
        if not os.access(os.path.join(rf.BUILD, b), os.X_OK):
            for i in (1, 2, 3):
                print("ok %d - soak # SKIP %s not built" % (i, b))
            return 0
    tmp = tempfile.mkdtemp(prefix="kctrld-soak-")
    os.chmod(tmp, 0o700)
    so = rf.taplib.build_plugin(os.path.join(HERE, "plugins", "recorder.c"), tmp, "-pthread")
    w = rf.World(so, tmp, a.objects)
    ok = [False, False, False]
    samples = []
    faults = None
    try:
        t_sync, diff = w.converge(120)
        if t_sync is None:
            raise AssertionError("initial sync: " + rf.summarize(diff))
        log("soak: %d ConfigMaps synced in %.1f s; %d s of churn (40 ops/s + 200 modifications/s) "
            "with a random fault every 3-8 s; RSS every %.0f s" % (a.objects, t_sync, a.seconds, a.interval))
        w.start_churn(40, 200)
        faults = Faults(w)
        faults.start()
        t0 = time.monotonic()
        pid = w.kctrld.proc.pid
        rows = []
        while True:
            time.sleep(max(0.0, t0 + (len(samples) + 1) * a.interval - time.monotonic()))
            if not w.kctrld.alive():
                raise AssertionError("kctrld exited: %s" % w.kctrld.log()[-2000:])
            t = time.monotonic() - t0
            r = rss(pid)
            samples.append((t, r))
            rows.append((t, r) + informer_counts(w) + (sum(faults.count.values()), sum(w.churn.ops.values())))
            if t >= a.seconds - 0.5:
                break
        faults.stop()
        w.stop_churn()
        rf.clear_all(w)
        w.proxy.release_stalls()
        t_conv, diff = w.converge(CONVERGE_S)
        ok[0] = w.kctrld.alive()
        log("%8s %10s %10s %10s %8s %10s" % ("t", "RSS MiB", "cached", "events", "faults", "churn ops"))
        for t, r, n, e, f, c in rows:
            log("%7.0fs %10.1f %10d %10d %8d %10d" % (t, r / MiB, n, e, f, c))
        isflat, first, last, allow = flat(samples, 30)
        ok[1] = isflat
        log("faults injected: %s (errors %d); proxy %s" % (faults.count, faults.errors,
                                                            {k: v for k, v in w.proxy.stats.items() if v}))
        log("RSS after warm-up: first third max %.1f MiB, last third max %.1f MiB, allowance %.1f MiB -> %s"
            % (first / MiB, last / MiB, allow / MiB, "flat" if isflat else "GROWING"))
        if t_conv is None:
            log("not converged %d s after the soak: %s" % (CONVERGE_S, rf.summarize(diff)))
            log("faults in order (monotonic s): " + ", ".join(faults.log))
            log("/debug/informers: %s" % rf.debug_informers(w))
            log("proxy: %d open connections; simulator counters: %s"
                % (w.proxy.open_connections(), w.sim.control("GET", "counters")))
            w.witness.read()
            log("last reconcile record at monotonic %.1f s (now %.1f s)"
                % (last_record_time(w.witness.path), time.monotonic()))
        else:
            log("converged %.1f s after churn and faults stopped; %d reconciles recorded"
                % (t_conv, w.witness.reconciles))
            ok[2] = True
    except Exception as e:  # noqa: BLE001 - TAP lines below
        log("%s: %s" % (type(e).__name__, e))
        for line in w.kctrld.log().splitlines()[-30:]:
            log("kctrld: " + line)
    finally:
        if faults:
            faults.stop()
        code = w.close()
        text = w.kctrld.log()
    if code != 0 or "Sanitizer" in text:
        ok[0] = False
        log("kctrld exit status %s" % code)
    for i, (good, name) in enumerate(zip(ok, ("kctrld survived and exited 0", "RSS flat",
                                               "cache equals LIST after the soak")), 1):
        print("%s %d - soak: %s" % ("ok" if good else "not ok", i, name), flush=True)
    if all(ok):
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        log("files kept in %s" % tmp)
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
