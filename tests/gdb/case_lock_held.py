import os, re, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *


# The program stopped while its thread holds the registry lock: the scan answers with a clear error within
# the timeout, the user's selection is restored, and the program still completes.
src_file, line = source_line("rz-test: registry locked")
ex("set pagination off")
ex(f"source {PLUGIN}")
METHOD = use_agent()  # the agent method where the debugger can serve it
ex("set redzone emulated-device on")
ex("set redzone timeout 10")  # the agent's own 1.5 s lock timeout must answer first
ex(f"file {PROG}")
ex("set breakpoint pending on")
ex("break stop_here")
ex(f"break {src_file}:{line}")
ex("ignore 2 1")  # the second allocation: the agent is running by then
go("run overrun")
check(gdb.selected_frame().name() in ("rz__registry_add", "take_node"), gdb.selected_frame().name())
before = selected()
if METHOD == "memory":  # refused at once, nothing written (the registry could be torn)
    text = expect_error("redzone scan", "RZ_EBUSY", "in the middle of changing the zone registry")
    expect_error("redzone poison 0 1", "RZ_EBUSY")
    check("poison window" not in ex("redzone status"), "nothing written: " + ex("redzone status"))
else:
    text = expect_error("redzone scan", "RZ_EBUSY")
# Which timeout answered is in the words, not in the wall time: the agent's own lock timeout says RZ_EBUSY
# (above); gdb's `set redzone timeout 10` would have said "did not answer within 10 s" instead.
check("did not answer within" not in text, f"the agent answered, not gdb's timeout: {text}")
check(selected() == before, f"selection restored: {before} -> {selected()}")
# The error's advice works when followed: it names the thread inside redzone and the library's outermost
# frame; `finish` there returns that thread to the program, with the registry free, and the scan runs.
advice = re.search(r"thread (\d+) is inside redzone \((\w+)\): `thread \1`, `frame (\d+)`, `finish`", text)
check(advice is not None and advice.group(2) == "cuMemAlloc_v2", f"the advice names the thread and frame: {text}")
ex("delete 2")
ex(f"thread {advice.group(1)}")
ex(f"frame {advice.group(3)}")
go("finish")
check(gdb.newest_frame().name() == "main", f"back in the program: {gdb.newest_frame().name()}")
check("redzone scan: " in ex("redzone scan"), "the scan runs once the advice is followed")
go("continue")
check(gdb.selected_frame().name() == "stop_here", "the program went on")
try:
    again = ex("redzone scan")
except gdb.error as e:
    raise AssertionError(f"second scan failed: {e}; agent said: {bytes(gdb.selected_inferior().read_memory(int(gdb.parse_and_eval('(long)&__redzone_agent.out')), 300))!r}")
check("REDZONE VIOLATION alloc#1" in again, "scans work again")
go("continue")
go("continue")
check(gdb.selected_inferior().pid == 0, "the program completed")
done()
