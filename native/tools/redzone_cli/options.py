"""Command-line options to METRALE_REDZONE* variables, the same way for `redzone run` and `redzone bisect`:
an option given on the command line wins over the variable in the environment, which wins over the
launcher's default (64-byte bands). Values are checked by the library's own parser (rz-options, built from
native/src/base/options.inc), so the launcher accepts exactly what the library accepts: a value the library
would warn about and replace is a usage error here, whether it came from an option or the environment."""
import os
import subprocess

from . import paths


class UsageError(Exception):
    """A bad command line or environment: one sentence, exit 2."""


class Failure(Exception):
    """Something the launcher cannot do: one sentence, and the documented exit status."""

    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


# (flag, variable, metavar, help): the flags `redzone run` maps to variables; bisect takes the BISECT subset.
RUN_OPTIONS = [
    ("--bytes", "METRALE_REDZONE", "N", "band size in bytes after every allocation (default 64; 0 = off)"),
    ("--fill", "METRALE_REDZONE_FILL", "B", "band byte, decimal 0-255 (default 238 = 0xEE)"),
    ("--min-idx", "METRALE_REDZONE_MIN_IDX", "N", "pad only allocations with creation index >= N"),
    ("--trace-idx", "METRALE_REDZONE_TRACE_IDX", "N", "log a host backtrace when allocation #N is made"),
    ("--scan", "METRALE_REDZONE_SCAN", "LIST",
     "when to scan: comma list of free,sync,launch,exit,fatal,none; it replaces the default free,exit,fatal"),
    ("--log", "METRALE_REDZONE_LOG", "PATH",
     "write reports to PATH instead of stderr (%%p = pid; relative to where redzone was started)"),
    ("--poison", "METRALE_REDZONE_POISON", "LO:HI",
     "poison window: bands of allocations #LO..#HI-1 get 0xEE, all others 0x00 (0:0: every band 0x00)"),
    ("--quarantine", "METRALE_REDZONE_QUARANTINE", "BYTES",
     "freed bytes held back to catch writes after free (K/M/G suffix; default 64M; 0 = off)"),
    ("--leak-check", "METRALE_REDZONE_LEAK_CHECK", "0|1",
     "1: report allocations still live at exit as leaks, counted for --error-exitcode"),
]
BISECT_FLAGS = ("--bytes", "--min-idx")
DEFAULT_BYTES = "64"
FLAG_OF = {var: flag for flag, var, _m, _t in RUN_OPTIONS}


def error_exitcode(text):
    """--error-exitcode: an exit status a shell can see, 1-255 (0 would hide violations; 256 wraps to 0)."""
    try:
        value = int(text, 10)
    except ValueError:
        value = -1
    if not 1 <= value <= 255:
        import argparse
        raise argparse.ArgumentTypeError(f"{text!r} is not an exit status from 1 to 255")
    return value


def program_env(args, flags, emulated_device):
    """The program's environment: options over the environment over the defaults, the library preloaded,
    the emulated driver first on the library path when asked for. Returns (env, where each variable came
    from: var -> flag or None for the environment)."""
    env = dict(os.environ)
    origin = {var: None for var in env if var.startswith("METRALE_REDZONE")}
    for flag, var, _metavar, _text in RUN_OPTIONS:
        if flag in flags and getattr(args, var, None) is not None:
            env[var] = getattr(args, var)  # the command line wins over the environment
            origin[var] = flag
    if "METRALE_REDZONE" not in env:
        env["METRALE_REDZONE"] = DEFAULT_BYTES
        origin["METRALE_REDZONE"] = "the default"
    for var in ("METRALE_REDZONE_LOG", "METRALE_REDZONE_SUMMARY"):
        if env.get(var) and not os.path.isabs(env[var]):
            env[var] = os.path.abspath(env[var])  # the program may change directory before its first report
    add_preload(env)
    if emulated_device:
        if not os.path.isdir(paths.EMU_DIR):
            raise Failure(f"redzone: the emulated driver folder {paths.EMU_DIR} is missing", 127)
        prepend_path(env, "LD_LIBRARY_PATH", paths.EMU_DIR)
    return env, origin


def prepend_path(env, var, value):
    if ":" in value or ";" in value:
        raise Failure(f"redzone: {value} contains ':' or ';', which {var} cannot hold; install redzone under "
                      "a path without them", 127)
    old = env.get(var, "")
    env[var] = value + (":" + old if old else "")


def add_preload(env):
    """LD_PRELOAD splits on spaces and colons: a library under a path with a space is preloaded by name,
    from its folder put first on LD_LIBRARY_PATH (which splits on colons only)."""
    lib = paths.LIBREDZONE
    if not os.path.exists(lib):
        raise Failure(f"redzone: {lib} is missing (is redzone installed?)", 127)
    entry = lib
    if any(c in lib for c in " \t\n"):
        prepend_path(env, "LD_LIBRARY_PATH", os.path.dirname(lib))
        entry = os.path.basename(lib)
    elif ":" in lib:
        raise Failure(f"redzone: {lib} contains ':', which LD_PRELOAD cannot hold; install redzone under a "
                      "path without it", 127)
    old = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = entry + (":" + old if old else "")


def check_values(env, origin, command):
    """Runs the library's option parser on env. Every value it would warn about is a usage error; returns
    the values the launcher needs: {'pad_bytes': n, 'min_idx': n, 'scan': bits}."""
    try:
        plain = {k: v for k, v in env.items() if k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
        p = subprocess.run([paths.RZ_OPTIONS, "check"], env=plain, capture_output=True, text=True,
                           errors="replace")
    except OSError as e:
        raise Failure(f"redzone: cannot run {paths.RZ_OPTIONS}: {e.strerror} (is redzone installed?)", 127) from None
    if p.returncode not in (0, 1):
        raise Failure(f"redzone: {paths.RZ_OPTIONS} failed (exit {p.returncode}); is redzone installed?", 127)
    if p.returncode == 1:
        line = next((x for x in p.stderr.splitlines() if x.strip()), "")
        text = line.replace("redzone: warning: ", "", 1)
        var = text.split("=", 1)[0].split(" ", 1)[0]
        said, _sep, instead = text.partition("; using ")
        source = origin.get(var)
        where = f"{source}: " if source and source.startswith("--") else "in the environment: "
        more = f"; the library would use {instead}" if instead else ""
        raise UsageError(f"redzone {command}: {where}{said}{more}")
    return {k: int(v) for k, v in (f.split("=") for f in p.stdout.split())}
