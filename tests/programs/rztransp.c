/*
 * A CUDA driver-API program for redzone's transparency (issue 18): what the program sees must be what the
 * driver alone shows it. Run by tests/test_transparency.c with and without libredzone.so preloaded; it prints
 * every result code, so the two runs can be compared line by line. It knows nothing of redzone.
 *   rztransp badfree   cuMemFree of a pointer 256 bytes before a 1000-byte buffer (inside its front band with
 *                      METRALE_REDZONE_FRONT=256), then of the buffer itself
 *   rztransp attr      cuPointerGetAttribute on a 1000-byte buffer: its range (RANGE_START_ADDR as an offset from
 *                      the pointer, RANGE_SIZE) from inside it, and CONTEXT one and 40 bytes past its end
 *   rztransp memset    cuMemsetD16/D32 and cuMemsetD2D8/16/32, plain, async and per-thread, inside a 1000-byte
 *                      buffer; prints a checksum of the buffer and the bytes at a few places
 *   rztransp memsetbad the same memsets misaligned, with a pitch shorter than a row, or reaching past the end
 *   rztransp unified   cuMemcpy/cuMemcpyAsync (unified addressing) host to device, device to device, device to host
 *                      and host to host
 *   rztransp refused   a kernel writes 8 bytes past the end of a 1000-byte buffer; cuMemFree with no current
 *                      context (refused by the driver), then again with one
 *   rztransp pastend   copies (HtoD, DtoH, DtoD, unified, async, per-thread, 2D, 3D, batched, 3D batched) and memsets
 *                      (D8/16/32, 2D, async)
 *                      that run past the end of 1000-byte buffers or start in what would be a band, and the
 *                      same up to the end exactly; prints each result and the bytes the program then holds
 *   rztransp before    (with METRALE_REDZONE_FRONT) a copy starting 16 bytes before a buffer, and a memset
 *                      from 8 bytes before it into it
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_emu.h"

#define PROG "rztransp"
#include "prog.h"

#define SHOW(call) printf("rztransp: %s = %u\n", #call, (unsigned)(call))

/* Writes n bytes of 0x5a from p + at. */
CUDA_EMU_KERNEL(past, sizeof(rzcu_deviceptr), sizeof(size_t), sizeof(size_t)) {
    unsigned char *p = (unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    memset(p + CUDA_EMU_PARAM(size_t, 1), 0x5a, CUDA_EMU_PARAM(size_t, 2));
}

static int mode_badfree(void) {
    setup();
    rzcu_deviceptr p;
    CHECK(cuMemAlloc_v2(&p, 1000));
    SHOW(cuMemFree_v2(p - 256));
    SHOW(cuMemFree_v2(p));
    return 0;
}

static int mode_attr(void) {
    rzcu_context ctx = setup();
    rzcu_deviceptr p, start = 0;
    size_t size = 0;
    rzcu_context owner = NULL;
    CHECK(cuMemAlloc_v2(&p, 1000));
    CHECK(cuMemsetD8_v2(p, 0, 1000)); /* device work: the band is in place */
    SHOW(cuPointerGetAttribute(&start, RZCU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p + 10));
    printf("rztransp: range start - p = %lld\n", (long long)(start - p));
    SHOW(cuPointerGetAttribute(&size, RZCU_POINTER_ATTRIBUTE_RANGE_SIZE, p + 999));
    printf("rztransp: range size = %zu\n", size);
    SHOW(cuPointerGetAttribute(&owner, RZCU_POINTER_ATTRIBUTE_CONTEXT, p + 500));
    printf("rztransp: owner is the context: %d\n", owner == ctx);
    SHOW(cuPointerGetAttribute(&owner, RZCU_POINTER_ATTRIBUTE_CONTEXT, p + 1000));
    SHOW(cuPointerGetAttribute(&owner, RZCU_POINTER_ATTRIBUTE_CONTEXT, p + 1040));
    SHOW(cuMemFree_v2(p));
    return 0;
}

static unsigned sum_of(rzcu_deviceptr p, size_t n) {
    static unsigned char h[4096];
    CHECK(cuMemcpyDtoH_v2(h, p, n));
    unsigned sum = 0;
    for (size_t i = 0; i < n; i++)
        sum = sum * 31 + h[i];
    printf("rztransp: bytes 0,1,20,23,100,116,131,200,300: %02x %02x %02x %02x %02x %02x %02x %02x %02x\n", h[0],
           h[1], h[20], h[23], h[100], h[116], h[131], h[200], h[300]);
    return sum;
}

static int mode_memset(void) {
    setup();
    rzcu_deviceptr p;
    rzcu_stream s;
    CHECK(cuStreamCreate(&s, 0));
    CHECK(cuMemAlloc_v2(&p, 1000));
    SHOW(cuMemsetD8_v2(p, 0, 1000));
    SHOW(cuMemsetD16_v2(p, 0x1234, 10));
    SHOW(cuMemsetD32_v2(p + 20, 0xdeadbeefu, 5));
    SHOW(cuMemsetD2D8_v2(p + 100, 16, 0x77, 4, 3));
    SHOW(cuMemsetD2D16_v2(p + 200, 32, 0xabcd, 4, 4));
    SHOW(cuMemsetD2D32Async(p + 300, 64, 0x01020304u, 8, 5, s));
    SHOW(cuMemsetD16Async_ptsz(p + 600, 0x5566, 50, NULL));
    SHOW(cuMemsetD32_v2_ptds(p + 800, 0x0a0b0c0du, 50));
    SHOW(cuMemsetD2D8Async(p + 900, 10, 0x99, 0, 4, s));
    SHOW(cuStreamSynchronize(s));
    printf("rztransp: checksum %08x\n", sum_of(p, 1000));
    SHOW(cuMemFree_v2(p));
    return 0;
}

static int mode_memsetbad(void) {
    setup();
    rzcu_deviceptr p;
    CHECK(cuMemAlloc_v2(&p, 1000));
    SHOW(cuMemsetD16_v2(p + 1, 1, 4));
    SHOW(cuMemsetD32_v2(p + 2, 1, 4));
    SHOW(cuMemsetD2D8_v2(p, 4, 1, 8, 2));
    SHOW(cuMemsetD32_v2(p + 996, 1, 2));
    SHOW(cuMemsetD2D32_v2(p, 500, 1, 4, 3));
    SHOW(cuMemsetD16_v2(p, 1, 0));
    SHOW(cuMemFree_v2(p));
    return 0;
}

static int mode_unified(void) {
    setup();
    rzcu_deviceptr a, b;
    rzcu_stream s;
    static unsigned char h[1000], g[1000];
    for (int i = 0; i < 1000; i++)
        h[i] = (unsigned char)(i * 7);
    CHECK(cuStreamCreate(&s, 0));
    CHECK(cuMemAlloc_v2(&a, 1000));
    CHECK(cuMemAlloc_v2(&b, 1000));
    SHOW(cuMemcpy(a, (rzcu_deviceptr)(uintptr_t)h, 1000));
    SHOW(cuMemcpyAsync(b, a, 1000, s));
    SHOW(cuStreamSynchronize(s));
    SHOW(cuMemcpy_ptds((rzcu_deviceptr)(uintptr_t)g, b, 1000));
    printf("rztransp: round trip equal: %d\n", memcmp(g, h, 1000) == 0);
    memset(g, 0, sizeof g);
    SHOW(cuMemcpyAsync_ptsz((rzcu_deviceptr)(uintptr_t)g, (rzcu_deviceptr)(uintptr_t)h, 1000, NULL));
    SHOW(cuStreamSynchronize(NULL));
    printf("rztransp: host to host equal: %d\n", memcmp(g, h, 1000) == 0);
    SHOW(cuMemcpy(a, b, 0));
    SHOW(cuMemFree_v2(a));
    SHOW(cuMemFree_v2(b));
    return 0;
}

static int mode_refused(void) {
    rzcu_context ctx = setup();
    rzcu_module mod;
    rzcu_function f;
    CHECK(cuModuleLoadData(&mod, "emulated module"));
    CHECK(cuModuleGetFunction(&f, mod, "past"));
    rzcu_deviceptr p;
    CHECK(cuMemAlloc_v2(&p, 1000));
    size_t at = 1000, n = 8;
    void *params[] = {&p, &at, &n};
    CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    CHECK(cuCtxSynchronize());
    CHECK(cuCtxSetCurrent(NULL));
    SHOW(cuMemFree_v2(p));
    CHECK(cuCtxSetCurrent(ctx));
    SHOW(cuMemFree_v2(p));
    return 0;
}

/* A checksum of the program's bytes in p[0, n) and of a host buffer. */
static unsigned sum_bytes(const unsigned char *h, size_t n) {
    unsigned sum = 0;
    for (size_t i = 0; i < n; i++)
        sum = sum * 31 + h[i];
    return sum;
}

static int mode_pastend(void) {
    setup();
    rzcu_deviceptr a, b;
    rzcu_stream s;
    static unsigned char h[2048], g[2048];
    for (size_t i = 0; i < sizeof h; i++)
        h[i] = (unsigned char)(i * 13 + 5);
    CHECK(cuStreamCreate(&s, 0));
    CHECK(cuMemAlloc_v2(&a, 1000));
    CHECK(cuMemAlloc_v2(&b, 1000));
    SHOW(cuMemsetD8_v2(b, 0x11, 1000));
    /* Past the end: refused by the driver without redzone, so refused with it. */
    SHOW(cuMemcpyHtoD_v2(a, h, 1008));
    SHOW(cuMemcpyHtoD_v2_ptds(a + 996, h, 5));
    SHOW(cuMemcpyHtoDAsync_v2(a + 1, h, 1000, s));
    SHOW(cuMemcpyDtoH_v2(g, a, 1008));
    SHOW(cuMemcpyDtoHAsync_v2_ptsz(g, a + 999, 2, NULL));
    SHOW(cuMemcpyDtoD_v2(b, a, 1001));
    SHOW(cuMemcpyDtoD_v2(b + 500, a, 600));
    SHOW(cuMemcpyDtoDAsync_v2(b, a + 1000, 8, s));
    SHOW(cuMemcpy(a, (rzcu_deviceptr)(uintptr_t)h, 1010));
    SHOW(cuMemcpyAsync((rzcu_deviceptr)(uintptr_t)g, a, 1004, s));
    SHOW(cuMemsetD8_v2(a + 999, 0x22, 2));
    SHOW(cuMemsetD8Async(a, 0x22, 1001, s));
    SHOW(cuMemsetD16_v2(a + 998, 0x2222, 2));
    SHOW(cuMemsetD32_v2(a, 0x22222222u, 251));
    SHOW(cuMemsetD2D8_v2(a, 100, 0x22, 10, 11));
    SHOW(cuMemsetD2D32Async(a + 4, 100, 0x22222222u, 25, 10, s));
    /* Pitched copies: the extent of a device side, first row to last, leaves a (or starts in its band). */
    cuda_emu_memcpy2d_t c2 = {.srcMemoryType = CUDA_EMU_MEMORYTYPE_HOST, .srcHost = h, .srcPitch = 10,
                              .dstMemoryType = CUDA_EMU_MEMORYTYPE_DEVICE, .dstDevice = a, .dstPitch = 100,
                              .WidthInBytes = 10, .Height = 11};
    SHOW(cuMemcpy2D_v2(&c2));
    c2.dstY = 1, c2.Height = 10;
    SHOW(cuMemcpy2DAsync_v2(&c2, s));
    c2.dstY = 0, c2.dstXInBytes = 1000, c2.dstPitch = 2000, c2.Height = 1; /* one row, in the band */
    SHOW(cuMemcpy2DUnaligned_v2(&c2));
    c2.dstPitch = 100;
    cuda_emu_memcpy3d_t c3 = {.srcXInBytes = 90, .srcMemoryType = CUDA_EMU_MEMORYTYPE_DEVICE, .srcDevice = a,
                              .srcPitch = 101, .srcHeight = 5, .dstMemoryType = CUDA_EMU_MEMORYTYPE_UNIFIED,
                              .dstDevice = b, .dstPitch = 100, .dstHeight = 5, .WidthInBytes = 10, .Height = 5,
                              .Depth = 2};
    SHOW(cuMemcpy3D_v2(&c3));
    /* A batch with one copy that leaves b: refused whole, its index in failIdx. */
    rzcu_deviceptr dsts[3] = {b, b + 500, b}, srcs[3] = {a, a, a};
    size_t sizes[3] = {100, 600, 10}, attr_idx = 0, fail = 77;
    rzcu_memcpy_attributes attr = {.srcAccessOrder = RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
    SHOW(cuMemcpyBatchAsync(dsts, srcs, sizes, 3, &attr, &attr_idx, 1, &fail, s));
    printf("rztransp: batch failIdx %zu\n", fail);
    SHOW(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, &attr, &attr_idx, 1, s));
    /* 3D batches: a pointer operand's bytes run from its first row to the last row of its last layer. */
#define OPERAND(p, ...) {.type = RZCU_MEMCPY_OPERAND_TYPE_POINTER, .op.ptr = {.ptr = (p), __VA_ARGS__}}
    rzcu_memcpy3d_batch_op ops[3] = {
        {.src = OPERAND(a), .dst = OPERAND(b), .extent = {10, 2, 1},
         .srcAccessOrder = RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM},
        /* 2 layers of 3 rows of 20 bytes, layers 4 rows apart, from b + 900: 40 bytes past the end of b */
        {.src = OPERAND((rzcu_deviceptr)(uintptr_t)h), .dst = OPERAND(b + 900, .layerHeight = 4), .extent = {20, 3, 2},
         .srcAccessOrder = RZCU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL},
        /* 2 layers of 5 rows 101 bytes apart, bytes 90..99 of each, from a: 9 bytes past the end of a */
        {.src = OPERAND(a + 90, .rowLength = 101, .layerHeight = 5), .dst = OPERAND(b, .rowLength = 100),
         .extent = {10, 5, 2}, .srcAccessOrder = RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM},
    };
#undef OPERAND
    fail = 77;
    SHOW(cuMemcpy3DBatchAsync(3, ops, &fail, 0, s));
    printf("rztransp: batch3d failIdx %zu\n", fail);
    SHOW(cuMemcpy3DBatchAsync_v2(1, ops + 2, 0, s));
    ops[0].srcAccessOrder = 0; /* an operation the driver refuses by itself, before the bad ones: its answer */
    fail = 77;
    SHOW(cuMemcpy3DBatchAsync(3, ops, &fail, 0, s));
    printf("rztransp: batch3d failIdx %zu\n", fail);
    ops[0].srcAccessOrder = RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    ops[1].dst.op.ptr.ptr = b + 860; /* up to the end: the last bad operation is the read */
    fail = 77;
    SHOW(cuMemcpy3DBatchAsync_ptsz(3, ops, &fail, 0, s));
    printf("rztransp: batch3d failIdx %zu\n", fail);
    SHOW(cuStreamSynchronize(s));
    /* Up to the end exactly, and nothing at all at the end: the driver's work, done. */
    SHOW(cuMemcpyHtoD_v2(a, h, 1000));
    SHOW(cuMemcpyDtoH_v2(g, a + 992, 8));
    printf("rztransp: last 8 bytes delivered equal: %d\n", memcmp(g, h + 992, 8) == 0);
    SHOW(cuMemcpyDtoDAsync_v2(b + 500, a + 500, 500, s));
    SHOW(cuMemsetD8_v2(a + 1000, 0x33, 0));
    SHOW(cuMemsetD2D8_v2(a + 90, 100, 0x44, 10, 10));
    c2.dstXInBytes = 90, c2.Height = 10; /* rows 0..9, bytes 90..99 of each: up to the end */
    SHOW(cuMemcpy2D_v2(&c2));
    c3.srcPitch = 100; /* 2 layers of 5 rows, bytes 90..99 of each: up to the end */
    SHOW(cuMemcpy3D_v2(&c3));
    ops[2].src.op.ptr.rowLength = 100; /* the same, in a 3D batch whose every operation now ends in its buffer */
    SHOW(cuMemcpy3DBatchAsync_v2_ptsz(3, ops, 0, s));
    SHOW(cuMemcpyDtoH_v2(g, a + 1000, 0));
    SHOW(cuStreamSynchronize(s));
    SHOW(cuMemcpyDtoH_v2(g, a, 1000));
    SHOW(cuMemcpyDtoH_v2(g + 1000, b, 1000));
    printf("rztransp: bytes of a and b: %08x\n", sum_bytes(g, 2000));
    SHOW(cuMemFree_v2(a));
    SHOW(cuMemFree_v2(b));
    return 0;
}

static int mode_before(void) {
    setup();
    rzcu_deviceptr a;
    static unsigned char g[64];
    CHECK(cuMemAlloc_v2(&a, 1000));
    SHOW(cuMemsetD8_v2(a, 0x11, 1000));
    SHOW(cuMemcpyDtoH_v2(g, a - 16, 8));
    SHOW(cuMemsetD8_v2(a - 8, 0x22, 16));
    SHOW(cuMemcpyDtoH_v2(g, a, 16));
    printf("rztransp: first bytes untouched: %d\n", g[0] == 0x11 && g[15] == 0x11);
    SHOW(cuMemFree_v2(a));
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc == 2 && strcmp(argv[1], "badfree") == 0)
        return mode_badfree();
    if (argc == 2 && strcmp(argv[1], "attr") == 0)
        return mode_attr();
    if (argc == 2 && strcmp(argv[1], "memset") == 0)
        return mode_memset();
    if (argc == 2 && strcmp(argv[1], "memsetbad") == 0)
        return mode_memsetbad();
    if (argc == 2 && strcmp(argv[1], "unified") == 0)
        return mode_unified();
    if (argc == 2 && strcmp(argv[1], "refused") == 0)
        return mode_refused();
    if (argc == 2 && strcmp(argv[1], "pastend") == 0)
        return mode_pastend();
    if (argc == 2 && strcmp(argv[1], "before") == 0)
        return mode_before();
    fprintf(stderr, "usage: rztransp badfree|attr|memset|memsetbad|unified|refused|pastend|before\n");
    return 2;
}
