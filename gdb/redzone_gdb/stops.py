"""The library's two debugger hooks that `redzone break on` stops at, and what the plugin says there: pure
data and text, no gdb (tested with pytest, tests/python/test_stops.py).

__redzone_violation(const rz_violation_t *violation): a band found changed (free, sync, exit, launch
checks): a scan calls it after releasing the zone registry, the checks at a free and after a launch while
they hold it. __redzone_refused(const rz_refusal_t *refusal): a copy or memset
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
# The other bad frees (issue 32): a double free, inside an allocation, inside a freed block, foreign, after the
# allocation's context ended.
_BAD_FREES = {4: "a double free", 5: "a free inside an allocation", 6: "a free inside a freed block",
              7: "a free of a pointer no allocation holds", 8: "a free after its context ended"}
_REFUSED_CALL.update({k: "free" for k in _BAD_FREES})


def refused_call(how):
    """'copy', 'memset' or 'free' for a refusal record's `how` (None, unread: 'copy, memset or free')."""
    return _REFUSED_CALL.get(how, "copy, memset or free")


# Which of the library's checks a violation stop is in, told by the files (or, without line information,
# the functions) of the stopped thread's frames, innermost first: (file name, function name part, check).
_CHECKS = (("free_check.c", "free_check", "free"), ("launch_check.c", "launch_check", "launch"),
           ("launch_attribution.c", "attrib_judge", "launch"), ("exit_scan.c", "exit_scan", "exit"),
           ("fatal_scan.c", "fatal", "fatal"), ("sync_scan.c", "scan_after_sync", "sync"),
           ("api.c", "rz_scan", "api"))

# What each check is called in a sentence.
CHECK_WORDS = {"free": "check before a free", "launch": "launch check (after a kernel launch)",
               "exit": "exit scan", "fatal": "scan at a fatal signal", "sync": "scan after a synchronisation",
               "api": "scan the program asked for (rz_scan)"}

# Checks that are scans: the scan counter counts them once they end, after their reports.
SCANS = ("exit", "fatal", "sync", "api")


def check_of(frames):
    """The check a violation stop is in, from its frames [(file base name or None, function name or None)],
    innermost first; None when no frame tells."""
    for path, function in frames:
        for file_name, part, check in _CHECKS:
            if path == file_name or (path is None and function and part in function):
                return check
    return None


# Frames that are never the program's call: the C runtime's start and exit path.
_RUNTIME_FUNCTIONS = ("_start", "__libc_start_main", "__libc_start_call_main", "__run_exit_handlers", "exit",
                      "_dl_fini", "__GI_exit", "__libc_start_main_impl", "_IO_cleanup", "__call_tls_dtors")
_RUNTIME_OBJECTS = ("libredzone.so", "libcuda.so", "libc.so", "libc-", "ld-linux", "ld64.so", "libpthread",
                    "libdl.so")


def is_program_frame(object_path, function):
    """Whether a frame belongs to the program (what the plugin selects at a stop): not redzone's, not the
    driver's, not the C runtime's start or exit path. object_path: its shared object (None: the main
    executable)."""
    if function in _RUNTIME_FUNCTIONS:
        return False
    if object_path is None:
        return True
    base = object_path.rsplit("/", 1)[-1]
    return not base.startswith(_RUNTIME_OBJECTS)


def stop_sentence(kind, frame=None, how=None, check=None):
    """What the plugin says once a `redzone break on` stop is reported. frame: (level, function name,
    ' at FILE:LINE' or '') of the program's frame the plugin selected, None when no frame is the program's.
    check: which of the library's checks found the violation (check_of), None when unknown."""
    if kind == VIOLATION.kind:
        if check == "exit":
            head = "redzone: stopped at the exit scan, which found this violation as the program ends"
            if frame is None:
                return (f"{head}; no frame of the program is left on the stack (its main returned: the frames are "
                        "the C library's exit path and redzone's), so none is selected; `bt` shows the host stack")
            level, name, where = frame
            return (f"{head}; frame #{level}, {name or '??'}{where}, the program's last call (to exit), is "
                    "selected (`bt` shows the whole host stack, `frame 0` the library's report call)")
        found = f"the library's {CHECK_WORDS[check]}" if check in CHECK_WORDS else "the library"
        head = f"redzone: stopped where {found} found this violation"
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
