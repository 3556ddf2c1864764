#!/usr/bin/env python3
"""Run a test program and judge it by its exit status AND its output, for CTest entries that check output.

CTest's PASS_REGULAR_EXPRESSION alone ignores the exit status: a program that printed the expected line and
then failed (or a pytest run with failures next to passes, or a missing module) would pass. This runs the
command, echoes its output (stdout and stderr together, as written), and fails unless the exit status is the
expected one, every --pass pattern is found and no --fail pattern is. Patterns are searched in the whole
output with '.' matching newlines too, as CTest's regular expressions do.

Usage: expect_output.py [--rc N | --rc-nonzero] [--skip-rc N] [--pass RE]... [--fail RE]... -- COMMAND [ARG]...
--skip-rc: that exit status is passed on unjudged (CTest's SKIP_RETURN_CODE on the entry then says skipped).
"""
import argparse
import re
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rc", type=int, default=0)
    ap.add_argument("--rc-nonzero", action="store_true")
    ap.add_argument("--skip-rc", type=int)
    ap.add_argument("--pass", dest="passes", action="append", default=[])
    ap.add_argument("--fail", dest="fails", action="append", default=[])
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("no command")
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.stdout.decode("utf-8", "replace")
    sys.stdout.write(out)
    sys.stdout.flush()
    if a.skip_rc is not None and p.returncode == a.skip_rc:
        return a.skip_rc
    problems = []
    if a.rc_nonzero and p.returncode == 0:
        problems.append("exit status 0, expected a failure")
    elif not a.rc_nonzero and p.returncode != a.rc:
        problems.append(f"exit status {p.returncode}, expected {a.rc}")
    for pat in a.passes:
        if not re.search(pat, out, re.S):
            problems.append(f"output lacks: {pat}")
    for pat in a.fails:
        if re.search(pat, out, re.S):
            problems.append(f"output has: {pat}")
    for problem in problems:
        print(f"expect_output: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
