/*
 * The driver's entry points (rz__drv), resolved once from libcuda.so.1 with dlopen and the real dlsym, never
 * by linking: on a GPU machine the NVIDIA driver, in tests and demos the emulated driver (a host-memory
 * libcuda.so.1), the same code path either way. Only the device seam (this folder) and the interposers, which
 * forward the program's own calls, call through it.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common.h"
#include "driver.h"
#include "driver_info.h"
#include "report.h"
#include "state.h"

rz_driver_t rz__drv;

void *rz__real_dlsym(void *handle, const char *name) {
    typedef void *dlsym_fn(void *, const char *);
    static dlsym_fn *real;
    if (real == NULL) {
        /* glibc 2.34 moved dlsym into libc with a new version; older ones have only GLIBC_2.2.5. */
        dlsym_fn *f = (dlsym_fn *)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (f == NULL)
            f = (dlsym_fn *)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        real = f;
    }
    return real ? real(handle, name) : NULL;
}

static pthread_once_t g_load_once = PTHREAD_ONCE_INIT;
static int g_load_status = RZ_ENODRIVER;

static void load(void) {
    /* RTLD_NOLOAD first: a program that already loaded a driver (maybe from a non-default path) keeps it. */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL)
        h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *err = dlerror();
        rz__warn("cannot load the CUDA driver libcuda.so.1 (%s)", err ? err : "unknown error");
        return;
    }
#define RZ_RESOLVE(name, ret, params) rz__drv.name = (rzcu_fn_##name *)rz__real_dlsym(h, #name);
    RZCU_ENTRY_POINTS(RZ_RESOLVE)
    RZCU_IPC_ENTRY_POINTS(RZ_RESOLVE)
#undef RZ_RESOLVE
#define RZ_RESOLVE_VARIANT(variant, base) rz__drv.variant = (rzcu_fn_##base *)rz__real_dlsym(h, #variant);
    RZCU_PER_THREAD_VARIANTS(RZ_RESOLVE_VARIANT)
    RZCU_LEGACY_ENTRY_POINTS(RZ_RESOLVE_VARIANT)
    RZCU_IPC_LEGACY_ENTRY_POINTS(RZ_RESOLVE_VARIANT)
#undef RZ_RESOLVE_VARIANT
#define RZ_RESOLVE(name, ret, params) rz__drv.name = (rzcu_fn_##name *)rz__real_dlsym(h, #name);
    RZCU_OPTIONAL_ENTRY_POINTS(RZ_RESOLVE)
#undef RZ_RESOLVE
#define RZ_RESOLVE_VARIANT(variant, base) rz__drv.variant = (rzcu_fn_##base *)rz__real_dlsym(h, #variant);
    RZCU_OPTIONAL_VARIANTS(RZ_RESOLVE_VARIANT)
#undef RZ_RESOLVE_VARIANT
    rz__drv.cuStreamBeginCapture = (rzcu_fn_cuStreamBeginCapture *)rz__real_dlsym(h, "cuStreamBeginCapture");
    rz__drv.cuStreamBeginCapture_ptsz = (rzcu_fn_cuStreamBeginCapture *)rz__real_dlsym(h, "cuStreamBeginCapture_ptsz");
    rz__drv.cuGetProcAddress = (rzcu_fn_cuGetProcAddress *)rz__real_dlsym(h, "cuGetProcAddress");
#define RZ_RESOLVE_WRITER(exported, base, since, per_thread, params, args)                                   \
    rz__drv.writers.exported = (rzcu_wfn_##exported *)rz__real_dlsym(h, #exported);
    RZCU_DEVICE_WRITERS(RZ_RESOLVE_WRITER)
#undef RZ_RESOLVE_WRITER
    if (rz__drv.cuMemAlloc_v2 == NULL || rz__drv.cuMemFree_v2 == NULL || rz__drv.cuCtxGetCurrent == NULL ||
        rz__drv.cuMemsetD8Async == NULL || rz__drv.cuMemcpyDtoHAsync_v2 == NULL || rz__drv.cuStreamCreate == NULL ||
        rz__drv.cuStreamSynchronize == NULL || rz__drv.cuCtxPushCurrent_v2 == NULL || rz__drv.cuCtxPopCurrent_v2 == NULL) {
        rz__warn("libcuda.so.1 lacks entry points redzone needs; red zones are off");
        memset(&rz__drv, 0, sizeof rz__drv);
        return;
    }
    g_load_status = RZ_OK;
    rz__report_error_namer(rz__dev_error_name); /* rz__cu_name asks the driver from now on */
    __atomic_store_n(&RZ_STATE.driver_loaded, 1, __ATOMIC_RELEASE);
}

int rz__dev_load(void) {
    if (RZ_LIKELY(__atomic_load_n(&RZ_STATE.driver_loaded, __ATOMIC_ACQUIRE)))
        return RZ_OK;
    pthread_once(&g_load_once, load);
    return g_load_status;
}

rzcu_result rz__dev_alloc(rz_devptr_t *p, size_t bytes) { return rz__drv.cuMemAlloc_v2(p, bytes); }

rzcu_result rz__dev_free(rz_devptr_t p) { return rz__drv.cuMemFree_v2(p); }

