import os, sys
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
done()
