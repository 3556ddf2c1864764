import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# What a user sees along the way: the prefixes list what they hold, `break on` before `run` is armed (no
# "Function not defined"), status before the first allocation, autoscan at a violation stop, and
# `violations` after a violation found at a free with no scan yet.
prepare()
out = ex("redzone")
check("poison LO HI" in out and "settings: set/show redzone autoscan|method" in out, out)
out = ex("show redzone")
for name in ("autoscan", "method", "timeout", "bytes", "fill", "min-idx", "trace-idx", "scan", "stacks",
             "emulated-device"):
    check(f"redzone {name} is " in out, f"show redzone lists {name}: {out}")
expect_error("set redzone", "which setting", "Usage: set redzone autoscan|method")
expect_error("redzone frobnicate", "unknown subcommand", "list [--violated]")
check("--stacks" in ex("help redzone list") and "stacks" in ex("help set redzone"), "help mentions stacks")
out = ex("redzone break on")
check("armed for when the program starts" in out and "not defined" not in out, out)
ex("break main")
ex("break stop_here")
# The program's stderr (the library's log) goes to a file, not to this debugger's output: the plugin shows
# the report line at the stop itself.
LOG = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"rz-gdb-ux-{os.getpid()}.err")
go(f"run overrun 2>{LOG}")
out = ex("redzone status")
check("bands: not set up yet" in out and "64 bytes" in out, f"status before the first allocation: {out}")
go("continue")  # stop_here(1): alloc#1 is overrun; no scan now
ex("set redzone autoscan on")
text = go("continue")  # the free finds it: a violation stop, with autoscan on
LINE = ("REDZONE VIOLATION alloc#1 user_bytes=1000 pad=64 : bytes [0..=7] past the end were written (8 of 64 pad "
        "bytes changed), first bad value 0xab")
check(LINE in text, f"the report line appeared at the stop: {text}")
check(gdb.selected_frame().name() == "main", "the program's frame is selected")
with open(LOG) as f:
    check(LINE in f.read(), "the library wrote it to the program's stderr, the file")
check("stopped where the library's check before a free found this violation" in text, text)
check("skipped at this violation stop" in text and "`next` or `finish` returns to the program" in text and
      "held by a stopped thread" not in text, f"autoscan at the violation: {text}")
ex("set redzone autoscan off")
ex("redzone break off")
go("continue")  # stop_here(2)
out = ex("redzone violations")
check(out.startswith("REDZONE VIOLATION alloc#1 user_bytes=1000 pad=64") and
      "no scan has run yet; 1 violation(s) found by the check before a free" in out, out)
os.unlink(LOG)
done()
