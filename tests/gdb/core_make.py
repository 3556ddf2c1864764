import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# Makes the two core files case_core reads: RZ_CORE_DIR/before-scan.core (alloc#1's band overrun, no scan
# yet) and RZ_CORE_DIR/gdbprog.core (after one scan), and the live scan's report in RZ_CORE_DIR/live-scan.
ex("set pagination off")
ex(f"source {PLUGIN}")
make_cores(os.environ["RZ_CORE_DIR"])
done()
