/*
 * IPC memory handles: cuIpcGetMemHandle, cuIpcOpenMemHandle (and _v2), cuIpcCloseMemHandle, within one
 * process. Device memory here is the process's own host memory, so a handle can only be opened in the
 * process that made it, where it maps to the allocation itself (a real driver maps it at another address in
 * another process, and refuses a handle of the same process with CUDA_ERROR_INVALID_CONTEXT: the emulator's
 * one deliberate difference, see docs/emulated-driver.md). A handle names one allocation: its process, base,
 * size and serial number (emu_mem.c: a later allocation at the same address gets a new handle, as
 * documented), so a handle of freed memory, of another process, or of bytes that are no handle at all is
 * refused. Opens are counted per (context, allocation); the count goes down with cuIpcCloseMemHandle and
 * the opens go with their context.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu_internal.h"

static const char HANDLE_MAGIC[8] = "cuemuIPC";

/* The 64 bytes of a CUipcMemHandle, as the emulator fills them. */
struct handle_bytes {
    char magic[8];
    int32_t pid;
    uint32_t zero;
    uint64_t base, size, serial;
    char unused[24];
};
_Static_assert(sizeof(struct handle_bytes) == sizeof(cuda_emu_ipc_mem_handle_t), "CUipcMemHandle is 64 bytes");

struct opened {
    struct opened *next;
    struct CUctx_st *ctx;
    rzcu_deviceptr base;
    uint64_t serial;
    unsigned long refs;
};

static pthread_mutex_t ipc_mu = PTHREAD_MUTEX_INITIALIZER;
static struct opened *opens;

/* The base of a live allocation of cuMemAlloc/cuMemAllocPitch/cuMemAllocManaged ("an existing device memory
 * allocation created with cuMemAlloc"); stream-ordered memory needs the pool export API (emu_pool.c), VMM
 * memory cuMemExportToShareableHandle: both are CUDA_ERROR_INVALID_VALUE, as are inner pointers. */
EMU_API rzcu_result cuIpcGetMemHandle(cuda_emu_ipc_mem_handle_t *handle, rzcu_deviceptr dptr)
{
    ENTER_CTX(cuIpcGetMemHandle, c);
    uint64_t serial;
    rzcu_deviceptr base;
    size_t size;
    if (!handle || !emu_mem_base_serial(dptr, &serial) || emu_mem_is_pool(dptr) || !emu_mem_lookup(dptr, &base, &size))
        return RZCUDA_ERROR_INVALID_VALUE;
    struct handle_bytes h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, HANDLE_MAGIC, sizeof h.magic);
    h.pid = (int32_t)getpid();
    h.base = dptr;
    h.size = size;
    h.serial = serial;
    memcpy(handle->reserved, &h, sizeof h);
    return RZCUDA_SUCCESS;
}

/*
 * Flags must be CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, as documented. A handle that is not one (its bytes not
 * the emulator's) or whose allocation has been freed is CUDA_ERROR_INVALID_VALUE; one of another process is
 * CUDA_ERROR_NOT_SUPPORTED (no memory is shared between processes here). Opening a handle again in the same
 * context returns the same pointer and counts one more open.
 */
static rzcu_result do_open(rzcu_deviceptr *pdptr, cuda_emu_ipc_mem_handle_t handle, unsigned flags)
{
    struct CUctx_st *c;
    CHECK(emu_current_ctx(&c));
    if (!pdptr || flags != CUDA_EMU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct handle_bytes h;
    memcpy(&h, handle.reserved, sizeof h);
    if (memcmp(h.magic, HANDLE_MAGIC, sizeof h.magic) != 0 || h.zero != 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (h.pid != (int32_t)getpid())
        return RZCUDA_ERROR_NOT_SUPPORTED;
    uint64_t serial;
    if (!emu_mem_base_serial((rzcu_deviceptr)h.base, &serial) || serial != h.serial)
        return RZCUDA_ERROR_INVALID_VALUE; /* freed since */
    pthread_mutex_lock(&ipc_mu);
    struct opened *o = opens;
    while (o && !(o->ctx == c && o->base == h.base && o->serial == h.serial))
        o = o->next;
    if (!o && (o = calloc(1, sizeof *o))) {
        *o = (struct opened){opens, c, (rzcu_deviceptr)h.base, h.serial, 0};
        opens = o;
    }
    if (o)
        o->refs++;
    pthread_mutex_unlock(&ipc_mu);
    if (!o)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    *pdptr = (rzcu_deviceptr)h.base;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuIpcOpenMemHandle(rzcu_deviceptr *pdptr, cuda_emu_ipc_mem_handle_t handle, unsigned int flags)
{
    ENTER(cuIpcOpenMemHandle);
    return do_open(pdptr, handle, flags);
}

EMU_API rzcu_result cuIpcOpenMemHandle_v2(rzcu_deviceptr *pdptr, cuda_emu_ipc_mem_handle_t handle,
                                          unsigned int flags)
{
    ENTER(cuIpcOpenMemHandle_v2);
    return do_open(pdptr, handle, flags);
}

/* One open of dptr in the current context less; a pointer not opened there is CUDA_ERROR_INVALID_VALUE. */
EMU_API rzcu_result cuIpcCloseMemHandle(rzcu_deviceptr dptr)
{
    ENTER_CTX(cuIpcCloseMemHandle, c);
    pthread_mutex_lock(&ipc_mu);
    struct opened **link = &opens, *o;
    while ((o = *link) && !(o->ctx == c && o->base == dptr))
        link = &o->next;
    struct opened *last = NULL; /* the last open closed: the entry goes */
    if (o && --o->refs == 0) {
        *link = o->next;
        last = o;
    }
    pthread_mutex_unlock(&ipc_mu);
    free(last);
    return o ? RZCUDA_SUCCESS : RZCUDA_ERROR_INVALID_VALUE;
}

void emu_ipc_free_context(struct CUctx_st *ctx)
{
    pthread_mutex_lock(&ipc_mu);
    struct opened **link = &opens, *o;
    while ((o = *link)) {
        if (o->ctx == ctx) {
            *link = o->next;
            free(o);
        } else {
            link = &o->next;
        }
    }
    pthread_mutex_unlock(&ipc_mu);
}
