import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

ex("set pagination off")
ex(f"source {PLUGIN}")
from redzone_gdb import commands  # noqa: E402  (importable once the plugin is sourced)

ex("set redzone emulated-device on")
ex(f"file {PROG}")
ex("break stop_here")
ex("set redzone autoscan on")
go("run overrun")
check(len(commands.AUTOSCANS) == 1, f"one autoscan at the first stop: {commands.AUTOSCANS}")
check(commands.AUTOSCANS[-1] == "REDZONE VIOLATION alloc#1 user_bytes=1000 pad=64 : bytes [0..=7] past the end "
      "were written (8 of 64 pad bytes changed), first bad value 0xab\nredzone scan: 3 zones checked, 1 violated\n",
      repr(commands.AUTOSCANS[-1]))
check(selected()[2] == "stop_here", "the user's frame is selected after the autoscan")
go("continue")
check(len(commands.AUTOSCANS) == 2 and commands.AUTOSCANS[-1] == "redzone scan: 0 zones checked, 0 violated\n",
      repr(commands.AUTOSCANS))
ex("kill")
# Only after one breakpoint.
ex("delete")
ex("break main")
ex("break stop_here")
bp = max(b.number for b in gdb.breakpoints())
ex(f"set redzone autoscan {bp}")
commands.AUTOSCANS.clear()
go("run overrun")
check(gdb.selected_frame().name() == "main" and commands.AUTOSCANS == [], "no scan at the main breakpoint")
go("continue")
check(len(commands.AUTOSCANS) == 1 and "3 zones checked, 1 violated" in commands.AUTOSCANS[0], repr(commands.AUTOSCANS))
ex("set redzone autoscan off")
go("continue")
check(len(commands.AUTOSCANS) == 1, "off: no more scans")
done()
