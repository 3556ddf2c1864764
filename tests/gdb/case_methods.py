import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# The two methods, agent and memory, at the same stop give byte-identical report and summary lines and leave
# the library in the same state (counters, last scan's records, zone marks, expected bytes). Where the
# debugger cannot resume one thread alone (cuda-gdb) the agent method is refused with a sentence, and auto
# picks memory. The same stop is replayed by saving the program's bands and redzone's state before the first
# scan and writing them back before the second.


def state_regions():
    """[(addr, bytes)] of everything a scan may change: the state block, the launch ring, the node chunks."""
    inf = gdb.selected_inferior()
    state = int(gdb.parse_and_eval("(unsigned long)&__redzone_state"))
    size = int(gdb.parse_and_eval("sizeof(__redzone_state)"))
    regions = [(state, size), (int(gdb.parse_and_eval("(unsigned long)&__redzone_launches")),
                               int(gdb.parse_and_eval("sizeof(__redzone_launches)")))]
    for c in range(4):
        ptr = int(gdb.parse_and_eval(f"(unsigned long)__redzone_state.chunks[{c}]"))
        if ptr:
            regions.append((ptr, int(gdb.parse_and_eval("sizeof(*__redzone_state.chunks[0])")) << 16))
    rows = json.loads(ex("redzone list --json --limit 0"))["zones"]
    for r in rows:  # each zone's bands and user bytes (the bands are what the scan judges and re-fills)
        regions.append((int(r["pointer"], 16) - r["front"], r["front"] + r["user_bytes"] + r["pad"]))
    return [(a, bytes(inf.read_memory(a, n))) for a, n in regions]


def restore(saved):
    for a, data in saved:
        gdb.selected_inferior().write_memory(a, data)


def observe():
    return ex("redzone stats"), ex("redzone violations"), ex("redzone list --limit 0"), ex("redzone status")


def compare(label):
    saved = state_regions()
    ex("set redzone method agent")
    first = ex("redzone scan")
    after_agent = observe()
    restore(saved)
    ex("set redzone method memory")
    second = ex("redzone scan")
    after_memory = observe()
    check(first == second, f"{label}: the methods' reports differ:\nagent:  {first!r}\nmemory: {second!r}")
    for a, m in zip(after_agent[:3], after_memory[:3]):
        check(a == m, f"{label}: the state left differs:\nagent:\n{a}\nmemory:\n{m}")
    check("scan and poison now: memory" in after_memory[3], after_memory[3])
    # and a poison window by each method leaves the same expected bytes
    saved = state_regions()
    ex("set redzone method agent")
    p1 = ex("redzone poison 1 2")
    l1 = ex("redzone list --limit 0")
    s1 = ex("redzone scan")
    restore(saved)
    ex("set redzone method memory")
    p2 = ex("redzone poison 1 2")
    l2 = ex("redzone list --limit 0")
    s2 = ex("redzone scan")
    check((p1, l1, s1) == (p2, l2, s2), f"{label}: poison differs:\n{p1}{l1}{s1}\n---\n{p2}{l2}{s2}")
    check(ex("redzone unpoison") and "0x00  watched" not in ex("redzone list --limit 0"), "unpoison by memory")
    return first


import json  # noqa: E402

if DEBUGGER == "cuda-gdb":
    start()
    ex("set redzone method agent")
    expect_error("redzone scan", "cannot resume one thread alone", "set redzone method memory")
    ex("set redzone method auto")
    out = ex("redzone scan")
    check(out.startswith("REDZONE VIOLATION alloc#1 user_bytes=1000 pad=64 : bytes [0..=7]"), out)
    check("scan and poison now: memory" in ex("redzone status"), "auto picks memory in cuda-gdb")
    done()
    sys.exit(0)

# One overrun past the end, three zones.
start()
out = compare("overrun")
check(out.startswith("REDZONE VIOLATION alloc#1 user_bytes=1000 pad=64 : bytes [0..=7] past the end") and
      out.endswith("redzone scan: 3 zones checked, 1 violated\n"), out)
ex("kill")

# Front bands too (a write before the start), and many zones: 300 zones, the last one overrun.
ex("set environment METRALE_REDZONE_FRONT=256")
go("run many 300")
out = compare("many, front bands")
check("alloc#299" in out and "redzone scan: 300 zones checked, 1 violated" in out, out)
done()
