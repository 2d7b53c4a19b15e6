#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Cold start against warm restart (docs/benchmarks.md "Warm restart"):
build/kctrld with one ConfigMap informer (no controller) and
--state-directory against build/kube-apisim holding --objects generated
ConfigMaps. Run 1 starts without a snapshot (a list), is stopped with
SIGTERM and writes its snapshot; run 2 starts from it. For each run:
time from the daemon's first log line to the cache's completion (the
reflector's "listed", "streamed" or "restored N objects" line), the
ConfigMap LIST and initial-events requests the simulator saw, the loop lag
(kctrld_loop_lag_max_seconds, and the share of 100 ms probe ticks later
than 20 ms from kctrld_loop_lag_seconds) and the peak RSS (VmHWM); for the
stop: the snapshot's size and write time from the log.

  python3 tests/bench/bench_warm.py [--build build] [--objects 100000]
"""
import argparse
import json
import os
import re
import sys
import tempfile
import time
from datetime import datetime

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

CONFIG = """
logLevel: info
metrics: { bindAddress: "127.0.0.1:0" }
informers:
  - { apiVersion: v1, kind: ConfigMap }
controllers: []
"""
TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z", re.M)


def ts(line):
    return datetime.strptime(TS.match(line).group(1), "%Y-%m-%dT%H:%M:%S.%f").timestamp()


def ready(k):
    """The reflector's line that completes the first content: listed,
    streamed or restored."""
    return re.search(r"^.* reflector: configmaps: (?:listed|streamed|restored) \d+ objects.*$", k.log(), re.M)


def requests(sim):
    lists = streams = 0
    for r in sim.control("GET", "requests")["requests"]:
        q = r.get("query") or ""
        if "/configmaps" not in (r.get("path") or ""):
            continue
        if "sendInitialEvents=true" in q:
            streams += 1
        elif r.get("verb") == "list":
            lists += 1
    return lists, streams


def hwm_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1))


def one_run(taplib, sim, state, what):
    sim.control("DELETE", "counters")
    k = taplib.Kctrld(CONFIG, kubeconfig=sim.kubeconfig, args=["--state-directory", state])
    m = taplib.wait_for(lambda: ready(k), timeout=1800, interval=0.2, what=what + " sync")
    log = k.log()
    secs = ts(m.group(0)) - ts(log.splitlines()[0])
    snap = k.scrape()
    lag_max = k.metric(snap, "kctrld_loop_lag_max_seconds")
    ticks = k.metric(snap, "kctrld_loop_lag_seconds_count")
    le20 = k.metric(snap, "kctrld_loop_lag_seconds_bucket", 'le="0.02"')
    rss = hwm_kib(k.proc.pid) / 1024.0
    lists, streams = requests(sim)
    code = k.stop(timeout=600)
    stop = re.search(r"snapshot \S+: (\d+) objects at resourceVersion \d+, (\d+) bytes, written in ([\d.]+) ms",
                     k.log())
    print("%-5s sync %6.2f s  LISTs %d  initial-events watches %d  loop lag max %5.1f ms  "
          "ticks > 20 ms %d of %d  peak RSS %6.0f MiB  exit %d" %
          (what, secs, lists, streams, lag_max * 1000, ticks - le20, ticks, rss, code))
    if stop:
        print("      stop: snapshot of %s objects, %.1f MiB, written in %s ms" %
              (stop.group(1), int(stop.group(2)) / 1048576.0, stop.group(3)))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("KCTRLD_BUILD", "build"))
    ap.add_argument("--objects", type=int, default=100000)
    a = ap.parse_args()
    os.environ["KCTRLD_BUILD"] = a.build
    import taplib  # noqa: E402 (reads KCTRLD_BUILD)
    state = os.path.join(tempfile.mkdtemp(prefix="kctrld-bench-warm-"), "state")
    t0 = time.time()
    with taplib.Apisim("--generate", "configmaps=%d" % a.objects) as sim:
        print("%d ConfigMaps generated in %.1f s" % (a.objects, time.time() - t0))
        one_run(taplib, sim, state, "cold")
        one_run(taplib, sim, state, "warm")


if __name__ == "__main__":
    main()
