#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The desired-state podset scenario (plugins/hooks/tests/podset_desired_common.py)
run by a C plugin written with the SDK's desired_* functions
(tests/integration/plugins/podset_desired.c): the host applies, prunes,
writes the status and keeps the finalizer, as for the Python hook; also
with the plugin in a child process (isolation: process), whose desired_*
and finalizing calls travel to the daemon's reconcile of the key."""
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "plugins", "hooks", "tests"))
import podset_desired_common as common  # noqa: E402
import taplib  # noqa: E402


def run(isolation):
    tmp = tempfile.mkdtemp(prefix="kctrld-podset-desired-")
    try:
        so = taplib.build_plugin(os.path.join(HERE, "plugins", "podset_desired.c"), tmp)
        common.scenario("    plugin: %s\n    isolation: %s\n" % (so, isolation))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_podset_desired_plugin():
    run("in-process")


def test_podset_desired_plugin_isolated():
    run("process")


if __name__ == "__main__":
    taplib.run_tests(globals())
