import os, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# A core file: list, stats, the last scan's violations and allocation stacks read memory (post-mortem);
# scan and poison refuse clearly.
start(settings=("stacks 4",))
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
out = ex("redzone violations")
check("REDZONE VIOLATION alloc#1 user_bytes=1000 pad=64 : bytes [0..=7] past the end" in out
      and "last scan: 3 zones checked, 1 violated" in out, out)
out = ex("redzone list --stacks --from 1 --to 1")
src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "programs", "gdbprog.c")
line = next(i for i, l in enumerate(open(src), 1) if "cuMemAlloc_v2(&p[1], 1000)" in l)  # alloc#1's call
check(count(out, "#0 0x") == 1 and " in main at " in out and f"gdbprog.c:{line}" in out, out)
expect_error("redzone scan", "core file")
expect_error("redzone poison 0 1", "core file")
os.unlink(core)
done()
