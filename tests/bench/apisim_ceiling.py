#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Measures kube-apisim's own ceiling, so benchmark results of the daemon are
never the simulator's limits. Prints a table.

  python3 tests/bench/apisim_ceiling.py [--build build] [--objects 2000]
        [--events 20000] [--watchers 1,10,50] [--lists 10]

Clients count bytes and newlines with large recv() calls (no JSON decoding),
so the client side costs far less than the server side.
"""
import argparse
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from taplib import Apisim  # noqa: E402


def open_stream(url, path):
    host, port = url.split("//")[1].split(":")
    s = socket.create_connection((host, int(port)))
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n" % path).encode())
    return s


def stream_initial_events(url, resource, timeout=600):
    """(wall s, bytes) of one streaming list of the core resource (a watch
    with sendInitialEvents=true) read by a socket that parses nothing, up to
    the bookmark that ends the initial events: the floor of a streaming-list
    sync, as curl reading a LIST is the floor of a listing one."""
    mark = b"k8s.io/initial-events-end"
    t0 = time.monotonic()
    sock = open_stream(url, "/api/v1/%s?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
                            "&resourceVersionMatch=NotOlderThan" % resource)
    sock.settimeout(timeout)
    total, tail = 0, b""
    try:
        while True:
            d = sock.recv(1 << 20)
            if not d:
                raise RuntimeError("the stream ended before its initial-events-end bookmark")
            total += len(d)
            if mark in tail + d:  # the mark may straddle two reads
                return time.monotonic() - t0, total
            tail = d[-len(mark):]
    finally:
        sock.close()


def read_until_lines(sock, want, out, idx):
    lines = 0
    head = True
    buf = b""
    total = 0
    while lines < want:
        d = sock.recv(1 << 20)
        if not d:
            break
        total += len(d)
        if head:
            buf += d
            if b"\r\n\r\n" not in buf:
                continue
            d = buf.split(b"\r\n\r\n", 1)[1]
            head = False
        # chunk-size lines also end in \r\n; count only event newlines ("}\n")
        lines += d.count(b"}\n")
    out[idx] = (lines, total)
    sock.close()


def bench_events(build, objects, events, watchers, res="pods"):
    os.environ["KCTRLD_BUILD"] = build
    with Apisim("--generate", "%s=%d" % (res, objects), "--history", str(max(events * 2, 10000))) as s:
        _, lst = s.json("GET", "/api/v1/%s?limit=1" % res, expect=200)
        rv = lst["metadata"]["resourceVersion"]
        socks = [open_stream(s.url, "/api/v1/%s?watch=1&resourceVersion=%s" % (res, rv)) for _ in range(watchers)]
        out = [None] * watchers
        ths = [threading.Thread(target=read_until_lines, args=(k, events, out, i)) for i, k in enumerate(socks)]
        for t in ths:
            t.start()
        t0 = time.monotonic()
        s.control("POST", "modify", {"resource": res, "count": events, "rate": 0})
        for t in ths:
            t.join(300)
        el = time.monotonic() - t0
        gen = s.control("GET", "modify")
        got = sum(o[0] for o in out if o)
        mb = sum(o[1] for o in out if o) / 1e6
        return {"watchers": watchers, "events": got, "seconds": el,
                "delivered_per_s": got / el, "per_watch_per_s": got / el / watchers,
                "writes_per_s": gen["perSecond"], "MB_per_s": mb / el}


def bench_list(build, objects, lists):
    os.environ["KCTRLD_BUILD"] = build
    with Apisim("--generate", "pods=%d" % objects) as s:
        total = 0
        t0 = time.monotonic()
        for _ in range(lists):
            sock = open_stream(s.url, "/api/v1/pods")
            sock.sendall(b"")
            while True:
                d = sock.recv(1 << 20)
                if not d:
                    break
                total += len(d)
                if d.endswith(b"]}"):
                    break
            sock.close()
        el = time.monotonic() - t0
        return {"lists": lists, "objects": objects, "MB": total / 1e6, "seconds": el,
                "MB_per_s": total / 1e6 / el, "lists_per_s": lists / el}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--objects", type=int, default=2000)
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--watchers", default="1,10,50")
    ap.add_argument("--lists", type=int, default=10)
    ap.add_argument("--resource", default="pods", help="core resource to modify (pods, configmaps)")
    a = ap.parse_args()
    print("kube-apisim ceiling (%s shaped like the fixtures, %d objects)" % (a.resource, a.objects))
    print("%-10s %10s %9s %14s %14s %12s %10s" % ("watchers", "events", "seconds", "delivered/s",
                                                  "per-watch/s", "writes/s", "MB/s"))
    for w in [int(x) for x in a.watchers.split(",")]:
        r = bench_events(a.build, a.objects, a.events, w, a.resource)
        print("%-10d %10d %9.2f %14.0f %14.0f %12.0f %10.1f" % (
            r["watchers"], r["events"], r["seconds"], r["delivered_per_s"], r["per_watch_per_s"],
            r["writes_per_s"], r["MB_per_s"]))
    r = bench_list(a.build, a.objects, a.lists)
    print()
    print("%-10s %10s %9s %10s %12s" % ("lists", "objects", "seconds", "MB/s", "lists/s"))
    print("%-10d %10d %9.2f %10.1f %12.1f" % (r["lists"], r["objects"], r["seconds"], r["MB_per_s"], r["lists_per_s"]))


if __name__ == "__main__":
    main()
