#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The size check (tests/lint/check_sizes.py, run by `make lint`): it passes
on the tree as it is, and in a copy of daemon/ made for the purpose it
flags a function over 150 lines and a file over 1200 lines at the line
where they start, while braces in strings, character literals, comments
and macros do not count. Prints TAP."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from taplib import ROOT, lint_copy, run_lint, run_tests  # noqa: E402

SCRIPT = "check_sizes.py"


def function_text(name, body_lines, body="  x += 1;"):
    """A function whose definition spans body_lines + 2 lines."""
    return "\n".join([f"int {name}(int x) {{"] + [body] * body_lines + ["}"]) + "\n"


def append(path, text):
    """Appends text on a line of its own; returns the line number it starts at."""
    with open(path, encoding="utf-8") as f:
        existing = f.read()
    if not existing.endswith("\n"):
        existing += "\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(existing + "\n" + text)
    return existing.count("\n") + 2


def check_copy(edit):
    return lint_copy(SCRIPT, edit)


def test_tree_within_limits():
    r = run_lint(SCRIPT, os.path.join(ROOT, "daemon"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_oversize_function_flagged():
    def edit(d):
        return append(os.path.join(d, "base", "buf.c"), function_text("oversize_fn", 149))
    r, dst, line = check_copy(edit)
    assert r.returncode == 1, f"exit {r.returncode}, expected 1:\n{r.stdout}{r.stderr}"
    want = f"{os.path.join(dst, 'base', 'buf.c')}:{line}: function has 151 lines"
    assert any(l.startswith(want) for l in r.stdout.splitlines()), f"{want!r} not in:\n{r.stdout}"
    assert len(r.stdout.splitlines()) == 1, r.stdout


def test_function_at_limit_accepted():
    def edit(d):
        append(os.path.join(d, "base", "buf.c"), function_text("limit_fn", 148))
    r, _, _ = check_copy(edit)
    assert r.returncode == 0, r.stdout + r.stderr


def test_oversize_file_flagged():
    def edit(d):
        path = os.path.join(d, "ops", "notify.c")
        with open(path, encoding="utf-8") as f:
            n = f.read().count("\n")
        append(path, "/* padding */\n" * (1200 - n))
    r, dst, _ = check_copy(edit)
    assert r.returncode == 1, f"exit {r.returncode}, expected 1:\n{r.stdout}{r.stderr}"
    want = f"{os.path.join(dst, 'ops', 'notify.c')}:1: file has"
    assert any(l.startswith(want) for l in r.stdout.splitlines()), f"{want!r} not in:\n{r.stdout}"


def test_braces_in_literals_comments_and_macros_ignored():
    # Unbalanced braces inside a string, a character literal, a comment and
    # a #define must not end the function early or merge it with the next.
    body = ('  const char *s = "}}{"; char c = \'}\'; /* } */ x += s[0] + c; // }')
    text = "#define OPEN {\n" + function_text("literal_fn", 149, body)

    def edit(d):
        return append(os.path.join(d, "base", "buf.c"), text) + 1
    r, dst, line = check_copy(edit)
    assert r.returncode == 1, f"exit {r.returncode}, expected 1:\n{r.stdout}{r.stderr}"
    want = f"{os.path.join(dst, 'base', 'buf.c')}:{line}: function has 151 lines"
    assert any(l.startswith(want) for l in r.stdout.splitlines()), f"{want!r} not in:\n{r.stdout}"


def test_initialiser_is_not_a_function():
    # A long table initialised at file scope is data, not a function body.
    rows = "\n".join(f"  {{{i}, f({i})}}," for i in range(200))
    text = "static const struct { int a, b; } table[] = {\n" + rows + "\n};\n"

    def edit(d):
        append(os.path.join(d, "base", "buf.c"), text)
    r, _, _ = check_copy(edit)
    assert r.returncode == 0, r.stdout + r.stderr


if __name__ == "__main__":
    run_tests(globals())
