"""`redzone bisect` end to end on the emulated driver: tests/programs/readpast.c (reads one byte past the end of
chosen allocations) and examples/read_overrun. Paths come from ctest's environment (tests/CMakeLists.txt)."""
import os
import re
import shlex
import subprocess
import time

import pytest

REDZONE = os.environ["RZ_REDZONE_CLI"]
READPAST = os.environ["RZ_READPAST"]
EXAMPLES = os.environ["RZ_EXAMPLES"]


def bisect(*args, program=None, timeout=300):
    cmd = [REDZONE, "bisect", "--emulated-device", *args, "--", *(program or [])]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def readpast(n, *culprits, extra=()):
    argv = [READPAST, str(n)]
    for c in culprits:
        argv += ["--culprit", str(c)]
    return argv + list(extra)


def runs_used(out):
    m = re.search(r"found in (\d+) runs", out)
    assert m, out
    return int(m.group(1))


def bound(n):
    return 5 + (n - 1).bit_length()  # ceil(log2 n) + 5


def test_the_example_read_overrun_names_its_buffer_and_the_command_reproduces_it():
    rc, out, err = bisect(program=[f"{EXAMPLES}/read_overrun"])
    assert rc == 0, out + err
    assert "read_overrun reads past the end of allocation #0 (found in 6 runs, 2 allocations)" in out
    assert "  alloc#0 user_bytes=1000 pad=64\n" in out
    assert re.search(r"#0 0x[0-9a-f]+ in main\+0x[0-9a-f]+ \(.*read_overrun\)", out), out
    assert ("stdout line 1 with its band 0x00: 'read_overrun: sum = 1000'; "
            "with its band 0xEE: 'read_overrun: sum = 1238'") in out
    for k, line in enumerate(["run 1: window [0, 0): empty window", "run 2: window [0, 0): empty window again",
                              "run 3 of <= 6: window [0, 2): full window", "run 4 of <= 6: window [0, 1)",
                              "run 5 of <= 6: window [0, 1): confirm #0", "run 6 of <= 6: window [0, 0): empty window once"]):
        assert line in err.splitlines()[k], err
    repro = out.strip().splitlines()[-1].strip()
    assert repro.endswith("run --emulated-device --poison 0:1 -- " + shlex.quote(f"{EXAMPLES}/read_overrun")), out
    one = subprocess.run(shlex.split(repro), capture_output=True, text=True)
    none = subprocess.run(shlex.split(repro.replace("--poison 0:1", "--poison 0:0")), capture_output=True, text=True)
    assert "read_overrun: sum = 1238" in one.stdout and "read_overrun: sum = 1000" in none.stdout


@pytest.mark.parametrize("n, culprit", [(1, 0), (2, 0), (2, 1), (1000, 0), (1000, 500), (1000, 999), (1000, 1)])
def test_one_culprit_first_last_middle(n, culprit):
    rc, out, err = bisect(program=readpast(n, culprit))
    assert rc == 0, out + err
    assert f"readpast reads past the end of allocation #{culprit} (found in" in out
    assert f"alloc#{culprit} user_bytes=100 pad=64" in out
    assert runs_used(out) <= bound(n), out
    assert len(re.findall(r"^redzone bisect: run \d+", err, re.M)) == runs_used(out)
    assert f"--poison {culprit}:{culprit + 1} -- " in out


def test_two_culprits_are_found_one_after_the_other():
    rc, out, err = bisect(program=readpast(1000, 700, 3))
    assert rc == 0, out + err
    assert "reads past the end of 2 allocations: #3, #700" in out
    assert "alloc#3 user_bytes=100 pad=64" in out and "alloc#700 user_bytes=100 pad=64" in out
    assert "--poison 3:4 --" in out and "--poison 700:701 --" in out
    assert runs_used(out) <= 3 + 2 * 11 + 1


def test_nondeterministic_output_is_detected_not_bisected(tmp_path):
    counter = tmp_path / "counter"
    rc, out, err = bisect(program=readpast(10, 4, extra=["--noise", str(counter)]))
    assert rc == 3, out + err
    assert "differs between two runs with the same (empty) window" in out
    assert "stdout line 1: 'token=1' in run 1, 'token=2' in run 2" in out
    assert "--filter" in out and "run 3" not in err
    rc, out, err = bisect("--filter", r"token=\d+", program=readpast(10, 4, extra=["--noise", str(counter)]))
    assert rc == 0, out + err
    assert "reads past the end of allocation #4" in out


def test_output_independent_of_bands():
    rc, out, err = bisect(program=readpast(10))
    assert rc == 1, out + err
    assert "no read past the end is visible through the stdout" in out
    assert "run 4 of" not in err and "run 4: window [0, every index)" in err and "run 5" not in err


def test_unstable_creation_indices_are_reported(tmp_path):
    rc, out, err = bisect(program=readpast(10, 4, extra=["--unstable", str(tmp_path / "k")]))
    assert rc == 3, out + err
    assert "creation indices are not stable across runs: run 1 made 11 allocations and run 2" in out
    assert "--min-idx" in out and "single-threaded" in out


def test_a_run_that_crashes_is_a_clear_error():
    rc, out, err = bisect(program=readpast(10, 4, extra=["--crash"]))
    assert rc == 3, out + err
    assert "run 3 (window [0, 10)) was killed by SIGABRT; bisect needs every run to finish" in err
    assert out == ""


def _gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_run_that_hangs_is_killed_with_everything_it_started(tmp_path):
    pidfile = tmp_path / "pids"
    started = time.monotonic()
    rc, out, err = bisect("--timeout", "5", program=readpast(10, 4, extra=["--hang", str(pidfile)]))
    assert rc == 3, out + err
    assert "run 3 (window [0, 10)) did not finish within 5 s; it was killed with its process group" in err
    assert time.monotonic() - started < 60
    pids = [int(x) for x in pidfile.read_text().split()]
    assert len(pids) == 2 and pids[0] != pids[1]
    # bisect killed the group and reaped both (the child as its subreaper) before returning.
    assert [p for p in pids if not _gone(p)] == [], f"left running: {pids}"


def test_compare_exit_status():
    rc, out, err = bisect("--compare", "exit", program=readpast(100, 42, extra=["--exit"]))
    assert rc == 0, out + err
    assert "reads past the end of allocation #42" in out
    # 100 * 100 ones = 10000 = 16 mod 256; plus 0xEE = 254 mod 256
    assert "exit status with its band 0x00: 16; with its band 0xEE: 254" in out


def test_compare_a_file(tmp_path):
    path = tmp_path / "result.txt"
    rc, out, err = bisect("--compare", f"file:{path}", program=readpast(100, 17, extra=["--out", str(path)]))
    assert rc == 0, out + err
    assert "reads past the end of allocation #17" in out
    assert f"{path} line 1 with its band 0x00: 'readpast: result = 10000'" in out


def test_compare_stderr_and_a_missing_file(tmp_path):
    rc, out, err = bisect("--compare", "stderr", program=readpast(20, 19, extra=["--stderr"]))
    assert rc == 0 and "reads past the end of allocation #19" in out, out + err
    rc, out, err = bisect("--compare", f"file:{tmp_path}/never-written", program=readpast(20, 19))
    assert rc == 1 and "no read past the end is visible" in out, out + err


def test_max_runs_and_min_idx():
    rc, out, err = bisect("--max-runs", "5", program=readpast(1000, 600))
    assert rc == 3, out + err
    assert re.search(r"gave up after 5 runs \(--max-runs\); the next one is among allocations #(\d+)\.\.#(\d+)", out)
    lo, hi = map(int, re.search(r"allocations #(\d+)\.\.#(\d+)", out).groups())
    assert lo <= 600 <= hi
    rc, out, err = bisect("--min-idx", "5", program=readpast(10, 7))
    assert rc == 0 and "reads past the end of allocation #7" in out, out + err
    assert "window [5, 10): full window" in err
    assert "run --emulated-device --min-idx 5 --poison 7:8 --" in out


@pytest.mark.parametrize("args, message", [
    (["--compare", "stdin", "--", READPAST, "1"], "use stdout, stderr, exit or file:PATH"),
    (["--filter", "(", "--", READPAST, "1"], "bad regular expression"),
    (["--compare", "exit", "--filter", "x", "--", READPAST, "1"], "does not apply"),
    (["--timeout", "0", "--", READPAST, "1"], "positive"),
    (["--max-runs", "0", "--", READPAST, "1"], "at least 1"),
    (["--bytes", "0", "--", READPAST, "1"], "leaves the bands off"),
    (["--bytes", "x", "--", READPAST, "1"], 'redzone bisect: --bytes: METRALE_REDZONE="x" is not a number of bytes'),
    (["--bytes", "67108865", "--", READPAST, "1"], "is larger than 67108864"),
    (["--min-idx", "99999999999999999999", "--", READPAST, "1"], "is not a creation index"),
    ([], "no PROGRAM"),
])
def test_usage_errors(args, message):
    p = subprocess.run([REDZONE, "bisect", *args], capture_output=True, text=True)
    assert p.returncode == 2 and message in p.stderr, p.stderr


def test_a_program_that_cannot_start():
    rc, out, err = bisect(program=["/nonexistent/program"])
    assert rc == 127 and "cannot run /nonexistent/program" in err


def test_run_poison_option():
    base = [REDZONE, "run", "--emulated-device"]
    one = subprocess.run(base + ["--poison", "2:3", "--", *readpast(5, 2)], capture_output=True, text=True)
    other = subprocess.run(base + ["--poison", "3:5", "--", *readpast(5, 2)], capture_output=True, text=True)
    assert "readpast: result = 738" in one.stdout and "readpast: result = 500" in other.stdout
    bad = subprocess.run(base + ["--poison", "5:2", "--", READPAST, "1"], capture_output=True, text=True)
    assert bad.returncode == 2 and 'redzone run: --poison: METRALE_REDZONE_POISON="5:2" is not a window' in bad.stderr
