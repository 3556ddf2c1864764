"""`redzone gdb`: starts cuda-gdb (else gdb) with the redzone plugin loaded and the program ready to run.

  redzone gdb [--emulated-device] [--gdb PATH] -- [DEBUGGER OPTIONS... --] PROGRAM [ARGS...]

It says which debugger it starts (path and version) and why; it loads the plugin itself and tells the
debugger that the plugin's auto-load stub next to libredzone.so is safe, so no auto-load safe-path warning
paragraph appears when the program loads the library (the stub finds the plugin already loaded).

Words after `--` that start with '-' are the debugger's own options (`-batch`, `-ex CMD`, `-x FILE`, for a CI
session), up to a second `--`; the program follows. The CUDA toolkit's cuda-gdb 12.5 and later is a
`cuda-gdb` wrapper in front of one build per Python version (cuda-gdb-python3.X-tui) and cuda-gdb-minimal,
which has no Python and so cannot load the plugin: the launcher starts the newest Python build whose
libpython is installed itself, and says in one sentence what to install where there is none. A debugger
built without Python (Debian 13's nvidia-cuda-gdb 12.4) is refused the same way."""
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys

from . import paths
from .options import Failure, UsageError

PYTHON_BUILD = re.compile(r"^cuda-gdb-python(3\.\d+)-tui$")
NO_PYTHON = "Python scripting is not supported in this copy of GDB"


def _versions():
    """The plugin's banner parser (share/redzone/gdb/redzone_gdb/versions.py): one parser for both."""
    where = os.path.join(os.path.dirname(paths.GDB_PLUGIN), "redzone_gdb", "versions.py")
    spec = importlib.util.spec_from_file_location("redzone_gdb_versions", where)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _library_dirs():
    """Where ld.so looks for a libpython: LD_LIBRARY_PATH, its cache (ldconfig -p) and the usual folders."""
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=30).stdout
        dirs += [os.path.dirname(l.split(" => ", 1)[1]) for l in out.splitlines() if " => " in l]
    except (OSError, subprocess.TimeoutExpired):
        pass
    dirs += ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib",
             "/usr/local/lib"]
    return list(dict.fromkeys(dirs))


def libpython_present(version, dirs=None):
    name = f"libpython{version}.so.1.0"
    return any(os.path.exists(os.path.join(d, name)) for d in (_library_dirs() if dirs is None else dirs))


def python_builds(cuda_gdb):
    """The cuda-gdb-python3.X-tui builds beside a cuda-gdb (the 12.5+ wrapper's layout), newest Python
    first: [(version, path)]. [] for a cuda-gdb that is one program (11.x, Debian's 12.4)."""
    found = {}
    for folder in dict.fromkeys((os.path.dirname(cuda_gdb), os.path.dirname(os.path.realpath(cuda_gdb)))):
        for path in glob.glob(os.path.join(folder, "cuda-gdb-python3.*-tui")):
            m = PYTHON_BUILD.match(os.path.basename(path))
            if m and os.access(path, os.X_OK):
                found.setdefault(m.group(1), path)
    return sorted(found.items(), key=lambda kv: tuple(int(x) for x in kv[0].split(".")), reverse=True)


def resolve_cuda_gdb(cuda_gdb, dirs=None):
    """(path, note) of the cuda-gdb build to start for a `cuda-gdb` found or given: the wrapper's newest
    Python build whose libpython is installed. Raises Failure (one sentence) where there is none."""
    builds = python_builds(cuda_gdb)
    if not builds:
        return cuda_gdb, ""
    for version, path in builds:
        if libpython_present(version, dirs):
            return path, (f"; the build for Python {version} (libpython{version} is installed), not the "
                          f"{os.path.basename(cuda_gdb)} wrapper, which may start cuda-gdb-minimal")
    wanted = ", ".join(f"libpython{v}" for v, _ in builds)
    raise Failure(f"redzone gdb: {cuda_gdb} has Python builds for {', '.join(v for v, _ in builds)}, and none of "
                  f"their libraries ({wanted}) is installed, so it would start cuda-gdb-minimal, which has no "
                  f"Python and cannot load the redzone plugin: install one (apt-get install libpython"
                  f"{builds[0][0]}) or start gdb (redzone gdb --gdb gdb -- PROGRAM)", 127)


def choose(requested):
    """(path, why) of the debugger to start."""
    if requested:
        path = shutil.which(requested) or (requested if os.path.exists(requested) else None)
        if not path:
            raise Failure(f"redzone: the debugger {requested} was not found", 127)
        chosen, note = resolve_cuda_gdb(path) if os.path.basename(path) == "cuda-gdb" else (path, "")
        return chosen, "--gdb" + note
    cuda = shutil.which("cuda-gdb")
    if cuda:
        chosen, note = resolve_cuda_gdb(cuda)
        return chosen, ("cuda-gdb is found first: it debugs host and device code (--gdb PATH picks another)"
                        + note)
    gdb = shutil.which("gdb")
    if gdb:
        return gdb, "cuda-gdb is not installed; gdb debugs host code, and redzone's commands work the same"
    raise Failure("redzone: neither cuda-gdb nor gdb was found (apt-get install gdb, or nvidia-cuda-gdb)", 127)


def banner(path):
    try:
        p = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, errors="replace")
        return p.stdout + p.stderr
    except (OSError, subprocess.TimeoutExpired):
        return ""


def version(path, text=None):
    """The debugger's version: 'cuda-gdb 11.8 (GDB 10.2)', 'cuda-gdb 12.4 (GDB 13.1)', 'gdb 13.1'."""
    text = banner(path) if text is None else text
    return _versions().describe(text) if text.strip() else "version unknown"


def has_python(path):
    """False when the debugger says it has no Python (then the plugin cannot load in it)."""
    try:
        p = subprocess.run([path, "-nx", "-batch", "-ex", "python print('rz-python-' + 'ok')"],
                           capture_output=True, text=True, timeout=60, errors="replace", stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return True  # it will say so itself when started
    return "rz-python-ok" in p.stdout or NO_PYTHON not in p.stdout + p.stderr


def split_words(words):
    """`[DEBUGGER OPTIONS... --] PROGRAM [ARGS...]` -> (debugger options, program words)."""
    if words and words[0].startswith("-"):
        if "--" not in words:
            raise UsageError("redzone gdb: debugger options come before a second `--`, then the program "
                             "(usage: redzone gdb [--emulated-device] [--gdb PATH] -- [DEBUGGER OPTIONS... --] "
                             "PROGRAM [ARGS...])")
        k = words.index("--")
        return words[:k], words[k + 1:]
    return [], words


def check_program(program):
    """The program must be one the debugger can start: a file (or a name on PATH), not a script."""
    if not program:
        raise UsageError("redzone gdb: no PROGRAM given (usage: redzone gdb [--emulated-device] [--gdb PATH] -- "
                         "[DEBUGGER OPTIONS... --] PROGRAM [ARGS...])")
    name = program[0]
    path = name if "/" in name else shutil.which(name)
    if not path or not os.path.isfile(path):
        raise Failure(f"redzone gdb: the program {name} was not found" +
                      (" (no such file)" if "/" in name else " (not a file here, nor on PATH)"), 127)
    try:
        with open(path, "rb") as f:
            head = f.read(128)
    except OSError as e:
        raise Failure(f"redzone gdb: cannot read the program {name}: {e.strerror}", 126) from None
    if head.startswith(b"#!"):
        interpreter = head[2:].split(b"\n", 1)[0].strip().decode(errors="replace")
        raise Failure(f"redzone gdb: {name} is a script (#!{interpreter}), and a debugger starts programs: name "
                      "the program the script starts (redzone gdb -- PROGRAM ARGS), with what the script sets "
                      "given in gdb (set environment NAME=VALUE, cd DIR), or run the script under `redzone run` "
                      "and attach to the program (gdb -p PID)", 2)


def driver_loadable():
    """Whether libcuda.so.1 loads here as the program would find it (this environment's LD_LIBRARY_PATH)."""
    import ctypes  # noqa: PLC0415 -- only `redzone gdb` without --emulated-device needs it
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def cmd_gdb(args, program):
    options, program = split_words(program)
    check_program(program)
    if not args.emulated_device and not driver_loadable():
        raise Failure(f"redzone gdb: the CUDA driver (libcuda.so.1) cannot be loaded here, so "
                      f"{os.path.basename(program[0])} could not start: on a machine without a GPU, add "
                      "--emulated-device", 127)
    debugger, why = choose(args.gdb)
    text = banner(debugger)
    if NO_PYTHON in text or not has_python(debugger):
        raise Failure(f"redzone gdb: {debugger} ({version(debugger, text)}) has no Python (\"{NO_PYTHON}.\"), so "
                      "the redzone plugin cannot load in it: install a cuda-gdb with Python (the CUDA toolkit's "
                      "cuda-gdb, 12.5 and later ship cuda-gdb-python3.X-tui builds) or start gdb (redzone gdb "
                      "--gdb gdb -- PROGRAM)", 127)
    print(f"redzone gdb: starting {debugger}, {version(debugger, text)}: {why}", file=sys.stderr, flush=True)
    libdir = os.path.dirname(paths.LIBREDZONE)
    cmd = [debugger, "-q", "-iex", f"add-auto-load-safe-path {libdir}", "-ex", f"source {paths.GDB_PLUGIN}"]
    if args.emulated_device:
        cmd += ["-ex", "set redzone emulated-device on"]
    cmd += options + ["--args"] + program
    try:
        os.execvp(cmd[0], cmd)
    except OSError as e:
        raise Failure(f"redzone: cannot run {debugger}: {e.strerror}", 127) from None
