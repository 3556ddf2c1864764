"""The `redzone` launcher (bin/redzone): run, bisect and gdb. One module per concern: cli (arguments, errors,
exit codes), options (flags to METRALE_REDZONE* variables, checked by the library's own parser), procs
(starting, signalling and ending programs), run, search (the bisect search, pure), bisect (its runs and
verdict), gdb_launcher. bin/redzone puts this package on sys.path and tells it where the library is."""
