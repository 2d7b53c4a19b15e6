#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Integration test of the podset desired-state hook (plugins/hooks/podset,
Python, persistent) against kube-apisim: the scenario of
podset_desired_common.py; docs/hooks.md shows the hook as it is (at most
40 lines)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import podset_desired_common as common  # noqa: E402
import taplib  # noqa: E402

HOOK = os.path.abspath(os.path.join(HERE, "..", "podset", "podset.py"))


def test_docs_show_the_hook():
    with open(HOOK) as f:
        lines = f.read().split("\n")
    assert len(lines) <= 41, "podset.py has %d lines" % len(lines)
    with open(os.path.join(HERE, "..", "..", "..", "docs", "hooks.md")) as f:
        docs = f.read()
    body = "\n".join(lines[2:]).rstrip("\n")  # without the shebang and licence lines
    assert "```python\n" + body + "\n```" in docs, "docs/hooks.md does not show plugins/hooks/podset/podset.py"


def test_podset_desired_hook():
    common.scenario("    hook:\n      style: desired\n      exec: { command: [%s, %s] }\n" % (sys.executable, HOOK))


if __name__ == "__main__":
    taplib.run_tests(globals())
