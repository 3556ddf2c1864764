"""`redzone bisect`: runs the program once per poison window (each run in its own session, output to
files, the library's lines to a log per process), hands the outcomes to search.bisect, and prints the
verdict. Exit codes are documented in docs/bisect.md and BISECT_DESCRIPTION."""
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

from . import options, procs
from .options import Failure, UsageError
from .search import (EMPTY_WINDOW, TOP, Outcome, RunFailed, allocation_counts, bisect, filter_output,
                     first_difference, parse_summary, parse_trace, window_text, zones_in)

BISECT_DESCRIPTION = """\
Finds the allocation PROGRAM reads past the end of. A read past the end pulls band bytes into the
computation, so the output changes when they do. Each run gives the program a poison window [lo, hi)
(METRALE_REDZONE_POISON): bands of allocations #lo..#hi-1 hold 0xEE, all others 0x00. bisect runs the
empty window twice (is the output deterministic?), then the full window (does the output depend on band
bytes at all?), then halves the window until it names the allocation (or, one after the other, each of
several). Before naming one it confirms it: its one-allocation window must change the output, and the empty
window, run once more, must still give the first run's output. One culprit among N allocations takes at
most ceil(log2 N) + 5 runs. It prints each culprit's size, where it was allocated (and in which process),
and the `redzone run --poison` line that shows it.

Runs get stdin from /dev/null; the library's own lines go to a log file, not to the compared output.
Every run must make the same allocations in the same order (the count is checked). --bytes and --min-idx
win over METRALE_REDZONE and METRALE_REDZONE_MIN_IDX in the environment, as in redzone run.

Exit status: 0 when allocations were named (and confirmed); 1 when no read past the end shows in the
compared output; 3 when bisecting is impossible (output differs between identical runs or drifted during
the bisect: "nondeterministic"; allocations differ; a run crashed or timed out; --max-runs reached);
2 for usage errors; 127 when PROGRAM cannot be started (or every run exits 127, or cannot load the CUDA
driver); 128+N when bisect itself got signal N (its runs are killed and its files removed first)."""


def read_text(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", errors="surrogateescape")
    except (FileNotFoundError, IsADirectoryError):
        return ""


def tail_hint(text):
    """The last lines a run wrote, printable whatever bytes they hold."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    lines = [line for line in text.strip().split("\n") if line][-3:]
    return "".join("\n  " + line for line in lines) if lines else ""


DRIVER_MISSING = re.compile(r"libcuda\.so\.1: cannot open shared object file|cannot load the CUDA driver")
# The library's exit line when the driver never started (cuInit failed, or the CUDA runtime refused it).
DRIVER_NOT_STARTED = re.compile(r"redzone: the CUDA driver did not start \((.*)\): nothing was checked")


def driver_not_started(logs):
    """Why the driver did not start, as the library said in any run's log; None when it never said so."""
    for per_process in logs.values():
        for text in per_process.values():
            m = DRIVER_NOT_STARTED.search(text)
            if m:
                return m.group(1)
    return None


class CompareFile:
    """--compare file:PATH. bisect never deletes a file it did not create: a file already at PATH is moved
    aside for the bisect and put back at the end; before each run only what an earlier run wrote there is
    removed."""

    def __init__(self, path):
        self.path = os.path.abspath(path)
        self.aside = None
        if os.path.isdir(self.path):
            raise UsageError(f"redzone bisect: --compare file:{path} is a directory, not a file the program writes")
        if os.path.lexists(self.path):
            aside = f"{self.path}.redzone-bisect-saved-{os.getpid()}"
            try:
                os.rename(self.path, aside)
            except OSError as e:
                raise UsageError(f"redzone bisect: --compare file:{path} exists and cannot be moved aside for the "
                                 f"bisect ({e.strerror})") from None
            self.aside = aside

    def clear(self):
        """Before a run: remove what the previous run wrote (bisect's own file)."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise RunFailed(f"cannot remove {self.path}, which a run wrote ({e.strerror}); bisect needs it gone "
                            "before each run") from None

    def restore(self):
        try:
            self.clear()
        except RunFailed:
            pass
        if self.aside:
            try:
                os.rename(self.aside, self.path)
            except OSError as e:
                print(f"redzone bisect: could not put {self.path} back ({e.strerror}); it is at {self.aside}",
                      file=sys.stderr)


class ProgramRunner:
    """Runs PROGRAM once per window, each run in its own session (process group), output to files."""

    def __init__(self, program, env, compare, filters, timeout, workdir):
        self.program, self.env, self.compare, self.filters = program, env, compare, filters
        self.timeout, self.workdir = timeout, workdir
        self.logs = {}         # window -> {pid: the library's log of that process in that run}
        self.violations = 0    # writes past the end the library reported, over all runs
        self.count = 0
        self.codes = []        # every run's exit status
        procs.become_subreaper()

    def __call__(self, window):
        self.count += 1
        k = self.count
        files = {name: os.path.join(self.workdir, f"run{k}.{name}") for name in ("out", "err", "summary")}
        env = dict(self.env)
        env["METRALE_REDZONE_POISON"] = f"{window[0]}:{window[1]}"
        env["METRALE_REDZONE_LOG"] = os.path.join(self.workdir, f"run{k}.log.%p")  # one log per process
        env["METRALE_REDZONE_SUMMARY"] = files["summary"]
        if window[0] < window[1] < TOP:
            env["METRALE_REDZONE_TRACE_IDX"] = str(window[1] - 1)  # a culprit is always the last of a window
        else:
            env.pop("METRALE_REDZONE_TRACE_IDX", None)
        if isinstance(self.compare, CompareFile):
            self.compare.clear()
        where = f"run {k} (window {window_text(window)})"
        proc = None
        with open(files["out"], "wb") as out, open(files["err"], "wb") as err:
            try:
                with procs.Blocked() as blocked:
                    try:
                        proc = subprocess.Popen(self.program, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                                stderr=err, start_new_session=True,
                                                preexec_fn=blocked.restore_in_child)
                    except OSError as e:
                        raise RunFailed(f"cannot run {self.program[0]}: {e.strerror}", 127) from None
                code = proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                raise RunFailed(f"{where} did not finish within {self.timeout:g} s; it was killed with its "
                                "process group and everything it started") from None
            finally:
                # The program itself (on a timeout or a signal) and whatever it left running, setsid or not.
                if proc is not None:
                    procs.end_run(proc.pid)
        logs = {}
        for path in glob.glob(os.path.join(self.workdir, f"run{k}.log.*")):
            pid = path.rsplit(".", 1)[1]
            logs[int(pid) if pid.isdigit() else pid] = read_text(path)
        self.logs[window] = logs
        stderr = read_text(files["err"])
        if DRIVER_MISSING.search(stderr) or any(DRIVER_MISSING.search(t) for t in logs.values()):
            raise RunFailed(f"{os.path.basename(self.program[0])} could not load the CUDA driver (libcuda.so.1) in "
                            f"{where}: on a machine without a GPU, add --emulated-device" + tail_hint(stderr), 127)
        self.codes.append(code)
        if len(self.codes) >= 2 and all(c == 127 for c in self.codes):
            raise RunFailed(f"every run exited with status 127 (a command could not be started), so nothing "
                            "can be compared" + tail_hint(stderr), 127)
        if code < 0:
            raise RunFailed(f"{where} was killed by {procs.signal_name(-code)}; bisect needs every run to finish. "
                            "If band bytes cause the crash, this window holds the culprit: "
                            "`redzone run --poison LO:HI` repeats any window by hand." + tail_hint(stderr))
        summaries = parse_summary(read_text(files["summary"]))
        self.violations += sum(s.get("violations", 0) for s in summaries)
        if self.compare == "exit":
            output = str(code)
        elif isinstance(self.compare, CompareFile):
            path = self.compare.path
            output = read_text(path) if os.path.exists(path) else f"(no file {path})"
        else:
            output = read_text(files["out" if self.compare == "stdout" else "err"])
        if self.compare != "exit":
            output = filter_output(output, self.filters)
        return Outcome(output, allocation_counts(summaries), zones_in(allocation_counts(summaries), summaries))


def launcher_name():
    me = os.path.abspath(sys.argv[0])
    found = shutil.which("redzone")
    return "redzone" if found and os.path.realpath(found) == os.path.realpath(me) else me


def reproduce_line(args, env, program, window):
    """The `redzone run` command for a window, with every setting bisect used that is not run's default
    spelled out, so it reproduces in the same environment (and in a clean one)."""
    words = [launcher_name(), "run"]
    if args.emulated_device:
        words.append("--emulated-device")
    if env.get("METRALE_REDZONE", options.DEFAULT_BYTES) != options.DEFAULT_BYTES:
        words += ["--bytes", env["METRALE_REDZONE"]]
    if env.get("METRALE_REDZONE_MIN_IDX") is not None:
        words += ["--min-idx", env["METRALE_REDZONE_MIN_IDX"]]
    words += ["--poison", f"{window[0]}:{window[1]}", "--"] + program
    return " ".join(shlex.quote(w) for w in words)
def describe_verdict(v, args, env, program, logs, what):
    """The lines bisect prints at the end, and its exit status."""
    name = os.path.basename(program[0])
    lines = []
    if v.kind == "nondeterministic":
        a, b = v.at
        lines.append(f"redzone bisect: nondeterministic output: the {what} differs between two runs with the same "
                     "(empty) window, so a change cannot be pinned on band bytes:")
        place, x, y = first_difference(v.outputs[0], v.outputs[1], what)
        lines.append(f"  {place}: {x} in run {a}, {y} in run {b}")
        if what != "exit":
            lines.append("  drop the varying part with --filter REGEX (repeatable), e.g. --filter '[0-9]+ ms'")
        return lines, 3
    if v.kind == "unconfirmed":
        c = v.culprit
        lines.append(f"redzone bisect: nondeterministic output: the search pointed at allocation #{c.index}, but "
                     f"its band alone (window {window_text((c.index, c.index + 1))}, run {v.runs}) gives the empty "
                     f"window's {what}: the output changed between runs in a way the first two runs did not "
                     "show, so no allocation is named.")
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
        elif driver_not_started(logs):
            lines.append(f"redzone bisect: {name} made no device allocations: the CUDA driver did not start "
                         f"({driver_not_started(logs)}), so nothing was checked and there is nothing to bisect.")
        else:
            lines.append(f"redzone bisect: {name} made no device allocations that redzone saw (is it a CUDA "
                         "program, linked dynamically to libcuda.so.1 or libcudart?), and its output is the same "
                         "with every band 0xEE: nothing to bisect.")
        return lines, 1
    if v.kind == "independent":
        lines.append(f"redzone bisect: the {what} is the same with every band 0x00 (run 1) and every band 0xEE "
                     f"(run 3, window {window_text(v.full_window)}; run 4, every index): no read past the end is "
                     f"visible through the {what}.")
        lines.append("  (Compare another output with --compare stdout|stderr|exit|file:PATH; a read further "
                     "past the end than the band, --bytes, is not seen.)")
        return lines, 1
    if v.kind == "gave-up":
        rng = f"; the next one is among allocations #{v.range[0]}..#{v.range[1] - 1}" if v.range else ""
        lines.append(f"redzone bisect: gave up after {v.runs} runs (--max-runs){rng}.")
        return lines + culprits_so_far(v), 3
    if v.kind == "inconsistent":
        lines.append(f"redzone bisect: nondeterministic output: the outputs of runs with different windows "
                     f"contradict each other "
                     f"(after run {v.runs}): they do not follow band bytes alone. The output may vary between "
                     "runs in a way two runs did not show; try --filter, or fewer threads.")
        return lines + culprits_so_far(v), 3
    # found
    n = len(v.culprits)
    counted = "allocations not all counted: a process ended without its summary" if v.uncounted else \
        f"{v.zones} allocations"
    if n == 1:
        lines.append(f"redzone bisect: {name} reads past the end of allocation #{v.culprits[0].index} "
                     f"(found in {v.runs} runs, {counted})")
    else:
        indices = ", ".join(f"#{c.index}" for c in v.culprits)
        lines.append(f"redzone bisect: {name} reads past the end of {n} allocations: {indices} "
                     f"(found in {v.runs} runs, {counted})")
    for c in v.culprits:
        lines += culprit_lines(c, args, env, program, logs, what)
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
    return ["  candidates before stopping (not confirmed, do not rely on them): "
            + ", ".join(f"allocation #{c.index}" for c in v.culprits)]


def executable_of(frames):
    """The executable a trace's process ran: the module of its frame in main, else in _start (None when the
    trace has neither)."""
    for symbol in ("main", "_start"):
        for f in frames:
            m = re.search(r" in %s\+0x[0-9a-f]+ \((.*)\)$" % symbol, f)
            if m:
                return m.group(1)
    return None


def culprit_lines(c, args, env, program, logs, what):
    """Size, backtrace and process of a culprit (from the logs of the run that named it; each process has
    its own), the output it changes, and the command that reproduces it."""
    per_process = logs.get(c.window, {})
    traces = [(pid, parse_trace(text, c.index)) for pid, text in sorted(per_process.items(), key=str)]
    traces = [(pid, t) for pid, t in traces if t]
    lines = [f"  alloc#{c.index}"]
    if len(traces) == 1:
        pid, trace = traces[0]
        if trace[0] is not None:
            lines[0] += f" user_bytes={trace[0]} pad={trace[1]}"
        exe = executable_of(trace[2])
        if len(per_process) > 1:
            lines.append(f"    in process {pid} ({exe or 'its executable unknown'}) of the run that named it; the "
                         "other processes made fewer allocations")
        elif exe and os.path.basename(exe) != os.path.basename(program[0]):
            lines.append(f"    in process {pid} ({exe}), started by {os.path.basename(program[0])}")
        if trace[2]:
            lines.append("    allocated at:")
            lines += ["      " + f for f in trace[2]]
    elif traces:
        lines.append(f"    {len(traces)} processes made an allocation #{c.index}; the window poisons each of them, "
                     "so any of them may be the one read past:")
        for pid, trace in traces:
            size = f" user_bytes={trace[0]} pad={trace[1]}" if trace[0] is not None else ""
            exe = executable_of(trace[2]) or "executable unknown"
            lines.append(f"    process {pid} ({exe}):{size}")
            lines += ["      " + f for f in trace[2]]
    else:
        lines.append("    (no allocation backtrace: the allocation is not padded, or was freed at once)")
    place, x, y = first_difference(c.before, c.after, what)
    lines.append(f"    {place} with its band 0x00: {x}; with its band 0xEE: {y}")
    lines.append("    reproduce with a one-allocation window (compare with --poison 0:0):")
    lines.append("      " + reproduce_line(args, env, program, (c.index, c.index + 1)))
    return lines


def check_compare(what):
    if what in ("stdout", "stderr", "exit"):
        return what
    if what.startswith("file:") and len(what) > 5:
        return what
    raise UsageError(f"redzone bisect: --compare {what!r}: use stdout, stderr, exit or file:PATH")


def cmd_bisect(args, program):
    compare = check_compare(args.compare)
    try:
        filters = [re.compile(f) for f in args.filter]
    except re.error as e:
        raise UsageError(f"redzone bisect: --filter: bad regular expression: {e}") from None
    if filters and compare == "exit":
        raise UsageError("redzone bisect: --filter does not apply to --compare exit")
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError("redzone bisect: --timeout must be a positive number of seconds")
    if args.max_runs is not None and args.max_runs < 1:
        raise UsageError("redzone bisect: --max-runs must be at least 1")
    env, origin = options.program_env(args, options.BISECT_FLAGS, args.emulated_device)
    # bisect sets these for every run: the user's values must not make the check fail.
    for var in ("METRALE_REDZONE_POISON", "METRALE_REDZONE_LOG", "METRALE_REDZONE_SUMMARY",
                "METRALE_REDZONE_TRACE_IDX"):
        env.pop(var, None)
    values = options.check_values(env, origin, "bisect")
    if values["pad_bytes"] == 0:
        where = "--bytes" if origin.get("METRALE_REDZONE") == "--bytes" else "METRALE_REDZONE in the environment"
        raise UsageError(f"redzone bisect: {where} = {env['METRALE_REDZONE']!r} leaves the bands off: there would "
                         "be nothing to bisect")
    what = compare if not compare.startswith("file:") else compare[5:]

    def progress(k, bound, window, purpose):
        of = f" of <= {bound}" if bound is not None else ""
        text = f": {purpose}" if purpose else ""
        shown = window_text(window) if window[1] != TOP else f"[{window[0]}, every index)"
        print(f"redzone bisect: run {k}{of}: window {shown}{text}", file=sys.stderr, flush=True)

    procs.raise_on_signals()
    target = CompareFile(compare[5:]) if compare.startswith("file:") else compare
    try:
        with tempfile.TemporaryDirectory(prefix="redzone-bisect-") as workdir:
            runner = ProgramRunner(program, env, target, filters, args.timeout, workdir)
            try:
                verdict = bisect(runner, min_idx=values["min_idx"], max_runs=args.max_runs, progress=progress)
            except RunFailed as e:
                print(f"redzone bisect: {e}", file=sys.stderr)
                return e.code
            lines, status = describe_verdict(verdict, args, env, program, runner.logs, what)
    finally:
        if isinstance(target, CompareFile):
            target.restore()
    if runner.violations:
        lines.append(f"note: the library also reported {runner.violations} writes past the end over these runs; "
                     "`redzone run` shows where.")
    print("\n".join(lines), flush=True)
    return status
