#!/usr/bin/env bash
# A debugger reads redzone's state without running code in the program: break on __redzone_violation and
# read the violation record and the exported state block in a live process, then the same block from a core
# file. Usage: gdb_state.sh EXAMPLE LIBPATH WORKDIR
set -euo pipefail
example=$1 libpath=$2 work=$3
mkdir -p "$work"
core=$work/runtime_overrun.core
rm -f "$core"
trap 'rm -f "$core"' EXIT
# A core of the whole emulated device's address reservation would be a terabyte: the emulated driver
# excludes it from dumps. Cap file size so a regression fails here instead of filling the disk.
ulimit -f 1048576

live=$(gdb -nx -batch \
    -ex 'set pagination off' -ex 'set confirm off' -ex 'set breakpoint pending on' \
    -ex "set environment METRALE_REDZONE=64" -ex "set environment LD_LIBRARY_PATH=$libpath" \
    -ex 'break __redzone_violation' -ex 'run' \
    -ex 'printf "violation index=%llu first=%llu last=%llu changed=%llu bad=0x%02x expected=0x%02x\n", violation->index, violation->first, violation->last, violation->changed, violation->first_bad, violation->expected' \
    -ex 'printf "state magic=%s version=%u zones=%llu next_index=%llu\n", (char *)&__redzone_state.magic, __redzone_state.version, __redzone_state.zone_count, __redzone_state.next_index' \
    -ex 'printf "zone[head] index=%llu user_bytes=%llu pad=%u\n", __redzone_state.chunks[0][__redzone_state.head - 1].index, __redzone_state.chunks[0][__redzone_state.head - 1].user_bytes, __redzone_state.chunks[0][__redzone_state.head - 1].pad_bytes' \
    -ex 'printf "counters map_calls=%llu live_zones=%llu\n", __redzone_state.counters[2], __redzone_state.counters[10]' \
    -ex "gcore $core" -ex 'kill' \
    "$example" 2>&1)
echo "$live"
grep -q 'violation index=1 first=0 last=7 changed=8 bad=0xab expected=0xee' <<<"$live"
grep -q 'state magic=RZSTATE1' <<<"$live"
grep -q 'zones=3 next_index=3' <<<"$live"
grep -q 'zone\[head\] index=0 user_bytes=4096 pad=64' <<<"$live"
grep -q 'counters map_calls=3 live_zones=3' <<<"$live"

post=$(LD_LIBRARY_PATH=$libpath gdb -nx -batch \
    -ex "set solib-search-path $libpath" \
    -ex 'printf "core zones=%llu map_calls=%llu magic=%s\n", __redzone_state.zone_count, __redzone_state.counters[2], (char *)&__redzone_state.magic' \
    "$example" "$core" 2>&1)
echo "$post"
grep -q 'core zones=3 map_calls=3 magic=RZSTATE1' <<<"$post"
size=$(stat -c %s "$core")
[ "$size" -lt $((512 << 20)) ] || { echo "core file is $size bytes"; exit 1; }
echo "gdb_state: live process and core file both read"
