import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# A stream-ordered allocation whose band memset is still queued behind a kernel that waits for the host: the
# debugger judging bands itself (the memory method: it cannot ask the fill's event) must leave that zone
# alone, not report the bytes the memset has not reached as 64 changed pad bytes. Once the program has
# synchronised the stream, the mark is gone and the zone is judged: a byte written past its end is reported.
start(args="asyncbusy", bp="rzprog_stop", settings=("method memory",), prog=os.environ["RZ_RZPROG"])
out = ex("redzone list")
row = next(l for l in out.splitlines() if "      1000" in l)
check(row.endswith("filling"), out)
out = ex("redzone scan")
check(out == "redzone scan: 0 zones checked, 0 violated\n", out)
go("continue")
check(int(gdb.parse_and_eval("where")) == 2, "second stop")
out = ex("redzone list")
row = next(l for l in out.splitlines() if "      1000" in l)
check(row.endswith("watched"), out)
out = ex("redzone scan")
check(out.startswith("REDZONE VIOLATION alloc#0 user_bytes=1000 pad=64 : bytes [0..=0] past the end were written "
                     "(1 of 64 pad bytes changed), first bad value 0x11\n"), out)
check("redzone scan: 1 zones checked, 1 violated\n" in out, out)
go("continue")
check(int(gdb.parse_and_eval("$_exitcode")) == 0, "the program ran to its end")
done()
