#!/bin/sh
# `redzone gdb` as a user starts it, with the default debugger (cuda-gdb where installed, else gdb): it says
# which debugger it starts and why, loads the plugin without an auto-load warning, and `print`, `bt` and
# `redzone scan` work in the session. Usage: launcher_session.sh REDZONE GDBPROG
redzone=$1 prog=$2
expected=$(command -v cuda-gdb || command -v gdb)
out=$(printf 'set pagination off\nbreak stop_here\nrun overrun\nprint where\nbt\nredzone scan\nkill\nquit\n' |
      "$redzone" gdb --emulated-device -- "$prog" 2>&1)
rc=$?
printf '%s\n' "$out"
fail() { echo "launcher_session: $1"; exit 1; }
[ "$rc" -eq 0 ] || fail "redzone gdb exited with status $rc"
printf '%s\n' "$out" | grep -q "^redzone gdb: starting $expected, .*: " || fail "it did not say it starts $expected, and why"
printf '%s\n' "$out" | grep -q "auto-loading has been declined" && fail "an auto-load safe-path warning appeared"
printf '%s\n' "$out" | grep -qE '(^|\) )\$1 = 1$' || fail "print does not show the value"
printf '%s\n' "$out" | grep -qE '#1 .* in main ' || fail "bt does not show main"
printf '%s\n' "$out" | grep -q "REDZONE VIOLATION alloc#1 user_bytes=1000 pad=64 : bytes \[0..=7\]" || fail "no report"
printf '%s\n' "$out" | grep -q "redzone scan: 3 zones checked, 1 violated$" || fail "no summary"
printf '%s\n' "$out" | grep -qE "Python Exception|Traceback" && fail "a Python error reached the user"
echo "launcher_session: passed with $expected"
