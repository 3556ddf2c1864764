"""Helpers for the gdb test cases: each case is one gdb process (gdb -batch -x case.py) that asserts on
gdb.execute(..., to_string=True) output and ends by printing CASE PASSED. Version-neutral: the same case
runs under gdb 13, gdb 16 and cuda-gdb 11.8 (GDB 10.2), so only Python API calls all of them have are used
here (no Frame.level(), no `set logging enabled`), and values from gdb are never tested with `is None`
(cuda-gdb's Python has its own None)."""
import os
import re

import gdb

PLUGIN = os.environ["RZ_GDB_PLUGIN"]
PROG = os.environ["RZ_GDBPROG"]


def ex(cmd):
    return gdb.execute(cmd, to_string=True)


_LOG = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"rz-gdb-case-{os.getpid()}.log")


def go(cmd):
    """Run a command that resumes the program; return what gdb.write printed meanwhile (the plugin's lines
    and what stop handlers wrote: they go to gdb's stdout, not to gdb.execute's string). The logging
    settings are made without to_string: made inside a to_string capture, logging captures nothing."""
    for setting in (f"file {_LOG}", "overwrite on", "redirect on"):
        gdb.execute(f"set logging {setting}")
    _logging("on")
    try:
        gdb.execute(cmd)
    finally:
        _logging("off")
    with open(_LOG) as f:
        text = f.read()
    os.unlink(_LOG)
    return text


def _logging(state):
    try:
        gdb.execute(f"set logging enabled {state}")  # GDB 12+
    except gdb.error:
        gdb.execute(f"set logging {state}")


def is_none(value):
    return value is None or type(value).__name__ == "NoneType"


DEBUGGER = "cuda-gdb" if "CUDA Debugger" in gdb.execute("show version", to_string=True) else "gdb"


def method():
    """The method `auto` gives a live process on the emulated device: memory, in every debugger (the bands
    are host memory, readable by the debugger itself)."""
    return "memory"


def use_agent():
    """For the cases that test the agent method: select it where the debugger can serve it (gdb) and return
    the method the case runs with ("memory" in cuda-gdb, which cannot resume one thread alone)."""
    if DEBUGGER == "cuda-gdb":
        return "memory"
    ex("set redzone method agent")
    return "agent"


def level(frame):
    n = 0
    while not is_none(frame.newer()):
        frame = frame.newer()
        n += 1
    return n


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


def source_line(text, under="native"):
    """(file name, line number) of the one line under RZ_SOURCE_DIR/under that contains text, searched by
    content and not by path (files move between folders); fails loudly unless it is found exactly once."""
    hits = []
    for folder, dirs, files in os.walk(os.path.join(os.environ["RZ_SOURCE_DIR"], under)):
        dirs.sort()
        for name in sorted(files):
            if name.endswith((".c", ".h")):
                with open(os.path.join(folder, name), errors="replace") as f:
                    hits += [(name, i) for i, l in enumerate(f, 1) if text in l]
    check(len(hits) == 1, f"source line {text!r} found {len(hits)} times under {under}/: {hits}")
    return hits[0]


def prepare(emulated=True, settings=(), prog=None):
    """The plugin loaded, the program chosen, nothing run yet."""
    ex("set pagination off")
    ex("set confirm off")
    ex(f"source {PLUGIN}")
    if emulated:
        ex("set redzone emulated-device on")
    for setting in settings:
        ex(f"set redzone {setting}")
    ex(f"file {prog or PROG}")


def start(args="overrun", bp="stop_here", emulated=True, settings=(), prog=None):
    prepare(emulated, settings, prog)
    if bp:
        ex(f"break {bp}")
    return go(f"run {args}")


def selected():
    f = gdb.selected_frame()
    return gdb.selected_thread().num, level(f), f.name()


def done():
    try:
        if gdb.selected_inferior().pid:
            ex("kill")
    except gdb.error:
        pass
    print("CASE PASSED")  # run_case requires this line, the debugger's exit status 0 and no Python error


def count(text, needle):
    return len(re.findall(re.escape(needle), text))


def make_cores(d):
    """Two core files of gdbprog for case_core: d/before-scan.core (alloc#1's band overrun, no scan yet)
    and d/gdbprog.core (after one scan), and the live scan's report in d/live-scan. Leaves no process."""
    start(settings=("stacks 4",))
    ex(f"gcore {d}/before-scan.core")
    live = ex("redzone scan")
    with open(f"{d}/live-scan", "w") as f:
        f.write(live)
    ex(f"gcore {d}/gdbprog.core")
    ex("kill")
