"""`redzone gdb`: starts cuda-gdb (else gdb) with the redzone plugin loaded and the program ready to run."""
import os
import shutil

from . import paths
from .options import Failure


def cmd_gdb(args, program):
    debugger = args.gdb or shutil.which("cuda-gdb") or shutil.which("gdb")
    if not debugger:
        raise Failure("redzone: neither cuda-gdb nor gdb was found (apt-get install gdb)", 127)
    cmd = [debugger, "-q", "-ex", f"source {paths.GDB_PLUGIN}"]
    if args.emulated_device:
        cmd += ["-ex", "set redzone emulated-device on"]
    cmd += ["--args"] + program
    try:
        os.execvp(cmd[0], cmd)
    except OSError as e:
        raise Failure(f"redzone: cannot run {debugger}: {e.strerror}", 127) from None
