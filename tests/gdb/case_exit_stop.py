"""`redzone break on` at the exit scan: the program's main has returned, so the stop says it is the exit scan
and selects none of the C library's exit frames (`__run_exit_handlers`, `??`) as "the program's call"."""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

prepare()
check("redzone break: on" in ex("redzone break on"), "break on")
text = go("run many 3")  # 3 allocations, the last one overrun, never freed: the exit scan finds it
check("stopped at the exit scan, which found this violation as the program ends" in text, text)
check("no frame of the program is left on the stack" in text and "frame #" not in text, text)
name = gdb.selected_frame().name()
check(name not in ("__run_exit_handlers", "exit", "__libc_start_call_main", "_start") and not is_none(name),
      f"no C library frame is selected as the program's: {name}")
check(name == "__redzone_violation", f"the library's report call stays selected: {name}")
bt = ex("bt")
check("exit_scan" in bt and " main " not in bt, f"inside the exit scan, main returned: {bt}")
out = ex("redzone violations")
check("REDZONE VIOLATION alloc#2 user_bytes=64" in out and "(found by the exit scan)" in out and
      "the exit scan this stop is in: 3 zones checked, 1 violated (it stops at each of its reports; 0 scan(s) "
      "finished before it)" in out
      and "no scan has run yet" not in out, out)
# The hook's breakpoint stays while the program exits (nothing more to report): deleting the breakpoint the
# stopped thread stands at before a quick exit trips the gdb race of docs/gdb.md.
go("continue")
check(int(gdb.parse_and_eval("$_exitcode")) == 0, "the program ends as it would")
ex("redzone break off")
done()
