#!/usr/bin/env python3
"""ctest examples_ptx_version: the PTX every driver-API example and tests/gpu/driver_prog load
(examples/kernels_ptx.h) must load on every driver docs/gpu.md names.

A driver accepts PTX of its own ISA version or older: `.version 9.0` (nvcc 13.0's) loads only on a CUDA 13
driver (r580 or later), and every step of the GPU run built on driver_prog would fail at cuModuleLoadData
on a 12.x driver. So: `.version` at most 7.0 (CUDA 11.0, r450; the issue's ceiling is 8.0, CUDA 12.0), and a
`.target` of sm_52 or older, which every GPU since Maxwell JIT-compiles at load. Where ptxas is installed
the PTX is also assembled as it stands (ptxas refuses an instruction its `.version` or `.target` lacks).

    check_ptx.py HEADER [PTXAS]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

MAX_ISA = (7, 0)     # docs/gpu.md: CUDA 11.0 drivers (r450) and later
MAX_TARGET = 52      # sm_52: JIT-compiled on every GPU from Maxwell on


def ptx_of_header(text):
    """The PTX text of a header made by scripts/gen-ptx (C string literals, one line each)."""
    lines = []
    for m in re.finditer(r'^\s*"((?:[^"\\]|\\.)*)"\s*$', text, re.M):
        s = m.group(1)
        s = re.sub(r'\\(.)', lambda e: {"n": "\n", "t": "\t", "\\": "\\", '"': '"'}.get(e.group(1), e.group(1)), s)
        lines.append(s)
    return "".join(lines)


def problems(ptx):
    """What keeps the PTX from loading on the drivers named (empty: nothing)."""
    out = []
    v = re.findall(r"^\.version (\d+)\.(\d+)\s*$", ptx, re.M)
    t = re.findall(r"^\.target sm_(\d+)[a-z]?\b", ptx, re.M)
    if len(v) != 1:
        out.append(f"want one .version line, found {len(v)}")
    elif (int(v[0][0]), int(v[0][1])) > MAX_ISA:
        out.append(f".version {v[0][0]}.{v[0][1]} is newer than {MAX_ISA[0]}.{MAX_ISA[1]}: a driver older than "
                   f"that ISA's CUDA release refuses it (CUDA_ERROR_UNSUPPORTED_PTX_VERSION); run scripts/gen-ptx")
    if len(t) != 1:
        out.append(f"want one .target line, found {len(t)}")
    elif int(t[0]) > MAX_TARGET:
        out.append(f".target sm_{t[0]} is newer than sm_{MAX_TARGET}: older GPUs cannot JIT-compile it")
    return out


def main(argv):
    header = argv[1]
    with open(header) as f:
        ptx = ptx_of_header(f.read())
    if ".entry write_past" not in ptx:
        print(f"check_ptx: no PTX found in {header}")
        return 1
    bad = problems(ptx)
    for b in bad:
        print(f"check_ptx: {header}: {b}")
    ptxas = argv[2] if len(argv) > 2 and argv[2] else (shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas")
    if os.access(ptxas, os.X_OK):
        arch = "sm_75"  # the oldest architecture a CUDA 13 ptxas assembles for; older ones take sm_52 too
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "k.ptx")
            with open(src, "w") as f:
                f.write(ptx)
            r = subprocess.run([ptxas, f"-arch={arch}", "-o", os.path.join(d, "k.cubin"), src],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        if r.returncode != 0:
            bad.append("ptxas refused it")
            print(f"check_ptx: {ptxas} -arch={arch} refused the PTX:\n{r.stdout}")
        else:
            print(f"check_ptx: {ptxas} -arch={arch} assembled it as it stands")
    else:
        print(f"check_ptx: no ptxas ({ptxas}): the PTX was not assembled, only its .version/.target checked")
    if not bad:
        print(f"check_ptx: {header}: PTX ISA at most {MAX_ISA[0]}.{MAX_ISA[1]}, target at most sm_{MAX_TARGET}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
