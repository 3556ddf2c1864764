/* Tests of the emulated CUDA driver (native/emu): IPC memory handles, within one process. Part of test_emu
 * (tests/emu.cmake); shared helpers in emu_test_util.h. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "emu_test_util.h"

#define LAZY CUDA_EMU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS

/* A handle opens to the allocation itself; opens are counted per context; a freed allocation's handle, a
 * handle of another process and bytes that are no handle are refused. */
Test(emu, ipc_handle_opens_and_closes)
{
    primary_current();
    rzcu_deviceptr a, p = 0, q = 0;
    OK(cuMemAlloc_v2(&a, 1000));
    OK(cuMemsetD8_v2(a, 0x6b, 1000));
    cuda_emu_ipc_mem_handle_t h, h2;
    OK(cuIpcGetMemHandle(&h, a));
    OK(cuIpcGetMemHandle(&h2, a));
    cr_assert(memcmp(&h, &h2, sizeof h) == 0, "one allocation, one handle");
    OK(cuIpcOpenMemHandle_v2(&p, h, LAZY));
    cr_assert_eq(p, a);
    unsigned char seen = 0;
    OK(cuMemcpyDtoH_v2(&seen, p + 999, 1));
    cr_assert_eq(seen, 0x6b);
    OK(cuIpcOpenMemHandle(&q, h, LAZY)); /* opened again in the same context: the same pointer */
    cr_assert_eq(q, p);
    OK(cuIpcCloseMemHandle(p));
    OK(cuIpcCloseMemHandle(p));
    FAILS(cuIpcCloseMemHandle(p), RZCUDA_ERROR_INVALID_VALUE); /* no open left */
    FAILS(cuIpcCloseMemHandle(a + 8), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuIpcOpenMemHandle_v2(&p, h, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuIpcOpenMemHandle_v2(NULL, h, LAZY), RZCUDA_ERROR_INVALID_VALUE);
    cuda_emu_ipc_mem_handle_t junk;
    memset(&junk, 0, sizeof junk);
    FAILS(cuIpcOpenMemHandle_v2(&p, junk, LAZY), RZCUDA_ERROR_INVALID_VALUE);
    cuda_emu_ipc_mem_handle_t other = h;
    int32_t pid = (int32_t)getpid() + 1;
    memcpy(other.reserved + 8, &pid, sizeof pid); /* the emulator's layout: the process id after the magic */
    FAILS(cuIpcOpenMemHandle_v2(&p, other, LAZY), RZCUDA_ERROR_NOT_SUPPORTED);
    OK(cuMemFree_v2(a));
    FAILS(cuIpcOpenMemHandle_v2(&p, h, LAZY), RZCUDA_ERROR_INVALID_VALUE); /* freed */
    rzcu_deviceptr b;
    OK(cuMemAlloc_v2(&b, 1000));
    cr_assert_eq(b, a, "the emulator hands the block out again");
    FAILS(cuIpcOpenMemHandle_v2(&p, h, LAZY), RZCUDA_ERROR_INVALID_VALUE); /* not the new allocation's */
    OK(cuIpcGetMemHandle(&h2, b));
    cr_assert(memcmp(&h, &h2, sizeof h) != 0, "new memory at the same address: a new handle");
    OK(cuIpcOpenMemHandle_v2(&p, h2, LAZY));
    OK(cuIpcCloseMemHandle(p));
    OK(cuCtxSetCurrent(NULL));
    FAILS(cuIpcGetMemHandle(&h2, b), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuIpcOpenMemHandle_v2(&p, h2, LAZY), RZCUDA_ERROR_INVALID_CONTEXT);
    FAILS(cuIpcCloseMemHandle(b), RZCUDA_ERROR_INVALID_CONTEXT);
}

/* Only the base of a cuMemAlloc-style allocation has a handle. */
Test(emu, ipc_get_handle_rules)
{
    primary_current();
    rzcu_deviceptr a, pool, pitched;
    size_t pitch;
    OK(cuMemAlloc_v2(&a, 1000));
    OK(cuMemAllocAsync(&pool, 1000, NULL));
    OK(cuMemAllocPitch_v2(&pitched, &pitch, 100, 10, 4));
    cuda_emu_ipc_mem_handle_t h;
    FAILS(cuIpcGetMemHandle(NULL, a), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuIpcGetMemHandle(&h, a + 256), RZCUDA_ERROR_INVALID_VALUE); /* not the base */
    FAILS(cuIpcGetMemHandle(&h, pool), RZCUDA_ERROR_INVALID_VALUE);    /* stream-ordered memory */
    FAILS(cuIpcGetMemHandle(&h, 0), RZCUDA_ERROR_INVALID_VALUE);
    FAILS(cuIpcGetMemHandle(&h, (rzcu_deviceptr)(uintptr_t)&h), RZCUDA_ERROR_INVALID_VALUE);
    OK(cuIpcGetMemHandle(&h, pitched));
    size_t g = CUDA_EMU_VMM_GRANULARITY;
    rzcu_deviceptr va;
    OK(cuMemAddressReserve(&va, g, 0, 0, 0));
    FAILS(cuIpcGetMemHandle(&h, va), RZCUDA_ERROR_INVALID_VALUE); /* VMM: cuMemExportToShareableHandle */
    OK(cuMemAddressFree(va, g));
    void *fn = NULL;
    OK(cuGetProcAddress_v2("cuIpcOpenMemHandle", &fn, 13000, 0, NULL));
    cr_assert_eq(fn, (void *)&cuIpcOpenMemHandle_v2);
    OK(cuGetProcAddress_v2("cuIpcOpenMemHandle", &fn, 10000, 0, NULL));
    cr_assert_eq(fn, (void *)&cuIpcOpenMemHandle);
    OK(cuGetProcAddress_v2("cuIpcGetMemHandle", &fn, 4010, 0, NULL));
    cr_assert_eq(fn, (void *)&cuIpcGetMemHandle);
    OK(cuGetProcAddress_v2("cuIpcCloseMemHandle", &fn, 13000, 0, NULL));
    cr_assert_eq(fn, (void *)&cuIpcCloseMemHandle);
}

/* Opens belong to the context that made them and end with it; the exporting context's end frees the memory,
 * and with it the handle. */
Test(emu, ipc_opens_end_with_their_context)
{
    OK(cuInit(0));
    rzcu_context exporter, importer;
    OK(cuCtxCreate_v4(&exporter, NULL, 0, 0));
    rzcu_deviceptr a, p;
    OK(cuMemAlloc_v2(&a, 4096));
    cuda_emu_ipc_mem_handle_t h;
    OK(cuIpcGetMemHandle(&h, a));
    OK(cuCtxCreate_v4(&importer, NULL, 0, 0));
    OK(cuIpcOpenMemHandle_v2(&p, h, LAZY));
    OK(cuCtxSetCurrent(exporter));
    FAILS(cuIpcCloseMemHandle(p), RZCUDA_ERROR_INVALID_VALUE); /* opened in the other context */
    OK(cuCtxDestroy_v2(importer));
    OK(cuCtxSetCurrent(exporter));
    OK(cuIpcOpenMemHandle_v2(&p, h, LAZY));
    OK(cuIpcCloseMemHandle(p));
    OK(cuCtxDestroy_v2(exporter));
    OK(cuCtxCreate_v4(&importer, NULL, 0, 0));
    FAILS(cuIpcOpenMemHandle_v2(&p, h, LAZY), RZCUDA_ERROR_INVALID_VALUE); /* its memory went with its context */
}
