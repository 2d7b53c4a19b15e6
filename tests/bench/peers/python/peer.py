#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""python3-kubernetes (Debian 22.6.0) peer: LIST then WATCH all Pods (the
client's models), a dict cache, handler puts the key into a dedup set, one
worker thread drains it. Same stdout protocol as the other peers."""
import os, sys, threading, time
from kubernetes import client, config, watch

config.load_kube_config(sys.argv[1])
v1 = client.CoreV1Api()
target = int(os.environ.get("WATCH_TARGET", "0"))
stat_s = int(os.environ.get("STAT_MS", "1000")) / 1000.0
cache, pending, cv = {}, set(), threading.Condition()
c = {"events": 0, "processed": 0, "updates": 0}
synced = False

def enqueue(key):
    with cv:
        pending.add(key)
        c["events"] += 1
        cv.notify()

def worker():
    while True:
        with cv:
            while not pending:
                cv.wait()
            key = pending.pop()
        cache.get(key)
        c["processed"] += 1

threading.Thread(target=worker, daemon=True).start()

def stat():
    while True:
        time.sleep(stat_s)
        print("STAT %.6f %d %d %d" % (time.time(), c["events"], c["processed"], c["updates"]), flush=True)

while True:
    lst = v1.list_pod_for_all_namespaces()
    for p in lst.items:
        k = "%s/%s" % (p.metadata.namespace, p.metadata.name)
        cache[k] = p
        enqueue(k)
    rv = lst.metadata.resource_version
    if not synced:
        synced = True
        print("SYNCED %.6f %d %d" % (time.time(), c["events"], c["processed"]), flush=True)
        threading.Thread(target=stat, daemon=True).start()
    try:
        w = watch.Watch()
        for ev in w.stream(v1.list_pod_for_all_namespaces, resource_version=rv, timeout_seconds=3600):
            p = ev["object"]
            k = "%s/%s" % (p.metadata.namespace, p.metadata.name)
            if ev["type"] == "DELETED":
                cache.pop(k, None)
            else:
                cache[k] = p
            enqueue(k)
            if ev["type"] == "MODIFIED":
                c["updates"] += 1
                if target and c["updates"] % target == 0:
                    print("DONE %.6f %d" % (time.time(), c["updates"]), flush=True)
    except Exception as e:  # 410 etc.: relist
        print("watch error: %r" % (e,), file=sys.stderr, flush=True)
