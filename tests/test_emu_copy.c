/* Tests of the emulated CUDA driver (native/emu): batched copies and inline execution on idle streams. Part of test_emu (tests/emu.cmake); shared
 * helpers in emu_test_util.h. Criterion runs every test in its own process. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "emu_test_util.h"

/* ---- batched copies ---- */

/*
 * Inline execution (the emulator's rule): a copy, memset, batched copy or event record submitted to an idle
 * stream whose dependencies are complete runs in the calling thread before the call returns, as a GPU's
 * copy engines need no host thread; kernels and host functions always run on the stream's worker thread.
 */

Test(emu, idle_stream_copies_complete_before_the_call_returns)
{
    primary_current();
    rzcu_deviceptr band;
    OK(cuMemAlloc_v2(&band, 64));
    OK(cuMemcpyHtoD_v2(band, "guard-band-bytes", 16));
    cr_assert_eq(count_worker_threads(), 0);
    /* what redzone's agent does, possibly as the only thread a debugger lets run */
    rzcu_context ctx;
    OK(cuCtxGetCurrent(&ctx));
    OK(cuCtxPushCurrent_v2(ctx));
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    char host[17] = "untouched";
    OK(cuMemcpyDtoHAsync_v2(host, band, 16, s));
    cr_assert_str_eq(host, "guard-band-bytes", "the async copy had not run when the call returned");
    OK(cuMemsetD8Async(band + 32, 0xab, 8, s));
    unsigned char set[8] = {0};
    OK(cuMemcpyDtoHAsync_v2(set, band + 32, 8, s));
    for (int i = 0; i < 8; i++)
        cr_assert_eq(set[i], 0xab, "byte %d", i);
    OK(cuMemcpyHtoDAsync_v2(band + 48, "HtoD", 4, s));
    OK(cuMemcpyDtoDAsync_v2(band + 52, band + 48, 4, s));
    char out[2][9] = {{0}, {0}};
    rzcu_deviceptr dsts[2] = {(uintptr_t)out[0], (uintptr_t)out[1]}, srcs[2] = {band, band + 48};
    size_t sizes[2] = {8, 8};
    rzcu_memcpy_attributes attrs[1] = {attr_order(RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM)};
    size_t idxs[1] = {0};
    OK(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 2, attrs, idxs, 1, s));
    cr_assert_str_eq(out[0], "guard-ba", "the batched copy had not run when the call returned");
    cr_assert_str_eq(out[1], "HtoDHtoD");
    memset(out, 0, sizeof out);
    size_t fail = 0;
    OK(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, attrs, idxs, 1, &fail, s));
    cr_assert_str_eq(out[0], "guard-ba");
    /* synchronising on complete work needs no other thread either */
    rzcu_event e;
    OK(cuEventCreate(&e, 0x2));
    OK(cuEventRecord(e, s));
    OK(cuEventSynchronize(e));
    OK(cuStreamSynchronize(s));
    OK(cuCtxSynchronize());
    OK(cuCtxPopCurrent_v2(NULL));
    /* blocking, legacy and per-thread streams too, when no legacy/blocking work is pending */
    rzcu_stream blocking;
    OK(cuStreamCreate(&blocking, 0));
    memset(host, 0, sizeof host);
    OK(cuMemcpyDtoHAsync_v2(host, band, 4, blocking));
    cr_assert_str_eq(host, "guar");
    OK(cuMemcpyDtoHAsync_v2(host, band + 4, 4, NULL));
    cr_assert_str_eq(host, "d-ba");
    OK(cuMemcpyDtoHAsync_v2_ptsz(host, band + 8, 4, NULL));
    cr_assert_str_eq(host, "nd-b");
    OK(cuEventRecord(e, NULL));
    OK(cuEventSynchronize(e));
    OK(cuStreamSynchronize(NULL));
    cr_assert_eq(count_worker_threads(), 0, "a worker thread ran work of an idle stream");
    OK(cuEventDestroy_v2(e));
    OK(cuStreamDestroy_v2(blocking));
    OK(cuStreamDestroy_v2(s));
}

Test(emu, copies_behind_pending_work_stay_asynchronous)
{
    primary_current();
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, 16));
    OK(cuMemcpyHtoD_v2(d, "device-content!", 16));
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    /* queued behind a host function that blocks: nothing runs until it returns */
    struct gate g = GATE_INIT;
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g));
    gate_await_entered(&g); /* running, the queue empty: the stream is still busy */
    /* pinned destinations: a copy into pageable memory would return only once done */
    char *host, *b_host, *pt_host, *nb_host, batch_out[16] = "untouched";
    OK(cuMemAllocHost_v2((void **)&host, 4 * 16));
    b_host = host + 16;
    pt_host = host + 32;
    nb_host = host + 48;
    for (int i = 0; i < 4; i++)
        strcpy(host + 16 * i, "untouched");
    OK(cuMemcpyDtoHAsync_v2(host, d, 16, s));
    OK(cuMemsetD8Async(d, 'x', 1, s));
    rzcu_deviceptr dsts[1] = {(uintptr_t)batch_out}, srcs[1] = {d};
    size_t sizes[1] = {16}, idxs[1] = {0};
    rzcu_memcpy_attributes attrs[1] = {attr_order(RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM)};
    OK(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 1, attrs, idxs, 1, s));
    cr_assert_str_eq(host, "untouched", "a copy ran ahead of the work before it");
    cr_assert_str_eq(batch_out, "untouched");
    gate_open(&g);
    OK(cuStreamSynchronize(s));
    cr_assert_str_eq(host, "device-content!");
    cr_assert_str_eq(batch_out, "xevice-content!");
    /* a blocking stream's copy waits for pending legacy stream work; a non-blocking stream's does not */
    struct gate lg = GATE_INIT;
    rzcu_stream blocking;
    OK(cuStreamCreate(&blocking, 0));
    OK(cuLaunchHostFunc(NULL, gate_wait_fn, &lg));
    OK(cuMemcpyDtoHAsync_v2(b_host, d, 16, blocking));
    OK(cuMemcpyDtoHAsync_v2_ptsz(pt_host, d, 16, NULL));
    OK(cuMemcpyDtoHAsync_v2(nb_host, d, 16, s));
    cr_assert_str_eq(nb_host, "xevice-content!", "an idle non-blocking stream waited for the legacy stream");
    gate_await_entered(&lg);
    cr_assert_str_eq(b_host, "untouched", "a blocking stream's copy ran before the legacy stream's work");
    cr_assert_str_eq(pt_host, "untouched");
    gate_open(&lg);
    OK(cuCtxSynchronize());
    cr_assert_str_eq(b_host, "xevice-content!");
    cr_assert_str_eq(pt_host, "xevice-content!");
    OK(cuMemFreeHost(host));
}

Test(emu, batch_copies_mixed_directions)
{
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr d1, d2;
    OK(cuMemAlloc_v2(&d1, 64));
    OK(cuMemAlloc_v2(&d2, 64));
    OK(cuMemcpyHtoD_v2(d2, "from-device", 12));
    char in[12] = "from-host!!", out[12] = {0};
    rzcu_deviceptr dsts[2] = {d1, (rzcu_deviceptr)(uintptr_t)out};
    rzcu_deviceptr srcs[2] = {(rzcu_deviceptr)(uintptr_t)in, d2};
    size_t sizes[2] = {12, 12};
    rzcu_memcpy_attributes attrs[2] = {attr_order(RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM),
                                       attr_order(RZCU_MEMCPY_SRC_ACCESS_ORDER_ANY)};
    size_t idxs[2] = {0, 1};
    OK(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 2, attrs, idxs, 2, s));
    OK(cuStreamSynchronize(s));
    cr_assert_str_eq(out, "from-device");
    char back[12];
    OK(cuMemcpyDtoH_v2(back, d1, 12));
    cr_assert_str_eq(back, "from-host!!");
    /* one attribute for both; the per-thread variant accepts the NULL (per-thread) stream */
    memset(out, 0, sizeof out);
    OK(cuMemcpyBatchAsync_v2_ptsz(dsts, srcs, sizes, 2, attrs, idxs, 1, NULL));
    OK(cuStreamSynchronize_ptsz(NULL));
    cr_assert_str_eq(out, "from-device");
    size_t fail = 7;
    memset(out, 0, sizeof out);
    OK(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, attrs, idxs, 2, &fail, s));
    OK(cuStreamSynchronize(s));
    cr_assert_str_eq(out, "from-device");
    memset(out, 0, sizeof out);
    OK(cuMemcpyBatchAsync_ptsz(dsts, srcs, sizes, 2, attrs, idxs, 2, &fail, RZCU_STREAM_PER_THREAD));
    OK(cuStreamSynchronize(RZCU_STREAM_PER_THREAD));
    cr_assert_str_eq(out, "from-device");
}

Test(emu, batch_source_read_during_api_call)
{
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, 0));
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, 8));
    struct gate g = GATE_INIT;
    OK(cuLaunchHostFunc(s, gate_wait_fn, &g));
    char src[8] = "before", src2[8] = "stream";
    rzcu_deviceptr dsts[2] = {d, d + 4}, srcs[2] = {(uintptr_t)src, (uintptr_t)src2};
    size_t sizes[2] = {4, 4};
    rzcu_memcpy_attributes attrs[2] = {attr_order(RZCU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL),
                                       attr_order(RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM)};
    size_t idxs[2] = {0, 1};
    OK(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 2, attrs, idxs, 2, s));
    memcpy(src, "AFTR", 4);  /* DURING_API_CALL: already read */
    memcpy(src2, "LATE", 4); /* STREAM: read in stream order */
    gate_open(&g);
    OK(cuStreamSynchronize(s));
    char got[9] = {0};
    OK(cuMemcpyDtoH_v2(got, d, 8));
    cr_assert_str_eq(got, "befoLATE");
}

Test(emu, batch_validation)
{
    primary_current();
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, 100));
    OK(cuMemsetD8_v2(d, 0, 100));
    char host[200];
    memset(host, 'h', sizeof host);
    rzcu_deviceptr dsts[3] = {d, d + 50, d}, srcs[3] = {(uintptr_t)host, (uintptr_t)host, (uintptr_t)host};
    size_t sizes[3] = {10, 50, 10};
    rzcu_memcpy_attributes attrs[3] = {attr_order(1), attr_order(1), attr_order(1)};
    size_t idxs[3] = {0, 1, 2};
    /* the legacy NULL stream is not supported */
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, idxs, 1, NULL), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, idxs, 1, RZCU_STREAM_LEGACY),
          RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyBatchAsync_v2_ptsz(dsts, srcs, sizes, 3, attrs, idxs, 1, RZCU_STREAM_LEGACY),
          RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 0, attrs, idxs, 1, s), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, idxs, 0, s), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 2, attrs, idxs, 3, s), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, NULL, 1, s), RZCUDA_ERROR_INVALID_VALUE);
    size_t bad_first[2] = {1, 2}, not_increasing[2] = {0, 0}, too_big[2] = {0, 3};
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, bad_first, 2, s), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, not_increasing, 2, s), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, too_big, 2, s), RZCUDA_ERROR_INVALID_VALUE);
    rzcu_memcpy_attributes bad_order[1] = {attr_order(0)}, bad_order2[1] = {attr_order(4)};
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, bad_order, idxs, 1, s), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, bad_order2, idxs, 1, s), RZCUDA_ERROR_INVALID_VALUE);
    int x;
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, idxs, 1, (rzcu_stream)&x), RZCUDA_ERROR_INVALID_HANDLE);
    /* copy 1 crosses the allocation's end by one byte: nothing at all is copied */
    sizes[1] = 51;
    FAILS(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, idxs, 3, s), RZCUDA_ERROR_INVALID_VALUE);
    size_t fail = 0;
    FAILS(cuMemcpyBatchAsync(dsts, srcs, sizes, 3, attrs, idxs, 3, &fail, s), RZCUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(fail, 1);
    /* device to host crossing the end, at index 2 */
    sizes[1] = 50;
    rzcu_deviceptr dsts2[3] = {d, d + 50, (uintptr_t)host}, srcs2[3] = {(uintptr_t)host, (uintptr_t)host, d + 1};
    size_t sizes2[3] = {10, 50, 100};
    FAILS(cuMemcpyBatchAsync(dsts2, srcs2, sizes2, 3, attrs, idxs, 1, &fail, s), RZCUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(fail, 2);
    FAILS(cuMemcpyBatchAsync(dsts, srcs, sizes, 0, attrs, idxs, 1, &fail, s), RZCUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(fail, SIZE_MAX);
    FAILS(cuMemcpyBatchAsync(dsts, srcs, sizes, 3, attrs, idxs, 1, &fail, NULL), RZCUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(fail, SIZE_MAX);
    OK(cuStreamSynchronize(s));
    unsigned char got[100];
    OK(cuMemcpyDtoH_v2(got, d, 100));
    for (int i = 0; i < 100; i++)
        cr_assert_eq(got[i], 0, "byte %d was copied by a rejected batch", i);
    cr_assert_eq(host[0], 'h');
}

/* Opens a gate once its host function has started, after noting that it did. */
struct opener {
    struct gate g;
    int opened;
};

static void *open_when_entered(void *arg)
{
    struct opener *o = arg;
    gate_await_entered(&o->g);
    __atomic_store_n(&o->opened, 1, __ATOMIC_SEQ_CST);
    gate_open(&o->g);
    return NULL;
}

/* One asynchronous device-to-host copy of 64 bytes, by kind: 0 DtoHAsync, 1 cuMemcpyAsync, 2 2D, 3 3D. */
static rzcu_result copy_to_host(int kind, void *host, rzcu_deviceptr d, rzcu_stream s)
{
    cuda_emu_memcpy2d_t c2;
    cuda_emu_memcpy3d_t c3;
    switch (kind) {
    case 0:
        return cuMemcpyDtoHAsync_v2(host, d, 64, s);
    case 1:
        return cuMemcpyAsync((rzcu_deviceptr)(uintptr_t)host, d, 64, s);
    case 2:
        memset(&c2, 0, sizeof c2);
        c2.srcMemoryType = CUDA_EMU_MEMORYTYPE_DEVICE;
        c2.srcDevice = d;
        c2.srcPitch = 16;
        c2.dstMemoryType = CUDA_EMU_MEMORYTYPE_HOST;
        c2.dstHost = host;
        c2.dstPitch = 16;
        c2.WidthInBytes = 16;
        c2.Height = 4;
        return cuMemcpy2DAsync_v2(&c2, s);
    default:
        memset(&c3, 0, sizeof c3);
        c3.srcMemoryType = CUDA_EMU_MEMORYTYPE_UNIFIED;
        c3.srcDevice = d;
        c3.srcPitch = 16;
        c3.srcHeight = 2;
        c3.dstMemoryType = CUDA_EMU_MEMORYTYPE_UNIFIED;
        c3.dstDevice = (rzcu_deviceptr)(uintptr_t)host;
        c3.dstPitch = 16;
        c3.dstHeight = 2;
        c3.WidthInBytes = 16;
        c3.Height = 2;
        c3.Depth = 2;
        return cuMemcpy3DAsync_v2(&c3, s);
    }
}

/* As the driver documents, an asynchronous copy from device memory into pageable host memory returns only
 * once it has completed, so after the stream's earlier work (here a host function that only another thread
 * lets finish); into pinned memory it is queued. */
Test(emu, device_to_pageable_async_copies_return_once_done)
{
    primary_current();
    rzcu_deviceptr d;
    OK(cuMemAlloc_v2(&d, 64));
    OK(cuMemsetD8_v2(d, 0x7e, 64));
    rzcu_stream s;
    OK(cuStreamCreate(&s, RZCU_STREAM_NON_BLOCKING));
    for (int kind = 0; kind < 4; kind++) {
        struct opener o = {GATE_INIT, 0};
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, open_when_entered, &o), 0);
        OK(cuLaunchHostFunc(s, gate_wait_fn, &o.g));
        unsigned char pageable[64];
        memset(pageable, 0, sizeof pageable);
        OK(copy_to_host(kind, pageable, d, s));
        cr_assert_eq(__atomic_load_n(&o.opened, __ATOMIC_SEQ_CST), 1, "kind %d returned before the work ahead", kind);
        for (int i = 0; i < 64; i++)
            cr_assert_eq(pageable[i], 0x7e, "kind %d: byte %d not copied when the call returned", kind, i);
        pthread_join(th, NULL);
    }
    unsigned char *pinned;
    OK(cuMemHostAlloc((void **)&pinned, 64, 0));
    for (int kind = 0; kind < 4; kind++) {
        struct gate g = GATE_INIT;
        memset(pinned, 0, 64);
        OK(cuLaunchHostFunc(s, gate_wait_fn, &g));
        OK(copy_to_host(kind, pinned, d, s));
        gate_await_entered(&g);
        cr_assert_eq(pinned[0], 0, "kind %d: a copy into pinned memory ran ahead of the stream", kind);
        gate_open(&g);
        OK(cuStreamSynchronize(s));
        cr_assert_eq(pinned[63], 0x7e, "kind %d", kind);
    }
    /* during capture a copy that must complete before it returns cannot be recorded: refused, as a synchronous
     * copy is (the emulator's choice; a pinned destination is recorded) */
    unsigned char pageable[64];
    OK(cuStreamBeginCapture_v2(s, 0));
    OK(cuMemcpyDtoHAsync_v2(pinned, d, 64, s));
    FAILS(cuMemcpyDtoHAsync_v2(pageable, d, 64, s), RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    struct CUgraph_st *graph;
    FAILS(cuStreamEndCapture(s, &graph), RZCUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuMemFreeHost(pinned));
}
