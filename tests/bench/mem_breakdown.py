#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Memory per cached Pod of kctrld the way `make bench` measures it, with the
allocator's view (docs/benchmarks.md "Memory per object and after a relist").

  python3 tests/bench/mem_breakdown.py [--build build] [--pods 10000]

Runs compare.py's kctrld sync scenario on its own (same config: one Pod
informer, pageSize 500, the noop plugin, one worker) against kube-apisim
--generate pods=N and against an empty cluster, and prints (VmRSS after the
worker drained - VmRSS on the empty cluster) / N over the JSON bytes per Pod
of the list body, kctrld_informer_bytes / N (the objects: kc_obj_mem_size),
then the same RSS figure after one more malloc_trim(0) with malloc_info per
arena before and after it. The trim and malloc_info run in a helper thread
preloaded into kctrld (compiled here from HELPER_C), so the daemon is the
release build unchanged.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

HELPER_C = r'''
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
/* When $MEMH_TRIGGER exists: malloc_info to TRIGGER.before, malloc_trim(0),
 * malloc_info to TRIGGER.after, then the trigger is removed. */
static void *run(void *arg) {
  const char *t = arg;
  char p[4096];
  for (;;) {
    usleep(50000);
    if (access(t, F_OK)) continue;
    snprintf(p, sizeof p, "%s.before", t);
    FILE *f = fopen(p, "w");
    if (f) { malloc_info(0, f); fclose(f); }
    malloc_trim(0);
    snprintf(p, sizeof p, "%s.after", t);
    f = fopen(p, "w");
    if (f) { malloc_info(0, f); fclose(f); }
    unlink(t);
  }
  return NULL;
}
__attribute__((constructor)) static void init(void) {
  const char *t = getenv("MEMH_TRIGGER");
  pthread_t th;
  if (t && pthread_create(&th, NULL, run, (void *)t) == 0) pthread_detach(th);
}
'''


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def arenas(xml):
    out = []
    for m in re.finditer(r'<heap nr="(\d+)">(.*?)</heap>', xml, re.S):
        b = m.group(2)
        fast = re.search(r'<total type="fast" count="\d+" size="(\d+)"/>', b)
        rest = re.search(r'<total type="rest" count="\d+" size="(\d+)"/>', b)
        cur = re.search(r'<system type="current" size="(\d+)"/>', b)
        out.append("arena %s: %d KiB from the system, free: %d KiB in fast bins, %d KiB other"
                   % (m.group(1), int(cur.group(1)) // 1024, int(fast.group(1)) // 1024,
                      int(rest.group(1)) // 1024))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--pods", type=int, default=10000)
    a = ap.parse_args()
    os.environ["KCTRLD_BUILD"] = a.build
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
    sys.path.insert(0, HERE)
    import bench_controller
    import taplib
    tmp = tempfile.mkdtemp(prefix="kctrld-mem-")
    helper = os.path.join(tmp, "memhelper.so")
    src = os.path.join(tmp, "memhelper.c")
    with open(src, "w") as f:
        f.write(HELPER_C)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", helper, src, "-lpthread"], check=True)
    plugins = bench_controller.build_plugins(tmp)

    def run(n, tag):
        args = ("--generate", "pods=%d" % n) if n else ()
        with taplib.Apisim(*args) as sim:
            d = os.path.join(tmp, tag)
            sync_file = os.path.join(d, "synced")
            cfg = ("logLevel: info\nshutdownTimeout: 3s\n"
                   "metrics: { bindAddress: \"127.0.0.1:0\" }\n"
                   "informers:\n  - { apiVersion: v1, kind: Pod, pageSize: 500 }\n"
                   "controllers:\n  - name: bench\n    plugin: %s\n"
                   "    for: { apiVersion: v1, kind: Pod }\n    workers: 1\n"
                   "    settings: %s\n" % (plugins["noop"],
                                           json.dumps({"kind": "Pod", "syncFile": sync_file})))
            trig = os.path.join(tmp, tag + ".trigger")
            saved = dict(os.environ)
            os.environ.update(LD_PRELOAD=helper, MEMH_TRIGGER=trig)
            try:
                k = taplib.Kctrld(cfg, sim.kubeconfig, dir=d)
            finally:
                os.environ.clear()
                os.environ.update(saved)
            try:
                taplib.wait_for(lambda: k.metric(k.scrape(), "kctrld_informer_synced") == 1,
                                timeout=300, interval=0.1, what="informer synced")
                if n:
                    taplib.wait_for(lambda: k.metric(k.scrape(), "controller_runtime_reconcile_total") >= n,
                                    timeout=300, interval=0.2, what="%d reconciles" % n)
                time.sleep(0.5)  # as compare.py's sync scenario
                rss = rss_kib(k.proc.pid)
                objb = k.metric(k.scrape(), "kctrld_informer_bytes")
                open(trig, "w").close()
                taplib.wait_for(lambda: not os.path.exists(trig), timeout=60, what="malloc_trim")
                time.sleep(0.2)
                with open(trig + ".before") as f:
                    before = f.read()
                with open(trig + ".after") as f:
                    after = f.read()
                return rss, rss_kib(k.proc.pid), objb, before, after
            finally:
                k.stop()

    e_rss, e_trim, _, _, _ = run(0, "empty")
    rss, trim, objb, before, after = run(a.pods, "pods")
    with taplib.Apisim("--generate", "pods=%d" % a.pods) as sim:
        size = int(subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{size_download}",
                                   sim.url + "/api/v1/pods"], check=True, capture_output=True,
                                  text=True).stdout)
    n, jpo = a.pods, size / a.pods
    per, per_t = (rss - e_rss) * 1024.0 / n, (trim - e_trim) * 1024.0 / n
    print("%d Pods, JSON %.1f bytes per Pod (list body / N)" % (n, jpo))
    print("RSS per Pod (as make bench):      %7.0f bytes = %.4fx JSON" % (per, per / jpo))
    print("objects (kctrld_informer_bytes):  %7.0f bytes = %.4fx JSON" % (objb / n, objb / n / jpo))
    print("RSS per Pod after malloc_trim(0): %7.0f bytes = %.4fx JSON" % (per_t, per_t / jpo))
    for what, xml in (("before the trim", before), ("after the trim", after)):
        print(what + ":")
        for line in arenas(xml):
            print("  " + line)


if __name__ == "__main__":
    main()
