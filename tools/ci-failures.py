#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Why each failed test failed, short: the last lines of a CI log are all that
some readers see, and ctest prints a failed test's output where it ran, long
before the end. For each build directory given, read ctest's LastTest.log and
print, per failed test, its name and its Catch2 failure blocks (the FAILED:
line, the expression, its expansion and messages), else the last lines of its
output. Prints nothing when nothing failed.

usage: ci-failures.py BUILD_DIR [BUILD_DIR ...]
"""
import os
import re
import sys

MAX_LINES_PER_TEST = 40


def tests_in(log):
    """(name, passed, output lines) per test in a LastTest.log."""
    name, out, in_output = None, [], False
    for line in log.splitlines():
        m = re.match(r"^\d+/\d+ Testing: (.*)$", line)
        if m:
            name, out, in_output = m.group(1), [], False
            continue
        if name is None:
            continue
        if line == "Output:":
            in_output = True
            continue
        if line == "<end of output>":
            in_output = False
            continue
        if in_output and line != "-" * 58:
            out.append(line)
        elif line in ("Test Passed.", "Test Failed.") or line.startswith("Test Failed") or line.startswith("Test time"):
            if line.startswith("Test time"):
                continue
            yield name, line == "Test Passed.", out
            name = None


def failure_blocks(out):
    """Catch2's failure blocks: from each 'FAILED:' line to the next blank line."""
    blocks, cur = [], None
    for line in out:
        if re.search(r":\d+: FAILED:$", line):
            cur = [line]
            continue
        if cur is not None:
            if not line.strip():
                blocks.append(cur)
                cur = None
            else:
                cur.append(line)
    if cur:
        blocks.append(cur)
    return blocks


def main(dirs):
    shown = False
    for d in dirs:
        path = os.path.join(d, "Testing", "Temporary", "LastTest.log")
        try:
            with open(path, errors="replace") as f:
                log = f.read()
        except OSError:
            continue
        for name, passed, out in tests_in(log):
            if passed:
                continue
            if not shown:
                print("=" * 78)
                print("Why the failed tests failed (from each build's LastTest.log):")
                shown = True
            print(f"--- {os.path.basename(os.path.normpath(d))}: {name}")
            lines = [l for b in failure_blocks(out) for l in b + [""]]
            if not lines:
                lines = out[-15:]
            for l in lines[:MAX_LINES_PER_TEST]:
                print("  " + l[:300])
            if len(lines) > MAX_LINES_PER_TEST:
                print(f"  ... {len(lines) - MAX_LINES_PER_TEST} more lines")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
