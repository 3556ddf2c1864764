import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# What is true when there is no program: before `run`, when it could not start, after `kill`, after it
# exited; each command says which, not "libredzone is not loaded".
ex("set pagination off")
ex("set confirm off")
ex(f"source {PLUGIN}")
from redzone_gdb import session  # noqa: E402 -- the plugin's package, on sys.path once it is sourced
ex(f"file {PROG}")
COMMANDS = ("redzone list", "redzone scan", "redzone poison 0 1", "redzone violations", "redzone stats")
for cmd in COMMANDS:
    expect_error(cmd, "no process yet: `run` starts the program with libredzone.so preloaded")
check("library: not loaded (no process yet" in ex("redzone status"), ex("redzone status"))
expect_error("print $redzone_violations()", "no process yet")
if session.driver_findable(False):
    print("case_not_loaded: SKIPPED the start without a driver: a libcuda.so.1 is installed here, so the "
          "program starts without the emulated device")
else:
    said = go("run overrun")  # no emulated device, no driver: ld.so cannot load libcuda.so.1
    check("redzone: the program did not start: it exited with code 127 during start-up" in said and
          "libcuda.so.1 cannot be found here" in said and "`set redzone emulated-device on`" in said, said)
    for cmd in COMMANDS:
        expect_error(cmd, "the program did not start", "libcuda.so.1 cannot be found",
                     "set redzone emulated-device on")
    check("not loaded" in ex("redzone status") and "did not start" in ex("redzone status"), ex("redzone status"))
ex("set redzone emulated-device on")
ex("break stop_here")
go("run overrun")
check("REDZONE VIOLATION alloc#1" in ex("redzone scan"), "the program runs with the library now")
ex("kill")
for cmd in COMMANDS:
    expect_error(cmd, "the program is not running (it was killed, or a signal ended it): `run` starts it again")
ex("delete")
go("run overrun")
for cmd in COMMANDS:
    expect_error(cmd, "the program is not running (it exited with code 0)")

# A program running without the library: every command says so clearly.
ex("set pagination off")
ex(f"source {PLUGIN}")
ex(f"file {PROG}")
ex("set exec-wrapper env LD_LIBRARY_PATH=" + os.environ["RZ_EMU_DIR"])
ex("break main")
go("run overrun")
for cmd in ("redzone list", "redzone stats", "redzone scan", "redzone poison 0 1"):
    expect_error(cmd, "libredzone is not loaded")
check("library: not loaded" in ex("redzone status"), "status")
done()
