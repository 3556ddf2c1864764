"""Where the installed or built pieces are; bin/redzone fills these in (from its own location) before main."""
LIBREDZONE = None   # libredzone.so
EMU_DIR = None      # the folder holding the emulated libcuda.so.1
GDB_PLUGIN = None   # share/redzone/gdb/redzone.py
RZ_OPTIONS = None   # rz-options, the library's option parser as a program
VERSION = None
DOC_DIR = None     # the reference docs: share/doc/redzone installed, the source tree's docs/ in a build
INSTALLED = False  # bin/redzone of an install (not of a build tree)
