import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *


# 4 threads x 50 calls of tick(): 200 stops with a scan at each; the selected thread and frame never change
# and no stop is lost or duplicated. Another stopped thread may be inside the registry (allocating) at a
# stop: then the scan must answer RZ_EBUSY promptly instead of hanging.
start("threads 4", bp="tick")
METHOD = use_agent()  # the agent method where the debugger can serve it
ex("break stop_here")
ticks = {}
scans = busy = 0
while gdb.selected_frame().name() == "tick":
    who = int(gdb.parse_and_eval("thread"))
    ticks[who] = ticks.get(who, 0) + 1
    before = selected()
    try:
        out = ex("redzone scan")
        check(", 0 violated" in out, out)
        scans += 1
    except gdb.error as e:
        check("RZ_EBUSY" in str(e), f"only a held registry may refuse: {e}")
        busy += 1
    check(selected() == before, f"selection changed {before} -> {selected()}")
    go("continue")
check(sorted(ticks.items()) == [(1, 50), (2, 50), (3, 50), (4, 50)], f"stops per thread: {ticks}")
check(gdb.selected_frame().name() == "stop_here", "ran to the end")
check(scans + busy == 200 and scans > 0, f"{scans} scans, {busy} refused")
done()
