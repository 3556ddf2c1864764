"""The plugin's settings (`set/show redzone ...`, gdb.Parameters), and the exec-wrapper that preloads
libredzone.so into the program: composed with the user's own, and checked at `run`."""
import gdb

from . import args, debugger, paths, target
from .args import UsageError
from .ui import write as _write

SETTING_NAMES = "autoscan|method|timeout|bytes|fill|min-idx|trace-idx|scan|stacks|emulated-device"
SETTINGS_USAGE = f"Usage: set redzone {SETTING_NAMES} VALUE"


class Settings:
    autoscan = "off"
    timeout = 2.0
    env = {name: None for name in args.ENV_VARS}
    emulated = False
    method = "auto"
    user_wrapper = ""


SETTINGS = Settings()


class RedzoneSetPrefix(gdb.Command):
    """Settings of the redzone plugin.

Usage: set redzone autoscan|method|timeout|bytes|fill|min-idx|trace-idx|scan|stacks|emulated-device VALUE"""

    def __init__(self):
        super().__init__("set redzone", gdb.COMMAND_DATA, prefix=True)

    def invoke(self, arg, from_tty):
        raise gdb.GdbError(f"set redzone: which setting?\n{SETTINGS_USAGE}\n(show redzone lists them with their values)")


class RedzoneShowPrefix(gdb.Command):
    """Show the redzone plugin's settings.

Usage: show redzone [autoscan|method|timeout|bytes|fill|min-idx|trace-idx|scan|stacks|emulated-device]"""

    def __init__(self):
        super().__init__("show redzone", gdb.COMMAND_DATA, prefix=True)

    def invoke(self, arg, from_tty):
        if arg.strip():
            raise gdb.GdbError(f"show redzone: unknown setting {arg.split()[0]!r}\n{SETTINGS_USAGE}")
        for name in SETTING_NAMES.split("|"):
            _write(gdb.execute(f"show redzone {name}", to_string=True).rstrip("\n"))


class AutoscanParameter(gdb.Parameter):
    """Scan after every stop (on), never (off), or only after the listed breakpoints (2,5).

Usage: set redzone autoscan off|on|BPNUM[,BPNUM...]"""

    set_doc = "Set when redzone scans automatically."
    show_doc = "Show when redzone scans automatically."

    def __init__(self):
        super().__init__("redzone autoscan", gdb.COMMAND_DATA, gdb.PARAM_STRING)
        self.value = "off"

    def get_set_string(self):
        try:
            value = args.parse_autoscan(debugger.param("redzone autoscan"))
            if isinstance(value, frozenset):
                existing = sorted(b.number for b in (gdb.breakpoints() or ()) if b.number > 0)
                missing = sorted(value - set(existing))
                if missing:
                    now = ", ".join(str(n) for n in existing) if existing else "none"
                    raise UsageError(f"breakpoint {', '.join(str(n) for n in missing)} does not exist (breakpoints "
                                     f"now: {now}; `info breakpoints` lists them)")
            SETTINGS.autoscan = value
        except UsageError as e:
            self.value = args.autoscan_text(SETTINGS.autoscan)
            raise gdb.GdbError(f"redzone autoscan: {e}\nUsage: set redzone autoscan off|on|BPNUM[,BPNUM...]")
        return ""

    def get_show_string(self, svalue):
        return f"redzone autoscan is {args.autoscan_text(SETTINGS.autoscan)}."


class TimeoutParameter(gdb.Parameter):
    """Seconds gdb waits for the agent before giving up with an error (default 2; 1.5 is 1.5 s).

Usage: set redzone timeout SECONDS"""

    set_doc = "Set how long redzone waits for its agent."
    show_doc = "Show how long redzone waits for its agent."

    def __init__(self):
        super().__init__("redzone timeout", gdb.COMMAND_DATA, gdb.PARAM_STRING)
        self.value = "2"

    def get_set_string(self):
        try:
            SETTINGS.timeout = args.parse_seconds(debugger.param("redzone timeout"))
        except UsageError as e:
            self.value = f"{SETTINGS.timeout:g}"
            raise gdb.GdbError(f"redzone timeout: {e}\nUsage: set redzone timeout SECONDS")
        return ""

    def get_show_string(self, svalue):
        return f"redzone timeout is {SETTINGS.timeout:g} s."  # not svalue: cuda-gdb passes 0 for it


class EnvParameter(gdb.Parameter):
    """A METRALE_REDZONE* variable given to the program at `run` (unless you set the variable yourself).

Usage: set redzone NAME VALUE   (empty VALUE: the library's default)"""

    set_doc = "Set a redzone option for the next run."
    show_doc = "Show a redzone option for the next run."

    def __init__(self, name):
        self.name = name
        super().__init__(f"redzone {name}", gdb.COMMAND_DATA, gdb.PARAM_STRING)
        self.value = ""

    def get_set_string(self):
        try:
            SETTINGS.env[self.name] = args.check_env_value(self.name, debugger.param(f"redzone {self.name}"),
                                                           _library_check)
        except UsageError as e:
            self.value = SETTINGS.env[self.name] or ""
            raise gdb.GdbError(f"redzone {self.name}: {e}\nUsage: set redzone {self.name} VALUE")
        update_exec_wrapper()
        override = overriding_value(self.name)
        if override is not None and override[0] != SETTINGS.env[self.name]:
            _write(f"redzone: warning: {self._overridden(override)}")
        return ""

    def get_show_string(self, svalue):
        value = SETTINGS.env[self.name]
        shown = value or ("64 (default)" if self.name == "bytes" else "the library's default")
        said = f"redzone {self.name} is {shown} ({args.ENV_VARS[self.name]})"
        override = overriding_value(self.name)
        if override is None or override[0] == value:
            return said + "."
        return f"{said}, but {self._overridden(override)}."

    def _overridden(self, override):
        var, (value, where, undo) = args.ENV_VARS[self.name], override
        mine = SETTINGS.env[self.name] or ("64" if self.name == "bytes" else "the library's default")
        return (f"{where} sets {var}={value}, which the program runs with (the environment wins over `set "
                f"redzone {self.name}`): {undo} for {mine}")


def environment_value(var):
    """VAR in the environment gdb gives the program (`set environment`, or gdb's own), or None."""
    try:
        out = gdb.execute(f"show environment {var}", to_string=True)
    except gdb.error:
        return None
    prefix = f"{var} = "
    return out.rstrip("\n")[len(prefix):] if out.startswith(prefix) else None


def overriding_value(name):
    """(value, where, how to undo) when the program will not run with `set redzone NAME`'s value: the user's
    `env` exec-wrapper or the program's environment sets the variable (rz-exec --default yields to it)."""
    var = args.ENV_VARS[name]
    for word in args.env_assignments(SETTINGS.user_wrapper) or []:
        if word.startswith(var + "="):
            return word[len(var) + 1:], "your exec-wrapper", "`set exec-wrapper` without it"
    value = environment_value(var)
    if value is not None:
        return value, "the program's environment (set environment, or gdb's own)", f"`unset environment {var}`"
    return None


def _library_check(variable, value):
    return args.library_check(paths.RZ_OPTIONS, variable, value)


class EmulatedParameter(gdb.Parameter):
    """Run the program on the emulated CUDA driver (for machines without a GPU).

Usage: set redzone emulated-device on|off"""

    set_doc = "Set whether the program runs on the emulated driver."
    show_doc = "Show whether the program runs on the emulated driver."

    def __init__(self):
        super().__init__("redzone emulated-device", gdb.COMMAND_DATA, gdb.PARAM_BOOLEAN)
        self.value = False

    def get_set_string(self):
        SETTINGS.emulated = bool(debugger.param("redzone emulated-device"))
        update_exec_wrapper()
        return ""

    def get_show_string(self, svalue):
        return f"redzone emulated-device is {'on' if SETTINGS.emulated else 'off'}."


class MethodParameter(gdb.Parameter):
    """How scan, poison and unpoison are served: by the library's agent thread (gdb resumes that thread
alone), or by the debugger itself through memory reads and writes (resumes nothing). auto: the agent where
the debugger can resume one thread alone (gdb), memory elsewhere (cuda-gdb) and on core files.

Usage: set redzone method auto|agent|memory"""

    set_doc = "Set how redzone serves scan and poison."
    show_doc = "Show how redzone serves scan and poison."

    def __init__(self):
        super().__init__("redzone method", gdb.COMMAND_DATA, gdb.PARAM_ENUM, list(target.METHODS))
        self.value = "auto"

    def get_set_string(self):
        SETTINGS.method = debugger.param("redzone method")
        return ""

    def get_show_string(self, svalue):
        return f"redzone method is {SETTINGS.method}."


def update_exec_wrapper():
    """redzone's exec-wrapper, composed with the user's own (kept: it runs after redzone's, as it would have)."""
    current = debugger.param("exec-wrapper") or ""
    SETTINGS.user_wrapper = args.users_part(current, paths.EXEC_WRAPPER)
    if args.env_assignments(SETTINGS.user_wrapper) is None:
        # gdb runs one wrapper exec only: another program cannot follow redzone's. The user's stays.
        _write(f"redzone: warning: your exec-wrapper {SETTINGS.user_wrapper!r} is kept, so libredzone.so is not "
               "preloaded (gdb runs one wrapper; only an `env NAME=VALUE...` wrapper can be combined with "
               "redzone's): `set exec-wrapper` to empty, then any `set redzone ...`, to check this program")
        return
    wrapper = args.wrapper_command(paths.EXEC_WRAPPER, paths.LIBREDZONE,
                                   paths.EMU_DIR if SETTINGS.emulated else None, SETTINGS.env,
                                   SETTINGS.user_wrapper)
    gdb.execute(f"set exec-wrapper {wrapper}", to_string=True)


WARNED_UNLOADED = set()


def _on_new_objfile(event):
    """At the program's start: when the CUDA driver loads and libredzone.so is not in the program, say so
    once (the program would run unchecked): exec-wrapper replaced after the plugin loaded, or
    startup-with-shell off. No gdb.execute here (see debugger.py)."""
    name = (getattr(event.new_objfile, "filename", None) or "").rsplit("/", 1)[-1]
    if not name.startswith("libcuda.so"):
        return
    inf = gdb.selected_inferior()
    if inf.pid in WARNED_UNLOADED:
        return
    if any("libredzone" in (o.filename or "").rsplit("/", 1)[-1] for o in gdb.objfiles()):
        return
    WARNED_UNLOADED.add(inf.pid)
    why = []
    if not debugger.param("startup-with-shell"):
        why.append("`set startup-with-shell off` makes gdb skip exec-wrapper: set it on again")
    wrapper = debugger.param("exec-wrapper") or ""
    if not wrapper.startswith(args.shell_quote(paths.EXEC_WRAPPER)):
        why.append(f"exec-wrapper is {wrapper!r}, not redzone's: any `set redzone ...` puts redzone's back, "
                   "around yours")
    elif not why:
        why.append(_preload_cause())
    because = ("; " + "; ".join(why)) if why else ""
    _write("redzone: warning: libredzone.so is not loaded in this program, which runs without red zones "
           f"(no report will come){because}; then run it again")


def _preload_cause():
    """Why redzone's own wrapper did not bring the library in, as far as can be told from here."""
    import os  # noqa: PLC0415
    lib = paths.LIBREDZONE
    if not os.path.exists(lib):
        return f"{lib} is missing (is redzone installed?)"
    if ":" in lib:
        return f"{lib} contains ':', which LD_PRELOAD cannot hold: install redzone under a path without it"
    if any(c in lib for c in " \t\n"):
        return (f"{lib} has a space in its path, which this wrapper (an older rz-exec?) put into LD_PRELOAD as "
                "it is: ld.so's own line above says what it refused")
    return "ld.so refused the LD_PRELOAD entry redzone's exec-wrapper made (its own line above says why)"


def register():
    RedzoneSetPrefix()
    RedzoneShowPrefix()
    AutoscanParameter()
    TimeoutParameter()
    for name in args.ENV_VARS:
        EnvParameter(name)
    EmulatedParameter()
    MethodParameter()
    gdb.events.new_objfile.connect(_on_new_objfile)
    update_exec_wrapper()
