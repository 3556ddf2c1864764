"""The quarantine's freed blocks (issue 32), read from the program's memory (live or a core file): the exported
`__redzone_quarantine` ring (native/src/base/state.h, layout pinned in state.c), listed by `redzone list` and
judged by the memory method's `redzone scan` as the library judges them. No gdb import: target.py hands it
memory readers, and pytest can drive it with fakes."""
import struct

MAGIC = 0x3151544E41555152
VERSION = 1
HEADER = struct.Struct("<QIIQQQQQQQQIB3x")  # magic version size seq ring cap head count bytes peak bound esize byte
ENTRY = struct.Struct("<QQQQQQQIIHBBI")      # base bytes ptr user_bytes index ctx launch_seq stacks fill byte flags
FILLING, VIOLATED, REGION = 0x1, 0x2, 0x4  # RZ_QENTRY_*: REGION, a pool's region NVTX unregistered


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


def state_of(e):
    return "filling" if e["flags"] & FILLING else ("written" if e["flags"] & VIOLATED else "held")


def rows(entries, limit=100, names=None):
    """The lines `redzone list` prints for the held entries. names: {region start: NVTX name} (nvtx.names)."""
    out = []
    for e in entries[:limit or None]:
        if e["flags"] & REGION:
            name = (names or {}).get(e["ptr"], "")
            label = f'nvtx region "{name}"' if name else "nvtx region"
            out.append(f"  unregistered {label} 0x{e['ptr']:x} bytes={e['user_bytes']} held={e['bytes']} "
                       f"fill=0x{e['byte']:02x} {state_of(e)} (pool alloc#{e['index']})")
            continue
        out.append(f"  freed alloc#{e['index']} 0x{e['ptr']:x} user_bytes={e['user_bytes']} held={e['bytes']} "
                   f"fill=0x{e['byte']:02x} {state_of(e)}")
    return out


def summary(head, entries):
    """The line after the held entries: what the quarantine holds (blocks and regions), and its bytes."""
    regions = sum(1 for e in entries if e["flags"] & REGION)
    blocks = len(entries) - regions
    what = f"{blocks} freed block(s)" + (f" and {regions} unregistered nvtx region(s)" if regions else "")
    return f"{what} held in the quarantine, {head['bytes']} bytes"


def to_json(head, entries, names=None):
    """`redzone list --json`'s "quarantine" object: the bytes held, the peak and the bound, and each entry."""
    held = []
    for e in entries:
        obj = {"kind": "nvtx-region" if e["flags"] & REGION else "block", "index": e["index"],
               "pointer": f"0x{e['ptr']:x}", "user_bytes": e["user_bytes"], "base": f"0x{e['base']:x}",
               "held_bytes": e["bytes"], "fill": e["byte"], "state": state_of(e)}
        if e["flags"] & REGION:
            obj["name"] = (names or {}).get(e["ptr"], "")
        held.append(obj)
    return {"bytes": head["bytes"], "peak_bytes": head["peak"], "bound": head["bound"], "held": held}


def region_starts(entries):
    """The starts of the regions held (nvtx.rows shows them `quarantined`)."""
    return {e["ptr"] for e in entries if e["flags"] & REGION}


def checked(entries):
    """(freed blocks, regions) a scan checks: those whose fill is done."""
    done = [e for e in entries if not e["flags"] & FILLING]
    regions = sum(1 for e in done if e["flags"] & REGION)
    return len(done) - regions, regions


def record(e, first, last, changed, bad):
    """An rz_violation_t for a write after free (after_free = 1), offsets from the program's pointer."""
    off = e["base"] - e["ptr"]
    mask = (1 << 64) - 1
    return struct.pack("<QQQQQQQBBBB4x", e["index"], e["ptr"], e["user_bytes"], e["bytes"], (first + off) & mask,
                       (last + off) & mask, changed, bad, e["byte"], 0, 1)


def judge(e, data, what=None):
    """(record, line) when the held block's bytes `data` differ from its free byte, else None. A held region's
    line names it as the library's does: what is its description (nvtx.describe_held), else a generic one."""
    want = bytes([e["byte"]]) * len(data)
    if data == want:
        return None
    diff = [i for i, b in enumerate(data) if b != e["byte"]]
    rec = record(e, diff[0], diff[-1], len(diff), data[diff[0]])
    if e["flags"] & REGION:
        off = e["base"] - e["ptr"]
        return rec, (f"REDZONE VIOLATION {what or 'a pool region'} : bytes [{diff[0] + off}..={diff[-1] + off}] were "
                     f"written after it was unregistered ({len(diff)} of {e['bytes']} bytes held changed), first bad "
                     f"value 0x{data[diff[0]]:02x}")
    from . import view  # the library's own formatter (libredzone-view.so): imported where a block needs it
    return rec, view.violation(rec)
