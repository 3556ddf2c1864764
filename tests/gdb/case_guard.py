import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# A guard-page allocation (METRALE_REDZONE_GUARD): an emulated kernel that writes the first byte past the
# buffer's mapped end faults right there, and gdb stops in the kernel, on the faulting line.
ex("set environment METRALE_REDZONE_GUARD idx:0")
start(args="guard write", bp=None, prog=os.environ["RZ_RZPROG"])
check(int(gdb.parse_and_eval("$_siginfo.si_signo")) == 11, "stopped by SIGSEGV")
addr = int(gdb.parse_and_eval("$_siginfo._sifields._sigfault.si_addr"))
bt = ex("bt 1")
check("cuda_emu_kernel_touch" in bt and "rzprog.c" in bt, bt)
frame = ex("frame")
check("p[CUDA_EMU_PARAM(size_t, 1)] = 0x77" in frame, frame)
out = ex("redzone list")
check("guard-page+band" in out and "      1000" in out, out)
row = next(l for l in out.splitlines() if "guard-page" in l)
ptr = int(row.split()[1], 16)
check(addr == ptr + 1024, f"faulted at {addr:#x}, the first byte past the mapped end {ptr + 1024:#x}")
out = ex("redzone status")
check("guard pages: 1 allocations holding 4194304 bytes" in out and "cap 1073741824" in out, out)
ex("kill")
done()
