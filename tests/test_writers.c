/*
 * Transparency of the driver API (issue 18 items 2 and 9): tests/programs/rzwriters.c calls the entry points
 * the emulated driver gained for the purpose (2D/3D copies, stream waits on events, mapped host memory, IPC
 * handles) and cuPointerGetAttributes, with and without libredzone.so preloaded: the same result codes and
 * bytes both ways, and redzone's wrappers of the device writers are the ones the calls went through.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spawn.h"

#define PRELOAD "LD_PRELOAD=" LIBREDZONE
#define EMU "LD_LIBRARY_PATH=" EMU_DIR

static char out[1 << 16], bare[1 << 16];

/* The program's own lines (rzwriters: ...) of a run, in order. */
#define program_lines(text, dst, cap) spawn_lines_with_prefix("rzwriters: ", text, dst, cap)

/* Runs mode without redzone, then with it (extra: one more variable), the latter with the emulated driver's
 * call trace written to trace (NULL: none); the program's lines must be identical. */
static void same_as_without(const char *mode, const char *extra, const char *trace) {
    char trace_env[256] = "CUDA_EMU_STATS=0";
    if (trace) {
        snprintf(trace_env, sizeof trace_env, "CUDA_EMU_TRACE=%s", trace);
        unlink(trace);
    }
    const char *env_bare[] = {EMU, NULL};
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", trace_env, extra, NULL};
    const char *argv[] = {RZWRITERS, mode, NULL};
    cr_assert_eq(spawn_capture(env_bare, argv, bare, sizeof bare), 0, "%s", bare);
    cr_assert_eq(spawn_capture(env, argv, out, sizeof out), 0, "%s", out);
    static char a[1 << 16], b[1 << 16];
    program_lines(bare, a, sizeof a);
    program_lines(out, b, sizeof b);
    cr_assert(a[0], "no program output: %s", bare);
    cr_assert_str_eq(b, a, "with redzone:\n%s\nwithout:\n%s", out, bare);
    cr_assert(!strstr(out, "REDZONE VIOLATION"), "%s", out);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    cr_assert(f, "no trace at %s", path);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    unlink(path);
    return buf;
}

/* Item 9: every 2D/3D copy entry point, its result codes and the bytes it moved, the same through redzone;
 * each device write went through redzone's wrapper of the entry point the program called. */
Test(writers, copies_2d_3d_as_without) {
    char trace[64];
    snprintf(trace, sizeof trace, "/tmp/rz-writers-%ld.trace", (long)getpid());
    same_as_without("copies", NULL, trace);
    const char *t = slurp(trace);
    static const char *const wrapped[] = {"cuMemcpy2D_v2",      "cuMemcpy2DUnaligned_v2", "cuMemcpy2DAsync_v2",
                                          "cuMemcpy2D_v2_ptds", "cuMemcpy2DUnaligned_v2_ptds",
                                          "cuMemcpy2DAsync_v2_ptsz", "cuMemcpy3D_v2", "cuMemcpy3D_v2_ptds",
                                          "cuMemcpy3DAsync_v2", "cuMemcpy3DAsync_v2_ptsz"};
    for (size_t i = 0; i < sizeof wrapped / sizeof wrapped[0]; i++) {
        char want[160];
        snprintf(want, sizeof want, " via=%s by=%s:%s\n", wrapped[i], strrchr(LIBREDZONE, '/') + 1, wrapped[i]);
        cr_assert(strstr(t, want), "no device write through redzone's %s:\n%s", wrapped[i], t);
    }
    cr_assert_eq(count(bare, ") = 0\n"), 21, "%s", bare); /* every valid call succeeded... */
    cr_assert(strstr(bare, "rzwriters: cuMemcpy2D_v2(&c) = 1\nrzwriters: cuMemcpy2DAsync_v2(&c, s) = 801\n"
                           "rzwriters: cuMemcpy2D_v2(&c) = 1\n"),
              "%s", bare); /* ...and the three bad ones were refused */
    /* the bytes each buffer should hold, computed apart from the driver (a model of the copies above) */
    cr_assert(strstr(bare, "rzwriters: checksum of buffer 0: b21b70a4\n"), "%s", bare);
    cr_assert(strstr(bare, "rzwriters: checksum of buffer 1: 36c253c8\n"), "%s", bare);
    cr_assert(strstr(bare, "rzwriters: checksum of buffer 2: 5c9a7fd9\n"), "%s", bare);
}

/* With front bands the program's pointers are inside the driver's blocks: still the same codes and bytes. */
Test(writers, copies_2d_3d_with_a_front_band) {
    same_as_without("copies", "METRALE_REDZONE_FRONT=256", NULL);
    cr_assert(strstr(bare, "rzwriters: checksum of buffer 2: 5c9a7fd9\n"), "%s", bare);
}

/* Item 9: stream waits on events and mapped pinned memory, the same through redzone. */
Test(writers, stream_waits_and_mapped_host_memory_as_without) {
    same_as_without("order", NULL, NULL);
    cr_assert(strstr(bare, "rzwriters: bytes 0, 499, 500, 999: 02 02 01 01;"), "%s", bare);
    cr_assert(strstr(bare, "rzwriters: device pointer is the host pointer: 1\n"), "%s", bare);
    cr_assert(strstr(bare, "rzwriters: cuStreamWaitEvent(s2, e, 1) = 1\n"), "%s", bare);
    cr_assert(strstr(bare, "rzwriters: cuMemHostAlloc((void **)&plain, 4096, 0x40) = 1\n"), "%s", bare);
}

/* Item 9: IPC handles (within one process on the emulated driver), the same through redzone. */
Test(writers, ipc_handles_as_without) {
    same_as_without("ipc", NULL, NULL);
    cr_assert(strstr(bare, "rzwriters: opened at the allocation: 1\n"), "%s", bare);
    cr_assert(strstr(bare, "rzwriters: cuIpcCloseMemHandle(p) = 0\nrzwriters: cuIpcCloseMemHandle(p) = 0\n"
                           "rzwriters: cuIpcCloseMemHandle(p) = 1\n"),
              "%s", bare);
    cr_assert(strstr(bare, "rzwriters: cuIpcGetMemHandle(&handle, a + 16) = 1\n"), "%s", bare);
}

/* With front bands the handle is made for the padded block and opened at the program's pointer again
 * (docs/failure-modes.md, IPC handles): the same codes and bytes as without redzone, an inner pointer gets
 * the driver's own error, and the exporter says once that an importer must run under redzone too. */
Test(writers, ipc_handles_with_a_front_band) {
    same_as_without("ipc", "METRALE_REDZONE_FRONT=256", NULL);
    cr_assert(strstr(bare, "rzwriters: cuIpcGetMemHandle(&handle, a) = 0\n"), "%s", bare);
    cr_assert(strstr(bare, "rzwriters: cuIpcGetMemHandle(&handle, a + 16) = 1\n"), "%s", bare);
    cr_assert(strstr(bare, "rzwriters: opened at the allocation: 1\n"), "%s", bare);
    cr_assert(strstr(bare, "rzwriters: written through the opened pointer, read at the allocation: 8421542c "
                           "(expected 8421542c)\n"),
              "%s", bare);
    cr_assert(strstr(bare, "rzwriters: cuIpcCloseMemHandle(p + 16) = 1\n"), "%s", bare);
    cr_assert(strstr(bare, "rzwriters: opened through cuGetProcAddress at the allocation: 1\n"), "%s", bare);
    cr_assert_eq(count(out, "redzone: warning: cuIpcGetMemHandle of alloc#"), 1, "%s", out);
    cr_assert(strstr(out, "a process that opens it gets the program's pointer only if it runs under redzone too"),
              "%s", out);
}

/* Item 2: cuPointerGetAttributes answers for the program's range; band bytes get what the driver gives for
 * an address no allocation holds (success, default values). */
Test(writers, pointer_attributes_plural_answer_for_the_program_range) {
    same_as_without("attrs", NULL, NULL);
    cr_assert(strstr(bare, "rzwriters: cuPointerGetAttributes(p +10) = 0: owner is the context 1, null 0; range "
                           "start - p 0; range size 1000; ordinal 0\n"),
              "%s", bare);
    cr_assert(strstr(bare, "rzwriters: cuPointerGetAttributes(p +1000) = 0: owner is the context 0, null 1; range "
                           "start - p -99999; range size 0; ordinal -2\n"),
              "%s", bare);
    cr_assert(strstr(bare, "rzwriters: range size past the end through cuGetProcAddress: 0\n"), "%s", bare);
}

Test(writers, pointer_attributes_plural_with_a_front_band) {
    same_as_without("attrs", "METRALE_REDZONE_FRONT=256", NULL);
    cr_assert(strstr(bare, "rzwriters: cuPointerGetAttributes(p -256) = 0: owner is the context 0, null 1;"), "%s",
              bare);
}
