"""Every `--json` command prints one JSON document, errors included, and still fails as a command (so a
script can tell): the document is the error's text. `redzone scan --json` gives the zones checked."""
import json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *


def json_error(cmd, *fragments):
    text = expect_error(cmd, *fragments)  # it fails as a command
    try:
        doc = json.loads(text)
    except ValueError:
        raise AssertionError(f"{cmd!r}: the error is not one JSON document: {text!r}")
    check(doc["command"] == " ".join(cmd.split()[:2]) and doc["error"], f"{cmd!r}: {doc}")
    return doc


prepare()
# No process yet: each says so, in JSON.
for cmd in ("redzone scan --json", "redzone list --json", "redzone violations --json", "redzone stats --json"):
    doc = json_error(cmd)
    check(doc["error"], f"{cmd}: {doc}")
# A usage error with --json: JSON too.
doc = json_error("redzone list --json --limit x")
check("--limit" in doc["error"], doc)
ex("break stop_here")
go("run overrun")
doc = json.loads(ex("redzone scan --json"))
check(doc["checked"] == 3 and doc["violated"] == 1 and doc["error"] is None and len(doc["violations"]) == 1 and
      doc["violations"][0].startswith("REDZONE VIOLATION alloc#1 user_bytes=1000"), doc)
# At a violation stop the library's own check holds the registry: the scan is refused, in JSON, with advice.
ex("up")
ex("set {unsigned char}(p[1] + 1000) = 0x77")
ex("down")
ex("redzone break on")
go("continue")
check(gdb.newest_frame().name() == "__redzone_violation", "at the violation stop")
doc = json_error("redzone scan --json", "RZ_EBUSY")
check("`next` or `finish` returns to the program" in doc["error"], doc)
check(json.loads(ex("redzone stats --json"))["violations"] == 2, "a working --json command still prints its JSON")
ex("redzone break off")
done()
