"""Property tests (hypothesis) for the gdb plugin's argument helpers: for any input they either return a
well-formed value or raise UsageError with a message, never anything else."""
import os
import sys

import pytest
from hypothesis import given, settings, strategies as st

# REDZONE_LONG=1 (scripts/test --long): fifty times the examples of the CI run.
SCALE = 50 if os.environ.get("REDZONE_LONG") == "1" else 1

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "gdb"))
from redzone_gdb import args  # noqa: E402
from redzone_gdb.args import UsageError  # noqa: E402

WORDS = st.one_of(st.sampled_from(["--violated", "--json", "--stacks", "--from", "--to", "--limit", "0", "1",
                                   "-1", "99999999999999999999999", "x", ""]), st.text(max_size=12))


@settings(max_examples=400 * SCALE, deadline=None)
@given(st.lists(WORDS, max_size=8))
def test_parse_list_total(argv):
    try:
        o = args.parse_list(argv)
    except UsageError as e:
        assert str(e)
        return
    assert set(o) == {"--violated", "--json", "--stacks", "--from", "--to", "--limit"}
    for k in ("--from", "--to", "--limit"):
        assert o[k] is None or (isinstance(o[k], int) and o[k] >= 0)
    if o["--from"] is not None and o["--to"] is not None:
        assert o["--from"] <= o["--to"]


@settings(max_examples=400 * SCALE, deadline=None)
@given(st.sampled_from(sorted(args.ENV_VARS)), st.text(max_size=24))
def test_env_values_total(name, value):
    try:
        v = args.check_env_value(name, value, lambda var, val: None if val.isdigit() else "not a number")
    except UsageError as e:
        assert str(e)
        return
    assert v is None or (isinstance(v, str) and v)


@settings(max_examples=300 * SCALE, deadline=None)
@given(st.text(max_size=16))
def test_autoscan_total(value):
    try:
        v = args.parse_autoscan(value)
    except UsageError as e:
        assert str(e)
        return
    assert v in ("on", "off") or (isinstance(v, frozenset) and all(n > 0 for n in v))


@settings(max_examples=300 * SCALE, deadline=None)
@given(st.lists(st.text(max_size=8), max_size=4))
def test_poison_total(argv):
    try:
        lo, hi = args.parse_poison(argv)
    except UsageError as e:
        assert str(e)
        return
    assert len(argv) == 2 and (lo, hi) == tuple(argv)
