#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Size check for daemon/: no .c or .h file over MAX_FILE_LINES lines and no
function body over MAX_FUNC_LINES lines (counted from the first line of its
signature to its closing brace).

Usage: check_sizes.py [DAEMON_DIR]   (default: daemon next to this repo's tests/)
Prints one line per violation as FILE:LINE: message and exits 1 when there is
any; exits 0 and prints a summary otherwise.

A function is a brace block at file scope whose declaration text has a '('
and no '=' (which would make it an initialiser); comments, string and
character literals and preprocessor lines are skipped so that braces in them
do not count."""
import os
import sys

MAX_FILE_LINES = 1200
MAX_FUNC_LINES = 150


def strip_code(text):
    """Return text with comments, literals and preprocessor lines blanked
    (newlines kept, so line numbers hold)."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        ch = text[i]
        if at_line_start and ch in " \t":
            out.append(ch)
            i += 1
            continue
        if at_line_start and ch == "#":
            # preprocessor directive, with backslash continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("\n")
                    i += 2
                    continue
                i += 1
            continue
        at_line_start = False
        if ch == "\n":
            out.append(ch)
            at_line_start = True
            i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("\n" * text.count("\n", i, end))
            i = end
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif ch in "\"'":
            j = i + 1
            while j < n and text[j] != ch and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(" ")
            i = j + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def functions(text):
    """Yield (first_line, last_line) of each function definition."""
    code = strip_code(text)
    depth = 0
    line = 1
    decl_start = None     # line where the current file-scope declaration began
    decl = []             # its text up to the opening brace
    body_start = None
    is_func = False
    for ch in code:
        if depth == 0:
            if ch == "{":
                text_before = "".join(decl)
                is_func = "(" in text_before and "=" not in text_before
                body_start = decl_start if decl_start is not None else line
                depth = 1
            elif ch == ";":
                decl, decl_start = [], None
            elif not ch.isspace():
                if decl_start is None:
                    decl_start = line
                decl.append(ch)
            else:
                decl.append(ch)
        else:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    if is_func:
                        yield body_start, line
                    decl, decl_start = [], None
        if ch == "\n":
            line += 1


def check(root):
    problems = []
    checked = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, name)
            checked += 1
            with open(path, encoding="utf-8") as f:
                text = f.read()
            nlines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
            if nlines > MAX_FILE_LINES:
                problems.append(f"{path}:1: file has {nlines} lines (limit {MAX_FILE_LINES})")
            for first, last in functions(text):
                size = last - first + 1
                if size > MAX_FUNC_LINES:
                    problems.append(f"{path}:{first}: function has {size} lines (limit {MAX_FUNC_LINES})")
    return problems, checked


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "daemon")
    root = os.path.normpath(root)
    # Name files as the caller can open them, and short when under the cwd.
    rel = os.path.relpath(root)
    if not rel.startswith(".."):
        root = rel
    if not os.path.isdir(root):
        print(f"check_sizes: {root}: not a directory", file=sys.stderr)
        return 2
    try:
        problems, checked = check(root)
    except (OSError, UnicodeDecodeError) as e:
        print(f"check_sizes: {e}", file=sys.stderr)
        return 2
    for p in problems:
        print(p)
    if problems:
        print(f"check_sizes: {len(problems)} oversize file(s) or function(s)", file=sys.stderr)
        return 1
    print(f"check_sizes: {checked} files in {root}, none over {MAX_FILE_LINES} lines, "
          f"no function over {MAX_FUNC_LINES} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
