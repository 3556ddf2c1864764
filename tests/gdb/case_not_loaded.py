import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# A program running without the library: every command says so clearly.
ex("set pagination off")
ex(f"source {PLUGIN}")
ex(f"file {PROG}")
ex("set exec-wrapper env LD_LIBRARY_PATH=" + os.environ["RZ_EMU_DIR"])
ex("break main")
go("run overrun")
for cmd in ("redzone list", "redzone stats", "redzone scan", "redzone poison 0 1"):
    expect_error(cmd, "libredzone is not loaded")
check("library: not loaded" in ex("redzone status"), "status")
done()
