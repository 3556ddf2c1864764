"""The redzone commands, settings, breakpoint and convenience function: thin gdb glue over args.py
(parsing), view.py (the library's own formatting) and target.py (memory reads and agent requests)."""
import json
import re

import gdb

from . import agent, args, completion, debugger, nvtx, quarantine, session, settings, stepping, stops, target, view
from .args import USAGE, UsageError
from .settings import SETTING_NAMES, SETTINGS
from .ui import write as _write


def _fail(command, message):
    raise gdb.GdbError(f"redzone {command}: {message}\n{USAGE[command]}")


def _guard(command, fn, argv):
    try:
        return fn(argv)
    except UsageError as e:
        if "--json" in argv:
            raise gdb.GdbError(json_error(command, str(e), usage=USAGE[command])) from None
        _fail(command, str(e))
    except (target.TargetError, OSError) as e:
        if "--json" in argv:
            raise gdb.GdbError(json_error(command, session.explain(e))) from None
        raise gdb.GdbError(f"redzone {command}: {session.explain(e)}")


def json_error(command, message, **fields):
    """The one JSON document a failing `--json` command prints, as the text of its error (so the command
    still fails, and a script reads JSON on whichever stream it captures)."""
    doc = {"command": f"redzone {command}", "error": message}
    doc.update(fields)
    return json.dumps(doc)


class RedzonePrefix(gdb.Command):
    """Red zones: find CUDA device-memory overruns.

Usage: redzone SUBCOMMAND [ARGS]

Subcommands: list, scan, poison, unpoison, violations, stats (counters), status, break.
Settings: set/show redzone autoscan|method|timeout|bytes|fill|min-idx|trace-idx|scan|stacks|emulated-device.
Reference: docs/gdb.md."""

    def __init__(self):
        super().__init__("redzone", gdb.COMMAND_DATA, prefix=True)

    def invoke(self, arg, from_tty):
        if arg.strip():
            raise gdb.GdbError(f"redzone: unknown subcommand {arg.split()[0]!r}\n{SUBCOMMANDS}")
        _write(SUBCOMMANDS)


SUBCOMMANDS = f"""redzone subcommands (help redzone SUBCOMMAND for each):
  list [--violated] [--from N] [--to N] [--limit N] [--stacks] [--json]   zones by creation index
  scan [--json]                 check every band now
  poison LO HI                  poison window [LO, HI): 0xEE inside, 0x00 outside
  unpoison                      every band holds the fill byte again
  violations [--json]           the last scan's violations
  stats [--json] (counters)     the mapping counters
  status                        library, options, method, debugger
  break on|off                  stop where the library finds a violation or refuses a copy or free
settings: set/show redzone {SETTING_NAMES}"""


class ListCommand(gdb.Command):
    """List the zones (allocations) redzone watches, in creation-index order.

Usage: redzone list [--violated] [--from N] [--to N] [--limit N] [--stacks] [--json]

Columns: creation index, user pointer, user bytes, pad bytes, expected band byte, state. Then, without
--violated/--from/--to, what the quarantine holds (freed blocks, and pool regions NVTX unregistered: pointer,
bytes, bytes held, free byte, held/filling/written) and the NVTX regions of pools watched through NVTX
(start, bytes, registered, quarantined or unregistered, heap, name), when there are any. --json: one object,
{"zones": [...], "shown": N, "total": N, "quarantine": {...} or null, "nvtx_regions": [...]} (the last two
without --violated/--from/--to).
--violated: only zones the last scan found violated. --from/--to: index range (inclusive).
--limit N: at most N rows (default 100; 0 = all). --stacks: each zone's allocation stack under its row
(kept when the program ran with METRALE_REDZONE_STACKS, `set redzone stacks N`).
Reads memory only: works on a core file."""

    def __init__(self):
        super().__init__("redzone list", gdb.COMMAND_DATA)

    def invoke(self, arg, from_tty):
        _guard("list", self.run, gdb.string_to_argv(arg))

    def run(self, argv):
        opts = args.parse_list(argv)
        addr, data = target.state()
        stable = target.seq_stable(addr)
        limit = 100 if opts["--limit"] is None else opts["--limit"]
        stacks = opts["--stacks"]
        try:
            listed = view.zone_list(data, target.Registry(data).read_chunk, lo=opts["--from"], hi=opts["--to"],
                                    limit=limit, violated=opts["--violated"], json=opts["--json"], ids=stacks)
        except view.ListError as e:
            raise target.TargetError(str(e)) from None
        rows, shown, total = listed[:3]
        if stacks and not opts["--json"] and rows:
            if view.u32(data, view.offset("state.stack_depth")) == 0:
                _write("redzone: no allocation stacks were kept (run with `set redzone stacks N` or "
                       "METRALE_REDZONE_STACKS=N)")
            lines = rows.rstrip("\n").split("\n")
            out = []
            for line, id1 in zip(lines, listed[3]):
                out.append(line)
                out += [f"      #{k} {target.describe_pc(pc)}" for k, pc in enumerate(target.stack_of(data, id1))]
            rows = "\n".join(out) + "\n"
        if opts["--json"]:
            objs = json.loads("[" + rows + "]")
            if stacks:
                for obj, id1 in zip(objs, listed[3]):
                    obj["stack"] = [target.describe_pc(pc) for pc in target.stack_of(data, id1)]
            doc = {"zones": objs, "shown": shown, "total": total}
            if not opts["--violated"] and opts["--from"] is None and opts["--to"] is None:
                found = _nvtx_found()
                head, entries = _held()
                held_at = quarantine.region_starts(entries)
                doc["quarantine"] = quarantine.to_json(head, entries, nvtx.names(found)) if head else None
                doc["nvtx_regions"] = nvtx.to_json(found, held_at)
            _write(json.dumps(doc))
            return
        if not stable:
            _write("redzone: warning: a thread was changing the registry when the program stopped; "
                   "this view may be torn")
        _write(view.zone_header())
        if rows:
            _write(rows.rstrip("\n"))
        more = f" (showing {shown}; --limit 0 for all)" if shown < total else ""
        _write(f"{total} zone(s){more}")
        if not opts["--violated"] and opts["--from"] is None and opts["--to"] is None:
            found = _nvtx_found()
            head, entries = _held()
            if entries:  # the freed blocks and regions the quarantine holds (issue 32), oldest first
                _write("\n".join(quarantine.rows(entries, limit, nvtx.names(found))))
                _write(quarantine.summary(head, entries))
            lines = nvtx.rows(found, quarantine.region_starts(entries))
            if lines:
                _write("\n".join(lines))


def _nvtx_found():
    """The pool sub-allocations libredzone watches through NVTX ([] when there are none, or the library has
    no such block). Reads memory only."""
    try:
        addr = target.symbol_address("__redzone_nvtx")
    except target.TargetError:
        return []
    try:
        return nvtx.regions(target.read, addr)
    except nvtx.NvtxError as e:
        raise target.TargetError(str(e)) from None


def _held():
    """(header, entries) of the quarantine, oldest first; (None, []) when the library has none. Reads memory."""
    try:
        held = quarantine.read(target.read, target.symbol_address("__redzone_quarantine"))
    except target.TargetError:
        held = None
    return held if held else (None, [])


def _scan_checked():
    """(freed blocks, nvtx regions) a scan checked, read after it: the held entries whose fill is done and the
    registered regions with slack."""
    _head, entries = _held()
    blocks, regions = quarantine.checked(entries)
    try:
        regions += nvtx.checked(target.read, target.symbol_address("__redzone_nvtx"))
    except (target.TargetError, nvtx.NvtxError):
        pass
    return blocks, regions


class ScanCommand(gdb.Command):
    """Check every band now, through the library's agent thread (no code runs on your threads).

Usage: redzone scan [--json]

Prints the library's own report lines and its `redzone scan: N zones checked, M violated` summary.
Violated bands are re-filled, so a later scan reports only new writes."""

    def __init__(self):
        super().__init__("redzone scan", gdb.COMMAND_DATA)

    def invoke(self, arg, from_tty):
        _guard("scan", self.run, gdb.string_to_argv(arg))

    def run(self, argv):
        as_json = args.parse_json_only(argv, "scan")
        result, out = serve(target.OP_SCAN)
        blocks, regions = _scan_checked() if result >= 0 else (0, 0)
        if as_json:
            lines = [l for l in out.splitlines() if l.startswith("REDZONE VIOLATION")]
            if result < 0:
                raise gdb.GdbError(json_error("scan", f"the scan failed: {view.status_name(result)}"
                                              f"{target.busy_advice(result)}", result=result, violations=lines))
            summary = re.search(r"redzone scan: (\d+) zones? checked", out)
            _write(json.dumps({"result": result, "checked": int(summary.group(1)) if summary else None,
                               "violated": max(result, 0), "held_checked": blocks, "regions_checked": regions,
                               "violations": lines, "error": None}))
            return
        _write(nvtx.scan_summary(out, blocks, regions) if result >= 0 else out)
        if result < 0:
            raise target.TargetError(f"the scan failed: {view.status_name(result)}{target.busy_advice(result)}")


class PoisonCommand(gdb.Command):
    """Poison window: bands of zones with creation index in [LO, HI) get 0xEE, all others 0x00.

Usage: redzone poison LO HI

LO and HI are gdb expressions ($lo, 100, $i+1). Zones allocated later follow the same rule until
`redzone unpoison`. A scan right after reports nothing. Use it to bisect a read past the end."""

    def __init__(self):
        super().__init__("redzone poison", gdb.COMMAND_DATA)

    def invoke(self, arg, from_tty):
        _guard("poison", self.run, gdb.string_to_argv(arg))

    def run(self, argv):
        lo_text, hi_text = args.parse_poison(argv)
        _refuse_core("poison")
        lo, hi = args.check_window(_eval_int(lo_text, "LO"), _eval_int(hi_text, "HI"))
        result, out = serve(target.OP_POISON, lo, hi)
        _write(out)
        if result < 0:
            raise target.TargetError(f"poison failed: {view.status_name(result)}")
        inside = outside = 0
        _, data = target.state()
        for _nb, index, _violated, watched in target.Registry(data).walk():
            if not watched:
                continue
            if lo <= index < hi:
                inside += 1
            else:
                outside += 1
        _write(f"redzone poison [{lo}, {hi}): {inside} zone(s) now hold 0xEE, {outside} hold 0x00")


class UnpoisonCommand(gdb.Command):
    """End the poison window: every band gets the fill byte again.

Usage: redzone unpoison"""

    def __init__(self):
        super().__init__("redzone unpoison", gdb.COMMAND_DATA)

    def invoke(self, arg, from_tty):
        _guard("unpoison", self.run, gdb.string_to_argv(arg))

    def run(self, argv):
        args.parse_none(argv, "unpoison")
        _refuse_core("unpoison")
        result, out = serve(target.OP_UNPOISON)
        _write(out)
        if result < 0:
            raise target.TargetError(f"unpoison failed: {view.status_name(result)}")
        _write("redzone unpoison: every band holds the fill byte again")


def _refuse_core(command):
    if target.is_core():
        _fail(command, "this is a core file: poison and unpoison change the program's bands, so they need a "
                       "running program")


_INTEGRAL = (gdb.TYPE_CODE_INT, gdb.TYPE_CODE_BOOL, gdb.TYPE_CODE_CHAR, gdb.TYPE_CODE_ENUM)


def _eval_int(text, what):
    """An integer gdb expression ($lo, 100, $i+1): not a float (1.9 is refused, never truncated)."""
    args.check_literals(text, what)
    try:
        value = gdb.parse_and_eval(text)
        if value.type.strip_typedefs().code not in _INTEGRAL:
            raise UsageError(f"{what} {text!r} is not an integer (it is of type {value.type})")
        return int(value)
    except gdb.error as e:
        raise UsageError(f"{what} {text!r} is not a number: {e}")


class ViolationsCommand(gdb.Command):
    """Print the violations the last scan found, from memory (works on a core file: post-mortem).

Usage: redzone violations [--json]

At most the first 16 violated zones of the last scan are kept; the summary line gives the full count."""

    def __init__(self):
        super().__init__("redzone violations", gdb.COMMAND_DATA)

    def invoke(self, arg, from_tty):
        _guard("violations", self.run, gdb.string_to_argv(arg))

    def run(self, argv):
        as_json = args.parse_json_only(argv, "violations")
        _, data = target.state()
        checked = view.u64(data, view.offset("state.last_scan_checked"))
        violated = view.u64(data, view.offset("state.last_scan_violated"))
        kept = view.u32(data, view.offset("state.last_violation_count"))
        size = view.size("violation")
        base = view.offset("state.last_violations")
        records = [data[base + i * size: base + (i + 1) * size] for i in range(kept)]
        lines = [view.violation(r) for r in records]
        found_by = [FOUND_BY.get(r) for r in records]
        scans = _counter(data, "scans")
        # At a stop inside a scan, the scan counts once its reports are printed: this one is not counted yet.
        now = stepping.stop_check() if not target.is_core() else None
        running = now in stops.SCANS
        if as_json:
            _write(json.dumps({"scans": scans, "scan_running": running, "checked": checked, "violated": violated,
                               "violations": lines, "found_by": found_by,
                               "stopped_in": now}))
            return
        for line, by in zip(lines, found_by):
            _write(line + (f"  (found by the {stops.CHECK_WORDS[by]})" if by in stops.CHECK_WORDS else ""))
        if running:
            _write(f"the {stops.CHECK_WORDS[now]} this stop is in: {checked} zones checked, {violated} violated "
                   f"(it stops at each of its reports; {scans} scan(s) finished before it)")
            return
        if scans == 0:
            if not lines:
                _write("redzone: no scan has run yet, and none of the library's own checks (at a free, after a "
                       "launch) has found a violation")
                return
            known = sorted({by for by in found_by if by})
            how = " and ".join(f"the {stops.CHECK_WORDS[by]}" for by in known) if known else None
            if how and None not in found_by:
                _write(f"no scan has run yet; {kept} violation(s) found by {how}")
            else:
                _write(f"no scan has run yet; {kept} violation(s) found by the library's own checks (at a free, "
                       "or after a launch with `set redzone scan launch`)")
            return
        if violated > kept:
            _write(f"(and {violated - kept} more violated zones not kept)")
        since = kept - min(violated, view.LAST_VIOLATIONS)
        _write(f"last scan: {checked} zones checked, {violated} violated" +
               (f"; {since} more found since by the library's own checks" if since > 0 else ""))


_NEW_BP = []


def _new_hook_breakpoints():
    _NEW_BP.extend(HookBreakpoint(hook) for hook in stops.HOOKS)


def _auto_bool(value):
    if debugger.is_none(value):
        return "auto"
    return "on" if value else "off"


def _counter(data, name):
    for line in view.counters(data).splitlines():
        key, value = line.split(": ")
        if key == name:
            return int(value)
    return 0


class StatsCommand(gdb.Command):
    """Print every mapping counter as `name: value` (read from memory: works on a core file).

Usage: redzone stats [--json]"""

    def __init__(self, name="redzone stats"):
        super().__init__(name, gdb.COMMAND_DATA)

    def invoke(self, arg, from_tty):
        _guard("stats", self.run, gdb.string_to_argv(arg))

    def run(self, argv):
        as_json = args.parse_json_only(argv, "stats")
        _, data = target.state()
        _write(view.counters(data, json=as_json))


class StatusCommand(gdb.Command):
    """Show whether the library is loaded, the agent alive, and the options in effect.

Usage: redzone status"""

    def __init__(self):
        super().__init__("redzone status", gdb.COMMAND_STATUS)

    def invoke(self, arg, from_tty):
        _guard("status", self.run, gdb.string_to_argv(arg))

    def run(self, argv):
        args.parse_none(argv, "status")
        lines = []
        try:
            addr, data = target.state()
        except target.TargetError as e:
            _write(f"library: not loaded ({session.explain(e)})")
            return
        o = lambda f: view.u64(data, view.offset(f))
        b = lambda f: data[view.offset(f)]
        lines.append(f"library: loaded (state block at 0x{addr:x}, {'core file' if target.is_core() else 'live process'})")
        pad = o("state.pad_bytes")
        if not b("state.options_loaded"):
            lines.append("bands: not set up yet (the library reads its options at the program's first device "
                         f"allocation; METRALE_REDZONE or `set redzone bytes` decide: {_planned_bytes()})")
        else:
            lines.append(f"bands: {pad} bytes" + (" (off)" if pad == 0 else "") +
                         f", fill 0x{b('state.fill'):02x}, min-idx {o('state.min_idx')}")
        tr = o("state.trace_idx")
        lines.append(f"trace-idx: {'unset' if tr == (1 << 64) - 1 else tr}")
        if b("state.poison_active"):
            lines.append(f"poison window: [{o('state.poison_lo')}, {o('state.poison_hi')})")
        lines.append(f"zones: {o('state.zone_count')} registered, next creation index {o('state.next_index')}")
        lines.append(f"guard pages: {o('state.guard_live')} allocations holding {o('state.guard_bytes')} bytes of "
                     f"device memory and address space (cap {o('state.guard_cap')}; METRALE_REDZONE_GUARD)")
        try:
            head = target.read(target.symbol_address("__redzone_agent"), view.size("agent.header"))
            alive = view.u32(head, view.offset("agent.alive")) and not target.is_core()
            lines.append(f"agent: {'alive, LWP ' + str(view.u64(head, view.offset('agent.tid'))) if alive else 'not running'}"
                         " (transport: futex request block + scheduler-locking; no inferior calls)")
        except target.TargetError as e:
            lines.append(f"agent: unavailable ({e})")
        lines.append(f"autoscan: {args.autoscan_text(SETTINGS.autoscan)}; timeout {SETTINGS.timeout:g} s")
        try:
            chosen = target.choose_method(SETTINGS.method)
        except target.TargetError:
            chosen = "none (the agent method was chosen, and this debugger cannot serve it)"
        how = {"agent": "the redzone-agent thread, resumed alone", "memory": "the debugger's memory reads and "
               "writes, resuming nothing"}
        lines.append(f"method: {SETTINGS.method} (scan and poison now: {chosen}"
                     f"{': ' + how[chosen] if chosen in how else ''})")
        if target.is_core():
            lines[-1] += "; a core file: scan reads and reports, writes nothing"
        lines.append(f"debugger: {debugger.describe()}; {_cpu_note()}")
        lines.append("note: gdb never runs code on your threads")
        _write("\n".join(lines))


def _planned_bytes():
    """What the next allocation will use, as far as the plugin knows (the program's environment may differ)."""
    override = settings.overriding_value("bytes")
    if override is not None:
        return f"{override[0]} bytes ({override[1]} sets METRALE_REDZONE, which wins over `set redzone bytes`)"
    value = SETTINGS.env.get("bytes")
    return f"{value} bytes (set redzone bytes)" if value else "64 bytes unless the program's METRALE_REDZONE says otherwise"


def _cpu_note():
    try:
        with open("/proc/cpuinfo") as f:
            amx = any(" amx_tile" in line for line in f if line.startswith("flags"))
    except OSError:
        amx = False
    if amx:
        return "the CPU has AMX: gdb 13 cannot make inferior calls here, and redzone needs none"
    return "redzone makes no inferior calls"


# ---- break on violation or refused copy -----------------------------------------------------------------
class HookBreakpoint(gdb.Breakpoint):
    """Stops at one of the library's debugger hooks (stops.HOOKS): a violation it reports on its own (free,
    sync, exit, launch checks), or a copy or memset it refuses for running outside its buffer (or a free of
    a pointer into a front band)."""

    def __init__(self, hook):
        super().__init__(hook.symbol, internal=True)
        self.silent = True
        self.hook = hook

    def stop(self):
        if agent.Agent.busy or target.agent_serving():
            return False  # a scan gdb asked for reports instead of stopping
        how = check = None
        try:
            _, state = target.state()
            record = target.read(int(gdb.parse_and_eval(self.hook.argument)), view.size(self.hook.record))
            if self.hook is stops.REFUSAL:
                how = record[view.offset("refusal.how")]  # a copy, a memset or a free
            else:
                check = stops.check_of(stepping.source_names(stepping.frames_of()))
                FOUND_BY[record] = check
                del_old(FOUND_BY)
            # The library's own line did not reach this terminal (its log file, or the output of a program
            # gdb attached to): show it here too.
            if not target.log_reaches_debugger(view.u32(state, view.offset("state.log_fd"))):
                line = view.violation(record) if self.hook is stops.VIOLATION else view.refusal(record)
                gdb.write(line + "\n")
        except (gdb.error, target.TargetError) as e:
            gdb.write(f"redzone: {self.hook.kind} reported (record unreadable: {e})\n")
        # Said by _on_stop once the stop is reported, and only for the stop at this hit: a hit that an ignore
        # count (`continue N`) or a condition passes over is not the next stop.
        HookBreakpoint.stopped = (self.hook.kind, how, check, self.number, gdb.selected_thread().global_num)
        return True

    stopped = None


FOUND_BY = {}  # violation record bytes -> the check that found it (stops.check_of), seen at hook stops


def del_old(found):
    while len(found) > 256:
        del found[next(iter(found))]


def _select_program_frame(kind, how, check=None):
    """After a hook stop: select the program's call that led to the violation or made the refused copy (the
    first frame that is neither redzone's, the driver's nor the C runtime's start or exit path, as ASan
    reports name it) and say which it is; none at an exit scan after main returned."""
    found = stepping.program_frame(stepping.frames_of())
    if found is None:
        gdb.write(stops.stop_sentence(kind, None, how, check) + "\n")
        return
    level, frame = found
    frame.select()
    sal = frame.find_sal()
    where = f" at {sal.symtab.filename}:{sal.line}" if not debugger.is_none(sal.symtab) and sal.line else ""
    gdb.write(stops.stop_sentence(kind, (level, frame.name(), where), how, check) + "\n")


class BreakCommand(gdb.Command):
    """Stop when the library reports a violation by itself (at free, sync, exit or after a launch), or
refuses a copy or memset that runs outside its buffer, or a free of a pointer into a front band.

Usage: redzone break on|off

At the stop the program's own frame that led to it is selected. Scans that gdb asks for (redzone scan,
autoscan) never stop; they print their reports."""

    def __init__(self):
        super().__init__("redzone break", gdb.COMMAND_BREAKPOINTS)
        self.bps = []

    def invoke(self, arg, from_tty):
        _guard("break", self.run, gdb.string_to_argv(arg))

    def run(self, argv):
        on = args.parse_on_off(argv, "break")
        if on and not self.bps:
            pending = gdb.parameter("breakpoint pending")
            gdb.execute("set breakpoint pending on", to_string=True)
            try:
                # Made inside a captured command: gdb's "Function ... not defined" for a pending location
                # would reach the user otherwise; the sentence below says what it means.
                gdb.execute(f"python import sys; sys.modules['{__name__}']._new_hook_breakpoints()", to_string=True)
                self.bps = _NEW_BP[:]
                del _NEW_BP[:]
            finally:
                gdb.execute(f"set breakpoint pending {_auto_bool(pending)}", to_string=True)
            if any(bp.pending for bp in self.bps):
                _write("redzone break: on (armed for when the program starts and loads libredzone)")
                return
        elif not on and self.bps:
            for bp in self.bps:
                bp.delete()
            self.bps = []
        _write(f"redzone break: {'on' if on else 'off'}")


# ---- settings ------------------------------------------------------------------------------------------
# ---- autoscan -------------------------------------------------------------------------------------------
def _hook_stop_of(event):
    """The hook hit this stop is at ((kind, how, check), from HookBreakpoint.stop), or None: each stop is
    judged by itself. A hit the debugger passed over (an ignore count, `continue N`) leaves a record behind
    that is no stop's: it counts only when this stop's own breakpoints include that hook and the stopped
    thread is the one that hit it, still inside the hook."""
    hit, HookBreakpoint.stopped = HookBreakpoint.stopped, None
    if not hit or agent.Agent.busy:
        return None
    kind, how, check, number, thread = hit
    bps = getattr(event, "breakpoints", None) or []
    if bps and not any(b.number == number for b in bps):
        return None
    try:
        if gdb.selected_thread().global_num != thread or not stepping.at_hook():
            return None
    except gdb.error:
        return None
    return kind, how, check


def _on_stop(event):
    at_hook = _hook_stop_of(event)
    if at_hook:
        try:
            _select_program_frame(*at_hook)
        except gdb.error as e:
            gdb.write(f"redzone: could not select the program's frame ({e})\n")
    if stepping.STEPPING["out"]:
        return  # hook-next/hook-step returning to the program: gdb's own command goes on from this stop
    if agent.Agent.busy or SETTINGS.autoscan == "off":
        return
    if at_hook and target.registry_held():
        # The stopped thread is inside the library's own check and holds the zone registry: a scan now
        # would be refused, and the library's report of this stop is already printed above.
        _write("redzone autoscan: skipped at this violation stop: the library is in the middle of its own check "
               "(whose report is above) and holds the zone registry; `next` or `finish` returns to the "
               "program, where `redzone scan` runs, and autoscan scans at the next stop")
        return
    if isinstance(SETTINGS.autoscan, frozenset):
        bps = getattr(event, "breakpoints", None) or []
        if not any(b.number in SETTINGS.autoscan for b in bps):
            return
    _autoscan()


AUTOSCANS = []  # what each autoscan printed, newest last (kept for `redzone status` and tests)


def _autoscan():
    try:
        result, out = serve(target.OP_SCAN)
        _write(out)  # the library's own lines, unchanged
        AUTOSCANS.append(out)
        del AUTOSCANS[:-100]
    except target.TargetError as e:
        _write(f"redzone autoscan: skipped ({e})")
    except gdb.error as e:
        _write(f"redzone autoscan: skipped ({e})")


def serve(op, arg0=0, arg1=0):
    return target.serve(op, arg0, arg1, timeout=SETTINGS.timeout, method=SETTINGS.method)


class ViolationsFunction(gdb.Function):
    """$redzone_violations() - violations found so far (read from memory), for breakpoint conditions.

Usage: $redzone_violations()"""

    def __init__(self):
        super().__init__("redzone_violations")

    def invoke(self, *argv):
        if argv:
            raise gdb.GdbError("$redzone_violations takes no arguments\nUsage: $redzone_violations()")
        try:
            _, data = target.state()
        except target.TargetError as e:
            raise gdb.GdbError(f"$redzone_violations: {session.explain(e)}")
        counters = view.counters(data)
        for line in counters.splitlines():
            name, value = line.split(": ")
            if name == "violations":
                return int(value)
        return 0


def register():
    completion.install(globals())  # completers and help on the command classes, before they are made
    debugger.init()
    debugger.install_workarounds()
    RedzonePrefix()
    ListCommand()
    ScanCommand()
    PoisonCommand()
    UnpoisonCommand()
    StatsCommand()
    StatsCommand("redzone counters")
    ViolationsCommand()
    StatusCommand()
    BreakCommand()
    ViolationsFunction()
    settings.register()
    session.register()
    stepping.register()
    gdb.events.stop.connect(_on_stop)
