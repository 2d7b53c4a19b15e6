# SPDX-License-Identifier: Apache-2.0
"""Live reload (SIGHUP) of build/kctrld against kube-apisim, one kind of change
per step, observed through /debug/informers and the plugins' effects:

- an informer added: it starts; the untouched informer keeps its cache and
  watch (no new list);
- an informer's scope changed (label selector): replaced by a new one;
- an informer removed: gone;
- a controller added, its settings changed (plugin re-initialised), removed
  (stops reconciling);
- an invalid file: rejected with file:line:col, nothing changes;
- the CLI: --check-config exit codes and --version.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "plugins", "common"))

import taplib  # noqa: E402
import itest  # noqa: E402

KCTRLD = os.path.join(taplib.BUILD, "kctrld")

BASE = """
logLevel: debug
metrics: { bindAddress: "127.0.0.1:0" }
informers:
  - apiVersion: v1
    kind: ConfigMap
    labelSelector: "tier=%(tier)s"
%(extra_informers)s
controllers:
%(controllers)s
"""

TTL = """
  - name: ttl
    plugin: %s
    for: { apiVersion: v1, kind: ConfigMap }
    settings:
      kinds: [ { apiVersion: v1, kind: ConfigMap } ]
      annotation: %%s
""" % itest.plugin_path("ttl")


def config(tier="a", extra_informers="", controllers=None, annotation="kctrld.io/ttl"):
    if controllers is None:
        controllers = TTL % annotation
    return BASE % {"tier": tier, "extra_informers": extra_informers,
                   "controllers": controllers or "  []"}


def metrics_port(k):
    m = taplib.wait_for(lambda: re.search(r"httpserver: serving .* port=(\d+)", k.log()),
                        what="metrics port in the log")
    return int(m.group(1))


def informers(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/debug/informers" % port, timeout=5) as r:
        return json.load(r)


def by_resource(port):
    return {(i["resource"], i["labelSelector"]): i for i in informers(port)}


def reload(k, text):
    with open(k.config, "w") as f:
        f.write(text)
    before = k.log().count("reload applied") + k.log().count("reload rejected") + \
        k.log().count("config unchanged")
    k.proc.send_signal(signal.SIGHUP)
    taplib.wait_for(lambda: k.log().count("reload applied") + k.log().count("reload rejected") +
                    k.log().count("config unchanged") > before, what="reload outcome in the log")


def tier_a_requests(sim):
    code, _, body = sim.request("GET", "/_apisim/requests")
    assert code == 200
    return sum(1 for r in json.loads(body)["requests"] if "tier%3Da" in (r.get("query") or ""))


def cm(c, name, tier, ttl=None, ann="kctrld.io/ttl"):
    meta = {"name": name, "namespace": "default", "labels": {"tier": tier}}
    if ttl:
        meta["annotations"] = {ann: ttl}
    c.sim.request("POST", "/api/v1/namespaces/default/configmaps",
                  {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}})


def exists(c, name):
    code, _, _ = c.sim.request("GET", "/api/v1/namespaces/default/configmaps/" + name)
    return code == 200


def test_reload_each_kind_of_change():
    itest.require_binaries("ttl")
    with taplib.Apisim() as sim:
        c = itest.Cluster(sim)
        with itest.Kctrld(config(), sim.kubeconfig) as k:
            port = metrics_port(k)
            taplib.wait_for(lambda: all(i["synced"] for i in informers(port)), what="sync")
            # The ttl controller works on tier=a objects.
            cm(c, "a1", "a", ttl="1s")
            taplib.wait_for(lambda: not exists(c, "a1"), what="ttl deletes a1")
            # /debug/informers is a snapshot up to 100 ms old (docs/operations.md):
            # wait until it shows both the ADDED and the DELETED event.
            first = taplib.wait_for(
                lambda: (lambda i: i if i["events"] >= 2 and i["objects"] == 0 else None)(
                    by_resource(port)[("configmaps", "tier=a")]),
                what="the tier=a informer's ADDED and DELETED events in /debug/informers")
            requests_a = tier_a_requests(sim)

            # 1. Informer added (Secrets): starts; the ConfigMap informer keeps
            #    its cache and watch (same list count, no relist).
            reload(k, config(extra_informers="  - apiVersion: v1\n    kind: Secret"))
            taplib.wait_for(lambda: ("secrets", "") in by_resource(port) and
                            by_resource(port)[("secrets", "")]["synced"], what="secret informer")
            now = by_resource(port)[("configmaps", "tier=a")]
            # Same informer: its event count carries over, and the server saw
            # no new list or watch for that scope.
            assert now["events"] == first["events"] and now["relists"] == 0, (first, now)
            assert tier_a_requests(sim) == requests_a, "the kept informer must not list or watch again"

            # 2. Scope changed: tier=a -> tier=b is a new informer.
            reload(k, config(tier="b", extra_informers="  - apiVersion: v1\n    kind: Secret"))
            taplib.wait_for(lambda: ("configmaps", "tier=b") in by_resource(port) and
                            ("configmaps", "tier=a") not in by_resource(port), what="scope change")
            cm(c, "b1", "b", ttl="1s")
            taplib.wait_for(lambda: not exists(c, "b1"), what="ttl deletes b1 (new scope)")

            # 3. Informer removed.
            reload(k, config(tier="b"))
            taplib.wait_for(lambda: ("secrets", "") not in by_resource(port), what="secret informer gone")

            # 4. Controller settings changed: the plugin reads another annotation.
            n_init = k.log().count("controller ttl: plugin ")
            reload(k, config(tier="b", annotation="example.com/expires"))
            taplib.wait_for(lambda: k.log().count("controller ttl: plugin ") > n_init,
                            what="plugin re-initialised with the new settings")
            cm(c, "b2", "b", ttl="1s")  # old annotation: must stay
            cm(c, "b3", "b", ttl="1s", ann="example.com/expires")
            taplib.wait_for(lambda: not exists(c, "b3"), what="new annotation honoured")
            assert exists(c, "b2"), "the old annotation must no longer be honoured"

            # 5. Invalid file: rejected with file:line:col, controllers unchanged.
            reload(k, config(tier="b", annotation="example.com/expires") + "bogus: 1\n")
            assert re.search(r"kctrld\.yaml:\d+:\d+: ", k.log()), k.log()[-2000:]
            cm(c, "b4", "b", ttl="1s", ann="example.com/expires")
            taplib.wait_for(lambda: not exists(c, "b4"), what="still reconciling after a rejected reload")

            # 6. Controller removed: nothing reconciles any more.
            reload(k, config(tier="b", controllers=""))
            cm(c, "b5", "b", ttl="1s", ann="example.com/expires")
            time.sleep(3)
            assert exists(c, "b5"), "a removed controller must not act"
            assert k.alive()
        assert k.code == 0, k.log()[-3000:]


def test_cli_check_config_and_version():
    if not os.access(KCTRLD, os.X_OK):
        raise taplib.Skip("kctrld not built")
    out = subprocess.run([KCTRLD, "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("kctrld "), out
    good = os.path.join(taplib.ROOT, "config", "demo.yaml")
    out = subprocess.run([KCTRLD, "--check-config", good], capture_output=True, text=True)
    assert out.returncode == 0, out
    bad = os.path.join(taplib.tempfile.mkdtemp(), "bad.yaml")
    with open(bad, "w") as f:
        f.write("informers:\n  - apiVersion: v1\n    kind: Pod\n    resync: often\n")
    out = subprocess.run([KCTRLD, "--check-config", bad], capture_output=True, text=True)
    assert out.returncode == 1, out
    assert re.search(r"bad\.yaml:4:\d+: ", out.stderr), out.stderr
    out = subprocess.run([KCTRLD, "--no-such-flag"], capture_output=True, text=True)
    assert out.returncode == 2, out


if __name__ == "__main__":
    taplib.run_tests(globals())
