#!/usr/bin/env bash
# Where a front band's IPC record goes when the usual place cannot be used (docs/failure-modes.md, IPC
# handles): another user made /dev/shm/redzone-ipc-<uid> first (mode 0777), planted a symlink there (to a
# directory of theirs, or to one of the victim's own), or /dev/shm and /tmp are full. In each case the
# victim's program (tests/programs/rzwriters.c `ipc`: export, open, copy through the opened pointer, close)
# prints the same lines and exits the same with redzone and front bands as without redzone, redzone says so
# in one warning line, and nothing goes into the squatter's directory. The victim is uid 4242, the squatter
# nobody (setpriv); each case runs in a mount namespace of its own with fresh tmpfs at /dev/shm and /tmp, so
# nothing outside the test is touched. Needs root (another user to be, a tmpfs to mount): skipped, saying
# why, without it.
#   ipc_places.sh RZWRITERS LIBREDZONE EMU_DIR
set -u
RZWRITERS=$1 LIB=$2 EMU=$3
VICTIM=4242 SQUATTER=65534

if [ -z "${RZ_IPC_PLACES_INNER:-}" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "ipc_places: skipped: needs root (to run as two other users and mount a full tmpfs)"
        exit 77
    fi
    for tool in setpriv unshare mount stat; do
        if ! command -v $tool >/dev/null; then
            echo "ipc_places: skipped: no $tool (util-linux, coreutils) here"
            exit 77
        fi
    done
    if ! unshare -m --propagation private true 2>/dev/null; then
        echo "ipc_places: skipped: cannot make a mount namespace (unshare -m) here"
        exit 77
    fi
    exec unshare -m --propagation private env RZ_IPC_PLACES_INNER=1 "$0" "$@"
fi

# The fresh /tmp below hides whatever the build and source trees keep there (a clone in /tmp, as CI's may
# be): the program, the library and the emulated driver are copied first to a folder of their own in /var/tmp.
stage=$(mktemp -d /var/tmp/rz-ipc-places.XXXXXX) || { echo "ipc_places: FAIL: cannot make a folder in /var/tmp"; exit 1; }
trap 'rm -rf "$stage"' EXIT
cp "$RZWRITERS" "$stage/rzwriters" && cp "$LIB" "$stage/libredzone.so" && cp -a "$EMU" "$stage/emu" &&
    chmod -R a+rX "$stage" || { echo "ipc_places: FAIL: cannot copy the programs to $stage"; exit 1; }
RZWRITERS=$stage/rzwriters LIB=$stage/libredzone.so EMU=$stage/emu
# So are the sanitizer trees' suppression files, their names in *SAN_OPTIONS rewritten.
for var in ASAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS UBSAN_OPTIONS; do
    value=${!var:-}
    [[ $value =~ (^|:)suppressions=([^:]+) ]] || continue
    supp=${BASH_REMATCH[2]}
    cp "$supp" "$stage/$var.supp" && chmod a+r "$stage/$var.supp" ||
        { echo "ipc_places: FAIL: cannot copy $supp to $stage"; exit 1; }
    export "$var=${value/suppressions=$supp/suppressions=$stage/$var.supp}"
done

failures=0
fail() {
    echo "ipc_places: FAIL: $case: $*"
    failures=$((failures + 1))
}

fresh() { # empty /dev/shm and /tmp of this namespace, sticky and world-writable as usual
    umount /dev/shm 2>/dev/null
    umount /tmp 2>/dev/null
    local opts="mode=1777,size=${1:-16m}"
    mount -t tmpfs -o "$opts" tmpfs /dev/shm && mount -t tmpfs -o "$opts" tmpfs /tmp
}
as_victim() { setpriv --reuid=$VICTIM --regid=$VICTIM --clear-groups -- "$@"; }
as_squatter() { setpriv --reuid=$SQUATTER --regid=$SQUATTER --clear-groups -- "$@"; }

# Runs the program both ways and compares; $1: a pattern the warning line must hold.
compare() {
    bare=$(as_victim env LD_LIBRARY_PATH="$EMU" "$RZWRITERS" ipc 2>&1)
    rc_bare=$?
    with=$(as_victim env LD_LIBRARY_PATH="$EMU" LD_PRELOAD="$LIB" METRALE_REDZONE=64 METRALE_REDZONE_FRONT=256 \
        CUDA_EMU_STATS=0 "$RZWRITERS" ipc 2>&1)
    rc_with=$?
    [ "$rc_bare" = 0 ] || fail "without redzone the program exited $rc_bare: $bare"
    [ "$rc_with" = "$rc_bare" ] || fail "with redzone it exited $rc_with, without $rc_bare"
    if [ "$(grep '^rzwriters: ' <<<"$with")" != "$(grep '^rzwriters: ' <<<"$bare")" ]; then
        fail "the program's lines differ"
        diff <(grep '^rzwriters: ' <<<"$bare") <(grep '^rzwriters: ' <<<"$with")
    fi
    grep -q '^rzwriters: opened at the allocation: 1$' <<<"$bare" || fail "the bare run did not open at the allocation"
    warnings=$(grep -c '^redzone: warning' <<<"$with")
    [ "$warnings" = 1 ] || fail "$warnings warning lines, not 1: $with"
    grep -q 'REDZONE VIOLATION' <<<"$with" && fail "a violation was reported: $with"
    grep -q -- "$1" <<<"$with" || fail "the warning lacks '$1': $with"
}

# The records went to a private directory of the victim's beside the usual name; the squatter's holds nothing.
expect_spare() {
    local spare
    spare=$(grep -o "/dev/shm/redzone-ipc-$VICTIM-[A-Za-z0-9]\{6\}" <<<"$with" | head -1)
    [ -n "$spare" ] || { fail "no spare directory named: $with"; return; }
    [ "$(stat -c '%u %a %F' "$spare")" = "$VICTIM 700 directory" ] || fail "$spare: $(stat -c '%u %a %F' "$spare")"
    grep -q "/dev/shm/redzone-ipc-$VICTIM is not this user's private directory and is not used" <<<"$with" ||
        fail "the warning does not say the usual directory was passed over: $with"
    [ -z "$(ls -A "$1")" ] || fail "something was written into the squatter's $1: $(ls -A "$1")"
}

case=squat
fresh
as_squatter mkdir -m 777 /dev/shm/redzone-ipc-$VICTIM
compare "it reads the band from /dev/shm/redzone-ipc-$VICTIM-"
expect_spare /dev/shm/redzone-ipc-$VICTIM
[ "$(stat -c '%u %a' /dev/shm/redzone-ipc-$VICTIM)" = "$SQUATTER 777" ] || fail "the squatter's directory changed"

case=symlink-to-the-squatters
fresh
as_squatter mkdir -m 777 /tmp/squat
as_squatter ln -s /tmp/squat /dev/shm/redzone-ipc-$VICTIM
compare "it reads the band from /dev/shm/redzone-ipc-$VICTIM-"
expect_spare /tmp/squat

case=symlink-to-the-victims-own
fresh
mkdir -m 700 /tmp/mine && chown $VICTIM:$VICTIM /tmp/mine
as_squatter ln -s /tmp/mine /dev/shm/redzone-ipc-$VICTIM
compare "it reads the band from /dev/shm/redzone-ipc-$VICTIM-"
expect_spare /tmp/mine

case=full
fresh 64k
dd if=/dev/zero of=/dev/shm/fill bs=4k 2>/dev/null
dd if=/dev/zero of=/tmp/fill bs=4k 2>/dev/null
compare "cannot record its 256-byte front band under /dev/shm or /tmp (No space left on device): this process's own opens"

umount /tmp /dev/shm 2>/dev/null
if [ "$failures" != 0 ]; then
    echo "ipc_places: $failures failures"
    exit 1
fi
echo "ipc_places: squat, symlinks and full disk: the program's lines and exit as without redzone, one warning"
