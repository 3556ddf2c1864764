/*
 * The emulated driver's kernel launches: cuLaunchKernel, cuLaunchCooperativeKernel, cuLaunchKernelEx (and the
 * _ptsz forms). The function (modules: emu_module.c, libraries: emu_library.c) runs on the stream's worker.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "emu_engine.h"
#include "rz_annotate.h"

/* ------------------------------------------------------------------------------------------------------ */
/* kernel launches (modules and functions: emu_module.c) */

#define MAX_DYNAMIC_SHARED 49152u /* MAX_SHARED_MEMORY_PER_BLOCK: more needs an opt-in the emulator lacks */
#define PARAM_ALIGN 16u

/* CUlaunchAttribute, laid out as in cuda.h (cu.h only passes it by pointer). */
struct CUlaunchAttribute_st {
    unsigned int id;
    char pad[4];
    union {
        char pad[64];
        int i;
        void *p;
        unsigned long long u;
    } value;
};
_Static_assert(sizeof(struct CUlaunchAttribute_st) == 72, "CUlaunchAttribute layout");

/*
 * Launch attributes: those that do not change what a kernel computes are accepted and ignored (IGNORE,
 * ACCESS_POLICY_WINDOW, COOPERATIVE: the whole grid runs at once anyway, SYNCHRONIZATION_POLICY,
 * CLUSTER_SCHEDULING_POLICY_PREFERENCE, PROGRAMMATIC_STREAM_SERIALIZATION: the emulator never overlaps,
 * PRIORITY, MEM_SYNC_DOMAIN_MAP, MEM_SYNC_DOMAIN, PREFERRED_SHARED_MEMORY_CARVEOUT,
 * NVLINK_UTIL_CENTRIC_SCHEDULING); CLUSTER_DIMENSION, PROGRAMMATIC_EVENT, PREFERRED_CLUSTER_DIMENSION,
 * LAUNCH_COMPLETION_EVENT and DEVICE_UPDATABLE_KERNEL_NODE are CUDA_ERROR_NOT_SUPPORTED; unknown ids are
 * CUDA_ERROR_INVALID_VALUE.
 */
static rzcu_result check_launch_attrs(const struct CUlaunchAttribute_st *attrs, unsigned n)
{
    if (n && !attrs)
        return RZCUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++) {
        switch (attrs[i].id) {
        case 0: case 1: case 2: case 3: case 5: case 6: case 8: case 9: case 10: case 14: case 16:
            break;
        case 4: case 7: case 11: case 12: case 13:
            return RZCUDA_ERROR_NOT_SUPPORTED;
        default:
            return RZCUDA_ERROR_INVALID_VALUE;
        }
    }
    return RZCUDA_SUCCESS;
}

static rzcu_result do_launch(rzcu_function f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned shared_bytes, rzcu_stream hstream, void **params, void **extra,
                             bool per_thread)
{
    struct emu_kernel k;
    CHECK(emu_function_resolve(f, &k));
    struct CUstream_st *s;
    CHECK(emu_resolve_stream(hstream, per_thread, NULL, &s));
    if (k.ctx && s->ctx != k.ctx) /* a library kernel (ctx NULL) runs in any context */
        return RZCUDA_ERROR_INVALID_HANDLE;
    if (!gx || !gy || !gz || !bx || !by || !bz || gx > 2147483647u || gy > 65535u || gz > 65535u || bx > 1024u ||
        by > 1024u || bz > 64u || (unsigned long long)bx * by * bz > 1024u || shared_bytes > MAX_DYNAMIC_SHARED)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (params && extra)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (extra && extra[0]) /* a parameter buffer (an empty list, CU_LAUNCH_PARAM_END first, is no extra) */
        return RZCUDA_ERROR_NOT_SUPPORTED;
    if (k.nparams && !params)
        return RZCUDA_ERROR_INVALID_VALUE;
    size_t bytes = 0;
    for (size_t i = 0; i < k.nparams; i++) {
        if (!params[i] || k.sizes[i] > SIZE_MAX / 2 - bytes)
            return RZCUDA_ERROR_INVALID_VALUE;
        bytes += (k.sizes[i] + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN;
    }
    struct op *op = emu_op_new(s->ctx, OP_KERNEL);
    size_t ptrs = (k.nparams * sizeof(void *) + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN;
    void **kparams = op ? aligned_alloc(PARAM_ALIGN, ptrs + bytes + PARAM_ALIGN) : NULL;
    if (!kparams) {
        free(op);
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    }
    /* the values are copied now: the caller may reuse its argument storage as soon as this returns */
    char *data = (char *)kparams + ptrs;
    for (size_t i = 0; i < k.nparams; i++) {
        memcpy(data, params[i], k.sizes[i]);
        kparams[i] = data;
        data += (k.sizes[i] + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN;
    }
    op->kernel = k.fn;
    op->kparams = kparams;
    op->kparams_size = ptrs + bytes + PARAM_ALIGN;
    op->nkparams = k.nparams;
    op->hold_epoch = emu_cfg.kernel_hold ? emu_hold_now() : 0;
    op->launch = (cuda_emu_launch_t){{gx, gy, gz}, {bx, by, bz}, shared_bytes};
    return emu_submit(s, op, false);
}

EMU_API rzcu_result cuLaunchKernel(rzcu_function f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared_bytes,
                                   rzcu_stream s, void **params, void **extra)
{
    ENTER(cuLaunchKernel);
    return do_launch(f, gx, gy, gz, bx, by, bz, shared_bytes, s, params, extra, false);
}

EMU_API rzcu_result cuLaunchKernel_ptsz(rzcu_function f, unsigned int gx, unsigned int gy, unsigned int gz,
                                        unsigned int bx, unsigned int by, unsigned int bz,
                                        unsigned int shared_bytes, rzcu_stream s, void **params, void **extra)
{
    ENTER(cuLaunchKernel_ptsz);
    return do_launch(f, gx, gy, gz, bx, by, bz, shared_bytes, s, params, extra, true);
}

/* A cooperative launch: the emulator runs a whole grid at once anyway, so only the arguments are checked. */
EMU_API rzcu_result cuLaunchCooperativeKernel(rzcu_function f, unsigned int gx, unsigned int gy, unsigned int gz,
                                              unsigned int bx, unsigned int by, unsigned int bz,
                                              unsigned int shared_bytes, rzcu_stream s, void **params)
{
    ENTER(cuLaunchCooperativeKernel);
    return do_launch(f, gx, gy, gz, bx, by, bz, shared_bytes, s, params, NULL, false);
}

EMU_API rzcu_result cuLaunchCooperativeKernel_ptsz(rzcu_function f, unsigned int gx, unsigned int gy,
                                                   unsigned int gz, unsigned int bx, unsigned int by,
                                                   unsigned int bz, unsigned int shared_bytes, rzcu_stream s,
                                                   void **params)
{
    ENTER(cuLaunchCooperativeKernel_ptsz);
    return do_launch(f, gx, gy, gz, bx, by, bz, shared_bytes, s, params, NULL, true);
}

static rzcu_result do_launch_ex(const rzcu_launch_config *config, rzcu_function f, void **params, void **extra,
                                bool per_thread)
{
    if (!config)
        return RZCUDA_ERROR_INVALID_VALUE;
    CHECK(check_launch_attrs(config->attrs, config->numAttrs));
    return do_launch(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX, config->blockDimY,
                     config->blockDimZ, config->sharedMemBytes, config->hStream, params, extra, per_thread);
}

EMU_API rzcu_result cuLaunchKernelEx(const rzcu_launch_config *config, rzcu_function f, void **params, void **extra)
{
    ENTER(cuLaunchKernelEx);
    return do_launch_ex(config, f, params, extra, false);
}

EMU_API rzcu_result cuLaunchKernelEx_ptsz(const rzcu_launch_config *config, rzcu_function f, void **params,
                                          void **extra)
{
    ENTER(cuLaunchKernelEx_ptsz);
    return do_launch_ex(config, f, params, extra, true);
}

