"""What the `environment` step learns about the machine, and what it decides from it: pure functions of the
probes' output (tests/python/test_gpurun.py feeds them the texts real tools print).

Decisions are skip reasons: a step that cannot work on this machine is skipped with the reason once, instead
of failing one expectation at a time (docs/gpu.md, "What is skipped when").
"""
import os
import re


def version_tuple(text):
    """'12.2' -> (12, 2); None for None."""
    if not text:
        return None
    m = re.match(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def vstr(v):
    return f"{v[0]}.{v[1]}" if v else "unknown"


def nvcc_release(text):
    """nvcc --version: 'Cuda compilation tools, release 13.0, V13.0.88' -> (13, 0)."""
    m = re.search(r"release (\d+\.\d+)", text or "")
    return version_tuple(m.group(1)) if m else None


def smi_cuda(text):
    """nvidia-smi's header: 'CUDA Version: 12.2' -> (12, 2): the newest CUDA the driver supports."""
    m = re.search(r"CUDA Version: *(\d+\.\d+)", text or "")
    return version_tuple(m.group(1)) if m else None


# A Python line run in a subprocess: cuDriverGetVersion needs no cuInit and no GPU, only libcuda.so.1.
DRIVER_PROBE = ("import ctypes\n"
                "try:\n"
                "    lib = ctypes.CDLL('libcuda.so.1')\n"
                "except OSError as e:\n"
                "    print('RZDRV none', e)\n"
                "else:\n"
                "    v = ctypes.c_int(0)\n"
                "    print('RZDRV', lib.cuDriverGetVersion(ctypes.byref(v)), v.value)\n")


def driver_probe(text):
    """DRIVER_PROBE's output: 'RZDRV 0 12020' -> (12, 2); None when there is no driver or the call failed."""
    m = re.search(r"^RZDRV 0 (\d+)$", text or "", re.M)
    if not m or int(m.group(1)) <= 0:
        return None
    n = int(m.group(1))
    return (n // 1000, n % 1000 // 10)


# The debugger's Python, asked the way the plugin will be loaded (python commands in batch mode).
PYTHON_PROBE = ("python import sys, os; print('RZPY ' + sys.version.split()[0]); "
                "print('RZEXE ' + os.path.realpath('/proc/self/exe'))")
NO_PYTHON = "Python scripting is not supported in this copy of GDB"
BACKEND_ERROR = "Could not find CUDA Debugger back-end"


def debugger_python(text):
    """(version, binary, why-not) from the PYTHON_PROBE session's output. version None: no Python there
    (cuda-gdb-minimal says NO_PYTHON); binary: the executable that answered (the 12.5+ `cuda-gdb` wrapper
    starts a cuda-gdb-python3.X-tui build or cuda-gdb-minimal), from the probe or the wrapper's 'exec:' line."""
    text = text or ""
    v = re.search(r"^RZPY (\d+\.\d+(?:\.\d+)?)", text, re.M)
    exe = re.search(r"^RZEXE (\S+)", text, re.M)
    wrapped = re.search(r"^exec: (\S+)", text, re.M)
    binary = exe.group(1) if exe else wrapped.group(1) if wrapped else None
    if v:
        return v.group(1), binary, None
    if NO_PYTHON in text:
        why = "a build without Python (" + NO_PYTHON + ")"
    else:
        lines = [l for l in text.splitlines() if l.strip()]
        why = "no answer to a python command" + (f": {lines[-1].strip()}" if lines else "")
    return None, binary, why


def ldconfig_paths(text, name):
    """`ldconfig -p` lines for a library: '\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/.../libcuda.so.1'."""
    return [m.group(1) for m in re.finditer(r"^\s*" + re.escape(name) + r" \([^)]*x86-64[^)]*\) => (\S+)",
                                            text or "", re.M)]


def find_backend(ldconfig_text, ld_library_path, exists=None):
    """Where libcudadebugger.so.1 (the driver's CUDA debugger back-end, which cuda-gdb 12 and later need on a
    GPU) would be found: LD_LIBRARY_PATH, the loader's cache, or beside libcuda.so.1; None when nowhere (a
    container that mounts the driver without it, a driver unpacked by hand)."""
    name = "libcudadebugger.so.1"
    exists = exists or os.path.exists
    for d in (ld_library_path or "").split(":"):
        if d and exists(os.path.join(d, name)):
            return os.path.join(d, name)
    for p in ldconfig_paths(ldconfig_text, name):
        if exists(p):
            return p
    for p in ldconfig_paths(ldconfig_text, "libcuda.so.1"):
        q = os.path.join(os.path.dirname(p), name)
        if exists(q):
            return q
    return None


def cudart_dir(dryrun_text, exists=None):
    """The directory of the libcudart nvcc links (`nvcc --dryrun`: the -L of its LIBRARIES line that is not
    the stubs), normalised; None when nvcc said none holding libcudart.so."""
    exists = exists or os.path.exists
    m = re.search(r"^#\$ LIBRARIES=(.*)$", dryrun_text or "", re.M)
    if not m:
        return None
    for d in re.findall(r'-L"?([^"\s]+)"?', m.group(1)):
        d = os.path.normpath(d)
        if os.path.basename(d) != "stubs" and exists(os.path.join(d, "libcudart.so")):
            return d
    return None


def runpath(readelf_text):
    """The RUNPATH (or RPATH) directories `readelf -d` shows."""
    m = re.search(r"\((?:RUNPATH|RPATH)\)\s+Library (?:runpath|rpath): \[([^\]]*)\]", readelf_text or "")
    return [d for d in m.group(1).split(":") if d] if m else []


def resolved(list_text, soname):
    """Where the loader's --list put a library ('libcudart.so.13 => /x/libcudart.so.13 (0x...)'); None."""
    m = re.search(r"^\s*" + re.escape(soname) + r"\S* => (/\S+)", list_text or "", re.M)
    return m.group(1) if m else None


# ---- decisions ---------------------------------------------------------------------------------------------

def runtime_skip(f, emulated):
    """Why the CUDA runtime steps (cuda-*, the cuda-gdb sessions, runtime_prog's rows) cannot run here, or
    None. A CUDA runtime needs a driver of its major version or newer (minor version compatibility inside a
    major): a CUDA 13 runtime on a 12.x driver fails every call with cudaErrorInsufficientDriver."""
    if emulated:
        return None  # the steps say themselves that they need a GPU
    if not f.get("nvcc"):
        return "nvcc is not installed: runtime_prog cannot be built"
    tk, drv = f.get("toolkit_cuda"), f.get("driver_cuda")
    if tk and drv and tk[0] > drv[0]:
        return (f"the toolkit's CUDA {vstr(tk)} runtime needs a CUDA {tk[0]}.x driver; this driver supports CUDA "
                f"{vstr(drv)} (every runtime call would fail with cudaErrorInsufficientDriver)")
    return None


def debugger_skip(f, emulated):
    """Why no debugger session can run here, or None: no debugger, no Python in it (the plugin is Python 3.8
    or later), or on a GPU a cuda-gdb without the driver's debugger back-end."""
    path = f.get("debugger")
    if not path:
        return "neither cuda-gdb nor gdb is installed"
    py = f.get("debugger_python")
    binary = f.get("debugger_binary")
    who = path + (f" (runs {binary})" if binary and os.path.basename(binary) != os.path.basename(path) else "")
    if not py:
        return (f"{who} has no Python: {f.get('debugger_python_why') or 'unknown'}; the plugin cannot load. "
                "cuda-gdb 12.5 and later start cuda-gdb-minimal when no libpython matches one of their "
                "cuda-gdb-python3.X-tui builds (install libpython3.8 to 3.12, or give --debugger PATH)")
    pv = version_tuple(py)
    if pv and pv < (3, 8):
        return f"{who} runs Python {py}; the plugin needs Python 3.8 or later"
    if not emulated and f.get("debugger_kind") == "cuda-gdb":
        if f.get("backend_error"):
            return f"{who}: \"{BACKEND_ERROR}\" (libcudadebugger.so.1, shipped with the driver, is missing)"
        if not f.get("backend"):
            return (f"{who} needs the driver's CUDA debugger back-end, libcudadebugger.so.1, and it is not on "
                    "LD_LIBRARY_PATH, in the loader's cache or beside libcuda.so.1")
    return None


def cuda_gdb_skip(f, emulated):
    """Why the sessions inside kernels (cuda-gdb-*, gdb-guard's device exception) cannot run on a GPU."""
    if emulated:
        return None
    if f.get("debugger") and f.get("debugger_kind") != "cuda-gdb":
        return f"the sessions' debugger ({f.get('debugger')}) is gdb, not cuda-gdb: it cannot stop in device code"
    return None


def sanitizer_skip(f, emulated):
    if emulated:
        return None
    if not f.get("compute_sanitizer"):
        return "compute-sanitizer is not installed (no memcheck column to set beside redzone's)"
    return None
