import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# cuda-gdb 12.x and later have a gdb.cuda module with read_global_memory: the band reader asks it before the
# @global casts (one expression per band) and after plain memory (the emulated device's bands are host
# memory). Shown with a stand-in module, in every debugger: the paths' order, and a read that plain memory
# cannot serve answered by the module (not by @global, which the stand-in's address would make fail).
ex(f"source {PLUGIN}")
from redzone_gdb import debugger  # noqa: E402
calls = []


class FakeCuda:
    @staticmethod
    def read_global_memory(addr, n):
        calls.append((addr, n))
        return bytes([0xEE]) * n


real_name = debugger.name
debugger.name = lambda: "cuda-gdb"
gdb.cuda = FakeCuda
try:
    io = debugger.band_io()
    check([p[0] for p in io.paths] == ["plain", "cuda", "global"], f"paths: {[p[0] for p in io.paths]}")
    check(io.read(0x10, 8) == b"\xee" * 8 and calls == [(0x10, 8)], f"read through gdb.cuda: {calls}")
    check(io.used == {"cuda": 1}, f"served by: {io.used}")
    del gdb.cuda
    io = debugger.band_io()
    check([p[0] for p in io.paths] == ["plain", "global"], "without the module: plain, then @global")
finally:
    debugger.name = real_name
    if hasattr(gdb, "cuda"):
        del gdb.cuda
check([p[0] for p in debugger.band_io().paths] == (["plain", "global"] if DEBUGGER == "cuda-gdb" else ["plain"]),
      "this debugger's own paths")
done()
