#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The layering check (tests/lint/check_layers.py, run by `make lint`): it
passes on the tree as it is, and rejects each kind of include that reaches
up a layer, in a copy of daemon/ made for the purpose. Prints TAP."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from taplib import ROOT, lint_copy, run_lint, run_tests  # noqa: E402

SCRIPT = "check_layers.py"


def append_include(path, line):
    with open(path, "a", encoding="utf-8") as f:
        f.write("\n" + line + "\n")


def expect_rejected(edit, needle):
    r, _, _ = lint_copy(SCRIPT, edit)
    assert r.returncode == 1, f"exit {r.returncode}, expected 1:\n{r.stdout}{r.stderr}"
    assert needle in r.stdout, f"{needle!r} not in:\n{r.stdout}"


def test_tree_has_no_upward_include():
    r = run_lint(SCRIPT, os.path.join(ROOT, "daemon"))
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
    def edit(d):
        append_include(os.path.join(d, "ops", "ops.c"), '#include "base/buf.h"\n#include "ops/notify.h"')
    r, _, _ = lint_copy(SCRIPT, edit)
    assert r.returncode == 0, r.stdout + r.stderr


if __name__ == "__main__":
    run_tests(globals())
