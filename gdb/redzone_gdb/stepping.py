"""Stepping stays in the program: gdb's `skip` for redzone's own source files (the library, the interposer,
the emulated driver), so `step` over a driver call steps over it as over a real libcuda without line
information; and at a `redzone break on` stop, `next`, `step` and `finish` first return from the library's
frames to the program's call (gdb steps the innermost frame, which is the library's report call), through
hook-next, hook-step and hook-finish. See docs/gdb.md ("Stepping at a stop")."""
import os
import sys

import gdb

from . import debugger, stops

HOOK_SYMBOLS = tuple(h.symbol for h in stops.HOOKS)
STEPPING = {"out": False}  # the hook's own `finish` runs: the stop handler stays quiet for it
_SKIPPED = set()           # source roots whose files are skipped already


def frames_of():
    """The selected thread's frames, innermost first, as (frame, shared object or None, name)."""
    out = []
    frame = gdb.newest_frame()
    while not debugger.is_none(frame):
        so = gdb.solib_name(frame.pc())
        out.append((frame, None if debugger.is_none(so) else so, frame.name()))
        frame = frame.older()
    return out


def program_frame(frames):
    """(level, frame) of the first frame of the program (stops.is_program_frame), or None."""
    for level, (frame, so, name) in enumerate(frames):
        if stops.is_program_frame(so, name):
            return level, frame
    return None


def source_names(frames):
    """[(file base name or None, function name)] of frames, for stops.check_of."""
    out = []
    for frame, _so, name in frames:
        sal = frame.find_sal()
        path = sal.symtab.filename if not debugger.is_none(sal.symtab) else None
        out.append((os.path.basename(path) if path else None, name))
    return out


def at_hook():
    """Whether the selected thread is stopped in one of the library's hooks (a `redzone break on` stop)."""
    try:
        thread = gdb.selected_thread()
        if debugger.is_none(thread) or thread.is_running():
            return False
        return gdb.newest_frame().name() in HOOK_SYMBOLS
    except gdb.error:
        return False


def stop_check():
    """The check (stops.check_of) the selected thread is stopped in at a hook stop; None elsewhere."""
    if not at_hook():
        return None
    try:
        return stops.check_of(source_names(frames_of()))
    except gdb.error:
        return None


class _Return(gdb.Breakpoint):
    """Where the library's call returns into the program, for the thread that made it."""

    def __init__(self, pc, thread):
        super().__init__(f"*{pc:#x}", internal=True, temporary=True)
        self.silent = True
        self.for_thread = thread

    def stop(self):
        return gdb.selected_thread().global_num == self.for_thread


def before(command):
    """hook-next, hook-step, hook-finish: at a hook stop, return to the program's call first. `finish`: the
    library's outermost frame is selected, so gdb's own finish ends where the program called the library;
    `next` and `step`: that frame is finished here, then gdb's command steps on in the program."""
    if STEPPING["out"] or not at_hook():
        return
    frames = frames_of()
    found = program_frame(frames)
    if found is None or found[0] == 0:
        return
    level, _frame = found
    selected = debugger.frame_level(gdb.selected_frame())
    if command == "finish":
        if selected <= level:
            frames[level - 1][0].select()
        return
    # Run to where the library's call returns into the program: a silent breakpoint there for this thread
    # (a `finish` would print its frame and record its value), then gdb's own command goes on from it.
    bp = _Return(frames[level][0].pc(), gdb.selected_thread().global_num)
    STEPPING["out"] = True
    try:
        said = gdb.execute("continue", to_string=True)
    finally:
        STEPPING["out"] = False
        if bp.is_valid():
            bp.delete()
    if at_hook():
        # Another report of the library's stopped it first (a zone with both bands written, an exit scan):
        # that stop is the user's now, said as any (its lines were captured with the `continue`).
        gdb.write("".join(line for line in said.splitlines(True) if not line.startswith("Continuing.")))
        raise gdb.GdbError(f"redzone: `{command}` stopped at another of the library's reports (above) before its "
                           f"call returned to the program; `{command}` again goes on from there")


RETURN_COMMAND = "_redzone_return_to_program"  # not under `redzone`: completing `redzone` stays as it was


class ReturnCommand(gdb.Command):
    """What hook-next, hook-step and hook-finish run (the plugin defines them): at a `redzone break on` stop,
return from the library's frames to the program's call before the command.

Usage: _redzone_return_to_program next|step|finish"""

    def __init__(self):
        super().__init__(RETURN_COMMAND, gdb.COMMAND_NONE)

    def invoke(self, arg, from_tty):
        try:
            before(arg.strip())  # its gdb.GdbError fails the hook, so gdb's own command does not run
        except gdb.error:
            pass  # nothing to return from that can be told: gdb's command runs as without redzone


def install_hooks():
    """Define hook-next, hook-step and hook-finish (prepended to the user's own, which keep running)."""
    from . import agent
    for command in ("next", "step", "finish"):
        name = f"hook-{command}"
        try:
            body = agent.hook_body(gdb.execute(f"show user {name}", to_string=True))
        except gdb.error:
            body = None
        ours = f"{RETURN_COMMAND} {command}"
        lines = [ours] + [line for line in (body or []) if line.strip() != ours]
        gdb.execute(f"define {name}\n" + "\n".join(lines) + "\nend", from_tty=False, to_string=True)


def skip_patterns(fullname):
    """The `skip -gfile` globs for the source tree a redzone source file (its full name) lies in: the
    library's layers, its public header, the emulated driver; None when the file is not under native/src."""
    marker = "/native/src/"
    if marker not in fullname:
        return None
    root = fullname.rsplit(marker, 1)[0]
    return [f"{root}/native/src/*/*.c", f"{root}/native/src/*/*.h", f"{root}/native/include/*.h",
            f"{root}/native/emu/*.c", f"{root}/native/emu/*.h"]


def _on_new_objfile(event):
    objfile = getattr(event, "new_objfile", None)
    name = getattr(objfile, "filename", "") or ""
    if os.path.basename(name).startswith("libredzone.so"):
        add_skips()


def add_skips():
    """`skip -gfile` for redzone's source tree, once libredzone's symbols are known."""
    try:
        sym = gdb.lookup_global_symbol("__redzone_violation")
        if debugger.is_none(sym):
            return
        sal = gdb.find_pc_line(int(sym.value().address))
        if debugger.is_none(sal.symtab):
            return  # no line information: nothing to step into anyway
        patterns = skip_patterns(sal.symtab.fullname())
    except (gdb.error, RuntimeError, ValueError):
        return
    if not patterns or patterns[0] in _SKIPPED:
        return
    _SKIPPED.add(patterns[0])
    for pattern in patterns:
        try:
            gdb.execute(f"skip -gfile {pattern}", to_string=True)
        except gdb.error as e:
            sys.stderr.write(f"redzone: could not skip {pattern} when stepping: {e}\n")


def _at_first_prompt():
    gdb.events.before_prompt.disconnect(_at_first_prompt)
    install_hooks()
    add_skips()


def register():
    """The command the hooks run; the hooks and skips now, before any program runs, or, loaded while one
    starts (auto-loaded with libredzone, inside gdb's handling of that load), at the next prompt: no command
    runs in the middle of it."""
    ReturnCommand()
    gdb.events.new_objfile.connect(_on_new_objfile)
    if gdb.selected_inferior().pid == 0:
        install_hooks()
        return
    gdb.events.before_prompt.connect(_at_first_prompt)
