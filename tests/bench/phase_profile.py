#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""kctrld's cost per phase and per thread: the initial sync of N generated
Pods (kube-apisim --generate pods=N, streaming list, noop plugin, one worker:
the `make bench` config) and a drained watch of M MODIFIED events (kctrld
SIGSTOPped while the simulator queues them, then resumed).

    python3 tests/bench/phase_profile.py [--pods N] [--events M] [--callgrind DIR]

Without --callgrind: prints per phase the CPU seconds and voluntary context
switches of each thread (/proc/PID/task/TID/stat and status; "loop" is the
main thread, "kctrld-dec*" the decode pool, "kctrld" the workers), per object.
With --callgrind DIR: runs build/kctrld under valgrind --tool=callgrind and
dumps once after the sync and once after the drained watch
(DIR/kctrld.PID.1 and .2; read them with callgrind_annotate --inclusive=yes).
$KCTRLD_BUILD selects the build as for the integration tests.
"""
import argparse
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
import taplib  # noqa: E402
import bench_controller  # noqa: E402  (build_plugins)

TICK = os.sysconf("SC_CLK_TCK")


def snap(pid):
    """{thread name: [CPU s, voluntary context switches]}"""
    r = {}
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            s = open("/proc/%d/task/%s/stat" % (pid, t)).read()
            st = open("/proc/%d/task/%s/status" % (pid, t)).read()
        except OSError:
            continue  # the thread ended
        comm = s[s.index("(") + 1:s.rindex(")")]
        f = s[s.rindex(")") + 2:].split()
        cpu = (int(f[11]) + int(f[12])) / TICK
        vcs = int([ln for ln in st.splitlines() if ln.startswith("voluntary_ctxt_switches")][0].split()[1])
        a = r.setdefault("loop" if int(t) == pid else comm, [0.0, 0])
        a[0] += cpu
        a[1] += vcs
    return r


def show(a, b, n, what):
    print("%s, per thread (CPU s, voluntary context switches, per object of %d):" % (what, n))
    for name in sorted(b):
        c = b[name][0] - a.get(name, [0, 0])[0]
        v = b[name][1] - a.get(name, [0, 0])[1]
        if c or v:
            print("  %-14s %7.3f s %9d cs %8.1f us/obj %7.3f cs/obj" % (name, c, v, c * 1e6 / n, v / n))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--events", type=int, default=50000)
    ap.add_argument("--callgrind", metavar="DIR")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="kctrld-phase-")
    plugins = bench_controller.build_plugins(tmp)
    if a.callgrind:
        os.makedirs(a.callgrind, exist_ok=True)
        wrap = os.path.join(tmp, "bin")
        os.makedirs(wrap)
        with open(os.path.join(wrap, "kctrld"), "w") as f:
            f.write("#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s/kctrld.%%p %s \"$@\"\n"
                    % (os.path.abspath(a.callgrind), os.path.join(taplib.BUILD, "kctrld")))
        os.chmod(os.path.join(wrap, "kctrld"), stat.S_IRWXU)
    sim = bench_controller.start_apisim("--generate", "pods=%d" % a.pods, "--history", str(max(200000, 2 * a.events)))
    d = os.path.join(tmp, "k")
    sync_file = os.path.join(d, "synced")
    cfg = ("logLevel: info\nshutdownTimeout: 3s\nmetrics: { bindAddress: \"127.0.0.1:0\" }\n"
           "informers:\n  - { apiVersion: v1, kind: Pod, pageSize: 500 }\n"
           "controllers:\n  - name: bench\n    plugin: %s\n    for: { apiVersion: v1, kind: Pod }\n"
           "    workers: 1\n    settings: %s\n"
           % (plugins["noop"], json.dumps({"kind": "Pod", "syncFile": sync_file})))
    if a.callgrind:
        taplib.BUILD = wrap
    k = taplib.Kctrld(cfg, sim.kubeconfig, dir=d)
    bench_controller.PROCS.append(k.proc)
    pid = k.proc.pid
    try:
        s0, t0 = snap(pid), time.monotonic()
        while not os.path.exists(sync_file):
            time.sleep(0.01)
        print("synced %.2f s after start (load %s)" % (time.monotonic() - t0, open("/proc/loadavg").read().split()[0]))
        time.sleep(0.3)
        if a.callgrind:
            subprocess.run(["callgrind_control", "-d", "synced", str(pid)], check=True, capture_output=True)
        else:
            show(s0, snap(pid), a.pods, "start + sync")
        base = k.metric(k.scrape(), "kctrld_reflector_events_total")
        os.kill(pid, signal.SIGSTOP)
        sim.control("POST", "modify", {"resource": "pods", "count": a.events, "rate": 0})
        taplib.wait_for(lambda: not sim.control("GET", "modify")["running"], timeout=600, interval=0.2,
                        what="the modify stream to finish")
        s2, t2 = snap(pid), time.monotonic()
        os.kill(pid, signal.SIGCONT)
        while k.metric(k.scrape(), "kctrld_reflector_events_total") < base + a.events:
            time.sleep(1.0 if a.callgrind else 0.05)
        print("drained %d events in %.2f s (load %s)" % (a.events, time.monotonic() - t2,
                                                         open("/proc/loadavg").read().split()[0]))
        if a.callgrind:
            subprocess.run(["callgrind_control", "-d", "watch", str(pid)], check=True, capture_output=True)
        else:
            show(s2, snap(pid), a.events, "drained watch")
        k.stop(120)
    finally:
        bench_controller.cleanup()


if __name__ == "__main__":
    main()
