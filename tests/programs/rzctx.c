/*
 * A CUDA driver-API program for the lifetime of a context's memory under redzone (issue 18 item 1): buffers
 * w and x are allocated in one context, the context ends (which frees them), and a larger buffer y in another
 * context then has x's old address range in its middle. Run by tests/test_lifetime.c with and without libredzone.so preloaded; it
 * prints what the program sees (result codes, whether y's bytes are still its own), so the two runs compare
 * line by line. It knows nothing of redzone.
 *   rzctx reuse END STATE   END: how x's context ends:
 *                             destroy        cuCtxDestroy of x's created context, current
 *                             noncurrent     cuCtxDestroy of x's created context while another one is current
 *                             release        the last cuDevicePrimaryCtxRelease of x's primary context
 *                             reset          cuDevicePrimaryCtxReset of x's primary context
 *                             runtime        the primary context released to 0 as a runtime's cudaDeviceReset
 *                                            does: through entry points from cuGetProcAddress
 *                             destroy-v1     cuCtxDestroy, the CUDA 2.0 ABI (a program built against old headers)
 *                             release-v1     cuDevicePrimaryCtxRelease, the CUDA 7.0 ABI
 *                             reset-v1       cuDevicePrimaryCtxReset, the CUDA 7.0 ABI, fetched with
 *                                            cuGetProcAddress for CUDA 10.0 (as an older runtime does)
 *                           STATE: what was done with x before: `pending` (nothing: x was never touched) or
 *                           `used` (a memset of x, so its band is in place)
 *                           then y (8 MiB) is allocated in another context, filled with 0x33, the context
 *                           synchronised, y read back (how many of its bytes are not 0x33) and freed
 *   rzctx vmm END STATE     as `reuse`, but a virtual-memory mapping is placed at x's old address instead of y;
 *                           (two granules); cuMemGetAddressRange and cuPointerGetAttribute(RANGE_START_ADDR) in it
 *                           where x was and where x's band was
 *   rzctx keep              the primary context retained twice, x allocated in it and one byte past its end
 *                           written by device code (with redzone: into its band), the primary context released once (not the last release:
 *                           it stays active, and so does x), one more byte past the end written, then x freed
 *                           and the context released again
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_emu.h"

#define CHECK(call)                                                                                          \
    do {                                                                                                     \
        rzcu_result rc_ = (call);                                                                            \
        if (rc_ != 0) {                                                                                      \
            fprintf(stderr, "rzctx:%d: %s failed: %u\n", __LINE__, #call, rc_);                              \
            exit(100);                                                                                       \
        }                                                                                                    \
    } while (0)

#define X_BYTES ((size_t)3 << 20) /* large allocations reuse freed address ranges first fit */
#define W_BYTES ((size_t)2 << 20)
#define Y_BYTES ((size_t)8 << 20)

/* The entry points a runtime fetches with cuGetProcAddress (cudart 12 fetches every one it calls so). */
typedef rzcu_result proc_retain_fn(rzcu_context *, rzcu_device);
typedef rzcu_result proc_release_fn(rzcu_device);

static void *proc_at(const char *name, int version) {
    void *pfn = NULL;
    rzcu_proc_query_result status;
    CHECK(cuGetProcAddress_v2(name, &pfn, version, 0, &status));
    return pfn;
}

static void *proc(const char *name) { return proc_at(name, 12000); }

/* Where x lives: a created context (destroy, noncurrent) or the primary one (release, reset, runtime).
 * Returns the context y goes into, current on return. */
static rzcu_context end_x(const char *end, const char *state, rzcu_deviceptr *x) {
    int created = strcmp(end, "destroy") == 0 || strcmp(end, "noncurrent") == 0 || strcmp(end, "destroy-v1") == 0;
    rzcu_context primary, xctx, other = NULL;
    if (strcmp(end, "runtime") == 0)
        CHECK(((proc_retain_fn *)proc("cuDevicePrimaryCtxRetain"))(&primary, 0));
    else
        CHECK(cuDevicePrimaryCtxRetain(&primary, 0));
    if (created) {
        CHECK(cuCtxSetCurrent(primary));
        CHECK(cuCtxCreate_v4(&xctx, NULL, 0, 0)); /* pushed: current */
    } else {
        xctx = primary;
        CHECK(cuCtxSetCurrent(primary));
    }
    rzcu_deviceptr w;
    CHECK(cuMemAlloc_v2(&w, W_BYTES)); /* before x: y starts at w and has x in its middle */
    CHECK(cuMemAlloc_v2(x, X_BYTES));
    if (strcmp(state, "used") == 0) {
        CHECK(cuMemsetD8_v2(*x, 0, X_BYTES));
        CHECK(cuCtxSynchronize());
    }
    if (strcmp(end, "destroy") == 0 || strcmp(end, "destroy-v1") == 0) {
        CHECK(strcmp(end, "destroy") == 0 ? cuCtxDestroy_v2(xctx) : cuCtxDestroy(xctx));
        CHECK(cuCtxSetCurrent(primary));
        return primary;
    }
    if (strcmp(end, "noncurrent") == 0) {
        rzcu_context popped;
        CHECK(cuCtxPopCurrent_v2(&popped)); /* the primary context is current again */
        CHECK(cuCtxDestroy_v2(xctx));
        return primary;
    }
    /* x in the primary context: y goes into a created one, made before the primary context ends */
    CHECK(cuCtxCreate_v4(&other, NULL, 0, 0));
    if (strcmp(end, "release") == 0)
        CHECK(cuDevicePrimaryCtxRelease_v2(0));
    else if (strcmp(end, "reset") == 0)
        CHECK(cuDevicePrimaryCtxReset_v2(0));
    else if (strcmp(end, "release-v1") == 0)
        CHECK(cuDevicePrimaryCtxRelease(0));
    else if (strcmp(end, "reset-v1") == 0)
        CHECK(((proc_release_fn *)proc_at("cuDevicePrimaryCtxReset", 10000))(0));
    else
        CHECK(((proc_release_fn *)proc("cuDevicePrimaryCtxRelease"))(0));
    return other;
}

static int mode_reuse(const char *end, const char *state) {
    CHECK(cuInit(0));
    rzcu_deviceptr x, y;
    end_x(end, state, &x);
    CHECK(cuMemAlloc_v2(&y, Y_BYTES));
    printf("rzctx: y has x's old range in its middle: %d\n", y < x && x + X_BYTES < y + Y_BYTES);
    CHECK(cuMemsetD8_v2(y, 0x33, Y_BYTES));
    CHECK(cuCtxSynchronize());
    unsigned char *h = malloc(Y_BYTES);
    CHECK(cuMemcpyDtoH_v2(h, y, Y_BYTES));
    size_t changed = 0;
    for (size_t i = 0; i < Y_BYTES; i++)
        changed += h[i] != 0x33;
    printf("rzctx: bytes of y changed: %zu\n", changed);
    free(h);
    CHECK(cuMemFree_v2(y));
    printf("rzctx: y freed\n");
    return 0;
}

static int mode_vmm(const char *end, const char *state) {
    CHECK(cuInit(0));
    rzcu_deviceptr x;
    end_x(end, state, &x);
    rzcu_mem_allocation_prop prop = {.type = RZCU_MEM_ALLOCATION_TYPE_PINNED,
                                     .location = {.type = RZCU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    size_t gran;
    CHECK(cuMemGetAllocationGranularity(&gran, &prop, RZCU_MEM_ALLOC_GRANULARITY_MINIMUM));
    size_t len = 2 * gran; /* past x's end, its band's old bytes included */
    rzcu_deviceptr va;
    CHECK(cuMemAddressReserve(&va, len, gran, x, 0));
    printf("rzctx: mapping at x's old address: %d\n", va == x);
    rzcu_mem_generic_alloc_handle hnd;
    CHECK(cuMemCreate(&hnd, len, &prop, 0));
    CHECK(cuMemMap(va, len, 0, hnd, 0));
    rzcu_mem_access_desc access = {.location = prop.location, .flags = RZCU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CHECK(cuMemSetAccess(va, len, &access, 1));
    const size_t at[] = {16, X_BYTES + 16}; /* inside x's old range; in its old band */
    for (int i = 0; i < 2; i++) {
        rzcu_deviceptr base = 0, start = 0;
        size_t size = 0;
        rzcu_result r = cuMemGetAddressRange_v2(&base, &size, va + at[i]);
        printf("rzctx: cuMemGetAddressRange at mapping + %zu: %u, base at the mapping %d, size %zu\n", at[i], r,
               base == va, size);
        r = cuPointerGetAttribute(&start, RZCU_POINTER_ATTRIBUTE_RANGE_START_ADDR, va + at[i]);
        printf("rzctx: RANGE_START_ADDR at mapping + %zu: %u, at the mapping %d\n", at[i], r, start == va);
    }
    CHECK(cuMemUnmap(va, len));
    CHECK(cuMemRelease(hnd));
    CHECK(cuMemAddressFree(va, len));
    return 0;
}

static int mode_keep(void) {
    rzcu_context primary, again;
    CHECK(cuInit(0));
    CHECK(cuDevicePrimaryCtxRetain(&primary, 0));
    CHECK(cuDevicePrimaryCtxRetain(&again, 0));
    CHECK(cuCtxSetCurrent(primary));
    rzcu_deviceptr x;
    CHECK(cuMemAlloc_v2(&x, 4096));
    CHECK(cuMemsetD8_v2(x, 0, 4096));
    const unsigned char past = 0x5a;
    /* a kernel's store one byte past the end (without redzone the emulated device refuses it: nothing there) */
    printf("rzctx: store past the end: %u\n", cuEmuDeviceStore(x + 4096, &past, 1));
    CHECK(cuCtxSynchronize());
    CHECK(cuDevicePrimaryCtxRelease_v2(0)); /* one of two references: the context stays */
    printf("rzctx: store past the end after the release: %u\n", cuEmuDeviceStore(x + 4100, &past, 1));
    CHECK(cuCtxSynchronize());
    rzcu_result r = cuMemFree_v2(x);
    printf("rzctx: cuMemFree of x after a release that was not the last: %u\n", r);
    CHECK(cuDevicePrimaryCtxRelease_v2(0));
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "reuse") == 0 && argc > 3)
        return mode_reuse(argv[2], argv[3]);
    if (strcmp(mode, "vmm") == 0 && argc > 3)
        return mode_vmm(argv[2], argv[3]);
    if (strcmp(mode, "keep") == 0)
        return mode_keep();
    fprintf(stderr, "usage: rzctx reuse|vmm END STATE | rzctx keep\n");
    return 2;
}
