"""bin/redzone's command line: the argument parsers, dispatch, and the one place errors become a single
line and an exit status (2 usage, 127 cannot start, 128+N interrupted; never a Python traceback)."""
import argparse
import sys

from . import options, paths, procs
from .bisect import BISECT_DESCRIPTION, cmd_bisect
from .gdb_launcher import cmd_gdb
from .options import Failure, UsageError
from .run import DESCRIPTION, cmd_run


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{self.prog}: {message} (usage: {self.format_usage().strip().replace('usage: ', '')})")


def build_parser():
    top = Parser(
        prog="redzone",
        description="Catch CUDA device-memory overruns with guard bands (red zones).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="commands:\n  run     run a program with red zones (redzone run --help)\n"
        "  bisect  find the allocation a program reads past the end of (redzone bisect --help)\n"
        "  gdb     debug a program with red zones in cuda-gdb or gdb (redzone gdb --help)\n\n"
        "Reference: docs/running.md, docs/bisect.md, docs/gdb.md, docs/options.md, docs/report-format.md",
    )
    top.add_argument("--version", action="version", version=f"redzone {paths.VERSION}")
    sub = top.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    run = sub.add_parser("run", help="run a program with red zones",
                         usage="redzone run [options] -- PROGRAM [ARGS...]", description=DESCRIPTION,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag, var, metavar, text in options.RUN_OPTIONS:
        run.add_argument(flag, metavar=metavar, dest=var, help=f"{text} [{var}]")
    run.add_argument("--error-exitcode", metavar="N", type=options.error_exitcode,
                     help="exit with N (1-255) when any violation was found (as compute-sanitizer does)")
    run.add_argument("--emulated-device", action="store_true",
                     help="use the emulated CUDA driver (host memory; for machines without a GPU)")
    run.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS...]")
    dbg = sub.add_parser(
        "gdb", help="debug a program with red zones in cuda-gdb or gdb",
        usage="redzone gdb [--emulated-device] [--gdb PATH] -- PROGRAM [ARGS...]",
        description="Starts cuda-gdb when it is found (else gdb) with the redzone plugin loaded; `run` then "
        "starts PROGRAM with libredzone.so preloaded. Commands: redzone list|scan|poison|stats|status|break "
        "(see `help redzone` and docs/gdb.md).")
    dbg.add_argument("--emulated-device", action="store_true", help="run the program on the emulated driver")
    dbg.add_argument("--gdb", metavar="PATH", help="the debugger to start (default: cuda-gdb, else gdb)")
    dbg.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS...]")
    bis = sub.add_parser(
        "bisect", help="find the allocation a program reads past the end of",
        usage="redzone bisect [--compare stdout|stderr|exit|file:PATH] [--filter REGEX] [--timeout S] "
        "[--max-runs N] [--bytes N] [--min-idx N] [--emulated-device] -- PROGRAM [ARGS...]",
        description=BISECT_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    bis.add_argument("--compare", metavar="WHAT", default="stdout",
                     help="the output to compare between runs: stdout (default), stderr, exit (the exit status) "
                     "or file:PATH (a file the program writes; a file already there is moved aside for the "
                     "bisect and put back at the end)")
    bis.add_argument("--filter", metavar="REGEX", action="append", default=[],
                     help="remove every match of REGEX from each line before comparing (timestamps, pids, ...); "
                     "a line left empty is dropped. Repeatable")
    bis.add_argument("--timeout", metavar="S", type=float,
                     help="seconds one run may take; a run past it is killed with everything it started "
                     "(default: no limit)")
    bis.add_argument("--max-runs", metavar="N", type=int, help="give up after N runs (default: no limit)")
    bis.add_argument("--bytes", metavar="N", dest="METRALE_REDZONE",
                     help="band size in bytes (default 64; a read further past the end than this is not seen)")
    bis.add_argument("--min-idx", metavar="N", dest="METRALE_REDZONE_MIN_IDX",
                     help="bands for allocations #N and later only (skip allocations whose order is not stable)")
    bis.add_argument("--emulated-device", action="store_true",
                     help="use the emulated CUDA driver (host memory; for machines without a GPU)")
    bis.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS...]")
    return top, {"run": run, "gdb": dbg, "bisect": bis}


COMMANDS = {"run": cmd_run, "bisect": cmd_bisect, "gdb": cmd_gdb}


def dispatch(argv):
    top, subs = build_parser()
    args = top.parse_args(argv)
    if args.command is None:
        top.print_help(sys.stderr)
        return 2
    program = args.program[1:] if args.program and args.program[0] == "--" else args.program
    if not program:
        subs[args.command].error("no PROGRAM given")
    return COMMANDS[args.command](args, program)


def main(argv=None):
    try:
        return dispatch(argv)
    except UsageError as e:
        print(e, file=sys.stderr)
        return 2
    except Failure as e:
        print(e, file=sys.stderr)
        return e.code
    except procs.Interrupted as e:
        print(f"redzone: interrupted by {e}; its runs were stopped and its files removed", file=sys.stderr)
        return 128 + e.signum
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 141
    except Exception as e:  # noqa: BLE001 -- the promise: one line, never a traceback
        print(f"redzone: internal error ({type(e).__name__}: {e}); please report it", file=sys.stderr)
        return 4
