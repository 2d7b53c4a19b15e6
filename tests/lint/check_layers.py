#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Layering check for daemon/: every #include "dir/file.h" in daemon/LAYER/
must name a folder at or below LAYER in daemon/LAYERS.

Usage: check_layers.py [DAEMON_DIR]   (default: daemon next to this repo's tests/)
Prints one line per violation as FILE:LINE: message and exits 1 when there is
any; exits 0 and prints a summary otherwise. Also rejected: a subfolder that
daemon/LAYERS does not list, an unqualified include of a daemon header from a
subfolder (it would hide the layer it points to), and an include of a header
directly in daemon/ (the top, which nothing below may reach)."""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def read_layers(root):
    path = os.path.join(root, "LAYERS")
    layers = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                layers.append(line)
    return layers


def check(root):
    layers = read_layers(root)
    rank = {name: i for i, name in enumerate(layers)}
    top = {f for f in os.listdir(root) if f.endswith(".h")}
    problems = []
    checked = 0
    for entry in sorted(os.listdir(root)):
        sub = os.path.join(root, entry)
        if not os.path.isdir(sub):
            continue
        if entry not in rank:
            problems.append(f"{sub}: folder not listed in {root}/LAYERS")
            continue
        for name in sorted(os.listdir(sub)):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(sub, name)
            checked += 1
            with open(path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target = m.group(1)
                    where = f"{path}:{lineno}"
                    if "/" not in target:
                        if target in top:
                            problems.append(f'{where}: includes "{target}" from the top of daemon/; '
                                            f"{entry}/ may include only {', '.join(layers[:rank[entry] + 1])}")
                        elif os.path.exists(os.path.join(root, entry, target)):
                            problems.append(f'{where}: write "{entry}/{target}" (qualified includes show the layer)')
                        continue
                    folder = target.split("/", 1)[0]
                    if folder not in rank:
                        continue  # a public header (kctrld/...) or a system one
                    if rank[folder] > rank[entry]:
                        problems.append(f'{where}: "{target}" points up: {folder}/ is above {entry}/ '
                                        f"in {root}/LAYERS")
    return problems, checked


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "daemon")
    root = os.path.normpath(root)
    try:
        problems, checked = check(root)
    except OSError as e:
        print(f"check_layers: {e}", file=sys.stderr)
        return 2
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} layering violation(s)", file=sys.stderr)
        return 1
    print(f"check_layers: {checked} files in {root}, no upward include")
    return 0


if __name__ == "__main__":
    sys.exit(main())
