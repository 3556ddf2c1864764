"""The band reader/writer's choice of memory path and its spans (gdb/redzone_gdb/bandio.py), without a GPU:
fake paths stand for plain memory and cuda-gdb's @global space."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "gdb"))
from redzone_gdb import bandio  # noqa: E402


class Memory:
    """A sparse fake address space: what plain reads see. `mapped` ranges read; others fail (None)."""

    def __init__(self, mapped):
        self.mapped = mapped  # [(start, bytes)]
        self.calls = []
        self.writes = []

    def _ok(self, addr, n):
        return any(s <= addr and addr + n <= s + len(b) for s, b in self.mapped)

    def read(self, addr, n):
        self.calls.append((addr, n))
        for s, b in self.mapped:
            if s <= addr and addr + n <= s + len(b):
                return b[addr - s:addr - s + n]
        return None

    def write(self, addr, data):
        if not self._ok(addr, len(data)):
            return False
        self.writes.append((addr, data))
        return True


def zeros_global():
    """cuda-gdb's @global space without a GPU: reads of host memory 'succeed' with zeros (measured)."""
    calls = []

    def read(addr, n):
        calls.append((addr, n))
        return bytes(n)

    def write(addr, data):
        calls.append((addr, len(data)))
        return True

    return read, write, calls


def test_plain_memory_first_and_global_never_asked_when_it_works():
    mem = Memory([(0x1000, b"\xee" * 64)])
    gread, gwrite, gcalls = zeros_global()
    io = bandio.BandIO([("plain", mem.read, mem.write), ("global", gread, gwrite)])
    assert io.read(0x1000, 64) == b"\xee" * 64
    assert io.write(0x1000, b"\x00" * 64)
    assert gcalls == [] and io.used == {"plain": 2}


def test_global_space_when_plain_memory_fails():
    # A real GPU with host focus: the device address is not in the host's memory.
    mem = Memory([])
    device = Memory([(0x7000_0000_0000, b"\xab" * 64)])
    io = bandio.BandIO([("plain", mem.read, mem.write), ("global", device.read, device.write)])
    assert io.read(0x7000_0000_0000, 64) == b"\xab" * 64
    assert io.write(0x7000_0000_0000, b"\xee" * 64)
    assert io.used == {"global": 2}


def test_unreadable_everywhere_is_none():
    mem = Memory([])
    io = bandio.BandIO([("plain", mem.read, mem.write)])
    assert io.read(0x10, 8) is None and not io.write(0x10, b"x") and io.used == {}


def test_adjacent_bands_are_read_in_one_span():
    # 900 buffers of 1000 bytes with 64-byte bands, back to back (under a span's 1 MiB): one read covers them.
    base, stride = 0x10000, 1064
    arena = bytes(range(256)) * (900 * stride // 256 + 1)
    mem = Memory([(base, arena)])
    io = bandio.BandIO([("plain", mem.read, mem.write)])
    bands = [(base + i * stride + 1000, 64) for i in range(900)]
    got = io.read_bands(bands)
    assert len(mem.calls) == 1
    assert all(got[i] == arena[i * stride + 1000:i * stride + 1064] for i in range(900))


def test_far_apart_bands_are_separate_reads_and_order_is_kept():
    mem = Memory([(0x100000, b"\x01" * 64), (0x900000, b"\x02" * 64)])
    io = bandio.BandIO([("plain", mem.read, mem.write)])
    got = io.read_bands([(0x900000, 64), (0x100000, 64)])
    assert got == [b"\x02" * 64, b"\x01" * 64] and len(mem.calls) == 2


def test_a_span_over_a_hole_falls_back_to_single_bands():
    # Two mapped bands with an unmapped page between them (within the gap a span may cover).
    mem = Memory([(0x1000, b"\x03" * 64), (0x3000, b"\x04" * 64)])
    io = bandio.BandIO([("plain", mem.read, mem.write)])
    got = io.read_bands([(0x1000, 64), (0x3000, 64), (0x5000, 64)])
    assert got == [b"\x03" * 64, b"\x04" * 64, None]
