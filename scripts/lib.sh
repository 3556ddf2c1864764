# Shared by scripts/test and scripts/demo: install what is missing, configure and build.
# shellcheck shell=bash

REDZONE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REDZONE_BUILD=${REDZONE_BUILD_DIR:-$REDZONE_ROOT/build}

# Debian packages the build and the tests need.
REDZONE_PACKAGES=(gcc cmake ninja-build pkg-config libcriterion-dev python3 python3-pytest gdb
                  clang libclang-rt-dev python3-hypothesis valgrind nvidia-cuda-gdb mmdebstrap)
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

rz_ensure_packages() {
    local missing=() p
    for p in "${REDZONE_PACKAGES[@]}"; do
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
    rz_nonfree_source || true
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

rz_build() {
    if [ ! -f "$REDZONE_BUILD/build.ninja" ]; then
        cmake -S "$REDZONE_ROOT" -B "$REDZONE_BUILD" -G Ninja -DREDZONE_WERROR=ON "$@"
    fi
    cmake --build "$REDZONE_BUILD"
}

# True when a real NVIDIA driver and GPU are usable here.
rz_have_gpu() {
    [ -e /dev/nvidiactl ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1
}
