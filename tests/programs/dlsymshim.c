/*
 * A program that loads a shim library of its own exporting a driver entry point's name (a mock, a profiler's
 * shim, a second driver), asks dlsym on that library's handle for it and calls it: it must reach the shim's
 * function whether or not libredzone.so (which interposes dlsym) is preloaded. The driver's own entry point,
 * looked up on the driver's handle, is still redzone's wrapper (an overrun of a buffer allocated through it
 * is reported). Built twice:
 *   RZSHIM_LIB   librzdlshim.so: cuMemAlloc_v2 that hands out a made-up pointer and a made-up result code,
 *                and rzshim_calls(), how often it ran
 *   (neither)    dlsymshim SHIM: the shim's cuMemAlloc_v2 before the driver is loaded, then the driver's
 *                through dlopen("libcuda.so.1") (one byte stored past the end of a 100-byte buffer, as a
 *                kernel would: refused without redzone, reported with it), then the shim's again
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"

#if defined(RZSHIM_LIB)
static int g_calls;
__attribute__((visibility("default"))) rzcu_result cuMemAlloc_v2(rzcu_deviceptr *dptr, size_t bytes);
__attribute__((visibility("default"))) int rzshim_calls(void);
rzcu_result cuMemAlloc_v2(rzcu_deviceptr *dptr, size_t bytes) {
    g_calls++;
    *dptr = 0x5eed0000ull + bytes;
    return (rzcu_result)4242;
}
int rzshim_calls(void) { return g_calls; }
#else
static void *sym(void *h, const char *name) {
    void *p = dlsym(h, name);
    if (p == NULL) {
        fprintf(stderr, "dlsymshim: no %s\n", name);
        exit(101);
    }
    return p;
}

/* Calls the shim's cuMemAlloc_v2 as found on the shim's handle; says where the function it got lives. */
static void call_shim(void *shim, const char *when) {
    rzcu_fn_cuMemAlloc_v2 *alloc = (rzcu_fn_cuMemAlloc_v2 *)sym(shim, "cuMemAlloc_v2");
    int (*calls)(void) = (int (*)(void))sym(shim, "rzshim_calls");
    Dl_info info;
    const char *where = dladdr((void *)alloc, &info) && info.dli_fname && strstr(info.dli_fname, "librzdlshim")
                            ? "the shim"
                            : "elsewhere";
    rzcu_deviceptr p = 0;
    rzcu_result r = alloc(&p, 100);
    printf("dlsymshim: %s: dlsym(shim, \"cuMemAlloc_v2\") is in %s; it returned %u, pointer 0x%llx; shim calls %d\n",
           when, where, (unsigned)r, (unsigned long long)p, calls());
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: dlsymshim SHIM\n");
        return 2;
    }
    void *shim = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (shim == NULL) {
        fprintf(stderr, "dlsymshim: %s\n", dlerror());
        return 101;
    }
    call_shim(shim, "before the driver");

    void *d = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (d == NULL) {
        fprintf(stderr, "dlsymshim: %s\n", dlerror());
        return 101;
    }
    rzcu_context ctx;
    rzcu_deviceptr p;
    if (((rzcu_fn_cuInit *)sym(d, "cuInit"))(0) != 0 ||
        ((rzcu_fn_cuDevicePrimaryCtxRetain *)sym(d, "cuDevicePrimaryCtxRetain"))(&ctx, 0) != 0 ||
        ((rzcu_fn_cuCtxSetCurrent *)sym(d, "cuCtxSetCurrent"))(ctx) != 0 ||
        ((rzcu_fn_cuMemAlloc_v2 *)sym(d, "cuMemAlloc_v2"))(&p, 100) != 0) {
        fprintf(stderr, "dlsymshim: driver setup failed\n");
        return 100;
    }
    /* A zero-byte memset first is device work (bands waiting to be written are written), then the store. */
    rzcu_result (*store)(rzcu_deviceptr, const void *, size_t) =
        (rzcu_result(*)(rzcu_deviceptr, const void *, size_t))sym(d, "cuEmuDeviceStore");
    unsigned char byte = 0x11;
    rzcu_result r = ((rzcu_fn_cuMemsetD8_v2 *)sym(d, "cuMemsetD8_v2"))(p, 0, 0);
    if (r == 0)
        r = store(p + 100, &byte, 1);
    printf("dlsymshim: one byte past the end of the driver's buffer: %s\n", r == 0 ? "stored" : "refused");
    if (((rzcu_fn_cuMemFree_v2 *)sym(d, "cuMemFree_v2"))(p) != 0) {
        fprintf(stderr, "dlsymshim: cuMemFree_v2 failed\n");
        return 100;
    }
    call_shim(shim, "after the driver");
    return 0;
}
#endif
