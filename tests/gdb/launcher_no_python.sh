#!/bin/sh
# `redzone gdb --gdb CUDA_GDB` with Debian 13's nvidia-cuda-gdb (cuda-gdb 12.4, based on GDB 13.1, built without
# Python): the launcher reads the real binary's banner (cuda-gdb 12.4 (GDB 13.1)) and, since the plugin cannot
# load there, says in one sentence what to install or run, exits non-zero and starts nothing.
# Usage: launcher_no_python.sh REDZONE CUDA_GDB(the wrapper tests/cuda-gdb-debian13/cuda-gdb) ROOT GDBPROG
redzone=$1 cuda_gdb=$2 root=$3 prog=$4
if [ ! -x "$root/usr/bin/cuda-gdb" ]; then
    echo "launcher_no_python: SKIPPED: the Debian 13 root $root has no nvidia-cuda-gdb (scripts/debian13-root $root installs it)"
    exit 77
fi
banner=$("$cuda_gdb" --version 2>&1 | head -3)
printf '%s\n' "$banner"
out=$("$redzone" gdb --emulated-device --gdb "$cuda_gdb" -- "$prog" </dev/null 2>&1)
rc=$?
printf '%s\n' "$out"
fail() { echo "launcher_no_python: $1"; exit 1; }
printf '%s\n' "$banner" | grep -qx 'NVIDIA (R) cuda-gdb 12.4' || fail "not the cuda-gdb 12.4 banner"
[ "$rc" -eq 127 ] || fail "redzone gdb exited with status $rc, not 127"
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "more than one line"
printf '%s\n' "$out" | grep -qF "redzone gdb: $cuda_gdb (cuda-gdb 12.4 (GDB 13.1)) has no Python (\"Python scripting is not supported in this copy of GDB.\"), so the redzone plugin cannot load in it: install a cuda-gdb with Python" || fail "not the sentence"
printf '%s\n' "$out" | grep -q "starting" && fail "a debugger was started"
echo "launcher_no_python: passed"
