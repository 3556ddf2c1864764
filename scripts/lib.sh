# Shared by scripts/test and scripts/demo: install what is missing, configure and build.
# shellcheck shell=bash

REDZONE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REDZONE_BUILD=${REDZONE_BUILD_DIR:-$REDZONE_ROOT/build}

# Debian packages the build and the tests need (scripts/test, bench/run).
REDZONE_PACKAGES=(gcc cmake ninja-build pkg-config libcriterion-dev python3 python3-pytest gdb
                  clang libclang-rt-dev python3-hypothesis valgrind nvidia-cuda-gdb mmdebstrap)
# What scripts/demo needs: the library, the launcher, the examples (a build without the tests) and gdb.
REDZONE_DEMO_PACKAGES=(gcc cmake ninja-build python3 gdb)
# cuda-gdb (nvidia-cuda-gdb) is in Debian 12's non-free component: one apt source for it.
REDZONE_NONFREE_SOURCE=/etc/apt/sources.list.d/redzone-non-free.sources
# The gdb cases' third debugger: gdb 16 from a Debian 13 root built once (scripts/debian13-root).
REDZONE_GDB16_ROOT=${REDZONE_GDB16_ROOT:-$REDZONE_BUILD/debian13}

# The NVIDIA driver's libcuda.so.1 for the test real_driver_no_gpu (scripts/real-driver): downloaded with
# apt-get download, unpacked with dpkg -x into the build tree, never installed. The version is named because
# the non-free component is pinned at -1 (nothing from it installs by accident).
REDZONE_LIBCUDA1_VERSION=535.261.03-1

# Debian 12's non-free component as an apt source (as root, once), every package of it pinned at -1 except
# cuda-gdb. Returns 1 where it cannot be added (not root, not Debian 12).
rz_nonfree_source() {
    # non-free itself, not only non-free-firmware (Debian 12's default sources name that one)
    grep -rqsE "non-free([^-]|$)" /etc/apt/sources.list /etc/apt/sources.list.d/ && return 0
    [ "$(id -u)" -eq 0 ] || return 1
    (. /etc/os-release && [ "${VERSION_CODENAME:-}" = bookworm ]) || return 1
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        >"$REDZONE_NONFREE_SOURCE"
    # Only cuda-gdb comes from it: every other non-free package stays uninstallable by accident.
    printf 'Package: *\nPin: release c=non-free\nPin-Priority: -1\n\nPackage: nvidia-cuda-gdb\nPin: release c=non-free\nPin-Priority: 500\n' \
        >/etc/apt/preferences.d/redzone-non-free
}

# rz_ensure_packages [PACKAGE...]: install those missing (default: REDZONE_PACKAGES, everything the tests need).
rz_ensure_packages() {
    local missing=() p wanted=("$@")
    [ ${#wanted[@]} -gt 0 ] || wanted=("${REDZONE_PACKAGES[@]}")
    for p in "${wanted[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "redzone: missing Debian packages; as root run:" >&2
        echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    echo "redzone: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    case " ${missing[*]} " in *" nvidia-cuda-gdb "*) rz_nonfree_source || true ;; esac
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# rz_build [CMAKE-OPTION...]: configure once (with these options), then build. Its output goes to stdout,
# which scripts/gendocs and bench/run discard.
rz_build() {
    if [ ! -f "$REDZONE_BUILD/build.ninja" ]; then
        cmake -S "$REDZONE_ROOT" -B "$REDZONE_BUILD" -G Ninja -DREDZONE_WERROR=ON "$@"
    fi
    cmake --build "$REDZONE_BUILD"
}

# rz_build_progress [CMAKE-OPTION...]: rz_build, saying on stderr what it does: one line while it
# configures, then "building: K/N steps" as ninja goes (in place on a terminal, at every tenth otherwise),
# the full log kept in $REDZONE_BUILD/build.log and shown when the build fails.
rz_build_progress() {
    mkdir -p "$REDZONE_BUILD"
    local log=$REDZONE_BUILD/build.log
    if [ ! -f "$REDZONE_BUILD/build.ninja" ]; then
        echo "redzone: configuring $REDZONE_BUILD (cmake)" >&2
    fi
    echo "redzone: building (the first build takes a few minutes; the log is $log)" >&2
    local tty=0
    [ -t 2 ] && tty=1
    local status=0
    rz_build "$@" 2>&1 | tee "$log" | awk -v tty=$tty '
        match($0, /^\[[0-9]+\/[0-9]+\]/) {
            split(substr($0, 2, RLENGTH - 2), kn, "/")
            k = kn[1] + 0; n = kn[2] + 0
            if (tty) { printf "\rredzone: building: %d/%d steps", k, n > "/dev/stderr"; shown = 1 }
            else if (n > 0 && (k == n || int(10 * k / n) > last)) {
                last = int(10 * k / n); printf "redzone: building: %d/%d steps\n", k, n > "/dev/stderr"
            }
        }
        END { if (shown) printf "\n" > "/dev/stderr" }' || status=$?
    if [ "$status" -ne 0 ]; then
        echo "redzone: the build failed:" >&2
        tail -n 40 "$log" >&2
        return 1
    fi
    echo "redzone: built" >&2
}

# True when a real NVIDIA driver and GPU are usable here.
rz_have_gpu() {
    [ -e /dev/nvidiactl ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1
}
