"""The library's two debugger hooks that `redzone break on` stops at, and what the plugin says there: pure
data and text, no gdb (tested with pytest, tests/python/test_stops.py).

__redzone_violation(const rz_violation_t *violation): a band found changed (free, sync, exit, launch
checks), called with the registry released. __redzone_refused(const rz_refusal_t *refusal): a copy or memset
refused for running outside its buffer (`copy past the end of alloc#N`), or a free of a pointer into a front
band (`bad free`), called before the program's call returns CUDA_ERROR_INVALID_VALUE, with no lock of the
library held."""
from collections import namedtuple

# kind: the name the plugin uses; symbol: the hook; argument: its parameter's name (the record, read
# through the debugger's view of the library's debug info); record: the view's size name for the record.
Hook = namedtuple("Hook", "kind symbol argument record")

VIOLATION = Hook("violation", "__redzone_violation", "violation", "violation")
REFUSAL = Hook("refusal", "__redzone_refused", "refusal", "refusal")
HOOKS = (VIOLATION, REFUSAL)

# rz_refusal_t.how (redzone.h): RZ_REFUSED_READ, RZ_REFUSED_WRITTEN, RZ_REFUSED_SET, RZ_REFUSED_FREE.
_REFUSED_CALL = {0: "copy", 1: "copy", 2: "memset", 3: "free"}
# The other bad frees (issue 32): a double free, inside an allocation, inside a freed block, foreign.
_BAD_FREES = {4: "a double free", 5: "a free inside an allocation", 6: "a free inside a freed block",
              7: "a free of a pointer no allocation holds"}
_REFUSED_CALL.update({k: "free" for k in _BAD_FREES})


def refused_call(how):
    """'copy', 'memset' or 'free' for a refusal record's `how` (None, unread: 'copy, memset or free')."""
    return _REFUSED_CALL.get(how, "copy, memset or free")


def holds_registry(kind):
    """Whether the thread stopped at this hook is inside the library's own check, holding its zone
    registry, so that a scan now would be refused: at a violation (its check still runs around the hook)
    but not at a refused copy (the hook is called with every lock released)."""
    return kind == VIOLATION.kind


def stop_sentence(kind, frame=None, how=None):
    """What the plugin says once a `redzone break on` stop is reported. frame: (level, function name,
    ' at FILE:LINE' or '') of the program's frame the plugin selected, None when every frame is the
    library's."""
    if kind == VIOLATION.kind:
        head = "redzone: stopped where the library found this violation"
        if frame is None:
            return f"{head}; `bt` shows the host stack"
        level, name, where = frame
        return (f"{head}; frame #{level}, {name or '??'}{where}, the program's call that led to it, is selected "
                "(`bt` shows the whole host stack, `frame 0` the library's report call)")
    call = refused_call(how)
    if how in _BAD_FREES:
        head = (f"redzone: stopped at a bad free ({_BAD_FREES[how]}): the program gets the driver's answer, "
                "CUDA_ERROR_INVALID_VALUE, when it goes on")
        if frame is None:
            return f"{head}; `bt` shows the host stack"
        level, name, where = frame
        return (f"{head}; frame #{level}, {name or '??'}{where}, the program's call, is selected (`bt` shows the "
                "whole host stack, `frame 0` the library's hook)")
    if call == "free":
        what = "its pointer is in a front band, before the buffer's start, so nothing is freed"
    else:
        done = {"copy": "copied", "memset": "set"}.get(call, "done")
        what = f"it runs outside its buffer, so nothing is {done}"
    head = (f"redzone: stopped at a refused {call}: {what} and the call returns CUDA_ERROR_INVALID_VALUE, as "
            "without redzone, when the program goes on")
    if frame is None:
        return f"{head}; `bt` shows the host stack"
    level, name, where = frame
    return (f"{head}; frame #{level}, {name or '??'}{where}, the program's call, is selected (`bt` shows the "
            "whole host stack, `frame 0` the library's hook)")
