"""`redzone bisect`'s search (native/tools/redzone_cli/search.py), driven by fake programs: no processes."""
import math
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "native", "tools"))
from redzone_cli import search as cli  # noqa: E402


class FakeProgram:
    """Reads one byte past the end of each culprit and prints their sum: its output depends only on which
    culprits lie in the window, as a real read past the end does. Records every window it was run with."""

    def __init__(self, zones, culprits, counts=None):
        self.zones, self.culprits = zones, set(culprits)
        self.counts = counts  # run number (1-based) -> allocation counts, to fake unstable indices
        self.windows = []

    def __call__(self, window):
        self.windows.append(window)
        lo, hi = window
        past = sum(0xEE for c in self.culprits if lo <= c < hi)
        counts = (self.zones,) if self.zones else ()
        if self.counts and len(self.windows) in self.counts:
            counts = self.counts[len(self.windows)]
        return cli.Outcome(f"sum = {1000 * self.zones + past}\n", counts)


def bisect(program, **kw):
    seen = []
    v = cli.bisect(program, progress=lambda k, bound, window, purpose: seen.append((k, bound, window)), **kw)
    assert [k for k, _, _ in seen] == list(range(1, len(program.windows) + 1)), "progress before every run"
    assert v.runs == len(program.windows)
    return v, seen


def log2up(n):
    return math.ceil(math.log2(n)) if n > 1 else 0


@pytest.mark.parametrize("zones, culprit", [
    (1, 0), (2, 0), (2, 1), (3, 0), (3, 1), (3, 2), (1000, 0), (1000, 1), (1000, 499), (1000, 500),
    (1000, 998), (1000, 999), (1024, 0), (1024, 1023), (1025, 1024), (1 << 20, 123457),
])
def test_one_culprit_is_named_within_the_bound(zones, culprit):
    p = FakeProgram(zones, [culprit])
    v, seen = bisect(p)
    assert v.kind == "found" and [c.index for c in v.culprits] == [culprit]
    assert v.runs <= cli.run_bound(zones) == 5 + log2up(zones)
    assert p.windows[:3] == [(0, 0), (0, 0), (0, zones)], "empty twice, then full"
    assert p.windows[-2:] == [(culprit, culprit + 1), (0, 0)], "confirmed alone, then the empty window again"
    assert v.culprits[0].window == (0, culprit + 1), "the run whose log holds the culprit's trace"
    assert v.culprits[0].before != v.culprits[0].after
    assert all(bound is None for k, bound, _ in seen[:2]) and all(b == cli.run_bound(zones) for _, b, _ in seen[2:])


def test_the_bound_holds_for_every_position():
    for zones in list(range(1, 70)) + [1000]:
        for culprit in range(zones):
            p = FakeProgram(zones, [culprit])
            v = cli.bisect(p)
            assert [c.index for c in v.culprits] == [culprit]
            assert v.runs <= 5 + log2up(zones), (zones, culprit, v.runs)
    assert cli.run_bound(1) == 5 and cli.run_bound(2) == 6 and cli.run_bound(1000) == 15


@pytest.mark.parametrize("zones, culprits", [
    (2, [0, 1]), (1000, [3, 700]), (1000, [4, 5]), (1000, [0, 999]), (1000, [998, 999]), (8, range(8)),
    (1000, [10, 500, 990]),
])
def test_several_culprits_are_found_one_by_one(zones, culprits):
    p = FakeProgram(zones, culprits)
    v, seen = bisect(p)
    assert v.kind == "found" and [c.index for c in v.culprits] == sorted(culprits)
    assert v.runs <= 3 + len(culprits) * (log2up(zones) + 1) + 1
    search = p.windows[2:-len(culprits) - 1]
    assert len(set(search)) == len(search), "no window runs twice while searching"
    assert p.windows[-len(culprits) - 1:] == [(c, c + 1) for c in sorted(culprits)] + [(0, 0)]
    for k, bound, _ in seen:
        assert bound is None or k <= bound, "run k of <= m never has k > m"


def test_output_that_differs_between_identical_runs_is_not_bisected():
    runs = iter(range(100))

    def noisy(window):
        return cli.Outcome(f"sum = 1000\ntime = {next(runs)}\n", (5,))

    v = cli.bisect(noisy)
    assert v.kind == "nondeterministic" and v.runs == 2
    assert cli.first_difference(*v.outputs, "stdout") == ("stdout line 2", "'time = 0'", "'time = 1'")


def test_output_that_does_not_depend_on_bands():
    p = FakeProgram(50, [])
    v, _ = bisect(p)
    assert v.kind == "independent" and v.runs == 4 and v.full_window == (0, 50)
    assert p.windows[3] == (0, cli.TOP), "every index once more: also allocations no summary line counted"


def test_no_allocations_and_nothing_above_min_idx():
    assert cli.bisect(FakeProgram(0, [])).kind == "no-zones"
    v = cli.bisect(FakeProgram(10, [3]), min_idx=10)
    assert v.kind == "no-zones" and v.zones == 10 and v.runs == 3


def test_unstable_indices_between_the_empty_runs():
    p = FakeProgram(10, [3], counts={2: (11,)})
    v = cli.bisect(p)
    assert v.kind == "unstable" and v.counts == ((10,), (11,)) and v.at == (1, 2) and v.runs == 2


def test_unstable_indices_later_stop_with_what_was_found():
    p = FakeProgram(100, [1, 90], counts={11: (101,)})  # runs 4..10 name #1
    v = cli.bisect(p)
    assert v.kind == "unstable" and v.at == (1, 11) and v.counts == ((100,), (101,))
    assert [c.index for c in v.culprits] == [1], "the first culprit was named before run 11"


def test_min_idx_windows_start_there():
    p = FakeProgram(100, [77])
    v = cli.bisect(p, min_idx=40)
    assert [c.index for c in v.culprits] == [77]
    assert all(w[0] == 40 for w in p.windows[2:-2]) and p.windows[2] == (40, 100)
    assert v.runs <= 5 + log2up(60)


def test_max_runs_gives_up_with_the_range_left():
    p = FakeProgram(1000, [500])
    v = cli.bisect(p, max_runs=6)
    assert v.kind == "gave-up" and v.runs == 6 and len(p.windows) == 6
    lo, hi = v.range
    assert lo <= 500 < hi and hi - lo <= 1000 / 4


def test_contradicting_outputs_are_reported_not_bisected():
    outputs = {(0, 0): "base", (0, 8): "full", (0, 4): "B", (0, 2): "A", (0, 1): "B"}
    v = cli.bisect(lambda w: cli.Outcome(outputs[w], (8,)))
    assert v.kind == "inconsistent" and [c.index for c in v.culprits] == [0]


def test_a_failing_run_propagates():
    def crash(window):
        if window != (0, 0):
            raise cli.RunFailed("run 3 was killed by SIGABRT")
        return cli.Outcome("x", (4,))

    with pytest.raises(cli.RunFailed, match="SIGABRT"):
        cli.bisect(crash)


def test_windows_and_summaries():
    assert cli.parse_window("3:7") == (3, 7) and cli.parse_window("+0:+0") == (0, 0)
    for bad in ("7:3", "3", "a:b", " 1:2", "1:2:3", "-1:2", "0:18446744073709551616"):
        with pytest.raises(ValueError):
            cli.parse_window(bad)
    text = "pid=12 violations=0 scans=1 allocations=5\npid=13 violations=2 scans=1 allocations=3\ngarbage\n"
    s = cli.parse_summary(text)
    assert [x["pid"] for x in s] == [12, 13] and s[1]["violations"] == 2
    assert cli.allocation_counts(s) == (3, 5) and cli.zones_in((3, 5)) == 5 and cli.zones_in(()) == 0
    later = cli.parse_summary("pid=1 violations=0 scans=1 allocations=5 next_index=7\n")
    assert cli.zones_in(cli.allocation_counts(later), later) == 7, "failed calls took indices 5 and 6"


def test_failed_allocation_calls_widen_the_search():
    p = FakeProgram(5, [6])

    def with_span(window):
        out = p(window)
        return cli.Outcome(out.output, out.counts, zones=7)

    v = cli.bisect(with_span)
    assert [c.index for c in v.culprits] == [6] and p.windows[2] == (0, 7)


def test_filters_drop_fields_and_lines():
    rx = [re.compile(r"token=\d+"), re.compile(r"^time: .*")]
    text = "result = 5 token=17\ntime: 12:00\n\nend\n"
    assert cli.filter_output(text, rx) == "result = 5 \n\nend\n"
    assert cli.filter_output(text, []) == text


def test_first_difference():
    assert cli.first_difference("a\nb\n", "a\nc\n", "stdout") == ("stdout line 2", "'b'", "'c'")
    assert cli.first_difference("a", "a\nb", "stderr") == ("stderr line 2", "(no such line)", "'b'")
    assert cli.first_difference("0", "238", "exit") == ("exit status", "0", "238")


def test_trace_block_from_the_log():
    log = ("redzone: something else\n"
           "redzone: METRALE_REDZONE_TRACE_IDX=7: allocation #7 (user_bytes=1000 pad=64) made here:\n"
           "    #0 0x1234 in main+0x10 (/bin/app)\n"
           "    #1 0x5678 (/lib/libc.so.6)\n"
           "redzone: exit: 0 violated at exit\n")
    assert cli.parse_trace(log, 7) == (1000, 64, ["#0 0x1234 in main+0x10 (/bin/app)", "#1 0x5678 (/lib/libc.so.6)"])
    assert cli.parse_trace(log, 70) is None
    bare = "redzone: METRALE_REDZONE_TRACE_IDX=3: allocation #3 made here:\n    #0 0x1 in f+0x1 (a)\n"
    assert cli.parse_trace(bare, 3) == (None, None, ["#0 0x1 in f+0x1 (a)"])


class Uncounted(FakeProgram):
    """A program whose processes end without a summary line (_exit, exec): no allocation is counted."""

    def __call__(self, window):
        out = super().__call__(window)
        return cli.Outcome(out.output, ())


@pytest.mark.parametrize("culprit", [0, 1, 5, 17, 1000])
def test_uncounted_allocations_are_still_searched(culprit):
    p = Uncounted(2000, [culprit])
    v, _ = bisect(p)
    assert v.kind == "found" and [c.index for c in v.culprits] == [culprit] and v.uncounted
    assert p.windows[2] == (0, cli.TOP)
    assert v.runs <= 3 + 2 * (log2up(culprit + 1) + 1) + 2


def test_uncounted_and_independent_is_no_zones():
    v, _ = bisect(Uncounted(10, []))
    assert v.kind == "no-zones" and v.runs == 3


def test_output_that_drifts_after_the_first_runs_names_nothing():
    """A coarse timestamp ticks between runs 4 and 5: every later window looks different from the empty
    one, so the search alone would blame allocations that are not read past (issue 18, item 11)."""
    p = FakeProgram(20, [17])

    def drifting(window):
        out = p(window)
        tick = "tick 1\n" if len(p.windows) >= 5 else "tick 0\n"
        return cli.Outcome(out.output + tick, out.counts)

    v = cli.bisect(drifting)
    assert v.kind in ("unconfirmed", "nondeterministic"), v.kind
    assert v.kind != "found"


def test_output_that_drifts_only_at_the_end_is_nondeterministic():
    p = FakeProgram(20, [17])

    def drifting(window):
        out = p(window)
        late = "late\n" if window == (0, 0) and len(p.windows) > 2 else ""
        return cli.Outcome(out.output + late, out.counts)

    v = cli.bisect(drifting)
    assert v.kind == "nondeterministic" and v.at == (1, v.runs)
