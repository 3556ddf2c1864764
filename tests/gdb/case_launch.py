"""`set redzone scan launch` with `redzone break on`: the program stops in the thread that made the launch
that wrote past the end, inside that launch call (before it returns to the program), with the program's
frame of the call selected, so `bt` and the selected frame's line show where the kernel was launched."""
import json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

RZLAUNCH = os.environ["RZ_RZLAUNCH"]
LOG = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"rz-gdb-launch-{os.getpid()}.log")
if os.path.exists(LOG):
    os.unlink(LOG)

prepare(settings=("scan launch,exit",), prog=RZLAUNCH)
ex(f"set environment METRALE_REDZONE_LOG={LOG}")
check("redzone break: on" in ex("redzone break on"), "break on")
text = go("run pipeline")
check("REDZONE VIOLATION alloc#1 user_bytes=256 pad=64 : bytes [0..=7] past the end were written" in text, text)
check("is selected" in text and gdb.selected_frame().name() == "fill", f"the launching frame is selected: {text}")
src = os.path.join(os.environ["RZ_SOURCE_DIR"], "tests", "programs", "rzlaunch.c")
sal = gdb.selected_frame().find_sal()
check("cuLaunchKernel" in open(src).read().splitlines()[sal.line - 1] and f"rzlaunch.c:{sal.line}" in text,
      f"on the line that launched the kernel: {text}")
check(gdb.selected_thread().num == 1, "in the thread that made the launch (the program's only one)")
bt = ex("bt")
check("__redzone_violation" in bt and "rz__launch_post" in bt and "cuLaunchKernel" in bt and " fill " in bt
      and " pipeline " in bt and " main " in bt, f"inside the launch call, before it returned: {bt}")
# Which launch: the library's own lines in its log, written before it stopped here.
with open(LOG) as f:
    log = f.read()
check("  written by kernel fill (launch #5, grid 4x1x1, block 64x1x1, stream 0x" in log, log)
check(count(log, "REDZONE VIOLATION") == 1, log)
# The overrun is on the fill of b (two bytes past...): its arguments are in the selected frame.
check(int(gdb.parse_and_eval("to")) == 264 and int(gdb.parse_and_eval("from")) == 128, "the overrunning call's arguments")
# What was found, and by which check: a launch check, not a free (the buffer is live) and not a scan.
LINE = "REDZONE VIOLATION alloc#1 user_bytes=256 pad=64 : bytes [0..=7] past the end were written"
out = ex("redzone violations")
check(LINE in out and "(found by the launch check (after a kernel launch))" in out and
      "no scan has run yet; 1 violation(s) found by the launch check (after a kernel launch)" in out and
      "freed" not in out, out)
doc = json.loads(ex("redzone violations --json"))
check(doc["scans"] == 0 and doc["found_by"] == ["launch"] and doc["stopped_in"] == "launch" and
      len(doc["violations"]) == 1 and doc["violations"][0].startswith(LINE), doc)
ex("redzone break off")
go("continue")
check(int(gdb.parse_and_eval("$_exitcode")) == 0, "runs to its end")
with open(LOG) as f:
    log = f.read()
check(count(log, "REDZONE VIOLATION") == 1 and "redzone: exit: 0 violated at exit; 1 violations in 1 scans" in log,
      f"written back after the stop; reported once: {log}")
os.unlink(LOG)

# Four threads launching at once: the stop is in the thread whose launch overran its buffer (not the main
# thread), in its launch call, and `redzone violations` there says the launch check found it.
ex("redzone break on")
text = go("run threads")
check("stopped where the library's launch check (after a kernel launch) found this violation" in text, text)
threads = gdb.selected_inferior().threads()
check(len(threads) > 2 and gdb.selected_thread().num != 1, f"a worker thread among {len(threads)}")
check(gdb.selected_frame().name() == "fill" and gdb.selected_frame().older().name() == "thread_main",
      f"the worker's launching frame is selected: {text}")
out = ex("redzone violations")
check(count(out, "(found by the launch check (after a kernel launch))") == 1 and
      "no scan has run yet; 1 violation(s) found by the launch check" in out, out)
check(json.loads(ex("redzone violations --json"))["found_by"] == ["launch"], "json says so too")
ex("redzone break off")
go("continue")
check(int(gdb.parse_and_eval("$_exitcode")) == 0, "runs to its end")
done()
