"""`redzone run`'s command line as a CUDA developer expects it (issue 31, items 1, 6, 8, 11): a flag for every
option of the library's one table, listed by --help; a subcommand's bad flag answered with that subcommand's
usage; no prefix abbreviations; --version; --log-file; a hint when no driver loads; --unpool; short true
lines. On the emulated driver; paths come from ctest's environment (tests/CMakeLists.txt, `bisect`)."""
import os
import subprocess

import pytest

REDZONE = os.environ["RZ_REDZONE_CLI"]
EXAMPLES = os.environ["RZ_EXAMPLES"]
READPAST = os.environ["RZ_READPAST"]
BUILD = os.environ["RZ_BUILD"]
RZ_OPTIONS = os.path.join(BUILD, "native", "rz-options")
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def redzone(*argv, env=None, cwd=None):
    p = subprocess.run([REDZONE, *argv], capture_output=True, text=True, timeout=120, env=env, cwd=cwd)
    assert "Traceback" not in p.stderr, p.stderr
    return p.returncode, p.stdout, p.stderr


def table():
    """(variable, type) of every row of the option table, as rz-options lists it."""
    out = subprocess.run([RZ_OPTIONS, "list"], capture_output=True, text=True, check=True).stdout
    return [tuple(line.split("\t")[:2]) for line in out.splitlines()]


def flag_of(var):
    return {"METRALE_REDZONE": "--bytes"}.get(var, "--" + var[len("METRALE_REDZONE_"):].lower().replace("_", "-"))


def program_env(*flags):
    """The environment `redzone run FLAGS` gives a program (/usr/bin/env prints it)."""
    rc, out, err = redzone("run", "--emulated-device", *flags, "--", "env")
    assert rc == 0, err
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line), err


# ---- item 6: flags from the one option table ------------------------------------------------------------

def test_every_option_of_the_table_is_a_flag_listed_by_run_help():
    rows = table()
    assert len(rows) >= 15 and ("METRALE_REDZONE_STACKS", "DEPTH") in rows, rows
    rc, out, err = redzone("run", "--help")
    assert rc == 0, err
    missing = [(var, flag_of(var)) for var, _ in rows if var not in ("METRALE_REDZONE_SUMMARY", "METRALE_REDZONE_HELP")
               and (flag_of(var) + " " not in out or var not in out)]
    assert not missing, f"not in `redzone run --help`: {missing}\n{out}"


def test_stacks_front_and_guard_flags_set_their_variables():
    env, _ = program_env("--stacks", "4", "--front", "256", "--guard", "2", "--check-kernel", "--agent", "0")
    assert env.get("METRALE_REDZONE_STACKS") == "4" and env.get("METRALE_REDZONE_FRONT") == "256", env
    assert env.get("METRALE_REDZONE_GUARD") == "2" and env.get("METRALE_REDZONE_CHECK_KERNEL") == "1", env
    assert env.get("METRALE_REDZONE_AGENT") == "0", env


def test_stacks_flag_keeps_the_allocation_stack_in_the_report():
    rc, out, err = redzone("run", "--emulated-device", "--stacks", "1", "--", f"{EXAMPLES}/copy_overrun")
    assert rc == 0 and "alloc#1 was allocated at:" in err, err
    rc, out, err = redzone("run", "--emulated-device", "--", f"{EXAMPLES}/copy_overrun")
    assert "alloc#1 was allocated at:" not in err, err


def test_a_table_flag_value_is_checked_by_the_librarys_rules():
    rc, out, err = redzone("run", "--emulated-device", "--stacks", "99", "--", "true")
    assert rc == 2 and 'redzone run: --stacks: METRALE_REDZONE_STACKS="99"' in err, err


@pytest.mark.parametrize("command, usage", [
    ("run", "usage: redzone run [options] -- PROGRAM [ARGS...]"),
    ("bisect", "usage: redzone bisect [--compare"),
])
def test_a_subcommands_bad_flag_prints_that_subcommands_usage(command, usage):
    rc, out, err = redzone(command, "--bogus", "--", "true")
    assert rc == 2 and f"redzone {command}: unrecognized arguments: --bogus" in err and usage in err, err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("argv", [["run", "--emul", "--", "true"], ["run", "--error-exit", "3", "--", "true"],
                                  ["bisect", "--emul", "--", "true"]])
def test_no_prefix_abbreviations(argv):
    rc, out, err = redzone(*argv)
    assert rc == 2 and "unrecognized arguments: " + argv[1] in err, (rc, out, err)


@pytest.mark.parametrize("command", ["run", "bisect"])
def test_subcommand_version(command):
    rc, out, err = redzone(command, "--version")
    top = redzone("--version")
    assert rc == 0 and out == top[1] and out.startswith("redzone "), (out, err)


def test_log_file_is_an_alias_of_log(tmp_path):
    log = tmp_path / "rz.log"
    rc, out, err = redzone("run", "--emulated-device", "--log-file", str(log), "--", f"{EXAMPLES}/kernel_overrun")
    assert rc == 0 and "REDZONE VIOLATION" not in err, err
    assert "REDZONE VIOLATION alloc#1 user_bytes=1000 pad=64" in log.read_text()


def test_every_file_name_flag_is_made_absolute_for_the_program(tmp_path):
    # the program may change directory before its first report: --log, --report and --suppressions name files
    # relative to where redzone was started, as the help says
    paths = [o for o in table() if o[1] == "PATH" and o[0] != "METRALE_REDZONE_SUMMARY"]
    assert {"METRALE_REDZONE_LOG", "METRALE_REDZONE_REPORT", "METRALE_REDZONE_SUPPRESSIONS"} <= {o[0] for o in paths}
    (tmp_path / "rules").write_text("")
    args = []
    for var, *_ in paths:
        args += [flag_of(var), "rules" if var == "METRALE_REDZONE_SUPPRESSIONS" else f"{var.lower()}.out"]
    rc, out, err = redzone("run", "--emulated-device", *args, "--", "env", cwd=str(tmp_path))
    assert rc == 0, err
    env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    for var, *_ in paths:
        assert os.path.isabs(env[var]) and env[var].startswith(str(tmp_path)), (var, env[var])


def test_help_points_at_the_docs_that_are_there():
    rc, out, err = redzone("--help")
    assert rc == 0, err
    where = os.path.join(SOURCE, "docs")
    assert f"the docs in {where}/" in out and "running.md" in out, out
    assert os.path.exists(os.path.join(where, "running.md")) and os.path.exists(os.path.join(where, "frameworks.md"))


# ---- item 1: no GPU, a hint ---------------------------------------------------------------------------------

def test_run_without_a_driver_says_add_emulated_device():
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    rc, out, err = redzone("run", "--", f"{EXAMPLES}/kernel_overrun", env=env)
    if rc != 127:
        pytest.skip(f"a CUDA driver loads here (exit {rc}), so there is nothing to hint")
    assert "libcuda.so.1" in err and "on a machine without a GPU, add --emulated-device" in err, err
    # with the emulated driver there is no hint
    rc, out, err = redzone("run", "--emulated-device", "--", "sh", "-c", "exit 127")
    assert rc == 127 and "--emulated-device" not in err, err


# ---- item 8: --unpool ---------------------------------------------------------------------------------------

UNPOOL = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "XLA_PYTHON_CLIENT_ALLOCATOR": "platform",
          "TF_GPU_ALLOCATOR": "cuda_malloc_async"}


def test_unpool_sets_the_framework_variables_and_says_so_in_one_line():
    env, err = program_env("--unpool")
    assert {k: env.get(k) for k in UNPOOL} == UNPOOL, env
    said = [x for x in err.splitlines() if "--unpool" in x]
    assert len(said) == 1 and all(f"{k}={v}" in said[0] for k, v in UNPOOL.items()), err
    clean = {k: v for k, v in os.environ.items() if k not in UNPOOL}
    rc, out, err = redzone("run", "--emulated-device", "--", "env", env=clean)
    assert rc == 0 and not any(k + "=" in out for k in UNPOOL) and "--unpool" not in err, out


def test_unpool_is_documented_with_the_line_it_prints():
    with open(os.path.join(SOURCE, "docs", "frameworks.md")) as f:
        text = f.read()
    for k, v in UNPOOL.items():
        assert f"{k}={v}" in text, k
    _, err = program_env("--unpool")
    said = next(x for x in err.splitlines() if "--unpool" in x)
    assert f"\n    {said}\n" in text, f"docs/frameworks.md does not show the line --unpool prints:\n{said}"
    rc, out, err = redzone("run", "--help")
    assert "--unpool" in out


# ---- item 11: short, true lines -------------------------------------------------------------------------------

def test_error_exitcode_on_a_program_without_cuda_is_one_short_line():
    rc, out, err = redzone("run", "--emulated-device", "--error-exitcode", "9", "--", "true")
    assert rc == 0, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) <= 120, lines
    assert lines[0].startswith("redzone run: --error-exitcode not applied"), lines


def test_bisect_progress_line_for_uncounted_allocations_reads_as_a_sentence():
    rc, out, err = redzone("bisect", "--emulated-device", "--", READPAST, "4", "--culprit", "2", "--underscore-exit")
    assert rc == 0 and "reads past the end of allocation #2" in out, out + err
    assert "allocations no summary counted included" not in err, err
    assert "every index: every band 0xEE, also allocations no summary line counted" in err, err
