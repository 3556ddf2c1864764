#!/usr/bin/env python3
"""redzone: run CUDA programs with red zones (guard bands after every device allocation), find the allocation
a program reads past the end of (bisect), or debug it in gdb.

Usage:
  redzone run [options] -- PROGRAM [ARGS...]
  redzone bisect [options] -- PROGRAM [ARGS...]
  redzone gdb [options] -- PROGRAM [ARGS...]
  redzone --help | --version | redzone run --help | redzone bisect --help

This file is configured by CMake into bin/redzone (paths relative to itself filled in then); the commands
live in the redzone_cli package (native/tools/redzone_cli, installed under share/redzone/launcher).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _at(relative):
    return os.path.normpath(os.path.join(HERE, relative))


sys.path.insert(0, _at("@RZ_LAUNCHER_PKG@"))
try:
    from redzone_cli import cli, paths
except ImportError as e:
    sys.stderr.write(f"redzone: cannot load the launcher's modules from {_at('@RZ_LAUNCHER_PKG@')} ({e}); "
                     "is redzone installed?\n")
    sys.exit(127)

paths.LIBREDZONE = _at("@RZ_LIBREDZONE@")
paths.EMU_DIR = _at("@RZ_EMU_DIR@")
paths.GDB_PLUGIN = _at("@RZ_GDB_PLUGIN@")
paths.RZ_OPTIONS = _at("@RZ_OPTIONS@")
paths.VERSION = "@PROJECT_VERSION@"
paths.DOC_DIR = _at("@RZ_DOC_DIR@")
paths.INSTALLED = "@RZ_INSTALLED@" == "1"

if __name__ == "__main__":
    sys.exit(cli.main())
