# SPDX-License-Identifier: Apache-2.0
"""Start-up of build/kctrld against kube-apisim when kinds are wrong or not
there yet:

- a misspelt kind (`kind: ConfigMaps`) is logged as "kind ConfigMaps is not
  served by v1 (did you mean ConfigMap?)", not as "HTTP 200 : ; retrying",
  and `--check-config` refuses it at the file:line:col of its `kind:`;
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import taplib  # noqa: E402

KCTRLD = os.path.join(taplib.BUILD, "kctrld")

MISSPELT = """
metrics: { bindAddress: "127.0.0.1:0" }
informers:
  - apiVersion: v1
    kind: ConfigMaps
  - { apiVersion: v1, kind: Secret }
controllers: []
"""


def require_binaries():
    for p in (KCTRLD, os.path.join(taplib.BUILD, "kube-apisim")):
        if not os.access(p, os.X_OK):
            raise taplib.Skip("%s not built" % p)


def test_misspelt_kind_named():
    require_binaries()
    with taplib.Apisim() as sim, taplib.Kctrld(MISSPELT, kubeconfig=sim.kubeconfig) as k:
        want = "kind ConfigMaps is not served by v1 (did you mean ConfigMap?)"
        taplib.wait_for(lambda: want in k.log(), what="the misspelt kind to be named")
        log = k.log()
        assert "HTTP 200" not in log, log
        # Said once, not on every retry.
        assert log.count(want) == 1, log
        assert k.stop() == 0, k.log()


def test_check_config_misspelt_kind():
    require_binaries()
    d = tempfile.mkdtemp(prefix="kctrld-check-")
    path = os.path.join(d, "kctrld.yaml")
    with open(path, "w") as f:
        f.write(MISSPELT)
    r = subprocess.run([KCTRLD, "--check-config", path], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "%s:5:11: kind ConfigMaps is not served by v1 (did you mean ConfigMap?)" % path in r.stderr, r.stderr
    assert "OK" not in r.stdout


if __name__ == "__main__":
    taplib.run_tests(globals())
