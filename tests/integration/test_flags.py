#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The operator flags (controller-runtime's names) end to end:

- --help names every long option of daemon/main.c, and so does the flag table
  of docs/operations.md;
- --health-probe-bind-address puts /healthz and /readyz on a listener of
  their own, the metrics listener then serves /metrics only;
- --leader-elect turns leader election on for a file that leaves it off (the
  Lease appears on the simulator), --leader-elect=false turns it off for a
  file that has it on (no Lease, no leader_election_master_status);
- --log-format json makes every line a JSON object.
"""
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import taplib  # noqa: E402
from taplib import BUILD, ROOT, Apisim, run_tests, wait_for  # noqa: E402

NS, NAME = "default", "kctrld-flags"
LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s" % (NS, NAME)


def long_options():
    with open(os.path.join(ROOT, "daemon", "main.c")) as f:
        src = f.read()
    names = re.findall(r'\{"([a-z-]+)", (?:no|required|optional)_argument', src)
    assert len(names) >= 10, names
    return names


def get(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_help_and_docs_list_every_flag():
    out = subprocess.run([os.path.join(BUILD, "kctrld"), "--help"], capture_output=True, text=True,
                         timeout=10)
    assert out.returncode == 0, out.stderr
    with open(os.path.join(ROOT, "docs", "operations.md")) as f:
        doc = f.read()
    for name in long_options():
        assert "--" + name in out.stdout, "--help does not mention --%s:\n%s" % (name, out.stdout)
        assert re.search(r"^\|[^|\n]*`--%s[ =`\[]" % re.escape(name), doc, re.M), \
            "docs/operations.md has no flag table row for --%s" % name
    assert "127.0.0.1:8080" in out.stdout, out.stdout


def test_health_probe_listener():
    with Apisim() as sim:
        with taplib.Kctrld("metrics: { bindAddress: \"127.0.0.1:0\" }\n", sim.kubeconfig,
                           args=["--health-probe-bind-address", "127.0.0.1:0"]) as k:
            mport = k.metrics_port()
            m = wait_for(lambda: re.search(r"httpserver: health probes .* port=(\d+)", k.log()),
                         what="the probe port in the log")
            pport = int(m.group(1))
            assert pport != mport
            wait_for(lambda: get(pport, "/readyz") == 200, what="/readyz on the probe port")
            assert get(pport, "/healthz") == 200
            assert get(pport, "/metrics") == 404
            assert get(mport, "/metrics") == 200
            assert get(mport, "/healthz") == 404
            assert get(mport, "/readyz") == 404
            assert k.stop() == 0, k.log()[-2000:]


LE = ("leaderElection: { %snamespace: %s, name: %s, leaseDuration: 3s, renewDeadline: 2s, "
      "retryPeriod: 500ms }\nmetrics: { bindAddress: \"127.0.0.1:0\" }\n")


def test_leader_elect_overrides_the_file():
    with Apisim() as sim:
        with taplib.Kctrld(LE % ("", NS, NAME), sim.kubeconfig,
                           args=["--leader-elect", "--identity", "flag-a"]) as k:
            wait_for(lambda: sim.request("GET", LEASE_PATH)[0] == 200, timeout=10,
                     what="the Lease --leader-elect asks for")
            code, lease = sim.json("GET", LEASE_PATH)
            assert lease["spec"]["holderIdentity"] == "flag-a", lease
            assert k.stop() == 0, k.log()[-2000:]
    with Apisim() as sim:
        with taplib.Kctrld(LE % ("enabled: true, ", NS, NAME), sim.kubeconfig,
                           args=["--leader-elect=false"]) as k:
            wait_for(lambda: "ready:" in k.log(), what="kctrld ready")
            snap = k.scrape()
            assert not any(n == "leader_election_master_status" for n, _ in snap), snap
            time.sleep(1.0)  # > retryPeriod: an elector would have created the Lease by now
            assert sim.request("GET", LEASE_PATH)[0] == 404
            assert k.stop() == 0, k.log()[-2000:]
    bad = subprocess.run([os.path.join(BUILD, "kctrld"), "--config", "/nonexistent",
                          "--leader-elect=maybe"], capture_output=True, text=True, timeout=10)
    assert bad.returncode == 2 and "--leader-elect" in bad.stderr, bad.stderr


def test_log_format_json():
    with Apisim() as sim:
        with taplib.Kctrld("metrics: { bindAddress: \"127.0.0.1:0\" }\n", sim.kubeconfig,
                           args=["--log-format", "json"]) as k:
            wait_for(lambda: "ready:" in k.log(), what="kctrld ready")
            assert k.stop() == 0, k.log()[-2000:]
            lines = [l for l in k.log().splitlines() if l]
    assert lines
    for line in lines:
        obj = json.loads(line)
        assert {"ts", "level", "component", "msg"} <= set(obj), obj
        assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", obj["ts"]), obj
    serving = [json.loads(l) for l in lines if "serving /metrics" in l]
    assert serving and serving[0]["bind"] == "127.0.0.1:0" and int(serving[0]["port"]) > 0, serving


if __name__ == "__main__":
    run_tests(globals())
