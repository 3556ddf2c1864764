#!/usr/bin/env python3
"""redzone: run CUDA programs with red zones (guard bands after every device allocation), find the allocation
a program reads past the end of (bisect), or debug it in gdb.

Usage:
  redzone run [options] -- PROGRAM [ARGS...]
  redzone bisect [options] -- PROGRAM [ARGS...]
  redzone gdb [options] -- PROGRAM [ARGS...]
  redzone --help | redzone run --help | redzone bisect --help

This file is configured by CMake into bin/redzone; LIBREDZONE and EMU_DIR below are filled in then.
"""
import argparse
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
LIBREDZONE = os.path.normpath(os.path.join(HERE, "@RZ_LIBREDZONE@"))
EMU_DIR = os.path.normpath(os.path.join(HERE, "@RZ_EMU_DIR@"))
GDB_PLUGIN = os.path.normpath(os.path.join(HERE, "@RZ_GDB_PLUGIN@"))

# option -> (environment variable, help)
RUN_OPTIONS = [
    ("--bytes", "METRALE_REDZONE", "N", "band size in bytes after every allocation (default 64; 0 = off)"),
    ("--fill", "METRALE_REDZONE_FILL", "B", "band byte, decimal 0-255 (default 238 = 0xEE)"),
    ("--min-idx", "METRALE_REDZONE_MIN_IDX", "N", "pad only allocations with creation index >= N"),
    ("--trace-idx", "METRALE_REDZONE_TRACE_IDX", "N", "log a host backtrace when allocation #N is made"),
    ("--scan", "METRALE_REDZONE_SCAN", "LIST", "when to scan: comma list of free,sync,exit,fatal,none (default free,exit,fatal)"),
    ("--log", "METRALE_REDZONE_LOG", "PATH", "write reports to PATH instead of stderr (%%p = pid)"),
    ("--poison", "METRALE_REDZONE_POISON", "LO:HI",
     "poison window: bands of allocations #LO..#HI-1 get 0xEE, all others 0x00 (0:0: every band 0x00)"),
]

DESCRIPTION = """\
Runs PROGRAM with libredzone.so preloaded (into PROGRAM itself, not a shell). Every device allocation
the program makes (driver API, or cudaMalloc through the runtime) gets a trailing guard band; bands are
checked when a buffer is freed and at exit (see --scan), and every write past the end is reported:

  REDZONE VIOLATION alloc#<idx> user_bytes=<n> pad=<p> : bytes [<first>..=<last>] past the end were
  written (<changed> of <p> pad bytes changed), first bad value 0x<hh>

Options map to METRALE_REDZONE* environment variables; a variable already set in the environment wins
over the option. Red zones are on at 64 bytes unless told otherwise.

Exit status: the program's (128+N if it died of signal N), or the --error-exitcode value when violations
were found. 127: PROGRAM could not be started."""


BISECT_DESCRIPTION = """\
Finds the allocation PROGRAM reads past the end of. A read past the end pulls band bytes into the
computation, so the output changes when they do. Each run gives the program a poison window [lo, hi)
(METRALE_REDZONE_POISON): bands of allocations #lo..#hi-1 hold 0xEE, all others 0x00. bisect runs the
empty window twice (is the output deterministic?), then the full window (does the output depend on band
bytes at all?), then halves the window until it names the allocation (or, one after the other, each of
several), with its size, where it was allocated, and the `redzone run --poison` line that shows it with a
one-allocation window. One culprit among N allocations takes at most ceil(log2 N) + 3 runs.

Runs get stdin from /dev/null; the library's own lines go to a log file, not to the compared output.
Every run must make the same allocations in the same order (the count is checked).

Exit status: 0 when allocations were named; 1 when no read past the end shows in the compared output;
3 when bisecting is impossible (output differs between identical runs, allocations differ, a run crashed
or timed out, --max-runs reached); 2 for usage errors; 127 when PROGRAM cannot be started."""


def build_parser():
    top = argparse.ArgumentParser(
        prog="redzone",
        description="Catch CUDA device-memory overruns with guard bands (red zones).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="commands:\n  run     run a program with red zones (redzone run --help)\n"
        "  bisect  find the allocation a program reads past the end of (redzone bisect --help)\n"
        "  gdb     debug a program with red zones in cuda-gdb or gdb (redzone gdb --help)\n\n"
        "Reference: docs/running.md, docs/bisect.md, docs/gdb.md, docs/options.md, docs/report-format.md",
    )
    sub = top.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser(
        "run",
        help="run a program with red zones",
        usage="redzone run [options] -- PROGRAM [ARGS...]",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for flag, var, metavar, text in RUN_OPTIONS:
        run.add_argument(flag, metavar=metavar, dest=var, help=f"{text} [{var}]")
    run.add_argument("--error-exitcode", metavar="N", type=int,
                     help="exit with N when any violation was found (as compute-sanitizer does)")
    run.add_argument("--emulated-device", action="store_true",
                     help="use the emulated CUDA driver (host memory; for machines without a GPU)")
    run.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS...]")
    dbg = sub.add_parser(
        "gdb",
        help="debug a program with red zones in cuda-gdb or gdb",
        usage="redzone gdb [--emulated-device] [--gdb PATH] -- PROGRAM [ARGS...]",
        description="Starts cuda-gdb when it is found (else gdb) with the redzone plugin loaded; `run` then "
        "starts PROGRAM with libredzone.so preloaded. Commands: redzone list|scan|poison|stats|status|break "
        "(see `help redzone` and docs/gdb.md).",
    )
    dbg.add_argument("--emulated-device", action="store_true", help="run the program on the emulated driver")
    dbg.add_argument("--gdb", metavar="PATH", help="the debugger to start (default: cuda-gdb, else gdb)")
    dbg.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS...]")
    bis = sub.add_parser(
        "bisect",
        help="find the allocation a program reads past the end of",
        usage="redzone bisect [--compare stdout|stderr|exit|file:PATH] [--filter REGEX] [--timeout S] "
        "[--max-runs N] [--bytes N] [--min-idx N] [--emulated-device] -- PROGRAM [ARGS...]",
        description=BISECT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bis.add_argument("--compare", metavar="WHAT", default="stdout",
                     help="the output to compare between runs: stdout (default), stderr, exit (the exit status) "
                     "or file:PATH (a file the program writes; removed before each run)")
    bis.add_argument("--filter", metavar="REGEX", action="append", default=[],
                     help="remove every match of REGEX from each line before comparing (timestamps, pids, ...); "
                     "a line left empty is dropped. Repeatable")
    bis.add_argument("--timeout", metavar="S", type=float,
                     help="seconds one run may take; a run past it is killed with its process group "
                     "(default: no limit)")
    bis.add_argument("--max-runs", metavar="N", type=int, help="give up after N runs (default: no limit)")
    bis.add_argument("--bytes", metavar="N", dest="METRALE_REDZONE",
                     help="band size in bytes (default 64; a read further past the end than this is not seen)")
    bis.add_argument("--min-idx", metavar="N", dest="METRALE_REDZONE_MIN_IDX",
                     help="bands for allocations #N and later only (skip allocations whose order is not stable)")
    bis.add_argument("--emulated-device", action="store_true",
                     help="use the emulated CUDA driver (host memory; for machines without a GPU)")
    bis.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS...]")
    return top, run, dbg, bis


def cmd_gdb(args, parser):
    import shutil
    program = args.program[1:] if args.program and args.program[0] == "--" else args.program
    if not program:
        parser.error("no PROGRAM given (usage: redzone gdb [--emulated-device] [--gdb PATH] -- PROGRAM [ARGS...])")
    debugger = args.gdb or shutil.which("cuda-gdb") or shutil.which("gdb")
    if not debugger:
        print("redzone: neither cuda-gdb nor gdb was found (apt-get install gdb)", file=sys.stderr)
        return 127
    cmd = [debugger, "-q", "-ex", f"source {GDB_PLUGIN}"]
    if args.emulated_device:
        cmd += ["-ex", "set redzone emulated-device on"]
    cmd += ["--args"] + program
    os.execvp(cmd[0], cmd)


def check_value(run_parser, var, value):
    """The library warns and falls back on bad values; the launcher refuses them outright."""
    if var == "METRALE_REDZONE_POISON":
        try:
            parse_window(value)
        except ValueError as e:
            run_parser.error(f"--poison {value!r}: {e}")
    elif var in ("METRALE_REDZONE", "METRALE_REDZONE_MIN_IDX", "METRALE_REDZONE_TRACE_IDX"):
        if not re.fullmatch(r"\+?[0-9]+", value):
            run_parser.error(f"{var} value {value!r} is not a non-negative decimal number")
    elif var == "METRALE_REDZONE_FILL":
        if not re.fullmatch(r"\+?[0-9]+", value) or int(value) > 255:
            run_parser.error(f"--fill {value!r} is not a byte (decimal 0-255)")
    elif var == "METRALE_REDZONE_SCAN":
        parts = value.split(",")
        if not all(p in ("free", "sync", "exit", "fatal", "none") for p in parts) or ("none" in parts and len(parts) > 1):
            run_parser.error(f"--scan {value!r} is not a comma list of free, sync, exit, fatal (or none)")


def child_env(args, run_parser, summary_path):
    env = dict(os.environ)
    for _flag, var, _metavar, _text in RUN_OPTIONS:
        value = getattr(args, var)
        if value is not None:
            check_value(run_parser, var, value)
            env.setdefault(var, value)  # an explicitly set variable wins
    env.setdefault("METRALE_REDZONE", "64")
    env["METRALE_REDZONE_SUMMARY"] = summary_path
    preload = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = LIBREDZONE + (":" + preload if preload else "")
    if args.emulated_device:
        path = env.get("LD_LIBRARY_PATH", "")
        env["LD_LIBRARY_PATH"] = EMU_DIR + (":" + path if path else "")
    return env


def violations_in(summary_path):
    total = 0
    try:
        with open(summary_path) as f:
            for line in f:
                m = re.search(r"violations=(\d+)", line)
                if m:
                    total += int(m.group(1))
    except FileNotFoundError:
        pass
    return total


def cmd_run(args, run_parser):
    program = args.program
    if program and program[0] == "--":
        program = program[1:]
    if not program:
        run_parser.error("no PROGRAM given (usage: redzone run [options] -- PROGRAM [ARGS...])")
    if not os.path.exists(LIBREDZONE):
        print(f"redzone: {LIBREDZONE} is missing (is redzone installed?)", file=sys.stderr)
        return 127
    if args.emulated_device and not os.path.isdir(EMU_DIR):
        print(f"redzone: the emulated driver folder {EMU_DIR} is missing", file=sys.stderr)
        return 127
    fd, summary_path = tempfile.mkstemp(prefix="redzone-summary-")
    os.close(fd)
    try:
        env = child_env(args, run_parser, summary_path)
        try:
            proc = subprocess.Popen(program, env=env)
        except OSError as e:
            print(f"redzone: cannot run {program[0]}: {e.strerror}", file=sys.stderr)
            return 127
        while True:
            try:
                code = proc.wait()
                break
            except KeyboardInterrupt:
                continue  # the program got the SIGINT too; its exit decides
        if code < 0:
            code = 128 - code
        if args.error_exitcode is not None and violations_in(summary_path) > 0:
            return args.error_exitcode
        return code
    finally:
        os.unlink(summary_path)


# ---- bisect: pure helpers (no processes; tests/python/test_bisect.py drives them with fake programs) ----

EMPTY_WINDOW = (0, 0)


def parse_window(text):
    """'<lo>:<hi>' -> (lo, hi), as the library parses METRALE_REDZONE_POISON; ValueError otherwise."""
    m = re.fullmatch(r"\+?([0-9]+):\+?([0-9]+)", text)
    if not m:
        raise ValueError("not a window LO:HI (two decimal creation indices)")
    lo, hi = int(m.group(1)), int(m.group(2))
    if hi >= 1 << 64 or lo > hi:
        raise ValueError("LO must not be greater than HI (and both below 2^64)")
    return lo, hi


def window_text(window):
    return f"[{window[0]}, {window[1]})"


def parse_summary(text):
    """METRALE_REDZONE_SUMMARY lines -> one dict of integer fields per process that allocated."""
    out = []
    for line in text.splitlines():
        fields = dict(re.findall(r"(\w+)=(\d+)", line))
        if "allocations" in fields:
            out.append({k: int(v) for k, v in fields.items()})
    return out


def allocation_counts(summaries):
    """The stability key of a run: allocations per allocating process (sorted: exit order may vary)."""
    return tuple(sorted(s["allocations"] for s in summaries))


def zones_in(counts, summaries=()):
    """Creation indices a window must cover: every process numbers its allocations from 0. Failed calls take
    an index too but are not counted; a summary that has `next_index=` (the index counter) says exactly."""
    spans = [s["next_index"] for s in summaries if "next_index" in s]
    return max(list(counts) + spans) if counts or spans else 0


def filter_output(text, patterns):
    """Remove every match of each compiled pattern from each line; drop lines that only the filter emptied."""
    if not patterns:
        return text
    kept = []
    for line in text.split("\n"):
        new = line
        for rx in patterns:
            new = rx.sub("", new)
        if new.strip() or not line.strip():
            kept.append(new)
    return "\n".join(kept)


def first_difference(a, b, what):
    """Where two different outputs first differ: (place, a's part, b's part), parts quoted."""
    if what == "exit":
        return "exit status", a, b
    la, lb = a.split("\n"), b.split("\n")
    for i in range(max(len(la), len(lb))):
        x = la[i] if i < len(la) else None
        y = lb[i] if i < len(lb) else None
        if x != y:
            show = lambda v: "(no such line)" if v is None else repr(v)  # noqa: E731
            return f"{what} line {i + 1}", show(x), show(y)
    return what, repr(a), repr(b)


def parse_trace(log_text, index):
    """The METRALE_REDZONE_TRACE_IDX block of allocation #index in a log: (user_bytes, pad, frames), where
    the sizes are None when the line has none; or None when there is no such block."""
    lines = log_text.split("\n")
    head = re.compile(r"redzone: METRALE_REDZONE_TRACE_IDX=%d: allocation #%d"
                      r"(?: \(user_bytes=(\d+) pad=(\d+)\))? made here:$" % (index, index))
    for i, line in enumerate(lines):
        m = head.search(line)
        if m:
            frames = []
            for f in lines[i + 1:]:
                if not re.match(r"\s+#\d+ ", f):
                    break
                frames.append(f.strip())
            size = (int(m.group(1)), int(m.group(2))) if m.group(1) else (None, None)
            return size[0], size[1], frames
    return None


def run_bound(zones):
    """Runs bisect needs at most for one culprit among `zones` allocations: 2 empty + 1 full + the halvings."""
    return 3 + (math.ceil(math.log2(zones)) if zones > 1 else 0)


class Outcome:
    """What one run gives the search: the compared output (already filtered), the allocation counts (the
    stability key) and the number of creation indices to search (default: the largest count)."""

    def __init__(self, output, counts, zones=None):
        self.output = output
        self.counts = tuple(counts)
        self.zones = zones_in(self.counts) if zones is None else zones


class Culprit:
    def __init__(self, index, window, before, after):
        self.index = index      # creation index
        self.window = window    # the run whose output named it: its window ends at index + 1
        self.before = before    # output with this allocation's band 0x00 ...
        self.after = after      # ... and 0xEE (everything else equal)


class Verdict:
    """How a bisect ended. kind: found, independent, no-zones, nondeterministic, unstable, inconsistent,
    gave-up."""

    def __init__(self, kind, runs, **info):
        self.kind = kind
        self.runs = runs
        self.culprits = info.pop("culprits", [])
        self.__dict__.update(info)


class _Stop(Exception):
    def __init__(self, verdict):
        super().__init__(verdict.kind)
        self.verdict = verdict


def bisect(run, min_idx=0, max_runs=None, progress=None):
    """The search. run(window) runs the program once with poison window (lo, hi) and returns an Outcome
    (it raises to abort: a crash, a timeout). progress(k, bound, window, purpose) is told before each run;
    bound is None until the number of allocations is known.

    Model: a window's output depends only on which culprits (allocations read past the end) lie in it, and
    differs from the empty window's as soon as one does; symmetrically it equals the full window's only
    when all of them do. So prefix windows [min_idx, m) answer "is the lowest remaining culprit below m?"
    by comparing with the previous culprit's window, and equality with the full window's output proves
    there is none left, with no extra run: one culprit among N takes 2 + 1 + ceil(log2 N) runs."""
    runs = []
    state = {"bound": None, "base": None, "culprits": [], "range": None}

    def do(window, purpose):
        if max_runs is not None and len(runs) >= max_runs:
            raise _Stop(Verdict("gave-up", len(runs), culprits=state["culprits"], range=state["range"]))
        if progress:
            progress(len(runs) + 1, state["bound"], window, purpose)
        out = run(window)
        runs.append((window, out))
        base = state["base"]
        if base is not None and out.counts != base.counts:
            raise _Stop(Verdict("unstable", len(runs), counts=(base.counts, out.counts), at=(1, len(runs)),
                                window=window, culprits=state["culprits"]))
        return out

    try:
        first = do(EMPTY_WINDOW, "empty window: every band 0x00")
        second = do(EMPTY_WINDOW, "empty window again: is the output deterministic?")
        if second.counts != first.counts:
            return Verdict("unstable", 2, counts=(first.counts, second.counts), at=(1, 2), window=EMPTY_WINDOW)
        if second.output != first.output:
            return Verdict("nondeterministic", 2, outputs=(first.output, second.output))
        state["base"] = first
        n = first.zones
        if n <= min_idx:
            return Verdict("no-zones", 2, zones=n)
        state["bound"] = run_bound(n - min_idx)
        full_window = (min_idx, n)
        full = do(full_window, "full window: every band 0xEE").output
        if full == first.output:
            return Verdict("independent", len(runs), zones=n, full_window=full_window)
        known = {n: full}  # m -> output of window [min_idx, m)
        ref_end, ref = min_idx, first.output
        while True:
            # The next culprit is the lowest one at or above ref_end: the smallest m whose window's output
            # differs from ref. Windows already run narrow the range before any new run.
            lo, hi = ref_end, n
            for m, out in known.items():
                if ref_end < m <= n:
                    if out == ref:
                        lo = max(lo, m)
                    else:
                        hi = min(hi, m)
            if lo >= hi:
                return Verdict("inconsistent", len(runs), culprits=state["culprits"], range=(ref_end, n))
            state["range"] = (lo, hi)
            if state["culprits"]:
                state["bound"] = len(runs) + (math.ceil(math.log2(hi - lo)) if hi - lo > 1 else 0)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                out = do((min_idx, mid), "")
                known[mid] = out.output
                if out.output == ref:
                    lo = mid
                else:
                    hi = mid
                state["range"] = (lo, hi)
            state["culprits"].append(Culprit(hi - 1, (min_idx, hi), ref, known[hi]))
            if known[hi] == full:
                return Verdict("found", len(runs), culprits=state["culprits"], zones=n)
            ref_end, ref = hi, known[hi]
    except _Stop as stop:
        return stop.verdict


# ---- bisect: running the program (thin glue) ----------------------------------------------------------

class RunFailed(Exception):
    """A run that did not finish normally: the message says which, with what window, and why."""


def signal_name(num):
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def become_subreaper():
    """Orphans of a run (processes the program started, whose parent died) get reparented to us instead of
    init, so end_group can wait for them: when bisect returns, nothing of a run is left."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def end_group(pgid):
    """SIGKILL the run's whole process group (the program and anything it started and left behind), then
    reap every member that is our child: the program and, as subreaper, its orphans."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    while True:
        try:
            os.waitpid(-pgid, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


class ProgramRunner:
    """Runs PROGRAM once per window, each run in its own session (process group), output to files."""

    def __init__(self, program, env, compare, filters, timeout, workdir):
        self.program, self.env, self.compare, self.filters = program, env, compare, filters
        self.timeout, self.workdir = timeout, workdir
        self.logs = {}         # window -> the library's log of that run
        self.violations = 0    # writes past the end the library reported, over all runs
        self.count = 0
        become_subreaper()

    def __call__(self, window):
        self.count += 1
        k = self.count
        files = {name: os.path.join(self.workdir, f"run{k}.{name}") for name in ("out", "err", "log", "summary")}
        env = dict(self.env)
        env["METRALE_REDZONE_POISON"] = f"{window[0]}:{window[1]}"
        env["METRALE_REDZONE_LOG"] = files["log"]
        env["METRALE_REDZONE_SUMMARY"] = files["summary"]
        if window[1] > window[0]:
            env["METRALE_REDZONE_TRACE_IDX"] = str(window[1] - 1)  # a culprit is always the last of a window
        else:
            env.pop("METRALE_REDZONE_TRACE_IDX", None)
        if self.compare.startswith("file:"):
            try:
                os.unlink(self.compare[5:])
            except FileNotFoundError:
                pass
        where = f"run {k} (window {window_text(window)})"
        with open(files["out"], "wb") as out, open(files["err"], "wb") as err:
            try:
                proc = subprocess.Popen(self.program, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                        start_new_session=True)
            except OSError as e:
                raise RunFailed(f"cannot run {self.program[0]}: {e.strerror}") from None
            try:
                code = proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                raise RunFailed(f"{where} did not finish within {self.timeout:g} s; it was killed with its "
                                "process group") from None
            finally:
                # The program itself (on a timeout or Ctrl-C) and whatever it left running in its group.
                end_group(proc.pid)
                if proc.returncode is None:
                    proc.returncode = -signal.SIGKILL  # end_group reaped it
        log = read_text(files["log"])
        self.logs[window] = log
        if code < 0:
            raise RunFailed(f"{where} was killed by {signal_name(-code)}; bisect needs every run to finish. "
                            "If band bytes cause the crash, this window holds the culprit: "
                            "`redzone run --poison LO:HI` repeats any window by hand."
                            + tail_hint(read_text(files["err"])))
        summaries = parse_summary(read_text(files["summary"]))
        self.violations += sum(s.get("violations", 0) for s in summaries)
        if self.compare == "exit":
            output = str(code)
        elif self.compare.startswith("file:"):
            path = self.compare[5:]
            output = read_text(path) if os.path.exists(path) else f"(no file {path})"
        else:
            output = read_text(files["out" if self.compare == "stdout" else "err"])
        if self.compare != "exit":
            output = filter_output(output, self.filters)
        return Outcome(output, allocation_counts(summaries), zones_in(allocation_counts(summaries), summaries))


def read_text(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", errors="surrogateescape")
    except FileNotFoundError:
        return ""


def tail_hint(text):
    """The last lines a crashed run wrote, printable whatever bytes they hold."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    lines = [line for line in text.strip().split("\n") if line][-3:]
    return "".join("\n  " + line for line in lines) if lines else ""


def launcher_name():
    me = os.path.abspath(sys.argv[0])
    found = shutil.which("redzone")
    return "redzone" if found and os.path.realpath(found) == os.path.realpath(me) else me


def reproduce_line(args, program, window):
    words = [launcher_name(), "run"]
    if args.emulated_device:
        words.append("--emulated-device")
    for flag, var in (("--bytes", "METRALE_REDZONE"), ("--min-idx", "METRALE_REDZONE_MIN_IDX")):
        if getattr(args, var) is not None:
            words += [flag, getattr(args, var)]
    words += ["--poison", f"{window[0]}:{window[1]}", "--"] + program
    return " ".join(shlex.quote(w) for w in words)


def describe_verdict(v, args, program, logs, what):
    """The lines bisect prints at the end, and its exit status."""
    name = os.path.basename(program[0])
    lines = []
    if v.kind == "nondeterministic":
        lines.append(f"redzone bisect: the {what} differs between two runs with the same (empty) window, so "
                     "a change cannot be pinned on band bytes:")
        place, x, y = first_difference(v.outputs[0], v.outputs[1], what)
        lines.append(f"  {place}: {x} in run 1, {y} in run 2")
        if what != "exit":
            lines.append("  drop the varying part with --filter REGEX (repeatable), e.g. --filter '[0-9]+ ms'")
        return lines, 3
    if v.kind == "unstable":
        a, b = v.counts
        lines.append(f"redzone bisect: creation indices are not stable across runs: run {v.at[0]} made "
                     f"{count_text(a)} and run {v.at[1]} (window {window_text(v.window)}) made {count_text(b)}.")
        lines.append("  Allocations #N must be the same allocations in every run (threads racing to allocate, "
                     "work that depends on time or input, or a window that changed the program's path break "
                     "this), or bisect would name the wrong one.")
        lines.append("  Make the allocation order deterministic (run single-threaded, e.g. OMP_NUM_THREADS=1 "
                     "CUDA_LAUNCH_BLOCKING=1, with fixed input), or leave the unstable start-up out with "
                     "--min-idx N (only allocations #N and later get bands).")
        return lines + culprits_so_far(v), 3
    if v.kind == "no-zones":
        if v.zones:
            lines.append(f"redzone bisect: {name} made {v.zones} device allocations, none at or above the "
                         "minimum index (--min-idx, METRALE_REDZONE_MIN_IDX): nothing to bisect.")
        else:
            lines.append(f"redzone bisect: {name} made no device allocations that redzone saw (is it a CUDA "
                         "program, linked dynamically to libcuda.so.1 or libcudart?): nothing to bisect.")
        return lines, 1
    if v.kind == "independent":
        lines.append(f"redzone bisect: the {what} is the same with every band 0x00 (run 1) and every band 0xEE "
                     f"(run 3, window {window_text(v.full_window)}): no read past the end is visible through "
                     f"the {what}.")
        lines.append("  (Compare another output with --compare stdout|stderr|exit|file:PATH; a read further "
                     "past the end than the band, --bytes, is not seen.)")
        return lines, 1
    if v.kind == "gave-up":
        rng = f"; the next one is among allocations #{v.range[0]}..#{v.range[1] - 1}" if v.range else ""
        lines.append(f"redzone bisect: gave up after {v.runs} runs (--max-runs){rng}.")
        return lines + culprits_so_far(v), 3
    if v.kind == "inconsistent":
        lines.append(f"redzone bisect: the outputs of runs with different windows contradict each other "
                     f"(after run {v.runs}): they do not follow band bytes alone. The output may vary between "
                     "runs in a way two runs did not show; try --filter, or fewer threads.")
        return lines + culprits_so_far(v), 3
    # found
    n = len(v.culprits)
    if n == 1:
        lines.append(f"redzone bisect: {name} reads past the end of allocation #{v.culprits[0].index} "
                     f"(found in {v.runs} runs, {v.zones} allocations)")
    else:
        indices = ", ".join(f"#{c.index}" for c in v.culprits)
        lines.append(f"redzone bisect: {name} reads past the end of {n} allocations: {indices} "
                     f"(found in {v.runs} runs, {v.zones} allocations)")
    for c in v.culprits:
        lines += culprit_lines(c, args, program, logs, what)
    return lines, 0


def count_text(counts):
    if not counts:
        return "no allocations"
    if len(counts) == 1:
        return f"{counts[0]} allocations"
    return "allocations " + "+".join(str(c) for c in counts) + " in several processes"


def culprits_so_far(v):
    if not v.culprits:
        return []
    return ["  found before stopping: " + ", ".join(f"allocation #{c.index}" for c in v.culprits)]


def culprit_lines(c, args, program, logs, what):
    lines = [f"  alloc#{c.index}"]
    trace = parse_trace(logs.get(c.window, ""), c.index)
    if trace and trace[0] is not None:
        lines[0] += f" user_bytes={trace[0]} pad={trace[1]}"
    if trace and trace[2]:
        lines.append("    allocated at:")
        lines += ["      " + f for f in trace[2]]
    elif not trace:
        lines.append("    (no allocation backtrace: the allocation is not padded, or was freed at once)")
    place, x, y = first_difference(c.before, c.after, what)
    lines.append(f"    {place} with its band 0x00: {x}; with its band 0xEE: {y}")
    lines.append("    reproduce with a one-allocation window (compare with --poison 0:0):")
    lines.append("      " + reproduce_line(args, program, (c.index, c.index + 1)))
    return lines


def check_compare(parser, what):
    if what in ("stdout", "stderr", "exit"):
        return what
    if what.startswith("file:") and len(what) > 5:
        return what
    parser.error(f"--compare {what!r}: use stdout, stderr, exit or file:PATH")


def cmd_bisect(args, parser):
    program = args.program[1:] if args.program and args.program[0] == "--" else args.program
    if not program:
        parser.error("no PROGRAM given (usage: redzone bisect [options] -- PROGRAM [ARGS...])")
    compare = check_compare(parser, args.compare)
    try:
        filters = [re.compile(f) for f in args.filter]
    except re.error as e:
        parser.error(f"--filter: bad regular expression: {e}")
    if filters and compare == "exit":
        parser.error("--filter does not apply to --compare exit")
    if args.timeout is not None and not args.timeout > 0:
        parser.error("--timeout must be a positive number of seconds")
    if args.max_runs is not None and args.max_runs < 1:
        parser.error("--max-runs must be at least 1")
    for var in ("METRALE_REDZONE", "METRALE_REDZONE_MIN_IDX"):
        if getattr(args, var) is not None:
            check_value(parser, var, getattr(args, var))
    if not os.path.exists(LIBREDZONE):
        print(f"redzone: {LIBREDZONE} is missing (is redzone installed?)", file=sys.stderr)
        return 127
    if args.emulated_device and not os.path.isdir(EMU_DIR):
        print(f"redzone: the emulated driver folder {EMU_DIR} is missing", file=sys.stderr)
        return 127
    env = dict(os.environ)
    for var in ("METRALE_REDZONE", "METRALE_REDZONE_MIN_IDX"):
        if getattr(args, var) is not None:
            env[var] = getattr(args, var)
    env.setdefault("METRALE_REDZONE", "64")
    if not re.fullmatch(r"\+?0*[1-9][0-9]*", env["METRALE_REDZONE"]):
        parser.error(f"METRALE_REDZONE={env['METRALE_REDZONE']!r} in the environment leaves the bands off: "
                     "there would be nothing to bisect")
    min_text = env.get("METRALE_REDZONE_MIN_IDX", "0")
    min_idx = int(min_text) if re.fullmatch(r"\+?[0-9]+", min_text) else 0  # as the library reads it
    preload = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = LIBREDZONE + (":" + preload if preload else "")
    if args.emulated_device:
        path = env.get("LD_LIBRARY_PATH", "")
        env["LD_LIBRARY_PATH"] = EMU_DIR + (":" + path if path else "")
    what = compare if not compare.startswith("file:") else compare[5:]

    def progress(k, bound, window, purpose):
        of = f" of <= {bound}" if bound is not None else ""
        text = f": {purpose}" if purpose else ""
        print(f"redzone bisect: run {k}{of}: window {window_text(window)}{text}", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="redzone-bisect-") as workdir:
        runner = ProgramRunner(program, env, compare, filters, args.timeout, workdir)
        try:
            verdict = bisect(runner, min_idx=min_idx, max_runs=args.max_runs, progress=progress)
        except RunFailed as e:
            print(f"redzone bisect: {e}", file=sys.stderr)
            return 127 if str(e).startswith("cannot run") else 3
        except KeyboardInterrupt:
            print("redzone bisect: interrupted", file=sys.stderr)
            return 130
        lines, status = describe_verdict(verdict, args, program, runner.logs, what)
    if runner.violations:
        lines.append(f"note: the library also reported {runner.violations} writes past the end over these runs; "
                     "`redzone run` shows where.")
    print("\n".join(lines), flush=True)
    return status


def main(argv=None):
    top, run, dbg, bis = build_parser()
    args = top.parse_args(argv)
    if args.command == "run":
        return cmd_run(args, run)
    if args.command == "gdb":
        return cmd_gdb(args, dbg)
    if args.command == "bisect":
        return cmd_bisect(args, bis)
    top.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
