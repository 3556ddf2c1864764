import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# The library is preloaded whatever the user's own exec-wrapper is (redzone's runs first, then the user's),
# and when it is not in the program (a wrapper set after the plugin, or startup-with-shell off) the user is
# told at `run`, before anything goes unchecked.


def env_of_program():
    with open(f"/proc/{gdb.selected_inferior().pid}/environ", "rb") as f:
        return dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)


def stop():
    if gdb.selected_inferior().pid:
        ex("kill")


def loaded():
    return any("libredzone" in (o.filename or "") for o in gdb.objfiles())


ex("set pagination off")
ex("set confirm off")
ex("set exec-wrapper env RZ_TEST_MYVAR=1")  # the user's own, before the plugin loads
ex(f"source {PLUGIN}")
ex("set redzone emulated-device on")
ex(f"file {PROG}")
ex("break stop_here")
text = go("run overrun")
check(loaded() and env_of_program().get(b"RZ_TEST_MYVAR") == b"1", "the library and the user's wrapper both")
check("REDZONE VIOLATION alloc#1" in ex("redzone scan"), "checked")
stop()

EMU = os.environ["RZ_EMU_DIR"]
ex(f"set exec-wrapper env LD_LIBRARY_PATH={EMU} RZ_TEST_MYVAR=2")  # set after the plugin: redzone's is gone
text = go("run overrun")
check("libredzone.so is not loaded in this program" in text and "not redzone's" in text, f"said at run: {text}")
stop()
ex("set redzone bytes 64")  # any redzone setting puts redzone's wrapper back, around the user's
text = go("run overrun")
check(loaded() and env_of_program().get(b"RZ_TEST_MYVAR") == b"2" and "not loaded" not in text, text)
stop()

# redzone's own wrapper, and ld.so still does not preload the library (here: the library is not where the
# plugin's paths say): the warning at `run` names the cause.
from redzone_gdb import paths  # noqa: E402
real = paths.LIBREDZONE
paths.LIBREDZONE = "/nonexistent/redzone/libredzone.so"
ex("set redzone fill 7")  # recomposes redzone's wrapper with that library
try:
    text = go("run overrun")
finally:
    paths.LIBREDZONE = real
check(not loaded() and "libredzone.so is not loaded in this program" in text and
      "/nonexistent/redzone/libredzone.so is missing (is redzone installed?)" in text, f"said at run: {text}")
stop()
ex("set redzone fill")  # redzone's wrapper with the real library again

# startup-with-shell off: gdb runs no wrapper (and miscounts the start with one set), so a program started
# that way runs without the library; the user is told, with the reason.
ex(f"set environment LD_LIBRARY_PATH={EMU}")  # the driver found without redzone's wrapper
ex("unset exec-wrapper")
ex("set startup-with-shell off")
text = go("run overrun")
check(not loaded() and "libredzone.so is not loaded" in text and "startup-with-shell" in text, f"said at run: {text}")
stop()
done()
