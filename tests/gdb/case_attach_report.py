"""Attached (`attach PID`) to a program started outside the debugger whose stderr, the library's log, goes to
a file: a `redzone break on` stop shows the library's report line itself, read from the program's memory,
since the library's own output never reaches this debugger's terminal."""
import os, subprocess, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

ERR = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"rz-gdb-attach-{os.getpid()}.err")
env = dict(os.environ, LD_PRELOAD=os.environ["RZ_LIBREDZONE"], LD_LIBRARY_PATH=os.environ["RZ_EMU_DIR"], METRALE_REDZONE="64")
with open(ERR, "w") as err:
    # spin: alloc#0's band overrun, then it spins until a debugger sets g_release; its free finds the overrun.
    child = subprocess.Popen([PROG, "spin"], env=env, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)
ex("set pagination off")
ex("set confirm off")
ex(f"source {PLUGIN}")
ex(f"file {PROG}")
ex(f"attach {child.pid}")
check("redzone break: on" in ex("redzone break on"), "break on")
ex("set var g_release = 1")  # wherever it is (spinning, or not there yet), it goes on to the free
text = go("continue")
LINE = ("REDZONE VIOLATION alloc#0 user_bytes=100 pad=64 : bytes [0..=1] past the end were written (2 of 64 pad "
        "bytes changed), first bad value 0x33")
check(LINE in text, f"the report line is shown at the stop: {text}")
check("stopped where the library's check before a free found this violation" in text and
      gdb.selected_frame().name() == "main", text)
# The hook's breakpoint stays until the program has ended (it reports nothing more): deleting the breakpoint
# the stopped thread stands at before a quick exit trips the gdb race of docs/gdb.md.
go("continue")
ex("redzone break off")
try:
    child.wait()
except ChildProcessError:
    pass  # reaped by the debugger, its tracer
with open(ERR) as f:
    log = f.read()
check(count(log, LINE) == 1, f"the library wrote it once, to the program's stderr: {log}")
os.unlink(ERR)
done()
