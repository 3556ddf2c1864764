import os, sys, signal, threading
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *


# Ctrl-C while the program runs (SIGINT to the program, as a terminal sends it): gdb stops, a scan works,
# and the program never sees the SIGINT.
start("spin", bp="tick")
METHOD = use_agent()  # the agent method where the debugger can serve it
pid = gdb.selected_inferior().pid
# Never kill(0, ...): that would interrupt this process group (ctest and every test it runs).
check(pid > 0, "the program is running")
ex("delete")
ex("break stop_here")
threading.Timer(0.5, os.kill, (pid, signal.SIGINT)).start()
go("continue")
check(int(gdb.parse_and_eval("$_siginfo.si_signo")) == 2, "stopped by SIGINT")
before = selected()
out = ex("redzone scan")
check("REDZONE VIOLATION alloc#0" in out, out)
check(selected() == before, f"{before} -> {selected()}")
ex("set var g_release = 1")
go("continue")
check(gdb.selected_frame().name() == "stop_here" and int(gdb.parse_and_eval("where")) == 4, "the program went on")
go("continue")
check(gdb.selected_inferior().pid == 0, "exited")
check(int(gdb.parse_and_eval("$_exitcode")) == 0, "normally, not killed by SIGINT")
done()
