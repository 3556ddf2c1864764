"""The plugin's one error for 'the program cannot answer' (no process, no library, a busy registry, a
timeout): the commands turn it into a gdb.GdbError with a sentence."""


class TargetError(Exception):
    """The program cannot answer (no process, no library, core file, timeout)."""
