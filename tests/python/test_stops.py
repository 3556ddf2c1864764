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


def test_the_check_is_told_by_the_stopped_threads_frames():
    free = [("judge.c", "__redzone_violation"), ("judge.c", "judge_with"), ("free_check.c", "judge_freed"),
            ("hooks.c", "cuMemFree_v2"), ("gdbprog.c", "main")]
    assert stops.check_of(free) == "free"
    assert stops.check_of([("judge.c", "x"), ("launch_attribution.c", "rz__attrib_judge_locked"),
                           ("launch_check.c", "rz__launch_post")]) == "launch"
    assert stops.check_of([(None, "__redzone_violation"), (None, "exit_scan"), (None, "__run_exit_handlers")]) == "exit"
    assert stops.check_of([("judge.c", "__redzone_violation"), ("gdbprog.c", "main")]) is None
    assert set(stops.SCANS) <= set(stops.CHECK_WORDS)


def test_the_program_frame_is_neither_redzone_the_driver_nor_the_c_runtime():
    assert stops.is_program_frame(None, "main")
    assert stops.is_program_frame("/opt/app/libmine.so", "step")
    assert not stops.is_program_frame("/usr/lib/libredzone.so.0", "cuMemFree_v2")
    assert not stops.is_program_frame("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "cuLaunchKernel")
    assert not stops.is_program_frame("/lib/x86_64-linux-gnu/libc.so.6", "__run_exit_handlers")
    assert not stops.is_program_frame(None, "_start")


def test_sentences_name_the_check_and_the_exit_scan():
    assert stops.stop_sentence("violation", (1, "fill", " at rzlaunch.c:88"), check="launch").startswith(
        "redzone: stopped where the library's launch check (after a kernel launch) found this violation; frame #1,")
    exit_none = stops.stop_sentence("violation", None, check="exit")
    assert exit_none.startswith("redzone: stopped at the exit scan, which found this violation as the program ends")
    assert "so none is selected" in exit_none and "frame #" not in exit_none
    assert "frame #4, main at p.c:9, the program's last call (to exit), is selected" in stops.stop_sentence(
        "violation", (4, "main", " at p.c:9"), check="exit")


def test_bad_free_after_its_context_ended_is_named():
    assert stops.refused_call(8) == "free"
    assert "stopped at a bad free (a free after its context ended)" in stops.stop_sentence("refusal", None, 8)
