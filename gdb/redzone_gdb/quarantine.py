"""The quarantine's freed blocks (issue 32), read from the program's memory (live or a core file): the exported
`__redzone_quarantine` ring (native/src/base/state.h, layout pinned in state.c), listed by `redzone list` and
judged by the memory method's `redzone scan` as the library judges them. No gdb import: target.py hands it
memory readers, and pytest can drive it with fakes."""
import struct

from . import view

MAGIC = 0x3151544E41555152
VERSION = 1
HEADER = struct.Struct("<QIIQQQQQQQQIB3x")  # magic version size seq ring cap head count bytes peak bound esize byte
ENTRY = struct.Struct("<QQQQQQQIIHBBI")      # base bytes ptr user_bytes index ctx launch_seq stacks fill byte flags
FILLING, VIOLATED = 0x1, 0x2


def read(host_read, addr):
    """(header dict, [entry dict], oldest first), or None when the library has no quarantine."""
    if addr is None:
        return None
    h = HEADER.unpack(host_read(addr, HEADER.size))
    if h[0] != MAGIC or h[1] != VERSION:
        return None
    head = dict(zip(("magic", "version", "size", "seq", "ring", "cap", "head", "count", "bytes", "peak",
                     "bound", "entry_size", "byte"), h))
    entries = []
    esize = head["entry_size"]
    for i in range(head["count"]):
        slot = (head["head"] + i) % head["cap"]
        e = ENTRY.unpack(host_read(head["ring"] + slot * esize, ENTRY.size))
        entries.append(dict(zip(("base", "bytes", "ptr", "user_bytes", "index", "ctx", "launch_seq",
                                 "alloc_stack", "free_stack", "fill", "byte", "flags", "reserved"), e)))
    return head, entries


def rows(entries, limit=100):
    out = []
    for e in entries[:limit or None]:
        state = "filling" if e["flags"] & FILLING else ("written" if e["flags"] & VIOLATED else "held")
        out.append(f"  freed alloc#{e['index']} 0x{e['ptr']:x} user_bytes={e['user_bytes']} held={e['bytes']} "
                   f"fill=0x{e['byte']:02x} {state}")
    return out


def record(e, first, last, changed, bad):
    """An rz_violation_t for a write after free (after_free = 1), offsets from the program's pointer."""
    off = e["base"] - e["ptr"]
    mask = (1 << 64) - 1
    return struct.pack("<QQQQQQQBBBB4x", e["index"], e["ptr"], e["user_bytes"], e["bytes"], (first + off) & mask,
                       (last + off) & mask, changed, bad, e["byte"], 0, 1)


def judge(e, data):
    """(record, line) when the held block's bytes `data` differ from its free byte, else None."""
    want = bytes([e["byte"]]) * len(data)
    if data == want:
        return None
    diff = [i for i, b in enumerate(data) if b != e["byte"]]
    rec = record(e, diff[0], diff[-1], len(diff), data[diff[0]])
    return rec, view.violation(rec)
