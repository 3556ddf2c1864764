import os, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# Pool sub-allocations through NVTX in the debugger (issue 32 items 4 and 6): programs/rznvtx.c with
# libredzone.so as its NVTX injection library, stopped after its bad writes. `redzone list` shows the
# regions (registered, unregistered, named or not) after the zones, also from a core file; `redzone scan`
# checks their slack and the unregistered region, through the agent, and re-fills them.
prepare(prog=os.environ["RZ_RZNVTX"])
ex(f"set environment NVTX_INJECTION64_PATH {os.environ['RZ_LIBREDZONE']}")
ex("break stop_here")
go("run overrun")
check(gdb.selected_frame().name() == "stop_here", "stopped at stop_here")
out = ex("redzone list")
check("1 zone(s)\nnvtx regions (pool sub-allocations):\n" in out and "4 nvtx region(s)" in out, out)
check(count(out, "  registered  ") == 3 and count(out, "  unregistered  ") == 1, out)
for row in ("        1000  registered    0x", "  weights\n", "        2048  unregistered  0x", "  grads\n",
            "  activations\n"):
    check(row in out, f"no {row!r} in {out}")
check("nvtx region" not in ex("redzone list --violated"), "no regions with --violated")
out = ex("redzone scan")
check('REDZONE VIOLATION nvtx region "weights" 0x' in out and "(8 of 24 slack bytes changed), first bad value 0xab"
      in out, out)
check('REDZONE VIOLATION nvtx region "grads" 0x' in out and "were written after it was unregistered (16 of 2048 "
      "bytes checked changed), first bad value 0xcd" in out, out)
check("activations" not in out, out)
check("VIOLATION" not in ex("redzone scan"), "re-filled: the second scan is clean")
check("violations: 2\n" in ex("redzone stats"), "counted")
# The same through the library's own scan (the agent, where the debugger can serve it): a byte written into
# the slack of "activations" (500 bytes at pool + 3072) from the debugger is reported by the library.
gdb.execute("frame function main", to_string=True)
ex("set var *(unsigned char *)(act + 500 + 3) = 0x5c")
how = use_agent()
out = ex("redzone scan")
check('REDZONE VIOLATION nvtx region "activations" 0x' in out and ": bytes [3..=3] past the end were written "
      "(1 of 64 slack bytes changed), first bad value 0x5c" in out, f"{how}: {out}")
check("violations: 3\n" in ex("redzone stats"), "counted")
ex("set redzone method auto")
if DEBUGGER == "cuda-gdb":
    # cuda-gdb 11.8's gcore aborts on CPUs whose xstate it does not know (as case_core says)
    print("case_nvtx: no core file under cuda-gdb (its gcore aborts here); the gdb runs read one")
else:
    d = tempfile.mkdtemp()
    core = f"{d}/rznvtx.core"
    ex(f"generate-core-file {core}")
    ex("kill")
    ex(f"core-file {core}")
    out = ex("redzone list")
    check("4 nvtx region(s)" in out and "  grads\n" in out and count(out, "  unregistered  ") == 1, out)
    os.unlink(core)
done()
