/*
 * What the interposed entry points' files share (hooks.c and the hooks_*.c beside it; libredzone.so only).
 */
#ifndef REDZONE_RZ_HOOKS_H
#define REDZONE_RZ_HOOKS_H

#include "common.h"
#include "driver.h"

/* Calls that only pass through still need the real entry point. */
#define REAL(name) (rz__dev_load() == RZ_OK && rz__drv.name ? rz__drv.name : NULL)

/* What a wrapper answers when it has no real entry point to call: without a driver, NOT_INITIALIZED (as
 * every call would be); with a driver that lacks this entry point (an older one), NOT_SUPPORTED. */
static inline rzcu_result rz__hook_missing(void) {
    return rz__dev_load() == RZ_OK ? RZCUDA_ERROR_NOT_SUPPORTED : RZCUDA_ERROR_NOT_INITIALIZED;
}

/* hooks_capture.c: stream capture begins and ends. */
RZ_EXPORT rzcu_fn_cuStreamBeginCapture cuStreamBeginCapture;
RZ_EXPORT rzcu_fn_cuStreamBeginCapture cuStreamBeginCapture_ptsz;
RZ_EXPORT rzcu_fn_cuStreamBeginCapture_v2 cuStreamBeginCapture_v2;
RZ_EXPORT rzcu_fn_cuStreamBeginCapture_v2_ptsz cuStreamBeginCapture_v2_ptsz;
RZ_EXPORT rzcu_fn_cuStreamBeginCaptureToGraph cuStreamBeginCaptureToGraph;
RZ_EXPORT rzcu_fn_cuStreamBeginCaptureToGraph_ptsz cuStreamBeginCaptureToGraph_ptsz;
RZ_EXPORT rzcu_fn_cuStreamEndCapture cuStreamEndCapture;
RZ_EXPORT rzcu_fn_cuStreamEndCapture_ptsz cuStreamEndCapture_ptsz;
#define RZ_CAPTURE_WRAPPED(X)                                                                                \
    X(cuStreamBeginCapture) X(cuStreamBeginCapture_ptsz) X(cuStreamBeginCapture_v2)                          \
    X(cuStreamBeginCapture_v2_ptsz) X(cuStreamBeginCaptureToGraph) X(cuStreamBeginCaptureToGraph_ptsz)       \
    X(cuStreamEndCapture) X(cuStreamEndCapture_ptsz)

/* hooks_ipc.c: IPC memory handles and pool pointer exports (a zone's front band carried to the importer). */
RZ_EXPORT rzcu_fn_cuIpcGetMemHandle cuIpcGetMemHandle;
RZ_EXPORT rzcu_fn_cuIpcOpenMemHandle_v2 cuIpcOpenMemHandle, cuIpcOpenMemHandle_v2;
RZ_EXPORT rzcu_fn_cuIpcCloseMemHandle cuIpcCloseMemHandle;
RZ_EXPORT rzcu_fn_cuMemPoolExportPointer cuMemPoolExportPointer;
RZ_EXPORT rzcu_fn_cuMemPoolImportPointer cuMemPoolImportPointer;
#define RZ_IPC_WRAPPED(X)                                                                                    \
    X(cuIpcGetMemHandle) X(cuIpcOpenMemHandle) X(cuIpcOpenMemHandle_v2) X(cuIpcCloseMemHandle)               \
    X(cuMemPoolExportPointer) X(cuMemPoolImportPointer)

/* hooks_vmm.c: device memory that takes no band, given the memory the quarantine holds back when it runs out;
 * the pool calls the quarantine's held pool blocks would change. */
RZ_EXPORT rzcu_fn_cuMemCreate cuMemCreate;
RZ_EXPORT rzcu_fn_cuMemPoolGetAttribute cuMemPoolGetAttribute;
RZ_EXPORT rzcu_fn_cuMemPoolTrimTo cuMemPoolTrimTo;
RZ_EXPORT rzcu_fn_cuMemPoolDestroy cuMemPoolDestroy;
#define RZ_VMM_WRAPPED(X) X(cuMemCreate) X(cuMemPoolGetAttribute) X(cuMemPoolTrimTo) X(cuMemPoolDestroy)

/* hooks_ctx.c: the calls that change a thread's current context (device_ctx.c keeps it). */
RZ_EXPORT rzcu_fn_cuCtxSetCurrent cuCtxSetCurrent;
RZ_EXPORT rzcu_fn_cuCtxPushCurrent_v2 cuCtxPushCurrent_v2, cuCtxPushCurrent;
RZ_EXPORT rzcu_fn_cuCtxPopCurrent_v2 cuCtxPopCurrent_v2, cuCtxPopCurrent;
RZ_EXPORT rzcu_fn_cuCtxCreate_v4 cuCtxCreate_v4;
RZ_EXPORT rzcu_fn_cuCtxCreate_v3 cuCtxCreate_v3;
RZ_EXPORT rzcu_fn_cuCtxCreate_v2 cuCtxCreate_v2, cuCtxCreate;
#define RZ_CTX_WRAPPED(X)                                                                                    \
    X(cuCtxSetCurrent) X(cuCtxPushCurrent_v2) X(cuCtxPushCurrent) X(cuCtxPopCurrent_v2) X(cuCtxPopCurrent)     \
    X(cuCtxCreate_v4) X(cuCtxCreate_v3) X(cuCtxCreate_v2) X(cuCtxCreate)

/* hooks_init.c: whether the driver started (cuInit's answer; the newest version a lookup asked for), said
 * at exit when it did not and nothing was checked. */
RZ_EXPORT rzcu_fn_cuInit cuInit;
#define RZ_START_WRAPPED(X) X(cuInit)
void rz__start_note_lookup(int cuda_version);

#endif
