"""tests/gpu/run read as a GPU machine would run it, without one: the step order and the budget arithmetic
(gpurun/plan.py), the environment's probes fed the texts real tools print and the skip decisions taken from
them (gpurun/facts.py, gpurun/environment.py), and the steps' own limits, with every command faked."""
import ast
import importlib.machinery
import importlib.util
import io
import os
import sys
import types
from contextlib import redirect_stdout

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
RUN = os.path.join(ROOT, "tests", "gpu", "run")


def load_run():
    loader = importlib.machinery.SourceFileLoader("gpurun_script", RUN)
    spec = importlib.util.spec_from_loader("gpurun_script", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


gr = load_run()
from gpurun import environment, facts, plan, proc  # noqa: E402  (tests/gpu on sys.path: the script put it there)

NVCC_13 = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:58:59_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.88
Build cuda_13.0.r13.0/compiler.36424714_0
"""
SMI_535 = """+---------------------------------------------------------------------------------------+
| NVIDIA-SMI 535.247.01             Driver Version: 535.247.01   CUDA Version: 12.2     |
|-----------------------------------------+----------------------+----------------------+
"""
CUDA_GDB_13 = "NVIDIA (R) cuda-gdb 13.0\nPortions Copyright (C) 2007-2025 NVIDIA Corporation\nBased on GNU gdb 14.2\n"
MINIMAL = ("exec: /usr/local/cuda-13.0/bin/cuda-gdb-minimal -nx -batch -ex python import sys\n"
           "Python scripting is not supported in this copy of GDB.\n")
PY312 = "RZPY 3.12.3\nRZEXE /usr/local/cuda-13.0/bin/cuda-gdb-python3.12-tui\n"
LDCONFIG_DRIVER = ("\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
                   "\tlibcudadebugger.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcudadebugger.so.1\n")
LDCONFIG_NO_BACKEND = "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
DRYRUN = ('#$ _TARGET_DIR_=targets/x86_64-linux\n#$ TOP=/opt/cuda/bin/..\n'
          '#$ LIBRARIES=  "-L/opt/cuda/bin/../targets/x86_64-linux/lib/stubs" '
          '"-L/opt/cuda/bin/../targets/x86_64-linux/lib"\n')


# ---- the probes' texts ---------------------------------------------------------------------------------------

def test_versions_from_nvcc_nvidia_smi_and_cuDriverGetVersion():
    assert facts.nvcc_release(NVCC_13) == (13, 0)
    assert facts.smi_cuda(SMI_535) == (12, 2)
    assert facts.driver_probe("RZDRV 0 12020\n") == (12, 2)
    assert facts.driver_probe("RZDRV 0 13000\n") == (13, 0)
    assert facts.driver_probe("RZDRV none libcuda.so.1: cannot open shared object file\n") is None
    assert facts.driver_probe("RZDRV 999 0\n") is None


def test_the_debuggers_python_minimal_and_full_builds():
    assert facts.debugger_python(CUDA_GDB_13 + PY312) == (
        "3.12.3", "/usr/local/cuda-13.0/bin/cuda-gdb-python3.12-tui", None)
    py, binary, why = facts.debugger_python(CUDA_GDB_13 + MINIMAL)
    assert py is None and binary == "/usr/local/cuda-13.0/bin/cuda-gdb-minimal"
    assert why == "a build without Python (Python scripting is not supported in this copy of GDB)"
    py, binary, why = facts.debugger_python("Segmentation fault\n")
    assert (py, binary, why) == (None, None, "no answer to a python command: Segmentation fault")


def test_the_back_end_is_looked_for_where_the_loader_would_find_it():
    present = {"/usr/lib/x86_64-linux-gnu/libcudadebugger.so.1", "/drv/libcudadebugger.so.1"}
    exists = present.__contains__
    assert facts.find_backend(LDCONFIG_DRIVER, "", exists) == "/usr/lib/x86_64-linux-gnu/libcudadebugger.so.1"
    assert facts.find_backend(LDCONFIG_NO_BACKEND, "", exists) == "/usr/lib/x86_64-linux-gnu/libcudadebugger.so.1"
    assert facts.find_backend(LDCONFIG_NO_BACKEND, "/x:/drv", exists) == "/drv/libcudadebugger.so.1"
    assert facts.find_backend(LDCONFIG_NO_BACKEND, "", lambda p: False) is None


def test_the_runtime_nvcc_links_and_the_programs_runpath():
    libdir = "/opt/cuda/targets/x86_64-linux/lib"
    assert facts.cudart_dir(DRYRUN, lambda p: p == libdir + "/libcudart.so") == libdir
    assert facts.cudart_dir(DRYRUN, lambda p: False) is None
    assert facts.runpath(" 0x1d (RUNPATH)            Library runpath: [/a:/opt/lib]\n") == ["/a", "/opt/lib"]
    assert facts.runpath(" 0x01 (NEEDED)             Shared library: [libcudart.so.13]\n") == []
    listed = "\tlibcudart.so.13 => /opt/lib/libcudart.so.13 (0x00007f)\n\tlibc.so.6 => /lib/libc.so.6 (0x1)\n"
    assert facts.resolved(listed, "libcudart.so") == "/opt/lib/libcudart.so.13"
    assert facts.resolved("\tlibcudart.so.13 => not found\n", "libcudart.so") is None


# ---- the decisions -------------------------------------------------------------------------------------------

def test_a_cuda_13_toolkit_on_a_12_driver_skips_the_runtime_steps_with_the_reason():
    why = facts.runtime_skip({"nvcc": "/x/nvcc", "toolkit_cuda": (13, 0), "driver_cuda": (12, 2)}, False)
    assert why == ("the toolkit's CUDA 13.0 runtime needs a CUDA 13.x driver; this driver supports CUDA 12.2 "
                   "(every runtime call would fail with cudaErrorInsufficientDriver)")
    # minor version compatibility: a 12.8 runtime runs on a 12.2 driver
    assert facts.runtime_skip({"nvcc": "n", "toolkit_cuda": (12, 8), "driver_cuda": (12, 2)}, False) is None
    assert facts.runtime_skip({"nvcc": "n", "toolkit_cuda": (13, 0), "driver_cuda": (13, 0)}, False) is None
    assert facts.runtime_skip({"nvcc": "n", "toolkit_cuda": (13, 0), "driver_cuda": None}, False) is None
    assert facts.runtime_skip({}, False) == "nvcc is not installed: runtime_prog cannot be built"
    assert facts.runtime_skip({}, True) is None


def cuda_gdb_facts(**kw):
    f = {"debugger": "/usr/local/cuda/bin/cuda-gdb", "debugger_kind": "cuda-gdb", "debugger_python": "3.12.3",
         "debugger_binary": "/usr/local/cuda/bin/cuda-gdb-python3.12-tui",
         "backend": "/usr/lib/x86_64-linux-gnu/libcudadebugger.so.1", "backend_error": False}
    f.update(kw)
    return f


def test_the_debugger_sessions_are_skipped_without_python_or_back_end():
    assert facts.debugger_skip(cuda_gdb_facts(), False) is None
    why = facts.debugger_skip(cuda_gdb_facts(debugger_python=None, debugger_binary="/c/bin/cuda-gdb-minimal",
                                             debugger_python_why="a build without Python (...)"), False)
    assert why.startswith("/usr/local/cuda/bin/cuda-gdb (runs /c/bin/cuda-gdb-minimal) has no Python: a build "
                          "without Python (...); the plugin cannot load.")
    assert "cuda-gdb-python3.X-tui" in why
    why = facts.debugger_skip(cuda_gdb_facts(backend=None), False)
    assert "libcudadebugger.so.1" in why and why.endswith("beside libcuda.so.1")
    why = facts.debugger_skip(cuda_gdb_facts(backend_error=True), False)
    assert '"Could not find CUDA Debugger back-end"' in why
    # the emulated device needs no back-end; gdb never does
    assert facts.debugger_skip(cuda_gdb_facts(backend=None), True) is None
    assert facts.debugger_skip({"debugger": "/usr/bin/gdb", "debugger_kind": "gdb", "debugger_python": "3.11.2"},
                               False) is None
    assert "needs Python 3.8" in facts.debugger_skip(cuda_gdb_facts(debugger_python="3.6.9"), False)
    assert facts.debugger_skip({}, False) == "neither cuda-gdb nor gdb is installed"
    assert "is gdb, not cuda-gdb" in facts.cuda_gdb_skip({"debugger": "/usr/bin/gdb", "debugger_kind": "gdb"}, False)
    assert facts.cuda_gdb_skip(cuda_gdb_facts(), False) is None


# ---- the environment step, every probe faked ----------------------------------------------------------------

def FakeCmd(argv, out, rc=0, timed_out=False, seconds=0.1):
    """A command's record (gpurun/proc.py) as if it had run."""
    c = proc.Cmd([str(a) for a in argv], {}, None)
    c.out, c.rc, c.timed_out, c.seconds = out, rc, timed_out, seconds
    return c


class FakeStep:
    """Step.sh answered from a table: the first key that is a prefix of the command line."""

    def __init__(self, answers):
        self.answers, self.calls, self.notes, self.checks, self.failures, self.cmds = answers, [], [], [], [], []

    def sh(self, argv, env=None, stdin=None, timeout=None):
        self.calls.append((list(argv), timeout))
        line = " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(argv))
        for key, answer in self.answers.items():
            if line.startswith(key):
                c = answer(argv) if callable(answer) else FakeCmd(argv, answer)
                self.cmds.append(c)
                return c
        c = FakeCmd(argv, "", rc=127)
        self.cmds.append(c)
        return c

    def note(self, text):
        self.notes.append(text)

    def check(self, ok, what, detail=""):
        self.checks.append((bool(ok), what))
        if not ok:
            self.failures.append(what)
        return bool(ok)

    def expect(self, cmd, pattern, what=None, literal=False):
        import re
        return self.check(re.search(re.escape(pattern) if literal else pattern, cmd.out, re.M), what or pattern)

    def expect_rc(self, cmd, rc):
        return self.check(cmd.rc == rc, f"exit status {rc}")

    def no_python_errors(self, cmd):
        return True


def new_run(tmp_path, emulated=False, debugger=None):
    args = types.SimpleNamespace(emulated_device=emulated, out=str(tmp_path), build_dir=str(tmp_path / "b"),
                                 only=None, debugger=debugger, budget=plan.DEFAULT_BUDGET, time_scale=1.0)
    os.makedirs(tmp_path / "logs", exist_ok=True)
    return gr.Run(args)


def gpu_machine(monkeypatch, tools, ldconfig):
    monkeypatch.setattr(environment.shutil, "which",
                        lambda name: f"/usr/local/cuda/bin/{name}" if name in tools else None)
    monkeypatch.setattr(environment.os, "access", lambda p, m: p == "/sbin/ldconfig" and ldconfig is not None)
    monkeypatch.setattr(facts.os.path, "exists", lambda p: False)


def test_environment_on_a_12_2_driver_with_cuda_13_and_cuda_gdb_minimal(tmp_path, monkeypatch):
    gpu_machine(monkeypatch, {"nvidia-smi", "nvcc", "cuda-gdb", "cmake"}, LDCONFIG_NO_BACKEND)
    run = new_run(tmp_path)
    s = FakeStep({"nvidia-smi --query-gpu": "NVIDIA H200, 535.247.01, 143771 MiB, 9.0\n", "nvidia-smi": SMI_535,
                  os.path.basename(sys.executable): "RZDRV 0 12020\n", "nvcc --version": NVCC_13,
                  "cuda-gdb --version": CUDA_GDB_13,
                  "cuda-gdb -nx -batch": MINIMAL, "ldconfig -p": LDCONFIG_NO_BACKEND, "cmake": "cmake version 3.28\n"})
    environment.probe(run, s, ROOT)
    assert all(t is not None and t <= 30 for _, t in s.calls), s.calls
    v = dict(run.versions)
    assert v["CUDA (driver's)"] == "12.2 (cuDriverGetVersion)"
    assert v["CUDA (nvcc's)"] == "13.0"
    assert v["debugger for the sessions"] == "/usr/local/cuda/bin/cuda-gdb: cuda-gdb 13.0 (GDB 14.2)"
    assert v["debugger's binary"] == "/usr/local/cuda-13.0/bin/cuda-gdb-minimal"
    assert v["debugger's Python"].startswith("none: a build without Python")
    assert v["CUDA debugger back-end"] == "libcudadebugger.so.1 not found"
    assert v["compute-sanitizer"] == "not installed"
    assert "cudaErrorInsufficientDriver" in run.reasons["runtime"]
    assert "has no Python" in run.reasons["debugger"]
    assert run.reasons["sanitizer"].startswith("compute-sanitizer is not installed")
    assert "CUDA runtime steps (cuda-*, runtime_prog's rows): skipped: the toolkit's CUDA 13.0" in " ".join(s.notes)
    assert not s.failures


def test_environment_on_a_13_driver_with_cuda_gdb_python(tmp_path, monkeypatch):
    gpu_machine(monkeypatch, {"nvidia-smi", "nvcc", "cuda-gdb", "compute-sanitizer"}, LDCONFIG_DRIVER)
    monkeypatch.setattr(facts.os.path, "exists", lambda p: p.endswith("libcudadebugger.so.1"))
    run = new_run(tmp_path)
    s = FakeStep({"nvidia-smi": SMI_535.replace("12.2", "13.0"), os.path.basename(sys.executable): "RZDRV 0 13000\n",
                  "nvcc --version": NVCC_13, "cuda-gdb --version": CUDA_GDB_13, "cuda-gdb -nx -batch": PY312,
                  "ldconfig -p": LDCONFIG_DRIVER, "compute-sanitizer": "Version 2025.3.0.0\n"})
    environment.probe(run, s, ROOT)
    assert run.reasons == {"runtime": None, "debugger": None, "cuda-gdb": None, "sanitizer": None}
    assert dict(run.versions)["debugger's Python"] == "3.12.3"


# ---- the plan: order, budget, limits ------------------------------------------------------------------------

def steps_in_call_order(tmp_path, monkeypatch, emulated):
    called = []
    monkeypatch.setattr(gr.Run, "step", lambda self, name, fn, gpu_only=None, skip=None: called.append(name))
    monkeypatch.setattr(gr, "write_report", lambda run: None)
    argv = ["--out", str(tmp_path)] + (["--emulated-device"] if emulated else [])
    with redirect_stdout(io.StringIO()):
        gr.main(argv)
    return called


@pytest.mark.parametrize("emulated", [False, True])
def test_the_steps_run_in_the_plans_order(tmp_path, monkeypatch, emulated):
    assert steps_in_call_order(tmp_path, monkeypatch, emulated) == plan.ORDER
    o = plan.ORDER
    assert o[:3] == ["environment", "build", "cu-build"]
    last_detection = max(o.index(n) for n in o if n.startswith(("driver-", "cuda-")) and not n.startswith("cuda-gdb"))
    assert last_detection < o.index("scan-100k") < o.index("overhead") < o.index("sanitizer-side-by-side")
    assert o.index("sanitizer-side-by-side") < min(o.index(n) for n in plan.DEBUGGER)
    assert o[-1] == "report"


def test_the_default_budget_leaves_room_for_a_slow_start():
    assert plan.DEFAULT_BUDGET <= 480
    assert gr.main.__defaults__ == (None,)
    assert plan.MEMCHECK_CAP <= 30 and plan.SESSION_CAP <= 45
    assert all(plan.LIMITS[n] <= 45 for n in plan.DEBUGGER)


def test_when_every_step_hangs_the_headline_figures_still_run():
    got = dict(plan.simulate(plan.DEFAULT_BUDGET))
    assert got["scan-100k"] >= plan.RESERVED["scan-100k"]
    assert got["overhead"] >= plan.RESERVED["overhead"]
    assert sum(g for n, g in got.items() if n != "report") <= plan.DEFAULT_BUDGET
    assert got["environment"] == plan.LIMITS["environment"] and got["build"] == plan.LIMITS["build"]


def test_a_normal_run_gets_every_limit_in_full():
    # each step taking 2 s, the build 90: nothing is cut, nothing is left out
    got = plan.simulate(plan.DEFAULT_BUDGET, lambda name, g: 90 if name == "build" else 2)
    assert got == [(n, plan.LIMITS[n]) for n in plan.ORDER]


# ---- the steps' own limits and skips ------------------------------------------------------------------------

def test_no_compute_sanitizer_is_one_skip_line(tmp_path, capsys):
    run = new_run(tmp_path)
    run.reasons = {"sanitizer": facts.sanitizer_skip({"compute_sanitizer": None}, False)}
    gr.step_sanitizer(run)
    out = capsys.readouterr().out.splitlines()
    assert out == ["SKIP sanitizer-side-by-side: compute-sanitizer is not installed (no memcheck column to set "
                   "beside redzone's)"]
    assert [r[1] for r in run.results] == ["SKIP"]


def test_each_memcheck_run_is_cut_at_30_s_and_says_so(tmp_path, monkeypatch, capsys):
    run = new_run(tmp_path)
    calls = []

    def sh(self, argv, env=None, stdin=None, timeout=None):
        calls.append((argv, timeout))
        c = FakeCmd(argv, "ERROR SUMMARY: 1 error\nInvalid __global__ write of size 1\n")
        if argv[0] == "compute-sanitizer" and "--padding" in argv:
            c = FakeCmd(argv, "[gpu run: killed after 30 s]\n", rc=124, timed_out=True, seconds=30)
        self.cmds.append(c)
        return c
    monkeypatch.setattr(gr.Step, "sh", sh)
    gr.step_sanitizer(run)
    memcheck = [t for a, t in calls if a[0] == "compute-sanitizer"]
    assert len(memcheck) == 2 * 14 and all(t == plan.MEMCHECK_CAP for t in memcheck)
    rows = run.tables["Detection side by side (redzone and compute-sanitizer memcheck)"]
    assert rows[2] == "| driver_prog alloc | not reported (exit 0) | 1 errors (Invalid __global__ write of size 1) " \
                      "| cut at 30 s |"
    name, status, _, reason, _ = run.results[0]
    assert (name, status) == ("sanitizer-side-by-side", "PASS"), reason


def test_after_the_first_debugger_timeout_the_other_sessions_are_skipped(tmp_path, capsys):
    run = new_run(tmp_path, emulated=True)
    ran = []

    def hangs(s):
        ran.append("gdb-commands")
        s.cmds.append(FakeCmd(["redzone", "gdb"], "[gpu run: killed after 45 s]\n", rc=124, timed_out=True,
                              seconds=45))
    run.step("gdb-commands", hangs)
    run.step("gdb-break-on", lambda s: ran.append("gdb-break-on"))
    run.step("overhead", lambda s: ran.append("overhead"))  # not a debugger step: runs
    assert ran == ["gdb-commands", "overhead"]
    out = capsys.readouterr().out
    assert "SKIP gdb-break-on: not run: the debugger session of gdb-commands timed out (45 s); the sessions " \
           "after the first timeout are skipped" in out


def test_each_session_is_cut_at_45_s(tmp_path, monkeypatch):
    run = new_run(tmp_path, emulated=True)
    calls = []

    def sh(self, argv, env=None, stdin=None, timeout=None):
        calls.append((argv, timeout))
        c = FakeCmd(argv, "")
        self.cmds.append(c)
        return c
    monkeypatch.setattr(gr.Step, "sh", sh)
    with redirect_stdout(io.StringIO()):
        gr.steps_debugger(run)
    sessions = [t for a, t in calls if a[1:2] == ["gdb"]]
    assert len(sessions) == 4 and all(t == plan.SESSION_CAP for t in sessions)


def focus_loop_source():
    text = gr.FOCUS_LOOP.strip()
    assert text.startswith("python exec(") and text.endswith(")")
    return ast.literal_eval(text[len("python exec("):-1])


def run_focus_loop(answers):
    """The focus loop's Python against a stand-in gdb: answers maps a command to text or an exception."""
    gdb = types.ModuleType("gdb")
    gdb.error = type("error", (RuntimeError,), {})
    asked = []

    def execute(cmd, to_string=False):
        asked.append(cmd)
        a = answers[cmd].pop(0) if isinstance(answers[cmd], list) else answers[cmd]
        if isinstance(a, str) and a.startswith("!"):
            raise gdb.error(a[1:])
        return a
    gdb.execute = execute
    out = io.StringIO()
    with redirect_stdout(out):
        exec(focus_loop_source(), {"gdb": gdb})
    return asked, out.getvalue()


def test_the_focus_loop_stops_when_the_program_exits_early():
    asked, out = run_focus_loop({"cuda kernel block thread": "!Focus not set on any active CUDA kernel.",
                                 "continue": "!The program is not being run."})
    assert asked == ["cuda kernel block thread", "continue"]
    assert out.splitlines() == ["RZFOCUS Focus not set on any active CUDA kernel.",
                                "RZFOCUS continue: The program is not being run."]


def test_the_focus_loop_continues_until_a_device_thread_has_the_focus():
    asked, out = run_focus_loop({"cuda kernel block thread": ["!Focus not set on any active CUDA kernel.",
                                                              "kernel 0, block (0,0,0), thread (0,0,0)\n"],
                                 "continue": ""})
    assert asked == ["cuda kernel block thread", "continue", "cuda kernel block thread"]
    assert out.splitlines()[-1] == "RZFOCUS kernel 0, block (0,0,0), thread (0,0,0)"


def test_a_session_without_the_back_end_skips_the_other_sessions(tmp_path, capsys):
    # The probe found libcudadebugger.so.1, yet cuda-gdb says it cannot: the first session tells.
    run = new_run(tmp_path, emulated=True)
    ran = []

    def no_backend(s):
        ran.append("gdb-commands")
        s.cmds.append(FakeCmd(["redzone", "gdb"], "fatal:  Could not find CUDA Debugger back-end.\n", rc=1))
        s.check(False, "list: 3 zones")
    run.step("gdb-commands", no_backend)
    run.step("gdb-break-on", lambda s: ran.append("gdb-break-on"))
    assert ran == ["gdb-commands"]
    assert [r[1] for r in run.results] == ["FAIL", "SKIP"]
    assert run.results[1][3] == ('not run: the debugger said "Could not find CUDA Debugger back-end" in '
                                 'gdb-commands (libcudadebugger.so.1, shipped with the driver, is missing)')


def test_time_scale_multiplies_limits_and_reserves():
    left = plan.DEFAULT_BUDGET
    assert plan.granted("driver-alloc", left * 4, set(), 4.0) == 4 * plan.granted("driver-alloc", left, set())
    assert plan.granted("report", 0, set(), 4.0) == 4 * plan.LIMITS["report"]
    # what the headline steps keep grows with the scale: a step is cut to leave them 4x their reserve
    keep = sum(plan.RESERVED.values())
    assert plan.granted("environment", keep * 4 + 10, set(), 4.0) == 10
