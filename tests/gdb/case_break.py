import os, re, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

start()
check("redzone break: on" in ex("redzone break on"), "break on")
# A scan gdb asks for reports and never stops at the violation breakpoint.
out = ex("redzone scan")
check("REDZONE VIOLATION alloc#1" in out and gdb.selected_frame().name() == "stop_here", out)
# Write past the end again (the emulated device's memory is host memory), then let the free find it.
ex("up")
ex("set {unsigned char}(p[1] + 1000) = 0x77")
ex("down")
text = go("continue")
check("is selected" in text and gdb.selected_frame().name() == "main", f"the program's frame is selected: {text}")
src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "programs", "gdbprog.c")
sal = gdb.selected_frame().find_sal()
check("cuMemFree" in open(src).read().splitlines()[sal.line - 1] and f"gdbprog.c:{sal.line}" in text,
      f"on the line of the free: {text}")
bt = ex("bt")
check("__redzone_violation" in bt and "rz__free_check" in bt and "cuMemFree_v2" in bt and " main " in bt,
      f"stopped where the free-time check found it: {bt}")
check(int(gdb.parse_and_eval("$redzone_violations()")) == 2, "counted before the hook")
ex("frame 0")
check(int(gdb.parse_and_eval("violation->index")) == 1 and int(gdb.parse_and_eval("violation->first_bad")) == 0x77,
      "the record is readable")
ex("redzone break off")
go("continue")
check(gdb.selected_frame().name() == "stop_here" and int(gdb.parse_and_eval("where")) == 2, "off: runs to the end")

from redzone_gdb import commands  # noqa: E402  (importable once the plugin is sourced)


def overrun_first():
    """A second run to stop_here(1), alloc#0's band written too: its free and alloc#1's each find one."""
    ex("kill")
    go("run overrun")
    ex("up")
    ex("set {unsigned char}(p[0] + 256) = 0x55")
    ex("down")


def newest():
    f = gdb.newest_frame()
    sal = f.find_sal()
    return f.name(), (sal.symtab.filename if not is_none(sal.symtab) else None)


def live_zones():
    return int(re.search(r"live_zones: (\d+)", ex("redzone stats")).group(1))


# Each stop is judged by itself: `continue 2` at a violation stop passes over the next violation (alloc#1's
# free), and the ordinary breakpoint stop after it is announced as nothing else, with autoscan scanning there.
ex("redzone break on")
overrun_first()
text = go("continue")
check("REDZONE VIOLATION alloc#0" in text or "found this violation" in text, text)
check("stopped where the library's check before a free found this violation" in text, text)
ex("set redzone autoscan on")
scans = len(commands.AUTOSCANS)
text = go("continue 2")
check(gdb.selected_frame().name() == "stop_here" and int(gdb.parse_and_eval("where")) == 2,
      f"stopped at the user's breakpoint: {gdb.selected_frame().name()}: {text}")
check("found this violation" not in text and "is selected" not in text, f"not announced as a violation: {text}")
check(len(commands.AUTOSCANS) == scans + 1 and "redzone scan: 0 zones checked, 0 violated" in commands.AUTOSCANS[-1],
      f"autoscan scanned at that stop: {text} {commands.AUTOSCANS[scans:]}")
check(int(gdb.parse_and_eval("$redzone_violations()")) == 2, "both violations were found (one passed over)")
ex("set redzone autoscan off")

# `next` at a violation stop steps in the program, not in judge.c: the free returns, the next line is main's.
overrun_first()
go("continue")
check(gdb.newest_frame().name() == "__redzone_violation", "at the violation stop")
text = go("next")
name, path = newest()
check(name == "main" and path and path.endswith("gdbprog.c"), f"`next` lands in the program: {name} {path}: {text}")
check("judge.c" not in text and "policy" not in text, text)
# At the next violation stop (alloc#1's free), a scan is refused while the check holds the registry, and the
# advice it gives works: `finish` returns to the program, where the scan runs.
text = go("continue")
check("found this violation" in text and newest()[0] == "__redzone_violation", text)
err = expect_error("redzone scan", "RZ_EBUSY", "`next` or `finish` returns to the program")
check("step or continue that thread past redzone" not in err, err)
go("finish")
name, path = newest()
check(name == "main" and path and path.endswith("gdbprog.c"), f"`finish` lands in the program: {name} {path}")
check("1 zones checked, 0 violated" in ex("redzone scan"), "the advice worked: the scan runs")
# `step` over a driver call steps over it (the interposer in hooks.c and the emulated driver are skipped), as
# over a real libcuda without line information: alloc#2's free happens, every step stays in gdbprog.c.
check(live_zones() == 1, ex("redzone stats"))
steps = []
while live_zones() == 1 and len(steps) < 4:
    go("step")
    steps.append(newest())
check(live_zones() == 0, f"the free of alloc#2 was stepped over: {steps}")
check(all(n == "main" and p and p.endswith("gdbprog.c") for n, p in steps), f"every step in the program: {steps}")

# A zone with both bands written: its free reports twice. `next` from the first report stops at the second
# (the library's, before its call returns), says so, and fails; `next` again then lands in the program.
ex("kill")
ex("set environment METRALE_REDZONE_FRONT=256")
go("run overrun")
ex("up")
ex("set {unsigned char}(p[0] + 256) = 0x55")
ex("set {unsigned char}(p[0] - 1) = 0x66")
ex("down")
text = go("continue")
check("alloc#0" in text or "found this violation" in text, text)
before = int(gdb.parse_and_eval("$redzone_violations()"))
try:
    text = go("next")
    raise AssertionError(f"`next` did not fail at the second report: {text}")
except gdb.error as e:
    check("stopped at another of the library's reports" in str(e), str(e))
check(newest()[0] == "__redzone_violation" and int(gdb.parse_and_eval("$redzone_violations()")) == before + 1,
      f"at the second report: {newest()}")
check(gdb.selected_frame().name() == "main", "the program's frame is selected there too")
go("next")
name, path = newest()
check(name == "main" and path and path.endswith("gdbprog.c"), f"`next` again lands in the program: {name} {path}")
ex("unset environment METRALE_REDZONE_FRONT")
ex("redzone break off")
done()
