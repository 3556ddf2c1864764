/*
 * The README's library example as a program a user copies: built from installed files (redzone.h,
 * libredzone.so) and a CUDA toolkit's cuda.h, nothing else of redzone's source tree. It allocates through
 * rz_mem_alloc, then copies 8 bytes too many into a 1000-byte buffer: the driver would refuse that copy
 * without redzone, and so does redzone (which reports it), so the bands stay clean and rz_scan finds 0.
 * Build and run as README.md shows ("A runtime can also call the library directly"):
 *
 *   cc rz_api.c -o rz_api -I"$CUDA/include" -I"$PREFIX/include" -L"$PREFIX/lib" -lredzone \
 *      -Wl,-rpath,"$PREFIX/lib" -L"$CUDA/lib64/stubs" -lcuda
 *   METRALE_REDZONE=64 LD_LIBRARY_PATH="$PREFIX/lib/redzone/emu" ./rz_api    # no GPU: the emulated driver
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <redzone.h>

static void check(CUresult rc, const char *what) {
    if (rc != CUDA_SUCCESS) {
        const char *name = "?";
        cuGetErrorName(rc, &name);
        fprintf(stderr, "rz_api: %s failed: %s\n", what, name);
        exit(1);
    }
}

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    check(cuInit(0), "cuInit");
    check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent"); /* rz_* work on the current context */

    rz_devptr_t buf;
    if (rz_mem_alloc(&buf, 1000) != 0) { /* same result codes as cuMemAlloc */
        fprintf(stderr, "rz_api: rz_mem_alloc failed\n");
        return 1;
    }
    unsigned char host[1008];
    memset(host, 0x5a, sizeof host);
    CUresult rc = cuMemcpyHtoD((CUdeviceptr)buf, host, sizeof host); /* 8 bytes too many */
    const char *name = "?";
    cuGetErrorName(rc, &name);
    printf("rz_api: copying 1008 bytes into a 1000-byte buffer: %s\n", name);

    int bad = rz_scan(); /* number of violated zones, or a negative RZ_E* status */
    printf("rz_api: rz_scan found %d violated zone(s)\n", bad);
    rz_poison(0, 1); /* the band of allocation #0 gets 0xEE, all others 0x00 */
    rz_mem_free(buf);
    check(cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease");
    return bad == 0 && rc == CUDA_ERROR_INVALID_VALUE ? 0 : 1;
}
