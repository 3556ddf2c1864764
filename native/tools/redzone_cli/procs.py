"""Starting, signalling and ending programs. `redzone run` forwards the signals it gets to the program and
exits as the program did; `redzone bisect` runs each program in its own session, as the subreaper of
everything it starts, and on any end (finished, timed out, interrupted) kills and reaps all of it."""
import os
import signal
import subprocess

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
SI_KERNEL = 0x80  # si_code of a signal the terminal sent (Ctrl-C): it reached the program's group already


def signal_name(num):
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def exit_status(returncode):
    """A Popen return code as a shell shows it: 128+N for death by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def run_forwarding(program, env):
    """Runs program to its end, forwarding SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to the launcher (kill,
    timeout(1), a batch system). At a terminal (stdin, stdout or stderr), the program stays in the launcher's process
    group so the terminal's own signals reach it directly and are not sent twice, and signals are forwarded
    to the program; otherwise it gets its own process group and signals go to the whole group.
    Returns (exit status as a shell shows it, the signal forwarded or None). Raises OSError when the program
    cannot be started."""
    own_group = not any(os.isatty(fd) for fd in (0, 1, 2))
    waited = set(FORWARDED) | {signal.SIGCHLD}
    old_chld = signal.signal(signal.SIGCHLD, lambda *_: None)  # SIG_DFL would discard it
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    forwarded = None
    try:
        def in_child():
            if own_group:
                os.setpgid(0, 0)
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        proc = subprocess.Popen(program, env=env, preexec_fn=in_child)
        while proc.poll() is None:
            info = signal.sigwaitinfo(waited)
            if info.si_signo == signal.SIGCHLD:
                continue
            if info.si_code == SI_KERNEL and not own_group:
                forwarded = info.si_signo  # the terminal sent it to the whole group, the program included
                continue
            forwarded = info.si_signo
            try:
                if own_group:
                    os.killpg(proc.pid, info.si_signo)
                else:
                    os.kill(proc.pid, info.si_signo)
            except ProcessLookupError:
                pass
        return exit_status(proc.returncode), forwarded
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        signal.signal(signal.SIGCHLD, old_chld)


class Interrupted(Exception):
    """bisect got SIGINT, SIGTERM or SIGHUP: stop, clean up, exit 128+N."""

    def __init__(self, signum):
        super().__init__(signal_name(signum))
        self.signum = signum


def raise_on_signals():
    """The first SIGINT, SIGTERM or SIGHUP raises Interrupted; later ones are ignored, so the cleanup it
    starts (killing the run, removing files) is not cut short."""
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def handler(signum, _frame):
        for s in sigs:
            signal.signal(s, signal.SIG_IGN)
        raise Interrupted(signum)
    for s in sigs:
        signal.signal(s, handler)


class Blocked:
    """Signals held back while a program is being started, so an interruption never leaves one running
    that nobody knows about; the program itself starts with the launcher's usual mask."""

    SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}

    def __enter__(self):
        self.old = signal.pthread_sigmask(signal.SIG_BLOCK, self.SIGNALS)
        return self

    def restore_in_child(self):
        signal.pthread_sigmask(signal.SIG_SETMASK, self.old)

    def __exit__(self, *exc):
        signal.pthread_sigmask(signal.SIG_SETMASK, self.old)
        return False


def become_subreaper():
    """Orphans of a run (processes the program started, whose parent died, setsid or not) are reparented
    to us instead of init, so end_run can find, kill and reap them: when bisect returns, nothing of a run is
    left."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def children():
    """Our child processes (the run's program, and as subreaper the orphans of its descendants)."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        pass
    kids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    stat = f.read()
                if int(stat.rsplit(")", 1)[1].split()[1]) == me:
                    kids.append(int(name))
            except (OSError, ValueError, IndexError):
                pass
    return kids


def end_run(pgid):
    """SIGKILL the run's process group, then every child of ours, until none is left: the program, what
    it left in its group, and (reparented to us) what it started in other sessions."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    while True:
        for pid in children():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue
