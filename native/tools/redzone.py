#!/usr/bin/env python3
"""redzone: run CUDA programs with red zones (guard bands after every device allocation).

Usage:
  redzone run [options] -- PROGRAM [ARGS...]
  redzone --help | redzone run --help

This file is configured by CMake into bin/redzone; LIBREDZONE and EMU_DIR below are filled in then.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
LIBREDZONE = os.path.normpath(os.path.join(HERE, "@RZ_LIBREDZONE@"))
EMU_DIR = os.path.normpath(os.path.join(HERE, "@RZ_EMU_DIR@"))
GDB_PLUGIN = os.path.normpath(os.path.join(HERE, "@RZ_GDB_PLUGIN@"))

# option -> (environment variable, help)
RUN_OPTIONS = [
    ("--bytes", "METRALE_REDZONE", "N", "band size in bytes after every allocation (default 64; 0 = off)"),
    ("--fill", "METRALE_REDZONE_FILL", "B", "band byte, decimal 0-255 (default 238 = 0xEE)"),
    ("--min-idx", "METRALE_REDZONE_MIN_IDX", "N", "pad only allocations with creation index >= N"),
    ("--trace-idx", "METRALE_REDZONE_TRACE_IDX", "N", "log a host backtrace when allocation #N is made"),
    ("--scan", "METRALE_REDZONE_SCAN", "LIST", "when to scan: comma list of free,sync,exit,none (default free,exit)"),
    ("--log", "METRALE_REDZONE_LOG", "PATH", "write reports to PATH instead of stderr (%%p = pid)"),
]

DESCRIPTION = """\
Runs PROGRAM with libredzone.so preloaded (into PROGRAM itself, not a shell). Every device allocation
the program makes (driver API, or cudaMalloc through the runtime) gets a trailing guard band; bands are
checked when a buffer is freed and at exit (see --scan), and every write past the end is reported:

  REDZONE VIOLATION alloc#<idx> user_bytes=<n> pad=<p> : bytes [<first>..=<last>] past the end were
  written (<changed> of <p> pad bytes changed), first bad value 0x<hh>

Options map to METRALE_REDZONE* environment variables; a variable already set in the environment wins
over the option. Red zones are on at 64 bytes unless told otherwise.

Exit status: the program's (128+N if it died of signal N), or the --error-exitcode value when violations
were found. 127: PROGRAM could not be started."""


def build_parser():
    top = argparse.ArgumentParser(
        prog="redzone",
        description="Catch CUDA device-memory overruns with guard bands (red zones).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="commands:\n  run   run a program with red zones (redzone run --help)\n"
        "  gdb   debug a program with red zones in cuda-gdb or gdb (redzone gdb --help)\n\n"
        "Reference: docs/options.md, docs/report-format.md, docs/scan-policies.md",
    )
    sub = top.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser(
        "run",
        help="run a program with red zones",
        usage="redzone run [options] -- PROGRAM [ARGS...]",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for flag, var, metavar, text in RUN_OPTIONS:
        run.add_argument(flag, metavar=metavar, dest=var, help=f"{text} [{var}]")
    run.add_argument("--error-exitcode", metavar="N", type=int,
                     help="exit with N when any violation was found (as compute-sanitizer does)")
    run.add_argument("--emulated-device", action="store_true",
                     help="use the emulated CUDA driver (host memory; for machines without a GPU)")
    run.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS...]")
    dbg = sub.add_parser(
        "gdb",
        help="debug a program with red zones in cuda-gdb or gdb",
        usage="redzone gdb [--emulated-device] [--gdb PATH] -- PROGRAM [ARGS...]",
        description="Starts cuda-gdb when it is found (else gdb) with the redzone plugin loaded; `run` then "
        "starts PROGRAM with libredzone.so preloaded. Commands: redzone list|scan|poison|stats|status|break "
        "(see `help redzone` and docs/gdb.md).",
    )
    dbg.add_argument("--emulated-device", action="store_true", help="run the program on the emulated driver")
    dbg.add_argument("--gdb", metavar="PATH", help="the debugger to start (default: cuda-gdb, else gdb)")
    dbg.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS...]")
    return top, run, dbg


def cmd_gdb(args, parser):
    import shutil
    program = args.program[1:] if args.program and args.program[0] == "--" else args.program
    if not program:
        parser.error("no PROGRAM given (usage: redzone gdb [--emulated-device] [--gdb PATH] -- PROGRAM [ARGS...])")
    debugger = args.gdb or shutil.which("cuda-gdb") or shutil.which("gdb")
    if not debugger:
        print("redzone: neither cuda-gdb nor gdb was found (apt-get install gdb)", file=sys.stderr)
        return 127
    cmd = [debugger, "-q", "-ex", f"source {GDB_PLUGIN}"]
    if args.emulated_device:
        cmd += ["-ex", "set redzone emulated-device on"]
    cmd += ["--args"] + program
    os.execvp(cmd[0], cmd)


def check_value(run_parser, var, value):
    """The library warns and falls back on bad values; the launcher refuses them outright."""
    if var in ("METRALE_REDZONE", "METRALE_REDZONE_MIN_IDX", "METRALE_REDZONE_TRACE_IDX"):
        if not re.fullmatch(r"\+?[0-9]+", value):
            run_parser.error(f"{var} value {value!r} is not a non-negative decimal number")
    elif var == "METRALE_REDZONE_FILL":
        if not re.fullmatch(r"\+?[0-9]+", value) or int(value) > 255:
            run_parser.error(f"--fill {value!r} is not a byte (decimal 0-255)")
    elif var == "METRALE_REDZONE_SCAN":
        parts = value.split(",")
        if not all(p in ("free", "sync", "exit", "none") for p in parts) or ("none" in parts and len(parts) > 1):
            run_parser.error(f"--scan {value!r} is not a comma list of free, sync, exit (or none)")


def child_env(args, run_parser, summary_path):
    env = dict(os.environ)
    for _flag, var, _metavar, _text in RUN_OPTIONS:
        value = getattr(args, var)
        if value is not None:
            check_value(run_parser, var, value)
            env.setdefault(var, value)  # an explicitly set variable wins
    env.setdefault("METRALE_REDZONE", "64")
    env["METRALE_REDZONE_SUMMARY"] = summary_path
    preload = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = LIBREDZONE + (":" + preload if preload else "")
    if args.emulated_device:
        path = env.get("LD_LIBRARY_PATH", "")
        env["LD_LIBRARY_PATH"] = EMU_DIR + (":" + path if path else "")
    return env


def violations_in(summary_path):
    total = 0
    try:
        with open(summary_path) as f:
            for line in f:
                m = re.search(r"violations=(\d+)", line)
                if m:
                    total += int(m.group(1))
    except FileNotFoundError:
        pass
    return total


def cmd_run(args, run_parser):
    program = args.program
    if program and program[0] == "--":
        program = program[1:]
    if not program:
        run_parser.error("no PROGRAM given (usage: redzone run [options] -- PROGRAM [ARGS...])")
    if not os.path.exists(LIBREDZONE):
        print(f"redzone: {LIBREDZONE} is missing (is redzone installed?)", file=sys.stderr)
        return 127
    if args.emulated_device and not os.path.isdir(EMU_DIR):
        print(f"redzone: the emulated driver folder {EMU_DIR} is missing", file=sys.stderr)
        return 127
    fd, summary_path = tempfile.mkstemp(prefix="redzone-summary-")
    os.close(fd)
    try:
        env = child_env(args, run_parser, summary_path)
        try:
            proc = subprocess.Popen(program, env=env)
        except OSError as e:
            print(f"redzone: cannot run {program[0]}: {e.strerror}", file=sys.stderr)
            return 127
        while True:
            try:
                code = proc.wait()
                break
            except KeyboardInterrupt:
                continue  # the program got the SIGINT too; its exit decides
        if code < 0:
            code = 128 - code
        if args.error_exitcode is not None and violations_in(summary_path) > 0:
            return args.error_exitcode
        return code
    finally:
        os.unlink(summary_path)


def main(argv=None):
    top, run, dbg = build_parser()
    args = top.parse_args(argv)
    if args.command == "run":
        return cmd_run(args, run)
    if args.command == "gdb":
        return cmd_gdb(args, dbg)
    top.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
