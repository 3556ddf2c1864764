import json, os, re, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# Issue 32 item 6: the quarantine's freed blocks in the debugger. tests/programs/rzfree.c `gdb` (SCAN=sync).
prepare(prog=os.environ["RZ_RZFREE"])
ex("set environment METRALE_REDZONE_SCAN sync,exit")
ex("break rzfree_stop")
go("run gdb")
core = None
if DEBUGGER != "cuda-gdb":  # cuda-gdb 11.8's gcore aborts here (case_core.py); it reads gdb's cores there
    core = os.path.join(tempfile.mkdtemp(), "rzfree.core")
    ex(f"gcore {core}")
out = ex("redzone list")
check(re.search(r"  freed alloc#0 0x[0-9a-f]+ user_bytes=256 held=320 fill=0xdd held\n"
                r"1 freed block\(s\) held in the quarantine, 320 bytes", out) is not None, f"list: {out}")
doc = json.loads(ex("redzone list --json"))
held = doc["quarantine"]["held"]
check(len(held) == 1 and held[0]["kind"] == "block" and held[0]["index"] == 0 and held[0]["user_bytes"] == 256 and
      held[0]["held_bytes"] == 320 and held[0]["state"] == "held" and doc["quarantine"]["bytes"] == 320 and
      doc["nvtx_regions"] == [] and [z["index"] for z in doc["zones"]] == [1], f"list --json: {doc}")
out = ex("redzone scan")
check("REDZONE VIOLATION alloc#0 user_bytes=256 : bytes [16..=31] were written after free (16 of 320 freed bytes "
      "changed), first bad value 0x2a" in out, f"scan judges the held block: {out}")
check(re.search(r"redzone scan: 1 zones checked, 0 violated; 1 freed block\(s\) held and 0 nvtx region\(s\) "
                r"checked, 1 written", out) is not None, f"the summary counts the held block: {out}")
check("after free" not in ex("redzone scan"), "re-filled: a second scan finds nothing")
check("redzone break: on" in ex("redzone break on"), "break on")
text = go("continue")
check("stopped where the library's scan after a synchronisation found this violation" in text,
      f"stops at the write after free the sync scan finds: {text}")
ex("frame 0")
check(int(gdb.parse_and_eval("violation->after_free")) == 1 and int(gdb.parse_and_eval("violation->index")) == 0,
      "the record says after free")
text = go("continue")
check("stopped at a bad free (a double free)" in text, f"stops at the double free: {text}")
ex("frame 0")
check(int(gdb.parse_and_eval("refusal->how")) == 4 and int(gdb.parse_and_eval("refusal->index")) == 0 and
      int(gdb.parse_and_eval("refusal->result")) == 1, "the record: a double free of alloc#0, the driver's answer")
ex("redzone break off")
text = go("continue")
check(gdb.selected_frame().name() == "rzfree_stop" and int(gdb.parse_and_eval("where")) == 2,
      f"off: runs on to the last stop: {text}")
ex("kill")
if core:
    # The core file made at the first stop reads the same: the held block listed, judged read-only.
    ex(f"core-file {core}")
    out = ex("redzone list")
    check("freed alloc#0" in out and "1 freed block(s) held in the quarantine, 320 bytes" in out, f"core list: {out}")
    check(json.loads(ex("redzone list --json"))["quarantine"]["held"][0]["held_bytes"] == 320, "core: list --json")
    out = ex("redzone scan")
    check("bytes [16..=31] were written after free" in out and "1 freed block(s) held and 0 nvtx region(s) checked, "
          "1 written" in out, f"core scan: {out}")
    check("bytes [16..=31] were written after free" in ex("redzone scan"), "read-only: nothing re-filled")
    os.unlink(core)
done()
