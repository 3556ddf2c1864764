"""Writing to the user (gdb.write, one line at a time)."""
import gdb


def write(text):
    if text:
        gdb.write(text if text.endswith("\n") else text + "\n")
