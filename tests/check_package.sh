#!/bin/sh
# `cpack -G DEB` in the build tree makes a Debian package that installs, runs and removes cleanly (issue 31,
# item 7). dpkg installs and removes it for real, into a scratch root (dpkg --root with a database of its
# own), so the test never changes the machine it runs on and runs as any user; dpkg-deb -c lists what the
# package holds, and after dpkg -r nothing of it may be left.
#   check_package.sh BUILD_DIR
set -eu
build=$(cd "$1" && pwd)
work=$build/package-test
rm -rf "$work"
mkdir -p "$work/root/var/lib/dpkg/updates" "$work/root/var/lib/dpkg/info"
: > "$work/root/var/lib/dpkg/status"
for tool in cpack dpkg dpkg-deb; do
    command -v $tool > /dev/null || { echo "check_package: $tool not found (Debian's dpkg, CMake's cpack are needed)"; exit 1; }
done
(cd "$build" && cpack -G DEB -B "$work/out" > "$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
deb=$(ls "$work"/out/redzone_*.deb)
echo "check_package: built $(basename "$deb")"
dpkg-deb -f "$deb" Package Version Depends
dpkg-deb -c "$deb" | awk '{print $6}' > "$work/contents"
for f in ./usr/bin/redzone ./usr/lib/libredzone.so ./usr/include/redzone.h ./usr/lib/redzone/emu/libcuda.so.1 \
         ./usr/share/man/man1/redzone.1 ./usr/share/bash-completion/completions/redzone \
         ./usr/lib/cmake/redzone/redzoneConfig.cmake ./usr/lib/pkgconfig/redzone.pc ./usr/share/doc/redzone/frameworks.md \
         ./usr/libexec/redzone/examples/kernel_overrun; do
    grep -qx "$f" "$work/contents" || { echo "check_package: the package lacks $f"; exit 1; }
done
root=$work/root
dpkg --root="$root" --force-not-root --force-depends --log=/dev/null -i "$deb" > "$work/dpkg-i.log" 2>&1 \
    || { cat "$work/dpkg-i.log"; exit 1; }
dpkg --root="$root" --force-not-root -s redzone | grep -qx "Status: install ok installed" \
    || { echo "check_package: dpkg does not list redzone as installed"; exit 1; }
out=$("$root/usr/bin/redzone" run --emulated-device -- "$root/usr/libexec/redzone/examples/kernel_overrun" 2>&1) \
    || { echo "check_package: the installed redzone run failed:"; echo "$out"; exit 1; }
echo "$out" | grep -q "REDZONE VIOLATION alloc#1 user_bytes=1000 pad=64" \
    || { echo "check_package: the installed redzone run reported no overrun:"; echo "$out"; exit 1; }
echo "check_package: installed with dpkg -i, redzone run --emulated-device reports the overrun"
dpkg --root="$root" --force-not-root --log=/dev/null -r redzone > "$work/dpkg-r.log" 2>&1 \
    || { cat "$work/dpkg-r.log"; exit 1; }
left=$(cd "$root" && find . -path ./var -prune -o \( -type f -o -type l \) -print)
if [ -n "$left" ]; then
    echo "check_package: dpkg -r left files behind:"; echo "$left"; exit 1
fi
if dpkg --root="$root" --force-not-root -s redzone 2> /dev/null | grep -q "Status: install ok installed"; then
    echo "check_package: dpkg still lists redzone as installed"; exit 1
fi
echo "check_package: removed with dpkg -r, nothing left"
