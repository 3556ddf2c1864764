import json, os, re, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# Pool sub-allocations through NVTX in the debugger (issue 32 items 4 and 6): programs/rznvtx.c with
# libredzone.so as its NVTX injection library, stopped after its bad writes. `redzone list` shows the
# regions (registered, or unregistered and held in the quarantine: `quarantined`, named or not) after the
# zones, and the quarantine's entry for the unregistered one; `list --json` the same; also from a core file.
# `redzone scan` checks their slack and the held region, through the agent, re-fills them, and its summary
# counts them. `redzone break on` stops at a region's finding. The program runs with SCAN=sync: the scan at
# its synchronisation sees the held region's fill done (a debugger reading memory cannot ask the event).
prepare(prog=os.environ["RZ_RZNVTX"])
# NVTX_INJECTION64_PATH is set by the plugin's exec-wrapper (rz-exec --nvtx), as `redzone run` sets it.
ex("unset environment NVTX_INJECTION64_PATH")
ex("set environment METRALE_REDZONE_SCAN sync,exit")
ex("set environment METRALE_REDZONE_FREE_FILL 92")
ex("break stop_here")
sync = gdb.Breakpoint("cuCtxSynchronize")
go("run overrun")
# The first synchronisation: the regions are registered, written (weights past its end), not yet checked.
sync.delete()
ex("redzone break on")
text = go("continue")
check("stopped where the library's scan after a synchronisation found this violation" in text,
      f"break on stops at the region overrun the sync scan finds: {text}")
ex("frame function __redzone_violation")
check(int(gdb.parse_and_eval("violation->user_bytes")) == 1000 and int(gdb.parse_and_eval("violation->first")) == 0
      and int(gdb.parse_and_eval("violation->last")) == 7, "the record: the region's size and the bytes written")
ex("redzone break off")
go("continue")
check(gdb.selected_frame().name() == "stop_here", "stopped at stop_here")
with open(f"/proc/{gdb.selected_inferior().pid}/environ", "rb") as f:
    environ = f.read().split(b"\0")
check(b"NVTX_INJECTION64_PATH=" + os.environ["RZ_LIBREDZONE"].encode() in environ or
      any(e.startswith(b"NVTX_INJECTION64_PATH=") and e.endswith(b"libredzone.so") for e in environ),
      f"the wrapper named the library: {[e for e in environ if e.startswith(b'NVTX')]}")
out = ex("redzone list")
check(re.search(r'1 zone\(s\)\n  unregistered nvtx region "grads" 0x[0-9a-f]+ bytes=2048 held=2048 fill=0x5c '
                r'(held|written) \(pool alloc#0\)\n0 freed block\(s\) and 1 unregistered nvtx region\(s\) held in '
                r'the quarantine, 2048 bytes\nnvtx regions \(pool sub-allocations\):\n', out) is not None and
      "4 nvtx region(s)" in out, out)
check(count(out, "  registered  ") == 3 and count(out, "  quarantined  ") == 1, out)
for row in ("        1000  registered    0x", "  weights\n", "        2048  quarantined   0x", "  grads\n",
            "  activations\n"):
    check(row in out, f"no {row!r} in {out}")
check("nvtx region" not in ex("redzone list --violated"), "no regions with --violated")
doc = json.loads(ex("redzone list --json"))
held = doc["quarantine"]["held"]
check(len(doc["zones"]) == 1 and len(held) == 1 and held[0]["kind"] == "nvtx-region" and held[0]["name"] == "grads"
      and held[0]["held_bytes"] == 2048 and held[0]["fill"] == 0x5c and doc["quarantine"]["bytes"] == 2048, doc)
check([(r["name"], r["state"], r["bytes"]) for r in doc["nvtx_regions"]] ==
      [("weights", "registered", 1000), ("grads", "quarantined", 2048), ("activations", "registered", 500),
       ("", "registered", 100)], doc)
out = ex("redzone scan")
check("VIOLATION" not in out and re.search(r"redzone scan: 1 zones checked, 0 violated; 0 freed block\(s\) held and "
                                           r"4 nvtx region\(s\) checked, 0 written", out) is not None,
      f"the sync scan reported both already (re-filled); the summary counts the regions: {out}")
gdb.execute("frame function main", to_string=True)
ex("set var *(unsigned char *)(grads + 100) = 0x77")  # into the held region: written after it was unregistered
out = ex("redzone scan")
check('REDZONE VIOLATION nvtx region "grads" 0x' in out and ", unregistered (heap 0x" in out and
      ": bytes [100..=100] were written after it was unregistered (1 of 2048 bytes held changed), first bad value "
      "0x77" in out and "4 nvtx region(s) checked, 1 written" in out, out)
check("VIOLATION" not in ex("redzone scan"), "re-filled: the second scan is clean")
check("violations: 3\n" in ex("redzone stats"), "counted")
# The same through the library's own scan (the agent, where the debugger can serve it): a byte written into
# the slack of "activations" (500 bytes at pool + 3072) from the debugger is reported by the library.
gdb.execute("frame function main", to_string=True)
ex("set var *(unsigned char *)(act + 500 + 3) = 0x5c")
how = use_agent()
out = ex("redzone scan")
check('REDZONE VIOLATION nvtx region "activations" 0x' in out and ": bytes [3..=3] past the end were written "
      "(1 of 64 slack bytes changed), first bad value 0x5c" in out, f"{how}: {out}")
check("violations: 4\n" in ex("redzone stats"), "counted")
ex("set redzone method auto")
if DEBUGGER == "cuda-gdb":
    # cuda-gdb 11.8's gcore aborts on CPUs whose xstate it does not know (as case_core says)
    print("case_nvtx: no core file under cuda-gdb (its gcore aborts here); the gdb runs read one")
else:
    d = tempfile.mkdtemp()
    core = f"{d}/rznvtx.core"
    ex(f"generate-core-file {core}")
    ex("kill")
    ex(f"core-file {core}")
    out = ex("redzone list")
    check("4 nvtx region(s)" in out and "  grads\n" in out and count(out, "  quarantined  ") == 1 and
          "1 unregistered nvtx region(s) held in the quarantine, 2048 bytes" in out, out)
    check(json.loads(ex("redzone list --json"))["quarantine"]["held"][0]["name"] == "grads", "core: list --json")
    os.unlink(core)
done()
