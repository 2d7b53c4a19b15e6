#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Sharding benchmark: reconcile throughput of one sharded controller with a
plugin that sleeps 100 ms per key (tests/integration/plugins/shardrec.c,
built here), for 1, 2 and 3 replicas of build/kctrld against
build/kube-apisim (docs/benchmarks.md "Sharding").

For each replica count: --keys ConfigMaps, 12 ranges, workers 4 per replica;
once the replicas own every range and are idle, one modification of every
ConfigMap (POST /_apisim/modify, as fast as the simulator goes); throughput =
reconciles of the modified keys / (last end - first start), from the
plugin's log (CLOCK_MONOTONIC). The plugin sleeps, so replicas scale even on
a 2-core machine. Every wait is bounded; every process is stopped.

  python3 tests/bench/bench_sharding.py [--build build] [--keys 600] [--replicas 1,2,3]
"""
import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import taplib  # noqa: E402
import test_sharding as ts  # noqa: E402


def run(n_replicas, keys, so, tmp):
    log = os.path.join(tmp, "rec-%d.log" % n_replicas)
    with taplib.Apisim("--generate", "configmaps=%d" % keys) as sim:
        sim.json("POST", "/api/v1/namespaces",
                 {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ts.LNS}}, expect=201)
        reps = []
        try:
            for i in range(n_replicas):
                reps.append(ts.Replica(sim, tmp, so, "bench%d-%d" % (n_replicas, i), log,
                                       sleep_ms=100, write_names=""))
            taplib.wait_for(lambda: ts.balanced(reps), timeout=60, interval=0.2, what="balance")
            taplib.wait_for(lambda: len({r[1] for r in ts.read_log(log)}) >= keys, timeout=600,
                            interval=0.5, what="initial reconciles")
            taplib.wait_for(lambda: all(r.idle() for r in reps), timeout=120, interval=0.2, what="idle")
            t0 = time.monotonic_ns()
            sim.control("POST", "modify", {"resource": "configmaps", "count": keys, "rate": 0})
            taplib.wait_for(lambda: len([x for x in ts.read_log(log) if x[2] > t0]) >= keys,
                            timeout=600, interval=0.2, what="every key reconciled")
            recs = [x for x in ts.read_log(log) if x[2] > t0]
            first = min(x[2] for x in recs)
            last = max(x[3] for x in recs)
            per = sorted(sum(1 for x in recs if x[0] == r.identity) for r in reps)
            return len(recs), (last - first) / 1e9, per
        finally:
            for r in reps:
                r.stop(20, cont=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=None)
    ap.add_argument("--keys", type=int, default=600)
    ap.add_argument("--replicas", default="1,2,3")
    a = ap.parse_args()
    if a.build:
        taplib.BUILD = os.path.join(taplib.ROOT, a.build)
    tmp = tempfile.mkdtemp(prefix="kctrld-bench-shard-")
    os.chmod(tmp, 0o700)
    so = taplib.build_plugin(os.path.join(taplib.ROOT, "tests", "integration", "plugins", "shardrec.c"),
                             tmp, "-O2")
    print("replicas  reconciles   seconds  reconciles/s  per replica   (plugin sleeps 100 ms, "
          "4 workers per replica, 12 ranges)")
    base = None
    for n in [int(x) for x in a.replicas.split(",")]:
        count, secs, per = run(n, a.keys, so, tmp)
        rate = count / secs if secs > 0 else 0.0
        base = base or rate
        print("%8d  %10d  %8.2f  %12.1f  %s  (x%.2f)" % (n, count, secs, rate, per, rate / base),
              flush=True)


if __name__ == "__main__":
    main()
