#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The layering check (tests/lint/check_layers.py, run by `make lint`): it
passes on the tree as it is, and rejects each kind of include that reaches
up a layer, in a copy of daemon/ made for the purpose. Prints TAP."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from taplib import ROOT, run_tests  # noqa: E402

CHECK = os.path.join(ROOT, "tests", "lint", "check_layers.py")


def run_check(daemon_dir):
    return subprocess.run([sys.executable, CHECK, daemon_dir], capture_output=True, text=True, timeout=60)


def tree_copy():
    tmp = tempfile.mkdtemp(prefix="kctrld-layers.")
    dst = os.path.join(tmp, "daemon")
    shutil.copytree(os.path.join(ROOT, "daemon"), dst)
    return tmp, dst


def append_include(path, line):
    with open(path, "a", encoding="utf-8") as f:
        f.write("\n" + line + "\n")


def expect_rejected(edit, needle):
    tmp, dst = tree_copy()
    try:
        edit(dst)
        r = run_check(dst)
        assert r.returncode == 1, f"exit {r.returncode}, expected 1:\n{r.stdout}{r.stderr}"
        assert needle in r.stdout, f"{needle!r} not in:\n{r.stdout}"
    finally:
        shutil.rmtree(tmp)


def test_tree_has_no_upward_include():
    r = run_check(os.path.join(ROOT, "daemon"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_upward_include_rejected():
    # base/ is the lowest layer: reaching the cache from it points up.
    def edit(d):
        append_include(os.path.join(d, "base", "buf.c"), '#include "cache/store.h"')
    expect_rejected(edit, 'base/buf.c:')


def test_upward_include_in_header_rejected():
    def edit(d):
        append_include(os.path.join(d, "watch", "reflector.h"), '#include "runtime/workqueue.h"')
    expect_rejected(edit, '"runtime/workqueue.h" points up')


def test_top_header_rejected():
    def edit(d):
        append_include(os.path.join(d, "ops", "ops.c"), '#include "daemon.h"')
    expect_rejected(edit, 'from the top of daemon/')


def test_unlisted_folder_rejected():
    def edit(d):
        os.mkdir(os.path.join(d, "extra"))
        with open(os.path.join(d, "extra", "x.c"), "w", encoding="utf-8") as f:
            f.write('#include "base/buf.h"\n')
    expect_rejected(edit, 'not listed in')


def test_same_and_lower_layers_accepted():
    tmp, dst = tree_copy()
    try:
        append_include(os.path.join(dst, "ops", "ops.c"), '#include "base/buf.h"\n#include "ops/notify.h"')
        r = run_check(dst)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    run_tests(globals())
