/*
 * The driver table (driver.c) against dlsym: every entry point rz__drv holds, looked up at start-up in the
 * driver's own GNU hash tables with hashes computed at build time (generated/driver_hashes.h), must be what
 * dlsym(driver, name) returns, NULL included, on the emulated driver and on the NVIDIA driver's libcuda.so.1
 * (no GPU needed: nothing is called). A wrong hash, a library's table read wrongly or a needed library not
 * found would show here as a different address.
 *   rzdrvtable DRIVER-FILE   the libcuda.so.1 to compare with (loaded first, as a program that linked it)
 * Exit 0 when all agree, 1 otherwise; 77 when DRIVER-FILE is not there (printed; CI=true makes it 1).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "driver.h"

static int g_names, g_present, g_wrong;

static void check(const char *name, void *ours, void *h) {
    void *theirs = rz__real_dlsym(h, name);
    g_names++;
    g_present += theirs != NULL;
    if (ours != theirs) {
        g_wrong++;
        printf("FAIL %s: the table has %p, dlsym %p\n", name, ours, theirs);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: rzdrvtable DRIVER-FILE\n");
        return 2;
    }
    if (access(argv[1], R_OK) != 0) {
        const char *ci = getenv("CI");
        printf("%s %s is not there (scripts/real-driver unpacks the NVIDIA driver)\n",
               ci && strcmp(ci, "true") == 0 ? "FAIL" : "SKIP", argv[1]);
        return ci && strcmp(ci, "true") == 0 ? 1 : 77;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL) {
        printf("FAIL dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
    if (rz__dev_load() != RZ_OK) {
        printf("FAIL rz__dev_load did not load %s\n", argv[1]);
        return 1;
    }
#define DT_CHECK(name, ret, params) check(#name, (void *)(uintptr_t)rz__drv.name, h);
#define DT_CHECK_VARIANT(variant, base) check(#variant, (void *)(uintptr_t)rz__drv.variant, h);
#define DT_CHECK_WRITER(exported, base, since, per_thread, params, args)                                      \
    check(#exported, (void *)(uintptr_t)rz__drv.writers.exported, h);
    RZCU_ENTRY_POINTS(DT_CHECK)
    RZCU_IPC_ENTRY_POINTS(DT_CHECK)
    RZCU_OPTIONAL_ENTRY_POINTS(DT_CHECK)
    RZCU_PER_THREAD_VARIANTS(DT_CHECK_VARIANT)
    RZCU_LEGACY_ENTRY_POINTS(DT_CHECK_VARIANT)
    RZCU_IPC_LEGACY_ENTRY_POINTS(DT_CHECK_VARIANT)
    RZCU_OPTIONAL_VARIANTS(DT_CHECK_VARIANT)
    RZCU_DEVICE_WRITERS(DT_CHECK_WRITER)
    check("cuStreamBeginCapture", (void *)(uintptr_t)rz__drv.cuStreamBeginCapture, h);
    check("cuStreamBeginCapture_ptsz", (void *)(uintptr_t)rz__drv.cuStreamBeginCapture_ptsz, h);
    check("cuGetProcAddress", (void *)(uintptr_t)rz__drv.cuGetProcAddress, h);
    printf("%s %s: %d names, %d in the driver, %d differ from dlsym\n", g_wrong ? "FAIL" : "PASS", argv[1], g_names,
           g_present, g_wrong);
    return g_wrong != 0 || g_present == 0;
}
