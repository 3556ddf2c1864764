/* Tests of the emulated CUDA driver (native/emu): 2D and 3D copies (cuMemcpy2D/3D and their unaligned,
 * async and per-thread forms). Part of test_emu (tests/emu.cmake); shared helpers in emu_test_util.h. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "emu_test_util.h"

/* A 2D descriptor with every field zero but these. */
static cuda_emu_memcpy2d_t desc2d(unsigned stype, uintptr_t src, size_t spitch, unsigned dtype, uintptr_t dst,
                                  size_t dpitch, size_t width, size_t height)
{
    cuda_emu_memcpy2d_t d;
    memset(&d, 0, sizeof d);
    d.srcMemoryType = stype;
    if (stype == CUDA_EMU_MEMORYTYPE_HOST)
        d.srcHost = (const void *)src;
    else
        d.srcDevice = (rzcu_deviceptr)src;
    d.srcPitch = spitch;
    d.dstMemoryType = dtype;
    if (dtype == CUDA_EMU_MEMORYTYPE_HOST)
        d.dstHost = (void *)dst;
    else
        d.dstDevice = (rzcu_deviceptr)dst;
    d.dstPitch = dpitch;
    d.WidthInBytes = width;
    d.Height = height;
    return d;
}

#define H CUDA_EMU_MEMORYTYPE_HOST
#define D CUDA_EMU_MEMORYTYPE_DEVICE
#define U CUDA_EMU_MEMORYTYPE_UNIFIED

/* Host to device into a sub-rectangle, device to device, device to host: every byte where it belongs, and the
 * bytes between rows and around the rectangle untouched. */
Test(emu, copy2d_moves_rows_between_host_and_device)
{
    primary_current();
    unsigned char src[8][16], back[4][32];
    for (int y = 0; y < 8; y++)
        for (int x = 0; x < 16; x++)
            src[y][x] = (unsigned char)(y * 16 + x);
    rzcu_deviceptr a, b;
    size_t pitch = 0;
    OK(cuMemAllocPitch_v2(&a, &pitch, 40, 6, 4));
    cr_assert_eq(pitch, CUDA_EMU_PITCH_ALIGN);
    OK(cuMemsetD8_v2(a, 0xee, pitch * 6));
    OK(cuMemAlloc_v2(&b, 4 * 32));
    OK(cuMemsetD8_v2(b, 0xdd, 4 * 32));
    /* rows 2..5 of src, columns 3..12, to rows 1..4 of a at column 7 */
    cuda_emu_memcpy2d_t c = desc2d(H, (uintptr_t)src, 16, D, a, pitch, 10, 4);
    c.srcXInBytes = 3;
    c.srcY = 2;
    c.dstXInBytes = 7;
    c.dstY = 1;
    OK(cuMemcpy2D_v2(&c));
    /* a's rectangle to b (pitch 32) at column 1, unified addressing on both sides */
    c = desc2d(U, a + pitch + 7, pitch, U, b + 1, 32, 10, 4);
    OK(cuMemcpy2DUnaligned_v2(&c));
    memset(back, 0, sizeof back);
    c = desc2d(D, b, 32, H, (uintptr_t)back, 32, 32, 4);
    OK(cuMemcpy2D_v2_ptds(&c));
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 32; x++) {
            unsigned char want = x >= 1 && x < 11 ? src[y + 2][x - 1 + 3] : 0xdd;
            cr_assert_eq(back[y][x], want, "row %d column %d: %#x", y, x, back[y][x]);
        }
    unsigned char row0[512], row1[512];
    OK(cuMemcpyDtoH_v2(row0, a, sizeof row0));
    OK(cuMemcpyDtoH_v2(row1, a + pitch, sizeof row1));
    for (size_t x = 0; x < pitch; x++) {
        cr_assert_eq(row0[x], 0xee, "row 0 untouched");
        cr_assert_eq(row1[x], x >= 7 && x < 17 ? src[2][x - 7 + 3] : 0xee, "row 1 column %zu", x);
    }
    OK(cuMemFree_v2(a));
    OK(cuMemFree_v2(b));
}

/* The driver's rules: each is CUDA_ERROR_INVALID_VALUE (arrays: NOT_SUPPORTED here) and copies nothing. */
Test(emu, copy2d_rules)
{
    primary_current();
    static unsigned char h[4096], bad[4096];
    memset(h, 0x11, sizeof h);
    memset(bad, 0x22, sizeof bad); /* the source of every refused copy */
    rzcu_deviceptr a;
    OK(cuMemAlloc_v2(&a, 1000));
    OK(cuMemsetD8_v2(a, 0, 1000));
    cuda_emu_memcpy2d_t c;
    FAILS(cuMemcpy2D_v2(NULL), RZCUDA_ERROR_INVALID_VALUE);
    c = desc2d(H, (uintptr_t)h, 100, D, a, 100, 100, 10);
    OK(cuMemcpy2D_v2(&c)); /* exactly the 1000 bytes */
    c = desc2d(H, (uintptr_t)bad, 100, D, a, 100, 100, 11);
    FAILS(cuMemcpy2D_v2(&c), RZCUDA_ERROR_INVALID_VALUE); /* the last row lies past the end */
    c = desc2d(H, (uintptr_t)bad, 100, D, a, 100, 1, 11);
    FAILS(cuMemcpy2D_v2(&c), RZCUDA_ERROR_INVALID_VALUE); /* row 10's only byte is byte 1000 */
    c = desc2d(H, (uintptr_t)h, 100, D, a, 100, 1, 10);
    c.dstXInBytes = 99;
    OK(cuMemcpy2D_v2(&c)); /* 99 + 9 x 100: byte 999 */
    c = desc2d(H, (uintptr_t)bad, 100, D, a, 100, 1, 10);
    c.dstXInBytes = 99;
    c.dstY = 1;
    FAILS(cuMemcpy2D_v2(&c), RZCUDA_ERROR_INVALID_VALUE); /* the Y offset moves it past the end */
    c = desc2d(H, (uintptr_t)bad, 50, D, a, 100, 60, 2);
    FAILS(cuMemcpy2D_v2(&c), RZCUDA_ERROR_INVALID_VALUE); /* a source pitch shorter than a row */
    c = desc2d(H, (uintptr_t)bad, 100, D, a, 100, 60, 2);
    c.dstXInBytes = 41;
    FAILS(cuMemcpy2D_v2(&c), RZCUDA_ERROR_INVALID_VALUE); /* the row from its X offset past the pitch */
    c = desc2d(H, (uintptr_t)bad, (size_t)1 << 31, D, a, 100, 10, 1);
    FAILS(cuMemcpy2D_v2(&c), RZCUDA_ERROR_INVALID_VALUE); /* above MAX_PITCH */
    c = desc2d(H, (uintptr_t)bad, 100, CUDA_EMU_MEMORYTYPE_ARRAY, 0, 100, 10, 1);
    FAILS(cuMemcpy2D_v2(&c), RZCUDA_ERROR_NOT_SUPPORTED); /* no CUDA arrays in the emulator */
    c = desc2d(0, (uintptr_t)bad, 100, D, a, 100, 10, 1);
    FAILS(cuMemcpy2D_v2(&c), RZCUDA_ERROR_INVALID_VALUE);
    c = desc2d(H, (uintptr_t)bad, 100, 5, a, 100, 10, 1);
    FAILS(cuMemcpy2D_v2(&c), RZCUDA_ERROR_INVALID_VALUE);
    c = desc2d(H, (uintptr_t)bad, 100, D, (uintptr_t)h, 100, 10, 1);
    FAILS(cuMemcpy2D_v2(&c), RZCUDA_ERROR_INVALID_VALUE); /* host memory named device memory */
    c = desc2d(H, a, 100, D, a + 500, 100, 10, 1);
    FAILS(cuMemcpy2D_v2(&c), RZCUDA_ERROR_INVALID_VALUE); /* device memory named host memory */
    c = desc2d(H, 0, 100, D, a, 100, 10, 1);
    FAILS(cuMemcpy2D_v2(&c), RZCUDA_ERROR_INVALID_VALUE); /* no host pointer */
    c = desc2d(H, 0, 100, D, 0, 100, 0, 1);
    OK(cuMemcpy2D_v2(&c)); /* nothing to copy */
    c = desc2d(H, (uintptr_t)bad, 100, D, a, 100, 10, 0);
    OK(cuMemcpy2DAsync_v2(&c, NULL));
    c.Height = 1;
    FAILS(cuMemcpy2DAsync_v2(&c, (rzcu_stream)(uintptr_t)0x1234), RZCUDA_ERROR_INVALID_HANDLE);
    unsigned char back[1000];
    OK(cuMemcpyDtoH_v2(back, a, sizeof back));
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(back[i], 0x11, "byte %d written by a refused copy", i);
    OK(cuCtxSetCurrent(NULL));
    FAILS(cuMemcpy2D_v2(&c), RZCUDA_ERROR_INVALID_CONTEXT);
}

/* Slices of a 3D copy: slice pitch = pitch x slice height on each side; the 3D-only fields checked. */
Test(emu, copy3d_moves_slices_and_checks_its_fields)
{
    primary_current();
    enum { W = 8, HH = 3, DD = 4, SP = 12, SH = 5 };
    unsigned char src[DD][SH][SP], back[DD][HH][W];
    for (size_t i = 0; i < sizeof src; i++)
        ((unsigned char *)src)[i] = (unsigned char)(i * 7 + 1);
    rzcu_deviceptr a;
    OK(cuMemAlloc_v2(&a, DD * HH * W));
    cuda_emu_memcpy3d_t c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = H;
    c.srcHost = src;
    c.srcPitch = SP;
    c.srcHeight = SH;
    c.srcXInBytes = 2;
    c.srcY = 1;
    c.dstMemoryType = D;
    c.dstDevice = a;
    c.dstPitch = W;
    c.dstHeight = HH;
    c.WidthInBytes = W;
    c.Height = HH;
    c.Depth = DD;
    OK(cuMemcpy3D_v2(&c));
    cuda_emu_memcpy3d_t r;
    memset(&r, 0, sizeof r);
    r.srcMemoryType = U;
    r.srcDevice = a;
    r.srcPitch = W;
    r.srcHeight = HH;
    r.dstMemoryType = U;
    r.dstDevice = (rzcu_deviceptr)(uintptr_t)back;
    r.dstPitch = W;
    r.dstHeight = HH;
    r.WidthInBytes = W;
    r.Height = HH;
    r.Depth = DD;
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    OK(cuMemcpy3DAsync_v2(&r, s));
    OK(cuStreamSynchronize(s));
    for (int z = 0; z < DD; z++)
        for (int y = 0; y < HH; y++)
            for (int x = 0; x < W; x++)
                cr_assert_eq(back[z][y][x], src[z][y + 1][x + 2], "%d,%d,%d", z, y, x);
    cuda_emu_memcpy3d_t bad = c;
    bad.srcLOD = 1;
    FAILS(cuMemcpy3D_v2(&bad), RZCUDA_ERROR_INVALID_VALUE);
    bad = c;
    bad.dstContext = &bad; /* CUDA_MEMCPY3D reserved1: must be NULL */
    FAILS(cuMemcpy3D_v2(&bad), RZCUDA_ERROR_INVALID_VALUE);
    bad = c;
    bad.srcHeight = SH - 2; /* Height + srcY = 4 rows needed */
    FAILS(cuMemcpy3D_v2(&bad), RZCUDA_ERROR_INVALID_VALUE);
    bad = c;
    bad.dstHeight = 0; /* only one slice may leave it 0 */
    FAILS(cuMemcpy3D_v2(&bad), RZCUDA_ERROR_INVALID_VALUE);
    bad.Depth = 1;
    OK(cuMemcpy3D_v2_ptds(&bad));
    bad = c;
    bad.dstZ = 1; /* the last slice past the end */
    FAILS(cuMemcpy3D_v2(&bad), RZCUDA_ERROR_INVALID_VALUE);
    bad = c;
    bad.dstMemoryType = CUDA_EMU_MEMORYTYPE_ARRAY;
    FAILS(cuMemcpy3DAsync_v2_ptsz(&bad, NULL), RZCUDA_ERROR_NOT_SUPPORTED);
    FAILS(cuMemcpy3D_v2(NULL), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree_v2(a));
}

/* An asynchronous 2D copy is one operation of its stream: it runs after the work before it. */
Test(emu, copy2d_async_runs_in_stream_order)
{
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr a;
    OK(cuMemAlloc_v2(&a, 256));
    OK(cuMemsetD8_v2(a, 0, 256));
    static unsigned char src[256];
    memset(src, 0x42, sizeof src);
    struct gate g = GATE_INIT;
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g));
    gate_await_entered(&g);
    cuda_emu_memcpy2d_t c = desc2d(H, (uintptr_t)src, 16, D, a, 16, 16, 16);
    OK(cuMemcpy2DAsync_v2(&c, s));
    unsigned char seen = 1;
    OK(cuMemcpyDtoH_v2(&seen, a + 255, 1)); /* the legacy stream does not wait for a non-blocking one */
    cr_assert_eq(seen, 0, "queued behind the host function");
    gate_open(&g);
    OK(cuStreamSynchronize(s));
    OK(cuMemcpyDtoH_v2(&seen, a + 255, 1));
    cr_assert_eq(seen, 0x42);
}

/* Recorded during capture, replayed by every launch of the graph. */
Test(emu, copy2d_is_captured_into_graphs)
{
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr a, b;
    OK(cuMemAlloc_v2(&a, 64));
    OK(cuMemAlloc_v2(&b, 64));
    OK(cuMemsetD8_v2(a, 7, 64));
    OK(cuMemsetD8_v2(b, 0, 64));
    cuda_emu_memcpy2d_t c = desc2d(D, a, 8, D, b, 8, 8, 8);
    OK(cuStreamBeginCapture_v2(s, 0));
    OK(cuMemcpy2DAsync_v2(&c, s));
    unsigned char seen = 1;
    OK(cuMemcpyDtoH_v2(&seen, b + 63, 1));
    cr_assert_eq(seen, 0, "captured, not run");
    struct CUgraph_st *graph;
    OK(cuStreamEndCapture(s, &graph));
    struct CUgraphExec_st *exec;
    OK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    OK(cuGraphLaunch(exec, s));
    OK(cuStreamSynchronize(s));
    OK(cuMemcpyDtoH_v2(&seen, b + 63, 1));
    cr_assert_eq(seen, 7);
    OK(cuGraphExecDestroy(exec));
    OK(cuGraphDestroy(graph));
}

/* cuGetProcAddress hands out the _v2 entry points and their per-thread forms. */
Test(emu, copy2d_entry_points_by_get_proc_address)
{
    void *fn = NULL;
    rzcu_proc_query_result st = 9;
    OK(cuGetProcAddress_v2("cuMemcpy2D", &fn, 13000, 0, &st));
    cr_assert_eq(fn, (void *)&cuMemcpy2D_v2);
    OK(cuGetProcAddress_v2("cuMemcpy2D", &fn, 13000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    cr_assert_eq(fn, (void *)&cuMemcpy2D_v2_ptds);
    OK(cuGetProcAddress_v2("cuMemcpy2DUnaligned", &fn, 12000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    cr_assert_eq(fn, (void *)&cuMemcpy2DUnaligned_v2_ptds);
    OK(cuGetProcAddress_v2("cuMemcpy2DAsync", &fn, 12000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    cr_assert_eq(fn, (void *)&cuMemcpy2DAsync_v2_ptsz);
    OK(cuGetProcAddress_v2("cuMemcpy3D", &fn, 3020, 0, &st));
    cr_assert_eq(fn, (void *)&cuMemcpy3D_v2);
    OK(cuGetProcAddress_v2("cuMemcpy3DAsync", &fn, 13000, RZCU_GET_PROC_ADDRESS_LEGACY_STREAM, &st));
    cr_assert_eq(fn, (void *)&cuMemcpy3DAsync_v2);
    FAILS(cuGetProcAddress_v2("cuMemcpy3D", &fn, 3000, 0, &st), RZCUDA_ERROR_NOT_FOUND);
    cr_assert_eq(st, RZCU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
}
