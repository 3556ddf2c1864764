"""Completion and help for the redzone commands: each command's options and values complete (`complete
redzone list --`, `complete redzone break `), and `help redzone scan` says which method will serve a scan in
this debugger. install() puts them on the command classes before register() makes the commands (gdb reads
a command's completer and documentation when it is made)."""
import gdb

from . import debugger

OPTIONS = {
    "ListCommand": (("--violated", "--from", "--to", "--limit", "--stacks", "--json"), ("--from", "--to", "--limit")),
    "ScanCommand": (("--json",), ()),
    "ViolationsCommand": (("--json",), ()),
    "StatsCommand": (("--json",), ()),
}
VALUES = {"BreakCommand": ("on", "off")}


def candidates(text, word, options=(), valued=(), values=()):
    """The completions of the last word of `text` (what gdb passes as `word` may be shorter: '-' breaks words
    in gdb's default completer), relative to `word`: options never repeated, no completion after an option
    that takes a number; `values` complete the first argument only."""
    words = text.split(" ")
    token, before = words[-1], [w for w in words[:-1] if w]
    if values:
        found = [v for v in values if v.startswith(token)] if not before else []
    elif before and before[-1] in valued:
        found = []
    else:
        found = [o for o in options if o.startswith(token) and o not in before]
    cut = len(token) - len(word or "")
    return [f[cut:] for f in found] if cut >= 0 else found


def _completer(options=(), valued=(), values=()):
    def complete(self, text, word):
        return candidates(text, word, options, valued, values)
    return complete


def scan_help():
    """`help redzone scan`: the method the scan will use in this debugger."""
    if debugger.name() == "cuda-gdb":
        how = ("In cuda-gdb the scan is made by the debugger itself (method memory: it reads and re-fills the "
               "bands through memory reads and writes, through cuda-gdb's @global space for device memory, and "
               "resumes nothing): cuda-gdb cannot resume one thread alone, which the agent needs.")
    else:
        how = ("In gdb, `set redzone method auto` (the default) makes it by the debugger's own memory reads and "
               "writes where the bands are readable as plain memory (the emulated device) and on core files, "
               "resuming nothing; on a GPU the library's redzone-agent thread makes it, resumed alone (no code "
               "runs on your threads). `set redzone method agent|memory` chooses.")
    return f"""Check every band now.

Usage: redzone scan [--json]

{how} `redzone status` says which method serves the next scan.
Prints the library's own report lines and its `redzone scan: N zones checked, M violated` summary.
Violated bands are re-filled, so a later scan reports only new writes."""


def install(namespace):
    for name, (options, valued) in OPTIONS.items():
        if name in namespace:
            namespace[name].complete = _completer(options, valued)
    for name, values in VALUES.items():
        if name in namespace:
            namespace[name].complete = _completer(values=values)
    if "PoisonCommand" in namespace:
        namespace["PoisonCommand"].complete = lambda self, text, word: gdb.COMPLETE_EXPRESSION
    if "ScanCommand" in namespace:
        try:
            namespace["ScanCommand"].__doc__ = scan_help()
        except gdb.error:
            pass
