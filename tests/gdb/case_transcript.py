import os, re, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# One session of every command, its output written to RZ_TRANSCRIPT_DIR/<tag>.txt; the ctest case
# gdb_transcripts_identical then compares the transcripts of gdb 13, cuda-gdb and gdb 16 byte for byte.
# Only the debugger's own lines are left out: the `debugger:`/`method:`/`agent:` lines of `redzone status`
# (they name the debugger, its method and a thread id).
out_dir = os.environ["RZ_TRANSCRIPT_DIR"]
tag = os.environ["RZ_DEBUGGER_TAG"]
lines = []


def run(cmd):
    try:
        text = ex(cmd)
    except gdb.error as e:
        text = f"ERROR: {e}\n"
    if cmd == "redzone status":
        text = "".join(l for l in text.splitlines(True) if not re.match(r"(debugger|method|agent): ", l))
    lines.append(f"(gdb) {cmd}\n{text}")


for cmd in ("redzone list", "redzone stats", "redzone status", "redzone scan", "redzone violations",
            "set redzone fill 300", "set redzone bytes abc", "show redzone bytes", "set redzone autoscan 1,x"):
    run(cmd)  # before the program runs: clear errors, the same in every debugger
start(settings=("stacks 2",))
for cmd in ("redzone list", "redzone list --violated", "redzone list --from 1 --to 2 --json", "redzone stats",
            "redzone counters --json", "redzone status", "redzone scan", "redzone list --violated",
            "redzone violations", "redzone violations --json", "redzone scan --json", "redzone poison 1 2",
            "redzone list", "redzone scan", "redzone unpoison", "redzone list", "redzone poison 2 1",
            "redzone poison x", "redzone list --limit -1", "redzone bogus", "print $redzone_violations()",
            "show redzone autoscan", "show redzone timeout", "show redzone method", "show redzone stacks",
            "redzone break on", "redzone break off"):
    run(cmd)
with open(os.path.join(out_dir, f"{tag}.txt"), "w") as f:
    f.write("".join(lines))
check(any("REDZONE VIOLATION alloc#1" in l for l in lines), "the session found the overrun")
done()
