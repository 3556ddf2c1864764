"""Running a step's commands: each in its own session, within the step's time limit, killed with everything
it started when its time is up; the step's record (commands, checks, notes)."""
import os
import re
import shlex
import signal
import subprocess
import time

def kill_session(proc):
    """SIGKILL the command's process group, then any process left in its session (a debugger's inferior
    runs in a group of its own), each by its pid."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[3]) == proc.pid:  # field 6, the session id
                os.kill(int(pid), signal.SIGKILL)
        except (OSError, IndexError, ValueError):
            pass


class Cmd:
    """One command's record: what ran, how long, its exit status and its output (stdout and stderr
    interleaved, as a person would see them)."""

    def __init__(self, argv, env_extra, stdin_text):
        self.argv, self.env_extra, self.stdin_text = argv, env_extra, stdin_text
        self.rc, self.seconds, self.out, self.timed_out = None, 0.0, "", False

    def shell_text(self):
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env_extra.items())
        text = " ".join(shlex.quote(a) for a in self.argv)
        if self.stdin_text is not None:
            text += " <<'EOF'\n" + self.stdin_text.rstrip("\n") + "\nEOF"
        return (env + " " + text).strip()


class StepFailed(Exception):
    pass


class Step:
    """What a step function sees: run commands (within the step's time limit), check their output, record
    results and notes."""

    def __init__(self, run, name, limit):
        self.run, self.name, self.limit = run, name, limit
        self.deadline = time.monotonic() + limit
        self.cmds, self.checks, self.notes, self.failures = [], [], [], []
        self.method = None  # the debugger steps: which scan method was used

    def sh(self, argv, env=None, stdin=None, timeout=None):
        left = self.deadline - time.monotonic()
        if left <= 1:
            raise StepFailed(f"out of time ({self.limit} s) before: {' '.join(argv)}")
        timeout = min(timeout * self.run.time_scale if timeout else left, left)
        env_extra = dict(env or {})
        c = Cmd([str(a) for a in argv], env_extra, stdin)
        self.cmds.append(c)
        full_env = dict(os.environ, **env_extra)
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(c.argv, env=full_env, cwd=self.run.out, stdin=subprocess.PIPE if stdin is not None
                                    else subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        except OSError as e:
            c.rc, c.out = 127, f"cannot start: {e}\n"
            return c
        try:
            out, _ = proc.communicate(stdin.encode() if stdin is not None else None, timeout=timeout)
            c.rc = proc.returncode
        except subprocess.TimeoutExpired:
            kill_session(proc)
            out, _ = proc.communicate()
            c.rc, c.timed_out = 124, True
            out = (out or b"") + f"\n[gpu run: killed after {timeout:.0f} s]\n".encode()
        kill_session(proc)  # whatever the command left behind
        c.seconds = time.monotonic() - t0
        c.out = out.decode("utf-8", "replace")
        return c

    def check(self, ok, what, detail=""):
        self.checks.append((bool(ok), what))
        if not ok:
            self.failures.append(what + (f" ({detail})" if detail else ""))
        return bool(ok)

    def expect(self, cmd, pattern, what=None, literal=False):
        pat = re.escape(pattern) if literal else pattern
        return self.check(re.search(pat, cmd.out, re.M), what or f"output has: {pattern}")

    def expect_rc(self, cmd, rc):
        return self.check(cmd.rc == rc, f"exit status {rc}", f"got {cmd.rc}")

    def no_python_errors(self, cmd):
        bad = [l for l in cmd.out.splitlines() if "Python Exception" in l or "Error occurred in Python" in l]
        return self.check(not bad, "no Python errors in the debugger", "; ".join(bad[:3]))

    def note(self, text):
        self.notes.append(text)

    def timed_out(self):
        """The first command of this step that was killed at its time limit, or None."""
        return next((c for c in self.cmds if c.timed_out), None)

