"""redzone gdb plugin package (see ../redzone.py)."""
