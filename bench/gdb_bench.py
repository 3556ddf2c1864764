"""gdb side of bench/run: times of redzone scan (agent method, and memory method: what cuda-gdb uses),
list --limit 50 and a full list, for N zones.
Run as: gdb -nx -batch -x bench/gdb_bench.py (environment: RZ_GDB_PLUGIN, RZ_GDBPROG, RZ_BENCH_SIZES)."""
import os
import time

import gdb

PLUGIN = os.environ["RZ_GDB_PLUGIN"]
PROG = os.environ["RZ_GDBPROG"]
SIZES = [int(n) for n in os.environ.get("RZ_BENCH_SIZES", "1000,100000").split(",")]


def ex(cmd):
    return gdb.execute(cmd, to_string=True)


def best(cmd, reps=3, clock=time.perf_counter):
    times = []
    for _ in range(reps):
        t0 = clock()
        out = ex(cmd)
        times.append((clock() - t0) * 1e3)
    return min(times), out


ex("set pagination off")
ex("set confirm off")
ex(f"source {PLUGIN}")
ex("set redzone emulated-device on")
ex(f"file {PROG}")
ex("break stop_here")
for n in SIZES:
    gdb.execute(f"run many {n}", to_string=True)
    cuda = "CUDA Debugger" in ex("show version")
    if not cuda:  # cuda-gdb cannot resume one thread alone: no agent method there
        ex("set redzone method agent")
        scan_ms, out = best("redzone scan")
        assert f"redzone scan: {n} zones checked" in out, out
    ex("set redzone method memory")
    mem_ms, out = best("redzone scan")
    assert f"redzone scan: {n} zones checked" in out, out
    mem_cpu_ms, out = best("redzone scan", clock=time.process_time)  # the debugger's CPU: a loaded machine's
    assert f"redzone scan: {n} zones checked" in out, out              # wall time is not the method's
    ex("set redzone method auto")
    limited_ms, out = best("redzone list --limit 50")
    assert f"{n} zone(s) (showing 50" in out, out
    tail_ms, out = best(f"redzone list --from {n - 1000} --limit 50")
    assert "1000 zone(s) (showing 50" in out, out
    full_ms, out = best("redzone list --limit 0", reps=1)
    assert f"{n} zone(s)\n" in out, out[-200:]
    who = "cuda-gdb" if cuda else "gdb"
    if not cuda:
        print(f"{'gdb ms, redzone scan':34s} {n:9d} {scan_ms:12.1f} {'-':>12s} {'':9s}  {'<= 100 ms' if n >= 100000 else ''}")
    print(f"{who + ' ms, redzone scan (memory)':34s} {n:9d} {mem_ms:12.1f} {'-':>12s} {'':9s}")
    print(f"{who + ' CPU ms, scan (memory)':34s} {n:9d} {mem_cpu_ms:12.1f} {'-':>12s} {'':9s}  "
          f"{'<= 1000 ms, linear' if n >= 1000000 else 'linear'}")
    print(f"{who + ' ms, redzone list --limit 50':34s} {n:9d} {limited_ms:12.1f} {'-':>12s} {'':9s}  flat in N")
    print(f"{who + ' ms, list --from N-1000':34s} {n:9d} {tail_ms:12.1f} {'-':>12s} {'':9s}  flat in N")
    print(f"{who + ' ms, redzone list (all)':34s} {n:9d} {full_ms:12.1f} {'-':>12s} {'':9s}  {'<= 1000 ms' if n >= 100000 else ''}")
    ex("kill")
