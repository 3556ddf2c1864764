"""The NVTX regions libredzone watches (pool sub-allocations, docs/design.md), decoded from memory: the
exported block __redzone_nvtx (policy/nvtx_regions.c: a magic, a version, the heap table; each heap points
at its sorted region entries). No gdb import: `read(addr, n) -> bytes` is handed in, so it works the same on
a live process, a core file, and under pytest (tests/python/test_nvtx.py)."""

import re
import struct

MAGIC = b"RZNVTX01"
VERSION = 1
HEADER = struct.Struct("<8sIIII")          # magic, version, heaps, heap_bytes, entry_bytes
HEAP = struct.Struct("<QQQQQQQQ")          # used, base, size, zone_index, ctx, entries, n, cap
ENTRY = struct.Struct("<QQQBB6x48s")       # start, size, filled, live, expected, name
MAX_ENTRIES = 1 << 20


class NvtxError(Exception):
    pass


def entries(read, addr):
    """Every region entry of every watched heap, in table then address order: dicts with the heap's base and
    size and the entry's start, size, filled, live, expected and name."""
    magic, version, heaps, heap_bytes, entry_bytes = HEADER.unpack(read(addr, HEADER.size))
    if magic != MAGIC:
        raise NvtxError("the NVTX region block has a bad magic (memory is corrupt?)")
    if version != VERSION or heap_bytes != HEAP.size or entry_bytes != ENTRY.size:
        raise NvtxError("the NVTX region block has another layout than this plugin understands")
    table = read(addr + HEADER.size, heaps * HEAP.size)
    out = []
    for h in range(heaps):
        used, base, size, _index, _ctx, at, n, _cap = HEAP.unpack_from(table, h * HEAP.size)
        if not used or not n or not at:
            continue
        n = min(n, MAX_ENTRIES)
        raw = read(at, n * ENTRY.size)
        for i in range(n):
            start, rsize, filled, live, expected, name = ENTRY.unpack_from(raw, i * ENTRY.size)
            out.append({"heap_base": base, "heap_size": size, "start": start, "size": rsize, "filled": filled,
                        "live": bool(live), "expected": expected,
                        "name": name.split(b"\0", 1)[0].decode("utf-8", "replace")})
    return out


def regions(read, addr):
    """[(heap_base, heap_size, start, size, live, name)] of every watched heap, in table then address order."""
    return [(e["heap_base"], e["heap_size"], e["start"], e["size"], e["live"], e["name"]) for e in entries(read, addr)]


def _report(e, data):
    """The library's line for an entry whose filled bytes read back as data (policy/nvtx_regions.c), or None."""
    bad = [k for k, b in enumerate(data) if b != e["expected"]]
    if not bad:
        return None
    what = f'nvtx region "{e["name"]}" ' if e["name"] else "nvtx region "
    what += f'0x{e["start"]:x}+{e["size"]}' + ("" if e["live"] else ", unregistered")
    what += f' (heap 0x{e["heap_base"]:x}+{e["heap_size"]})'
    first, last = bad[0], bad[-1]
    if e["live"]:
        tail = f"past the end were written ({len(bad)} of {len(data)} slack bytes changed)"
    else:
        tail = f"were written after it was unregistered ({len(bad)} of {len(data)} bytes checked changed)"
    return f"REDZONE VIOLATION {what} : bytes [{first}..={last}] {tail}, first bad value 0x{data[first]:02x}"


def check(read, band_read, addr):
    """Judge every region's filled bytes as a library scan does: (lines, refills [(address, bytes)]).
    band_read(address, n) -> bytes or None reads device memory (an unreadable cover is skipped)."""
    lines, refills = [], []
    for e in entries(read, addr):
        if not e["filled"]:
            continue
        at = e["start"] + e["size"] if e["live"] else e["start"]
        data = band_read(at, e["filled"])
        line = _report(e, data) if data is not None else None
        if line:
            lines.append(line)
            refills.append((at, bytes([e["expected"]]) * e["filled"]))
    return lines, refills


def rows(found, held=()):
    """The lines `redzone list` prints after the zones (none when there are no regions). held: the starts of
    the regions the quarantine holds (an unregistered region there is `quarantined`)."""
    if not found:
        return []
    lines = ["nvtx regions (pool sub-allocations):", "           start        bytes  state         heap  name"]
    for base, size, start, rsize, live, name in found:
        state = "registered" if live else ("quarantined" if start in held else "unregistered")
        lines.append(f"  0x{start:012x} {rsize:12d}  {state:<12}  0x{base:x}+{size}  {name}".rstrip())
    lines.append(f"{len(found)} nvtx region(s)")
    return lines


def to_json(found, held=()):
    """`redzone list --json`'s "nvtx_regions": one object per region, as rows() lists them."""
    return [{"start": f"0x{start:x}", "bytes": rsize,
             "state": "registered" if live else ("quarantined" if start in held else "unregistered"),
             "heap": f"0x{base:x}", "heap_bytes": size, "name": name}
            for base, size, start, rsize, live, name in found]


def names(found):
    """{start: name} of the named regions."""
    return {start: name for _b, _s, start, _r, _l, name in found if name}


def describe_held(found, start, size):
    """What the library calls a held (unregistered) region in its report (policy/nvtx_regions.c)."""
    for base, hsize, rstart, _rsize, _live, name in found:
        if rstart == start:
            label = f'nvtx region "{name}" ' if name else "nvtx region "
            return f"{label}0x{start:x}+{size}, unregistered (heap 0x{base:x}+{hsize})"
    return f"nvtx region 0x{start:x}+{size}, unregistered"


def checked(read, addr):
    """The registered regions a scan checks (those with slack bytes filled)."""
    return sum(1 for e in entries(read, addr) if e["live"] and e["filled"])


_SUMMARY = re.compile(r"^(redzone scan: \d+ zones checked, \d+ violated)$", re.M)


def scan_summary(out, blocks, regions):
    """The scan's output with its summary line extended by what else it checked: the freed blocks and the
    regions (registered ones' slack, unregistered ones held in the quarantine) and how many were written (the
    library's count covers zones only). Unchanged when the scan checked none and none was written."""
    written = sum(1 for line in out.splitlines() if line.startswith("REDZONE VIOLATION") and
                  ("nvtx region" in line or "written after free" in line))
    if not (blocks or regions or written):
        return out
    return _SUMMARY.sub(lambda m: f"{m.group(1)}; {blocks} freed block(s) held and {regions} nvtx region(s) "
                                  f"checked, {written} written", out, count=1)
