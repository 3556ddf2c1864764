/*
 * The scans' device-side check on the emulated driver. The emulator runs a kernel as a host function of the
 * program named cuda_emu_kernel_<name>, so this test supplies rz_check_bands with the contract of
 * native/kernels/rz_check.cu: the library's whole kernel path (module load, upload, launch, read-back of the
 * violated positions, read of just those bands) runs for real. test_band.c covers the fallback, where the
 * emulator has no such kernel.
 */
#include <signal.h>

#include "rz_test.h"

/* The contract of rz_check_bands: positions of differing bands in out[1..cap], their count in out[0]. */
CUDA_EMU_KERNEL(rz_check_bands, sizeof(rzcu_deviceptr), sizeof(unsigned), sizeof(rzcu_deviceptr), sizeof(unsigned)) {
    const rz_check_desc_t *d = (const rz_check_desc_t *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    unsigned n = CUDA_EMU_PARAM(unsigned, 1), cap = CUDA_EMU_PARAM(unsigned, 3);
    unsigned *out = (unsigned *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 2);
    unsigned threads = launch->grid.x * launch->block.x;
    for (unsigned i = 0; i < n && i < threads; i++) {
        const unsigned char *band = (const unsigned char *)(uintptr_t)d[i].band;
        unsigned bad = 0;
        for (unsigned b = 0; b < d[i].bytes; b++)
            bad |= band[b] ^ d[i].expected;
        if (bad) {
            unsigned k = out[0]++;
            if (k < cap)
                out[1 + k] = i;
        }
    }
}

static const char *g_log;

static void setup(void) {
    setenv("METRALE_REDZONE", "64", 1);
    setenv("METRALE_REDZONE_CHECK_KERNEL", "1", 1); /* off by default */
    g_log = rzt_log_to_file();
    rzt_context(0);
}

TestSuite(check, .init = setup);

static void poke(rz_devptr_t p, uint8_t value) { cr_assert_eq(cuMemcpyHtoD_v2(p, &value, 1), RZCUDA_SUCCESS); }

static void need_kernel(void) {
    if (!rz__check_kernel_built())
        cr_skip_test("built without nvcc: the library has no check kernel image to load");
}

/* The first scan that meets a context uses copies and loads the module after it (outside the registry
 * lock); from the next scan on the kernel checks the bands. */
static void load_kernel(void) {
    cr_assert_geq(rz_scan(), 0);
    cr_assert_eq(cuEmuCallCount("cuModuleLoadData"), 1, "loaded after the first scan");
}

Test(check, clean_scan_moves_no_band) {
    need_kernel();
    enum { N = 5000 };
    rz_devptr_t p;
    for (int i = 0; i < N; i++)
        cr_assert_eq(rz_mem_alloc(&p, 48), RZCUDA_SUCCESS);
    cr_assert_eq(rz_scan(), 0, "first scan: copies, then the module is loaded");
    cr_assert_eq(cuEmuCallCount("cuModuleLoadData"), 1);
    cr_assert_eq(cuEmuCallCount("cuLaunchKernel"), 0, "the first scan used copies");
    cuEmuResetCallCounts();
    cr_assert_eq(rz_scan(), 0);
    cr_assert_eq(cuEmuCallCount("cuLaunchKernel"), 1, "one launch checks every band");
    cr_assert_eq(cuEmuCallCount("cuMemcpyHtoDAsync_v2"), 1, "one upload of the descriptors");
    cr_assert_eq(cuEmuCallCount("cuMemcpyDtoHAsync_v2"), 1, "one read of the (empty) answer");
    cr_assert_eq(cuEmuCallCount("cuMemcpyBatchAsync_v2"), 0, "no band is read");
    cr_assert_eq(cuEmuCallCount("cuModuleLoadData"), 0, "loaded once per context");
}

Test(check, violations_found_by_the_kernel_are_reported_as_with_copies) {
    need_kernel();
    enum { N = 3000 };
    rz_devptr_t p[N];
    for (int i = 0; i < N; i++)
        cr_assert_eq(rz_mem_alloc(&p[i], 100), RZCUDA_SUCCESS);
    load_kernel();
    poke(p[7] + 100, 0x11);
    poke(p[2999] + 163, 0x22);
    cuEmuResetCallCounts();
    cr_assert_eq(rz_scan(), 2);
    cr_assert_eq(cuEmuCallCount("cuLaunchKernel"), 1);
    cr_assert_eq(cuEmuCallCount("cuMemcpyBatchAsync_v2"), 2,
                 "one batched read of just the two violated bands, one batched re-fill of them");
    char *text = rzt_read_log(g_log);
    cr_assert_eq(rzt_count(text, "REDZONE VIOLATION alloc#7 user_bytes=100 pad=64 : bytes [0..=0] past the end"), 1,
                 "%s", text);
    cr_assert_eq(rzt_count(text, "REDZONE VIOLATION alloc#2999 user_bytes=100 pad=64 : bytes [63..=63] past the end"),
                 1, "%s", text);
    cr_assert_eq(rzt_count(text, "redzone scan: 3000 zones checked, 2 violated"), 1, "%s", text);
    free(text);
    /* Re-filled: the next scan, kernel or copies, finds nothing. */
    cr_assert_eq(rz_scan(), 0);
    rz__check_kernel_enable(0);
    cr_assert_eq(rz_scan(), 0);
    rz__check_kernel_enable(1);
}

Test(check, same_reports_with_and_without_the_kernel) {
    need_kernel();
    enum { N = 200 };
    rz_devptr_t p[N];
    for (int i = 0; i < N; i++)
        cr_assert_eq(rz_mem_alloc(&p[i], 16 + i), RZCUDA_SUCCESS);
    char *logs[2];
    for (int round = 0; round < 2; round++) {
        rz__check_kernel_enable(round == 0);
        for (int i = 0; i < N; i += 17)
            poke(p[i] + 16 + (size_t)i + (size_t)(i % 64), (uint8_t)(i + 1));
        cr_assert_eq(truncate(g_log, 0), 0);
        cr_assert_eq(rz_scan(), (N + 16) / 17);
        logs[round] = rzt_read_log(g_log);
    }
    rz__check_kernel_enable(1);
    cr_assert_str_eq(logs[0], logs[1]);
    free(logs[0]);
    free(logs[1]);
}

/* More violated bands than one launch lists: the scan reads every band instead, and misses none. */
Test(check, more_violations_than_the_kernel_lists_fall_back_to_reading_all, .timeout = 60) {
    need_kernel();
    enum { N = RZ_CHECK_CAP + 10 };
    rz_devptr_t p;
    rz_devptr_t first;
    cr_assert_eq(rz_mem_alloc(&first, 32), RZCUDA_SUCCESS);
    load_kernel();
    poke(first + 32, 0x33);
    for (int i = 1; i < N; i++) {
        cr_assert_eq(rz_mem_alloc(&p, 32), RZCUDA_SUCCESS);
        poke(p + 32, 0x33);
    }
    cuEmuResetCallCounts();
    cr_assert_eq(rz_scan(), N);
    cr_assert_eq(cuEmuCallCount("cuLaunchKernel"), 1);
    cr_assert_geq(cuEmuCallCount("cuMemcpyBatchAsync_v2"), 1, "every band read");
}

/* A launch that fails (here injected) leaves the scan to the copies: nothing is missed, nothing breaks. */
Test(check, failed_launch_falls_back_to_copies) {
    need_kernel();
    rz_devptr_t p, q;
    cr_assert_eq(rz_mem_alloc(&p, 64), RZCUDA_SUCCESS);
    cr_assert_eq(rz_mem_alloc(&q, 64), RZCUDA_SUCCESS);
    cr_assert_eq(rz_scan(), 0);
    poke(q + 64, 0x44);
    cuEmuResetCallCounts();
    cuEmuInjectFailure("cuLaunchKernel", 1, RZCUDA_ERROR_UNKNOWN);
    cr_assert_eq(rz_scan(), 1);
    cr_assert_eq(cuEmuCallCount("cuMemcpyBatchAsync_v2"), 1, "read with copies after the failed launch");
}

Test(check, option_turns_the_kernel_off) {
    need_kernel();
    setenv("METRALE_REDZONE_CHECK_KERNEL", "0", 1);
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 64), RZCUDA_SUCCESS);
    poke(p + 64, 0x55);
    cuEmuResetCallCounts();
    cr_assert_eq(rz_scan(), 1);
    cr_assert_eq(cuEmuCallCount("cuModuleLoadData"), 0);
    cr_assert_eq(cuEmuCallCount("cuLaunchKernel"), 0);
}

/* Front bands go through the kernel as bands of their own: a write before the start is found and reported
 * on its own line kind, the zone counted once. */
Test(check, front_bands_are_checked_on_the_device) {
    need_kernel();
    setenv("METRALE_REDZONE_FRONT", "256", 1);
    rz_devptr_t p[10];
    for (int i = 0; i < 10; i++)
        cr_assert_eq(rz_mem_alloc(&p[i], 100), RZCUDA_SUCCESS);
    load_kernel();
    poke(p[3] - 256, 0x66);
    poke(p[3] + 100, 0x67);
    cuEmuResetCallCounts();
    cr_assert_eq(rz_scan(), 1, "one zone, both of its bands");
    cr_assert_eq(cuEmuCallCount("cuLaunchKernel"), 1, "one batch for both kinds of band");
    char *text = rzt_read_log(g_log);
    cr_assert_eq(rzt_count(text, "REDZONE VIOLATION alloc#3 user_bytes=100 front=256 : bytes [-256..=-256] before the "
                                 "start were written (1 of 256 front bytes changed), first bad value 0x66"), 1, "%s", text);
    cr_assert_eq(rzt_count(text, "REDZONE VIOLATION alloc#3 user_bytes=100 pad=64 : bytes [0..=0] past the end"), 1,
                 "%s", text);
    cr_assert_eq(rzt_count(text, "redzone scan: 10 zones checked, 1 violated"), 1, "%s", text);
    free(text);
    cr_assert_eq(rz_scan(), 0, "both bands re-filled");
}

Test(check_env, kernel_is_off_by_default) {
    setenv("METRALE_REDZONE", "64", 1);
    rzt_log_to_file();
    rzt_context(0);
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 64), RZCUDA_SUCCESS);
    poke(p + 64, 0x55);
    cr_assert_eq(rz_scan(), 1);
    cr_assert_eq(rz_scan(), 0);
    cr_assert_eq(cuEmuCallCount("cuModuleLoadData"), 0, "copies only, until the kernel is measured on a GPU");
    cr_assert_eq(cuEmuCallCount("cuLaunchKernel"), 0);
}

/* The module load (a JIT compile on a GPU without fitting SASS) never runs under the registry lock, which
 * every allocation and free of the program takes: a signal raised inside cuModuleLoadData finds it free. */
static volatile sig_atomic_t g_lock_free_at_load = -1;

static void at_load(int sig) {
    (void)sig;
    int free_now = rz__registry_lock_timed(0) == RZ_OK;
    if (free_now)
        rz__registry_unlock();
    g_lock_free_at_load = free_now;
}

Test(check, module_is_loaded_outside_the_registry_lock) {
    need_kernel();
    signal(SIGUSR1, at_load);
    cr_assert_eq(cuEmuInjectSignal("cuModuleLoadData", 1, SIGUSR1), 0);
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 64), RZCUDA_SUCCESS);
    load_kernel();
    cr_assert_eq(g_lock_free_at_load, 1, "the registry lock was held while the module loaded");
}

/* The image is a fatbin (SASS for the common architectures plus PTX), not bare PTX a driver must JIT. */
Test(check, image_is_a_fatbin) {
    need_kernel();
    size_t size;
    const unsigned char *image = rz__check_kernel_image(&size);
    cr_assert_gt(size, 16);
    uint32_t magic = (uint32_t)image[0] | (uint32_t)image[1] << 8 | (uint32_t)image[2] << 16 | (uint32_t)image[3] << 24;
    cr_assert_eq(magic, 0xBA55ED50u, "fatbin magic");
}
