import os, subprocess, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# `redzone scan` inside the user's hook-stop: the scan's lines and gdb's own stop location both print, on
# `run` and on `continue` (the memory method resumes nothing). Stop locations are printed by the debugger's
# CLI, which a case cannot capture from inside, so this case runs one session of the same debugger.
script = f"""set pagination off
source {PLUGIN}
set redzone emulated-device on
file {PROG}
define hook-stop
redzone scan
end
break stop_here
run overrun
continue
"""
with tempfile.NamedTemporaryFile("w", suffix=".gdb", delete=False) as f:
    f.write(script)
r = subprocess.run(os.environ["RZ_DEBUGGER"].split() + ["-nx", "-batch", "-x", f.name], capture_output=True,
                   text=True, timeout=120, stdin=subprocess.DEVNULL)
os.unlink(f.name)
out = r.stdout + r.stderr
check("stop_here (where=1) at " in out and "stop_here (where=2) at " in out, f"both stop locations:\n{out}")
check("REDZONE VIOLATION alloc#1" in out and "redzone scan: 3 zones checked, 1 violated" in out, out)
check(out.index("redzone scan: 3 zones checked") < out.index("stop_here (where=1) at "),
      "the hook's scan, then gdb's location line, as a hook-stop's output comes")
check("Python Exception" not in out and "Error while running hook_stop" not in out, out)
done()
