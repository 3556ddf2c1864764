"""The `environment` step: what the machine has (each probe a logged command with a short timeout, so a
missing or hanging tool costs seconds), recorded in the report's head table and logs/environment.txt, and
the skip decisions taken from it (facts.py)."""
import os
import platform
import shutil
import sys

from . import facts

from redzone_gdb import versions  # gdb/ on sys.path (tests/gpu/run): pure text, no gdb needed


def first_line(c, pick=lambda ls: ls[0]):
    lines = [l.strip() for l in c.out.splitlines() if l.strip()]
    if c.timed_out:
        return f"no answer in {c.seconds:.0f} s"
    return pick(lines) if lines else f"no output (exit {c.rc})"


def probe(run, s, root):
    """Fill run.versions, run.facts and run.reasons; every command through s.sh (logged)."""
    v, f = run.versions, run.facts
    v.append(("date (UTC)", run.started.strftime("%Y-%m-%d %H:%M:%S")))
    v.append(("mode", "emulated device (no GPU)" if run.emulated else "GPU"))
    v.append(("machine", f"{platform.node()}, {os.cpu_count()} CPUs, {platform.platform()}"))

    # The driver: its CUDA version from cuDriverGetVersion (no GPU or cuInit needed), else nvidia-smi's header.
    smi = None
    if shutil.which("nvidia-smi"):
        c = s.sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap",
                  "--format=csv,noheader"], timeout=20)
        v.append(("GPU, driver", c.out.strip() if c.rc == 0 and c.out.strip() else f"nvidia-smi failed ({c.rc})"))
        smi = facts.smi_cuda(s.sh(["nvidia-smi"], timeout=20).out)
    else:
        v.append(("GPU, driver", "none (no nvidia-smi)"))
    drv = facts.driver_probe(s.sh([sys.executable, "-c", facts.DRIVER_PROBE], timeout=20).out)
    f["driver_cuda"] = drv or smi
    v.append(("CUDA (driver's)", f"{facts.vstr(drv)} (cuDriverGetVersion)" if drv else
              f"{facts.vstr(smi)} (nvidia-smi)" if smi else
              "unknown (no libcuda.so.1 answered cuDriverGetVersion" + (
                  "; the emulated driver is the build's" if run.emulated else "") + ")"))

    # The toolkit: nvcc's release is the runtime runtime_prog links.
    f["nvcc"] = shutil.which("nvcc")
    if f["nvcc"]:
        c = s.sh(["nvcc", "--version"], timeout=30)
        f["toolkit_cuda"] = facts.nvcc_release(c.out)
        v.append(("nvcc", first_line(c, lambda ls: ls[-2] if len(ls) > 1 else ls[-1])))
    else:
        v.append(("nvcc", "not installed"))
    v.append(("CUDA (nvcc's)", facts.vstr(f.get("toolkit_cuda")) if f["nvcc"] else "no nvcc"))

    f["compute_sanitizer"] = shutil.which("compute-sanitizer")
    for label, argv, pick in [("gdb", ["gdb", "--version"], lambda ls: ls[0]),
                              ("compute-sanitizer", ["compute-sanitizer", "--version"], lambda ls: ls[-1]),
                              ("cmake", ["cmake", "--version"], lambda ls: ls[0]),
                              ("ninja", ["ninja", "--version"], lambda ls: ls[0])]:
        v.append((label, first_line(s.sh(argv, timeout=20), pick) if shutil.which(argv[0]) else "not installed"))
    v.append(("python", sys.version.split()[0] + f" ({sys.executable})"))

    probe_debugger(run, s)

    head = s.sh(["git", "-C", root, "log", "-1", "--format=%H"], timeout=20) if shutil.which("git") else None
    v.append(("redzone commit", first_line(head) if head and head.rc == 0 else "unknown"))

    run.reasons = {"runtime": facts.runtime_skip(f, run.emulated),
                   "debugger": facts.debugger_skip(f, run.emulated),
                   "cuda-gdb": facts.cuda_gdb_skip(f, run.emulated),
                   "sanitizer": facts.sanitizer_skip(f, run.emulated)}
    for k, val in v:
        s.note(f"{k}: {val}")
    for kind, what in [("runtime", "CUDA runtime steps (cuda-*, runtime_prog's rows)"),
                       ("debugger", "debugger sessions"), ("cuda-gdb", "sessions in device code"),
                       ("sanitizer", "compute-sanitizer side by side")]:
        reason = run.reasons[kind]
        s.note(f"{what}: " + (f"skipped: {reason}" if reason else
                              "run (those the emulated device can)" if run.emulated else "run"))
    if not run.emulated:
        gpu = dict(v).get("GPU, driver", "")
        s.check(not gpu.startswith(("none", "nvidia-smi failed")), "a GPU answers nvidia-smi", gpu)


def probe_debugger(run, s):
    """The debugger the sessions will use (`redzone gdb`'s choice: --debugger, else cuda-gdb, else gdb): which
    binary answers, its Python (the plugin needs 3.8 or later), and for cuda-gdb the driver's back-end."""
    v, f = run.versions, run.facts
    dbg = run.debugger or shutil.which("cuda-gdb") or shutil.which("gdb")
    f["debugger"] = dbg
    if not dbg:
        v.append(("debugger for the sessions", "none (neither cuda-gdb nor gdb)"))
        return
    c = s.sh([dbg, "--version"], timeout=30)
    cuda = versions.is_cuda_gdb(c.out)
    f["debugger_kind"] = "cuda-gdb" if cuda else "gdb"
    v.append(("debugger for the sessions", f"{dbg}: {versions.describe(c.out)}"))
    p = s.sh([dbg, "-nx", "-batch", "-ex", facts.PYTHON_PROBE], timeout=30)
    py, binary, why = facts.debugger_python(c.out + "\n" + p.out)
    if p.timed_out:
        why = f"the python probe did not answer in {p.seconds:.0f} s"
    f["debugger_python"], f["debugger_binary"], f["debugger_python_why"] = py, binary, why
    v.append(("debugger's binary", binary or "unknown"))
    v.append(("debugger's Python", py or f"none: {why}"))
    f["backend_error"] = facts.BACKEND_ERROR in c.out + p.out
    if cuda:
        ldconfig = shutil.which("ldconfig") or next((x for x in ("/sbin/ldconfig", "/usr/sbin/ldconfig")
                                                     if os.access(x, os.X_OK)), None)
        cache = s.sh([ldconfig, "-p"], timeout=20).out if ldconfig else ""
        f["backend"] = facts.find_backend(cache, os.environ.get("LD_LIBRARY_PATH", ""))
        v.append(("CUDA debugger back-end", f["backend"] or "libcudadebugger.so.1 not found" + (
            " (not needed on the emulated device)" if run.emulated else "")))
