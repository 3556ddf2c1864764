"""The bisect search and its pure helpers: no processes, no output (tests/python/test_bisect.py drives them
with fake programs). bisect() asks run(window) for the program's output under each poison window and
narrows the windows down to the allocations read past the end, then confirms each one."""
import math
import re


class RunFailed(Exception):
    """A run that did not finish normally: the message says which, with what window, and why; code is
    bisect's exit status for it (3, or 127 when the program cannot be started)."""

    def __init__(self, message, code=3):
        super().__init__(message)
        self.code = code


EMPTY_WINDOW = (0, 0)
# The largest window end the library takes (METRALE_REDZONE_POISON's hi is below 2^64): a window ending there
# covers every creation index, counted by a summary or not.
TOP = (1 << 64) - 1


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
    """Runs bisect needs at most for one culprit among `zones` allocations: 2 empty + 1 full + the halvings
    + 2 to confirm it (its one-allocation window, and the empty window once more)."""
    return 5 + (math.ceil(math.log2(zones)) if zones > 1 else 0)


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
        self.alone = None       # output of its one-allocation window (the confirmation run)


class Verdict:
    """How a bisect ended. kind: found, independent, no-zones, nondeterministic, unconfirmed, unstable,
    inconsistent, gave-up."""

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
    there is none left, with no extra run. The model is checked before any culprit is named: each one's
    one-allocation window must differ from the empty window, and the empty window, run once more at the
    end, must still give the first run's output (an output that drifts between runs, such as a coarse
    timestamp, would otherwise blame the wrong allocations). One culprit among N takes 2 + 1 +
    ceil(log2 N) + 2 runs.

    Allocations no summary counted (a process that ended with _exit or replaced itself with exec writes no
    summary line) are not left out: when the counted window shows nothing, the window of every index does
    once more, and the search then grows its windows by doubling."""
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
            return Verdict("nondeterministic", 2, outputs=(first.output, second.output), at=(1, 2))
        state["base"] = first
        n = first.zones
        known = {}  # m -> output of window [min_idx, m)
        if n > min_idx:
            state["bound"] = run_bound(n - min_idx)
            full_window = (min_idx, n)
            full = do(full_window, "full window: every band 0xEE").output
            known[n] = full
        if n <= min_idx or full == first.output:
            wide = (min_idx, TOP)
            state["bound"] = None
            full = do(wide, "every index: every band 0xEE, also allocations no summary line counted "
                      "(a process that ended by _exit or exec)").output
            if full == first.output:
                if n <= min_idx:
                    return Verdict("no-zones", len(runs), zones=n)
                return Verdict("independent", len(runs), zones=n, full_window=full_window)
            n, full_window = TOP, wide
            known[n] = full
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
            if state["culprits"] and hi != TOP:
                state["bound"] = (len(runs) + (math.ceil(math.log2(hi - lo)) if hi - lo > 1 else 0)
                                  + len(state["culprits"]) + 2)  # and confirm each, and the empty window
            while hi - lo > 1:
                if hi == TOP and lo < (1 << 62):
                    mid = lo + max(lo - min_idx, 1)  # no count to halve: double the window until it shows
                else:
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
                break
            ref_end, ref = hi, known[hi]
        if state["bound"] is None:
            state["bound"] = len(runs) + len(state["culprits"]) + 1
        for c in state["culprits"]:
            c.alone = do((c.index, c.index + 1), f"confirm #{c.index}: its band alone 0xEE").output
            if c.alone == first.output:
                return Verdict("unconfirmed", len(runs), culprit=c, empty=first.output,
                               culprits=[x for x in state["culprits"] if x.alone is not None and x is not c])
        last = do(EMPTY_WINDOW, "empty window once more: did the output drift?")
        if last.output != first.output:
            return Verdict("nondeterministic", len(runs), outputs=(first.output, last.output), at=(1, len(runs)))
        return Verdict("found", len(runs), culprits=state["culprits"], zones=first.zones, uncounted=n == TOP)
    except _Stop as stop:
        return stop.verdict
