#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""kctrld's cost per phase and per thread: the initial sync of N generated
Pods (kube-apisim --generate pods=N, streaming list, noop plugin, one worker:
the `make bench` config) and a drained watch of M MODIFIED events (kctrld
SIGSTOPped while the simulator queues them, then resumed).

    python3 tests/bench/phase_profile.py [--pods N] [--events M] [--callgrind DIR]
                                         [--syscalls]

Without --callgrind: prints per phase the CPU seconds (user + system) and
voluntary context switches of each thread (/proc/PID/task/TID/stat and
status; "loop" is the main thread, "kctrld-dec*" the decode pool, "kctrld"
the workers), per object. With --syscalls also the process's system calls by
name and its page faults per phase (`perf stat -e syscalls:sys_enter_*`
attached to it; needs perf and root), the counts that explain the system
time (docs/benchmarks.md "Where the sync's system time goes").
With --callgrind DIR: runs build/kctrld under valgrind --tool=callgrind and
dumps once after the sync and once after the drained watch
(DIR/kctrld.PID.1 and .2; read them with callgrind_annotate --inclusive=yes).
$KCTRLD_BUILD selects the build as for the integration tests.
"""
import argparse
import json
import os
import shutil
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
    """{thread name: [user s, system s, voluntary context switches]}"""
    r = {}
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            s = open("/proc/%d/task/%s/stat" % (pid, t)).read()
            st = open("/proc/%d/task/%s/status" % (pid, t)).read()
        except OSError:
            continue  # the thread ended
        comm = s[s.index("(") + 1:s.rindex(")")]
        f = s[s.rindex(")") + 2:].split()
        vcs = int([ln for ln in st.splitlines() if ln.startswith("voluntary_ctxt_switches")][0].split()[1])
        a = r.setdefault("loop" if int(t) == pid else comm, [0.0, 0.0, 0])
        a[0] += int(f[11]) / TICK
        a[1] += int(f[12]) / TICK
        a[2] += vcs
    return r


def show(a, b, n, what):
    print("%s, per thread (CPU s = user + system, voluntary context switches, per object of %d):"
          % (what, n))
    for name in sorted(b):
        u, sy, v = (b[name][i] - a.get(name, [0, 0, 0])[i] for i in range(3))
        if u or sy or v:
            print("  %-14s %7.3f s = %6.3f + %6.3f %9d cs %8.1f us/obj %7.3f cs/obj"
                  % (name, u + sy, u, sy, v, (u + sy) * 1e6 / n, v / n))


SYSCALLS = ("mprotect", "mmap", "munmap", "brk", "madvise", "recvfrom", "sendto", "read", "write",
            "poll", "epoll_wait", "futex")


def perf_start(pid):
    # perf stat -p counts the threads that exist when it attaches: wait for
    # the decode pool's (started before the first list; at most 2 s)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and not any(n.startswith("kctrld-dec") for n in snap(pid)):
        time.sleep(0.001)
    ev = ",".join("syscalls:sys_enter_" + c for c in SYSCALLS) + ",page-faults,context-switches"
    return subprocess.Popen(["perf", "stat", "-x,", "-e", ev, "-p", str(pid)], stderr=subprocess.PIPE,
                            text=True)


def perf_show(p, n, what):
    p.send_signal(signal.SIGINT)
    err = p.communicate(timeout=30)[1]
    print("%s, system calls and faults (perf stat; per object of %d):" % (what, n))
    for line in err.splitlines():
        f = line.split(",")
        if len(f) > 2 and f[0].strip().isdigit():
            print("  %-36s %10d %9.3f/obj" % (f[2].replace("syscalls:sys_enter_", ""), int(f[0]), int(f[0]) / n))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--events", type=int, default=50000)
    ap.add_argument("--callgrind", metavar="DIR")
    ap.add_argument("--syscalls", action="store_true", help="count system calls per phase (perf stat)")
    a = ap.parse_args()
    if a.syscalls and (a.callgrind or not shutil.which("perf")):
        sys.exit("--syscalls needs perf and no --callgrind")
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
        perf = perf_start(pid) if a.syscalls else None
        while not os.path.exists(sync_file):
            time.sleep(0.01)
        print("synced %.2f s after start (load %s)" % (time.monotonic() - t0, open("/proc/loadavg").read().split()[0]))
        time.sleep(0.3)
        if a.callgrind:
            subprocess.run(["callgrind_control", "-d", "synced", str(pid)], check=True, capture_output=True)
        else:
            show(s0, snap(pid), a.pods, "start + sync")
            if perf:
                perf_show(perf, a.pods, "start + sync")
        base = k.metric(k.scrape(), "kctrld_reflector_events_total")
        os.kill(pid, signal.SIGSTOP)
        sim.control("POST", "modify", {"resource": "pods", "count": a.events, "rate": 0})
        taplib.wait_for(lambda: not sim.control("GET", "modify")["running"], timeout=600, interval=0.2,
                        what="the modify stream to finish")
        s2, t2 = snap(pid), time.monotonic()
        perf = perf_start(pid) if a.syscalls else None
        if perf:
            time.sleep(0.3)  # attached before the events flow
        os.kill(pid, signal.SIGCONT)
        while k.metric(k.scrape(), "kctrld_reflector_events_total") < base + a.events:
            time.sleep(1.0 if a.callgrind else 0.05)
        print("drained %d events in %.2f s (load %s)" % (a.events, time.monotonic() - t2,
                                                         open("/proc/loadavg").read().split()[0]))
        if a.callgrind:
            subprocess.run(["callgrind_control", "-d", "watch", str(pid)], check=True, capture_output=True)
        else:
            show(s2, snap(pid), a.events, "drained watch")
            if perf:
                perf_show(perf, a.events, "drained watch")
        k.stop(120)
    finally:
        bench_controller.cleanup()


if __name__ == "__main__":
    main()
