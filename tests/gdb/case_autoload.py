import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# Without sourcing anything: the stub next to libredzone loads the plugin when the program loads the
# library (auto-load allowed by safe-path).
lib = os.environ["RZ_LIBREDZONE"]
ex("set pagination off")
ex("set auto-load safe-path /")
ex("set breakpoint pending on")
ex(f"file {PROG}")
ex(f"set exec-wrapper env LD_PRELOAD={lib} LD_LIBRARY_PATH={os.environ['RZ_EMU_DIR']} METRALE_REDZONE=64")
check(not getattr(gdb, "_redzone_loaded", False), "not loaded before the program runs")
ex("break stop_here")
go("run overrun")
check(getattr(gdb, "_redzone_loaded", False), "auto-loaded with the library")
check("3 zone(s)" in ex("redzone list"), "the commands work")
check("REDZONE VIOLATION alloc#1" in ex("redzone scan"), "and the agent")
done()
