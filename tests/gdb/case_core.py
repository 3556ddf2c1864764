import os, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# A core file: list and stats read memory; scan and poison refuse clearly.
start()
ex("redzone scan")
core = os.path.join(tempfile.mkdtemp(), "gdbprog.core")
ex(f"gcore {core}")
ex("kill")
ex(f"core-file {core}")
out = ex("redzone list")
check("3 zone(s)" in out and "      1000" in out, out)
out = ex("redzone stats")
check("map_calls: 3" in out and "violations: 1" in out and "scans: 1" in out, out)
check("core file" in ex("redzone status"), "status says core file")
expect_error("redzone scan", "core file")
expect_error("redzone poison 0 1", "core file")
os.unlink(core)
done()
