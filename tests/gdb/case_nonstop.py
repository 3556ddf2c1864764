import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# Non-stop mode is refused clearly (the agent needs all-stop); reads still work.
ex("set non-stop on")
start()
expect_error("redzone scan", "non-stop")
expect_error("redzone poison 0 1", "non-stop")
check("3 zone(s)" in ex("redzone list"), "reads work in non-stop mode")
done()
