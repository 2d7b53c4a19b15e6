#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Hooks that need a JIT under the packaged unit's restrictions
(docs/deploy.md "Hooks that need a JIT").

systemd/kctrld.service.in sets MemoryDenyWriteExecute=yes: a seccomp filter
on kctrld that every hook child inherits. mdwe_exec.c installs the same
filter (mmap W+X, mprotect/pkey_mprotect adding X, shmat SHM_EXEC: EPERM)
before it execs kctrld, when the unit, read with its drop-ins as systemd
reads them (the last assignment wins), has it on. Against kube-apisim,
three controllers run the keycount hook (plugins/hooks/keycount): in
Node.js, in Node.js with --jitless, and in Python (with the helper).

- The unit as shipped: kctrld runs under the filter (Seccomp: 2 in
  /proc/PID/status; an mmap of W+X memory fails in a child); the Node hook
  aborts at start, so its key fails and is retried, nothing is written;
  `node --jitless` and the Python hook work.
- The unit with the shipped drop-in systemd/jit-hooks.conf (installed as
  /usr/share/kctrld/systemd/jit-hooks.conf): the filter is off and the
  Node hook works. systemd-analyze verify accepts unit + drop-in.

Skipped without node (.ci installs nodejs) or on an architecture mdwe_exec
does not know."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import taplib  # noqa: E402
from taplib import BUILD, ROOT, Apisim, Kctrld, run_tests, wait_for  # noqa: E402

UNIT = os.path.join(ROOT, "systemd", "kctrld.service.in")
DROP_IN = os.path.join(ROOT, "systemd", "jit-hooks.conf")
KEYCOUNT = os.path.join(ROOT, "plugins", "hooks", "keycount")
HELPERS = os.path.join(ROOT, "plugins", "hooks", "helpers")
LABEL = "kctrld.io/keys"

CONTROLLER = """  - name: %(name)s
    for: { apiVersion: v1, kind: ConfigMap, informer: %(name)s }
    rateLimit: { baseDelay: 100ms, maxDelay: 1s }
    hook:
      exec:
        command: %(command)s
        env: { PYTHONPATH: %(helpers)s }
        timeout: 10s
"""
INFORMER = """  - name: %(name)s
    apiVersion: v1
    kind: ConfigMap
    namespaces: [%(name)s]
"""


def hooks(node):
    return {"node": [node, os.path.join(KEYCOUNT, "keycount.js")],
            "jitless": [node, "--jitless", os.path.join(KEYCOUNT, "keycount.js")],
            "python": ["python3", os.path.join(KEYCOUNT, "keycount.py")]}


def config(node):
    h = hooks(node)
    return ("logLevel: info\nmetrics: { bindAddress: \"0\" }\ninformers:\n"
            + "".join(INFORMER % {"name": n} for n in h) + "controllers:\n"
            + "".join(CONTROLLER % {"name": n, "command": "[%s]" % ", ".join(c), "helpers": HELPERS}
                      for n, c in h.items()))


def memory_deny_write_execute(*files):
    """The effective MemoryDenyWriteExecute= of a unit and its drop-ins, in
    the order systemd reads them: the last assignment in [Service] wins, an
    empty one resets to the default (off)."""
    on = False
    for path in files:
        section = None
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("["):
                    section = line
                elif section == "[Service]" and line.startswith("MemoryDenyWriteExecute="):
                    on = line.split("=", 1)[1].strip().lower() in ("yes", "true", "1", "on")
    return on


def mdwe_exec(tmp):
    exe = os.path.join(tmp, "mdwe_exec")
    subprocess.run([os.environ.get("CC", "cc"), "-Wall", "-Wextra", "-Werror", "-o", exe,
                    os.path.join(ROOT, "tests", "integration", "mdwe_exec.c")], check=True, timeout=60)
    r = subprocess.run([exe, "true"], capture_output=True, text=True, timeout=30)
    if r.returncode == 77:
        raise taplib.Skip(r.stderr.strip())
    assert r.returncode == 0, r.stderr
    return exe


def setup(sim):
    for ns in hooks("node"):
        sim.json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                 expect=201)
        sim.json("POST", "/api/v1/namespaces/%s/configmaps" % ns, {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "1", "b": "2"}},
            expect=201)


def label(sim, ns):
    _, cm = sim.json("GET", "/api/v1/namespaces/%s/configmaps/cm" % ns, expect=200)
    return (cm["metadata"].get("labels") or {}).get(LABEL)


def run(node, files, tmp):
    wrap = [mdwe_exec(tmp)] if memory_deny_write_execute(*files) else []
    with Apisim() as sim:
        setup(sim)
        with Kctrld(config(node), sim.kubeconfig, wrap=wrap) as k:
            wait_for(lambda: (label(sim, "python") == "2" and label(sim, "jitless") == "2") or not k.alive(),
                     what="the Python and the --jitless hook", timeout=30)
            assert k.alive(), k.log()[-3000:]
            with open("/proc/%d/status" % k.proc.pid) as f:
                seccomp = re.search(r"^Seccomp:\s*(\d)", f.read(), re.M).group(1)
            yield sim, k, seccomp


def test_node_hook_aborts_under_the_units_restriction():
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        raise taplib.Skip("node not installed")
    assert memory_deny_write_execute(UNIT), "the unit no longer sets MemoryDenyWriteExecute=yes"
    tmp = tempfile.mkdtemp(prefix="kctrld-jit-")
    exe = mdwe_exec(tmp)
    # the filter is the unit's: W+X memory refused, X after W too
    r = subprocess.run([exe, "python3", "-c", "import mmap; mmap.mmap(-1, 4096, prot=7)"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "Operation not permitted" in r.stderr, r.stderr
    for sim, k, seccomp in run(node, [UNIT], tmp):
        assert seccomp == "2", seccomp  # kctrld itself runs filtered
        wait_for(lambda: len(re.findall(r"Reconciler error controller=node key=node/cm", k.log())) >= 2,
                 what="the Node hook failing", timeout=30)
        assert label(sim, "node") is None
        assert k.stop() == 0, k.log()[-3000:]


def test_node_hook_works_with_the_jit_drop_in():
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        raise taplib.Skip("node not installed")
    assert not memory_deny_write_execute(UNIT, DROP_IN)
    if shutil.which("systemd-analyze") and os.access(os.path.join(BUILD, "kctrld"), os.X_OK):
        # the drop-in next to the rendered unit, as systemd finds it
        d = tempfile.mkdtemp(prefix="kctrld-jit-unit-")
        os.makedirs(os.path.join(d, "kctrld.service.d"))
        with open(UNIT) as f, open(os.path.join(d, "kctrld.service"), "w") as out:
            out.write(f.read().replace("@PREFIX@/bin/kctrld", os.path.abspath(os.path.join(BUILD, "kctrld")))
                      .replace("@PREFIX@", "/usr"))
        shutil.copy(DROP_IN, os.path.join(d, "kctrld.service.d", "jit-hooks.conf"))
        r = subprocess.run(["systemd-analyze", "verify", os.path.join(d, "kctrld.service")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr
    tmp = tempfile.mkdtemp(prefix="kctrld-jit-")
    for sim, k, seccomp in run(node, [UNIT, DROP_IN], tmp):
        assert seccomp == "0", seccomp
        wait_for(lambda: label(sim, "node") == "2", what="the Node hook", timeout=30)
        assert "Reconciler error" not in k.log(), k.log()[-3000:]
        assert k.stop() == 0, k.log()[-3000:]


if __name__ == "__main__":
    run_tests(globals())
