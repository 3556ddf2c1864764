import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

start()
check("redzone break: on" in ex("redzone break on"), "break on")
out = go("continue")
bt = ex("bt")
check("__redzone_violation" in bt and "rz__scan_before_free" in bt and "cuMemFree_v2" in bt and " main " in bt,
      f"stopped where the free-time check found it: {bt}")
check(int(gdb.parse_and_eval("$redzone_violations()")) == 1, "counted before the hook")
check(int(gdb.parse_and_eval("violation->index")) == 1, "the record is readable")
ex("redzone break off")
go("continue")
check(gdb.selected_frame().name() == "stop_here" and int(gdb.parse_and_eval("where")) == 2, "off: runs to the end")
# A scan gdb asks for never stops at the violation breakpoint.
done()
