"""bin/redzone's command line: the argument parsers, dispatch, and the one place errors become a single
line and an exit status (2 usage, 127 cannot start, 128+N interrupted; never a Python traceback)."""
import argparse
import os
import sys

from . import options, paths, procs
from .bisect import BISECT_DESCRIPTION, cmd_bisect
from .gdb_launcher import cmd_gdb
from .options import Failure, UsageError
from .run import DESCRIPTION, UNPOOL_ENV, cmd_run


class Parser(argparse.ArgumentParser):
    """No prefix abbreviations (`--emul` is not --emulated-device: a flag added later would change what an
    abbreviation means); every error is one line with the usage of the (sub)command it belongs to."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):
        raise UsageError(f"{self.prog}: {message} (usage: {self.format_usage().strip().replace('usage: ', '')})")


DOCS = ("running.md", "bisect.md", "gdb.md", "options.md", "report-format.md", "frameworks.md")


def reference():
    """Where the reference is: the installed docs (and the man page) in an install, docs/ in a build tree."""
    where = paths.DOC_DIR or "docs"
    man = "; also `man redzone`" if getattr(paths, "INSTALLED", False) else ""
    return f"Reference: the docs in {where}/\n  ({', '.join(DOCS)}){man}"


def wide(prog):
    """Help as written (descriptions keep their lines), flags in a column wide enough for the table's."""
    import shutil
    width = min(110, shutil.get_terminal_size().columns)
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=30, width=width)


OWN_FLAGS = ("-h", "--help", "--error-exitcode", "--emulated-device", "--unpool", "--version")


def add_run_flags(run):
    """`redzone run`'s flags: one per row of the option table (options.inc through rz-options list), then
    the launcher's own."""
    table = run.add_argument_group("options from the library's option table (each sets its METRALE_REDZONE* "
                                   "variable; docs/options.md)")
    for o in options.run_options():
        if any(flag in OWN_FLAGS for flag in o.flags):
            continue  # a table option named like a launcher flag: set through its variable
        extra = {"nargs": "?", "const": "1"} if o.kind == "BOOL" else {}
        table.add_argument(*o.flags, metavar=o.metavar, dest=o.var,
                           help=f"{o.summary()} [{o.var}]".replace("%", "%%"), **extra)
    own = run.add_argument_group("the launcher's own options")
    own.add_argument("--error-exitcode", metavar="N", type=options.error_exitcode,
                     help="exit with N (1-255) when any violation was found (as compute-sanitizer does)")
    own.add_argument("--emulated-device", action="store_true",
                     help="use the emulated CUDA driver (host memory; for machines without a GPU)")
    own.add_argument("--unpool", action="store_true",
                     help="make PyTorch, JAX/XLA and TensorFlow allocate buffer by buffer, so every tensor gets "
                     "its own band (sets " + " ".join(f"{k}={v}" for k, v in UNPOOL_ENV) + "; docs/frameworks.md)")
    own.add_argument("--version", action="version", version=f"redzone {paths.VERSION}")


def build_parser():
    top = Parser(
        prog="redzone",
        description="Catch CUDA device-memory overruns with guard bands (red zones).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="commands:\n  run     run a program with red zones (redzone run --help)\n"
        "  bisect  find the allocation a program reads past the end of (redzone bisect --help)\n"
        "  gdb     debug a program with red zones in cuda-gdb or gdb (redzone gdb --help)\n\n" + reference(),
    )
    top.add_argument("--version", action="version", version=f"redzone {paths.VERSION}")
    sub = top.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    run = sub.add_parser("run", help="run a program with red zones",
                         usage="redzone run [options] -- PROGRAM [ARGS...]", description=DESCRIPTION,
                         formatter_class=wide)
    add_run_flags(run)
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
    bis.add_argument("--version", action="version", version=f"redzone {paths.VERSION}")
    bis.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS...]")
    return top, {"run": run, "gdb": dbg, "bisect": bis}


COMMANDS = {"run": cmd_run, "bisect": cmd_bisect, "gdb": cmd_gdb}


def dispatch(argv):
    top, subs = build_parser()
    args, unknown = top.parse_known_args(argv)
    if unknown:  # a subcommand's bad flag: that subcommand's usage
        (subs.get(args.command) or top).error(f"unrecognized arguments: {' '.join(unknown)}")
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
