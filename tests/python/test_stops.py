"""What the plugin says at a `redzone break on` stop (redzone_gdb/stops.py): pure text, no gdb."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "gdb"))
from redzone_gdb import stops  # noqa: E402


def test_hooks_are_the_library_symbols_and_their_arguments():
    # The names in native/include/redzone.h: a breakpoint per hook, the record read by its parameter's name.
    header = open(os.path.join(os.path.dirname(__file__), "..", "..", "native", "include", "redzone.h")).read()
    for hook in stops.HOOKS:
        assert f"RZ_API void {hook.symbol}(const rz_{hook.record}_t *{hook.argument});" in header
    assert [h.kind for h in stops.HOOKS] == ["violation", "refusal"]


def test_violation_sentence_unchanged():
    assert stops.stop_sentence("violation", (2, "main", " at gdbprog.c:160")) == (
        "redzone: stopped where the library found this violation; frame #2, main at gdbprog.c:160, the program's "
        "call that led to it, is selected (`bt` shows the whole host stack, `frame 0` the library's report call)")
    assert stops.stop_sentence("violation") == (
        "redzone: stopped where the library found this violation; `bt` shows the host stack")


def test_refusal_sentence_names_copy_or_memset():
    copy = stops.stop_sentence("refusal", (3, "read_back", " at gdbprog.c:50"), how=0)
    assert copy.startswith("redzone: stopped at a refused copy: it runs outside its buffer, so nothing is copied "
                           "and the call returns CUDA_ERROR_INVALID_VALUE")
    assert "frame #3, read_back at gdbprog.c:50, the program's call, is selected" in copy
    assert "`frame 0` the library's hook" in copy
    assert stops.stop_sentence("refusal", None, how=1).startswith("redzone: stopped at a refused copy:")
    memset = stops.stop_sentence("refusal", None, how=2)
    assert memset.startswith("redzone: stopped at a refused memset: it runs outside its buffer, so nothing is set")
    assert memset.endswith("; `bt` shows the host stack")
    assert "refused copy, memset or free" in stops.stop_sentence("refusal", (1, None, ""))
    assert "frame #1, ??, the program's call" in stops.stop_sentence("refusal", (1, None, ""), how=0)


def test_refusal_sentence_for_a_free_into_a_front_band():
    free = stops.stop_sentence("refusal", (1, "main", " at rzhook.c:60"), how=3)
    assert free.startswith("redzone: stopped at a refused free: its pointer is in a front band, before the buffer's "
                           "start, so nothing is freed and the call returns CUDA_ERROR_INVALID_VALUE, as without "
                           "redzone, when the program goes on; frame #1, main at rzhook.c:60, the program's call")


def test_only_a_violation_stop_holds_the_registry():
    assert stops.holds_registry("violation")
    assert not stops.holds_registry("refusal")
