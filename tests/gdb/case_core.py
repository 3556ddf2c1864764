import os, subprocess, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# A core file: list, stats, the last scan's violations and allocation stacks read memory (post-mortem);
# scan judges and reports without writing anything; poison and unpoison refuse clearly.
d = tempfile.mkdtemp()
os.environ["RZ_CORE_DIR"] = d
maker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "core_make.py")
if DEBUGGER == "cuda-gdb":
    # cuda-gdb 11.8's gcore aborts on CPUs whose xstate it does not know ("Unexpected size of section
    # .reg-xstate"): the cores come from gdb; reading them is what this case tests.
    print("case_core: core files made by gdb (cuda-gdb's gcore aborts here); read by cuda-gdb")
    r = subprocess.run(["gdb", "-nx", "-batch", "-x", maker], capture_output=True, text=True, timeout=200)
    check("CASE PASSED" in r.stdout, r.stdout + r.stderr)
else:
    make_cores(d)
core, core0 = f"{d}/gdbprog.core", f"{d}/before-scan.core"
live = open(f"{d}/live-scan").read()
ex("set pagination off")
ex(f"source {PLUGIN}")
ex(f"file {PROG}")
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
# scan on a core file: the memory method, read-only (judges and reports, writes nothing)
check(ex("redzone scan") == "redzone scan: 3 zones checked, 0 violated\n", "the core after the scan is clean")
expect_error("redzone poison 0 1", "core file", "Usage: redzone poison")
expect_error("redzone unpoison", "core file", "Usage: redzone unpoison")
ex(f"core-file {core0}")
check("scan reads and reports, writes nothing" in ex("redzone status"), "status names the read-only scan")
first = ex("redzone scan")
check(first.splitlines()[0] == live.splitlines()[0] and first.endswith("redzone scan: 3 zones checked, 1 violated\n"),
      f"the core's scan reports what the live scan did: {first!r} vs {live!r}")
check(ex("redzone scan") == first, "nothing re-filled: the same report again")
check("scans: 0" in ex("redzone stats"), "nothing recorded in a core file")
os.unlink(core)
os.unlink(core0)
done()
