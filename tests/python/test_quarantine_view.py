"""The quarantine decoder of `redzone list` and the memory method's scan (gdb/redzone_gdb/quarantine.py): held
freed blocks and held NVTX regions (RZ_QENTRY_REGION), on entries as quarantine.read returns them."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "gdb"))
from redzone_gdb import quarantine  # noqa: E402


def entry(ptr, nbytes, flags=0, index=0, user_bytes=None, byte=0xdd):
    return {"base": ptr, "bytes": nbytes, "ptr": ptr, "user_bytes": nbytes if user_bytes is None else user_bytes,
            "index": index, "ctx": 0, "launch_seq": 0, "alloc_stack": 0, "free_stack": 0, "fill": 0, "byte": byte,
            "flags": flags, "reserved": 0}


HEAD = {"bytes": 2368, "peak": 4096, "bound": 1 << 26}
BLOCK = entry(0x5000, 320, index=4, user_bytes=256)
REGION = entry(0x7400, 2048, flags=quarantine.REGION, index=0)
FILLING_REGION = entry(0x8000, 64, flags=quarantine.REGION | quarantine.FILLING)


def test_rows_name_regions_and_blocks():
    lines = quarantine.rows([BLOCK, REGION], names={0x7400: "grads"})
    assert lines[0] == "  freed alloc#4 0x5000 user_bytes=256 held=320 fill=0xdd held"
    assert lines[1] == '  unregistered nvtx region "grads" 0x7400 bytes=2048 held=2048 fill=0xdd held (pool alloc#0)'
    assert quarantine.rows([REGION])[0].startswith("  unregistered nvtx region 0x7400 ")


def test_summary_says_regions_only_when_held():
    assert quarantine.summary(HEAD, [BLOCK]) == "1 freed block(s) held in the quarantine, 2368 bytes"
    assert quarantine.summary(HEAD, [BLOCK, REGION]) == ("1 freed block(s) and 1 unregistered nvtx region(s) held in "
                                                         "the quarantine, 2368 bytes")


def test_json_and_counts():
    doc = quarantine.to_json(HEAD, [BLOCK, REGION], {0x7400: "grads"})
    assert doc["bytes"] == 2368 and doc["peak_bytes"] == 4096 and doc["bound"] == 1 << 26
    assert [h["kind"] for h in doc["held"]] == ["block", "nvtx-region"] and doc["held"][1]["name"] == "grads"
    assert "name" not in doc["held"][0] and doc["held"][0]["held_bytes"] == 320
    assert quarantine.checked([BLOCK, REGION, FILLING_REGION]) == (1, 1)  # a queued fill is not checked yet
    assert quarantine.region_starts([BLOCK, REGION, FILLING_REGION]) == {0x7400, 0x8000}


def test_judge_a_region_as_the_library_reports_it():
    data = bytearray([0xdd]) * 2048
    data[100] = 0x77
    rec, line = quarantine.judge(REGION, bytes(data), 'nvtx region "grads" 0x7400+2048, unregistered (heap 0x7000+4096)')
    assert line == ('REDZONE VIOLATION nvtx region "grads" 0x7400+2048, unregistered (heap 0x7000+4096) : bytes '
                    "[100..=100] were written after it was unregistered (1 of 2048 bytes held changed), first bad "
                    "value 0x77")
    assert len(rec) == 64 and rec[-5] == 1  # after_free set in the record, as the library's
    assert quarantine.judge(REGION, bytes([0xdd]) * 2048) is None
