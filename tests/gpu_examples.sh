#!/usr/bin/env bash
# GPU-only (ctest label gpu): the CUDA runtime examples under `redzone run` and `redzone bisect` on a real
# GPU. cudaMalloc reaches the driver through libcudart's cuGetProcAddress, so this proves the runtime path on
# hardware.
# Exit 77 (skipped, with the reason printed) where there is no GPU or the examples were not built.
set -euo pipefail
redzone=$1 examples=$2
if ! { [ -e /dev/nvidiactl ] && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; }; then
    echo "gpu_examples: skipped: no NVIDIA GPU on this machine"
    exit 77
fi
if [ ! -x "$examples/off_by_one" ]; then
    echo "gpu_examples: skipped: the .cu examples were not built (no nvcc at configure time)"
    exit 77
fi
out=$("$redzone" run -- "$examples/off_by_one" 2>&1)
echo "$out"
grep -q 'REDZONE VIOLATION alloc#0 user_bytes=4000 pad=64 : bytes \[0\.\.=3\]' <<<"$out"
grep -q 'kernels launched since alloc#0 was last seen clean (most recent first): .*scale' <<<"$out"
a=$("$redzone" run --fill 0 -- "$examples/read_past" 2>&1 | grep 'sum =')
b=$("$redzone" run --fill 1 -- "$examples/read_past" 2>&1 | grep 'sum =')
echo "fill 0: $a / fill 1: $b"
[ "$a" = "read_past: sum = 1000" ] && [ "$b" = "read_past: sum = 1001" ]
# redzone bisect names the cudaMalloc buffer read past (its index depends on what the runtime allocates).
c=$("$redzone" bisect -- "$examples/read_past" 2>&1) || true
echo "$c"
grep -q '^redzone bisect: read_past reads past the end of allocation #[0-9]* (found in' <<<"$c"
grep -q '^  alloc#[0-9]* user_bytes=1000 pad=64$' <<<"$c"
echo "gpu_examples: passed"
