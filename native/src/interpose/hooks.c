/*
 * Interposition (LD_PRELOAD of libredzone.so): the driver's application-facing allocation, free, address
 * range, synchronisation and launch entry points, under their exported names, so an unmodified program
 * gets red zones. Programs reach the driver three ways and all three end here:
 *   1. linked against libcuda: the dynamic linker binds their calls to these definitions (we come first);
 *   2. dlopen("libcuda.so.1") + dlsym: dlsym is interposed and hands out these wrappers for wrapped names
 *      where what it found is the driver's own definition (another library's function of that name stays);
 *   3. cuGetProcAddress (how libcudart, i.e. cudaMalloc, fetches every entry point): the wrappers of
 *      cuGetProcAddress (v1 and v2) swap each wrapped entry point for its wrapper, itself included.
 * Every other call goes to the driver untouched. The library's own driver calls use the real entry points
 * (rz__drv, resolved with the real dlsym), never these wrappers, so they take no creation index; a
 * thread-local guard sends re-entrant calls (a driver calling back into its exported names) straight
 * through.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "hooks.h"
#include "alloc.h"
#include "api.h"
#include "band.h"
#include "capture.h"
#include "copy_check.h"
#include "copy_ranges.h"
#include "device_ctx.h"
#include "dlsym_next.h"
#include "driver.h"
#include "events.h"
#include "fill_marks.h"
#include "free_check.h"
#include "launch_check.h"
#include "launch_ring.h"
#include "options.h"
#include "proc_names.h"
#include "quarantine.h"
#include "registry.h"
#include "state.h"
#include "sticky.h"
#include "stream_fills.h"
#include "subscriptions.h"
#include "sync_scan.h"
#include "thread_state.h"
#include "work_epoch.h"

#define t_in_hook (rz__thread.in_hook) /* in the thread-state record (thread_state.h) */

#define ENTER()                                                                                              \
    int reentered_ = t_in_hook;                                                                              \
    t_in_hook = 1
#define LEAVE() t_in_hook = reentered_

/* A program that looks up an entry point the driver lacks gets no wrapper in the first place (rz__dlsym). */
static inline rzcu_result missing(void) { return rz__hook_missing(); }

/* ---- allocation -------------------------------------------------------------------------------------- */
static rzcu_result do_alloc(rzcu_deviceptr *dptr, size_t bytes, const rz_alloc_req_t *req) {
    ENTER();
    rzcu_result r;
    if (reentered_) {
        /* Not an application call: straight to the driver, no index, no band. */
        r = RZCUDA_ERROR_NOT_SUPPORTED;
        switch (req->kind) {
        case RZ_ALLOC_PLAIN:
            r = rz__drv.cuMemAlloc_v2(dptr, bytes);
            break;
        case RZ_ALLOC_MANAGED:
            r = rz__drv.cuMemAllocManaged(dptr, bytes, req->flags);
            break;
        case RZ_ALLOC_PITCH:
            r = rz__drv.cuMemAllocPitch_v2(dptr, req->pitch, req->width, req->height, req->element_bytes);
            break;
        case RZ_ALLOC_ASYNC:
            r = (req->per_thread ? rz__drv.cuMemAllocAsync_ptsz : rz__drv.cuMemAllocAsync)(dptr, bytes, req->stream);
            break;
        case RZ_ALLOC_POOL:
            r = (req->per_thread ? rz__drv.cuMemAllocFromPoolAsync_ptsz : rz__drv.cuMemAllocFromPoolAsync)(
                dptr, bytes, req->pool, req->stream);
            break;
        }
    } else {
        r = (rzcu_result)rz__alloc(dptr, bytes, req);
    }
    LEAVE();
    return r;
}

RZ_EXPORT rzcu_fn_cuMemAlloc_v2 cuMemAlloc_v2;
rzcu_result cuMemAlloc_v2(rzcu_deviceptr *dptr, size_t bytesize) {
    if (RZ_UNLIKELY(t_in_hook)) {
        rz_alloc_req_t req = {.kind = RZ_ALLOC_PLAIN};
        return do_alloc(dptr, bytesize, &req);
    }
    t_in_hook = 1;
    rzcu_result r = (rzcu_result)rz__alloc_interposed(dptr, bytesize);
    t_in_hook = 0;
    return r;
}

RZ_EXPORT rzcu_fn_cuMemAllocManaged cuMemAllocManaged;
rzcu_result cuMemAllocManaged(rzcu_deviceptr *dptr, size_t bytesize, unsigned int flags) {
    rz_alloc_req_t req = {.kind = RZ_ALLOC_MANAGED, .flags = flags, .interposed = 1};
    return do_alloc(dptr, bytesize, &req);
}

RZ_EXPORT rzcu_fn_cuMemAllocPitch_v2 cuMemAllocPitch_v2;
rzcu_result cuMemAllocPitch_v2(rzcu_deviceptr *dptr, size_t *pitch, size_t width_bytes, size_t height,
                               unsigned int element_bytes) {
    rz_alloc_req_t req = {.kind = RZ_ALLOC_PITCH, .interposed = 1, .pitch = pitch, .width = width_bytes, .height = height,
                          .element_bytes = element_bytes};
    size_t bytes = (height && width_bytes > SIZE_MAX / height) ? 0 : width_bytes * height;
    return do_alloc(dptr, bytes, &req);
}

#define ASYNC_ALLOC(name, per_thread_)                                                                       \
    RZ_EXPORT rzcu_fn_cuMemAllocAsync name;                                                                  \
    rzcu_result name(rzcu_deviceptr *dptr, size_t bytesize, rzcu_stream s) {                                 \
        rz_alloc_req_t req = {.kind = RZ_ALLOC_ASYNC, .stream = s, .per_thread = per_thread_};              \
        return do_alloc(dptr, bytesize, &req);                                                               \
    }
ASYNC_ALLOC(cuMemAllocAsync, 0)
ASYNC_ALLOC(cuMemAllocAsync_ptsz, 1)

#define POOL_ALLOC(name, per_thread_)                                                                        \
    RZ_EXPORT rzcu_fn_cuMemAllocFromPoolAsync name;                                                          \
    rzcu_result name(rzcu_deviceptr *dptr, size_t bytesize, rzcu_mem_pool pool, rzcu_stream s) {             \
        rz_alloc_req_t req = {.kind = RZ_ALLOC_POOL, .pool = pool, .stream = s, .per_thread = per_thread_}; \
        return do_alloc(dptr, bytesize, &req);                                                               \
    }
POOL_ALLOC(cuMemAllocFromPoolAsync, 0)
POOL_ALLOC(cuMemAllocFromPoolAsync_ptsz, 1)

/* ---- free -------------------------------------------------------------------------------------------- */
static rzcu_result do_free(rzcu_deviceptr dptr, const rz_free_req_t *req) {
    ENTER();
    rzcu_result r;
    if (reentered_)
        r = req->async ? (req->per_thread ? rz__drv.cuMemFreeAsync_ptsz : rz__drv.cuMemFreeAsync)(dptr, req->stream)
                       : rz__drv.cuMemFree_v2(dptr);
    else
        r = (rzcu_result)rz__free(dptr, req);
    LEAVE();
    return r;
}

RZ_EXPORT rzcu_fn_cuMemFree_v2 cuMemFree_v2;
rzcu_result cuMemFree_v2(rzcu_deviceptr dptr) {
    static const rz_free_req_t req = {.async = 0};
    return do_free(dptr, &req);
}

#define ASYNC_FREE(name, per_thread_)                                                                        \
    RZ_EXPORT rzcu_fn_cuMemFreeAsync name;                                                                   \
    rzcu_result name(rzcu_deviceptr dptr, rzcu_stream s) {                                                   \
        rz_free_req_t req = {.async = 1, .stream = s, .per_thread = per_thread_};                            \
        return do_free(dptr, &req);                                                                          \
    }
ASYNC_FREE(cuMemFreeAsync, 0)
ASYNC_FREE(cuMemFreeAsync_ptsz, 1)

/* The program sees its own range, not the padded one (nor a guard zone's mapping); an address inside a band,
 * or in a guard mapping before the buffer, belongs to no allocation. */
RZ_EXPORT rzcu_fn_cuMemGetAddressRange_v2 cuMemGetAddressRange_v2;
rzcu_result cuMemGetAddressRange_v2(rzcu_deviceptr *pbase, size_t *psize, rzcu_deviceptr dptr) {
    rzcu_fn_cuMemGetAddressRange_v2 *real = REAL(cuMemGetAddressRange_v2);
    if (real == NULL)
        return missing();
    rzcu_deviceptr base = 0;
    size_t size = 0;
    rzcu_result r = real(&base, &size, dptr);
    if (r != RZCUDA_SUCCESS || t_in_hook)
        goto out;
    rz_qentry_t held;
    if (RZ_UNLIKELY(rz__quarantine_find(dptr, &held))) {
        r = RZCUDA_ERROR_NOT_FOUND; /* freed by the program, held in the quarantine: the driver's answer then */
        goto out;
    }
    rz__registry_lock();
    const rz_zone_node_t *z = rz__zone_of_block(base, dptr);
    if (z && size < rz__zone_mapped_bytes(z))
        z = NULL; /* a smaller block than the zone's (its context ended unseen): the driver's own answer */
    if (z && (z->pad_bytes || (z->flags & RZ_ZONE_GUARD))) {
        if (dptr < z->ptr || dptr >= z->ptr + z->user_bytes) {
            r = RZCUDA_ERROR_NOT_FOUND; /* inside a band: no allocation of the program's */
        } else {
            base = z->ptr;
            size = z->user_bytes;
        }
    }
    rz__registry_unlock();
out:
    if (r == RZCUDA_SUCCESS) {
        if (pbase)
            *pbase = base;
        if (psize)
            *psize = size;
    }
    return r;
}

/* Pointer attributes answer for the program's range: band bytes belong to no allocation of the program's
 * (CUDA_ERROR_INVALID_VALUE, as the driver answers without redzone for an address past the end), and the
 * range attributes give the program's start and size, as cuMemGetAddressRange does above. */
RZ_EXPORT rzcu_fn_cuPointerGetAttribute cuPointerGetAttribute;
rzcu_result cuPointerGetAttribute(void *data, rzcu_pointer_attribute attribute, rzcu_deviceptr ptr) {
    rzcu_fn_cuPointerGetAttribute *real = REAL(cuPointerGetAttribute);
    if (real == NULL)
        return missing();
    if (t_in_hook || data == NULL || rz__options()->pad_bytes + rz__options()->front_bytes == 0 ||
        rz__drv.cuMemGetAddressRange_v2 == NULL)
        return real(data, attribute, ptr);
    rzcu_deviceptr base = 0, user_base = 0;
    size_t size = 0, user_size = 0;
    int in_block = rz__drv.cuMemGetAddressRange_v2(&base, &size, ptr) == RZCUDA_SUCCESS;
    rzcu_result mine = cuMemGetAddressRange_v2(&user_base, &user_size, ptr); /* the program's view */
    if (in_block && mine == RZCUDA_ERROR_NOT_FOUND)
        return RZCUDA_ERROR_INVALID_VALUE; /* a band byte */
    rzcu_result r = real(data, attribute, ptr);
    if (r == RZCUDA_SUCCESS && mine == RZCUDA_SUCCESS) {
        if (attribute == RZCU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
            *(rzcu_deviceptr *)data = user_base;
        else if (attribute == RZCU_POINTER_ATTRIBUTE_RANGE_SIZE)
            *(size_t *)data = user_size;
    }
    return r;
}

/* The plural answers the same way: for band bytes, what the driver answers for an address no allocation
 * holds (asked of the driver for address 0: success with each attribute's default value, as documented);
 * RANGE_START_ADDR/RANGE_SIZE for the program's range. */
RZ_EXPORT rzcu_fn_cuPointerGetAttributes cuPointerGetAttributes;
rzcu_result cuPointerGetAttributes(unsigned int num, rzcu_pointer_attribute *attributes, void **data,
                                   rzcu_deviceptr ptr) {
    rzcu_fn_cuPointerGetAttributes *real = REAL(cuPointerGetAttributes);
    if (real == NULL)
        return missing();
    if (t_in_hook || attributes == NULL || data == NULL ||
        rz__options()->pad_bytes + rz__options()->front_bytes == 0 || rz__drv.cuMemGetAddressRange_v2 == NULL)
        return real(num, attributes, data, ptr);
    rzcu_deviceptr base = 0, user_base = 0;
    size_t size = 0, user_size = 0;
    int in_block = rz__drv.cuMemGetAddressRange_v2(&base, &size, ptr) == RZCUDA_SUCCESS;
    rzcu_result mine = cuMemGetAddressRange_v2(&user_base, &user_size, ptr); /* the program's view */
    if (in_block && mine == RZCUDA_ERROR_NOT_FOUND)
        return real(num, attributes, data, 0); /* a band byte */
    rzcu_result r = real(num, attributes, data, ptr);
    for (unsigned i = 0; r == RZCUDA_SUCCESS && mine == RZCUDA_SUCCESS && i < num; i++) {
        if (attributes[i] == RZCU_POINTER_ATTRIBUTE_RANGE_START_ADDR && data[i])
            *(rzcu_deviceptr *)data[i] = user_base;
        else if (attributes[i] == RZCU_POINTER_ATTRIBUTE_RANGE_SIZE && data[i])
            *(size_t *)data[i] = user_size;
    }
    return r;
}

/* ---- bands waiting to be written (lazy install) ------------------------------------------------------ */
/* Before anything that lets the program's work touch device memory; one load when nothing waits. */
static inline void install_bands(void) {
    if (!t_in_hook) {
        ENTER();
        rz__bands_install();
        LEAVE();
    }
}

/* Before the launch: the launch policy's check is set up (and a start marker queued); after it: the launch
 * ring, and the check queued behind the kernel (launch_check.c). */
static rzcu_result launched(const rz_launch_call_t *call, rzcu_result (*go)(const void *), const void *args) {
    if (t_in_hook)
        return go(args);
    t_in_hook = 1;
    struct rz_check *c = rz__launch_pre(call);
    t_in_hook = 0;
    rzcu_result r = go(args);
    t_in_hook = 1;
    rz__launch_post(c, call, r);
    t_in_hook = 0;
    return r;
}

/* Where the interposed entry point returns to: the launch policy's key for the launch call's stack. (Not
 * where that address is stored: __builtin_frame_address would give every wrapper a frame pointer, which
 * costs the default path more than the rest of it; launch_check.c finds the slot itself.) */
#define RZ_LAUNCH_CALLER .ret = __builtin_return_address(0)

/* RZ_WRITER_CALL(base, per_thread, real, args): the call of a writer's real entry point. For the launches
 * among the writers (a probe: RZ_LAUNCH_WRITER_<base> is defined for those), through launched(); for copies
 * and memsets, the plain call. */
#define RZ_SECOND_(a, b, ...) b
#define RZ_PROBE_(...) RZ_SECOND_(__VA_ARGS__, 0, ~)
#define RZ_CAT_(a, b) a##b
#define RZ_CAT(a, b) RZ_CAT_(a, b)
#define RZ_EXPAND_(...) __VA_ARGS__
#define RZ_LAUNCH_WRITER_cuLaunchCooperativeKernel ~, 1
#define RZ_LAUNCH_WRITER_cuGraphLaunch ~, 2
#define RZ_WRITER_CALL(base, per_thread, real, args)                                                         \
    RZ_CAT(RZ_WRITER_CALL_, RZ_PROBE_(RZ_LAUNCH_WRITER_##base))(per_thread, real, args)
#define RZ_WRITER_CALL_0(per_thread, real, args) real args
#define RZ_WRITER_CALL_1(per_thread, real, args)                                                             \
    (RZ_LIKELY(RZ_SCAN_LAUNCH_OFF()) ? real args                                                             \
                                 : cooperative_launch(per_thread, __builtin_return_address(0), real, RZ_EXPAND_ args))
#define RZ_WRITER_CALL_2(per_thread, real, args)                                                             \
    (RZ_LIKELY(RZ_SCAN_LAUNCH_OFF()) ? real args                                                             \
                                 : graph_launch(per_thread, __builtin_return_address(0), real, RZ_EXPAND_ args))

struct coop_args {
    rzcu_wfn_cuLaunchCooperativeKernel *real;
    rzcu_function f;
    unsigned gx, gy, gz, bx, by, bz, shared;
    rzcu_stream s;
    void **params;
};

static rzcu_result go_coop(const void *p) {
    const struct coop_args *a = p;
    return a->real(a->f, a->gx, a->gy, a->gz, a->bx, a->by, a->bz, a->shared, a->s, a->params);
}

static rzcu_result cooperative_launch(int per_thread, void *ret, rzcu_wfn_cuLaunchCooperativeKernel *real,
                                      rzcu_function f, unsigned gx, unsigned gy,
                                      unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                      rzcu_stream s, void **params) {
    rz_launch_call_t call = {.kind = RZ_LAUNCH_COOPERATIVE, .f = f, .grid = {gx, gy, gz}, .block = {bx, by, bz},
                             .stream = s, .per_thread = per_thread, .ret = ret};
    struct coop_args a = {real, f, gx, gy, gz, bx, by, bz, shared, s, params};
    return launched(&call, go_coop, &a);
}

struct graph_args {
    rzcu_wfn_cuGraphLaunch *real;
    void *exec;
    rzcu_stream s;
};

static rzcu_result go_graph(const void *p) {
    const struct graph_args *a = p;
    return a->real(a->exec, a->s);
}

static rzcu_result graph_launch(int per_thread, void *ret, rzcu_wfn_cuGraphLaunch *real, void *exec,
                                rzcu_stream s) {
    rz_launch_call_t call = {.kind = RZ_LAUNCH_GRAPH, .graph = exec, .stream = s, .per_thread = per_thread,
                             .ret = ret};
    struct graph_args a = {real, exec, s};
    return launched(&call, go_graph, &a);
}

/* The stream among a writer's arguments: its one rzcu_stream argument, or NULL (a synchronous copy or memset,
 * which runs on the default stream), whatever its position. */
#define RZ_STREAM_ARG(a) _Generic((a), rzcu_stream: (a), default: (rzcu_stream)NULL)
#define RZ_SA1(a) RZ_STREAM_ARG(a)
#define RZ_SA2(a, ...) (RZ_STREAM_ARG(a) ? RZ_STREAM_ARG(a) : RZ_SA1(__VA_ARGS__))
#define RZ_SA3(a, ...) (RZ_STREAM_ARG(a) ? RZ_STREAM_ARG(a) : RZ_SA2(__VA_ARGS__))
#define RZ_SA4(a, ...) (RZ_STREAM_ARG(a) ? RZ_STREAM_ARG(a) : RZ_SA3(__VA_ARGS__))
#define RZ_SA5(a, ...) (RZ_STREAM_ARG(a) ? RZ_STREAM_ARG(a) : RZ_SA4(__VA_ARGS__))
#define RZ_SA6(a, ...) (RZ_STREAM_ARG(a) ? RZ_STREAM_ARG(a) : RZ_SA5(__VA_ARGS__))
#define RZ_SA7(a, ...) (RZ_STREAM_ARG(a) ? RZ_STREAM_ARG(a) : RZ_SA6(__VA_ARGS__))
#define RZ_SA8(a, ...) (RZ_STREAM_ARG(a) ? RZ_STREAM_ARG(a) : RZ_SA7(__VA_ARGS__))
#define RZ_SA9(a, ...) (RZ_STREAM_ARG(a) ? RZ_STREAM_ARG(a) : RZ_SA8(__VA_ARGS__))
#define RZ_SA10(a, ...) (RZ_STREAM_ARG(a) ? RZ_STREAM_ARG(a) : RZ_SA9(__VA_ARGS__))
#define RZ_SA_PICK(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, name, ...) name
#define RZ_STREAM_IN(...)                                                                                    \
    RZ_SA_PICK(__VA_ARGS__, RZ_SA10, RZ_SA9, RZ_SA8, RZ_SA7, RZ_SA6, RZ_SA5, RZ_SA4, RZ_SA3, RZ_SA2, RZ_SA1)(__VA_ARGS__)

/* ---- copies and memsets: the driver's range check, against the program's sizes ----------------------- */
/* BOUNDS_<base> (copy_ranges.h): the ranges a call touches, each judged by copy_check.c. */

#define RZ_UNPAREN(...) __VA_ARGS__
#define RZ_CALL(f, ...) f(__VA_ARGS__)

/* Copies, memsets, cooperative and graph launches: the range check, install, then forward untouched (the
 * launches among them through launched() under the launch policy: RZ_WRITER_CALL picks the way by base
 * name); the work is noted after the driver accepted it, with its stream (sync scans judge a context once
 * its work is complete). */
#define RZ_WRITER_WRAPPER(exported, base, since, per_thread, params, args)                                   \
    RZ_EXPORT rzcu_wfn_##exported exported;                                                                  \
    rzcu_result exported params {                                                                            \
        rzcu_wfn_##exported *real = rz__dev_load() == RZ_OK ? rz__drv.writers.exported : NULL;               \
        if (real == NULL)                                                                                    \
            return missing();                                                                                \
        if (!t_in_hook && rz__bounds_armed()) {                                                              \
            ENTER();                                                                                         \
            int refused = RZ_CALL(BOUNDS_##base, #base, since, RZ_UNPAREN args);                             \
            LEAVE();                                                                                         \
            if (refused)                                                                                     \
                return RZCUDA_ERROR_INVALID_VALUE; /* as the driver answers without redzone */              \
        }                                                                                                    \
        install_bands();                                                                                     \
        rzcu_result r = RZ_WRITER_CALL(base, per_thread, real, args);                                        \
        if (r == RZCUDA_SUCCESS)                                                                             \
            rz__note_device_work(RZ_STREAM_IN args, per_thread);                                             \
        return r;                                                                                            \
    }
RZCU_DEVICE_WRITERS(RZ_WRITER_WRAPPER)
#undef RZ_WRITER_WRAPPER

/* ---- synchronisation: METRALE_REDZONE_SCAN=sync ------------------------------------------------------ */
/* Waiting bands are installed before a synchronisation too, so a program that only synchronises (work
 * reached the device some way redzone does not see) still gets its bands within one sync. The ticket is
 * taken before the driver's call: the work noted up to it is what the call waits for. */
static rzcu_result after_sync(rzcu_result r, const rz_sync_t *what, uint64_t ticket) {
    rz__sticky_note(r); /* a kernel fault reported to the program ends the library's device work too */
    if (r == RZCUDA_SUCCESS && !t_in_hook) {
        rz__free_checks_deferred(); /* stream-ordered checks that completed while the registry was busy */
        rz__fills_settle();   /* band fills done by now lose their mark (one load when none is waiting) */
    }
    if (r == RZCUDA_SUCCESS && !t_in_hook && (rz__options()->scan & RZ_SCAN_SYNC)) {
        ENTER();
        rz__scan_after_sync(what, ticket); /* the contexts with complete work since their last scan */
        LEAVE();
    }
    return r;
}

#define SYNC_WRAPPER(name, type, params, args, ...)                                                          \
    RZ_EXPORT rzcu_fn_##type name;                                                                           \
    rzcu_result name params {                                                                                \
        rzcu_fn_##type *real = REAL(name);                                                                   \
        if (real == NULL)                                                                                    \
            return missing();                                                                                \
        install_bands();                                                                                     \
        const rz_sync_t what = __VA_ARGS__;                                                                  \
        uint64_t ticket = rz__sync_ticket();                                                                 \
        return after_sync(real args, &what, ticket);                                                         \
    }
SYNC_WRAPPER(cuCtxSynchronize, cuCtxSynchronize, (void), (), {.kind = RZ_SYNC_CTX})
SYNC_WRAPPER(cuCtxSynchronize_v2, cuCtxSynchronize_v2, (rzcu_context ctx), (ctx), {.kind = RZ_SYNC_CTX, .ctx = ctx})
SYNC_WRAPPER(cuStreamSynchronize, cuStreamSynchronize, (rzcu_stream s), (s), {.kind = RZ_SYNC_STREAM, .stream = s})
SYNC_WRAPPER(cuStreamSynchronize_ptsz, cuStreamSynchronize, (rzcu_stream s), (s),
             {.kind = RZ_SYNC_STREAM, .stream = s, .per_thread = 1})
SYNC_WRAPPER(cuEventSynchronize, cuEventSynchronize, (rzcu_event e), (e), {.kind = RZ_SYNC_EVENT})
#undef SYNC_WRAPPER

/* A destroyed stream's handle may name another stream later: sync scans forget it first. */
RZ_EXPORT rzcu_fn_cuStreamDestroy_v2 cuStreamDestroy_v2;
rzcu_result cuStreamDestroy_v2(rzcu_stream s) {
    rzcu_fn_cuStreamDestroy_v2 *real = REAL(cuStreamDestroy_v2);
    if (real == NULL)
        return missing();
    if (!t_in_hook && (rz__options()->scan & RZ_SCAN_SYNC)) {
        ENTER();
        rz__sync_stream_destroying(s);
        LEAVE();
    }
    rzcu_result r = real(s);
    if (r == RZCUDA_SUCCESS) {
        rz__capture_stream_gone(s);
        rz__work_stream_gone(s); /* a free can no longer wait for its work by handle */
    }
    return r;
}

/* ---- the end of a context ---------------------------------------------------------------------------- */
/*
 * A context's memory goes with it, and a later context may get the same handle (a primary context always
 * does; a created one may). Before the driver ends one, its zones are checked (as their frees would have
 * been); after, they and the library's stream and kernel state for the handle are forgotten. A primary
 * context ends on its last release (the driver says whether it is still active) or on a reset.
 */
/* Each step, the band engine's, the sync scans' and the launch policy's, is a subscriber (subscriptions.c). */
static void context_end(void *ctx, rz_event_t ev) {
    rz__subscriptions_make();
    rz__event_raise(ev, ctx);
}

static rzcu_result ctx_destroy(rzcu_fn_cuCtxDestroy_v2 *real, rzcu_context ctx) {
    if (real == NULL)
        return missing();
    if (t_in_hook)
        return real(ctx);
    ENTER();
    context_end(ctx, RZ_EVENT_CONTEXT_ENDING);
    rzcu_result r = real(ctx);
    rz__dev_ctx_changed_anywhere(); /* popped here when current; a dead handle elsewhere (device_ctx.c) */
    if (r == RZCUDA_SUCCESS)
        context_end(ctx, RZ_EVENT_CONTEXT_ENDED);
    LEAVE();
    return r;
}

/* A primary context's release or reset. release: the context has ended only when it is no longer active after
 * the call (a release that is not the last leaves it); a reset ends it always. Whether this release is the
 * last one is known only after it: bands are written and checked first in case it is (a release that is not
 * costs the check, as a synchronisation with METRALE_REDZONE_SCAN=sync). */
static rzcu_result primary_end(rzcu_fn_cuDevicePrimaryCtxRelease_v2 *real, rzcu_device dev, int release) {
    if (real == NULL)
        return missing();
    if (t_in_hook)
        return real(dev);
    ENTER();
    void *ctx = rz__dev_primary_ctx(dev);
    context_end(ctx, RZ_EVENT_CONTEXT_ENDING);
    rzcu_result r = real(dev);
    rz__dev_ctx_changed_anywhere();
    if (r == RZCUDA_SUCCESS && ctx && (!release || rz__dev_primary_active(dev) == 0))
        context_end(ctx, RZ_EVENT_CONTEXT_ENDED);
    LEAVE();
    return r;
}

/* Each under its current name and under the older ABI's (cu.h: RZCU_LEGACY_ENTRY_POINTS), which a program
 * built against old headers calls, and cuGetProcAddress hands out for an old version: a context ended that
 * way ends for redzone too. */
RZ_EXPORT rzcu_fn_cuCtxDestroy_v2 cuCtxDestroy_v2, cuCtxDestroy;
rzcu_result cuCtxDestroy_v2(rzcu_context ctx) { return ctx_destroy(REAL(cuCtxDestroy_v2), ctx); }
rzcu_result cuCtxDestroy(rzcu_context ctx) { return ctx_destroy(REAL(cuCtxDestroy), ctx); }

RZ_EXPORT rzcu_fn_cuDevicePrimaryCtxRelease_v2 cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease;
rzcu_result cuDevicePrimaryCtxRelease_v2(rzcu_device dev) {
    return primary_end(REAL(cuDevicePrimaryCtxRelease_v2), dev, 1);
}
rzcu_result cuDevicePrimaryCtxRelease(rzcu_device dev) { return primary_end(REAL(cuDevicePrimaryCtxRelease), dev, 1); }

RZ_EXPORT rzcu_fn_cuDevicePrimaryCtxReset_v2 cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset;
rzcu_result cuDevicePrimaryCtxReset_v2(rzcu_device dev) { return primary_end(REAL(cuDevicePrimaryCtxReset_v2), dev, 0); }
rzcu_result cuDevicePrimaryCtxReset(rzcu_device dev) { return primary_end(REAL(cuDevicePrimaryCtxReset), dev, 0); }

/* ---- launches: kernel attribution and METRALE_REDZONE_SCAN=launch ------------------------------------ */
struct launch_args {
    rzcu_fn_cuLaunchKernel *real;
    rzcu_function f;
    unsigned gx, gy, gz, bx, by, bz, shared;
    rzcu_stream s;
    void **params, **extra;
};

static rzcu_result go_launch(const void *p) {
    const struct launch_args *a = p;
    return a->real(a->f, a->gx, a->gy, a->gz, a->bx, a->by, a->bz, a->shared, a->s, a->params, a->extra);
}

#define LAUNCH(name, real_field, per_thread_)                                                                \
    RZ_EXPORT rzcu_fn_cuLaunchKernel name;                                                                   \
    rzcu_result name(rzcu_function f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,       \
                     unsigned bz, unsigned shared, rzcu_stream s, void **params, void **extra) {             \
        rzcu_fn_cuLaunchKernel *real = REAL(real_field);                                                     \
        if (real == NULL)                                                                                    \
            return missing();                                                                                \
        install_bands();                                                                                     \
        if (RZ_LIKELY(RZ_SCAN_LAUNCH_OFF())) { /* as before the launch policy */                             \
            rzcu_result r = real(f, gx, gy, gz, bx, by, bz, shared, s, params, extra);                       \
            if (r == RZCUDA_SUCCESS)                                                                         \
                rz__note_device_work(s, per_thread_);                                                        \
            if (r == RZCUDA_SUCCESS && !t_in_hook)                                                           \
                rz__launch_record(f);                                                                        \
            return r;                                                                                        \
        }                                                                                                    \
        rz_launch_call_t call = {.kind = RZ_LAUNCH_KERNEL, .f = f, .grid = {gx, gy, gz}, .block = {bx, by, bz}, \
                                 .stream = s, .per_thread = per_thread_, RZ_LAUNCH_CALLER};                  \
        struct launch_args a = {real, f, gx, gy, gz, bx, by, bz, shared, s, params, extra};                  \
        rzcu_result r = launched(&call, go_launch, &a);                                                      \
        if (r == RZCUDA_SUCCESS)                                                                             \
            rz__note_device_work(s, per_thread_);                                                            \
        return r;                                                                                            \
    }
LAUNCH(cuLaunchKernel, cuLaunchKernel, 0)
LAUNCH(cuLaunchKernel_ptsz, cuLaunchKernel_ptsz, 1)

struct launch_ex_args {
    rzcu_fn_cuLaunchKernelEx *real;
    const rzcu_launch_config *config;
    rzcu_function f;
    void **params, **extra;
};

static rzcu_result go_launch_ex(const void *p) {
    const struct launch_ex_args *a = p;
    return a->real(a->config, a->f, a->params, a->extra);
}

#define LAUNCH_EX(name, real_field, per_thread_)                                                             \
    RZ_EXPORT rzcu_fn_cuLaunchKernelEx name;                                                                 \
    rzcu_result name(const rzcu_launch_config *config, rzcu_function f, void **params, void **extra) {       \
        rzcu_fn_cuLaunchKernelEx *real = REAL(real_field);                                                   \
        if (real == NULL)                                                                                    \
            return missing();                                                                                \
        install_bands();                                                                                     \
        if (RZ_LIKELY(RZ_SCAN_LAUNCH_OFF())) { /* as before the launch policy */                             \
            rzcu_result r = real(config, f, params, extra);                                                  \
            if (r == RZCUDA_SUCCESS)                                                                         \
                rz__note_device_work(config ? config->hStream : NULL, per_thread_);                          \
            if (r == RZCUDA_SUCCESS && !t_in_hook)                                                           \
                rz__launch_record(f);                                                                        \
            return r;                                                                                        \
        }                                                                                                    \
        rz_launch_call_t call = {.kind = RZ_LAUNCH_KERNEL, .f = f, .per_thread = per_thread_, RZ_LAUNCH_CALLER}; \
        if (config) {                                                                                        \
            call.grid[0] = config->gridDimX, call.grid[1] = config->gridDimY, call.grid[2] = config->gridDimZ; \
            call.block[0] = config->blockDimX, call.block[1] = config->blockDimY;                            \
            call.block[2] = config->blockDimZ, call.stream = config->hStream;                                \
        }                                                                                                    \
        struct launch_ex_args a = {real, config, f, params, extra};                                          \
        rzcu_result r = config ? launched(&call, go_launch_ex, &a) : real(config, f, params, extra);         \
        if (r == RZCUDA_SUCCESS)                                                                             \
            rz__note_device_work(config ? config->hStream : NULL, per_thread_);                              \
        return r;                                                                                            \
    }
LAUNCH_EX(cuLaunchKernelEx, cuLaunchKernelEx, 0)
LAUNCH_EX(cuLaunchKernelEx_ptsz, cuLaunchKernelEx_ptsz, 1)

/* ---- unloads: a kernel handle may name another kernel afterwards (the launch policy caches names) ------ */
RZ_EXPORT rzcu_fn_cuModuleUnload cuModuleUnload;
rzcu_result cuModuleUnload(rzcu_module mod) {
    rzcu_fn_cuModuleUnload *real = REAL(cuModuleUnload);
    if (real == NULL)
        return missing();
    rzcu_result r = real(mod);
    rz__launch_names_forget();
    return r;
}

RZ_EXPORT rzcu_fn_cuLibraryUnload cuLibraryUnload;
rzcu_result cuLibraryUnload(rzcu_library library) {
    rzcu_fn_cuLibraryUnload *real = REAL(cuLibraryUnload);
    if (real == NULL)
        return missing();
    rzcu_result r = real(library);
    rz__launch_names_forget();
    return r;
}

/* ---- lookups: dlsym and cuGetProcAddress ------------------------------------------------------------- */
RZ_EXPORT rzcu_fn_cuGetProcAddress cuGetProcAddress;
RZ_EXPORT rzcu_fn_cuGetProcAddress_v2 cuGetProcAddress_v2;

/* Every wrapper, by exported name, with the real entry point it stands for. */
#define RZ_WRAPPED(X)                                                                                        \
    X(cuMemAlloc_v2) X(cuMemAllocManaged) X(cuMemAllocPitch_v2) X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz)   \
    X(cuMemAllocFromPoolAsync) X(cuMemAllocFromPoolAsync_ptsz) X(cuMemFree_v2) X(cuMemFreeAsync)             \
    X(cuMemFreeAsync_ptsz) X(cuMemGetAddressRange_v2) X(cuCtxSynchronize) X(cuCtxSynchronize_v2)             \
    X(cuStreamSynchronize) X(cuStreamSynchronize_ptsz) X(cuEventSynchronize) X(cuLaunchKernel)               \
    X(cuLaunchKernel_ptsz) X(cuLaunchKernelEx) X(cuLaunchKernelEx_ptsz) X(cuGetProcAddress)                  \
    X(cuGetProcAddress_v2) X(cuCtxDestroy_v2) X(cuDevicePrimaryCtxRelease_v2) X(cuDevicePrimaryCtxReset_v2) \
    X(cuPointerGetAttribute) X(cuStreamDestroy_v2) X(cuCtxDestroy) X(cuDevicePrimaryCtxRelease)                \
    X(cuDevicePrimaryCtxReset) X(cuPointerGetAttributes) X(cuModuleUnload) X(cuLibraryUnload)                \
    RZ_CAPTURE_WRAPPED(X) RZ_IPC_WRAPPED(X) RZ_START_WRAPPED(X) RZ_CTX_WRAPPED(X) RZ_VMM_WRAPPED(X)

static void *wrapper_by_name(const char *name) {
#define RZ_BY_NAME(n)                                                                                        \
    if (strcmp(name, #n) == 0)                                                                               \
        return (void *)n;
    RZ_WRAPPED(RZ_BY_NAME)
#undef RZ_BY_NAME
#define RZ_WRITER_BY_NAME(exported, base, since, per_thread, params, args) RZ_BY_NAME(exported)
#define RZ_BY_NAME(n)                                                                                        \
    if (strcmp(name, #n) == 0)                                                                               \
        return (void *)n;
    RZCU_DEVICE_WRITERS(RZ_WRITER_BY_NAME)
#undef RZ_BY_NAME
#undef RZ_WRITER_BY_NAME
    return NULL;
}

/* Whether the loaded driver has the entry point a wrapper of that name stands for (1), lacks it (0), or the
 * name is no wrapper's (-1). */
static int driver_has(const char *name) {
#define RZ_HAS(n)                                                                                            \
    if (strcmp(name, #n) == 0)                                                                               \
        return rz__drv.n != NULL;
    RZ_WRAPPED(RZ_HAS)
#undef RZ_HAS
#define RZ_WRITER_HAS(exported, base, since, per_thread, params, args)                                      \
    if (strcmp(name, #exported) == 0)                                                                        \
        return rz__drv.writers.exported != NULL;
    RZCU_DEVICE_WRITERS(RZ_WRITER_HAS)
#undef RZ_WRITER_HAS
    return -1;
}

static void *wrapper_by_real(void *real) {
    if (real == NULL || rz__dev_load() != RZ_OK)
        return NULL;
#define RZ_BY_REAL(n)                                                                                        \
    if (real == (void *)rz__drv.n)                                                                           \
        return (void *)n;
    RZ_WRAPPED(RZ_BY_REAL)
#undef RZ_BY_REAL
#define RZ_WRITER_BY_REAL(exported, base, since, per_thread, params, args)                                  \
    if (real == (void *)rz__drv.writers.exported)                                                            \
        return (void *)exported;
    RZCU_DEVICE_WRITERS(RZ_WRITER_BY_REAL)
#undef RZ_WRITER_BY_REAL
    return NULL;
}

/* dlsym itself: RTLD_NEXT requests go to the real dlsym untouched (rz_dlsym_next.h says why), the rest to
 * rz__dlsym. */
__attribute__((used, visibility("hidden"))) rz_dlsym_fn *rz__next_dlsym; /* the real dlsym, once resolved */

RZ_DLSYM_NO_SANITIZE __attribute__((used, visibility("hidden"))) rz_dlsym_fn *rz__resolve_dlsym(void);
rz_dlsym_fn *rz__resolve_dlsym(void) { return rz_dlsym_resolve(&rz__next_dlsym); }

RZ_DLSYM_NO_SANITIZE __attribute__((used, visibility("hidden"))) void *rz__dlsym(void *handle, const char *name);
RZ_DLSYM_INTERPOSER(rz__dlsym, rz__next_dlsym, rz__resolve_dlsym);

/* Whether p is the driver's own definition of the wrapped entry point `name`: the one the library resolved
 * from the libcuda.so.1 it uses. A driver the program has not loaded is not loaded here (a lookup in another
 * library must not pull the driver into the process): nothing found then can be the driver's. */
static int driver_defines(const char *name, void *p) {
    if (!__atomic_load_n(&RZ_STATE.driver_loaded, __ATOMIC_ACQUIRE)) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (h == NULL)
            return 0;
        dlclose(h);
    }
    if (rz__dev_load() != RZ_OK)
        return 0;
#define RZ_IS_REAL(n)                                                                                        \
    if (strcmp(name, #n) == 0)                                                                               \
        return p == (void *)rz__drv.n;
    RZ_WRAPPED(RZ_IS_REAL)
#undef RZ_IS_REAL
#define RZ_WRITER_IS_REAL(exported, base, since, per_thread, params, args)                                  \
    if (strcmp(name, #exported) == 0)                                                                        \
        return p == (void *)rz__drv.writers.exported;
    RZCU_DEVICE_WRITERS(RZ_WRITER_IS_REAL)
#undef RZ_WRITER_IS_REAL
    return 0;
}

/* The wrapper replaces what dlsym found only where that is the driver's own definition, or libredzone's
 * export itself (a global lookup finds it first). Another library's function of the same name (a program's
 * shim, a mock, a second driver; the emulated driver's trace shim in front of libredzone, whose forwarders
 * call the next definition, libredzone's) is the program's to call: it gets it, as without redzone. */
void *rz__dlsym(void *handle, const char *name) {
    rz_dlsym_fn *real = rz__resolve_dlsym();
    void *p = real ? real(handle, name) : NULL;
    if (p == NULL || name[0] != 'c' || name[1] != 'u' || t_in_hook)
        return p;
    void *w = wrapper_by_name(name);
    if (w == NULL)
        return p;
    /* Found ourselves: an entry point the driver lacks is not there, as without redzone, so a program that
     * probes for it learns the truth. */
    if (p == w)
        return rz__dev_load() == RZ_OK && driver_has(name) == 0 ? NULL : w;
    return driver_defines(name, p) ? w : p;
}

/* Swap a driver-provided entry point for its wrapper: by identity with the entry points the library
 * resolved, or else by base name, version and flags. */
static void swap_for_wrapper(const char *symbol, void **pfn, int version, rzcu_uint64 flags) {
    if (pfn == NULL || *pfn == NULL || t_in_hook)
        return;
    void *w = wrapper_by_real(*pfn);
    if (w == NULL && symbol) {
        const char *exported = rz__proc_exported_name(symbol, version, flags);
        w = exported ? wrapper_by_name(exported) : NULL;
    }
    if (w)
        *pfn = w;
}

rzcu_result cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version, rzcu_uint64 flags,
                                rzcu_proc_query_result *status) {
    rz__start_note_lookup(cuda_version);
    rzcu_fn_cuGetProcAddress_v2 *real = REAL(cuGetProcAddress_v2);
    if (real == NULL)
        return missing();
    rzcu_result r = real(symbol, pfn, cuda_version, flags, status);
    if (r == RZCUDA_SUCCESS)
        swap_for_wrapper(symbol, pfn, cuda_version, flags);
    return r;
}

rzcu_result cuGetProcAddress(const char *symbol, void **pfn, int cuda_version, rzcu_uint64 flags) {
    rz__start_note_lookup(cuda_version);
    rzcu_fn_cuGetProcAddress *real = REAL(cuGetProcAddress);
    if (real == NULL)
        return missing();
    rzcu_result r = real(symbol, pfn, cuda_version, flags);
    if (r == RZCUDA_SUCCESS)
        swap_for_wrapper(symbol, pfn, cuda_version, flags);
    return r;
}
