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
# Out-of-range literals and ill-formed input: the same answer in every debugger (GDB 10 wraps a literal of
# 2^64 or more, gdb 13 and 16 refuse it; the plugin refuses it first).
for cmd in ("redzone poison 0 18446744073709551616", "redzone poison 0x10000000000000000 1",
            "redzone poison 0 99999999999999999999999999", "redzone poison 18446744073709551615 18446744073709551615",
            "redzone poison 1 2 3", "redzone poison $lo + 1 2", 'redzone poison "0 + 1" "1 + 1"', "redzone unpoison",
            "redzone poison 1.5 2", "redzone poison -1 2", "redzone list --to 18446744073709551616",
            "redzone list --from -1", "redzone list --limit 0x10", "redzone list --from", "redzone scan --json extra",
            "redzone violations --bogus", "set redzone bytes 18446744073709551616", "set redzone fill 0x100",
            "set redzone fill -1", "set redzone min-idx 18446744073709551616", "set redzone timeout 1e999",
            "set redzone timeout nan", "set redzone autoscan 99", "set redzone autoscan 1,,", "set redzone stacks x",
            "set redzone scan free,,exit", "redzone break on off", "show redzone bytes", "show redzone autoscan"):
    run(cmd)
with open(os.path.join(out_dir, f"{tag}.txt"), "w") as f:
    f.write("".join(lines))
check(any("REDZONE VIOLATION alloc#1" in l for l in lines), "the session found the overrun")
done()
