"""The NVTX region decoder of `redzone list` (gdb/redzone_gdb/nvtx.py), on a fake memory laid out as
policy/nvtx_regions.c lays out __redzone_nvtx."""
import os
import struct
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "gdb"))
from redzone_gdb import nvtx  # noqa: E402


def memory(heaps, version=1, magic=b"RZNVTX01"):
    """(read, addr): the block at 0x1000, entry arrays from 0x100000 on."""
    mem = {}
    block = nvtx.HEADER.pack(magic, version, len(heaps), nvtx.HEAP.size, nvtx.ENTRY.size)
    at = 0x100000
    for base, size, entries in heaps:
        raw = b"".join(nvtx.ENTRY.pack(e[0], e[1], e[4] if len(e) > 4 else 0, e[2], 0xee, e[3].encode())
                       for e in entries)  # (start, size, live, name[, filled])
        mem[at] = raw
        block += nvtx.HEAP.pack(1 if entries is not None else 0, base, size, 7, 0, at, len(entries), 16)
        at += 0x10000
    mem[0x1000] = block

    def read(addr, n):
        for start, data in mem.items():
            if start <= addr and addr + n <= start + len(data):
                return data[addr - start:addr - start + n]
        raise AssertionError(f"read outside the fake memory: 0x{addr:x}+{n}")
    return read, 0x1000


def test_regions_in_order_with_names_and_states():
    read, addr = memory([(0x7000, 4096, [(0x7000, 1000, 1, "weights"), (0x7400, 2048, 0, "grads"),
                                         (0x7c00, 100, 1, "")])])
    found = nvtx.regions(read, addr)
    assert found == [(0x7000, 4096, 0x7000, 1000, True, "weights"), (0x7000, 4096, 0x7400, 2048, False, "grads"),
                     (0x7000, 4096, 0x7c00, 100, True, "")]
    lines = nvtx.rows(found)
    assert lines[-1] == "3 nvtx region(s)"
    assert "registered    0x7000+4096  weights" in lines[2]
    assert "unregistered  0x7000+4096  grads" in lines[3]
    assert lines[4].endswith("0x7000+4096")  # no name: nothing after the heap


def test_empty_heaps_print_nothing():
    read, addr = memory([(0x7000, 4096, [])])
    assert nvtx.regions(read, addr) == [] and nvtx.rows([]) == []


def test_bad_magic_and_layout_are_errors():
    read, addr = memory([], magic=b"XXXXXXXX")
    with pytest.raises(nvtx.NvtxError, match="magic"):
        nvtx.regions(read, addr)
    read, addr = memory([], version=2)
    with pytest.raises(nvtx.NvtxError, match="layout"):
        nvtx.regions(read, addr)


def test_check_reports_as_the_library_does_and_refills():
    # as the library leaves them: "weights" 24 slack bytes filled with 0xee, unregistered "grads" 2048
    read, addr = memory([(0x7000, 4096, [(0x7000, 1000, 1, "weights", 24), (0x7400, 2048, 0, "grads", 2048)])])
    device = {0x7000 + 1000: bytes([0xee] * 8 + [0xab] * 2 + [0xee] * 14), 0x7400: bytes([0xee] * 2048)}
    lines, refills = nvtx.check(read, lambda a, n: device.get(a), addr)
    assert lines == ['REDZONE VIOLATION nvtx region "weights" 0x7000+1000 (heap 0x7000+4096) : bytes [8..=9] past '
                     'the end were written (2 of 24 slack bytes changed), first bad value 0xab']
    assert refills == [(0x7000 + 1000, bytes([0xee]) * 24)]
    device[0x7400] = bytes([0xee] * 16 + [0xcd] * 16 + [0xee] * 2016)
    lines, _ = nvtx.check(read, lambda a, n: device.get(a), addr)
    assert lines[1] == ('REDZONE VIOLATION nvtx region "grads" 0x7400+2048, unregistered (heap 0x7000+4096) : bytes '
                        '[16..=31] were written after it was unregistered (16 of 2048 bytes checked changed), first '
                        'bad value 0xcd')


def test_held_regions_are_quarantined_in_rows_and_json():
    read, addr = memory([(0x7000, 4096, [(0x7000, 1000, 1, "weights", 24), (0x7400, 2048, 0, "grads"),
                                         (0x7c00, 100, 0, "")])])
    found = nvtx.regions(read, addr)
    lines = nvtx.rows(found, held={0x7400})
    assert "quarantined   0x7000+4096  grads" in lines[3]
    assert "unregistered  0x7000+4096" in lines[4]  # not held (the quarantine let it go, or never took it)
    doc = nvtx.to_json(found, {0x7400})
    assert [d["state"] for d in doc] == ["registered", "quarantined", "unregistered"]
    assert doc[1] == {"start": "0x7400", "bytes": 2048, "state": "quarantined", "heap": "0x7000", "heap_bytes": 4096,
                      "name": "grads"}
    assert nvtx.names(found) == {0x7000: "weights", 0x7400: "grads"}
    assert nvtx.checked(read, addr) == 1  # registered with slack filled: weights only


def test_describe_held_as_the_library_does():
    read, addr = memory([(0x7000, 4096, [(0x7400, 2048, 0, "grads"), (0x7c00, 100, 0, "")])])
    found = nvtx.regions(read, addr)
    assert nvtx.describe_held(found, 0x7400, 2048) == 'nvtx region "grads" 0x7400+2048, unregistered (heap 0x7000+4096)'
    assert nvtx.describe_held(found, 0x7c00, 100) == "nvtx region 0x7c00+100, unregistered (heap 0x7000+4096)"
    assert nvtx.describe_held([], 0x9000, 8) == "nvtx region 0x9000+8, unregistered"


def test_scan_summary_counts_held_blocks_and_regions():
    out = ("REDZONE VIOLATION alloc#3 user_bytes=8 : bytes [8..=8] past the end were written (1 of 64 pad bytes "
           "changed), first bad value 0x01\n"
           "REDZONE VIOLATION alloc#0 user_bytes=256 : bytes [16..=31] were written after free (16 of 320 freed "
           "bytes changed), first bad value 0x2a\n"
           'REDZONE VIOLATION nvtx region "grads" 0x7400+2048, unregistered (heap 0x7000+4096) : bytes [1..=1] '
           "were written after it was unregistered (1 of 2048 bytes held changed), first bad value 0x07\n"
           "redzone scan: 4 zones checked, 1 violated\n")
    got = nvtx.scan_summary(out, 2, 3)
    assert got.endswith("redzone scan: 4 zones checked, 1 violated; 2 freed block(s) held and 3 nvtx region(s) "
                        "checked, 2 written\n")
    assert got.count("redzone scan:") == 1
    assert nvtx.scan_summary("no summary here\n", 1, 1) == "no summary here\n"
    # nothing held, no region: the library's line as it is
    assert nvtx.scan_summary("redzone scan: 4 zones checked, 0 violated\n", 0, 0) == \
        "redzone scan: 4 zones checked, 0 violated\n"
