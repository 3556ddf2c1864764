import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# Options and values complete; `help redzone scan` says which method will scan in this debugger.


def complete(line):
    return sorted(l for l in ex(f"complete {line}").splitlines() if l.strip())


prepare()
got = complete("redzone list --")
want = sorted(f"redzone list {o}" for o in ("--violated", "--from", "--to", "--limit", "--stacks", "--json"))
check(got == want, f"complete redzone list --: {got}")
check(complete("redzone list --v") == ["redzone list --violated"], complete("redzone list --v"))
check(complete("redzone list --json --st") == ["redzone list --json --stacks"], "after another option")
check("redzone list --json --json" not in complete("redzone list --json --"), "an option is not offered twice")
# (gdb.execute drops a command's trailing blank: "complete redzone break " completes the word "break".)
check(complete("redzone list --from 1") == [], "no option where a number is wanted")
check("redzone list --from 1 --to" in complete("redzone list --from 1 --") and
      "redzone list --from 1 --from" not in complete("redzone list --from 1 --"), "after a value, the others")
check(complete("redzone break o") == ["redzone break off", "redzone break on"], complete("redzone break o"))
check(complete("redzone break of") == ["redzone break off"], "on/off from a prefix")
check(complete("redzone break on o") == [], "break takes one value")
check(complete("redzone scan --") == ["redzone scan --json"], complete("redzone scan --"))
check(complete("redzone violations --j") == ["redzone violations --json"], "violations")
check(complete("redzone stats -") == ["redzone stats --json"], "stats")
check("redzone list" in complete("redzone l"), "subcommands still complete")
text = ex("help redzone scan")
check("Usage: redzone scan [--json]" in text and "`redzone status` says which method serves the next scan" in text,
      text)
if DEBUGGER == "cuda-gdb":
    check("In cuda-gdb the scan is made by the debugger itself (method memory" in text, text)
else:
    check("In gdb, `set redzone method auto` (the default) makes it by the debugger's own memory reads" in text, text)
check("through the library's agent thread (no code runs on your threads)" not in text.splitlines()[0], text)
expect_error("set redzone autoscan 99", "breakpoint 99 does not exist (breakpoints now: none;")
ex("break stop_here")
ex("set redzone autoscan 1")
check("redzone autoscan is 1." in ex("show redzone autoscan"), "an existing breakpoint is taken")
done()
