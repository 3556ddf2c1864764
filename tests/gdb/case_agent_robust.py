import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# The agent method never breaks the user's session: request numbers never repeat, an abandoned request is
# served before the next one (or the next one is refused, never dropped), the user's SIGINT handling and
# hooks are restored exactly and never run for the agent's stops, and user breakpoints on the agent's path
# are stepped over. cuda-gdb has no agent method (it cannot resume one thread alone): there the same
# situations go through the memory method, which resumes nothing.
src_file, line = source_line("*free_bytes = emu_cfg.mem_bytes - used[device];")
ex("set pagination off")
ex("set confirm off")
ex(f"source {PLUGIN}")
METHOD = use_agent()
ex("set redzone emulated-device on")
ex("set breakpoint pending on")
ex(f"file {PROG}")

# 1. The user's hooks: a hook-stop with a python block and a hook-continue that counts.
gdb.execute("define hook-stop\npython\nif True:\n    gdb.execute('set $hs = $hs + 1')\nend\nend")
gdb.execute("define hook-continue\nset $hc = $hc + 1\nend")
ex("set $hs = 0")
ex("set $hc = 0")
hook_before = ex("show user hook-stop")
ex("break stop_here")
go("run overrun")
hs, hc = int(gdb.parse_and_eval("$hs")), int(gdb.parse_and_eval("$hc"))
out = ex("redzone scan")
check("REDZONE VIOLATION alloc#1" in out, out)
ex("redzone poison 0 1")
ex("redzone unpoison")
check(ex("show user hook-stop") == hook_before, f"hook-stop restored line for line:\n{ex('show user hook-stop')}")
check((int(gdb.parse_and_eval("$hs")), int(gdb.parse_and_eval("$hc"))) == (hs, hc),
      "no hook ran for the requests")
go("continue")
check(int(gdb.parse_and_eval("$hs")) == hs + 1, "the restored python hook-stop still runs at the next stop")
ex("kill")
gdb.execute("define hook-stop\nend")
gdb.execute("define hook-continue\nend")
ex("delete")

# 2. A user breakpoint on the agent's way (the library's scan synchronises its stream).
ex("break stop_here")
go("run overrun")
ex("break cuStreamSynchronize")
out = ex("redzone scan")
check("REDZONE VIOLATION alloc#1" in out and "3 zones checked, 1 violated" in out, f"stepped over: {out}")
check(gdb.selected_frame().name() == "stop_here", "the user's selection is back")
ex("kill")
ex("delete")

# 3. A thread stopped inside the driver, with the user's own SIGINT handling: restored exactly; a request
#    after an abandoned one is served after it, or refused, never dropped or answered by the old one.
for handling in ("stop print pass", "nostop noprint nopass"):
    ex(f"handle SIGINT {handling}")
    before = ex("info signals SIGINT")
    ex("break stop_here")
    ex(f"break {src_file}:{line}")
    go("run meminfo")
    ex("set redzone timeout 1")
    if METHOD == "agent":
        expect_error("redzone scan", "did not answer within 1 s", "restored")
        text = expect_error("redzone poison 0 3", "earlier request", "was not sent")
        check("poison window" not in ex("redzone status"), "the refused poison wrote nothing")
    else:
        check("1 zones checked, 1 violated" in ex("redzone scan"), "memory: answered at once")
    check(ex("info signals SIGINT") == before, f"SIGINT handling restored: {ex('info signals SIGINT')}")
    ex("delete 2")
    go("continue")  # stop_here(5): the abandoned scan has completed by now, or completes first below
    check(gdb.selected_frame().name() == "stop_here", "the program went on, not killed by the SIGINT")
    if METHOD == "agent":
        # Which of the two happened is read, recorded and then required: finished (answered caught up with
        # the abandoned request) or still pending, to be served before the poison below.
        agent = gdb.parse_and_eval("__redzone_agent")
        abandoned, answered = int(agent["abandoned"]), int(agent["answered"])
        check(abandoned != 0, "the timed-out scan was marked abandoned")
        branch = "finished before this stop" if answered == abandoned else "still pending at this stop"
        print(f"case_agent_robust: SIGINT {handling}: the abandoned scan {branch}")
    ex("set redzone timeout 5")
    out = ex("redzone poison 0 3")
    check("redzone poison [0, 3): 1 zone(s) now hold 0xEE" in out, out)
    if METHOD == "agent":
        agent = gdb.parse_and_eval("__redzone_agent")
        check(int(agent["answered"]) > abandoned, f"the poison was served after the abandoned scan ({branch})")
    check("poison window: [0, 3)" in ex("redzone status"), "the window is set")
    check("violations: 1\n" in ex("redzone stats"), "the overrun found once")
    go("continue")
    check(int(gdb.parse_and_eval("$_exitcode")) == 0, "exited normally")
    ex("delete")
ex("handle SIGINT stop print nopass")

# 4. A `catch fork` stop (glibc holds its malloc locks in fork, libredzone its registry): every method
#    answers with a report or a sentence that names the cause, never a raw debugger error.
ex("catch fork")
ex("break stop_here")
go("run fork")
ex("set redzone timeout 1")
#    Which answer is decided, not raced: the agent method refuses any stop inside fork (the plugin sees the
#    fork frame); the memory method reads the registry and must report unless its lock is held, which is
#    read here first, independently.
for m in (["agent", "memory"] if METHOD == "agent" else ["memory"]):
    ex(f"set redzone method {m}")
    held = int(gdb.parse_and_eval("__redzone_state.lock")) != 0
    want = "refusal (inside fork)" if m == "agent" else ("refusal (registry held)" if held else "report")
    try:
        out = ex("redzone scan")
        got = "report"
        check("REDZONE VIOLATION alloc#0 user_bytes=100" in out, out)
    except gdb.error as e:
        got = "refusal (inside fork)" if m == "agent" else "refusal (registry held)"
        check(("fork" in str(e) and m == "agent") or (m == "memory" and "RZ_EBUSY: a thread is in the middle" in str(e)),
              f"{m}: the message names the cause: {e}")
        check("Cannot access memory" not in str(e).split("(")[0], f"{m}: a sentence first: {e}")
    print(f"case_agent_robust: catch fork, {m} method: {got}")
    check(got == want, f"{m} at a catch fork stop: wanted {want}, got {got}")
ex("kill")
ex("delete")
ex("set redzone timeout 2")
ex(f"set redzone method {METHOD}")

# 5. A second inferior, and a child followed after a fork: the request reaches that program's agent.
ex("set follow-fork-mode child")
ex("break stop_here")
go("run forkchild")
check(int(gdb.parse_and_eval("where")) == 8, "stopped in the child")
out = ex("redzone scan")
check("REDZONE VIOLATION alloc#0 user_bytes=100 pad=64 : bytes [0..=2]" in out, f"the child's scan: {out}")
ex("kill")
ex("set follow-fork-mode parent")
ex("add-inferior")
ex("inferior 2")
ex(f"file {PROG}")
go("run overrun")
out = ex("redzone scan")
check("REDZONE VIOLATION alloc#1" in out, f"second inferior: {out}")
ex("kill")
ex("inferior 1")

# 6. The program running in the background: refused before anything is written.
ex("delete")
ex("break tick")
go("run spin")
ex("delete")
gdb.execute("continue &")
expect_error("redzone scan", "running")
expect_error("redzone poison 0 1", "running")
gdb.execute("interrupt")
done()
