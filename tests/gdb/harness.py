"""Helpers for the gdb test cases: each case is one gdb process (gdb -batch -x case.py) that asserts on
gdb.execute(..., to_string=True) output and ends by printing CASE PASSED."""
import os
import re

import gdb

PLUGIN = os.environ["RZ_GDB_PLUGIN"]
PROG = os.environ["RZ_GDBPROG"]


def ex(cmd):
    return gdb.execute(cmd, to_string=True)


_LOG = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"rz-gdb-case-{os.getpid()}.log")


def go(cmd):
    """Run a command that resumes the program; return everything gdb printed meanwhile (stop reports and
    what stop handlers wrote go straight to gdb's stdout, not to gdb.execute's string)."""
    ex(f"set logging file {_LOG}")
    ex("set logging overwrite on")
    ex("set logging redirect on")
    ex("set logging enabled on")
    try:
        gdb.execute(cmd)
    finally:
        ex("set logging enabled off")
    with open(_LOG) as f:
        text = f.read()
    os.unlink(_LOG)
    return text


def check(cond, message):
    if not cond:
        raise AssertionError(message)


def expect_error(cmd, *fragments):
    try:
        out = ex(cmd)
    except gdb.error as e:
        text = str(e)
        for f in fragments:
            check(f in text, f"{cmd!r}: error lacks {f!r}: {text!r}")
        check("Traceback" not in text, f"{cmd!r}: a Python traceback leaked: {text!r}")
        return text
    raise AssertionError(f"{cmd!r} did not fail; it printed {out!r}")


def start(args="overrun", bp="stop_here", emulated=True, settings=(), prog=None):
    ex("set pagination off")
    ex("set confirm off")
    ex(f"source {PLUGIN}")
    if emulated:
        ex("set redzone emulated-device on")
    for setting in settings:
        ex(f"set redzone {setting}")
    ex(f"file {prog or PROG}")
    if bp:
        ex(f"break {bp}")
    return go(f"run {args}")


def selected():
    f = gdb.selected_frame()
    return gdb.selected_thread().num, f.level(), f.name()


def done():
    try:
        if gdb.selected_inferior().pid:
            ex("kill")
    except gdb.error:
        pass
    print("CASE PASSED")


def count(text, needle):
    return len(re.findall(re.escape(needle), text))
