import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# A breakpoint's own `commands` run with autoscan on (every stop, or that breakpoint), and a `redzone scan`
# inside `commands` lets the rest of the list run: the memory method resumes nothing, so gdb's command list
# is not cut short. With the agent method (plain gdb only) a scan inside `commands` says on the spot that
# the rest of the list is skipped.
prepare()
ex("break stop_here")
gdb.execute("commands 1\nsilent\necho CMD-RAN\\n\ncontinue\nend")
for setting in ("on", "1"):
    ex(f"set redzone autoscan {setting}")
    text = go("run overrun")
    check(count(text, "CMD-RAN") == 2, f"autoscan {setting}: the commands ran at both stops: {text!r}")
    check("REDZONE VIOLATION alloc#1" in text and "redzone scan: 3 zones checked, 1 violated" in text, text)
    check(gdb.selected_inferior().pid == 0, f"autoscan {setting}: the commands' continue ran to the end")
ex("set redzone autoscan off")
gdb.execute("commands 1\nsilent\nredzone scan\necho AFTER-SCAN\\n\ncontinue\nend")
text = go("run overrun")
check(count(text, "AFTER-SCAN") == 2 and "REDZONE VIOLATION alloc#1" in text, f"scan inside commands: {text!r}")
check(gdb.selected_inferior().pid == 0, "ran to the end")
if DEBUGGER != "cuda-gdb":
    ex("set redzone method agent")
    text = go("run overrun")
    check("REDZONE VIOLATION alloc#1" in text and "skips the rest of this breakpoint's commands" in text, text)
    check(count(text, "AFTER-SCAN") == 0 and gdb.selected_inferior().pid != 0, "the agent cut the list short")
done()
