#!/usr/bin/env bash
# rzstress under one of valgrind's thread checkers, in a build with REDZONE_VALGRIND=ON (the library's futex
# lock and atomics annotated for them, native/src/base/rz_annotate.h):
#   valgrind.sh helgrind|drd RZSTRESS LIBREDZONE EMU_DIR [rzstress options]
# Any error valgrind reports makes the run fail (exit 3). Exits 77, saying why, when valgrind is missing.
set -euo pipefail
tool=$1 stress=$2 lib=$3 emu=$4
shift 4
if ! command -v valgrind >/dev/null 2>&1; then
    echo "skipped: valgrind is not installed (Debian package valgrind; scripts/lib.sh installs it)"
    exit 77
fi
supp=$(dirname "$0")/valgrind.supp
# REDZONE_LONG=1: the long run, sized for valgrind (rzstress alone would take the 100k calls).
long=()
if [ "${REDZONE_LONG:-}" = 1 ]; then
    long=(--ops 2000)
fi
# --warm: the library starts in the main thread, before the others (see rzstress --help). A 1 MiB quarantine,
# as ctest's stress run has (stress.cmake): with the 64 MiB default the scans' reads of every held byte took
# 22 minutes of the run under helgrind.
exec env -u REDZONE_LONG LD_PRELOAD="$lib" LD_LIBRARY_PATH="$emu" METRALE_REDZONE_QUARANTINE="${METRALE_REDZONE_QUARANTINE:-1M}" \
    valgrind --tool="$tool" --error-exitcode=3 --suppressions="$supp" --fair-sched=yes \
    "$stress" --warm "$@" "${long[@]}"
