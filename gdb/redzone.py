"""redzone gdb plugin: `source .../share/redzone/gdb/redzone.py` (or `redzone gdb -- PROGRAM`).

Registers the redzone commands and arranges that the program started by `run` gets libredzone.so
preloaded (through exec-wrapper, never into gdb or the shell), with red zones on at 64 bytes unless the
METRALE_REDZONE* variables are set. Works in gdb and cuda-gdb (Python 3.8+)."""
import os
import sys

# This file's own path (not __file__: when sourced from another gdb Python script, __file__ is that one's).
_here = os.path.dirname(os.path.abspath(sys._getframe().f_code.co_filename))
if _here not in sys.path:
    sys.path.insert(0, _here)

import gdb  # noqa: E402

if not getattr(gdb, "_redzone_loaded", False):
    from redzone_gdb import commands  # noqa: E402

    commands.register()
    gdb._redzone_loaded = True
