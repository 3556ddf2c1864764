import os, subprocess, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# `redzone gdb --gdb THIS_DEBUGGER`, as a user or a CI job starts it: a script instead of a program gets a
# sentence, a missing program is an error (non-zero, no debugger started), debugger options pass through
# (-batch -ex for a CI session), the version line names this debugger, and without --emulated-device on a
# machine without a CUDA driver it says to add --emulated-device.
BUILD = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(PLUGIN))))
REDZONE = os.path.join(BUILD, "bin", "redzone")
DBG = os.environ["RZ_DEBUGGER"]
ex(f"source {PLUGIN}")
from redzone_gdb import versions  # noqa: E402 -- importable once the plugin is sourced


# The launcher is started by this machine's python3: not with the Python settings of the debugger running this
# case (tests/gdb16 sets PYTHONHOME to its Debian 13 root for its own Python).
CLEAN = {k: v for k, v in os.environ.items() if k not in ("PYTHONHOME", "PYTHONPATH")}


def launch(*words, env=None):
    env = CLEAN if env is None else env
    p = subprocess.run([REDZONE, "gdb", "--gdb", DBG] + list(words), capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=240, env=env)
    return p.returncode, p.stdout + p.stderr


with tempfile.TemporaryDirectory() as d:
    script = os.path.join(d, "wrap.sh")
    with open(script, "w") as f:
        f.write(f"#!/bin/sh\nexec {PROG} \"$@\"\n")
    os.chmod(script, 0o755)
    rc, out = launch("--emulated-device", "--", script, "overrun")
    check(rc == 2 and f"redzone gdb: {script} is a script (#!/bin/sh), and a debugger starts programs" in out
          and "redzone gdb -- PROGRAM ARGS" in out and "starting" not in out, f"script: {rc} {out}")
    rc, out = launch("--emulated-device", "--", os.path.join(d, "nosuch"), "overrun")
    check(rc == 127 and "the program" in out and "was not found (no such file)" in out and "starting" not in out,
          f"missing program: {rc} {out}")
    rc, out = launch("--emulated-device", "--", "rz-no-such-program-here")
    check(rc == 127 and "not a file here, nor on PATH" in out, f"missing program on PATH: {rc} {out}")

# Debugger options pass through: a CI session in one command.
rc, out = launch("--emulated-device", "--", "-batch", "-ex", "break stop_here", "-ex", "run overrun", "-ex",
                 "redzone scan", "-ex", "kill", "--", PROG)
check(rc == 0 and "REDZONE VIOLATION alloc#1 user_bytes=1000 pad=64" in out and
      "redzone scan: 3 zones checked, 1 violated" in out, f"debugger options: {rc} {out}")
banner = gdb.execute("show version", to_string=True)
line = next((l for l in out.splitlines() if l.startswith("redzone gdb: starting ")), "")
check(line.startswith(f"redzone gdb: starting {DBG}, {versions.describe(banner)}: --gdb"), f"{line!r} vs {banner!r}")
check(versions.describe(banner) in ("gdb 13.1", "cuda-gdb 11.8 (GDB 10.2)", "gdb 16.3"), versions.describe(banner))
rc, out = launch("--", "-batch", PROG)
check(rc == 2 and "debugger options come before a second `--`" in out, f"options without a program: {rc} {out}")

# No CUDA driver here and no --emulated-device: the sentence, before any debugger starts.
env = {k: v for k, v in CLEAN.items() if k != "LD_LIBRARY_PATH"}
probe = subprocess.run(["python3", "-c", "import ctypes; ctypes.CDLL('libcuda.so.1')"], env=env, capture_output=True)
if probe.returncode == 0:
    print("case_launcher: SKIPPED the no-GPU sentence: a libcuda.so.1 loads here (a CUDA driver is installed)")
else:
    rc, out = launch("--", PROG, "overrun", env=env)
    check(rc == 127 and "the CUDA driver (libcuda.so.1) cannot be loaded here" in out and
          "on a machine without a GPU, add --emulated-device" in out and "starting" not in out, f"no GPU: {rc} {out}")
done()
