"""The one debugger seam: everything that differs between gdb versions and cuda-gdb lives here, and the
commands never test versions themselves.

What differs (measured with cuda-gdb 11.8 / GDB 10.2, gdb 13.1 and gdb 16.3):
- The banner: cuda-gdb 11.x says "NVIDIA (R) CUDA Debugger" and "11.8 release", 12.x and 13.x "NVIDIA (R)
  cuda-gdb 13.0" (versions.py reads both).
- cuda-gdb never supports scheduler-locking ("Target 'native + cuda' cannot support this command"), and
  resuming any host thread resumes every device: the agent (resume one thread) cannot serve a request
  there, so requests are served by judging bands through memory reads and writes (memscan.py).
- cuda-gdb's Python returns its own None/True/False objects (`x is None` is false for a None from gdb), and
  repr() of some gdb objects aborts it: test values with is_none()/bool(), never with `is`, never repr().
- gdb.Parameter.value cannot be read back inside get_set_string in cuda-gdb: read settings with
  gdb.parameter("redzone NAME").
- GDB 10 lacks Inferior.connection (core files are told by the target stack) and Frame.level().
- gdb.execute() runs the commands of the breakpoint the program stopped at when it returns (GDB's Python
  does bpstat_do_actions after every command): called from a stop handler, it would run a user's
  `commands ... continue` early and nested, which hangs an interactive gdb. So nothing that serves a stop
  handler (autoscan, the memory method) calls gdb.execute: what needs a command is asked once, at load.
- Device memory: with host focus, a plain read of a device address fails on a real GPU; cuda-gdb reads
  global memory through its @global address space. Without a GPU, @global reads of host memory silently
  return zeros, so a plain read is always tried first (the emulated driver's device memory is host memory).
"""
import importlib
import os

import gdb

from . import bandio, versions


def is_none(value):
    """True for Python's None and for the None object of a debugger's own Python (cuda-gdb)."""
    return value is None or type(value).__name__ == "NoneType"


_INFO = {}


def _version_text():
    if "version" not in _INFO:
        try:
            _INFO["version"] = gdb.execute("show version", to_string=True)
        except gdb.error:
            _INFO["version"] = ""
    return _INFO["version"]


def name():
    """'cuda-gdb' or 'gdb', told by what the debugger says of itself (not by its file name): the 11.x banner
    ("NVIDIA (R) CUDA Debugger", "11.8 release") and the 12.x/13.x one ("NVIDIA (R) cuda-gdb 13.0")."""
    return "cuda-gdb" if versions.is_cuda_gdb(_version_text()) or hasattr(gdb, "cuda") else "gdb"


def describe():
    """One line: which debugger this is, for `redzone status` and the launcher."""
    text = _version_text()
    if name() == "cuda-gdb" and not versions.is_cuda_gdb(text):
        return f"cuda-gdb ? (GDB {gdb.VERSION})"
    return versions.describe(text, gdb.VERSION)


def param(setting):
    """A setting's value (bools and Nones normalised to Python's own)."""
    value = gdb.parameter(setting)
    if is_none(value):
        return None
    if type(value).__name__ == "bool":
        return bool(value)
    return value


def is_core():
    """True when the selected inferior is a core file (no gdb.execute: see above)."""
    inf = gdb.selected_inferior()
    conn = getattr(inf, "connection", None)
    if not is_none(conn):
        return conn.type == "core"
    if inf.pid == 0:
        return False
    # GDB 10 has no Inferior.connection: a live inferior is a process this debugger traces.
    return traced_by() != os.getpid()


def traced_by(pid=None):
    """The pid tracing the selected inferior's process (0: none, -1: no such process here)."""
    pid = pid or gdb.selected_inferior().pid
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("TracerPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return -1
    return 0


def init():
    """What needs a debugger command, asked once when the plugin loads (never from a stop handler)."""
    _version_text()


def can_lock_scheduler():
    """Whether the debugger can resume one thread alone (what the agent needs). cuda-gdb never can (its
    CUDA-aware native target refuses scheduler-locking, by design); gdb's native target can. Told by the
    debugger's identity: the setting cannot be probed without a process ("Target 'None' cannot support")."""
    return name() != "cuda-gdb"


def frame_level(frame):
    """A frame's level (Frame.level() is GDB 11+)."""
    level = getattr(frame, "level", None)
    if level is not None:
        return level()
    n = 0
    while True:
        frame = frame.newer()
        if is_none(frame):
            return n
        n += 1


def select_frame_level(level):
    frame = gdb.newest_frame()
    n = 0
    while not is_none(frame) and n < level:
        frame = frame.older()
        n += 1
    if not is_none(frame):
        frame.select()


def set_breakpoint_thread(bp, thread):
    """Bind a breakpoint to a thread by its global number (cuda-gdb's setter rejects ints: a condition on
    $_thread does the same there)."""
    try:
        bp.thread = thread.global_num
    except (TypeError, AttributeError):
        gdb.execute(f"condition {bp.number} $_thread == {thread.num}", to_string=True)


# ---- the program's memory ----------------------------------------------------------------------------------
class MemoryError_(Exception):
    """A read or write of the program's memory failed on every path."""


def _plain_read(addr, n):
    try:
        return bytes(gdb.selected_inferior().read_memory(addr, n))
    except (gdb.MemoryError, gdb.error, OverflowError, ValueError):
        return None


def _plain_write(addr, data):
    try:
        gdb.selected_inferior().write_memory(addr, data)
        return True
    except (gdb.MemoryError, gdb.error, OverflowError, ValueError):
        return False


def _global_read(addr, n):
    """cuda-gdb's global memory space (device memory while stopped, also inside a kernel)."""
    try:
        value = gdb.parse_and_eval(f"*(@global unsigned char (*)[{n}]) {addr:#x}")
        return bytes(int(value[i]) & 0xFF for i in range(n))
    except (gdb.MemoryError, gdb.error):
        return None


def _global_write(addr, data):
    try:
        for off in range(0, len(data), 256):
            chunk = data[off:off + 256]
            body = ", ".join(str(b) for b in chunk)
            gdb.execute(f"set var *(@global unsigned char (*)[{len(chunk)}]) {addr + off:#x} = {{{body}}}",
                        to_string=True)
        return True
    except (gdb.MemoryError, gdb.error):
        return False


def _cuda_module():
    """cuda-gdb's gdb.cuda module (12.x and later), or None."""
    if hasattr(gdb, "cuda"):
        return gdb.cuda
    try:
        return importlib.import_module("gdb.cuda")
    except ImportError:
        return None


def band_io():
    """The band reader/writer for this debugger: plain memory first; then cuda-gdb's gdb.cuda module where it
    has read_global_memory (12.x and later); then cuda-gdb's @global space."""
    if name() == "cuda-gdb":
        return bandio.BandIO([("plain", _plain_read, _plain_write)] + bandio.cuda_module_paths(_cuda_module())
                             + [("global", _global_read, _global_write)])
    return bandio.BandIO([("plain", _plain_read, _plain_write)])


# ---- cuda-gdb's own None ------------------------------------------------------------------------------------
def _debugger_none():
    """The None object the debugger's C code compares with (cuda-gdb: not Python's)."""
    return gdb.lookup_global_symbol("__redzone_no_such_symbol__")


def _to_debugger_none(fn, none):
    def wrapped(*a, **k):
        result = fn(*a, **k)
        return none if result is None else result
    wrapped.__wrapped__ = fn
    return wrapped


def install_workarounds():
    """In a debugger whose C code has its own None (cuda-gdb 11.8), gdb's own Python hooks answer 'nothing'
    with Python's None, which the C code takes for an answer: `bt` and frame selection fail ("A Unwinder
    should return gdb.UnwindInfo instance") and `print` shows empty values (every value "has" a pretty
    printer). Make those hooks answer with the debugger's None. Nothing changes where the two are the same."""
    none = _debugger_none()
    if none is None or getattr(gdb, "_redzone_none_fixed", False):
        return False
    gdb._execute_unwinders = _to_debugger_none(gdb._execute_unwinders, none)
    try:
        frames = importlib.import_module("gdb.frames")
        frames.execute_frame_filters = _to_debugger_none(frames.execute_frame_filters, none)
    except (ImportError, AttributeError):
        pass
    try:
        printing = importlib.import_module("gdb.printing")
        cls = printing.RegexpCollectionPrettyPrinter
        cls.__call__ = _to_debugger_none(cls.__call__, none)
        gdb.pretty_printers[:] = [p if hasattr(p, "__wrapped__") or isinstance(p, printing.PrettyPrinter)
                                  else _to_debugger_none(p, none) for p in gdb.pretty_printers]
    except (ImportError, AttributeError):
        pass
    gdb._redzone_none_fixed = True
    return True
