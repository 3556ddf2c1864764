/* Tests of the emulated CUDA driver (native/emu): cuMemcpy3DBatchAsync, its CUDA 12.8 (failIdx) and 13.0 forms
 * and their per-thread ones. Part of test_emu (tests/emu.cmake); shared helpers in emu_test_util.h. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "emu_test_util.h"

/* A pointer operand: rows row_length bytes apart, layers layer_height rows apart (0: tightly packed). */
static rzcu_memcpy3d_operand ptr_operand(uintptr_t p, size_t row_length, size_t layer_height)
{
    rzcu_memcpy3d_operand o;
    memset(&o, 0, sizeof o);
    o.type = RZCU_MEMCPY_OPERAND_TYPE_POINTER;
    o.op.ptr.ptr = (rzcu_deviceptr)p;
    o.op.ptr.rowLength = row_length;
    o.op.ptr.layerHeight = layer_height;
    return o;
}

static rzcu_memcpy3d_batch_op batch_op(rzcu_memcpy3d_operand src, rzcu_memcpy3d_operand dst, size_t w, size_t h,
                                       size_t d)
{
    rzcu_memcpy3d_batch_op op;
    memset(&op, 0, sizeof op);
    op.src = src;
    op.dst = dst;
    op.extent = (rzcu_extent3d){w, h, d};
    op.srcAccessOrder = RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    return op;
}

/* Host to device into a box with gaps between rows and layers, device to device tightly packed, device to host:
 * every byte where it belongs and the gaps untouched, through each of the four forms. */
Test(emu, batch3d_moves_boxes_of_rows_and_layers)
{
    primary_current();
    enum { W = 6, HH = 3, DD = 2, RL = 10, LH = 4 }; /* the device box: rows of 10 bytes, layers of 4 rows */
    static unsigned char src[DD][HH][W], back[DD][HH][W], box[DD * LH * RL];
    for (size_t i = 0; i < sizeof src; i++)
        ((unsigned char *)src)[i] = (unsigned char)(i * 11 + 3);
    rzcu_deviceptr a, b;
    OK(cuMemAlloc_v2(&a, sizeof box));
    OK(cuMemAlloc_v2(&b, sizeof src));
    OK(cuMemsetD8_v2(a, 0xee, sizeof box));
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    size_t fail = 7;
    /* host (tightly packed) to a (pitched), then a to b (tightly packed): two batches, in that order on the
     * stream */
    rzcu_memcpy3d_batch_op in = batch_op(ptr_operand((uintptr_t)src, 0, 0), ptr_operand(a, RL, LH), W, HH, DD);
    OK(cuMemcpy3DBatchAsync(1, &in, &fail, 0, s));
    cr_assert_eq(fail, SIZE_MAX, "no failing operation");
    rzcu_memcpy3d_batch_op across = batch_op(ptr_operand(a, RL, LH), ptr_operand(b, W, HH), W, HH, DD);
    OK(cuMemcpy3DBatchAsync_v2(1, &across, 0, s));
    OK(cuStreamSynchronize(s));
    OK(cuMemcpyDtoH_v2(box, a, sizeof box));
    for (size_t z = 0; z < DD; z++)
        for (size_t y = 0; y < LH; y++)
            for (size_t x = 0; x < RL; x++) {
                unsigned char want = y < HH && x < W ? src[z][y][x] : 0xee;
                cr_assert_eq(box[(z * LH + y) * RL + x], want, "layer %zu row %zu column %zu", z, y, x);
            }
    /* b back to the host, per-thread forms (the NULL stream is the per-thread one there) */
    rzcu_memcpy3d_batch_op out = batch_op(ptr_operand(b, 0, 0), ptr_operand((uintptr_t)back, 0, 0), W, HH, DD);
    OK(cuMemcpy3DBatchAsync_v2_ptsz(1, &out, 0, NULL));
    OK(cuStreamSynchronize_ptsz(NULL));
    cr_assert_eq(memcmp(back, src, sizeof src), 0, "the round trip");
    memset(back, 0, sizeof back);
    out.srcAccessOrder = RZCU_MEMCPY_SRC_ACCESS_ORDER_ANY;
    out.flags = 1; /* CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE: a hint */
    OK(cuMemcpy3DBatchAsync_ptsz(1, &out, &fail, 0, RZCU_STREAM_PER_THREAD));
    OK(cuStreamSynchronize(RZCU_STREAM_PER_THREAD));
    cr_assert_eq(memcmp(back, src, sizeof src), 0, "the round trip, per-thread stream by name");
    /* one layer, one row, one byte wide columns: rows of a whole box, one piece each */
    unsigned char col[HH] = {0};
    rzcu_memcpy3d_batch_op column = batch_op(ptr_operand(a + 2, RL, 0), ptr_operand((uintptr_t)col, 1, 0), 1, HH, 1);
    OK(cuMemcpy3DBatchAsync_v2(1, &column, 0, s));
    OK(cuStreamSynchronize(s));
    for (size_t y = 0; y < HH; y++)
        cr_assert_eq(col[y], src[0][y][2], "column row %zu", y);
    OK(cuMemFree_v2(a));
    OK(cuMemFree_v2(b));
}

/* The driver's rules: each refused batch copies nothing at all; an error of one operation names it in failIdx,
 * any other error leaves SIZE_MAX there. */
Test(emu, batch3d_rules)
{
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, 1000));
    OK(cuMemsetD8_v2(d, 0, 1000));
    static unsigned char host[4096];
    memset(host, 'h', sizeof host);
    /* 10 x 10 x 10 bytes: exactly d's 1000 */
    rzcu_memcpy3d_batch_op good = batch_op(ptr_operand((uintptr_t)host, 0, 0), ptr_operand(d, 0, 0), 10, 10, 10);
    rzcu_memcpy3d_batch_op ops[3] = {good, good, good};
    size_t fail = 0;
#define REFUSED(err, idx, ...)                                                                                   \
    do {                                                                                                     \
        fail = 0;                                                                                            \
        FAILS(cuMemcpy3DBatchAsync(__VA_ARGS__), err);                                                       \
        cr_assert_eq(fail, (size_t)(idx), "failIdx of %s", #__VA_ARGS__);                                    \
    } while (0)
    /* the call as a whole */
    REFUSED(RZCUDA_ERROR_INVALID_VALUE, SIZE_MAX, 0, ops, &fail, 0, s);
    REFUSED(RZCUDA_ERROR_INVALID_VALUE, SIZE_MAX, 3, NULL, &fail, 0, s);
    REFUSED(RZCUDA_ERROR_INVALID_VALUE, SIZE_MAX, 3, ops, &fail, 1, s); /* flags: must be zero */
    REFUSED(RZCUDA_ERROR_INVALID_VALUE, SIZE_MAX, 3, ops, &fail, 0, NULL); /* the legacy NULL stream */
    REFUSED(RZCUDA_ERROR_INVALID_VALUE, SIZE_MAX, 3, ops, &fail, 0, RZCU_STREAM_LEGACY);
    FAILS(cuMemcpy3DBatchAsync_v2(3, ops, 0, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpy3DBatchAsync_v2_ptsz(3, ops, 0, RZCU_STREAM_LEGACY), RZCUDA_ERROR_INVALID_VALUE);
    fail = 0;
    FAILS(cuMemcpy3DBatchAsync_ptsz(3, ops, &fail, 0, RZCU_STREAM_LEGACY), RZCUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(fail, SIZE_MAX);
    int x;
    REFUSED(RZCUDA_ERROR_INVALID_HANDLE, SIZE_MAX, 3, ops, &fail, 0, (rzcu_stream)&x);
    /* one operation: its index */
    struct {
        rzcu_memcpy3d_batch_op op;
        rzcu_result err;
        const char *what;
    } bad[] = {
        {good, RZCUDA_ERROR_INVALID_VALUE, "source access order INVALID"},
        {good, RZCUDA_ERROR_INVALID_VALUE, "source access order past ANY"},
        {good, RZCUDA_ERROR_INVALID_VALUE, "an unknown flag"},
        {good, RZCUDA_ERROR_INVALID_VALUE, "width 0"},
        {good, RZCUDA_ERROR_INVALID_VALUE, "depth 0"},
        {good, RZCUDA_ERROR_INVALID_VALUE, "a row length shorter than the width"},
        {good, RZCUDA_ERROR_INVALID_VALUE, "a layer height smaller than the height"},
        {good, RZCUDA_ERROR_INVALID_VALUE, "an unknown operand type"},
        {good, RZCUDA_ERROR_NOT_SUPPORTED, "an array (none in the emulator)"},
        {good, RZCUDA_ERROR_INVALID_VALUE, "the last byte written past the end"},
        {good, RZCUDA_ERROR_INVALID_VALUE, "the last layer read past the end"},
        {good, RZCUDA_ERROR_INVALID_VALUE, "a NULL host pointer"},
        {good, RZCUDA_ERROR_INVALID_VALUE, "a host range that wraps"},
    };
    bad[0].op.srcAccessOrder = 0;
    bad[1].op.srcAccessOrder = 4;
    bad[2].op.flags = 2;
    bad[3].op.extent.width = 0;
    bad[4].op.extent.depth = 0;
    bad[5].op.dst.op.ptr.rowLength = 9;
    bad[6].op.src.op.ptr.layerHeight = 9;
    bad[7].op.dst.type = 0;
    bad[8].op.src.type = RZCU_MEMCPY_OPERAND_TYPE_ARRAY;
    bad[9].op.dst.op.ptr.ptr = d + 1;
    bad[10].op = batch_op(ptr_operand(d, 10, 11), ptr_operand((uintptr_t)host, 0, 0), 10, 10, 10); /* 1090 bytes */
    bad[11].op.src.op.ptr.ptr = 0;
    bad[12].op.src.op.ptr.ptr = (rzcu_deviceptr)(UINTPTR_MAX - 500);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (size_t at = 0; at < 3; at++) {
            rzcu_memcpy3d_batch_op three[3] = {good, good, good};
            three[at] = bad[i].op;
            fail = 0;
            cr_assert_eq(cuMemcpy3DBatchAsync(3, three, &fail, 0, s), bad[i].err, "%s at %zu", bad[i].what, at);
            cr_assert_eq(fail, at, "%s: failIdx %zu, not %zu", bad[i].what, fail, at);
            cr_assert_eq(cuMemcpy3DBatchAsync_v2(3, three, 0, s), bad[i].err, "%s at %zu (_v2)", bad[i].what, at);
        }
    }
    /* the first bad operation is the one named */
    ops[1] = bad[9].op;
    ops[2] = bad[0].op;
    REFUSED(RZCUDA_ERROR_INVALID_VALUE, 1, 3, ops, &fail, 0, s);
    OK(cuStreamSynchronize(s));
    unsigned char got[1000];
    OK(cuMemcpyDtoH_v2(got, d, sizeof got));
    for (size_t i = 0; i < sizeof got; i++)
        cr_assert_eq(got[i], 0, "byte %zu copied by a refused batch", i);
    /* the exact 1000 bytes; no failIdx wanted */
    OK(cuMemcpy3DBatchAsync(1, &good, NULL, 0, s));
    OK(cuStreamSynchronize(s));
    OK(cuMemcpyDtoH_v2(got, d, sizeof got));
    cr_assert_eq(got[999], 'h');
    OK(cuCtxSetCurrent(NULL));
    FAILS(cuMemcpy3DBatchAsync_v2(1, &good, 0, s), RZCUDA_ERROR_INVALID_CONTEXT);
#undef REFUSED
}

/* One operation of its stream, after the work before it; a DURING_API_CALL source is read by the call itself,
 * a STREAM one when the stream reaches the batch. Not captured into graphs. */
Test(emu, batch3d_runs_in_stream_order_and_reads_sources_as_asked)
{
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, 16));
    OK(cuMemsetD8_v2(d, 0, 16));
    struct gate g = GATE_INIT;
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g));
    gate_await_entered(&g);
    char now[8] = "before", later[8] = "stream";
    rzcu_memcpy3d_batch_op ops[2] = {
        batch_op(ptr_operand((uintptr_t)now, 2, 0), ptr_operand(d, 4, 0), 2, 2, 1),
        batch_op(ptr_operand((uintptr_t)later, 0, 0), ptr_operand(d + 8, 0, 0), 2, 2, 2),
    };
    ops[0].srcAccessOrder = RZCU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
    OK(cuMemcpy3DBatchAsync_v2(2, ops, 0, s));
    unsigned char seen = 1;
    OK(cuMemcpyDtoH_v2(&seen, d, 1)); /* the legacy stream does not wait for a non-blocking one */
    cr_assert_eq(seen, 0, "queued behind the host function");
    memcpy(now, "AFTR", 4);     /* already read */
    memcpy(later, "LATEST", 6); /* read in stream order */
    gate_open(&g);
    OK(cuStreamSynchronize(s));
    char got[16];
    OK(cuMemcpyDtoH_v2(got, d, sizeof got));
    cr_assert_eq(memcmp(got, "be\0\0fo\0\0LATEST\0\0", 16), 0, "%.16s", got);
    /* not captured into a graph: the capture is invalidated, as by cuMemcpyBatchAsync */
    OK(cuStreamBeginCapture_v2(s, 0));
    FAILS(cuMemcpy3DBatchAsync_v2(2, ops, 0, s), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    struct CUgraph_st *graph = NULL;
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
}

/* cuGetProcAddress: the 12.8 form with failIdx, the 13.0 one without, and their per-thread forms. */
Test(emu, batch3d_entry_points_by_get_proc_address)
{
    void *fn = NULL;
    rzcu_proc_query_result st = 9;
    OK(cuGetProcAddress_v2("cuMemcpy3DBatchAsync", &fn, 12080, 0, &st));
    cr_assert_eq(fn, (void *)&cuMemcpy3DBatchAsync);
    OK(cuGetProcAddress_v2("cuMemcpy3DBatchAsync", &fn, 12090, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    cr_assert_eq(fn, (void *)&cuMemcpy3DBatchAsync_ptsz);
    OK(cuGetProcAddress_v2("cuMemcpy3DBatchAsync", &fn, 13000, 0, &st));
    cr_assert_eq(fn, (void *)&cuMemcpy3DBatchAsync_v2);
    OK(cuGetProcAddress_v2("cuMemcpy3DBatchAsync", &fn, 13000, RZCU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    cr_assert_eq(fn, (void *)&cuMemcpy3DBatchAsync_v2_ptsz);
    FAILS(cuGetProcAddress_v2("cuMemcpy3DBatchAsync", &fn, 12060, 0, &st), RZCUDA_ERROR_NOT_FOUND);
    cr_assert_eq(st, RZCU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
}
