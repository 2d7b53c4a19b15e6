#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Cold start against warm restart (docs/benchmarks.md "Warm restart"),
beside the client-go peer's cold start and the simulator's floor:
build/kctrld with one informer (no controller) and --state-directory
against build/kube-apisim holding --objects generated ConfigMaps (or Pods).
Run 1 starts without a snapshot (a list), is stopped with SIGTERM and writes
its snapshot; run 2 starts from it. For each run: time from the daemon's
first log line to the cache's completion (the reflector's "listed",
"streamed" or "restored N objects" line) and the CPU seconds then, the LIST
and initial-events requests the simulator saw, the loop lag
(kctrld_loop_lag_max_seconds, and the share of 100 ms probe ticks later than
20 ms from kctrld_loop_lag_seconds), how long the loop thread waited for a
CPU (its run-queue time: lag that other threads and processes caused) and
the peak RSS (VmHWM); for the stop:
the snapshot's size and write time from the log, and the loop during it:
/metrics is scraped back to back from SIGTERM until the endpoint closes
(each scrape waits for the loop to render it), giving the slowest scrape
and, from the loop lag histogram's growth between the first and the last
scrape, the probe ticks of the stop later than 20 ms and the largest lag
bucket they reached. The requests are read
once the daemon watches: after the restore, a warm start checks the
server's history (daemon/watch/reflector.h "History check": a LIST at the
snapshot's resourceVersion for small caches, a few object GETs for large).

client-go: the prebuilt peer of tests/bench/peers/README.md (--client-go
PATH, its directory or the program, default $PEER_CLIENT_GO, as
tests/bench/compare.py takes it). It watches Pods only, so its column needs
--resource pods; it always lists: process start -> its SYNCED line, its CPU
seconds then, the requests the simulator saw, its VmHWM once its worker took
the N keys. Without it the table has no client-go column and says why.
floor: the simulator serving the same objects to a client that only reads
bytes, as one LIST to curl (the floor of a listing sync) and as a streaming
list to a socket (apisim_ceiling.stream_initial_events; the floor of
kctrld's cold sync), and yajl alone parsing the list (CPU,
build/bench/bench_yajl).

--controller: kctrld also runs a controller of the kind with the no-op
plugin (tests/bench/plugins/noop.c, 2 workers), which reconciles every
cached key once after either start; the run then also reports when the last
of the N reconciles finished, and the loop lag covers that too.

  python3 tests/bench/bench_warm.py [--build build] [--objects 100000]
        [--resource configmaps|pods] [--controller] [--client-go PATH] [--sync-timeout S]
"""
import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from datetime import datetime

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
import taplib  # noqa: E402
import compare  # noqa: E402 (the peer's process, its /proc figures, the list floor)
import apisim_ceiling  # noqa: E402 (the streaming-list floor)

KINDS = {"configmaps": "ConfigMap", "pods": "Pod"}
CONFIG = """
logLevel: info
metrics: { bindAddress: "127.0.0.1:0" }
informers:
  - { apiVersion: v1, kind: %s }
controllers: %s
"""
CONTROLLER = """
  - name: bench
    plugin: %s
    for: { apiVersion: v1, kind: %s }
    workers: 2
"""
TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z", re.M)
COLUMNS = ("kctrld cold", "kctrld warm", "client-go cold", "floor")


def ts(line):
    return datetime.strptime(TS.match(line).group(1), "%Y-%m-%dT%H:%M:%S.%f").timestamp()


def ready(k, resource):
    """The reflector's line that completes the first content: listed,
    streamed or restored."""
    return re.search(r"^.* reflector: %s: (?:listed|streamed|restored) \d+ objects.*$" % resource,
                     k.log(), re.M)


def requests(sim, resource):
    """(LISTs, initial-events watches, single-object GETs) of resource the
    simulator saw since its counters were reset."""
    lists = streams = gets = 0
    for r in sim.control("GET", "requests")["requests"]:
        q = r.get("query") or ""
        if "/" + resource not in (r.get("path") or ""):
            continue
        if "sendInitialEvents=true" in q:
            streams += 1
        elif r.get("verb") == "list":
            lists += 1
        elif r.get("verb") == "get":
            gets += 1
    return lists, streams, gets


def watching(sim, resource):
    """The simulator has seen a WATCH of resource (a streaming list counts):
    a warm start's history check, which follows the restore, is over."""
    return any(r.get("verb") == "watch" and "/" + resource in (r.get("path") or "")
               for r in sim.control("GET", "requests")["requests"])


def loop_cpu_wait(pid):
    """Seconds the loop thread (the main thread) has been ready to run but
    waited for a CPU (/proc schedstat's run-queue time): the part of the
    loop lag that other threads and processes on the machine caused."""
    try:
        with open("/proc/%d/task/%d/schedstat" % (pid, pid)) as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')


def scrape_during_stop(k):
    """Scrapes /metrics until the endpoint closes: (scrapes, slowest ms,
    ticks over 20 ms, ticks, largest lag bucket reached) over the stop,
    or None when fewer than two scrapes answered."""
    import urllib.request
    url = "http://127.0.0.1:%d/metrics" % k.metrics_port()
    snaps, slowest = [], 0.0
    while True:
        t0 = time.time()
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                text = r.read().decode()
        except OSError:
            break
        slowest = max(slowest, time.time() - t0)
        snaps.append({(m.group(1), m.group(2) or ""): float(m.group(3))
                      for m in map(SAMPLE.match, text.splitlines()) if m})
    if len(snaps) < 2:
        return None
    a, b = snaps[0], snaps[-1]

    def delta(name, labels=""):
        return b.get((name, labels), 0) - a.get((name, labels), 0)
    ticks = delta("kctrld_loop_lag_seconds_count")
    late = ticks - delta("kctrld_loop_lag_seconds_bucket", 'le="0.02"')
    buckets = sorted((float(lb.split('"')[1]) if "+Inf" not in lb else float("inf"), lb)
                     for (n, lb) in b if n == "kctrld_loop_lag_seconds_bucket")
    top, below = "none", 0
    for le, lb in buckets:
        d = delta("kctrld_loop_lag_seconds_bucket", lb)
        if d > below:
            top = lb.split('"')[1]
        below = d
    return len(snaps), slowest * 1000, late, ticks, top


def kctrld_run(sim, a, state, what):
    sim.control("DELETE", "counters")
    ctl = CONTROLLER % (a.plugin, KINDS[a.resource]) if a.plugin else "[]"
    k = taplib.Kctrld(CONFIG % (KINDS[a.resource], ctl), kubeconfig=sim.kubeconfig,
                      args=["--state-directory", state])
    m = taplib.wait_for(lambda: ready(k, a.resource), timeout=a.sync_timeout, interval=0.05,
                        what=what + " sync")
    cpu = compare.cpu_seconds(compare.read_proc(k.proc.pid, "stat"))
    log = k.log()
    start = ts(log.splitlines()[0])
    secs = ts(m.group(0)) - start
    reconciled = None
    if a.plugin:
        taplib.wait_for(lambda: k.metric(k.scrape(), "controller_runtime_reconcile_total") >= a.objects,
                        timeout=a.sync_timeout, interval=0.05, what=what + " reconciles")
        reconciled = time.time() - start
    snap = k.scrape()
    cpu_wait = loop_cpu_wait(k.proc.pid)
    lag_max = k.metric(snap, "kctrld_loop_lag_max_seconds")
    ticks = k.metric(snap, "kctrld_loop_lag_seconds_count")
    le20 = k.metric(snap, "kctrld_loop_lag_seconds_bucket", 'le="0.02"')
    hwm = compare.status_kib(compare.read_proc(k.proc.pid, "status"))[1]
    taplib.wait_for(lambda: watching(sim, a.resource), timeout=120, what=what + " watch")
    reqs = requests(sim, a.resource)
    k.proc.terminate()
    stop_loop = scrape_during_stop(k)
    code = k.stop(timeout=600)
    stop = re.search(r"snapshot \S+: (\d+) objects at resourceVersion \d+, (\d+) bytes, written in ([\d.]+) ms",
                     k.log())
    r = {"sync": secs, "cpu": cpu, "requests": reqs, "lag_ms": lag_max * 1000,
         "late": (ticks - le20, ticks), "hwm": hwm / 1024.0, "reconciled": reconciled,
         "cpu_wait": cpu_wait}
    print("%s: sync %.2f s, CPU %.2f s, LISTs %d, initial-events watches %d, GETs %d, loop lag max "
          "%.1f ms, ticks > 20 ms %d of %d, peak RSS %.0f MiB, exit %d" %
          ((what, secs, cpu) + reqs + (lag_max * 1000, ticks - le20, ticks, hwm / 1024.0, code)))
    if reconciled is not None:
        print("%s: every key reconciled %.2f s after start" % (what, reconciled))
    if stop:
        r["snapshot"] = (int(stop.group(1)), int(stop.group(2)) / 1048576.0, float(stop.group(3)))
        print("%s stop: snapshot of %d objects, %.1f MiB, written in %.1f ms" % ((what,) + r["snapshot"]))
    if stop_loop:
        r["stop_loop"] = stop_loop
        print("%s stop: %d scrapes, slowest %.1f ms; ticks > 20 ms %d of %d; largest lag bucket "
              "le=%s s" % ((what,) + stop_loop))
    sys.stdout.flush()
    return r


def client_go_run(sim, a, tmp):
    """The peer's cold start: it lists, then watches; done once its worker
    took every key (its peak RSS then, as compare.py's sync rows read it)."""
    sim.control("DELETE", "counters")
    env = dict(os.environ, STAT_MS="200", WATCH_TARGET="0")
    r = compare.start_peer("client-go", [a.client_go, sim.kubeconfig], env,
                           os.path.join(tmp, "client-go.stderr"))
    try:
        s = r.wait_synced(a.sync_timeout)
        if not s:
            raise RuntimeError("no SYNCED line within %d s" % a.sync_timeout)
        reqs = requests(sim, a.resource)
        r.wait_processed(a.objects, a.sync_timeout)
        hwm = r.mem()[1]
    finally:
        r.stop()
    out = {"sync": s[0] - r.t0, "cpu": s[1], "requests": reqs, "hwm": hwm / 1024.0}
    print("client-go cold: sync %.2f s, CPU %.2f s, LISTs %d, initial-events watches %d, GETs %d, "
          "peak RSS %.0f MiB" % ((out["sync"], out["cpu"]) + reqs + (out["hwm"],)), flush=True)
    return out


def floor_run(sim, a, tmp):
    path = os.path.join(tmp, "list.json")
    secs, size = compare.curl_list(sim.url, "/api/v1/" + a.resource, path, timeout=a.sync_timeout)
    out = {"sync": secs, "bytes": size}
    out["stream"] = apisim_ceiling.stream_initial_events(sim.url, a.resource, timeout=a.sync_timeout)[0]
    yajl = os.path.join(compare.ROOT, a.build, "bench", "bench_yajl")
    if os.access(yajl, os.X_OK):
        out["cpu"] = compare.yajl_seconds(a.build, path)
    os.unlink(path)
    print("floor: list of %.1f MiB to curl in %.2f s, streamed to a socket in %.2f s; yajl alone over "
          "it: %s" % (size / 1048576.0, secs, out["stream"],
                      "%.2f s CPU" % out["cpu"] if "cpu" in out else "bench_yajl not built"), flush=True)
    return out


def table(cols, nf):
    """Markdown table of the runs in cols (column name -> result dict or None)."""
    rows = [
        ("sync wall s", lambda r: ("%s LIST to curl, %s streamed to a socket" % (nf(r["sync"]), nf(r["stream"]))
                                   if "stream" in r else nf(r.get("sync")))),
        ("every key reconciled s", lambda r: nf(r.get("reconciled"))),
        ("CPU s at sync", lambda r: ("%s yajl alone" % nf(r["cpu"]) if "bytes" in r and "cpu" in r
                                     else nf(r.get("cpu")))),
        ("LIST / initial-events / object GET requests",
         lambda r: "%d / %d / %d" % r["requests"] if "requests" in r else None),
        ("loop lag max ms", lambda r: nf(r.get("lag_ms"))),
        ("probe ticks over 20 ms", lambda r: "%d of %d" % r["late"] if "late" in r else None),
        ("loop thread waiting for a CPU s", lambda r: nf(r.get("cpu_wait"))),
        ("peak RSS MiB", lambda r: nf(r.get("hwm"))),
    ]
    names = [c for c in COLUMNS if c in cols]
    out = ["| | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for label, cell in rows:
        vals = [(cell(cols[c]) if cols[c] else None) or "-" for c in names]
        out.append("| %s | %s |" % (label, " | ".join(vals)))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("KCTRLD_BUILD", "build"))
    ap.add_argument("--objects", type=int, default=100000)
    ap.add_argument("--resource", choices=sorted(KINDS), default="configmaps")
    ap.add_argument("--client-go", default=os.environ.get("PEER_CLIENT_GO") or None,
                    help="the prebuilt clientgo-peer or its directory (default $PEER_CLIENT_GO)")
    ap.add_argument("--controller", action="store_true",
                    help="kctrld also runs a no-op controller that reconciles every key once")
    ap.add_argument("--sync-timeout", type=int, default=1800)
    a = ap.parse_args()
    os.environ["KCTRLD_BUILD"] = a.build
    taplib.BUILD = os.path.join(taplib.ROOT, a.build)
    cols = {c: None for c in COLUMNS}
    notes = []
    a.client_go, why = compare.client_go_or_why(a.client_go)
    hint = (" (set PEER_CLIENT_GO=DIR, the directory of the prebuilt clientgo-peer, or --client-go "
            "PATH)" if why else "")
    if a.client_go and a.resource != "pods":
        why = "it watches Pods only (run with --resource pods)"
    if why:
        print("client-go peer: %s; the table has no client-go column%s" % (why, hint), flush=True)
        notes.append("client-go left out: %s." % why)
        del cols["client-go cold"]
    tmp = tempfile.mkdtemp(prefix="kctrld-bench-warm-")
    state = os.path.join(tmp, "state")
    a.plugin = (taplib.build_plugin(os.path.join(HERE, "plugins", "noop.c"), tmp, "-O2")
                if a.controller else None)
    t0 = time.time()
    try:
        with taplib.Apisim("--generate", "%s=%d" % (a.resource, a.objects)) as sim:
            print("%d %s generated in %.1f s" % (a.objects, a.resource, time.time() - t0), flush=True)
            cols["floor"] = floor_run(sim, a, tmp)
            cols["kctrld cold"] = kctrld_run(sim, a, state, "kctrld cold")
            cols["kctrld warm"] = kctrld_run(sim, a, state, "kctrld warm")
            if "client-go cold" in cols:
                try:
                    cols["client-go cold"] = client_go_run(sim, a, tmp)
                except Exception as e:  # noqa: BLE001 - a measurement: report, keep the table
                    print("client-go cold: FAILED: %s" % e, flush=True)
                    notes.append("client-go failed: %s." % e)
    finally:
        compare.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    snap = cols["kctrld cold"].get("snapshot")
    if snap:
        notes.append("Stop after the cold run: snapshot of %d objects, %.1f MiB, written in %.0f ms." % snap)
    if "cpu" not in cols["floor"]:
        notes.append("No yajl floor: %s/bench/bench_yajl is not built." % a.build)
    print("\n%d %s (%.1f MiB as one list), %s, at %s:\n" %
          (a.objects, a.resource, cols["floor"]["bytes"] / 1048576.0, compare.machine(), compare.git_rev()))
    print(table(cols, compare.fmt_num))
    if notes:
        print()
    for n in notes:
        print("- " + n)


if __name__ == "__main__":
    main()
