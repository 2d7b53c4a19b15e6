#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Integration test of the hook helpers (plugins/hooks/helpers: the Python
module kctrld_hook.py and the bash + jq helper hook.sh) through the keycount
hook written with each (plugins/hooks/keycount), against kube-apisim, in
both exec modes: every ConfigMap gets kctrld.io/keys (a merge patch with
the cached resourceVersion) and a Counted Event; a changed ConfigMap is
counted again; what the function prints reaches the daemon's log, not the
response; a failing function (the Python one raises, the shell one sets an
error result) is an error result retried with per-key backoff while other
ConfigMaps are served; fixed, it is counted.

Where the helpers and the hooks are: the source tree, or (test_deb.sh, for
the installed package) KCTRLD_HOOK_PYTHONPATH (the directory of
kctrld_hook.py), KCTRLD_HOOK_SH (hook.sh) and KEYCOUNT_DIR (keycount.py and
keycount.sh). The shell variant is skipped without jq."""
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import itest  # noqa: E402
from itest import Cluster, Kctrld, wait_for  # noqa: E402
import taplib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
HOOKS = os.path.abspath(os.path.join(HERE, ".."))
PYTHONPATH = os.environ.get("KCTRLD_HOOK_PYTHONPATH", os.path.join(HOOKS, "helpers"))
HOOK_SH = os.environ.get("KCTRLD_HOOK_SH", os.path.join(HOOKS, "helpers", "hook.sh"))
KEYCOUNT = os.environ.get("KEYCOUNT_DIR", os.path.join(HOOKS, "keycount"))
NS = "kc"
CMS = "/api/v1/namespaces/%s/configmaps" % NS
LABEL = "kctrld.io/keys"
FAIL = "keycount.kctrld.io/fail"

CONFIG = """
logLevel: info
metrics: { bindAddress: "0" }
informers:
  - apiVersion: v1
    kind: ConfigMap
    namespaces: [%(ns)s]
controllers:
  - name: keycount
    for: { apiVersion: v1, kind: ConfigMap }
    workers: 2
    rateLimit: { baseDelay: 50ms, maxDelay: 1s }
    hook:
      exec:
        command: [%(interp)s, %(script)s]
        mode: %(mode)s
        env: { PYTHONPATH: %(pythonpath)s, KCTRLD_HOOK_SH: %(hook_sh)s }
        timeout: 10s
"""


def label(c, name):
    cm = c.get(CMS + "/" + name)
    return cm and (cm["metadata"].get("labels") or {}).get(LABEL)


def cm(name, data, annotations=None):
    md = {"name": name}
    if annotations:
        md["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": data}


def run(interp, script, mode):
    itest.require_binaries()
    with taplib.Apisim() as sim:
        c = Cluster(sim)
        c.namespace(NS)
        c.create(CMS, cm("two", {"a": "1", "b": "2"}))
        c.create(CMS, cm("bad", {"a": "1"}, {FAIL: "refusing bad on purpose"}))
        cfg = CONFIG % {"ns": NS, "interp": interp, "script": os.path.join(KEYCOUNT, script), "mode": mode,
                        "pythonpath": PYTHONPATH, "hook_sh": HOOK_SH}
        with Kctrld(cfg, sim.kubeconfig) as k:
            wait_for(lambda: label(c, "two") == "2", what="two counted", kctrld=k)
            # the function's print/echo is logged with the key, not taken for the response
            wait_for(lambda: re.search(r"hook stderr: counting kc/two: 2 keys .*key=kc/two", k.log()),
                     what="the function's output in the log", kctrld=k)
            # an error result, retried with backoff, naming the function's message
            wait_for(lambda: len(re.findall(r"Reconciler error controller=keycount key=kc/bad .*refusing bad on purpose",
                                            k.log())) >= 2, what="bad retried", kctrld=k)
            # meanwhile: a new one, a changed one
            c.create(CMS, cm("one", {"a": "1"}))
            c.merge_patch(CMS + "/two", {"data": {"c": "3"}})
            wait_for(lambda: label(c, "one") == "1" and label(c, "two") == "3", what="one and two counted", kctrld=k)
            c.merge_patch(CMS + "/bad", {"metadata": {"annotations": {FAIL: None}}})
            wait_for(lambda: label(c, "bad") == "1", what="bad counted once fixed", kctrld=k)
            wait_for(lambda: sum(1 for e in c.items("/api/v1/namespaces/%s/events" % NS)
                                 if e.get("reason") == "Counted") >= 3, what="the Counted Events", kctrld=k)
            assert "hook response" not in k.log(), k.log()[-3000:]
            assert k.stop() == 0, k.log()


def test_python_helper_persistent():
    run("python3", "keycount.py", "persistent")


def test_python_helper_per_call():
    run("python3", "keycount.py", "per-call")


def test_shell_helper_per_call():
    if not shutil.which("jq"):
        raise taplib.Skip("jq not installed (.ci/install-deps installs it)")
    run("bash", "keycount.sh", "per-call")


def test_shell_helper_persistent():
    if not shutil.which("jq"):
        raise taplib.Skip("jq not installed (.ci/install-deps installs it)")
    run("bash", "keycount.sh", "persistent")


if __name__ == "__main__":
    taplib.run_tests(globals())
