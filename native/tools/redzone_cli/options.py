"""Command-line options to METRALE_REDZONE* variables, the same way for `redzone run` and `redzone bisect`:
an option given on the command line wins over the variable in the environment, which wins over the
launcher's default (64-byte bands). Values are checked by the library's own parser (rz-options, built from
native/src/base/options.inc), so the launcher accepts exactly what the library accepts: a value the library
would warn about and replace is a usage error here, whether it came from an option or the environment."""
import os
import re
import subprocess

from . import paths


class UsageError(Exception):
    """A bad command line or environment: one sentence, exit 2."""


class Failure(Exception):
    """Something the launcher cannot do: one sentence, and the documented exit status."""

    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


# `redzone run`'s flags come from the library's one option table (options.inc, listed by `rz-options list`):
# METRALE_REDZONE_<NAME> is --<name> (lower case, '_' as '-'), so an option added to the table is a flag with
# no edit here. The few exceptions, and the aliases:
FLAG_NAMES = {
    "METRALE_REDZONE": ("--bytes",),                  # the band itself
    "METRALE_REDZONE_LOG": ("--log", "--log-file"),   # --log-file: compute-sanitizer's and valgrind's name
}
NOT_FLAGS = {
    "METRALE_REDZONE_SUMMARY",  # the launcher's own channel (it keeps a user's file, run.py)
    "METRALE_REDZONE_HELP",     # prints the table to the log; `redzone run --help` lists it
}
# What a value looks like, by the table's type; a type not here shows its own name.
METAVARS = {"BAND": "N", "FRONT": "N", "INDEX": "N", "OPTINDEX": "N", "BYTE": "B", "PATH": "PATH",
            "BOOL": "0|1", "SCANLIST": "LIST", "INSTALL": "lazy|eager", "WINDOW": "LO:HI", "GUARD": "N|idx:I,J",
            "DEPTH": "N", "COUNT": "N", "SIZE": "BYTES"}
# Short --help lines for the flags the launcher had before they came from the table; every other option's
# line is the first sentence of its description in the table (the man page and docs/options.md have it all).
SHORT_HELP = {
    "METRALE_REDZONE": "band size in bytes after every allocation (default 64; 0 = off)",
    "METRALE_REDZONE_FILL": "band byte, decimal 0-255 (default 238 = 0xEE)",
    "METRALE_REDZONE_MIN_IDX": "pad only allocations with creation index >= N",
    "METRALE_REDZONE_TRACE_IDX": "log a host backtrace when allocation #N is made",
    "METRALE_REDZONE_SCAN": "when to scan: comma list of free,sync,launch,exit,fatal,none; it replaces the "
                            "default free,exit,fatal",
    "METRALE_REDZONE_LOG": "write reports to PATH instead of stderr (%p = pid; relative to where redzone was "
                           "started)",
    "METRALE_REDZONE_POISON": "poison window: bands of allocations #LO..#HI-1 get 0xEE, all others 0x00 (0:0: "
                              "every band 0x00)",
    "METRALE_REDZONE_INSTALL": "when a new band is written: lazy (batched, before the next launch, copy, memset, "
                               "synchronisation or scan) or eager (at the allocation) (default lazy)",
}
# The launcher's default differs from the library's (bands on in `redzone run`).
LAUNCHER_DEFAULTS = {"METRALE_REDZONE": "64"}
BISECT_FLAGS = ("--bytes", "--min-idx")
DEFAULT_BYTES = "64"


class Option:
    """One row of the option table as `redzone run` offers it."""

    def __init__(self, var, kind, default, text):
        self.var, self.kind, self.default, self.text = var, kind, default, text
        self.flags = FLAG_NAMES.get(var) or ("--" + var[len("METRALE_REDZONE_"):].lower().replace("_", "-"),)
        self.flag = self.flags[0]
        self.metavar = METAVARS.get(kind, kind)

    def summary(self):
        """The description's first sentence and the default, for --help (the man page has it all)."""
        if self.var in SHORT_HELP:
            return SHORT_HELP[self.var]
        first = re.split(r"(?<=[a-z0-9)`])\. ", self.text, maxsplit=1)[0].rstrip(".")
        default = LAUNCHER_DEFAULTS.get(self.var, self.default)
        return f"{first} (default {default})"


def _table():
    """The option table from rz-options list: [Option], in the table's order."""
    try:
        p = subprocess.run([paths.RZ_OPTIONS, "list"], capture_output=True, text=True, errors="replace")
    except OSError as e:
        raise Failure(f"redzone: cannot run {paths.RZ_OPTIONS}: {e.strerror} (is redzone installed?)", 127) from None
    if p.returncode != 0:
        raise Failure(f"redzone: {paths.RZ_OPTIONS} list failed (exit {p.returncode}); is redzone installed?", 127)
    rows = [line.split("\t", 3) for line in p.stdout.splitlines() if line.count("\t") >= 3]
    return [Option(*row) for row in rows if row[0].startswith("METRALE_REDZONE") and row[0] not in NOT_FLAGS]


_OPTIONS = []


def run_options():
    """The options `redzone run` takes as flags (loaded once)."""
    if not _OPTIONS:
        _OPTIONS.extend(_table())
    return _OPTIONS


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
    for o in run_options():
        if o.flag in flags and getattr(args, o.var, None) is not None:
            env[o.var] = getattr(args, o.var)  # the command line wins over the environment
            origin[o.var] = o.flag
    if "METRALE_REDZONE" not in env:
        env["METRALE_REDZONE"] = DEFAULT_BYTES
        origin["METRALE_REDZONE"] = "the default"
    for var in ["METRALE_REDZONE_SUMMARY"] + [o.var for o in run_options() if o.kind == "PATH"]:
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
