/*
 * Transparency of the driver API (issue 18): with libredzone.so preloaded, tests/programs/rztransp.c sees
 * the same result codes and data as without it; the only additions are redzone's reports.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spawn.h"

#define PRELOAD "LD_PRELOAD=" LIBREDZONE
#define EMU "LD_LIBRARY_PATH=" EMU_DIR

static char out[1 << 16], bare[1 << 16];

static int run(const char *const *env, const char *const *argv, char *buf) {
    return spawn_capture(env, argv, buf, sizeof out);
}

/* The program's own lines (rztransp: ...) of a run, in order. */
#define program_lines(text, dst, cap) spawn_lines_with_prefix("rztransp: ", text, dst, cap)

static size_t count_of(const char *text, const char *what) {
    size_t n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

/* Runs mode with and without redzone (extra: one more variable for the redzone run); the program's lines
 * must be identical. */
static void same_as_without(const char *mode, const char *extra) {
    const char *env_bare[] = {EMU, NULL};
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", extra, NULL};
    const char *argv[] = {RZTRANSP, mode, NULL};
    cr_assert_eq(run(env_bare, argv, bare), 0, "%s", bare);
    cr_assert_eq(run(env, argv, out), 0, "%s", out);
    static char a[1 << 16], b[1 << 16];
    program_lines(bare, a, sizeof a);
    program_lines(out, b, sizeof b);
    cr_assert(a[0], "no program output: %s", bare);
    cr_assert_str_eq(b, a, "with redzone:\n%s\nwithout:\n%s", out, bare);
}

/* Item 5: a free of a pointer in a front band frees nothing and gets the driver's answer. */
Test(transparency, free_inside_front_band_is_a_bad_free) {
    same_as_without("badfree", "METRALE_REDZONE_FRONT=256");
    cr_assert(strstr(bare, "rztransp: cuMemFree_v2(p - 256) = 1\nrztransp: cuMemFree_v2(p) = 0\n"), "%s", bare);
    cr_assert(strstr(out, ": 256 bytes before the start of alloc#0 (user_bytes=1000), in its front band; nothing "
                          "freed, CUDA_ERROR_INVALID_VALUE returned as without redzone\n"), "%s", out);
    cr_assert(strstr(out, "redzone: bad free of 0x"), "%s", out);
    cr_assert(!strstr(out, "no longer known to the driver"), "the buffer was freed behind the program: %s", out);
}

/* Item 6: a free the driver refuses changes nothing, and one overrun is reported once. */
Test(transparency, refused_free_reports_the_overrun_once) {
    same_as_without("refused", NULL);
    cr_assert(strstr(bare, "rztransp: cuMemFree_v2(p) = 201\nrztransp: cuMemFree_v2(p) = 0\n"), "%s", bare);
    cr_assert_eq(count_of(out, "REDZONE VIOLATION alloc#0 user_bytes=1000 pad=64 : bytes [0..=7] past the end"), 1,
                 "%s", out);
    cr_assert(strstr(out, "; 1 violations in "), "%s", out);
}

/* Item 4: pointer attributes answer for the program's range; band bytes are no allocation's. */
Test(transparency, pointer_attributes_answer_for_the_program_range) {
    same_as_without("attr", NULL);
    cr_assert(strstr(bare, "rztransp: range start - p = 0\n"), "%s", bare);
    cr_assert(strstr(bare, "rztransp: range size = 1000\n"), "%s", bare);
    cr_assert(strstr(bare, "rztransp: owner is the context: 1\n"), "%s", bare);
    cr_assert(strstr(bare, "rztransp: cuPointerGetAttribute(&owner, RZCU_POINTER_ATTRIBUTE_CONTEXT, p + 1000) = 1\n"),
              "%s", bare);
}

Test(transparency, pointer_attributes_with_a_front_band) { same_as_without("attr", "METRALE_REDZONE_FRONT=256"); }

/* Item 9: the emulated driver's cuMemsetD16/D32/D2D*, so redzone's wrappers for them run: the same results and
 * bytes with and without redzone. */
Test(transparency, wide_and_pitched_memsets_as_without) {
    same_as_without("memset", NULL);
    cr_assert(strstr(bare, "rztransp: bytes 0,1,20,23,100,116,131,200,300: 34 12 ef de 77 77 00 cd 04\n"), "%s", bare);
    cr_assert(strstr(bare, "rztransp: checksum 90af66ca\n"), "%s", bare);
}

/* The driver's rules for them, on the emulated driver alone: alignment, pitch, range. */
Test(transparency, emulated_memset_rules) {
    const char *env[] = {EMU, NULL};
    const char *argv[] = {RZTRANSP, "memsetbad", NULL};
    cr_assert_eq(run(env, argv, bare), 0, "%s", bare);
    cr_assert(strstr(bare, "rztransp: cuMemsetD16_v2(p + 1, 1, 4) = 1\nrztransp: cuMemsetD32_v2(p + 2, 1, 4) = 1\n"
                           "rztransp: cuMemsetD2D8_v2(p, 4, 1, 8, 2) = 1\nrztransp: cuMemsetD32_v2(p + 996, 1, 2) = 1\n"
                           "rztransp: cuMemsetD2D32_v2(p, 500, 1, 4, 3) = 1\nrztransp: cuMemsetD16_v2(p, 1, 0) = 0\n"),
              "%s", bare);
}

/* Item 9: the emulated driver's cuMemcpy/cuMemcpyAsync (unified addressing), through redzone's wrappers. */
Test(transparency, unified_copies_as_without) {
    same_as_without("unified", NULL);
    cr_assert(strstr(bare, "rztransp: round trip equal: 1\n"), "%s", bare);
    cr_assert(strstr(bare, "rztransp: host to host equal: 1\n"), "%s", bare);
    cr_assert(!strstr(bare, ") = 1"), "%s", bare);
}

/* Item 3: copies and memsets past the end get the driver's answer without redzone (nothing done, where the
 * band would have let them through), and each is reported; up to the end exactly they do their work. */
Test(transparency, copies_and_memsets_past_the_end_refused_as_without) {
    same_as_without("pastend", NULL);
    cr_assert(strstr(bare, "rztransp: cuMemcpyHtoD_v2(a, h, 1008) = 1\n"), "%s", bare);
    cr_assert(strstr(bare, "rztransp: cuMemcpyDtoH_v2(g, a, 1008) = 1\n"), "%s", bare);
    cr_assert(strstr(bare, "rztransp: cuMemcpyDtoD_v2(b, a, 1001) = 1\n"), "%s", bare);
    cr_assert(strstr(bare, "rztransp: cuMemsetD2D8_v2(a, 100, 0x22, 10, 11) = 1\n"), "%s", bare);
    cr_assert(strstr(bare, "rztransp: last 8 bytes delivered equal: 1\n"), "%s", bare);
    cr_assert(strstr(bare, "rztransp: cuMemsetD2D8_v2(a + 90, 100, 0x44, 10, 10) = 0\nrztransp: cuMemcpy2D_v2(&c2) = 0\n"
                           "rztransp: cuMemcpy3D_v2(&c3) = 0\n"), "up to the end: %s", bare);
    cr_assert(strstr(bare, "rztransp: cuMemcpy2D_v2(&c2) = 1\n"), "%s", bare);
    cr_assert(strstr(bare, "rztransp: cuMemcpy3D_v2(&c3) = 1\n"), "%s", bare);
    cr_assert(strstr(bare, "rztransp: cuMemcpy3DBatchAsync(3, ops, &fail, 0, s) = 1\nrztransp: batch3d failIdx 1\n"
                           "rztransp: cuMemcpy3DBatchAsync_v2(1, ops + 2, 0, s) = 1\n"
                           "rztransp: cuMemcpy3DBatchAsync(3, ops, &fail, 0, s) = 1\nrztransp: batch3d failIdx 0\n"
                           "rztransp: cuMemcpy3DBatchAsync_ptsz(3, ops, &fail, 0, s) = 1\nrztransp: batch3d failIdx 2\n"),
              "%s", bare);
    cr_assert(strstr(bare, "rztransp: cuMemcpy3D_v2(&c3) = 0\nrztransp: cuMemcpy3DBatchAsync_v2_ptsz(3, ops, 0, s) = 0\n"),
              "a 3D batch up to the end: %s", bare);
    const char *reports[] = {
        "redzone: copy past the end of alloc#0: bytes [0..=7] written by cuMemcpyHtoD (user_bytes=1000); nothing "
        "copied, CUDA_ERROR_INVALID_VALUE returned as without redzone\nrztransp: cuMemcpyHtoD_v2(a, h, 1008) = 1\n",
        "redzone: copy past the end of alloc#0: bytes [0..=7] read by cuMemcpyDtoH (user_bytes=1000);",
        "redzone: copy past the end of alloc#0: bytes [0..=0] read by cuMemcpyDtoHAsync (user_bytes=1000);",
        /* both sides of a copy, each reported */
        "redzone: copy past the end of alloc#0: bytes [0..=0] read by cuMemcpyDtoD (user_bytes=1000); nothing copied, "
        "CUDA_ERROR_INVALID_VALUE returned as without redzone\nredzone: copy past the end of alloc#1: bytes [0..=0] "
        "written by cuMemcpyDtoD (user_bytes=1000);",
        "redzone: copy past the end of alloc#1: bytes [0..=99] written by cuMemcpyDtoD (user_bytes=1000);",
        /* a copy that starts where the band would be */
        "redzone: copy past the end of alloc#0: bytes [0..=7] read by cuMemcpyDtoDAsync (user_bytes=1000);",
        "redzone: copy past the end of alloc#0: bytes [0..=9] written by cuMemcpy (user_bytes=1000);",
        "redzone: copy past the end of alloc#0: bytes [0..=3] read by cuMemcpyAsync (user_bytes=1000);",
        "redzone: memset past the end of alloc#0: bytes [0..=0] written by cuMemsetD8 (user_bytes=1000); nothing set, "
        "CUDA_ERROR_INVALID_VALUE returned as without redzone\n",
        "redzone: memset past the end of alloc#0: bytes [0..=1] written by cuMemsetD16 (user_bytes=1000);",
        "redzone: memset past the end of alloc#0: bytes [0..=3] written by cuMemsetD32 (user_bytes=1000);",
        "redzone: memset past the end of alloc#0: bytes [0..=9] written by cuMemsetD2D8 (user_bytes=1000);",
        "redzone: memset past the end of alloc#0: bytes [0..=3] written by cuMemsetD2D32Async (user_bytes=1000);",
        /* pitched copies: the extent of the device side, first row to last */
        "redzone: copy past the end of alloc#0: bytes [0..=9] written by cuMemcpy2D (user_bytes=1000); nothing "
        "copied, CUDA_ERROR_INVALID_VALUE returned as without redzone\nrztransp: cuMemcpy2D_v2(&c2) = 1\n",
        "redzone: copy past the end of alloc#0: bytes [0..=9] written by cuMemcpy2DAsync (user_bytes=1000);",
        "redzone: copy past the end of alloc#0: bytes [0..=9] written by cuMemcpy2DUnaligned (user_bytes=1000);",
        "redzone: copy past the end of alloc#0: bytes [0..=8] read by cuMemcpy3D (user_bytes=1000);",
        /* a batch: its first bad copy, and failIdx says which */
        "redzone: copy past the end of alloc#1: bytes [0..=99] written by cuMemcpyBatchAsync (user_bytes=1000); "
        "nothing copied, CUDA_ERROR_INVALID_VALUE returned as without redzone\nrztransp: cuMemcpyBatchAsync(dsts, "
        "srcs, sizes, 3, &attr, &attr_idx, 1, &fail, s) = 1\nrztransp: batch failIdx 1\n",
        /* 3D batches: each pointer operand's rows and layers; the first bad operation, named in failIdx */
        "redzone: copy past the end of alloc#1: bytes [0..=39] written by cuMemcpy3DBatchAsync (user_bytes=1000); "
        "nothing copied, CUDA_ERROR_INVALID_VALUE returned as without redzone\nrztransp: cuMemcpy3DBatchAsync(3, ops, "
        "&fail, 0, s) = 1\nrztransp: batch3d failIdx 1\n",
        "redzone: copy past the end of alloc#0: bytes [0..=8] read by cuMemcpy3DBatchAsync (user_bytes=1000); nothing "
        "copied, CUDA_ERROR_INVALID_VALUE returned as without redzone\nrztransp: cuMemcpy3DBatchAsync_v2(1, ops + 2, 0, "
        "s) = 1\n",
        "redzone: copy past the end of alloc#0: bytes [0..=8] read by cuMemcpy3DBatchAsync (user_bytes=1000); nothing "
        "copied, CUDA_ERROR_INVALID_VALUE returned as without redzone\nrztransp: cuMemcpy3DBatchAsync_ptsz(3, ops, "
        "&fail, 0, s) = 1\nrztransp: batch3d failIdx 2\n"};
    for (size_t i = 0; i < sizeof reports / sizeof reports[0]; i++)
        cr_assert(strstr(out, reports[i]), "want '%s':\n%s", reports[i], out);
    cr_assert_eq(count_of(out, "redzone: copy past the end of alloc#") + count_of(out, "redzone: memset past the end"),
                 26, "one line per side refused: %s", out);
    cr_assert(strstr(out, "; 26 violations in 1 scans;"), "each counted as a violation: %s", out);
    cr_assert_eq(count_of(out, "REDZONE VIOLATION"), 0, "no band was written: %s", out);
}

/* With front bands, a range that starts before the buffer (in its front band) is refused and reported. */
Test(transparency, copies_and_memsets_before_the_start_refused_as_without) {
    same_as_without("before", "METRALE_REDZONE_FRONT=256");
    cr_assert(strstr(bare, "rztransp: cuMemcpyDtoH_v2(g, a - 16, 8) = 1\nrztransp: cuMemsetD8_v2(a - 8, 0x22, 16) = 1\n"),
              "%s", bare);
    cr_assert(strstr(out, "redzone: copy before the start of alloc#0: bytes [-16..=-9] read by cuMemcpyDtoH "
                          "(user_bytes=1000); nothing copied, CUDA_ERROR_INVALID_VALUE returned as without redzone\n"),
              "%s", out);
    cr_assert(strstr(out, "redzone: memset before the start of alloc#0: bytes [-8..=-1] written by cuMemsetD8 "
                          "(user_bytes=1000); nothing set, CUDA_ERROR_INVALID_VALUE returned as without redzone\n"),
              "%s", out);
}

/* With METRALE_REDZONE_STACKS, the report says where the copy was made and where its buffer was allocated. */
Test(transparency, refused_copy_report_has_the_call_stack) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", "METRALE_REDZONE_STACKS=1", NULL};
    const char *argv[] = {RZTRANSP, "pastend", NULL};
    cr_assert_eq(run(env, argv, out), 0, "%s", out);
    cr_assert(strstr(out, "redzone: copy past the end of alloc#0: bytes [0..=7] written by cuMemcpyHtoD (user_bytes=1000); "
                          "nothing copied, CUDA_ERROR_INVALID_VALUE returned as without redzone\n"
                          "  cuMemcpyHtoD was called at:\n    #0 0x"), "%s", out);
    cr_assert(strstr(out, " (" RZTRANSP ")\n  alloc#0 was allocated at:\n    #0 0x"), "the program's frames: %s", out);
    cr_assert_eq(count_of(out, "libredzone"), 0, "redzone's own frames left out: %s", out);
    cr_assert_eq(count_of(out, " was called at:\n"), 26, "one per report: %s", out);
}

/* A refused copy fails `redzone run --error-exitcode` as a band violation does. */
Test(transparency, refused_copy_trips_error_exitcode) {
    const char *argv[] = {REDZONE_CLI, "run", "--emulated-device", "--error-exitcode", "7", "--", RZTRANSP, "pastend", NULL};
    cr_assert_eq(run(NULL, argv, out), 7, "%s", out);
    const char *clean[] = {REDZONE_CLI, "run", "--emulated-device", "--error-exitcode", "7", "--", RZTRANSP, "memset",
                           NULL};
    cr_assert_eq(run(NULL, clean, out), 0, "%s", out);
}
