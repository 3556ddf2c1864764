import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# Before the program runs: no process.
ex(f"source {PLUGIN}")
ex(f"file {PROG}")
expect_error("redzone scan", "no process")
expect_error("redzone poison 0 1", "no process")
expect_error("redzone list", "no process yet")
start()
CASES = [
    ("redzone list --bogus", "unknown option", "Usage: redzone list"),
    ("redzone list extra", "unexpected argument", "Usage: redzone list"),
    ("redzone list --from", "needs a value", "Usage: redzone list"),
    ("redzone list --from x", "non-negative integer", "Usage: redzone list"),
    ("redzone list --limit -3", "non-negative integer", "Usage: redzone list"),
    ("redzone list --to 1.5", "non-negative integer", "Usage: redzone list"),
    ("redzone list --from 5 --to 2", "is after", "Usage: redzone list"),
    ("redzone scan now", "unexpected argument", "Usage: redzone scan"),
    ("redzone scan --all", "unknown option", "Usage: redzone scan"),
    ("redzone poison", "exactly two", "Usage: redzone poison LO HI"),
    ("redzone poison 1", "exactly two", "Usage: redzone poison LO HI"),
    ("redzone poison 1 2 3", "exactly two", "Usage: redzone poison LO HI"),
    ("redzone poison 5 2", "greater than", "Usage: redzone poison LO HI"),
    ("redzone poison -1 2", "negative", "Usage: redzone poison LO HI"),
    ("redzone poison abc 2", "not a number", "Usage: redzone poison LO HI"),
    ("redzone poison 1 $nosuchvar+", "not a number", "Usage: redzone poison LO HI"),
    ("redzone unpoison now", "takes no arguments", "Usage: redzone unpoison"),
    ("redzone stats --xml", "unknown option", "Usage: redzone stats"),
    ("redzone stats 1", "unexpected argument", "Usage: redzone stats"),
    ("redzone counters -j", "unknown option", "Usage: redzone stats"),
    ("redzone status verbose", "takes no arguments", "Usage: redzone status"),
    ("redzone break", "on or off", "Usage: redzone break on|off"),
    ("redzone break maybe", "on or off", "Usage: redzone break on|off"),
    ("redzone break on off", "on or off", "Usage: redzone break on|off"),
    ("set redzone autoscan sometimes", "breakpoint numbers", "Usage: set redzone autoscan"),
    ("set redzone autoscan 0", "breakpoint numbers", "Usage: set redzone autoscan"),
    ("set redzone autoscan 1,,2", "breakpoint numbers", "Usage: set redzone autoscan"),
    ("set redzone timeout 0", "number of seconds above 0", "Usage: set redzone timeout"),
    ("set redzone timeout -1", "number of seconds above 0", "Usage: set redzone timeout"),
    ("set redzone timeout abc", "number of seconds above 0", "Usage: set redzone timeout"),
    ("set redzone fill 300", "is not a byte", "library would not take it", "Usage: set redzone fill"),
    ("set redzone fill abc", "is not a byte", "Usage: set redzone fill"),
    ("set redzone bytes -4", "is not a number of bytes", "Usage: set redzone bytes"),
    ("set redzone bytes 99999999999999999999999", "is larger than", "Usage: set redzone bytes"),
    ("set redzone min-idx x", "is not a creation index", "Usage: set redzone min-idx"),
    ("set redzone min-idx 99999999999999999999", "is not a creation index", "Usage: set redzone min-idx"),
    ("set redzone trace-idx 1e3", "is not a creation index", "Usage: set redzone trace-idx"),
    ("set redzone scan free,later", "comma list", "Usage: set redzone scan"),
    ("set redzone scan none,exit", "combines none", "Usage: set redzone scan"),
    ("set redzone stacks 33", "frame count", "Usage: set redzone stacks"),
    ("redzone violations now", "unexpected argument", "Usage: redzone violations"),
    ("redzone violations --all", "unknown option", "Usage: redzone violations"),
    ("print $redzone_violations(1)", "takes no arguments", "Usage: $redzone_violations()"),
    ("redzone list --to 18446744073709551617", "too large", "Usage: redzone list"),
    ("redzone list --limit 18446744073709551616", "too large", "Usage: redzone list"),
    ("redzone poison 1.9 2.5", "not an integer", "Usage: redzone poison LO HI"),
    ("redzone poison 0 18446744073709551617", "Usage: redzone poison LO HI"),
    # Out-of-range literals: refused the same way in every debugger (GDB 10 would wrap them to small numbers).
    ("redzone poison 0 18446744073709551616", "the number 18446744073709551616 is out of range",
     "Usage: redzone poison LO HI"),
    ("redzone poison 0x10000000000000000 0", "the number 0x10000000000000000 is out of range", "Usage: redzone poison"),
    ("redzone poison 0 1+18446744073709551616UL", "out of range", "Usage: redzone poison LO HI"),
    # An expression with spaces: the hint to quote it.
    ("redzone poison $lo + 1 2", "got 4", "is one argument when quoted", "Usage: redzone poison LO HI"),
    ("set redzone autoscan 99", "breakpoint 99 does not exist (breakpoints now: 1;", "Usage: set redzone autoscan"),
    ("set redzone autoscan 1,7", "breakpoint 7 does not exist", "Usage: set redzone autoscan"),
]
for cmd, *fragments in CASES:
    expect_error(cmd, *fragments)
out = ex('redzone poison "0 + 1" "1 + 1"')  # quoted expressions with spaces are one argument each
check("redzone poison [1, 2): 1 zone(s) now hold 0xEE" in out, out)
ex("redzone unpoison")
check(len(CASES) >= 30, "at least 30 bad-input cases")
# Settings survive a rejected value.
check("redzone autoscan is off." in ex("show redzone autoscan"), ex("show redzone autoscan"))
ex("break main")  # breakpoint 2: autoscan takes existing breakpoints only
ex("set redzone autoscan 1,2")
check("redzone autoscan is 1,2." in ex("show redzone autoscan"), "autoscan list")
ex("set redzone autoscan off")
ex("set redzone timeout 1.5")
check("redzone timeout is 1.5 s." in ex("show redzone timeout"), "fractional seconds kept, not truncated")
ex("set redzone bytes 128")
expect_error("set redzone bytes 99999999999999999999999", "larger than")
check("redzone bytes is 128" in ex("show redzone bytes"), "a refused value keeps the previous one")
done()
