import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# The memory method's cost is linear in the zones, and small per band (issue 29 item 7): the Python
# bytecode instructions a `redzone scan` runs, counted with an opcode trace (a count, not a time), at 10,000
# and at 100,000 zones. A clean band costs one comparison at C speed inside a list comprehension, not a
# tuple, a slice and a dictionary look-up each: at most PER_BAND instructions a band, and ten times the
# zones at most LINEAR times the instructions.
PER_BAND = 25
LINEAR = 10.5


def opcodes(cmd):
    count = [0]

    def trace(frame, event, arg):
        frame.f_trace_opcodes = True
        if event == "opcode":
            count[0] += 1
        return trace

    sys.settrace(trace)
    try:
        out = ex(cmd)
    finally:
        sys.settrace(None)
    return count[0], out


counts = {}
for n in (10000, 100000):
    if n == 10000:
        start(f"many {n}")
    else:
        go(f"run many {n}")
    ex("set redzone method memory")
    ex("redzone scan")  # the first scan also loads the view library
    counts[n], out = opcodes("redzone scan")
    check(f"redzone scan: {n} zones checked" in out, out)
    ex("kill")
small, large = counts[10000], counts[100000]
print(f"memory scan: {small} bytecode instructions at 10,000 zones, {large} at 100,000 "
      f"({large / 100000:.1f} a zone; limits {PER_BAND} a zone, {LINEAR}x for 10x the zones)")
check(large <= PER_BAND * 100000, f"{large} instructions for 100,000 zones")
check(large <= LINEAR * small, f"{small} at 10,000 zones, {large} at 100,000: not linear")
done()
