#!/usr/bin/env python3
"""A CUDA driver that does not start (issue 26), judged by running each program bare, under `redzone run` and
with libredzone.so preloaded: the same exit status, stdout and stderr apart from redzone's lines, and redzone's
lines exactly the one early-failure line (none where the driver started). Also which libcuda.so.1 was loaded
(the one meant, never the other), which object each looked-up entry point lives in (redzone's wrappers for
the names it wraps only), and `redzone bisect` naming the cause.

  driver_start.py COMMON --emulated EMU_DIR
      the emulated driver: CUDA_EMU_DEVICES=0 (cuInit: CUDA_ERROR_NO_DEVICE), rzstart --like-runtime (the CUDA
      runtime's refusal of an older driver, before any cuInit), and a driver that starts (no line)
  driver_start.py COMMON --real DIR (--rt-static P --rt-shared P | --no-nvcc)
      the NVIDIA driver unpacked in DIR (scripts/real-driver) and no GPU; the CUDA-runtime program built with
      static and shared cudart. DIR/UNAVAILABLE (the package cannot be had here): skipped (77) saying why,
      except under CI=true, where it fails. A GPU here: skipped, this is the no-GPU case.
  COMMON: --redzone CLI --lib LIBREDZONE --rzstart PROGRAM
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

FAILED = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILED.append(what)
    return ok


def base_env(libdir, extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("METRALE_REDZONE", "CUDA_EMU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
    env["LD_LIBRARY_PATH"] = libdir  # only this driver: never the emulated one where the real one is meant
    env.update(extra)
    return env


def run(cmd, env, owners=None):
    env = dict(env)
    if owners:
        env["RZSTART_OWNERS"] = owners
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                       timeout=60)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def split_redzone(stderr):
    lines = stderr.splitlines()
    return [x for x in lines if x.startswith("redzone")], [x for x in lines if not x.startswith("redzone")]


def owners_of(path):
    try:
        with open(path) as f:
            return {name: re.sub(r"\.so(\.[0-9]+)*$", ".so", obj)
                    for name, obj in (line.split() for line in f if line.strip())}
    except FileNotFoundError:
        return {}


def three_ways(label, args, cmd, env, want_rc, want_line, owners_expect=None, stdout_has=()):
    """Bare, `redzone run`, LD_PRELOAD: the same rc, stdout and non-redzone stderr; redzone's lines exactly
    [want_line] (or none when want_line is None) under redzone, none bare. Returns the bare stdout."""
    runs = {}
    with tempfile.TemporaryDirectory(prefix="rzstart-") as tmp:
        ways = {"bare": (cmd, env),
                "redzone run": ([args.redzone, "run", "--"] + cmd, env),
                "LD_PRELOAD": (cmd, dict(env, LD_PRELOAD=args.lib))}
        for way, (c, e) in ways.items():
            owners = os.path.join(tmp, way.replace(" ", "_")) if owners_expect else None
            rc, out, err = run(c, e, owners)
            rz, rest = split_redzone(err)
            runs[way] = (rc, out, rest, rz, owners_of(owners) if owners else None)
    rc, out, rest, rz, own = runs["bare"]
    check(rc == want_rc, f"{label}: bare exit status {rc} (want {want_rc})")
    check(rz == [], f"{label}: bare, no redzone line (got {rz})")
    for s in stdout_has:
        check(s in out, f"{label}: stdout has {s!r}" + ("" if s in out else f"; stdout:\n{out}"))
    for way in ("redzone run", "LD_PRELOAD"):
        rc2, out2, rest2, rz2, own2 = runs[way]
        check(rc2 == rc, f"{label}: {way}: exit status {rc2} as bare ({rc})")
        check(out2 == out, f"{label}: {way}: stdout as bare" + ("" if out2 == out else f":\n{out2}\nbare:\n{out}"))
        check(rest2 == rest, f"{label}: {way}: stderr apart from redzone's lines as bare ({rest2} / {rest})")
        want = [want_line] if want_line else []
        check(rz2 == want, f"{label}: {way}: redzone's lines {rz2} (want {want})")
        if owners_expect:
            check(own == owners_expect[0], f"{label}: bare: every entry point in the driver ({own})")
            check(own2 == owners_expect[1], f"{label}: {way}: wrapped names in libredzone.so only ({own2})")
    return out


# cuCtxCreate is wrapped to be seen (hooks_ctx.c: the calls that change a thread's current context).
WRAPPED = ["cuInit", "cuMemAlloc", "cuMemFree", "cuLaunchKernel", "cuGetProcAddress", "cuCtxCreate"]
PLAIN = ["cuDeviceGetCount", "cuModuleLoadData", "cuGetErrorName", "cuGetExportTable"]
# The emulated driver hands out neither cuGetExportTable (it has none) nor cuCtxCreate for version 12000.
EMU_WRAPPED = [n for n in WRAPPED if n != "cuCtxCreate"]
EMU_PLAIN = [n for n in PLAIN if n != "cuGetExportTable"]


def owners_expected(wrapped, plain):
    """Each looked-up name's object (version suffixes dropped): the driver bare; under redzone its wrapper
    for the wrapped names and the driver's own entry point for the others."""
    bare = {n: "libcuda.so" for n in wrapped + plain}
    return bare, dict(bare, **{n: "libredzone.so" for n in wrapped})


REAL_OWNERS = owners_expected(WRAPPED, PLAIN)
EMU_OWNERS = owners_expected(EMU_WRAPPED, EMU_PLAIN)


def loaded_driver(label, out, want):
    got = re.findall(r"^rzstart(?:_rt)?: driver (.*)$", out, re.M)
    check(got == [want], f"{label}: the libcuda.so.1 loaded is {want} ({got})")
    mapped = re.findall(r"^rzstart: mapped (.*)$", out, re.M)
    if "rzstart_rt" not in label:
        check(mapped == [want], f"{label}: no other libcuda mapped ({mapped})")


def bisect(args, label, cmd, env, cause):
    p = subprocess.run([args.redzone, "bisect", "--"] + cmd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=120)
    out = p.stdout.decode(errors="replace")
    check(f"the CUDA driver did not start ({cause}" in out and "that redzone saw" not in out,
          f"{label}: redzone bisect names the cause ({cause}); it said:\n{out}")


def emulated(args):
    libdir = args.emulated
    driver = os.path.realpath(os.path.join(libdir, "libcuda.so.1"))
    no_gpu = base_env(libdir, {"CUDA_EMU_DEVICES": "0"})
    out = three_ways("emulated, no device", args, [args.rzstart], no_gpu, 2,
                     "redzone: the CUDA driver did not start (cuInit: CUDA_ERROR_NO_DEVICE): nothing was checked",
                     EMU_OWNERS, ["rzstart: cuInit: CUDA_ERROR_NO_DEVICE"])
    loaded_driver("emulated, no device", out, driver)
    three_ways("emulated, a runtime refusing the driver", args, [args.rzstart, "--like-runtime", "14000"],
               base_env(libdir, {}), 35,
               "redzone: the CUDA driver did not start (cuInit was never called; the driver is CUDA 13.0, older "
               "than the CUDA 14.0 entry points the program asked for: to the CUDA runtime an insufficient "
               "driver): nothing was checked", None, ["insufficient driver"])
    three_ways("emulated, a driver that starts", args, [args.rzstart], base_env(libdir, {}), 0, None,
               EMU_OWNERS, ["rzstart: cuInit: CUDA_SUCCESS"])
    bisect(args, "emulated, no device", [args.rzstart], no_gpu, "cuInit: CUDA_ERROR_NO_DEVICE")


def real(args):
    folder = args.real
    why = os.path.join(folder, "UNAVAILABLE")
    libdir = os.path.join(folder, "usr/lib/x86_64-linux-gnu/nvidia/current")
    if os.path.exists(why):
        with open(why) as f:
            reason = f.read().strip()
        if os.environ.get("CI") == "true":
            print(f"FAIL {reason}; under CI the NVIDIA driver must be tested (docs/testing.md)")
            return 1
        print(f"real_driver_no_gpu: skipped: {reason}")
        return 77
    if not os.path.exists(os.path.join(libdir, "libcuda.so.1")):
        print(f"FAIL no NVIDIA driver unpacked in {folder}: run scripts/real-driver {os.path.dirname(folder)} "
              "(scripts/test does)")
        return 1
    if os.path.exists("/dev/nvidia0"):
        print("real_driver_no_gpu: skipped: a GPU is here (/dev/nvidia0); this test is the machine without one")
        return 77
    driver = os.path.realpath(os.path.join(libdir, "libcuda.so.1"))
    # As root the driver would create /dev/nvidiactl (mknod) looking for its kernel module: the runs may not
    # change the machine, so they go without CAP_MKNOD (the driver's answer is the same).
    prefix = ["setpriv", "--bounding-set", "-mknod", "--inh-caps", "-mknod"] if os.geteuid() == 0 else []
    env = base_env(libdir, {})
    no_device = "redzone: the CUDA driver did not start (cuInit: CUDA_ERROR_NO_DEVICE): nothing was checked"
    stdout_has = ["rzstart: cuDriverGetVersion: CUDA_SUCCESS, 12020",
                  "rzstart: cuInit: CUDA_ERROR_NO_DEVICE",
                  # the real driver's answers, passed on: an unknown name is CUDA_SUCCESS with the status
                  # CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND (1) and no pointer; an unknown export table id
                  # CUDA_ERROR_INVALID_VALUE
                  "rzstart: cuGetProcAddress_v2(cuNoSuchEntryPoint, 12000): CUDA_SUCCESS, status 1, NULL",
                  "rzstart: dlsym(cuNoSuchEntryPoint): NULL",
                  "rzstart: cuGetExportTable(unknown id): CUDA_ERROR_INVALID_VALUE",
                  "rzstart: looked-up cuGetExportTable(unknown id): CUDA_ERROR_INVALID_VALUE"]
    out = three_ways("NVIDIA driver, driver API", args, prefix + [args.rzstart], env, 2, no_device,
                     REAL_OWNERS, stdout_has)
    loaded_driver("NVIDIA driver, driver API", out, driver)
    bisect(args, "NVIDIA driver, driver API", prefix + [args.rzstart], env, "cuInit: CUDA_ERROR_NO_DEVICE")
    if args.no_nvcc:
        print("real_driver_no_gpu: the CUDA-runtime program is not checked: nvcc was not found at configure time")
    else:
        refused = ("redzone: the CUDA driver did not start (cuInit was never called; the driver is CUDA 12.2, "
                   "older than the CUDA 13.0 entry points the program asked for: to the CUDA runtime an "
                   "insufficient driver): nothing was checked")
        for kind, prog in (("static", args.rt_static), ("shared", args.rt_shared)):
            label = f"NVIDIA driver, CUDA runtime ({kind} cudart)"
            out = three_ways(label, args, prefix + [prog], env, 35, refused, None,
                             ["rzstart_rt: cudaMalloc: cudaErrorInsufficientDriver"])
            loaded_driver(label + " rzstart_rt", out, driver)
        bisect(args, "NVIDIA driver, CUDA runtime", prefix + [args.rt_static], env,
               "cuInit was never called; the driver is CUDA 12.2")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--redzone", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--rzstart", required=True)
    ap.add_argument("--emulated")
    ap.add_argument("--real")
    ap.add_argument("--rt-static")
    ap.add_argument("--rt-shared")
    ap.add_argument("--no-nvcc", action="store_true")
    args = ap.parse_args()
    rc = real(args) if args.real else emulated(args)
    if rc:
        return rc
    if FAILED:
        print(f"driver_start: {len(FAILED)} checks failed")
        return 1
    print("driver_start: all checks held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
