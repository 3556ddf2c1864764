import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *


# The stopped thread's vector registers (loaded by AVX2 code in the program) survive scans and poisons:
# the agent runs on its own thread and gdb never runs code on the user's.
ex("set environment GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX512VL,-AVX512F")  # AVX2 code paths in glibc
start()
METHOD = use_agent()  # the agent method where the debugger can serve it
before = ex("p/x $ymm0.v8_int32")
check("0x11111111, 0x22222222, 0x33333333, 0x44444444, 0x55555555, 0x66666666, 0x77777777, 0xbadcafe" in before,
      f"the program loaded the pattern: {before}")
ex("redzone scan")
ex("redzone poison 0 1")
ex("redzone unpoison")
ex("redzone list")
after = ex("p/x $ymm0.v8_int32")
strip = lambda t: t.split("=", 1)[1]  # drop the value-history number
check(strip(before) == strip(after), f"{before} -> {after}")
done()
