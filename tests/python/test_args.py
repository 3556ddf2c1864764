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


RZ_OPTIONS = os.environ.get("RZ_OPTIONS", "")
needs_rz_options = pytest.mark.skipif(not os.access(RZ_OPTIONS, os.X_OK),
                                      reason="RZ_OPTIONS (the built rz-options) is not set: run through ctest")


def test_env_values_go_through_the_library_check():
    seen = []

    def fake(variable, value):
        seen.append((variable, value))
        return "redzone: warning: METRALE_REDZONE_FILL=\"256\" is not a byte" if value == "256" else None

    assert args.check_env_value("fill", "255", fake) == "255"
    assert args.check_env_value("bytes", "", fake) is None  # the library's default: nothing to check
    assert seen == [("METRALE_REDZONE_FILL", "255")]
    with pytest.raises(UsageError, match="^METRALE_REDZONE_FILL=\"256\" is not a byte \\(the library would not take it\\)$"):
        args.check_env_value("fill", "256", fake)
    for bad in ("6\n4", "a\0"):
        with pytest.raises(UsageError):
            args.check_env_value("bytes", bad, fake)
    with pytest.raises(UsageError):
        args.check_env_value("nosuch", "1", fake)


@needs_rz_options
def test_env_values_by_the_library_itself():
    check = lambda var, value: args.library_check(RZ_OPTIONS, var, value)  # noqa: E731
    for name, value in (("bytes", "64"), ("fill", "255"), ("scan", "free,sync"), ("stacks", "32"), ("stacks", "0"),
                        ("min-idx", "7"), ("trace-idx", "3")):
        assert args.check_env_value(name, value, check) == value
    for name, value in (("fill", "256"), ("bytes", "-1"), ("bytes", "99999999999999999999999"), ("scan", "later"),
                        ("stacks", "33"), ("stacks", "x"), ("min-idx", "99999999999999999999"), ("min-idx", "1.5")):
        with pytest.raises(UsageError):
            args.check_env_value(name, value, check)


def test_seconds():
    assert args.parse_seconds("1.5") == 1.5 and args.parse_seconds(" 2 ") == 2.0
    for bad in ("0", "-1", "abc", "", "nan", "inf", "3601", "1e400"):
        with pytest.raises(UsageError):
            args.parse_seconds(bad)


def test_counts_below_two_to_the_64():
    assert args.parse_list(["--to", str((1 << 64) - 1)])["--to"] == (1 << 64) - 1
    with pytest.raises(UsageError):
        args.parse_list(["--to", str(1 << 64)])


def test_exec_wrapper():
    w = args.wrapper_command("/p/rz-exec", "/p/libredzone.so", "/p/emu",
                             {"bytes": None, "fill": "7", "min-idx": None, "trace-idx": None, "scan": None})
    assert w == ("/p/rz-exec --preload /p/libredzone.so --nvtx /p/libredzone.so --default METRALE_REDZONE=64 "
                 "--default METRALE_REDZONE_FILL=7 --path-prefix /p/emu --")
    w = args.wrapper_command("/p/rz-exec", "/p/lib redzone.so", None, {"bytes": "32"})
    assert "--preload '/p/lib redzone.so'" in w and "METRALE_REDZONE=32" in w and "--path-prefix" not in w


def test_exec_wrapper_folds_a_users_env_wrapper():
    w = args.wrapper_command("/p/rz-exec", "/p/libredzone.so", None, {}, "env MYVAR=1 'B=two words'")
    assert w.endswith("--set MYVAR=1 --set 'B=two words' --")
    # composing again takes back exactly the user's part, never nesting redzone's
    assert args.users_part(w, "/p/rz-exec") == "env MYVAR=1 'B=two words'"
    assert args.users_part("", "/p/rz-exec") == "" and args.users_part("valgrind -q", "/p/rz-exec") == "valgrind -q"
    assert args.env_assignments("valgrind -q") is None and args.env_assignments("env -i X=1") is None
    assert args.env_assignments("/usr/bin/env A=1") == ["A=1"] and args.env_assignments("") == []
