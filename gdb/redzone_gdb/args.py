"""Argument parsing and validation for the redzone gdb commands. Pure Python: no gdb import, so it is
tested with plain pytest. Errors raise UsageError with a message; the gdb glue adds the usage line."""


class UsageError(Exception):
    """Bad arguments for a command."""


USAGE = {
    "list": "Usage: redzone list [--violated] [--from N] [--to N] [--limit N] [--json]",
    "scan": "Usage: redzone scan [--json]",
    "poison": "Usage: redzone poison LO HI",
    "unpoison": "Usage: redzone unpoison",
    "stats": "Usage: redzone stats [--json]",
    "status": "Usage: redzone status",
    "break": "Usage: redzone break on|off",
}


def parse_count(text, what):
    """A non-negative decimal integer (for --from/--to/--limit)."""
    text = text.strip()
    if not (text.isascii() and text.isdigit()):  # str.isdigit() also takes '²', which int() refuses
        raise UsageError(f"{what} must be a non-negative integer, not {text!r}")
    return int(text)


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
    if len(argv) != 2:
        raise UsageError("poison needs exactly two arguments, LO and HI")
    return argv[0], argv[1]


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


def check_env_value(name, value):
    """Values of set redzone bytes|fill|min-idx|trace-idx|scan|stacks, checked before they reach the program."""
    if value is None or value == "":
        return None
    if name == "stacks":
        v = parse_count(value, name)
        if v > 32:
            raise UsageError(f"stacks must be a frame count, 0-32 (not {v})")
        return str(v)
    if name in ("bytes", "min-idx", "trace-idx"):
        return str(parse_count(value, name))
    if name == "fill":
        v = parse_count(value, name)
        if v > 255:
            raise UsageError(f"fill must be a byte, 0-255 (not {v})")
        return str(v)
    if name == "scan":
        parts = value.split(",")
        if not all(p in ("free", "sync", "exit", "fatal", "none") for p in parts) or ("none" in parts and len(parts) > 1):
            raise UsageError(f"scan must be a comma list of free, sync, exit, fatal, or none (not {value!r})")
        return value
    raise UsageError(f"unknown setting {name!r}")


ENV_VARS = {
    "bytes": "METRALE_REDZONE",
    "fill": "METRALE_REDZONE_FILL",
    "min-idx": "METRALE_REDZONE_MIN_IDX",
    "trace-idx": "METRALE_REDZONE_TRACE_IDX",
    "scan": "METRALE_REDZONE_SCAN",
    "stacks": "METRALE_REDZONE_STACKS",
}


def wrapper_command(exec_wrapper, preload, emu_dir, settings):
    """The exec-wrapper that starts the program with the library preloaded: rz-exec applies each setting
    only when the program's environment lacks that variable (the user's own wins), then execs the program."""
    words = [exec_wrapper, "--preload", preload]
    values = dict(settings)
    if values.get("bytes") is None:
        values["bytes"] = "64"
    for name, var in ENV_VARS.items():
        if values.get(name) is not None:
            words += ["--default", f"{var}={values[name]}"]
    if emu_dir:
        words += ["--path-prefix", emu_dir]
    words.append("--")
    return " ".join(shell_quote(w) for w in words)


def shell_quote(word):
    safe = all(c.isalnum() or c in "@%+=:,./-_" for c in word)
    return word if safe and word else "'" + word.replace("'", "'\\''") + "'"
