"""Argument parsing and validation for the redzone gdb commands. Pure Python: no gdb import, so it is
tested with plain pytest. Errors raise UsageError with a message; the gdb glue adds the usage line."""


import os
import re
import shlex
import subprocess


class UsageError(Exception):
    """Bad arguments for a command."""


USAGE = {
    "list": "Usage: redzone list [--violated] [--from N] [--to N] [--limit N] [--stacks] [--json]",
    "violations": "Usage: redzone violations [--json]",
    "scan": "Usage: redzone scan [--json]",
    "poison": "Usage: redzone poison LO HI",
    "unpoison": "Usage: redzone unpoison",
    "stats": "Usage: redzone stats [--json]",
    "status": "Usage: redzone status",
    "break": "Usage: redzone break on|off",
}


def parse_count(text, what):
    """A non-negative decimal integer below 2^64 (for --from/--to/--limit)."""
    text = text.strip()
    if not (text.isascii() and text.isdigit()):  # str.isdigit() also takes '²', which int() refuses
        raise UsageError(f"{what} must be a non-negative integer, not {text!r}")
    value = int(text)
    if value >= 1 << 64:
        raise UsageError(f"{what} {text} is too large (at most {(1 << 64) - 1})")
    return value


def parse_flags(argv, command, flags=(), valued=()):
    """argv -> dict. flags: switches without a value; valued: options taking a count."""
    out = {f: False for f in flags}
    out.update({v: None for v in valued})
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in flags:
            out[a] = True
        elif a in valued:
            if i + 1 >= len(argv):
                raise UsageError(f"{a} needs a value")
            out[a] = parse_count(argv[i + 1], a)
            i += 1
        elif a.startswith("-"):
            raise UsageError(f"unknown option {a!r}")
        else:
            raise UsageError(f"unexpected argument {a!r}")
        i += 1
    return out


def parse_list(argv):
    opts = parse_flags(argv, "list", flags=("--violated", "--json", "--stacks"), valued=("--from", "--to", "--limit"))
    if opts["--from"] is not None and opts["--to"] is not None and opts["--from"] > opts["--to"]:
        raise UsageError(f"--from {opts['--from']} is after --to {opts['--to']}")
    return opts


def parse_json_only(argv, command):
    return parse_flags(argv, command, flags=("--json",))["--json"]


def parse_none(argv, command):
    if argv:
        raise UsageError(f"{command} takes no arguments")


def parse_poison(argv):
    """Two expressions, evaluated by the caller (they may be gdb expressions such as $lo)."""
    if len(argv) > 2:
        raise UsageError(f"poison needs exactly two arguments, LO and HI, and got {len(argv)}: an expression with "
                         f"spaces is one argument when quoted (redzone poison \"$lo + 1\" \"$hi * 2\")")
    if len(argv) != 2:
        raise UsageError("poison needs exactly two arguments, LO and HI")
    return argv[0], argv[1]


# An integer literal in a gdb expression: decimal or 0x hex with C suffixes, not part of a name ($1, a12),
# a float (1.5, 1e3) or a longer number.
_LITERAL = re.compile(r"(?<![\w$.])(0[xX][0-9a-fA-F]+|[0-9]+)[uUlL]*(?![\w.])")


def check_literals(text, what):
    """Refuse an expression holding an integer literal of 2^64 or more, before a debugger reads it: GDB 10
    (cuda-gdb 11.8) wraps such a literal to a small number and gdb 13 refuses it, so the same input would get
    different answers."""
    for m in _LITERAL.finditer(text or ""):
        digits = m.group(1)
        value = int(digits, 16) if digits[:2] in ("0x", "0X") else int(digits)
        if value >= 1 << 64:
            raise UsageError(f"{what} {text!r}: the number {digits} is out of range (integers here are below "
                             f"2^64, at most {(1 << 64) - 1})")
    return text


def check_window(lo, hi):
    if lo < 0 or hi < 0:
        raise UsageError(f"LO and HI must not be negative (got {lo}, {hi})")
    if lo > hi:
        raise UsageError(f"LO {lo} is greater than HI {hi}")
    if hi >= 1 << 64:
        raise UsageError(f"HI {hi} is too large")
    return lo, hi


def parse_on_off(argv, command):
    if len(argv) != 1 or argv[0] not in ("on", "off"):
        raise UsageError(f"{command} takes on or off")
    return argv[0] == "on"


def parse_autoscan(value):
    """'off' | 'on' | 'N[,N...]' (breakpoint numbers) -> 'off', 'on' or a frozenset of ints."""
    value = (value or "").strip()
    if value in ("off", "on"):
        return value
    parts = [p.strip() for p in value.split(",")]
    if not value or not all(p.isascii() and p.isdigit() and int(p) > 0 for p in parts):
        raise UsageError(f"autoscan takes off, on, or breakpoint numbers like 2,5 (not {value!r})")
    return frozenset(int(p) for p in parts)


def autoscan_text(setting):
    if isinstance(setting, frozenset):
        return ",".join(str(n) for n in sorted(setting))
    return setting


def check_env_value(name, value, library_check):
    """Values of set redzone bytes|fill|min-idx|trace-idx|scan|stacks, checked before they reach the program,
    by the library's own option parser: library_check(VARIABLE, value) returns the library's warning about
    the value (it would replace it with its default) or None. Empty: the library's default (None)."""
    if name not in ENV_VARS:
        raise UsageError(f"unknown setting {name!r}")
    if value is None or value == "":
        return None
    if any(c in value for c in "\0\n"):
        raise UsageError(f"{name} must be one line")
    warning = library_check(ENV_VARS[name], value)
    if warning:
        # The library's own words, less what it would fall back to (here the value is refused instead).
        text = warning.strip().splitlines()[0]
        prefix = "redzone: warning: "
        text = (text[len(prefix):] if text.startswith(prefix) else text).split("; using ")[0]  # Python 3.8
        raise UsageError(f"{text} (the library would not take it)")
    return value


def library_check(rz_options, variable, value):
    """The library's own option parser on one value (rz-options check, built from the option table): its
    warning line, or None when it takes the value as given."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), variable: value}
    try:
        p = subprocess.run([rz_options, "check"], env=env, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"cannot check the value with {rz_options}: {e}"
    if p.returncode == 0:
        return None
    return p.stderr.strip() or f"{rz_options} refused the value (status {p.returncode})"


def parse_seconds(text):
    """set redzone timeout: seconds, a decimal number greater than 0 and at most 3600 (1.5 is 1.5 s)."""
    text = (text or "").strip()
    try:
        value = float(text) if text.isascii() else None
    except ValueError:
        value = None
    if value is None or not (0 < value <= 3600) or value != value:
        raise UsageError(f"the timeout must be a number of seconds above 0 and at most 3600 (not {text!r})")
    return value


ENV_VARS = {
    "bytes": "METRALE_REDZONE",
    "fill": "METRALE_REDZONE_FILL",
    "min-idx": "METRALE_REDZONE_MIN_IDX",
    "trace-idx": "METRALE_REDZONE_TRACE_IDX",
    "scan": "METRALE_REDZONE_SCAN",
    "stacks": "METRALE_REDZONE_STACKS",
}


def wrapper_command(exec_wrapper, preload, emu_dir, settings, user_wrapper=""):
    """The exec-wrapper that starts the program with the library preloaded: rz-exec applies each setting
    only when the program's environment lacks that variable (the user's own wins), then execs the rest:
    the user's own exec-wrapper, if any (as gdb would have run it), then the program. The library is also
    the program's NVTX injection library (--nvtx: pool regions, as `redzone run` sets it), unless the
    program's environment names one (rz-exec keeps it and says so)."""
    words = [exec_wrapper, "--preload", preload, "--nvtx", preload]
    values = dict(settings)
    if values.get("bytes") is None:
        values["bytes"] = "64"
    for name, var in ENV_VARS.items():
        if values.get(name) is not None:
            words += ["--default", f"{var}={values[name]}"]
    if emu_dir:
        words += ["--path-prefix", emu_dir]
    for assignment in env_assignments(user_wrapper) or []:
        words += ["--set", assignment]
    words.append("--")
    return " ".join(shell_quote(w) for w in words)


def env_assignments(wrapper):
    """The NAME=VALUE words of an exec-wrapper of the form `env NAME=VALUE...` ([] for none or an empty
    wrapper), or None for any other wrapper: gdb runs exactly one wrapper exec, so only an env-style wrapper
    can be folded into redzone's (rz-exec --set)."""
    words = shlex.split(wrapper or "")
    if not words:
        return []
    if words[0].rsplit("/", 1)[-1] != "env":
        return None
    out = []
    for w in words[1:]:
        name, eq, _ = w.partition("=")
        if not eq or not name or not (name[0].isalpha() or name[0] == "_") or not name.replace("_", "").isalnum():
            return None
        out.append(w)
    return out


def users_part(current, exec_wrapper):
    """What the user contributed to the exec-wrapper `current`: all of it when it is not redzone's, the part
    after redzone's `--` when it is one redzone composed (so composing twice never nests)."""
    current = (current or "").strip()
    if not current:
        return ""
    if not current.startswith(shell_quote(exec_wrapper)):
        return current
    words = shlex.split(current)
    sets = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--set"]
    return ("env " + " ".join(shell_quote(w) for w in sets)) if sets else ""


def shell_quote(word):
    safe = all(c.isalnum() or c in "@%+=:,./-_" for c in word)
    return word if safe and word else "'" + word.replace("'", "'\\''") + "'"
