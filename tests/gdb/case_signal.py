import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *


# The program stops on its own SIGUSR1; a scan there must not swallow the signal: on continue the
# program's handler still runs.
start("signal", bp="stop_here")
METHOD = use_agent()  # the agent method where the debugger can serve it
check(gdb.selected_frame().name() != "stop_here", "stopped by the signal first")
check(int(gdb.parse_and_eval("$_siginfo.si_signo")) == 10, "SIGUSR1 pending")
before = selected()
out = ex("redzone scan")
check("REDZONE VIOLATION alloc#0 user_bytes=100 pad=64 : bytes [0..=1]" in out, out)
check(selected() == before, f"{before} -> {selected()}")
check(int(gdb.parse_and_eval("$_siginfo.si_signo")) == 10, "the user thread's signal is still the one it stopped with")
go("continue")
check(gdb.selected_frame().name() == "stop_here" and int(gdb.parse_and_eval("where")) == 3, "reached stop_here(3)")
check(int(gdb.parse_and_eval("g_got_signal")) == 1, "the program's SIGUSR1 handler ran")
done()
