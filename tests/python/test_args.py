"""The gdb plugin's pure helpers (no gdb needed)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "gdb"))
from redzone_gdb import args  # noqa: E402
from redzone_gdb.args import UsageError  # noqa: E402


def test_list_defaults_and_values():
    o = args.parse_list([])
    assert o == {"--violated": False, "--json": False, "--stacks": False, "--from": None, "--to": None,
                 "--limit": None}
    o = args.parse_list(["--violated", "--from", "3", "--to", "9", "--limit", "0", "--json", "--stacks"])
    assert o["--violated"] and o["--json"] and o["--stacks"]
    assert (o["--from"], o["--to"], o["--limit"]) == (3, 9, 0)


@pytest.mark.parametrize("argv, fragment", [
    (["--bogus"], "unknown option"), (["x"], "unexpected argument"), (["--from"], "needs a value"),
    (["--limit", "-1"], "non-negative"), (["--to", "1.5"], "non-negative"), (["--from", "4", "--to", "3"], "after"),
])
def test_list_rejects(argv, fragment):
    with pytest.raises(UsageError, match=fragment):
        args.parse_list(argv)


def test_poison_window():
    assert args.parse_poison(["$lo", "$lo+1"]) == ("$lo", "$lo+1")
    assert args.check_window(2, 2) == (2, 2)
    for bad in ([], ["1"], ["1", "2", "3"]):
        with pytest.raises(UsageError, match="exactly two"):
            args.parse_poison(bad)
    with pytest.raises(UsageError, match="greater"):
        args.check_window(3, 2)
    with pytest.raises(UsageError, match="negative"):
        args.check_window(-1, 2)


def test_autoscan_values():
    assert args.parse_autoscan("on") == "on" and args.parse_autoscan("off") == "off"
    assert args.parse_autoscan("2, 5") == frozenset({2, 5})
    assert args.autoscan_text(frozenset({5, 2})) == "2,5"
    for bad in ("", "0", "1,,2", "sometimes", "-1"):
        with pytest.raises(UsageError):
            args.parse_autoscan(bad)


def test_env_values():
    assert args.check_env_value("bytes", "64") == "64"
    assert args.check_env_value("fill", "255") == "255"
    assert args.check_env_value("scan", "free,sync") == "free,sync"
    assert args.check_env_value("bytes", "") is None
    assert args.check_env_value("stacks", "32") == "32" and args.check_env_value("stacks", "0") == "0"
    assert args.ENV_VARS["stacks"] == "METRALE_REDZONE_STACKS"
    for name, value in (("fill", "256"), ("bytes", "-1"), ("scan", "none,free"), ("scan", "later"),
                        ("stacks", "33"), ("stacks", "x")):
        with pytest.raises(UsageError):
            args.check_env_value(name, value)


def test_exec_wrapper():
    w = args.wrapper_command("/p/rz-exec", "/p/libredzone.so", "/p/emu",
                             {"bytes": None, "fill": "7", "min-idx": None, "trace-idx": None, "scan": None})
    assert w == ("/p/rz-exec --preload /p/libredzone.so --default METRALE_REDZONE=64 "
                 "--default METRALE_REDZONE_FILL=7 --path-prefix /p/emu --")
    w = args.wrapper_command("/p/rz-exec", "/p/lib redzone.so", None, {"bytes": "32"})
    assert "--preload '/p/lib redzone.so'" in w and "METRALE_REDZONE=32" in w and "--path-prefix" not in w
