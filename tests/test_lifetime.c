/*
 * Zones die with their context (issue 18 item 1), end to end: tests/programs/rzctx.c allocates x in one
 * context, ends the context (which frees x) each way a program or runtime can, and then a larger buffer y in
 * another context covers x's old addresses (or a virtual-memory mapping is placed there). With
 * libredzone.so preloaded the program must see what it sees without: y's bytes its own, the driver's answers
 * for the mapping, and redzone must report nothing (no violation of x's band, no failed scan).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spawn.h"

#define PRELOAD "LD_PRELOAD=" LIBREDZONE
#define EMU "LD_LIBRARY_PATH=" EMU_DIR

static char out[1 << 16], bare[1 << 16];

/* The program's own lines (rzctx: ...) of a run, in order. */
#define program_lines(text, dst, cap) spawn_lines_with_prefix("rzctx: ", text, dst, cap)

/* Runs `rzctx mode end state` without and with redzone (scan: METRALE_REDZONE_SCAN); the program's lines
 * must be identical, and redzone must have found nothing and failed at nothing. */
static void same_as_without(const char *mode, const char *end, const char *state, const char *scan) {
    const char *env_bare[] = {EMU, NULL};
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", scan, NULL};
    const char *argv[] = {RZCTX, mode, end, state, NULL};
    cr_assert_eq(spawn_capture(env_bare, argv, bare, sizeof bare), 0, "%s", bare);
    cr_assert_eq(spawn_capture(env, argv, out, sizeof out), 0, "%s", out);
    static char a[1 << 16], b[1 << 16];
    program_lines(bare, a, sizeof a);
    program_lines(out, b, sizeof b);
    cr_assert(a[0], "no program output: %s", bare);
    cr_assert_str_eq(b, a, "%s %s %s, with redzone:\n%s\nwithout:\n%s", mode, end, state, out, bare);
    cr_assert(!strstr(out, "REDZONE VIOLATION"), "%s %s %s: %s", mode, end, state, out);
    cr_assert(!strstr(out, "failed"), "%s %s %s: %s", mode, end, state, out);
    cr_assert(!strstr(out, "warning"), "%s %s %s: %s", mode, end, state, out);
    cr_assert(strstr(out, "redzone: exit: 0 violated at exit; 0 violations in "), "%s %s %s: %s", mode, end, state,
              out);
}

/* How x's context ends: cuCtxDestroy of the current or of a non-current created context, the last release
 * of the primary context (called directly, or fetched with cuGetProcAddress as a runtime's cudaDeviceReset
 * does), a primary context reset; and each through the older ABI a driver still exports (cuCtxDestroy,
 * cuDevicePrimaryCtxRelease/Reset), which redzone did not wrap. */
struct end {
    char name[16];
};
static struct end *ends(size_t *n) {
    static struct end all[] = {{"destroy"}, {"noncurrent"}, {"release"}, {"reset"},     {"runtime"},
                               {"destroy-v1"}, {"release-v1"}, {"reset-v1"}};
    *n = sizeof all / sizeof all[0];
    return all;
}
#define ENDS(suite, name)                                                                                    \
    ParameterizedTestParameters(suite, name) {                                                               \
        size_t n;                                                                                            \
        struct end *all = ends(&n);                                                                          \
        return cr_make_param_array(struct end, all, n);                                                      \
    }

ENDS(lifetime, y_over_x_pending)

/* x never touched: its band still waits (lazy install) when its context ends. The install must not learn
 * x's context from the driver's answer for y and write x's band into the middle of y (a false violation of
 * 64 of 64 bytes; with sync scans, 64 bytes of y changed by the re-fill). */
ParameterizedTest(struct end *end, lifetime, y_over_x_pending) {
    same_as_without("reuse", end->name, "pending", "METRALE_REDZONE_SCAN=free,exit,sync");
    cr_assert(strstr(bare, "rzctx: y has x's old range in its middle: 1\nrzctx: bytes of y changed: 0\n"), "%s", bare);
}

ENDS(lifetime, y_over_x_installed)

/* x's band in place when its context ends: later scans must not try to read it in the dead context (every
 * one failed with CUDA_ERROR_INVALID_CONTEXT, and the exit line said `exit scan failed`). */
ParameterizedTest(struct end *end, lifetime, y_over_x_installed) {
    same_as_without("reuse", end->name, "used", "METRALE_REDZONE_SCAN=free,exit,sync");
    cr_assert(strstr(bare, "rzctx: y has x's old range in its middle: 1\nrzctx: bytes of y changed: 0\n"), "%s", bare);
}

ENDS(lifetime, mapping_over_x)

/* A virtual-memory mapping placed on x's old address: cuMemGetAddressRange and the range attribute give the
 * driver's own answer (the mapping), not one made from x's dead zone (CUDA_ERROR_NOT_FOUND). */
ParameterizedTest(struct end *end, lifetime, mapping_over_x) {
    same_as_without("vmm", end->name, "used", NULL);
    cr_assert(strstr(bare, "rzctx: mapping at x's old address: 1\n"
                           "rzctx: cuMemGetAddressRange at mapping + 16: 0, base at the mapping 1, size 4194304\n"
                           "rzctx: RANGE_START_ADDR at mapping + 16: 0, at the mapping 1\n"
                           "rzctx: cuMemGetAddressRange at mapping + 3145744: 0, base at the mapping 1, size 4194304\n"
                           "rzctx: RANGE_START_ADDR at mapping + 3145744: 0, at the mapping 1\n"),
              "%s", bare);
}

Test(lifetime, mapping_over_a_pending_x) { same_as_without("vmm", "destroy", "pending", NULL); }

/* A primary context's release that is not the last leaves the context, and its zones, as they were. Before it
 * the release checks x's band (it might have been the last: the first overrun is reported then); x stays
 * watched, so an overrun after the release is reported when x is freed. */
Test(lifetime, a_release_that_is_not_the_last_keeps_the_zones) {
    const char *env[] = {PRELOAD, EMU, "METRALE_REDZONE=64", NULL};
    const char *argv[] = {RZCTX, "keep", NULL};
    cr_assert_eq(spawn_capture(env, argv, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "rzctx: store past the end: 0"), "%s", out);
    cr_assert(strstr(out, "rzctx: store past the end after the release: 0"), "%s", out);
    cr_assert(strstr(out, "redzone: context ending: 1 zones checked, 1 violated"), "%s", out);
    cr_assert(strstr(out, "rzctx: cuMemFree of x after a release that was not the last: 0"), "%s", out);
    cr_assert(strstr(out, "REDZONE VIOLATION"), "%s", out);
    cr_assert(strstr(out, "bytes [4..=4] past the end were written"), "%s", out);
    cr_assert(strstr(out, "redzone: alloc#0 was violated when it was freed"), "%s", out);
}
