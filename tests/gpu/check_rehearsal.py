#!/usr/bin/env python3
"""ctest gpu_run_emulated: tests/gpu/run --emulated-device, and what its output and report must show besides
its exit status: every step in the plan's order (gpurun/plan.py), the environment step's probes in
logs/environment.txt, cu-build run where nvcc is (runtime_prog finds the libcudart nvcc linked without
ld.so.conf) and the headline tables.

    check_rehearsal.py --out DIR --build-dir DIR [more tests/gpu/run options]
"""
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpurun import plan  # noqa: E402


def main(argv):
    out = argv[argv.index("--out") + 1]
    cmd = [sys.executable, os.path.join(HERE, "run"), "--emulated-device", *argv]
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    lines = []
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        lines.append(line.rstrip("\n"))
    rc = proc.wait()
    bad = []

    def check(ok, what):
        print(f"rehearsal: [{'x' if ok else ' '}] {what}")
        if not ok:
            bad.append(what)

    check(rc == 0, f"tests/gpu/run exit status 0 (got {rc})")
    check(lines and re.match(r"gpu run: \d+ steps passed, \d+ skipped, 0 failed$", lines[-1]), "the summary line")
    printed = [m.group(2) for m in (re.match(r"(PASS|SKIP|FAIL) ([a-z0-9-]+)[ :]", l) for l in lines) if m]
    check(printed == plan.ORDER, "every step, in the plan's order: " + ", ".join(printed))

    env_log = os.path.join(out, "logs", "environment.txt")
    text = open(env_log).read() if os.path.exists(env_log) else ""
    for what in ["# note: CUDA (driver's): ", "# note: CUDA (nvcc's): ", "# note: debugger for the sessions: ",
                 "# note: debugger's Python: ", "# note: CUDA runtime steps (cuda-*, runtime_prog's rows): ",
                 "# note: debugger sessions: "]:
        check(what in text, f"logs/environment.txt has {what.strip()!r}")
    check(re.search(r"^\$ .* --version$", text, re.M), "logs/environment.txt has the probes' commands")

    nvcc = shutil.which("nvcc") or shutil.which("nvcc", path="/usr/local/cuda/bin")
    report = open(os.path.join(out, "gpu-results.md")).read()
    if nvcc:
        check("PASS cu-build" in "\n".join(lines) and "[x] runtime_prog: RUNPATH has " in report
              and re.search(r"\[x\] runtime_prog_G: libcudart found in \S+ without ld\.so\.conf", report),
              f"cu-build ran with {nvcc}: runtime_prog and runtime_prog_G find libcudart through their RUNPATH")
    else:
        print("rehearsal: no nvcc here: cu-build is skipped, its RUNPATH check not rehearsed")
        check("SKIP cu-build: nvcc is not installed" in lines, "cu-build skipped for want of nvcc")
    for title in ["## Scan of 100k zones, by method", "## Overhead"]:
        check(title in report, f"the report has {title[3:]!r}")
    print(f"rehearsal: {len(bad)} expectation(s) failed" if bad else "rehearsal: every expectation held")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
