"""`redzone gdb`: starts cuda-gdb (else gdb) with the redzone plugin loaded and the program ready to run.

It says which debugger it starts (path and version) and why; it loads the plugin itself and tells the
debugger that the plugin's auto-load stub next to libredzone.so is safe, so no auto-load safe-path warning
paragraph appears when the program loads the library (the stub finds the plugin already loaded)."""
import os
import shutil
import subprocess
import sys

from . import paths
from .options import Failure


def choose(requested):
    """(path, why) of the debugger to start."""
    if requested:
        path = shutil.which(requested) or (requested if os.path.exists(requested) else None)
        if not path:
            raise Failure(f"redzone: the debugger {requested} was not found", 127)
        return path, "--gdb"
    cuda = shutil.which("cuda-gdb")
    if cuda:
        return cuda, "cuda-gdb is found first: it debugs host and device code (--gdb PATH picks another)"
    gdb = shutil.which("gdb")
    if gdb:
        return gdb, "cuda-gdb is not installed; gdb debugs host code, and redzone's commands work the same"
    raise Failure("redzone: neither cuda-gdb nor gdb was found (apt-get install gdb, or nvidia-cuda-gdb)", 127)


def version(path):
    """The debugger's own version line: 'cuda-gdb 11.8 (GNU gdb (GDB) 10.2)' (banner "11.8 release"),
    'cuda-gdb 13.0 (Based on GNU gdb 14.2)' (12.x and 13.x: "NVIDIA (R) cuda-gdb 13.0"), 'GNU gdb 13.1'."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "version unknown"
    lines = [l.strip() for l in out.splitlines() if l.strip()]
    release = next((l.split()[0] for l in lines if l.endswith(" release")), None)
    release = release or next((l.split()[3] for l in lines if l.startswith("NVIDIA (R) cuda-gdb ")
                               and len(l.split()) > 3), None)
    gnu = next((l for l in lines if l.startswith(("GNU gdb", "Based on GNU gdb"))),
               lines[0] if lines else "version unknown")
    return f"cuda-gdb {release} ({gnu})" if release else gnu


def cmd_gdb(args, program):
    debugger, why = choose(args.gdb)
    print(f"redzone gdb: starting {debugger}, {version(debugger)}: {why}", file=sys.stderr, flush=True)
    libdir = os.path.dirname(paths.LIBREDZONE)
    cmd = [debugger, "-q", "-iex", f"add-auto-load-safe-path {libdir}", "-ex", f"source {paths.GDB_PLUGIN}"]
    if args.emulated_device:
        cmd += ["-ex", "set redzone emulated-device on"]
    cmd += ["--args"] + program
    try:
        os.execvp(cmd[0], cmd)
    except OSError as e:
        raise Failure(f"redzone: cannot run {debugger}: {e.strerror}", 127) from None
