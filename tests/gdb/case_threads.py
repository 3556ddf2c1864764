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


def registry_held():
    """The registry lock word of the state block (0 free): read before the scan, independently of it."""
    return int(gdb.parse_and_eval("__redzone_state.lock")) != 0


start("threads 4", bp="tick")
METHOD = use_agent()  # the agent method where the debugger can serve it
ex("break stop_here")
ticks = {}
# Each stop takes one branch, decided by the state read before the scan, and every branch is counted:
#   scanned   the registry lock was free: the scan must answer (memory method: always then)
#   busy      the lock was held by a stopped thread: the scan must refuse with RZ_EBUSY (and only then)
#   driver    (agent method) the agent timed out: its message must name exactly the threads found (here,
#             independently) inside the driver; the lock may be held too (the agent then waits in the driver
#             or behind an earlier abandoned request). A thread there that holds nothing the agent needs
#             lets it scan
branches = {"scanned": 0, "busy": 0, "driver": 0}
while gdb.selected_frame().name() == "tick":
    who = int(gdb.parse_and_eval("thread"))
    ticks[who] = ticks.get(who, 0) + 1
    before = selected()
    held = registry_held()
    try:
        out = ex("redzone scan")
        check(not held, f"the registry lock was held at this stop, yet the scan answered: {out}")
        check(", 0 violated" in out, out)
        branches["scanned"] += 1
    except gdb.error as e:
        if METHOD == "agent" and "inside the CUDA driver" in str(e):
            check(selected() == before, f"selection restored after the timeout: {before} -> {selected()}")
            inside = threads_in_driver()
            named = e.args[0].split("thread", 1)[1].split("stopped", 1)[0]
            check(inside and all(f" {n}" in f" {named.replace(',', ' ')}" for n in inside), f"named {inside}: {e}")
            branches["driver"] += 1
        else:
            check(held, f"the registry lock was free and no thread was named inside the driver, yet: {e}")
            check("RZ_EBUSY" in str(e), f"a held registry must refuse with RZ_EBUSY: {e}")
            branches["busy"] += 1
    check(selected() == before, f"selection changed {before} -> {selected()}")
    go("continue")
check(sorted(ticks.items()) == [(1, 50), (2, 50), (3, 50), (4, 50)], f"stops per thread: {ticks}")
check(gdb.selected_frame().name() == "stop_here", "ran to the end")
print(f"case_threads: branches taken ({METHOD} method): {branches}")
check(sum(branches.values()) == 200 and branches["scanned"] > 0, f"branches: {branches}")
done()
