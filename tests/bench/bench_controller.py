#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Controller benchmark: build/kctrld against build/kube-apisim with the tiny
plugins in tests/bench/plugins/ (built here into a private temp dir, mode
0755, like out-of-tree plugins). Prints one table per part:

  (a) reconciles/s with a no-op plugin: a burst of N keys queued at start
      (measured by the plugin: first to last reconcile), then a modification
      stream over the same keys as fast as kube-apisim goes (metrics deltas:
      events received, workqueue adds, reconciles);
  (b) event-to-reconcile latency p50/p90/p99/max: the benchmark patches the
      annotation bench.kctrld.io/sent (CLOCK_REALTIME ns taken just before the
      PATCH is sent) at a fixed rate; the plugin records now - sent;
  (c) RSS of kctrld (VmRSS/VmHWM every 200 ms) under a plugin that sleeps
      100 ms per key while ~10k events/s arrive for 10k keys; prints start,
      peak and end RSS and the workqueue depth over time, and fails (exit 1)
      when RSS grows during the stream (memory must be bounded by keys, not
      events).

  (h) the same no-op reconcile through the whole daemon as a C plugin, an
      exec hook in persistent mode (Python) and one in per-call mode (sh):
      reconciles/s of a burst of --hook-keys keys queued at start, and the
      p50/p99 of controller_runtime_reconcile_time_seconds (bucket bounds);
      docs/hooks.md.

  python3 tests/bench/bench_controller.py [--build build] [--parts a,b,c,h]
        [--keys 20000] [--stream-seconds 8] [--latency-rate 200]
        [--latency-seconds 10] [--rss-keys 10000] [--rss-rate 10000]
        [--rss-seconds 40] [--rss-workers 4] [--hook-keys 2000]
        [--hook-rate 1000]

Every wait is bounded; every process started here is stopped at the end.
Total run time with the defaults: about 2 minutes.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import taplib  # noqa: E402

ROOT = taplib.ROOT
PROCS = []  # every Popen started here, stopped in cleanup()
FAILURES = []  # kctrld runs that did not exit cleanly


def cleanup():
    for p in PROCS:
        if p.poll() is None:
            try:
                p.send_signal(signal.SIGCONT)
                p.kill()
            except ProcessLookupError:
                pass
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass


def build_plugins(tmp):
    return {name: taplib.build_plugin(os.path.join(HERE, "plugins", name + ".c"), tmp, "-O2")
            for name in ("noop", "latency", "sleep")}


def start_apisim(*args):
    sim = taplib.Apisim(*args)
    PROCS.append(sim.proc)
    return sim


class Kctrld(taplib.Kctrld):
    """build/kctrld with one controller over ConfigMaps and a free metrics port."""

    def __init__(self, tmp, sim, tag, plugin, workers, settings, hook=None):
        impl = ("    hook: %s\n" % json.dumps(hook)) if hook else ("    plugin: %s\n" % plugin)
        super().__init__("logLevel: info\nshutdownTimeout: 3s\n"
                         "metrics: { bindAddress: \"127.0.0.1:0\" }\n"
                         "informers:\n"
                         "  - { apiVersion: v1, kind: ConfigMap, pageSize: 500 }\n"
                         "controllers:\n"
                         "  - name: bench\n"
                         "%s"
                         "    for: { apiVersion: v1, kind: ConfigMap }\n"
                         "    workers: %d\n"
                         "    settings: %s\n" % (impl, workers, json.dumps(settings)),
                         sim.kubeconfig, dir=os.path.join(tmp, tag))
        PROCS.append(self.proc)
        self.metrics_port()

    def reconciles(self, snap=None):
        return self.metric(snap or self.scrape(), "controller_runtime_reconcile_total")

    def status_kib(self):
        """(VmRSS, VmHWM) in KiB."""
        rss = hwm = 0
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
        return rss, hwm

    def wait_reconciles(self, n, timeout):
        taplib.wait_for(lambda: self.reconciles() >= n, timeout=timeout, interval=0.1,
                        what="%d reconciles" % n)

    def stop(self, timeout=15):
        code = super().stop(timeout)
        text = self.log()
        if code != 0 or "Sanitizer" in text or "runtime error" in text:
            FAILURES.append(self.dir)
            print("kctrld (%s) exited %d; log tail:\n%s" % (os.path.basename(self.dir),
                  code, "\n".join(text.splitlines()[-30:])), flush=True)
        return code


def modify(sim, count, rate):
    sim.control("POST", "modify", {"resource": "configmaps", "count": count, "rate": rate})


def stop_modify(sim):
    return sim.control("DELETE", "modify")


def pct(sorted_vals, p):
    if not sorted_vals:
        return float("nan")
    k = min(len(sorted_vals) - 1, max(0, int(round(p / 100.0 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[k]


# ---------------------------------------------------------------------------
# (a) reconciles/s, no-op plugin

def part_a(a, tmp, plugins):
    print("(a) reconciles/s, no-op plugin (cache_get + release), %d ConfigMaps "
          "(kube-apisim --generate configmaps=%d), workers: 2" % (a.keys, a.keys), flush=True)
    with start_apisim("--generate", "configmaps=%d" % a.keys, "--history", "200000") as sim:
        # Burst: every key is queued at once when the controller starts
        # (controllers start after the informer synced).
        stats = os.path.join(tmp, "noop-stats")
        t0 = time.monotonic()
        k = Kctrld(tmp, sim, "a-burst", plugins["noop"], 2, {"statsFile": stats})
        try:
            k.wait_reconciles(a.keys, timeout=60)
            ready = time.monotonic() - t0
            rss, _ = k.status_kib()
            time.sleep(0.3)
            counted = k.reconciles()
        finally:
            k.stop()
        with open(stats) as f:
            count, first, last = (int(x) for x in f.read().split())
        burst = (count - 1) / ((last - first) / 1e9) if last > first else float("nan")
        rows = [("burst: %d keys queued at start" % a.keys, count, (last - first) / 1e9, burst,
                 "first to last reconcile (plugin clock); metrics counted %d; process start to "
                 "all reconciled %.2f s; RSS %.1f MiB" % (counted, ready, rss / 1024))]

        # Stream: modifications round robin over the keys, as fast as possible.
        k = Kctrld(tmp, sim, "a-stream", plugins["noop"], 2, {})
        try:
            k.wait_reconciles(a.keys, timeout=60)
            s0, t0 = k.scrape(), time.monotonic()
            modify(sim, 100000000, 0)
            time.sleep(a.stream_seconds)
            s1, t1 = k.scrape(), time.monotonic()
            st = stop_modify(sim)
            el = t1 - t0
            ev = (k.metric(s1, "kctrld_reflector_events_total") - k.metric(s0, "kctrld_reflector_events_total"))
            adds = (k.metric(s1, "workqueue_adds_total") - k.metric(s0, "workqueue_adds_total"))
            rec = k.reconciles(s1) - k.reconciles(s0)
            relists = k.metric(s1, "kctrld_reflector_relists_total")
            rss, _ = k.status_kib()
            rows.append(("stream over %d keys, %.0f s" % (a.keys, el), int(rec), el, rec / el,
                         "apisim wrote %.0f/s; kctrld got %.0f events/s, %.0f adds/s "
                         "(%.0f%% of events coalesced), relists %d, RSS %.1f MiB"
                         % (st["perSecond"], ev / el, adds / el,
                            100.0 * (1 - adds / ev) if ev else 0, relists, rss / 1024)))
        finally:
            k.stop()
    print("%-34s %10s %9s %13s  %s" % ("phase", "reconciles", "seconds", "reconciles/s", "notes"))
    for r in rows:
        print("%-34s %10d %9.2f %13.0f  %s" % r)
    print(flush=True)


# ---------------------------------------------------------------------------
# (b) event-to-reconcile latency

def patch_loop(sim, names, rate, seconds, resource="configmaps", sent_ns=None):
    """Merge-patches bench.kctrld.io/sent on names (of core `resource`) round
    robin at `rate`/s for `seconds` over one keep-alive connection; returns the
    number sent. sent_ns, when a list, gets each PATCH's sent value in order."""
    import http.client
    import urllib.parse
    u = urllib.parse.urlparse(sim.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    hdr = {"Content-Type": "application/merge-patch+json"}
    start = time.monotonic()
    sent = 0
    while True:
        due = start + sent / rate
        now = time.monotonic()
        if now - start >= seconds:
            break
        if due > now:
            time.sleep(due - now)
        ns, name = names[sent % len(names)]
        t_ns = time.time_ns()
        body = '{"metadata":{"annotations":{"bench.kctrld.io/sent":"%d"}}}' % t_ns
        conn.request("PATCH", "/api/v1/namespaces/%s/%s/%s" % (ns, resource, name), body, hdr)
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            raise RuntimeError("PATCH %s/%s: %d" % (ns, name, r.status))
        if sent_ns is not None:
            sent_ns.append(t_ns)
        sent += 1
    conn.close()
    return sent


def part_b(a, tmp, plugins):
    nkeys = 1000
    print("(b) event-to-reconcile latency (PATCH sent -> reconcile reads it from the cache), "
          "%d ConfigMaps, workers: 2, %d patches/s round robin for %d s"
          % (nkeys, a.latency_rate, a.latency_seconds), flush=True)
    rows = []
    with start_apisim("--generate", "configmaps=%d" % nkeys, "--history", "200000") as sim:
        _, lst = sim.json("GET", "/api/v1/configmaps", expect=200)
        names = [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in lst["items"]]
        for label, background in (("idle", 0), ("+ 2000 other events/s", 2000)):
            samples = os.path.join(tmp, "latency-%d" % background)
            k = Kctrld(tmp, sim, "b-%d" % background, plugins["latency"], 2,
                       {"samplesFile": samples, "maxSamples": 2000000})
            try:
                k.wait_reconciles(nkeys, timeout=30)
                if background:
                    modify(sim, 100000000, background)
                t_first = time.time_ns()  # earlier sent values are left from the previous run
                n = patch_loop(sim, names, a.latency_rate, a.latency_seconds)
                if background:
                    stop_modify(sim)
                # let the last patches arrive
                time.sleep(1.0)
            finally:
                k.stop()
            best = {}
            with open(samples) as f:
                for line in f:
                    s, lat = (int(x) for x in line.split())
                    if s < t_first:
                        continue
                    if s not in best or lat < best[s]:
                        best[s] = lat  # the first reconcile that saw this patch
            lats = sorted(v / 1e6 for v in best.values())
            rows.append((label, n, len(lats), pct(lats, 50), pct(lats, 90), pct(lats, 99),
                         lats[-1] if lats else float("nan")))
    print("%-24s %8s %8s %9s %9s %9s %9s" % ("load", "patches", "samples", "p50 ms", "p90 ms",
                                              "p99 ms", "max ms"))
    for r in rows:
        print("%-24s %8d %8d %9.2f %9.2f %9.2f %9.2f" % r)
    print(flush=True)


# ---------------------------------------------------------------------------
# (c) RSS under a slow plugin and a fast event stream

def part_c(a, tmp, plugins):
    print("(c) RSS under a plugin sleeping 100 ms per key (workers: %d), %d ConfigMaps, "
          "modification stream asked at %d events/s for %d s"
          % (a.rss_workers, a.rss_keys, a.rss_rate, a.rss_seconds), flush=True)
    ok = True
    # History large enough that kctrld's watch never falls out of the window.
    hist = max(200000, a.rss_rate * 10)
    with start_apisim("--generate", "configmaps=%d" % a.rss_keys, "--history", str(hist)) as sim:
        k = Kctrld(tmp, sim, "c", plugins["sleep"], a.rss_workers, {"sleepMs": 100})
        try:
            taplib.wait_for(lambda: k.metric(k.scrape(), "kctrld_informer_synced") == 1
                            and k.metric(k.scrape(), "workqueue_adds_total") >= a.rss_keys,
                            timeout=60, interval=0.2, what="sync")
            time.sleep(1.0)
            start_rss, _ = k.status_kib()
            s0 = k.scrape()
            modify(sim, a.rss_rate * (a.rss_seconds + 30), a.rss_rate)
            t0 = time.monotonic()
            rss_series = []  # (t, rss)
            rows = []
            prev = (0.0, s0)
            next_scrape = t0 + 5.0
            while True:
                now = time.monotonic()
                if now - t0 >= a.rss_seconds:
                    break
                rss_series.append((now - t0, k.status_kib()[0]))
                if now >= next_scrape:
                    s = k.scrape()
                    dt = now - t0 - prev[0]
                    rows.append((now - t0, rss_series[-1][1],
                                 k.metric(s, "workqueue_depth"),
                                 (k.metric(s, "kctrld_reflector_events_total")
                                  - k.metric(prev[1], "kctrld_reflector_events_total")) / dt,
                                 (k.reconciles(s) - k.reconciles(prev[1])) / dt,
                                 k.metric(s, "kctrld_reflector_relists_total")))
                    prev = (now - t0, s)
                    next_scrape += 5.0
                time.sleep(0.2)
            st = stop_modify(sim)
            s1 = k.scrape()
            el = time.monotonic() - t0
            end_rss, hwm = k.status_kib()
            dt = el - prev[0]
            rows.append((el, end_rss, k.metric(s1, "workqueue_depth"),
                         (k.metric(s1, "kctrld_reflector_events_total")
                          - k.metric(prev[1], "kctrld_reflector_events_total")) / dt,
                         (k.reconciles(s1) - k.reconciles(prev[1])) / dt,
                         k.metric(s1, "kctrld_reflector_relists_total")))
            events = k.metric(s1, "kctrld_reflector_events_total") - k.metric(s0, "kctrld_reflector_events_total")
        finally:
            k.stop()
    print("%8s %10s %10s %12s %13s %8s" % ("t (s)", "RSS MiB", "wq depth", "events/s", "reconciles/s",
                                          "relists"))
    for r in rows:
        print("%8.1f %10.1f %10d %12.0f %13.1f %8d" % (r[0], r[1] / 1024, r[2], r[3], r[4], r[5]))
    peak = max(r for _, r in rss_series)
    third = [r for t, r in rss_series if t >= el / 3]
    settled = min(third) if third else start_rss
    growth = end_rss - settled
    print("events: apisim wrote %d (%.0f/s), kctrld received %d (%.0f/s)"
          % (st["done"], st["perSecond"], events, events / el))
    print("RSS KiB: start %d, peak %d, end %d, VmHWM %d; growth over the last 2/3: %+d"
          % (start_rss, peak, end_rss, hwm, growth))
    if "san" in os.path.basename(os.path.normpath(taplib.BUILD)):
        print("sanitizer build: RSS includes the allocator's quarantine; no verdict")
    elif growth > 0.05 * settled + 2048:
        print("RSS NOT FLAT: grew %d KiB while the stream ran" % growth)
        ok = False
    else:
        print("RSS flat: memory bounded by keys, not events")
    print(flush=True)
    return ok


# ---------------------------------------------------------------------------
# (h) the no-op reconcile as a C plugin vs exec hooks, through the daemon

NOOP_PY = "import sys\nfor line in sys.stdin:\n    sys.stdout.write('{\"result\":\"done\"}\\n')\n    sys.stdout.flush()\n"
NOOP_SH = "cat >/dev/null\necho '{\"result\":\"done\"}'\n"


def histogram_pct(snap, name, p):
    """The upper bound of the bucket holding the p-th percentile of a histogram in a scrape."""
    buckets = sorted((float(re.search(r'le="([^"]+)"', lb).group(1)), v)
                     for (n, lb), v in snap.items() if n == name + "_bucket" and 'le="' in lb)
    if not buckets or buckets[-1][1] == 0:
        return float("nan")
    want = buckets[-1][1] * p / 100.0
    for le, count in buckets:
        if count >= want:
            return le
    return float("inf")


def part_h(a, tmp, plugins):
    print("(h) no-op reconcile through the daemon: C plugin vs exec hooks; %d ConfigMaps, modified at "
          "%.0f/s for %.0f s after the initial burst, workers: 2" % (a.hook_keys, a.hook_rate, a.stream_seconds),
          flush=True)
    py, sh = os.path.join(tmp, "noop.py"), os.path.join(tmp, "noop.sh")
    for path, text in ((py, NOOP_PY), (sh, NOOP_SH)):
        with open(path, "w") as f:
            f.write(text)
    modes = [("C plugin (noop.so)", None),
             ("exec persistent (python3)", {"exec": {"command": ["python3", py]}}),
             ("exec per-call (sh)", {"exec": {"command": ["sh", sh], "mode": "per-call"}})]
    hist = "controller_runtime_reconcile_time_seconds"
    rows = []
    with start_apisim("--generate", "configmaps=%d" % a.hook_keys, "--history", "200000") as sim:
        for name, hook in modes:
            k = Kctrld(tmp, sim, "h-%d" % len(rows), plugins["noop"], 2, {}, hook=hook)
            try:
                t0 = time.monotonic()
                k.wait_reconciles(a.hook_keys, timeout=180)
                burst = time.monotonic() - t0
                s0, t1 = k.scrape(), time.monotonic()
                modify(sim, 100000000, a.hook_rate)
                time.sleep(a.stream_seconds)
                s1, t2 = k.scrape(), time.monotonic()
                st = stop_modify(sim)
                n = k.reconciles(s1) - k.reconciles(s0)
                dsum = k.metric(s1, hist + "_sum") - k.metric(s0, hist + "_sum")
                delta = {key: v - s0.get(key, 0) for key, v in s1.items() if key[0] == hist + "_bucket"}
                rows.append((name, burst, st["perSecond"], n / (t2 - t1), dsum / n * 1e6 if n else float("nan"),
                             histogram_pct(delta, hist, 99) * 1e3))
            finally:
                k.stop()
    print("%-28s %11s %12s %13s %12s %10s" % ("implementation", "burst s", "apisim w/s", "reconciles/s",
                                               "mean us", "p99 <= ms"))
    for r in rows:
        print("%-28s %11.2f %12.0f %13.0f %12.1f %10.3g" % r)
    print("(burst: from the metrics endpoint answering to every key reconciled once; mean: reconcile_time _sum/_count over the "
          "stream; p99: the upper bound of its histogram bucket, which starts at 5 ms)")
    print(flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("KCTRLD_BUILD", "build"))
    ap.add_argument("--parts", default="a,b,c,h")
    ap.add_argument("--keys", type=int, default=20000)
    ap.add_argument("--stream-seconds", type=float, default=8)
    ap.add_argument("--latency-rate", type=float, default=200)
    ap.add_argument("--latency-seconds", type=float, default=10)
    ap.add_argument("--rss-keys", type=int, default=10000)
    ap.add_argument("--rss-rate", type=int, default=10000)
    ap.add_argument("--rss-seconds", type=float, default=40)
    ap.add_argument("--rss-workers", type=int, default=4)
    ap.add_argument("--hook-keys", type=int, default=2000)
    ap.add_argument("--hook-rate", type=float, default=1000)
    a = ap.parse_args()
    taplib.BUILD = os.path.join(ROOT, a.build)
    os.environ["KCTRLD_BUILD"] = a.build
    for b in ("kctrld", "kube-apisim"):
        if not os.access(os.path.join(taplib.BUILD, b), os.X_OK):
            sys.exit("%s/%s not built (make -j2)" % (a.build, b))
    tmp = tempfile.mkdtemp(prefix="kctrld-bench-")
    os.chmod(tmp, 0o700)  # plugin directories must not be writable by others
    ok = True
    t0 = time.monotonic()
    try:
        plugins = build_plugins(tmp)
        parts = a.parts.split(",")
        if "a" in parts:
            part_a(a, tmp, plugins)
        if "b" in parts:
            part_b(a, tmp, plugins)
        if "c" in parts:
            ok = part_c(a, tmp, plugins)
        if "h" in parts:
            part_h(a, tmp, plugins)
    finally:
        cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    print("total %.0f s" % (time.monotonic() - t0))
    if FAILURES:
        print("FAILED: kctrld did not exit cleanly in: %s" % ", ".join(os.path.basename(f) for f in FAILURES))
    sys.exit(0 if ok and not FAILURES else 1)


if __name__ == "__main__":
    main()
