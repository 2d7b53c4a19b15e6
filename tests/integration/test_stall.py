# SPDX-License-Identifier: Apache-2.0
"""build/kctrld keeps serving while one watch brings a big object in 1-byte
HTTP chunks (the same scenario without the daemon's HTTP server is
tests/unit/test_loop_stall.c).

kube-apisim cuts every ConfigMap watch into 1-byte HTTP chunks (fault
"chunks", installed before the daemon starts, so its first watch already
comes that way); the daemon informs on ConfigMaps and on Pods. A ConfigMap
with a value of 3 MiB less 4 KiB (the simulator's request body limit) is
created; while its event streams (seconds, at one chunk per byte), a thread
asks /healthz every 20 ms and the test creates Pods every 50 ms.

Checked (behaviour, not timing): every /healthz answer during the stream is
200; every Pod reaches the daemon's Pod informer (/debug/informers) before
the big ConfigMap reaches its ConfigMap informer, which it then does; the
daemon's largest loop lag (kctrld_loop_lag_max_seconds) stays under a
generous 1 s guard. The measured lag and the number of /healthz answers are
printed as TAP diagnostics. Like the unit test, the ordering relies on the
1-byte transport (about 0.5 MB/s here) outlasting the Pod creations.
"""
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import taplib  # noqa: E402

CONFIG = """
metrics: { bindAddress: "127.0.0.1:0" }
informers:
  - { apiVersion: v1, kind: ConfigMap }
  - { apiVersion: v1, kind: Pod }
controllers: []
"""

BIG = 3 * 1024 * 1024 - 4096
PODS = 6


def require_binaries():
    for name in ("kctrld", "kube-apisim"):
        p = os.path.join(taplib.BUILD, name)
        if not os.access(p, os.X_OK):
            raise taplib.Skip("%s not built" % p)


def get(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def informers(port):
    """{resource: its /debug/informers entry}."""
    st, body = get(port, "/debug/informers")
    assert st == 200, (st, body)
    return {i["resource"]: i for i in json.loads(body)}


def test_healthz_and_other_informer_while_big_object_streams():
    require_binaries()
    with taplib.Apisim() as sim:
        sim.control("POST", "faults", {"action": "chunks", "chunkBytes": 1,
                                        "pathPrefix": "/api/v1/configmaps", "watch": True, "count": -1})
        with taplib.Kctrld(CONFIG, kubeconfig=sim.kubeconfig) as k:
            port = k.metrics_port()
            taplib.wait_for(lambda: all(i["synced"] for i in informers(port).values())
                            and len(informers(port)) == 2, timeout=30, what="both informers to sync")
            taplib.wait_for(lambda: all(i["watches"] >= 1 for i in informers(port).values()),
                            timeout=30, what="both watches to open")
            time.sleep(0.3)  # the watches' requests reach the simulator
            base = informers(port)
            cms0, pods0 = base["configmaps"]["objects"], base["pods"]["objects"]

            answers, stop = [], threading.Event()

            def probe():
                while not stop.is_set():
                    try:
                        answers.append(get(port, "/healthz"))
                    except OSError as e:
                        answers.append((None, repr(e)))
                    time.sleep(0.02)

            th = threading.Thread(target=probe)
            th.start()
            try:
                big = {"metadata": {"name": "big", "namespace": "default"}, "data": {"v": "x" * BIG}}
                sim.json("POST", "/api/v1/namespaces/default/configmaps", big, expect=201)
                for n in range(PODS):
                    pod = {"metadata": {"name": "p%d" % n, "namespace": "default"},
                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
                    sim.json("POST", "/api/v1/namespaces/default/pods", pod, expect=201)
                    time.sleep(0.05)
                taplib.wait_for(lambda: informers(port)["pods"]["objects"] == pods0 + PODS,
                                timeout=30, what="the Pods to reach the Pod informer")
                # The Pods came through while the big event was still on its way.
                assert informers(port)["configmaps"]["objects"] == cms0, informers(port)
                taplib.wait_for(lambda: informers(port)["configmaps"]["objects"] == cms0 + 1,
                                timeout=120, interval=0.2, what="the big ConfigMap to arrive")
            finally:
                stop.set()
                th.join()
            bad = [a for a in answers if a[0] != 200]
            assert answers and not bad, bad[:5]
            lag = k.metric(k.scrape(), "kctrld_loop_lag_max_seconds")
            print("# %d /healthz answers, all 200; kctrld_loop_lag_max_seconds %.4f" % (len(answers), lag))
            assert lag < 1.0, lag
            assert k.alive(), k.log()
            assert k.stop() == 0, k.log()


if __name__ == "__main__":
    taplib.run_tests(globals())
