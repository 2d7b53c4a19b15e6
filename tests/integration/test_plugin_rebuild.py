# SPDX-License-Identifier: Apache-2.0
"""A plugin rebuilt at the same path runs its new code after SIGHUP, with the
config file unchanged (glibc alone would hand back the object it loaded for
that pathname), in-process and with `isolation: process` (whose children load
the file: the daemon never does, daemon/hooks/isolate.h). The stamp plugin
(tests/integration/plugins/stamp.c) is built with -DSTAMP_SUFFIX="@v1", then
rebuilt as "@v2" at the same path: after SIGHUP the ConfigMap's stamp ends in
"@v2" and the log says the file changed.
"""
import json
import os
import signal
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import taplib  # noqa: E402

ROOT = taplib.ROOT
SRC = os.path.join(ROOT, "tests", "integration", "plugins", "stamp.c")
CM = "/api/v1/namespaces/default/configmaps"


def stamp(sim):
    st, doc = sim.json("GET", CM + "/cm")
    return ((doc or {}).get("metadata", {}).get("annotations") or {}).get("test.kctrld.io/stamp", "")


def rebuilt_plugin_runs_new_code(isolation):
    for p in ("kctrld", "kube-apisim"):
        if not os.access(os.path.join(taplib.BUILD, p), os.X_OK):
            raise taplib.Skip("%s not built" % p)
    d = tempfile.mkdtemp(prefix="kctrld-rebuild-")
    os.chmod(d, 0o755)
    so = taplib.build_plugin(SRC, d, '-DSTAMP_SUFFIX="@v1"')
    config = ("logLevel: info\n"
              "metrics: { bindAddress: \"127.0.0.1:0\" }\n"
              "controllers:\n"
              "  - name: stamp\n"
              "    plugin: %s\n"
              "    for: { apiVersion: v1, kind: ConfigMap }\n"
              "    settings: { identity: me }\n" % so)
    if isolation:
        config += "    isolation: %s\n" % isolation
    with taplib.Apisim() as sim, taplib.Kctrld(config, kubeconfig=sim.kubeconfig) as k:
        sim.json("POST", CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"},
                              "data": {"seq": "1"}}, expect=201)
        taplib.wait_for(lambda: stamp(sim) == "me/1@v1", what="the v1 stamp")
        taplib.build_plugin(SRC, d, '-DSTAMP_SUFFIX="@v2"')
        k.proc.send_signal(signal.SIGHUP)
        taplib.wait_for(lambda: "plugin file changed: %s" % so in k.log(), what="the reload to name the file")
        taplib.wait_for(lambda: "the file changed since it was loaded" in k.log(), what="the new code to load")
        sim.json("PATCH", CM + "/cm", json.dumps({"data": {"seq": "2"}}),
                 headers={"Content-Type": "application/merge-patch+json"}, expect=200)
        taplib.wait_for(lambda: stamp(sim) == "me/2@v2", what="the v2 stamp (have %r)" % stamp(sim))
        assert k.stop() == 0, k.log()


def test_rebuilt_plugin_runs_new_code():
    rebuilt_plugin_runs_new_code(None)


def test_rebuilt_isolated_plugin_runs_new_code():
    rebuilt_plugin_runs_new_code("process")


if __name__ == "__main__":
    taplib.run_tests(globals())
