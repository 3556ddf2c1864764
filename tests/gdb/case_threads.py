import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *


# 4 threads x 50 calls of tick(): 200 stops with a scan at each; the selected thread and frame never change
# and no stop is lost or duplicated. Another stopped thread may be inside the registry (allocating) at a
# stop: then the scan must answer RZ_EBUSY promptly instead of hanging. Or it may be stopped inside the
# (emulated) driver holding a lock the agent's driver calls need: then the agent's timeout must name that
# thread, and only when a thread really is inside the driver (checked here independently).
def threads_in_driver():
    """Threads other than the agent with a frame in libcuda (the emulated driver), by walking each stack."""
    before, frame, found = gdb.selected_thread(), gdb.selected_frame(), []
    for t in sorted(gdb.selected_inferior().threads(), key=lambda t: t.num):
        t.switch()
        f = gdb.newest_frame()
        while f is not None:
            so = gdb.solib_name(f.pc())
            if so and os.path.basename(so).startswith("libcuda") and "redzone-agent" != t.name:
                found.append(t.num)
                break
            f = f.older()
    before.switch()
    frame.select()
    return found


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
        if "inside the CUDA driver" in str(e):
            check(selected() == before, f"selection restored after the timeout: {before} -> {selected()}")
            inside = threads_in_driver()
            named = e.args[0].split("thread", 1)[1].split("stopped", 1)[0]
            check(inside and all(f" {n}" in f" {named.replace(',', ' ')}" for n in inside), f"named {inside}: {e}")
        else:
            check("RZ_EBUSY" in str(e), f"only a held registry (or a thread inside the driver) may refuse: {e}")
        busy += 1
    check(selected() == before, f"selection changed {before} -> {selected()}")
    go("continue")
check(sorted(ticks.items()) == [(1, 50), (2, 50), (3, 50), (4, 50)], f"stops per thread: {ticks}")
check(gdb.selected_frame().name() == "stop_here", "ran to the end")
check(scans + busy == 200 and scans > 0, f"{scans} scans, {busy} refused")
done()
