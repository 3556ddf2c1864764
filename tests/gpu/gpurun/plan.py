"""The GPU run's steps in the order they run, each with its time limit, and the budget arithmetic.

The order is what a run cut short must still have: the environment and the build, the detection steps
(driver API, then the CUDA runtime), the headline figures (scan-100k, overhead), the compute-sanitizer side by
side, and last the debugger sessions, the slowest and likeliest to hang. The limits of the steps before the
headline figures add up to more than the budget, so each of those steps is cut to leave RESERVED seconds for
each headline step still to come: however the earlier steps hang, scan-100k and overhead run.
"""

DEFAULT_BUDGET = 480    # of a 600 s call: the rest is for a slow machine start (docs/gpu.md)
MEMCHECK_CAP = 30       # one compute-sanitizer memcheck run in the side-by-side table
SESSION_CAP = 45        # one debugger session
MIN_STEP = 5            # a step granted less is not run (the budget is spent)

DRIVER = ["driver-alloc", "driver-async", "driver-managed", "driver-pitch", "driver-nosync", "driver-nosync-stream",
          "driver-error-exitcode", "driver-bisect", "driver-guard-run"]
RUNTIME = ["cuda-malloc", "cuda-async", "cuda-managed", "cuda-pitch", "cuda-graph", "cuda-nosync",
           "cuda-error-exitcode", "cuda-bisect", "cuda-guard-run"]
DEBUGGER = ["gdb-commands", "gdb-break-on", "gdb-autoscan", "gdb-guard", "cuda-gdb-device-breakpoint",
            "cuda-gdb-guard", "cuda-gdb-runtime-break"]


def _limit(name):
    if name.endswith("bisect"):
        return 45  # several runs of the program
    return 20      # one or two runs


STEPS = ([("environment", 30), ("build", 150), ("cu-build", 60)]
         + [(n, _limit(n)) for n in DRIVER] + [(n, _limit(n)) for n in RUNTIME]
         + [("scan-100k", 60), ("overhead", 90), ("sanitizer-side-by-side", 240)]
         + [(n, SESSION_CAP) for n in DEBUGGER]
         + [("report", 30)])
ORDER = [n for n, _ in STEPS]
LIMITS = dict(STEPS)
RESERVED = {"scan-100k": 30, "overhead": 45}


def group(name):
    """'debugger' for the sessions (after the first one that times out the rest are skipped), else None."""
    return "debugger" if name in DEBUGGER else None


def granted(name, left, done, scale=1.0):
    """Seconds step `name` may take when `left` seconds of the budget remain and the steps in `done` have
    run: its own limit, less what the headline steps not yet run keep (none for the report, which always
    runs). Below MIN_STEP the step is not run. scale (--time-scale) multiplies every limit and reserve."""
    if name == "report":
        return LIMITS[name] * scale
    after = ORDER[ORDER.index(name) + 1:] if name in ORDER else []
    keep = sum(s for n, s in RESERVED.items() if n in after and n not in done) * scale
    return min(LIMITS.get(name, 60) * scale, left - keep)


def simulate(budget, hang=lambda name, limit: limit):
    """[(name, seconds granted)] for a run in which each step takes hang(name, granted) seconds (all of it:
    every step hangs): what a cut run still reaches. A step granted under MIN_STEP is listed with 0."""
    left, done, out = float(budget), set(), []
    for name in ORDER:
        g = granted(name, left, done)
        if g < MIN_STEP and name != "report":
            out.append((name, 0))
            continue
        took = min(g, hang(name, g))
        left -= took
        done.add(name)
        out.append((name, g))
    return out
