#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The short fault campaign run by `make test` (tests/run-tests): the quick
cases of tests/faults/run_faults.py on 500 ConfigMaps (against build-asan,
only the cases that feed the daemon's parsers and connection handling odd
bytes). The full campaign is `make faults`."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_faults  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_faults.main(["--quick"]))
