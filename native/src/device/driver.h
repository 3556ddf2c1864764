/*
 * The driver's entry points (driver.c).
 */
#ifndef REDZONE_DRIVER_H
#define REDZONE_DRIVER_H

#include "common.h"

/* The driver's entry points, resolved once from libcuda.so.1. NULL where the driver lacks one. */
typedef struct rz_driver {
#define RZ_DRIVER_FIELD(name, ret, params) rzcu_fn_##name *name;
    RZCU_ENTRY_POINTS(RZ_DRIVER_FIELD)
#undef RZ_DRIVER_FIELD
#define RZ_DRIVER_VARIANT(variant, base) rzcu_fn_##base *variant;
    RZCU_PER_THREAD_VARIANTS(RZ_DRIVER_VARIANT)
    RZCU_LEGACY_ENTRY_POINTS(RZ_DRIVER_VARIANT)
    RZCU_IPC_LEGACY_ENTRY_POINTS(RZ_DRIVER_VARIANT)
    RZCU_CTX_LEGACY_ENTRY_POINTS(RZ_DRIVER_VARIANT)
    RZCU_CTX_CREATE_VARIANTS(RZ_DRIVER_VARIANT)
#undef RZ_DRIVER_VARIANT
#define RZ_DRIVER_FIELD(name, ret, params) rzcu_fn_##name *name;
    RZCU_OPTIONAL_ENTRY_POINTS(RZ_DRIVER_FIELD)
    RZCU_IPC_ENTRY_POINTS(RZ_DRIVER_FIELD)
    RZCU_CTX_CREATE_ENTRY_POINTS(RZ_DRIVER_FIELD)
#undef RZ_DRIVER_FIELD
#define RZ_DRIVER_VARIANT(variant, base) rzcu_fn_##base *variant;
    RZCU_OPTIONAL_VARIANTS(RZ_DRIVER_VARIANT)
#undef RZ_DRIVER_VARIANT
    rzcu_fn_cuStreamBeginCapture *cuStreamBeginCapture, *cuStreamBeginCapture_ptsz;
    rzcu_fn_cuGetProcAddress *cuGetProcAddress;
    struct { /* the entry points hooks.c wraps to install bands first, by exported name */
#define RZ_WRITER_FIELD(exported, base, since, per_thread, params, args) rzcu_wfn_##exported *exported;
        RZCU_DEVICE_WRITERS(RZ_WRITER_FIELD)
#undef RZ_WRITER_FIELD
    } writers;
} rz_driver_t;

/* The real dlsym (hooks.c interposes dlsym; the library itself must never get its own wrappers). */
void *rz__real_dlsym(void *handle, const char *name);

extern rz_driver_t rz__drv;

/* Load the driver once. RZ_OK or RZ_ENODRIVER (warned once). */
int rz__dev_load(void);

rzcu_result rz__dev_alloc(rz_devptr_t *p, size_t bytes);

rzcu_result rz__dev_free(rz_devptr_t p);

#endif /* REDZONE_DRIVER_H */
