"""What is true of the program when a command finds no library to read: no process yet (before `run`), the
program ended (exited, killed), or it did not start (it exited with status 127 during start-up, before it
loaded the CUDA driver: the driver cannot be found, or redzone's exec-wrapper refused to start it), with the
reason.

Kept from gdb's events (new_objfile, exited), without gdb.execute (see debugger.py)."""
import os
import subprocess

import gdb

from . import debugger

_RUN = {"redzone": False, "cuda": False}  # what the current run has loaded so far
LAST = {}  # the last run that ended: {"code": int or None, "redzone": bool, "cuda": bool}


def _on_new_objfile(event):
    name = (getattr(event.new_objfile, "filename", None) or "").rsplit("/", 1)[-1]
    if name.startswith("libredzone"):
        _RUN["redzone"] = True
    elif name.startswith("libcuda.so"):
        _RUN["cuda"] = True


def _on_exited(event):
    code = int(event.exit_code) if hasattr(event, "exit_code") else None
    LAST.clear()
    LAST.update(code=code, **_RUN)
    _RUN.update(redzone=False, cuda=False)
    if not_started():
        gdb.write(f"redzone: {did_not_start()}\n")


def not_started():
    """The last run ended with status 127 (ld.so's and rz-exec's 'cannot start') before it loaded the CUDA
    driver or the library: a program that ran and failed by itself is not said to have not started."""
    return bool(LAST) and LAST["code"] == 127 and not LAST["cuda"] and not LAST["redzone"]


def driver_findable(emulated):
    """Whether ld.so would find a libcuda.so.1: the emulated one, LD_LIBRARY_PATH's or the system's."""
    if emulated:
        return True
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    if any(os.path.exists(os.path.join(d, "libcuda.so.1")) for d in dirs):
        return True
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return True  # cannot tell: say nothing false
    return any(l.strip().startswith("libcuda.so.1 ") for l in out.splitlines())


def did_not_start():
    from .settings import SETTINGS  # noqa: PLC0415 -- settings imports this module
    code = LAST.get("code")
    said = f"the program did not start: it exited with code {code} during start-up, before it loaded the " \
           "CUDA driver"
    if not driver_findable(SETTINGS.emulated):
        return (said + ", and libcuda.so.1 cannot be found here (no CUDA driver): on a machine without a GPU, "
                "`set redzone emulated-device on` (redzone gdb --emulated-device), then `run`")
    return said + " (its own line above says why: the loader's, or rz-exec's for redzone's exec-wrapper)"


def no_program():
    """The sentence for a command that needs the program when there is no process (None: there is one, or
    a core file)."""
    inf = gdb.selected_inferior()
    if not debugger.is_none(inf) and inf.pid != 0 or debugger.is_core():
        return None
    if not LAST:
        return "no process yet: `run` starts the program with libredzone.so preloaded (or load a core file)"
    if not_started():
        return did_not_start()
    how = "it was killed, or a signal ended it" if LAST["code"] is None else f"it exited with code {LAST['code']}"
    return f"the program is not running ({how}): `run` starts it again (or load a core file)"


def explain(error):
    """A TargetError's text, or what is true instead when there is no process."""
    return no_program() or str(error)


def register():
    gdb.events.new_objfile.connect(_on_new_objfile)
    gdb.events.exited.connect(_on_exited)
