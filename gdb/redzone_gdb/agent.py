"""The agent method: the library's "redzone-agent" thread serves scan, poison and unpoison, resumed alone by
gdb (scheduler-locking). Used where the debugger cannot reach the bands itself (plain gdb on a GPU) and can
resume one thread alone (not cuda-gdb). See docs/gdb.md.

What a request guarantees, and how:
- Request numbers never repeat: a new request is numbered after the last one posted, not after the last one
  answered, and a request still in flight (one the user gave up on) is served first, its report going to
  the program's log, so nothing is dropped and nothing is answered twice.
- The agent's way through user breakpoints, catchpoints and watchpoints is transparent: a stop of the agent
  thread that is not the request's end is stepped over (continued), up to the timeout; the error names the
  stop when the request still cannot finish.
- The interruption at the timeout is a SIGINT to the agent thread alone (tgkill); gdb's handling of SIGINT is
  set to stop-nopass for the request and restored exactly afterwards, whatever the user set.
- The user's hooks (hook-stop, hook-continue, hookpost-continue) do not run for the agent's stops: each is
  defined empty for the request and restored line for line (python blocks keep their indentation).
"""
import ctypes
import platform
import threading
import time

import gdb

from . import debugger, view
from .errors import TargetError

HOOKS = ("hook-stop", "hook-continue", "hookpost-continue")


class Agent:
    """One request at a time to the library's agent thread."""

    busy = False  # a request is in flight: stop events and violation breakpoints are ours

    def __init__(self, timeout, read, symbol_address):
        self.timeout = timeout
        self.read = read
        self.symbol_address = symbol_address

    def request(self, op, arg0=0, arg1=0):
        inf = gdb.selected_inferior()
        if inf.pid == 0:
            raise TargetError("no process: start the program (run) first")
        if gdb.parameter("non-stop"):
            raise TargetError("non-stop mode is not supported by the agent method, which needs all-stop mode "
                              "(`set redzone method memory` works in non-stop mode once every thread is stopped)")
        addr = self.symbol_address("__redzone_agent")
        head = self.read(addr, view.size("agent.header"))
        if view.check_agent(head) != 0:
            raise TargetError("the agent block is not one this plugin understands (version mismatch?)")
        if not view.u32(head, view.offset("agent.alive")):
            raise TargetError("the agent thread is not running yet (it starts at the program's first device "
                              "allocation) or was disabled with METRALE_REDZONE_AGENT=0")
        tid = view.u64(head, view.offset("agent.tid"))
        agent_thread = next((t for t in inf.threads() if t.ptid[1] == tid), None)
        if debugger.is_none(agent_thread):
            raise TargetError(f"the agent thread (LWP {tid}) is not among the program's threads")
        if _inside_fork():
            raise TargetError("the program is stopped inside fork (catch fork): the forking thread holds locks "
                              "the agent needs (malloc's, the zone registry's), so the agent method cannot run "
                              "here; continue past the fork, or `set redzone method memory`")
        posted = view.u32(head, view.offset("agent.request"))
        answered = view.u32(head, view.offset("agent.answered"))

        session = _Session(inf, agent_thread, tid, self.timeout)
        Agent.busy = True
        try:
            session.begin()
            if posted and posted != answered:
                # A request the user gave up on is still in flight: it completes first (its report goes to
                # the program's log, as the user was told), so ours is neither dropped nor answered by it.
                # If it cannot complete now, ours is not sent at all (and says so).
                try:
                    session.wait(addr, posted, "an earlier request")
                except _Abandon as e:
                    raise _NotSent(str(e)) from None
            req = (max(posted, answered) + 1) & 0xFFFFFFFF or 1
            inf.write_memory(addr + view.offset("agent.op"), op.to_bytes(4, "little"))
            inf.write_memory(addr + view.offset("agent.arg0"), arg0.to_bytes(8, "little"))
            inf.write_memory(addr + view.offset("agent.arg1"), arg1.to_bytes(8, "little"))
            inf.write_memory(addr + view.offset("agent.request"), req.to_bytes(4, "little"))
            session.wait(addr, req, "the request")
        except _NotSent as e:
            session.end()
            Agent.busy = False
            raise TargetError(f"{e}; that earlier request completes when the program runs, and this one was not "
                              "sent: try again after the program has run") from None
        except _Abandon as e:
            session.end()
            Agent.busy = False
            if inf.pid == 0:
                raise TargetError("the program exited while the agent was serving the request") from None
            try:  # whenever the agent gets there, it writes its answer to the program's log instead
                inf.write_memory(addr + view.offset("agent.abandoned"), e.req.to_bytes(4, "little"))
            except gdb.MemoryError:
                pass
            raise TargetError(f"{e}; your thread and frame are restored, and the request completes when the "
                              "program runs, its report going to the program's log") from None
        finally:
            if Agent.busy:
                session.end()
                Agent.busy = False
        if inf.pid == 0:
            raise TargetError("the program exited while the agent was serving the request")
        head = self.read(addr, view.size("agent.header"))
        n = view.u32(head, view.offset("agent.out_len"))
        out = self.read(addr + view.offset("agent.out"), n).decode(errors="replace") if n else ""
        if view.u32(head, view.offset("agent.out_truncated")):
            out += "redzone: (output truncated: more lines than the agent's buffer holds)\n"
        return view.i64(head, view.offset("agent.result")), out


FORK_FUNCTIONS = ("arch_fork", "_Fork", "__libc_fork", "fork", "vfork", "__vfork", "__libc_vfork")


def _inside_fork():
    """Whether the selected thread stopped inside fork (a `catch fork` stop): resuming any thread there
    makes the debugger finish the fork first, and the forking thread holds the locks the agent needs."""
    try:
        frame = gdb.newest_frame()
        for _ in range(3):
            if debugger.is_none(frame):
                return False
            if frame.name() in FORK_FUNCTIONS:
                return True
            frame = frame.older()
    except gdb.error:
        return False
    return False


class _NotSent(Exception):
    pass


class _Abandon(Exception):
    def __init__(self, message, req):
        super().__init__(message)
        self.req = req


class _Session:
    """What one request changes in the debugger, and its exact restoration."""

    def __init__(self, inf, agent_thread, tid, timeout):
        self.inf, self.agent_thread, self.tid, self.timeout = inf, agent_thread, tid, timeout
        self.deadline = time.monotonic() + timeout
        self.stops = []  # what stopped the agent on its way, other than its own end
        self.fired = threading.Event()
        self.user_interrupt = False

    def begin(self):
        self.user_thread = gdb.selected_thread()
        try:
            self.frame_level = debugger.frame_level(gdb.selected_frame())
        except gdb.error:
            self.frame_level = None
        self.locking = gdb.parameter("scheduler-locking")
        self.sigint = _signal_handling("SIGINT")
        self.hooks = {h: _suspend_hook(h) for h in HOOKS}
        # The timeout's interruption must stop the agent and never reach the program, whatever the user set
        # (a SIGINT that stops is also printed: gdb has no stop-without-print).
        gdb.execute("handle SIGINT stop nopass", to_string=True)
        self.bp = gdb.Breakpoint("__redzone_agent_done", internal=True)
        self.bp.silent = True
        debugger.set_breakpoint_thread(self.bp, self.agent_thread)
        gdb.events.stop.connect(self._on_stop)
        gdb.execute("set scheduler-locking on", to_string=True)
        self.agent_thread.switch()  # the Python API switches without printing

    def _on_stop(self, event):
        if not Agent.busy:
            return
        bps = getattr(event, "breakpoints", None) or []
        mine = [b for b in bps if b.number == self.bp.number]
        if mine:
            return
        if bps:
            self.stops.append(f"your breakpoint {bps[0].number} ({bps[0].location or bps[0].expression})")
        elif isinstance(event, gdb.SignalEvent):
            if event.stop_signal == "SIGINT":
                if not self.fired.is_set():
                    self.user_interrupt = True  # Ctrl-C: the user wants the debugger back
            else:
                self.stops.append(f"signal {event.stop_signal}")
        else:
            self.stops.append("a stop")

    def wait(self, addr, req, what):
        """Resume the agent alone until `answered` equals req. Stops on the way that are not the request's
        end (user breakpoints, catchpoints, watchpoints on the agent's path) are continued over."""
        while True:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise _Abandon(self._late(what), req)
            timer = threading.Timer(remaining, self._interrupt)
            timer.start()
            try:
                gdb.execute("continue", to_string=True)
                if self.inf.pid == 0:
                    raise _Abandon("the program exited", req)
                answered = int.from_bytes(bytes(self.inf.read_memory(addr + view.offset("agent.answered"), 4)),
                                          "little")
            except (gdb.error, gdb.MemoryError) as e:
                raise _Abandon(f"the agent could not run at this stop ({e}); a stop inside a fork (catch fork) "
                               "holds locks it needs: continue past the fork, or `set redzone method memory`",
                               req) from None
            finally:
                timer.cancel()
            if answered == req:
                return
            if self.fired.is_set():
                raise _Abandon(self._late(what), req)
            if self.user_interrupt:
                raise _Abandon(f"interrupted (Ctrl-C) before the agent finished {what}", req)

    def _late(self, what):
        if self.stops:
            why = f"it was stopped on its way by {', '.join(sorted(set(self.stops)))}"
        else:
            inside = _threads_in_driver(self.inf, self.tid)
            if inside:
                names = ", ".join(str(n) for n in inside)
                why = (f"thread{'s' if len(inside) > 1 else ''} {names} stopped inside the CUDA driver "
                       f"(libcuda) may hold a lock the agent needs there: continue, then scan again, or "
                       "`set redzone method memory`")
            else:
                why = "a stopped thread may hold a lock it needs: inside the driver, or in malloc during a fork"
        return f"the agent did not answer within {self.timeout:g} s ({why}; it was serving {what})"

    def _interrupt(self):
        """SIGINT to the agent thread only (tgkill): gdb stops it and, for the request, does not pass it on."""
        self.fired.set()
        libc = ctypes.CDLL(None, use_errno=True)
        nr = {"x86_64": 234, "aarch64": 131}.get(platform.machine(), 234)  # tgkill
        libc.syscall(nr, self.inf.pid, self.tid, 2)

    def end(self):
        gdb.events.stop.disconnect(self._on_stop)
        if (self.fired.is_set() or self.user_interrupt) and self.inf.pid != 0 and self.agent_thread.is_valid():
            # The SIGINT that stopped the agent stays the thread's stop signal: discard it, or the program
            # would get it at the next resume under the user's own handling (pass, by a user's choice).
            self.agent_thread.switch()
            gdb.execute("queue-signal 0", to_string=True)
        try:
            self.bp.delete()
        except RuntimeError:
            pass
        gdb.execute(f"handle SIGINT {self.sigint}", to_string=True)
        for hook, body in self.hooks.items():
            _restore_hook(hook, body)
        if self.inf.pid != 0 and not debugger.is_none(self.user_thread) and self.user_thread.is_valid():
            self.user_thread.switch()
            if self.frame_level is not None:
                debugger.select_frame_level(self.frame_level)
        gdb.execute(f"set scheduler-locking {self.locking}", to_string=True)


def _threads_in_driver(inf, agent_tid):
    """The numbers of the program's threads (not the agent) with a frame in the CUDA driver (libcuda), where
    a thread stopped with a driver lock held makes the agent's own driver calls wait. Switches threads: the
    session's end restores the user's selection."""
    found = []
    for t in sorted(inf.threads(), key=lambda t: t.num):
        if not t.is_valid() or t.ptid[1] == agent_tid:
            continue
        try:
            t.switch()
            frame = gdb.newest_frame()
            while not debugger.is_none(frame):
                so = gdb.solib_name(frame.pc())
                if not debugger.is_none(so) and so.rsplit("/", 1)[-1].startswith("libcuda"):
                    found.append(t.num)
                    break
                frame = frame.older()
        except gdb.error:
            continue
    return found


def _signal_handling(name):
    """The `handle` words that restore the signal's current handling exactly. Order matters: "noprint"
    implies "nostop" and "stop" implies "print", so print comes first, then stop, then pass."""
    text = gdb.execute(f"info signals {name}", to_string=True)
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == name and len(f) >= 4:
            return " ".join(("print" if f[2] == "Yes" else "noprint", "stop" if f[1] == "Yes" else "nostop",
                             "pass" if f[3] == "Yes" else "nopass"))
    return "print stop nopass"


def hook_body(text):
    """The body of a user-defined command from `show user NAME` (None when not defined), line for line: the
    CLI lines lose the 2-space indentation `show user` adds; python blocks' lines are kept as they are."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("User command"):
        return None
    body, raw = [], False
    for line in lines[1:]:
        if raw:
            if line == "  end":
                raw = False
                body.append("end")
            else:
                body.append(line)
            continue
        stripped = line[2:] if line.startswith("  ") else line
        if not stripped.strip():
            continue
        body.append(stripped)
        if stripped.strip() in ("python", "python-interactive", "pi", "py"):
            raw = True
    return body


def _suspend_hook(name):
    """Define a user hook empty for the duration of a request; return its body (None when undefined)."""
    try:
        body = hook_body(gdb.execute(f"show user {name}", to_string=True))
    except gdb.error:
        return None
    if body is not None:
        gdb.execute(f"define {name}\nend", from_tty=False, to_string=True)
    return body


def _restore_hook(name, body):
    if body is not None:
        gdb.execute(f"define {name}\n" + "\n".join(body) + "\nend", from_tty=False, to_string=True)
