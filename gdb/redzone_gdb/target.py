"""gdb glue: reading redzone's exported state out of the program's memory, and serving scan, poison and
unpoison by one of two methods. gdb never runs code on the program's threads: reads are plain memory reads
(live process or core file). The agent method has the library's "redzone-agent" thread, which alone is
resumed, do the work; the memory method (memscan.py) judges and re-fills bands through memory reads and
writes and resumes nothing (cuda-gdb, which cannot resume one thread alone, and core files)."""
import os

import gdb

from . import agent, debugger, memscan, view
from .errors import TargetError

OP_PING, OP_SCAN, OP_POISON, OP_UNPOISON = 1, 2, 3, 4


def inferior():
    inf = gdb.selected_inferior()
    if debugger.is_none(inf) or inf.pid == 0 and not is_core():
        raise TargetError("no process: start the program (run) or load a core file first")
    return inf


def is_core():
    return debugger.is_core()


def symbol_address(name):
    try:
        return int(gdb.parse_and_eval(f"(unsigned long)&'{name}'"))
    except gdb.error:
        pass
    sym = gdb.lookup_global_symbol(name)
    if debugger.is_none(sym):
        sym = gdb.lookup_static_symbol(name)
    if debugger.is_none(sym):
        raise TargetError("libredzone is not loaded in this program (no __redzone_state): "
                          "run it under `redzone run`/`redzone gdb`, or preload libredzone.so")
    return int(sym.value().address)


def read(addr, n):
    try:
        return bytes(inferior().read_memory(addr, n))
    except (gdb.MemoryError, gdb.error) as e:
        raise TargetError(f"cannot read the program's memory at 0x{addr:x}: {e}")


def write(addr, data):
    try:
        inferior().write_memory(addr, data)
    except (gdb.MemoryError, gdb.error) as e:
        raise TargetError(f"cannot write the program's memory at 0x{addr:x}: {e}")


def state():
    """(address, bytes) of __redzone_state, checked against the view's layout."""
    addr = symbol_address("__redzone_state")
    data = read(addr, view.size("state"))
    rc = view.check_state(data)
    if rc != 0:
        raise TargetError({-1: "the state block has a bad magic (not redzone, or memory is corrupt)",
                           -2: "the state block has another version than this plugin understands",
                           -3: "the state block has another size than this plugin expects"}[rc])
    return addr, data


class Registry:
    """Walks the zone list of a state snapshot, reading node chunks on demand."""

    def __init__(self, state_bytes):
        self.state = state_bytes
        self.node = view.size("node")
        self.shift = view.size("chunk_shift")
        self.chunk_bytes = view.size("chunk")
        base = view.offset("state.chunks")
        self.chunk_ptrs = [view.u64(state_bytes, base + 8 * i) for i in range(view.size("max_chunks"))]
        self.cache = {}

    def node_bytes(self, id1):
        i = id1 - 1
        c = i >> self.shift
        if c not in self.cache:
            if not self.chunk_ptrs[c]:
                raise TargetError("the registry points outside its chunks (memory is corrupt)")
            self.cache[c] = read(self.chunk_ptrs[c], self.chunk_bytes)
        off = (i & ((1 << self.shift) - 1)) * self.node
        return self.cache[c][off:off + self.node]

    def read_chunk(self, c):
        """Chunk c's bytes, or None when the registry has no such chunk."""
        if c >= len(self.chunk_ptrs) or not self.chunk_ptrs[c]:
            return None
        if c not in self.cache:
            self.cache[c] = read(self.chunk_ptrs[c], self.chunk_bytes)
        return self.cache[c]

    def walk(self):
        id1 = view.u32(self.state, view.offset("state.head"))
        seen = 0
        limit = view.u64(self.state, view.offset("state.zone_count")) + 1
        while id1:
            nb = self.node_bytes(id1)
            st, index, nxt, violated, watched = view.zone_fields(nb)
            yield nb, index, violated, watched
            seen += 1
            if seen > limit:
                raise TargetError("the zone list is longer than its count (the registry changed while read)")
            id1 = nxt


def stack_of(state_bytes, id1):
    """The allocation stack kept for node id1 (METRALE_REDZONE_STACKS): return addresses, maybe none. The
    node's 4-byte stack id, then the stack in the library's depot (native/src/core/depot.c)."""
    depth = view.u32(state_bytes, view.offset("state.stack_depth"))
    if depth == 0 or id1 == 0:
        return []
    shift = view.size("chunk_shift")
    i = id1 - 1
    ids = view.u64(state_bytes, view.offset("state.stack_ids") + 8 * (i >> shift))
    if not ids:
        return []
    sid = view.u32(read(ids + (i & ((1 << shift) - 1)) * 4, 4), 0)
    if sid == 0:
        return []
    w, dshift = sid - 1, view.u32(state_bytes, view.offset("state.depot_shift"))
    if w >> dshift >= view.size("depot_chunks"):
        return []
    chunk = view.u64(state_bytes, view.offset("state.depot_chunks") + 8 * (w >> dshift))
    if not chunk:
        return []
    at = chunk + (w & ((1 << dshift) - 1)) * 8
    n = min(view.u32(read(at, 8), 0), depth)
    data = read(at + 8, 8 * n) if n else b""
    return [view.u64(data, 8 * k) for k in range(n)]


def describe_pc(pc):
    """`0x... in function (file:line)` for a return address, from gdb's symbols (live or core)."""
    name = None
    none = debugger.is_none
    try:
        block = gdb.block_for_pc(pc - 1)
        while not none(block) and none(block.function):
            block = block.superblock
        if not none(block):
            name = block.function.print_name
    except RuntimeError:
        pass
    if name is None:
        info = gdb.execute(f"info symbol {pc:#x}", to_string=True).strip()
        name = info.split(" in section")[0] if not info.startswith("No symbol") else None
    sal = gdb.find_pc_line(pc - 1)
    where = f" at {sal.symtab.filename}:{sal.line}" if not none(sal.symtab) and sal.line else ""
    return f"{pc:#x}" + (f" in {name}" if name else "") + where


def seq_stable(addr_state):
    """True when no thread is in the middle of changing the registry."""
    seq = view.u64(read(addr_state + view.offset("state.seq"), 8), 0)
    return seq % 2 == 0


# ---- serving a request: the agent or the memory method ---------------------------------------------------
METHODS = ("auto", "agent", "memory")


def choose_method(setting):
    """The method a request uses now. `auto`: the memory method wherever the debugger reads and writes the
    bands itself (cuda-gdb, whose @global space reaches device memory; any debugger on the emulated device,
    whose device memory is host memory; core files, read-only), and the agent where it cannot (plain gdb on
    a GPU: device memory is not in the host's address space) and can resume one thread alone. The memory
    method resumes nothing, so a breakpoint's `commands` and the user's hooks run as they would without
    redzone; the agent resumes its thread, which ends gdb's command list for that stop."""
    if is_core():
        return "memory"
    if setting == "auto":
        if not debugger.can_lock_scheduler() or bands_readable():
            return "memory"
        return "agent"
    if setting == "agent" and not debugger.can_lock_scheduler():
        raise TargetError(f"{debugger.name()} cannot resume one thread alone (no scheduler-locking), so the "
                          "agent method cannot serve requests here: `set redzone method memory` (or auto)")
    return setting


def bands_readable():
    """Whether the first zone's band reads as plain memory here (the emulated device), probed per request:
    no zone yet counts as readable (nothing to read)."""
    try:
        _, data = state()
    except TargetError:
        return True
    head = view.u32(data, view.offset("state.head"))
    if not head:
        return True
    try:
        node = Registry(data).node_bytes(head)
    except TargetError:
        return True
    ptr, user_bytes = view.u64(node, 0), view.u64(node, 8)  # pinned offsets (state.c)
    return debugger.band_io().read(ptr + user_bytes, 1) is not None


def check_stopped():
    """Refuse, before anything is written, while the program runs in the background."""
    inf = inferior()
    if is_core():
        return
    if inf.pid == 0:
        raise TargetError("no process: start the program (run) first")
    if any(t.is_running() for t in inf.threads()):
        raise TargetError("the program is running (in the background, or in non-stop mode); interrupt it first")


def mappings():
    """[(start, end, offset, path)] of the program's file mappings: /proc/PID/maps for a live process (no
    gdb.execute: this serves stop handlers too), `info proc mappings` for a core file."""
    out = []
    if not is_core():
        try:
            with open(f"/proc/{gdb.selected_inferior().pid}/maps") as f:
                for line in f:
                    fields = line.split()
                    if len(fields) >= 6 and fields[5].startswith("/"):
                        lo, hi = fields[0].split("-")
                        out.append((int(lo, 16), int(hi, 16), int(fields[2], 16), fields[5]))
        except (OSError, ValueError):
            pass
        return out
    try:
        text = gdb.execute("info proc mappings", to_string=True)
    except gdb.error:
        return []
    for line in text.splitlines():
        f = line.split()
        if len(f) < 5 or not f[0].startswith("0x") or not f[-1].startswith("/"):
            continue
        try:
            out.append((int(f[0], 16), int(f[1], 16), int(f[3], 16), f[-1]))
        except ValueError:
            continue
    return out


def stack_lines(state_bytes, id1, index):
    """The allocation stack block a report carries (METRALE_REDZONE_STACKS), as the library prints it: each
    frame's function from its object's ELF symbols (view.frame, the library's own lookup and format), named
    as the program's loader names the object."""
    frames = stack_of(state_bytes, id1)
    if not frames:
        return []
    maps = mappings()
    bases = {}
    for start, _end, offset, path in maps:
        bases[path] = min(bases.get(path, start - offset), start - offset)
    main_name = gdb.current_progspace().filename
    lines, k = [f"  alloc#{index} was allocated at:"], 0
    for i, pc in enumerate(frames):
        path = next((p for start, end, _o, p in maps if start <= pc < end), None)
        if path is None:
            lines.append(f"    #{k} {describe_pc(pc)}")  # no mapping known (an old debugger's core file)
            k += 1
            continue
        so = gdb.solib_name(pc)
        name = main_name if debugger.is_none(so) else so
        line, ours = view.frame(k, pc, path, bases[path], name)
        if k == 0 and i < len(frames) - 1 and ours:
            continue  # leading frames of redzone's own allocation path, as the library skips them
        lines.append(line)
        k += 1
    return lines


LAST_METHOD = {"method": None, "io": None}  # for `redzone status` and the tests: what served the last request


def memory_method():
    try:
        launches = symbol_address("__redzone_launches")
    except TargetError:
        launches = None
    try:
        nvtx_regions = symbol_address("__redzone_nvtx")
    except TargetError:
        nvtx_regions = None
    io = debugger.band_io()
    LAST_METHOD["io"] = io
    try:
        held = symbol_address("__redzone_quarantine")
    except TargetError:
        held = None
    return memscan.MemoryMethod(read, write, io, symbol_address("__redzone_state"), launches, stack_lines,
                                read_only=is_core(), nvtx_addr=nvtx_regions,
                                quarantine_addr=held)


def _commands_note():
    """The agent resumes its thread, and gdb ends a breakpoint's command list when anything resumes: said
    on the spot when the breakpoint the program stopped at runs redzone commands."""
    try:
        hit = int(gdb.parse_and_eval("$_hit_bpnum"))  # GDB 13+
    except (gdb.error, ValueError):
        return ""
    bp = next((b for b in gdb.breakpoints() if b.number == hit), None)
    commands = getattr(bp, "commands", None) if bp is not None else None
    if debugger.is_none(commands) or not commands or "redzone" not in commands:
        return ""
    return (f"redzone: note: the agent method resumes its thread, so gdb skips the rest of this breakpoint's "
            f"commands (breakpoint {hit}); `set redzone method memory` or auto keeps them running\n")


def serve(op, arg0=0, arg1=0, timeout=2.0, method="auto"):
    """Scan, poison or unpoison by the method chosen for this debugger and target: (result, report text)."""
    inferior()
    if op != OP_SCAN and is_core():
        raise TargetError("this is a core file: poison and unpoison need a running program")
    check_stopped()
    chosen = choose_method(method)
    LAST_METHOD["method"] = chosen
    if chosen == "agent":
        note = _commands_note()
        result, out = agent.Agent(timeout, read, symbol_address).request(op, arg0, arg1)
        return result, out + note
    m = memory_method()
    try:
        if op == OP_SCAN:
            return m.scan()
        if op == OP_POISON:
            return m.poison(arg0, arg1)
        return m.unpoison()
    except memscan.Busy as e:
        text = str(e).replace("; step or continue that thread past redzone, then try again", "")
        raise TargetError(text + holder_advice()) from None
    except memscan.Failed as e:
        raise TargetError(str(e)) from None


def busy_advice(result):
    """What makes a scan refused with RZ_EBUSY (the agent method's answer) work: '' for other results."""
    try:
        busy = result == view.STATUS["RZ_EBUSY"]
    except KeyError:
        busy = False
    return holder_advice() if busy else ""


def registry_held():
    """Whether the zone registry is held now (its lock word, or its change counter odd)."""
    try:
        _, data = state()
    except TargetError:
        return False
    return view.u32(data, view.offset("state.lock")) != 0 or view.u64(data, view.offset("state.seq")) % 2 == 1


def holder_advice():
    """Which stopped thread is inside redzone, and the commands that bring it back to the program (after
    which the registry is free): said with RZ_EBUSY. The user's thread and frame selection is kept."""
    from . import stepping
    if is_core():
        return "; this core file was written while a thread held it, so it cannot be scanned"
    try:
        selected = gdb.selected_thread()
        selected_level = debugger.frame_level(gdb.selected_frame())
    except gdb.error:
        return ""
    if stepping.at_hook():
        return ("; this thread is stopped inside the library's own check (a `redzone break on` stop), which "
                "holds it: `next` or `finish` returns to the program with the check done, then try again")
    inside = []
    try:
        for thread in gdb.selected_inferior().threads():
            thread.switch()
            frames = stepping.frames_of()
            found = stepping.program_frame(frames)
            if frames and found is not None and found[0] > 0 and "libredzone" in (frames[0][1] or ""):
                inside.append((thread.num, found[0] - 1, frames[found[0] - 1][2]))
    except gdb.error:
        pass
    finally:
        selected.switch()
        debugger.select_frame_level(selected_level)
    if not inside:
        return "; `continue` (or `next` in the thread inside redzone) lets it finish, then try again"
    num, level, name = inside[0]
    return (f"; thread {num} is inside redzone ({name or '??'}): `thread {num}`, `frame {level}`, `finish` "
            "brings it back to the program with the registry free (the other threads run meanwhile), then try "
            "again")


def log_reaches_debugger(fd):
    """Whether the library's log (the program's file descriptor fd) is the debugger's own output: the same
    open file as gdb's stdout or stderr (a program `run` here on this terminal). Not for a log file, nor for
    a program gdb attached to whose output goes elsewhere; not knowable for a core file (False)."""
    pid = gdb.selected_inferior().pid
    if is_core() or not pid:
        return False
    try:
        theirs = os.stat(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return False
    for own in (1, 2):
        try:
            mine = os.fstat(own)
        except OSError:
            continue
        if (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino):
            return True
    return False


def agent_serving():
    """True while the agent serves a request (read from memory; for breakpoint conditions)."""
    try:
        addr = symbol_address("__redzone_agent")
        return bool(view.u32(read(addr + view.offset("agent.serving"), 4), 0))
    except TargetError:
        return False
