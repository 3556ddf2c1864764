/*
 * Interposition of the IPC memory handle entry points (libredzone only; hooks.h lists them for hooks.c's
 * lookups). With front bands (METRALE_REDZONE_FRONT) the program's pointer is the driver's allocation base
 * plus the band, and the driver makes handles of allocation bases only. The exporter's cuIpcGetMemHandle of a
 * zone's pointer asks the driver for the handle of the padded block and records the band beside it
 * (ipc_records.c); the importer's cuIpcOpenMemHandle adds the band recorded for that handle to what the driver
 * opened, and cuIpcCloseMemHandle gives the driver its own pointer back. Everything else (zones without a
 * front band, inner pointers, unknown pointers and handles, every error) is the driver's call with the
 * program's arguments and the driver's answer. The handle's bytes are never changed. An importer that does
 * not run under redzone gets the driver's pointer, the front band's start: the exporter warns once.
 * Pool pointer exports (cuMemPoolExportPointer / cuMemPoolImportPointer) go the same way, with the export
 * data's 64 bytes in the handle's place: the export names the padded block, the import adds the recorded band,
 * and the importer's cuMemFree/cuMemFreeAsync of what it got (core/alloc.c asks rz__ipc_driver_ptr) gives the
 * driver its own pointer back.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "driver.h"
#include "hooks.h"
#include "ipc_records.h"
#include "options.h"
#include "registry.h"
#include "report.h"
#include "state.h"
#include "quarantine.h"
#include "thread_state.h"

/* A driver calling back into these names goes straight through (in the thread-state record, thread_state.h). */
#define t_in_ipc (rz__thread.in_ipc)

static void exported(const rzcu_ipc_mem_handle *handle, rzcu_deviceptr ptr, uint64_t index, uint64_t front,
                     uint64_t user_bytes) {
    rz_ipc_record_t rec = {.front = front, .user_bytes = user_bytes, .pid = (int64_t)getpid()};
    memcpy(rec.handle, handle->reserved, sizeof rec.handle);
    rz_ipc_place_t place;
    int rc = rz__ipc_export(&rec, ptr, index, &place);
    char usual[RZ_PATH_MAX], refused[RZ_PATH_MAX + 96] = "";
    if (place.refused && rz__ipc_dir(usual, sizeof usual) == 0)
        snprintf(refused, sizeof refused, "; %s is not this user's private directory and is not used", usual);
    static atomic_int warned, failed;
    if (rc == RZ_OK && !atomic_exchange(&warned, 1))
        rz__warn("cuIpcGetMemHandle of alloc#%llu, which has a %llu-byte front band: the handle names the padded "
                 "block; a process that opens it gets the program's pointer only if it runs under redzone too "
                 "(it reads the band from %s%s)",
                 (unsigned long long)index, (unsigned long long)front, place.dir, refused);
    if (rc != RZ_OK && !atomic_exchange(&failed, 1)) {
        char roots[2 * RZ_PATH_MAX];
        rz__ipc_roots(roots, sizeof roots);
        rz__warn("cuIpcGetMemHandle of alloc#%llu: cannot record its %llu-byte front band under %s (%s%s): this "
                 "process's own opens of the handle get the program's pointer, another process's the start of "
                 "the front band",
                 (unsigned long long)index, (unsigned long long)front, roots,
                 rc == RZ_ENOMEM ? "out of host memory" : strerror(place.err ? place.err : EIO), refused);
    }
}

/* The zone dptr starts, for an export: its front band (0: none, or not a zone's pointer), size and index;
 * its band is no longer taken as seen by the hooks (another process's kernels may write it). */
static uint64_t export_front(rzcu_deviceptr dptr, uint64_t *user_bytes, uint64_t *index) {
    uint64_t front = 0;
    rz__registry_lock();
    rz_zone_node_t *z = rz__registry_find(dptr); /* a zone's own pointer only: inner ones stay the driver's */
    if (z && rz__zone_seen(z))
        z->reserved0 &= (uint8_t)~RZ_ZONE_SEEN;
    if (z && rz__options()->front_bytes && z->front_units && !(z->flags & RZ_ZONE_GUARD)) {
        front = rz__zone_front(z);
        *user_bytes = z->user_bytes;
        *index = z->index;
    }
    rz__registry_unlock();
    return front;
}

rzcu_result cuIpcGetMemHandle(rzcu_ipc_mem_handle *handle, rzcu_deviceptr dptr) {
    rzcu_fn_cuIpcGetMemHandle *real = REAL(cuIpcGetMemHandle);
    if (real == NULL)
        return rz__hook_missing();
    if (t_in_ipc || handle == NULL)
        return real(handle, dptr);
    t_in_ipc = 1;
    uint64_t user_bytes = 0, index = 0;
    uint64_t front = export_front(dptr, &user_bytes, &index);
    rzcu_result r = real(handle, dptr - front);
    if (r == RZCUDA_SUCCESS && front)
        exported(handle, dptr, index, front, user_bytes);
    if (r == RZCUDA_SUCCESS)
        rz__quarantine_exported(dptr);
    t_in_ipc = 0;
    return r;
}

/* Whether the record fits what the driver opened at drv: its block starts there and holds the band and the
 * program's bytes (a record that does not is not this mapping's; the driver's pointer is kept). A driver that
 * cannot say is trusted with the record. */
static int record_fits(rzcu_deviceptr drv, const rz_ipc_record_t *rec) {
    rzcu_deviceptr base = 0;
    size_t size = 0;
    if (rz__drv.cuMemGetAddressRange_v2 == NULL || rz__drv.cuMemGetAddressRange_v2(&base, &size, drv) != RZCUDA_SUCCESS)
        return 1;
    return base == drv && size >= rec->front && size - rec->front >= rec->user_bytes;
}

static rzcu_result open_handle(rzcu_fn_cuIpcOpenMemHandle_v2 *real, rzcu_deviceptr *pdptr, rzcu_ipc_mem_handle handle,
                               unsigned int flags) {
    if (real == NULL)
        return rz__hook_missing();
    rzcu_result r = real(pdptr, handle, flags);
    if (r != RZCUDA_SUCCESS || pdptr == NULL || t_in_ipc)
        return r;
    t_in_ipc = 1;
    rz_ipc_record_t rec;
    rzcu_deviceptr drv = *pdptr;
    if (rz__ipc_lookup((const unsigned char *)handle.reserved, &rec)) {
        static atomic_int warned;
        if (!record_fits(drv, &rec)) {
            if (!atomic_exchange(&warned, 1))
                rz__warn("cuIpcOpenMemHandle: the front band recorded for this handle (%llu bytes, %llu-byte buffer) "
                         "does not fit the block the driver opened at 0x%llx: the driver's pointer is returned",
                         (unsigned long long)rec.front, (unsigned long long)rec.user_bytes, (unsigned long long)drv);
        } else if (rz__ipc_opened(drv + rec.front, drv) == RZ_OK) {
            *pdptr = drv + rec.front;
        } else if (!atomic_exchange(&warned, 1)) {
            rz__warn("cuIpcOpenMemHandle: out of host memory for the table of opened handles: the driver's "
                     "pointer (the start of the exporter's front band) is returned");
        }
    }
    t_in_ipc = 0;
    return r;
}

rzcu_result cuIpcOpenMemHandle_v2(rzcu_deviceptr *pdptr, rzcu_ipc_mem_handle handle, unsigned int flags) {
    return open_handle(REAL(cuIpcOpenMemHandle_v2), pdptr, handle, flags);
}
rzcu_result cuIpcOpenMemHandle(rzcu_deviceptr *pdptr, rzcu_ipc_mem_handle handle, unsigned int flags) {
    return open_handle(REAL(cuIpcOpenMemHandle), pdptr, handle, flags);
}

rzcu_result cuIpcCloseMemHandle(rzcu_deviceptr dptr) {
    rzcu_fn_cuIpcCloseMemHandle *real = REAL(cuIpcCloseMemHandle);
    if (real == NULL)
        return rz__hook_missing();
    uint64_t drv;
    if (t_in_ipc || !rz__ipc_driver_ptr(dptr, &drv))
        return real(dptr);
    rzcu_result r = real(drv);
    if (r == RZCUDA_SUCCESS)
        rz__ipc_closed(dptr);
    return r;
}

/* ---- pool pointer exports ------------------------------------------------------------------------------ */
rzcu_result cuMemPoolExportPointer(rzcu_mem_pool_ptr_export_data *data, rzcu_deviceptr ptr) {
    rzcu_fn_cuMemPoolExportPointer *real = REAL(cuMemPoolExportPointer);
    if (real == NULL)
        return rz__hook_missing();
    if (t_in_ipc || data == NULL)
        return real(data, ptr);
    t_in_ipc = 1;
    uint64_t user_bytes = 0, index = 0;
    uint64_t front = export_front(ptr, &user_bytes, &index);
    rzcu_result r = real(data, ptr - front);
    if (r == RZCUDA_SUCCESS)
        rz__quarantine_exported(ptr); /* its free is not held: an import of it must fail once it is freed */
    if (r == RZCUDA_SUCCESS && front) {
        _Static_assert(sizeof data->reserved == sizeof ((rz_ipc_record_t *)0)->handle, "export data as a handle");
        rz_ipc_record_t rec = {.front = front, .user_bytes = user_bytes, .pid = (int64_t)getpid()};
        memcpy(rec.handle, data->reserved, sizeof rec.handle);
        static atomic_int failed;
        if (rz__ipc_export(&rec, ptr, index, NULL) != RZ_OK && !atomic_exchange(&failed, 1))
            rz__warn("cuMemPoolExportPointer of alloc#%llu: cannot record its %llu-byte front band: an import of "
                     "it gets the start of the front band", (unsigned long long)index, (unsigned long long)front);
    }
    t_in_ipc = 0;
    return r;
}

rzcu_result cuMemPoolImportPointer(rzcu_deviceptr *ptr_out, rzcu_mem_pool pool, rzcu_mem_pool_ptr_export_data *data) {
    rzcu_fn_cuMemPoolImportPointer *real = REAL(cuMemPoolImportPointer);
    if (real == NULL)
        return rz__hook_missing();
    rzcu_result r = real(ptr_out, pool, data);
    if (r != RZCUDA_SUCCESS || ptr_out == NULL || data == NULL || t_in_ipc)
        return r;
    t_in_ipc = 1;
    rz_ipc_record_t rec;
    rzcu_deviceptr drv = *ptr_out;
    if (rz__ipc_lookup(data->reserved, &rec)) {
        static atomic_int warned;
        if (!record_fits(drv, &rec)) {
            if (!atomic_exchange(&warned, 1))
                rz__warn("cuMemPoolImportPointer: the front band recorded for this export (%llu bytes, %llu-byte "
                         "buffer) does not fit the block the driver imported at 0x%llx: the driver's pointer is "
                         "returned", (unsigned long long)rec.front, (unsigned long long)rec.user_bytes,
                         (unsigned long long)drv);
        } else if (rz__ipc_opened(drv + rec.front, drv) == RZ_OK) {
            *ptr_out = drv + rec.front;
        } else if (!atomic_exchange(&warned, 1)) {
            rz__warn("cuMemPoolImportPointer: out of host memory for the table of imports: the driver's pointer "
                     "(the start of the exporter's front band) is returned");
        }
    }
    t_in_ipc = 0;
    return r;
}
