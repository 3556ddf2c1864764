/*
 * A CUDA driver-API program for redzone's transparency (issue 18 items 2 and 9): the entry points the emulated
 * driver gained so that redzone's wrappers of them run in tests. Run by tests/test_writers.c with and without
 * libredzone.so preloaded; it prints every result code and checksums of what it copied, so the two runs can
 * be compared line by line. It knows nothing of redzone.
 *   rzwriters copies  cuMemcpy2D/2DUnaligned/2DAsync/3D/3DAsync, plain, per-thread and through cuGetProcAddress,
 *                     host to device, device to device, device to host, and three the driver refuses
 *   rzwriters order   cuStreamWaitEvent between two streams; cuMemHostAlloc, cuMemHostGetDevicePointer and an
 *                     asynchronous copy into it, cuMemFreeHost
 *   rzwriters ipc     cuIpcGetMemHandle, cuIpcOpenMemHandle (twice, and once through cuGetProcAddress), bytes
 *                     written and read through the opened pointer, cuIpcCloseMemHandle, bad handles and pointers
 *   rzwriters attrs   cuPointerGetAttributes on a 1000-byte buffer: inside it, past its end, before its start
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_emu.h"

#define PROG "rzwriters"
#include "prog.h"

#define SHOW(call) printf("rzwriters: %s = %u\n", #call, (unsigned)(call))

static unsigned sum(const unsigned char *p, size_t n) {
    unsigned s = 0;
    for (size_t i = 0; i < n; i++)
        s = s * 31 + p[i];
    return s;
}

/* A 2D descriptor: src and dst are host pointers for CUDA_EMU_MEMORYTYPE_HOST, device pointers otherwise. */
static cuda_emu_memcpy2d_t d2(unsigned st, uintptr_t src, size_t sx, size_t sy, size_t sp, unsigned dt, uintptr_t dst,
                              size_t dx, size_t dy, size_t dp, size_t w, size_t h) {
    cuda_emu_memcpy2d_t c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = st;
    c.srcHost = st == CUDA_EMU_MEMORYTYPE_HOST ? (const void *)src : NULL;
    c.srcDevice = st == CUDA_EMU_MEMORYTYPE_HOST ? 0 : (rzcu_deviceptr)src;
    c.srcXInBytes = sx;
    c.srcY = sy;
    c.srcPitch = sp;
    c.dstMemoryType = dt;
    c.dstHost = dt == CUDA_EMU_MEMORYTYPE_HOST ? (void *)dst : NULL;
    c.dstDevice = dt == CUDA_EMU_MEMORYTYPE_HOST ? 0 : (rzcu_deviceptr)dst;
    c.dstXInBytes = dx;
    c.dstY = dy;
    c.dstPitch = dp;
    c.WidthInBytes = w;
    c.Height = h;
    return c;
}

/* A 3D descriptor of depth slices, each side's slices height rows of pitch bytes. */
static cuda_emu_memcpy3d_t d3(unsigned st, uintptr_t src, size_t sp, size_t sh, unsigned dt, uintptr_t dst, size_t dp,
                              size_t dh, size_t w, size_t h, size_t depth) {
    cuda_emu_memcpy3d_t c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = st;
    if (st == CUDA_EMU_MEMORYTYPE_HOST)
        c.srcHost = (const void *)src;
    else
        c.srcDevice = (rzcu_deviceptr)src;
    c.srcPitch = sp;
    c.srcHeight = sh;
    c.dstMemoryType = dt;
    if (dt == CUDA_EMU_MEMORYTYPE_HOST)
        c.dstHost = (void *)dst;
    else
        c.dstDevice = (rzcu_deviceptr)dst;
    c.dstPitch = dp;
    c.dstHeight = dh;
    c.WidthInBytes = w;
    c.Height = h;
    c.Depth = depth;
    return c;
}

#define H CUDA_EMU_MEMORYTYPE_HOST
#define D CUDA_EMU_MEMORYTYPE_DEVICE
#define U CUDA_EMU_MEMORYTYPE_UNIFIED

static int mode_copies(void) {
    setup();
    static unsigned char h[1000], back[1000];
    for (int i = 0; i < 1000; i++)
        h[i] = (unsigned char)(i * 13 + 7);
    rzcu_deviceptr a, b, c3;
    rzcu_stream s;
    CHECK(cuStreamCreate(&s, 0));
    CHECK(cuMemAlloc_v2(&a, 1000));
    CHECK(cuMemAlloc_v2(&b, 1000));
    CHECK(cuMemAlloc_v2(&c3, 1000));
    CHECK(cuMemsetD8_v2(b, 0, 1000));
    CHECK(cuMemsetD8_v2(c3, 0, 1000));
    uintptr_t hp = (uintptr_t)h;
    cuda_emu_memcpy2d_t c;
    c = d2(H, hp, 0, 0, 100, D, a, 0, 0, 100, 100, 10);
    SHOW(cuMemcpy2D_v2(&c));
    c = d2(D, a, 10, 0, 100, D, b, 50, 0, 100, 40, 10);
    SHOW(cuMemcpy2DUnaligned_v2(&c));
    c = d2(H, hp, 0, 0, 20, D, b, 0, 5, 100, 20, 5);
    SHOW(cuMemcpy2DAsync_v2(&c, s));
    SHOW(cuStreamSynchronize(s));
    c = d2(D, a, 0, 1, 100, D, b, 5, 0, 200, 10, 4);
    SHOW(cuMemcpy2D_v2_ptds(&c));
    c = d2(U, hp, 3, 0, 50, U, b, 80, 2, 100, 7, 3);
    SHOW(cuMemcpy2DUnaligned_v2_ptds(&c));
    c = d2(U, a, 0, 0, 10, D, b, 0, 9, 100, 10, 1);
    SHOW(cuMemcpy2DAsync_v2_ptsz(&c, NULL));
    SHOW(cuStreamSynchronize(NULL));
    cuda_emu_memcpy3d_t t = d3(H, hp, 20, 5, D, c3, 20, 5, 10, 4, 5);
    SHOW(cuMemcpy3D_v2(&t));
    t = d3(D, a, 10, 10, D, c3 + 500, 10, 4, 10, 4, 3);
    SHOW(cuMemcpy3D_v2_ptds(&t));
    t = d3(H, hp + 100, 25, 4, D, c3 + 700, 25, 4, 25, 4, 2);
    SHOW(cuMemcpy3DAsync_v2(&t, s));
    t = d3(U, a + 200, 1, 0, U, c3 + 950, 1, 0, 1, 50, 1);
    SHOW(cuMemcpy3DAsync_v2_ptsz(&t, s));
    SHOW(cuStreamSynchronize(s));
    void *fn = NULL;
    SHOW(cuGetProcAddress_v2("cuMemcpy2D", &fn, 13000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL));
    c = d2(H, hp + 500, 0, 0, 50, D, a, 0, 0, 100, 50, 10);
    SHOW(((rzcu_result(*)(const cuda_emu_memcpy2d_t *))fn)(&c));
    /* refused by the driver: a pitch shorter than the row, an array, rows far past the end */
    c = d2(H, hp, 0, 0, 10, D, a, 0, 0, 100, 20, 2);
    SHOW(cuMemcpy2D_v2(&c));
    c = d2(H, hp, 0, 0, 10, CUDA_EMU_MEMORYTYPE_ARRAY, 0, 0, 0, 0, 10, 2);
    SHOW(cuMemcpy2DAsync_v2(&c, s));
    c = d2(H, hp, 0, 0, 100, D, a, 0, 0, 100, 100, 16);
    SHOW(cuMemcpy2D_v2(&c));
    rzcu_deviceptr all[3] = {a, b, c3};
    for (int i = 0; i < 3; i++) {
        c = d2(D, all[i], 0, 0, 1000, H, (uintptr_t)back, 0, 0, 1000, 1000, 1);
        SHOW(cuMemcpy2D_v2(&c));
        printf("rzwriters: checksum of buffer %d: %08x\n", i, sum(back, sizeof back));
    }
    for (int i = 0; i < 3; i++)
        SHOW(cuMemFree_v2(all[i]));
    return 0;
}

static int mode_order(void) {
    setup();
    rzcu_stream s1, s2;
    rzcu_event e;
    rzcu_deviceptr a;
    CHECK(cuStreamCreate(&s1, RZCU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&s2, RZCU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&e, 0));
    CHECK(cuMemAlloc_v2(&a, 1000));
    SHOW(cuMemsetD8Async(a, 1, 1000, s1));
    SHOW(cuEventRecord(e, s1));
    SHOW(cuStreamWaitEvent(s2, e, 0));
    SHOW(cuMemsetD8Async(a, 2, 500, s2));
    SHOW(cuStreamWaitEvent_ptsz(NULL, e, 0));
    SHOW(cuStreamWaitEvent(s2, e, 1));
    SHOW(cuStreamSynchronize(s2));
    unsigned char *h = NULL, *plain = NULL;
    rzcu_deviceptr d = 0;
    SHOW(cuMemHostAlloc((void **)&h, 4096, CUDA_EMU_MEMHOSTALLOC_DEVICEMAP | CUDA_EMU_MEMHOSTALLOC_PORTABLE));
    SHOW(cuMemHostAlloc((void **)&plain, 4096, 0));
    SHOW(cuMemHostAlloc((void **)&plain, 4096, 0x40));
    SHOW(cuMemHostGetDevicePointer_v2(&d, h, 0));
    printf("rzwriters: device pointer is the host pointer: %d\n", d == (rzcu_deviceptr)(uintptr_t)h);
    SHOW(cuMemcpyDtoHAsync_v2(h, a, 1000, s2));
    SHOW(cuStreamSynchronize(s2));
    printf("rzwriters: bytes 0, 499, 500, 999: %02x %02x %02x %02x; checksum %08x\n", h[0], h[499], h[500], h[999],
           sum(h, 1000));
    SHOW(cuMemFreeHost(h));
    SHOW(cuMemFreeHost(plain));
    SHOW(cuMemFree_v2(a));
    return 0;
}

static int mode_ipc(void) {
    setup();
    rzcu_deviceptr a, p = 0, q = 0;
    CHECK(cuMemAlloc_v2(&a, 1000));
    CHECK(cuMemsetD8_v2(a, 0x3c, 1000));
    cuda_emu_ipc_mem_handle_t handle, junk;
    memset(&junk, 0, sizeof junk);
    SHOW(cuIpcGetMemHandle(&handle, a));
    SHOW(cuIpcGetMemHandle(&handle, a + 16));
    SHOW(cuIpcGetMemHandle(&handle, a));
    SHOW(cuIpcOpenMemHandle_v2(&p, handle, CUDA_EMU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    printf("rzwriters: opened at the allocation: %d\n", p == a);
    SHOW(cuIpcOpenMemHandle(&q, handle, CUDA_EMU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    unsigned char back[1000];
    SHOW(cuMemcpyDtoH_v2(back, q, sizeof back));
    printf("rzwriters: read through the opened pointer: %08x\n", sum(back, sizeof back));
    unsigned char mine[1000];
    for (size_t i = 0; i < sizeof mine; i++)
        mine[i] = (unsigned char)(i * 7 + 1);
    SHOW(cuMemcpyHtoD_v2(p, mine, sizeof mine));
    SHOW(cuMemcpyDtoH_v2(back, a, sizeof back));
    printf("rzwriters: written through the opened pointer, read at the allocation: %08x (expected %08x)\n",
           sum(back, sizeof back), sum(mine, sizeof mine));
    SHOW(cuIpcCloseMemHandle(p + 16));
    void *open_fn = NULL, *close_fn = NULL;
    rzcu_deviceptr r = 0;
    SHOW(cuGetProcAddress_v2("cuIpcOpenMemHandle", &open_fn, 13000, 0, NULL));
    SHOW(cuGetProcAddress_v2("cuIpcCloseMemHandle", &close_fn, 13000, 0, NULL));
    SHOW(((rzcu_fn_cuIpcOpenMemHandle_v2 *)open_fn)(&r, handle, CUDA_EMU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    printf("rzwriters: opened through cuGetProcAddress at the allocation: %d\n", r == a);
    SHOW(((rzcu_fn_cuIpcCloseMemHandle *)close_fn)(r));
    SHOW(cuIpcOpenMemHandle_v2(&q, junk, CUDA_EMU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    SHOW(cuIpcOpenMemHandle_v2(&q, handle, 0));
    SHOW(cuIpcCloseMemHandle(p));
    SHOW(cuIpcCloseMemHandle(p));
    SHOW(cuIpcCloseMemHandle(p));
    SHOW(cuMemFree_v2(a));
    SHOW(cuIpcOpenMemHandle_v2(&q, handle, CUDA_EMU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    return 0;
}

static int mode_attrs(void) {
    rzcu_context ctx = setup();
    rzcu_deviceptr p;
    CHECK(cuMemAlloc_v2(&p, 1000));
    CHECK(cuMemsetD8_v2(p, 0, 1000)); /* device work: the band is in place */
    const long at[] = {10, 999, 1000, 1040, -256, -1};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        rzcu_context owner = (rzcu_context)(uintptr_t)1;
        rzcu_deviceptr start = 1;
        size_t size = 1;
        int ordinal = 99;
        rzcu_pointer_attribute which[] = {RZCU_POINTER_ATTRIBUTE_CONTEXT, RZCU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                          RZCU_POINTER_ATTRIBUTE_RANGE_SIZE, RZCU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
        void *data[] = {&owner, &start, &size, &ordinal};
        rzcu_result r = cuPointerGetAttributes(4, which, data, p + (rzcu_deviceptr)at[i]);
        printf("rzwriters: cuPointerGetAttributes(p %+ld) = %u: owner is the context %d, null %d; range start - p "
               "%lld; range size %zu; ordinal %d\n",
               at[i], (unsigned)r, owner == ctx, owner == NULL, start ? (long long)(start - p) : -99999, size, ordinal);
    }
    rzcu_pointer_attribute one = RZCU_POINTER_ATTRIBUTE_RANGE_SIZE;
    size_t size = 0;
    void *data[] = {&size};
    SHOW(cuPointerGetAttributes(1, &one, NULL, p));
    SHOW(cuPointerGetAttributes(1, NULL, data, p));
    void *fn = NULL;
    SHOW(cuGetProcAddress_v2("cuPointerGetAttributes", &fn, 13000, 0, NULL));
    SHOW(((rzcu_fn_cuPointerGetAttributes *)fn)(1, &one, data, p + 1010));
    printf("rzwriters: range size past the end through cuGetProcAddress: %zu\n", size);
    SHOW(cuMemFree_v2(p));
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc == 2 && strcmp(argv[1], "copies") == 0)
        return mode_copies();
    if (argc == 2 && strcmp(argv[1], "order") == 0)
        return mode_order();
    if (argc == 2 && strcmp(argv[1], "ipc") == 0)
        return mode_ipc();
    if (argc == 2 && strcmp(argv[1], "attrs") == 0)
        return mode_attrs();
    fprintf(stderr, "usage: rzwriters copies|order|ipc|attrs\n");
    return 2;
}
