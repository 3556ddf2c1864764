"""`redzone run` and `redzone bisect` never give a wrong answer that looks like success (issue 18, items
11-20; issue 21, item 1): culprits confirmed, processes named, signals forwarded and everything cleaned up,
exit codes as documented, the user's files left alone, values checked by the library's own rules. On the
emulated driver, with tests/programs/readpast.c. Paths come from ctest's environment."""
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile

import pytest

REDZONE = os.environ["RZ_REDZONE_CLI"]
READPAST = os.environ["RZ_READPAST"]
EXAMPLES = os.environ["RZ_EXAMPLES"]
BUILD = os.environ.get("RZ_BUILD", "")


def bisect(*args, program=(), env=None, timeout=300):
    cmd = [REDZONE, "bisect", "--emulated-device", *args, "--", *program]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    return p.returncode, p.stdout, p.stderr


def run(*args, program=(), env=None, cwd=None):
    cmd = [REDZONE, "run", "--emulated-device", *args, "--", *program]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def no_traceback(*texts):
    for t in texts:
        assert "Traceback" not in t, t


def _gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie not yet reaped by init is gone for our purpose
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


# ---- 11: every culprit confirmed, drift caught ------------------------------------------------------------

def test_output_that_drifts_between_runs_names_no_allocation(tmp_path):
    """A coarse timestamp that ticks after run 4: every later window differs from the empty one."""
    counter = tmp_path / "count"
    script = (f'n=$(cat {counter} 2>/dev/null || echo 0); echo $((n + 1)) > {counter}; '
              f'{READPAST} 20 --culprit 17; if [ "$n" -ge 4 ]; then echo "time 10:01"; else echo "time 10:00"; fi')
    rc, out, err = bisect(program=["sh", "-c", script])
    no_traceback(out, err)
    assert rc == 3, out + err
    assert "nondeterministic" in out, out
    assert "reads past the end of" not in out


# ---- 12: several processes ----------------------------------------------------------------------------

def test_the_culprit_is_named_in_its_process():
    script = f"{READPAST} 3 --size 200; {READPAST} 10 --culprit 7"
    rc, out, err = bisect(program=["sh", "-c", script])
    assert rc == 0, out + err
    assert "reads past the end of allocation #7" in out
    assert "alloc#7 user_bytes=100 pad=64" in out, out
    assert re.search(r"in process \d+ \(.*readpast\) of the run that named it", out), out


def test_a_culprit_in_a_child_of_a_script_names_the_child():
    rc, out, err = bisect(program=["sh", "-c", f"{READPAST} 10 --culprit 3"])
    assert rc == 0, out + err
    assert re.search(r"in process \d+ \(.*readpast\), started by sh", out), out


def test_an_index_several_processes_made_is_not_pinned_on_one():
    script = f"{READPAST} 20 --size 200; {READPAST} 10 --culprit 7"
    rc, out, err = bisect(program=["sh", "-c", script])
    assert rc == 0, out + err
    assert "2 processes made an allocation #7" in out, out
    assert re.search(r"process \d+ \(.*readpast\): user_bytes=200 pad=64", out), out
    assert re.search(r"process \d+ \(.*readpast\): user_bytes=100 pad=64", out), out
    assert "alloc#7 user_bytes=" not in out, "no single size claimed"


# ---- 13: signals --------------------------------------------------------------------------------------

def start_hanging(cmd, fifo):
    """Starts cmd (a readpast run that forks, writes '<pid> <child>' to fifo, and hangs); returns the
    launcher's Popen and the two pids, read from the fifo (blocks until the program wrote them)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with open(fifo) as f:
        pids = [int(x) for x in f.read().split()]
    return proc, pids


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_run_forwards_signals_and_cleans_up(tmp_path, sig):
    fifo = tmp_path / "pids"
    os.mkfifo(fifo)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = dict(os.environ, TMPDIR=str(tmpdir))
    cmd = [REDZONE, "run", "--emulated-device", "--", READPAST, "3", "--culprit", "1", "--hang", str(fifo)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    with open(fifo) as f:
        pids = [int(x) for x in f.read().split()]
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    no_traceback(out, err)
    assert proc.returncode == 128 + sig, (proc.returncode, err)
    assert [p for p in pids if not _gone(p)] == [], "the program's group got the signal"
    assert os.listdir(tmpdir) == [], "the summary file was removed"


def test_bisect_killed_kills_its_run_and_removes_its_files(tmp_path):
    fifo = tmp_path / "pids"
    os.mkfifo(fifo)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = dict(os.environ, TMPDIR=str(tmpdir))
    cmd = [REDZONE, "bisect", "--emulated-device", "--", READPAST, "10", "--culprit", "4", "--hang", str(fifo),
           "--setsid"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    with open(fifo) as f:
        pids = [int(x) for x in f.read().split()]
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    no_traceback(out, err)
    assert proc.returncode == 128 + signal.SIGTERM, (proc.returncode, err)
    assert "interrupted by SIGTERM" in err
    assert [p for p in pids if not _gone(p)] == [], "the run and its setsid child are gone"
    assert os.listdir(tmpdir) == [], "no /tmp/redzone-bisect-* left"


def test_a_hanging_run_with_a_setsid_child_is_cleaned_up_on_timeout(tmp_path):
    pidfile = tmp_path / "pids"
    rc, out, err = bisect("--timeout", "5", program=[READPAST, "10", "--culprit", "4", "--hang", str(pidfile),
                                                     "--setsid"])
    assert rc == 3, out + err
    pids = [int(x) for x in pidfile.read_text().split()]
    assert [p for p in pids if not _gone(p)] == [], f"left running: {pids}"


# ---- 14: --error-exitcode -----------------------------------------------------------------------------

@pytest.mark.parametrize("code", ["0", "256", "300", "-1", "x"])
def test_error_exitcode_outside_1_to_255_is_a_usage_error(code):
    rc, out, err = run("--error-exitcode", code, program=[f"{EXAMPLES}/copy_overrun"])
    assert rc == 2 and "is not an exit status from 1 to 255" in err, err
    no_traceback(out, err)


def test_error_exitcode_after_underscore_exit_says_it_was_not_applied():
    rc, out, err = run("--error-exitcode", "9", program=[READPAST, "2", "--underscore-exit"])
    assert rc == 0, err
    assert "--error-exitcode not applied: no allocation counted" in err, err
    rc, out, err = run("--error-exitcode", "9", program=[f"{EXAMPLES}/copy_overrun"])
    assert rc == 9 and "not applied" not in err, err


# ---- 15: false negatives, exit 127 --------------------------------------------------------------------

def test_a_program_that_ends_with_underscore_exit_is_still_bisected():
    rc, out, err = bisect(program=[READPAST, "10", "--culprit", "6", "--underscore-exit"])
    assert rc == 0, out + err
    assert "reads past the end of allocation #6" in out
    assert "allocations not all counted" in out


def test_a_program_that_reads_past_then_execs_is_still_bisected():
    rc, out, err = bisect(program=[READPAST, "10", "--culprit", "8", "--exec", READPAST, "2"])
    assert rc == 0, out + err
    assert "reads past the end of allocation #8" in out


def test_every_run_exiting_127_is_said_and_exit_127():
    rc, out, err = bisect(program=["sh", "-c", "/nonexistent/cuda-program"])
    assert rc == 127, out + err
    assert "every run exited with status 127" in err and "/nonexistent/cuda-program" in err, err


# ---- 16: --compare file:PATH --------------------------------------------------------------------------

def test_compare_file_never_deletes_a_file_bisect_did_not_create(tmp_path):
    precious = tmp_path / "result.txt"
    precious.write_text("the user's data\n")
    rc, out, err = bisect("--compare", f"file:{precious}", program=[READPAST, "20", "--culprit", "3", "--out",
                                                                     str(precious)])
    assert rc == 0 and "reads past the end of allocation #3" in out, out + err
    assert precious.read_text() == "the user's data\n", "put back as it was"
    assert sorted(os.listdir(tmp_path)) == ["result.txt"]
    other = tmp_path / "unrelated"
    other.write_text("keep me\n")
    rc, out, err = bisect("--compare", f"file:{other}", program=[READPAST, "5"])
    assert rc == 1 and other.read_text() == "keep me\n", out + err


def test_compare_file_that_is_a_directory_is_a_usage_error(tmp_path):
    rc, out, err = bisect("--compare", f"file:{tmp_path}", program=[READPAST, "5"])
    assert rc == 2 and "is a directory" in err, err
    no_traceback(out, err)


def test_compare_file_that_cannot_be_moved_is_a_usage_error(tmp_path):
    if os.geteuid() == 0:
        path = "/proc/version"  # exists, cannot be renamed even by root
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        (ro / "f").write_text("x")
        ro.chmod(0o555)
        path = str(ro / "f")
    rc, out, err = bisect("--compare", f"file:{path}", program=[READPAST, "5"])
    assert rc == 2 and "cannot be moved aside" in err, err
    no_traceback(out, err)
    assert os.path.exists(path)


# ---- 17: the library's own rules ----------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["--bytes", "67108865"], 'redzone run: --bytes: METRALE_REDZONE="67108865" is larger than 67108864'),
    (["--min-idx", "99999999999999999999"], "--min-idx: METRALE_REDZONE_MIN_IDX=\"99999999999999999999\" is not a creation index"),
    (["--trace-idx", str(1 << 64)], "--trace-idx: METRALE_REDZONE_TRACE_IDX="),
    (["--log", ""], "--log: METRALE_REDZONE_LOG=\"\" is empty; the library would use stderr"),
    (["--scan", "free,bogus"], "--scan: METRALE_REDZONE_SCAN=\"free,bogus\" is not a comma list"),
    (["--fill", "256"], "--fill: METRALE_REDZONE_FILL=\"256\" is not a byte"),
])
def test_run_rejects_what_the_library_rejects(args, message):
    rc, out, err = run(*args, program=[f"{EXAMPLES}/copy_overrun"])
    assert rc == 2 and message in err, err
    assert "copy_overrun" not in out, "the program did not run"


def test_a_bad_value_in_the_environment_is_a_usage_error_too():
    env = dict(os.environ, METRALE_REDZONE_STACKS="99")
    rc, out, err = run(program=[f"{EXAMPLES}/copy_overrun"], env=env)
    assert rc == 2 and "in the environment: METRALE_REDZONE_STACKS=\"99\"" in err, err


def test_scan_none_none_is_what_the_library_takes():
    rc, out, err = run("--scan", "none,none", program=[f"{EXAMPLES}/kernel_overrun"])
    assert rc == 0 and "REDZONE VIOLATION" not in err and "warning" not in err, err


# ---- 18: the reproduce line, precedence -----------------------------------------------------------------

def test_the_reproduce_line_reproduces_in_the_same_environment():
    env = dict(os.environ, METRALE_REDZONE_MIN_IDX="30")
    rc, out, err = bisect("--min-idx", "5", program=[READPAST, "40", "--culprit", "7"], env=env)
    assert rc == 0 and "reads past the end of allocation #7" in out, out + err
    repro = out.strip().splitlines()[-1].strip()
    one = subprocess.run(shlex.split(repro), capture_output=True, text=True, env=env)
    none = subprocess.run(shlex.split(repro.replace("--poison 7:8", "--poison 0:0")), capture_output=True,
                          text=True, env=env)
    assert one.stdout != none.stdout, (repro, one.stdout, none.stdout)


def test_an_option_wins_over_the_environment_in_run_as_in_bisect():
    env = dict(os.environ, METRALE_REDZONE_POISON="0:0")
    rc, out, err = run("--poison", "2:3", program=[READPAST, "5", "--culprit", "2"], env=env)
    assert "readpast: result = 738" in out, out + err


def test_reproduce_line_spells_out_bands_from_the_environment():
    env = dict(os.environ, METRALE_REDZONE="128")
    rc, out, err = bisect(program=[READPAST, "4", "--culprit", "1"], env=env)
    assert rc == 0 and "--bytes 128 --poison 1:2" in out, out + err


# ---- 19: an install prefix with a space ---------------------------------------------------------------

@pytest.mark.skipif(not BUILD, reason="RZ_BUILD not set (ctest sets it)")
def test_an_install_prefix_with_a_space_still_preloads():
    with tempfile.TemporaryDirectory() as scratch:
        prefix = os.path.join(scratch, "my tools")
        subprocess.run(["cmake", "--install", BUILD, "--prefix", prefix], check=True, capture_output=True)
        p = subprocess.run([os.path.join(prefix, "bin", "redzone"), "run", "--emulated-device", "--error-exitcode",
                            "9", "--", f"{EXAMPLES}/kernel_overrun"], capture_output=True, text=True)
        assert p.returncode == 9 and "REDZONE VIOLATION alloc#1" in p.stderr, p.stderr


# ---- 20: small ------------------------------------------------------------------------------------------

def test_version():
    p = subprocess.run([REDZONE, "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and re.fullmatch(r"redzone \d+\.\d+\.\d+\n", p.stdout), p.stdout


def test_a_relative_log_is_where_redzone_was_started(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = f"cd {elsewhere} && exec {EXAMPLES}/kernel_overrun"
    rc, out, err = run("--log", "reports.log", program=["sh", "-c", script], cwd=tmp_path)
    assert rc == 0, err
    assert "REDZONE VIOLATION alloc#1" in (tmp_path / "reports.log").read_text()
    assert not (elsewhere / "reports.log").exists()


def test_run_keeps_the_users_own_summary_file(tmp_path):
    mine = tmp_path / "summary-%p.txt"
    env = dict(os.environ, METRALE_REDZONE_SUMMARY=str(mine))
    rc, out, err = run("--error-exitcode", "7", program=[f"{EXAMPLES}/copy_overrun"], env=env)
    assert rc == 7, err
    files = list(tmp_path.glob("summary-*.txt"))
    assert len(files) == 1 and "violations=1" in files[0].read_text()
    assert files[0].name != "summary-%p.txt", "%p became the pid"


def test_run_creates_the_users_summary_0600(tmp_path):
    mine = tmp_path / "summary.txt"
    old = os.umask(0)  # the mode is the launcher's own, not the umask's
    try:
        rc, out, err = run(program=[f"{EXAMPLES}/copy_overrun"], env=dict(os.environ, METRALE_REDZONE_SUMMARY=str(mine)))
    finally:
        os.umask(old)
    assert rc == 0, err
    assert "violations=1" in mine.read_text()
    assert mine.stat().st_mode & 0o7777 == 0o600


def test_run_does_not_follow_another_users_symlink_for_the_summary(tmp_path):
    """In a sticky world-writable directory (as /tmp), a link another user planted at the summary's name."""
    if os.geteuid() != 0:
        pytest.skip(f"needs root to act as another user (running as uid {os.geteuid()})")
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    victim = tmp_path / "root-owned"
    victim.write_text("root's own file\n")
    link = sticky / "summary.txt"
    link.symlink_to(victim)
    os.lchown(link, 65534, 65534)
    rc, out, err = run(program=[f"{EXAMPLES}/copy_overrun"], env=dict(os.environ, METRALE_REDZONE_SUMMARY=str(link)))
    assert rc == 0, err
    assert victim.read_text() == "root's own file\n"
    assert (f"redzone: cannot append to METRALE_REDZONE_SUMMARY={str(link)!r}: a symlink another user owns in a "
            "sticky world-writable directory, not followed") in err
    no_traceback(out, err)


# ---- issue 21, item 1: no driver ------------------------------------------------------------------------

def test_bisect_without_a_driver_says_so_and_exits_127():
    p = subprocess.run([REDZONE, "bisect", "--", f"{EXAMPLES}/read_overrun"], capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"})
    if "could not load the CUDA driver" not in p.stderr and p.returncode == 0:
        pytest.skip("a CUDA driver is installed here")
    assert p.returncode == 127, p.stdout + p.stderr
    assert "could not load the CUDA driver (libcuda.so.1)" in p.stderr and "--emulated-device" in p.stderr
    assert "made no device allocations" not in p.stdout


# ---- 16: one sentence and a documented exit code, never a traceback -------------------------------------

@pytest.mark.parametrize("argv, code", [
    (["run", "--", "/"], 127),
    (["run", "--", "/nonexistent"], 127),
    (["run", "--bogus", "--", "true"], 2),
    (["run", "--error-exitcode"], 2),
    (["bisect", "--timeout", "abc", "--", "true"], 2),
    (["bisect", "--max-runs", "x", "--", "true"], 2),
    (["bisect", "--compare", "file:", "--", "true"], 2),
    (["bisect", "--", "/"], 127),
    (["bisect", "--emulated-device", "--", "true"], 1),
    (["gdb", "--gdb", "/nonexistent/gdb", "--", "true"], 127),
    (["nosuchcommand"], 2),
    ([], 2),
])
def test_every_error_is_one_line_with_a_documented_status(argv, code):
    p = subprocess.run([REDZONE, *argv], capture_output=True, text=True, timeout=120)
    no_traceback(p.stdout, p.stderr)
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    if code != 1 and argv:
        assert len([x for x in p.stderr.splitlines() if x.startswith("redzone")]) >= 1, p.stderr
