"""`redzone break on` stops at a copy the library refuses for running past the end of a buffer (the
__redzone_refused hook), with the program's frame of the copy call selected; `continue` gives the program
the driver's CUDA_ERROR_INVALID_VALUE and it runs to its end; `redzone break off` runs through. The plugin
prints the library's line itself only when the library logs to a file (otherwise it is on stderr already).
The same hook stops at a free of a pointer into a front band (METRALE_REDZONE_FRONT)."""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

TMP = os.environ.get("TMPDIR", "/tmp")
LOG = os.path.join(TMP, f"rz-gdb-break-copy-{os.getpid()}.log")
OUT = os.path.join(TMP, f"rz-gdb-break-copy-{os.getpid()}.out")
LINE = ("redzone: copy past the end of alloc#1: bytes [0..=7] read by cuMemcpyDtoH (user_bytes=100); nothing "
        "copied, CUDA_ERROR_INVALID_VALUE returned as without redzone")
SAW = "gdbprog: read_back returned CUDA_ERROR_INVALID_VALUE"


def read(path):
    with open(path) as f:
        return f.read()


def fresh(*paths):
    for p in paths:
        if os.path.exists(p):
            os.unlink(p)


fresh(LOG, OUT)
prepare()
ex(f"set environment METRALE_REDZONE_LOG={LOG}")
check("redzone break: on" in ex("redzone break on"), "break on")
text = go(f"run copypast > {OUT}")
check(gdb.selected_inferior().pid != 0, f"stopped at the refused copy: {text}")
check(count(text, LINE) == 1, f"the plugin printed the library's line (the library logs to a file): {text}")
check("stopped at a refused copy" in text and "is selected" in text, text)
check(gdb.selected_frame().name() == "read_back", f"the program's frame is selected: {text}")
src = os.path.join(os.environ["RZ_SOURCE_DIR"], "tests", "programs", "gdbprog.c")
sal = gdb.selected_frame().find_sal()
check("cuMemcpyDtoH_v2(host, q, 108)" in open(src).read().splitlines()[sal.line - 1]
      and f"gdbprog.c:{sal.line}" in text, f"on the line of the copy: {text}")
bt = ex("bt")
check("__redzone_refused" in bt and "cuMemcpyDtoH_v2" in bt and " read_back " in bt and " main " in bt,
      f"inside the copy call, before it returned: {bt}")
check(int(gdb.parse_and_eval("$redzone_violations()")) == 1, "counted before the hook")
check(count(read(LOG), LINE) == 1, "the library's own line, written before it stopped here")
# The hook is called with no lock of the library held: a scan works here (no band was written).
check("redzone scan: 2 zones checked, 0 violated" in ex("redzone scan"), "a scan at the stop")
ex("frame 0")
rec = lambda field: int(gdb.parse_and_eval(f"refusal->{field}"))
check((rec("index"), rec("user_bytes"), rec("bytes"), rec("first"), rec("last"), rec("how"), rec("result")) ==
      (1, 100, 108, 0, 7, 0, 1), "the record: alloc#1, 108 bytes asked, [0..=7] read, CUDA_ERROR_INVALID_VALUE")
check(rec("addr") == rec("ptr"), "the range starts at the buffer's pointer")
check('"cuMemcpyDtoH"' in ex("print refusal->entry"), "the entry point's name")
text = go("continue")
check(gdb.selected_inferior().pid == 0 and int(gdb.parse_and_eval("$_exitcode")) == 0,
      f"ran to its end, having seen CUDA_ERROR_INVALID_VALUE (exit code 0): {text}")
check(SAW in read(OUT), read(OUT))
check(count(read(LOG), LINE) == 1, "reported once")

# Off: the same copy is refused and reported, and the program runs through.
ex("redzone break off")
fresh(LOG, OUT)
text = go(f"run copypast > {OUT}")
check(gdb.selected_inferior().pid == 0 and int(gdb.parse_and_eval("$_exitcode")) == 0, f"no stop: {text}")
check(SAW in read(OUT) and count(read(LOG), LINE) == 1 and "refused" not in text, text)

# On, the library logging to stderr: it prints the line itself; the plugin only says where it stopped.
# Autoscan runs at this stop (unlike at a violation's, where the library holds its registry).
ex("unset environment METRALE_REDZONE_LOG")
ex("redzone break on")
ex("set redzone autoscan on")
text = go(f"run copypast > {OUT}")
check(gdb.selected_frame().name() == "read_back" and "stopped at a refused copy" in text, text)
check(LINE not in text, f"not printed twice: {text}")
check("redzone scan: 2 zones checked, 0 violated" in text and "autoscan: not at" not in text, text)
ex("set redzone autoscan off")
# The hook's breakpoint stays while the program runs to its end (it makes no other refused call, so it does not
# stop again; scenario 2 showed `redzone break off`): deleting the breakpoint this thread stands at and then
# continuing into a quick exit trips a gdb race (gdb 13 and 16: the execution command fails with "Couldn't get
# registers: No such process." when the program's exit_group ends its other thread, the agent, meanwhile).
text = go("continue")
check(gdb.selected_inferior().pid == 0 and int(gdb.parse_and_eval("$_exitcode")) == 0 and SAW in read(OUT),
      f"ran to its end without another stop: {text} {read(OUT)}")
ex("redzone break off")

# A free 16 bytes before a buffer's start, inside its front band: refused the same way, stopped at.
FREE_LINE = ("redzone: bad free of 0x{:x}: 16 bytes before the start of alloc#1 (user_bytes=100), in its front band; "
             "nothing freed, CUDA_ERROR_INVALID_VALUE returned as without redzone")
fresh(LOG, OUT)
ex(f"set environment METRALE_REDZONE_LOG={LOG}")
ex("set environment METRALE_REDZONE_FRONT=256")
ex("redzone break on")
text = go(f"run badfree > {OUT}")
check(gdb.selected_inferior().pid != 0 and "stopped at a refused free" in text, f"stopped at the free: {text}")
check(gdb.selected_frame().name() == "free_early", f"the program's frame is selected: {text}")
sal = gdb.selected_frame().find_sal()
check("cuMemFree_v2(q - 16)" in open(src).read().splitlines()[sal.line - 1], f"on the line of the free: {text}")
ex("frame 0")
check((rec("index"), rec("user_bytes"), rec("bytes"), rec("first"), rec("last"), rec("how"), rec("result")) ==
      (1, 100, 0, -16, -16, 3, 1), "the record: alloc#1, 16 bytes before its start, RZ_REFUSED_FREE")
check(rec("ptr") - rec("addr") == 16 and '"cuMemFree"' in ex("print refusal->entry"), "the pointer and the entry")
line = FREE_LINE.format(rec("addr"))
check(count(text, line) == 1 and count(read(LOG), line) == 1, f"the library's line, printed by the plugin: {text}")
# `next` from the refused free steps in the program: the free returns, and free_early's next line has its
# answer (gdb alone would step the innermost frame, the library's hook, into the library).
go("next")
f = gdb.newest_frame()
check(f.name() == "free_early" and "return r;" in open(src).read().splitlines()[f.find_sal().line - 1],
      f"`next` lands on free_early's next line: {f.name()}")
check(int(gdb.parse_and_eval("r")) == 1, "the program got CUDA_ERROR_INVALID_VALUE")
# Not straight on into the program's quick exit from a thread at no breakpoint (the gdb race above): a
# breakpoint that stays on main's next line first.
name, printf_line = source_line('printf("gdbprog: %s returned %s\\n"', under="tests/programs")
ex(f"break {name}:{printf_line}")
go("continue")
check(gdb.selected_frame().name() == "main", "at main's line after the free")
text = go("continue")
check(gdb.selected_inferior().pid == 0 and int(gdb.parse_and_eval("$_exitcode")) == 0,
      f"the free returned CUDA_ERROR_INVALID_VALUE, the program freed its buffers and ended: {text}")
check("gdbprog: free_early returned CUDA_ERROR_INVALID_VALUE" in read(OUT), read(OUT))
ex(f"clear {name}:{printf_line}")
ex("redzone break off")
ex("unset environment METRALE_REDZONE_FRONT")
ex("unset environment METRALE_REDZONE_LOG")
fresh(LOG, OUT)
done()
