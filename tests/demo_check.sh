#!/usr/bin/env bash
# scripts/demo as a newcomer meets it (issue 31, item 10), in an already built tree:
#  1. it asks only for the packages the demo needs: with every package missing and not root (a dpkg-query
#     that knows none and an id that is not 0, first on PATH), the apt-get line it prints names the demo's
#     packages and none of the test-only ones;
#  2. it says what it builds (progress on stderr), runs to its end, shows the reports, and no gdb session in
#     it prints gdb's auto-load warning.
#   demo_check.sh SOURCE_DIR BUILD_DIR
set -u
src=$1 build=$2
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
printf '#!/bin/sh\nexit 1\n' > "$fake/dpkg-query"
printf '#!/bin/sh\n[ "$1" = -u ] && echo 1000 && exit 0\nexec /usr/bin/id "$@"\n' > "$fake/id"
chmod +x "$fake/dpkg-query" "$fake/id"
out=$(PATH="$fake:$PATH" REDZONE_BUILD_DIR="$build" "$src/scripts/demo" 2>&1)
status=$?
line=$(echo "$out" | grep "apt-get install -y" || true)
if [ $status -ne 1 ] || [ -z "$line" ]; then
    echo "demo_check: with every package missing, scripts/demo should print the apt-get line and exit 1 (exit $status):"
    echo "$out"; exit 1
fi
for p in gcc cmake ninja-build python3 gdb; do
    [[ " $line " == *" $p "* ]] || { echo "demo_check: the demo's apt-get line lacks $p: $line"; exit 1; }
done
for p in libcriterion-dev python3-pytest python3-hypothesis valgrind clang libclang-rt-dev mmdebstrap nvidia-cuda-gdb; do
    [[ " $line " == *" $p "* ]] && { echo "demo_check: the demo asks for the test-only package $p: $line"; exit 1; }
done
echo "demo_check: the demo asks for: ${line#*-y }"

out=$(REDZONE_BUILD_DIR="$build" "$src/scripts/demo" 2>&1)
status=$?
fail() { echo "demo_check: $1 (exit $status); the demo printed:"; echo "$out"; exit 1; }
[ $status -eq 0 ] || fail "scripts/demo failed"
echo "$out" | grep -q "^redzone: building" || fail "no progress line while building"
echo "$out" | grep -q "^redzone: built$" || fail "no line saying the build is done"
echo "$out" | grep -q "REDZONE VIOLATION alloc#1 user_bytes=1000 pad=64" || fail "no overrun reported"
echo "$out" | grep -q "read_overrun reads past the end of allocation #0" || fail "bisect named no allocation"
echo "$out" | grep -q "redzone scan: 3 zones checked" || fail "the gdb session did not scan"
if echo "$out" | grep -q -i "auto-load"; then
    fail "a gdb session printed gdb's auto-load warning: $(echo "$out" | grep -i -m1 auto-load)"
fi
echo "demo_check: scripts/demo shows progress, runs, and no gdb session warns about auto-loading"
