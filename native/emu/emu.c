/*
 * The emulated CUDA driver's entry points for initialisation, devices and contexts, and the context and
 * thread tables. The stream engine is emu_stream.c, memory operations emu_copy.c, events and launches
 * emu_launch.c, modules and functions emu_module.c. How the engine works, for all of them:
 *
 * Contexts and streams are slots of reserved tables (never reused), so a handle is validated by range and
 * magic without touching foreign memory. Each stream owns a FIFO of operations run by a worker thread
 * created on demand (it exits after a short idle time). Ordering between streams follows the legacy default
 * stream rules: an operation on the legacy stream waits for all work previously submitted to the blocking
 * streams of its context (including per-thread default streams), and an operation on a blocking stream
 * waits for all work previously submitted to the legacy stream. Submissions to one context are serialised
 * so these dependencies are consistent.
 *
 * Inline execution: an operation submitted to an idle stream (nothing queued or running on it) whose
 * dependencies are complete runs in the calling thread, before the call returns, when it is synchronous
 * (indistinguishable from running it on the worker and waiting) or when it is work a GPU's copy engines do
 * without any host thread: copies, memsets, batched copies and event records (see runs_without_host). So a
 * thread that is the only one running (a debugger resuming one thread with scheduler-locking) can still copy
 * on its own idle stream and synchronise; that path takes only short-held locks and never waits for another
 * thread. Kernels and host functions always go through the worker, so a program that forgets to synchronise
 * after them still sees the work pending. Workers are named "cuda-emu-s<N>" (N: the stream's table index).
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

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static rzcu_result init_result;
struct CUctx_st *emu_ctx_pool;
atomic_size_t emu_nctx;
struct CUstream_st *emu_stream_pool;
atomic_size_t emu_nstreams_total;
static struct CUctx_st *primary[CUDA_EMU_MAX_DEVICES];
static pthread_mutex_t primary_mu = PTHREAD_MUTEX_INITIALIZER;
atomic_ullong emu_pending_ops; /* submitted, not yet emu_completed (queued or running inline) */
/* initial-exec: the real driver's current-context lookup is a thread-local read, and so is this one */
static _Thread_local struct thread_state *tstate __attribute__((tls_model("initial-exec")));
static pthread_key_t tstate_key;
static pthread_once_t tstate_once = PTHREAD_ONCE_INIT;

static void tstate_free(void *p)
{
    struct thread_state *t = p;
    free(t->stack);
    free(t->pt);
    free(t);
    tstate = NULL;
}

static void tstate_key_create(void) { pthread_key_create(&tstate_key, tstate_free); }

/* NULL only when out of memory. */
struct thread_state *emu_thread_state(void)
{
    if (!tstate) {
        pthread_once(&tstate_once, tstate_key_create);
        struct thread_state *t = calloc(1, sizeof *t);
        if (!t)
            return NULL;
        pthread_setspecific(tstate_key, t);
        tstate = t;
    }
    return tstate;
}

/* The top of the calling thread's context stack, or NULL. */
static struct CUctx_st *stack_top(void)
{
    return tstate && tstate->depth ? tstate->stack[tstate->depth - 1] : NULL;
}

/* LeakSanitizer does not scan anonymous mappings: declare the handle tables as roots when it is present. */
extern void __lsan_register_root_region(const void *p, size_t size) __attribute__((weak));

/* ------------------------------------------------------------------------------------------------------ */
/*
 * The handle tables are large reservations that fill from the start: only the part in use is dumped to core
 * files (the rest is MADV_DONTDUMP), so a core of an emulated process stays small.
 */
static pthread_mutex_t dump_mu = PTHREAD_MUTEX_INITIALIZER;

void emu_make_dumpable(void *table, size_t *mark, size_t used_bytes)
{
    const size_t step = (size_t)64 << 10;
    pthread_mutex_lock(&dump_mu);
    if (used_bytes > *mark) {
        size_t next = (used_bytes + step - 1) / step * step;
        madvise((char *)table + *mark, next - *mark, MADV_DODUMP);
        *mark = next;
    }
    pthread_mutex_unlock(&dump_mu);
}

static size_t ctx_dump_mark;
size_t emu_stream_dump_mark;

static void init_tables(void)
{
    emu_ctx_pool = mmap(NULL, MAX_CONTEXTS * sizeof *emu_ctx_pool, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    emu_stream_pool = mmap(NULL, MAX_STREAMS * sizeof *emu_stream_pool, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (emu_ctx_pool == MAP_FAILED || emu_stream_pool == MAP_FAILED) {
        fprintf(stderr, "cuda-emu: warning: cannot reserve handle tables\n");
        init_result = RZCUDA_ERROR_OUT_OF_MEMORY;
        return;
    }
    madvise(emu_ctx_pool, MAX_CONTEXTS * sizeof *emu_ctx_pool, MADV_DONTDUMP);
    madvise(emu_stream_pool, MAX_STREAMS * sizeof *emu_stream_pool, MADV_DONTDUMP);
    if (__lsan_register_root_region) {
        __lsan_register_root_region(emu_ctx_pool, MAX_CONTEXTS * sizeof *emu_ctx_pool);
        __lsan_register_root_region(emu_stream_pool, MAX_STREAMS * sizeof *emu_stream_pool);
    }
    init_result = emu_mem_init();
    if (init_result == RZCUDA_SUCCESS && !(emu_modules_init() && emu_libraries_init() && emu_graphs_init() && emu_events_init()))
        init_result = RZCUDA_ERROR_OUT_OF_MEMORY;
}

bool emu_valid_device(rzcu_device dev) { return dev >= 0 && dev < emu_cfg.ndevices; }

int emu_context_device(struct CUctx_st *ctx) { return ctx->device; }
unsigned emu_context_gen(struct CUctx_st *ctx) { return atomic_load(&ctx->gen); }

bool emu_context_live(struct CUctx_st *ctx, unsigned gen)
{
    return ctx && atomic_load(&ctx->magic) == CTX_MAGIC && atomic_load(&ctx->alive) && atomic_load(&ctx->gen) == gen;
}

/* A context handle: a slot of the context table, or NULL. */
static struct CUctx_st *ctx_from_handle(rzcu_context h)
{
    uintptr_t p = (uintptr_t)h, base = (uintptr_t)emu_ctx_pool;
    if (!emu_ctx_pool || p < base || p >= base + atomic_load(&emu_nctx) * sizeof *emu_ctx_pool ||
        (p - base) % sizeof *emu_ctx_pool)
        return NULL;
    struct CUctx_st *c = (struct CUctx_st *)h;
    return atomic_load(&c->magic) == CTX_MAGIC ? c : NULL;
}

rzcu_result emu_current_ctx(struct CUctx_st **out)
{
    struct CUctx_st *c = stack_top();
    if (!c)
        return RZCUDA_ERROR_INVALID_CONTEXT;
    if (!atomic_load(&c->alive))
        return RZCUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = c;
    return RZCUDA_SUCCESS;
}

static bool stack_push(struct CUctx_st *c)
{
    struct thread_state *t = emu_thread_state();
    if (!t)
        return false;
    if (t->depth == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 8;
        struct CUctx_st **v = realloc(t->stack, cap * sizeof *v);
        if (!v)
            return false;
        t->stack = v;
        t->cap = cap;
    }
    t->stack[t->depth++] = c;
    return true;
}

static struct CUctx_st *stack_pop(void)
{
    return tstate && tstate->depth ? tstate->stack[--tstate->depth] : NULL;
}


/* ------------------------------------------------------------------------------------------------------ */
/* contexts */

/*
 * Destroyed created contexts, newest last: cuCtxCreate hands out the most recently destroyed slot again, as
 * a real driver hands out the freed memory of a destroyed context for the next one (the same CUcontext
 * value), so code that keys anything by the handle sees it come back for a different context.
 */
static pthread_mutex_t reuse_mu = PTHREAD_MUTEX_INITIALIZER;
static struct CUctx_st **reusable;
static size_t nreusable, reusable_cap;

static void ctx_recycle(struct CUctx_st *c)
{
    pthread_mutex_lock(&reuse_mu);
    if (nreusable == reusable_cap) {
        size_t cap = reusable_cap ? 2 * reusable_cap : 16;
        struct CUctx_st **v = realloc(reusable, cap * sizeof *v);
        if (v) {
            reusable = v;
            reusable_cap = cap;
        }
    }
    if (nreusable < reusable_cap)
        reusable[nreusable++] = c; /* else: out of memory, the slot is simply not reused */
    pthread_mutex_unlock(&reuse_mu);
}

static struct CUctx_st *ctx_reused(int device)
{
    pthread_mutex_lock(&reuse_mu);
    struct CUctx_st *c = nreusable ? reusable[--nreusable] : NULL;
    pthread_mutex_unlock(&reuse_mu);
    if (c)
        c->device = device;
    return c;
}

static struct CUctx_st *ctx_new(int device, bool is_primary)
{
    size_t idx = atomic_fetch_add(&emu_nctx, 1);
    if (idx >= MAX_CONTEXTS)
        return NULL;
    emu_make_dumpable(emu_ctx_pool, &ctx_dump_mark, (idx + 1) * sizeof *emu_ctx_pool);
    struct CUctx_st *c = &emu_ctx_pool[idx];
    c->device = device;
    c->primary = is_primary;
    pthread_mutex_init(&c->mu, NULL);
    atomic_store(&c->magic, CTX_MAGIC);
    return c;
}

static bool ctx_activate(struct CUctx_st *c)
{
    atomic_fetch_add(&c->gen, 1);
    c->legacy = emu_stream_new(c, RZCU_STREAM_DEFAULT, STREAM_LEGACY);
    if (!c->legacy)
        return false;
    atomic_store(&c->alive, true);
    return true;
}

/* Completes all work, then releases the context's streams and memory. */
static void ctx_teardown(struct CUctx_st *c)
{
    emu_ctx_sync(c);
    pthread_mutex_lock(&c->mu);
    atomic_store(&c->alive, false);
    for (size_t i = 0; i < c->nstreams; i++) {
        atomic_store(&c->streams[i]->magic, 0);
        atomic_store(&c->streams[i]->destroyed, true);
    }
    c->nstreams = 0;
    c->legacy = NULL;
    pthread_mutex_unlock(&c->mu);
    emu_mem_free_context(c);
    emu_host_free_context(c);
    emu_ipc_free_context(c);
}

/* ------------------------------------------------------------------------------------------------------ */
/* initialisation and devices */

EMU_API rzcu_result cuInit(unsigned int flags)
{
    ENTER_NOINIT(cuInit);
    if (flags != 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (emu_cfg.ndevices == 0)
        return RZCUDA_ERROR_NO_DEVICE; /* every call, as the NVIDIA driver's on a machine without a GPU */
    pthread_once(&init_once, init_tables);
    if (init_result != RZCUDA_SUCCESS)
        return init_result;
    emu_set_initialized();
    emu_note_init();
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuDriverGetVersion(int *version)
{
    ENTER_NOINIT(cuDriverGetVersion);
    if (!version)
        return RZCUDA_ERROR_INVALID_VALUE;
    *version = CUDA_EMU_DRIVER_VERSION;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuDeviceGet(rzcu_device *dev, int ordinal)
{
    ENTER(cuDeviceGet);
    if (!dev)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!emu_valid_device(ordinal))
        return RZCUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuDeviceGetCount(int *count)
{
    ENTER(cuDeviceGetCount);
    if (!count)
        return RZCUDA_ERROR_INVALID_VALUE;
    *count = emu_cfg.ndevices;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuDeviceGetName(char *name, int len, rzcu_device dev)
{
    ENTER(cuDeviceGetName);
    if (!name || len <= 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!emu_valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "redzone emulated device %d", dev);
    return RZCUDA_SUCCESS;
}

/* Values of an H100-class device (compute capability 9.0). */
static bool device_attribute(rzcu_device_attribute attr, int dev, int *out)
{
    static const struct {
        unsigned attr;
        int value;
    } table[] = {
        {1, 1024},       /* MAX_THREADS_PER_BLOCK */
        {2, 1024},       {3, 1024}, {4, 64},           /* MAX_BLOCK_DIM_X/Y/Z */
        {5, 2147483647}, {6, 65535}, {7, 65535},       /* MAX_GRID_DIM_X/Y/Z */
        {8, 49152},      /* MAX_SHARED_MEMORY_PER_BLOCK */
        {9, 65536},      /* TOTAL_CONSTANT_MEMORY */
        {10, 32},        /* WARP_SIZE */
        {11, 2147483647}, /* MAX_PITCH */
        {12, 65536},     /* MAX_REGISTERS_PER_BLOCK */
        {13, 1980000},   /* CLOCK_RATE (kHz) */
        {14, 512},       /* TEXTURE_ALIGNMENT */
        {15, 1},         /* GPU_OVERLAP */
        {16, 132},       /* MULTIPROCESSOR_COUNT */
        {17, 0},         /* KERNEL_EXEC_TIMEOUT */
        {18, 0},         /* INTEGRATED */
        {19, 1},         /* CAN_MAP_HOST_MEMORY */
        {20, 0},         /* COMPUTE_MODE (default) */
        {30, 512},       /* SURFACE_ALIGNMENT */
        {31, 1},         /* CONCURRENT_KERNELS */
        {32, 0},         /* ECC_ENABLED */
        {34, 0},         /* PCI_DEVICE_ID */
        {35, 0},         /* TCC_DRIVER */
        {36, 2619000},   /* MEMORY_CLOCK_RATE (kHz) */
        {37, 5120},      /* GLOBAL_MEMORY_BUS_WIDTH */
        {38, 52428800},  /* L2_CACHE_SIZE */
        {39, 2048},      /* MAX_THREADS_PER_MULTIPROCESSOR */
        {40, 3},         /* ASYNC_ENGINE_COUNT */
        {41, 1},         /* UNIFIED_ADDRESSING */
        {50, 0},         /* PCI_DOMAIN_ID */
        {51, 32},        /* TEXTURE_PITCH_ALIGNMENT */
        {75, 9},         /* COMPUTE_CAPABILITY_MAJOR */
        {76, 0},         /* COMPUTE_CAPABILITY_MINOR */
        {78, 1},         /* STREAM_PRIORITIES_SUPPORTED */
        {79, 1},         /* GLOBAL_L1_CACHE_SUPPORTED */
        {80, 1},         /* LOCAL_L1_CACHE_SUPPORTED */
        {81, 233472},    /* MAX_SHARED_MEMORY_PER_MULTIPROCESSOR */
        {82, 65536},     /* MAX_REGISTERS_PER_MULTIPROCESSOR */
        {83, 1},         /* MANAGED_MEMORY */
        {84, 0},         /* MULTI_GPU_BOARD */
        {85, 0},         /* MULTI_GPU_BOARD_GROUP_ID */
        {86, 0},         /* HOST_NATIVE_ATOMIC_SUPPORTED */
        {88, 0},         /* PAGEABLE_MEMORY_ACCESS */
        {89, 1},         /* CONCURRENT_MANAGED_ACCESS */
        {90, 1},         /* COMPUTE_PREEMPTION_SUPPORTED */
        {95, 1},         /* COOPERATIVE_LAUNCH */
        {97, 232448},    /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
        {99, 1},         /* HOST_REGISTER_SUPPORTED */
        {106, 32},       /* MAX_BLOCKS_PER_MULTIPROCESSOR */
        {115, 1},        /* MEMORY_POOLS_SUPPORTED */
    };
    if (attr == 33) { /* PCI_BUS_ID */
        *out = dev + 1;
        return true;
    }
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].attr == attr) {
            *out = table[i].value;
            return true;
        }
    return false;
}

EMU_API rzcu_result cuDeviceGetAttribute(int *pi, rzcu_device_attribute attrib, rzcu_device dev)
{
    ENTER(cuDeviceGetAttribute);
    if (!pi)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!emu_valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    return device_attribute(attrib, dev, pi) ? RZCUDA_SUCCESS : RZCUDA_ERROR_INVALID_VALUE;
}

EMU_API rzcu_result cuDeviceTotalMem_v2(size_t *bytes, rzcu_device dev)
{
    ENTER(cuDeviceTotalMem_v2);
    if (!bytes)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!emu_valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    *bytes = emu_cfg.mem_bytes;
    return RZCUDA_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------------ */
/* contexts */

EMU_API rzcu_result cuDevicePrimaryCtxRetain(rzcu_context *pctx, rzcu_device dev)
{
    ENTER(cuDevicePrimaryCtxRetain);
    if (!pctx)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!emu_valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    rzcu_result r = RZCUDA_SUCCESS;
    pthread_mutex_lock(&primary_mu);
    if (!primary[dev])
        primary[dev] = ctx_new(dev, true);
    struct CUctx_st *c = primary[dev];
    if (!c)
        r = RZCUDA_ERROR_OUT_OF_MEMORY;
    else if (!atomic_load(&c->alive) && !ctx_activate(c)) /* first retain, or after a release or reset */
        r = RZCUDA_ERROR_OUT_OF_MEMORY;
    else {
        c->refcount++;
        *pctx = c;
    }
    pthread_mutex_unlock(&primary_mu);
    return r;
}

static rzcu_result primary_release(rzcu_device dev);
static rzcu_result primary_reset(rzcu_device dev);
static rzcu_result ctx_destroy(rzcu_context ctx);

/* The CUDA 7.0 (release, reset) and 2.0 (destroy) ABIs, still exported by drivers for programs built against
 * old headers and handed out by cuGetProcAddress for old versions: the same behaviour here. */
EMU_API rzcu_result cuDevicePrimaryCtxRelease(rzcu_device dev)
{
    ENTER(cuDevicePrimaryCtxRelease);
    return primary_release(dev);
}

EMU_API rzcu_result cuDevicePrimaryCtxReset(rzcu_device dev)
{
    ENTER(cuDevicePrimaryCtxReset);
    return primary_reset(dev);
}

EMU_API rzcu_result cuCtxDestroy(rzcu_context ctx)
{
    ENTER(cuCtxDestroy);
    return ctx_destroy(ctx);
}

EMU_API rzcu_result cuDevicePrimaryCtxRelease_v2(rzcu_device dev)
{
    ENTER(cuDevicePrimaryCtxRelease_v2);
    return primary_release(dev);
}

static rzcu_result primary_release(rzcu_device dev)
{
    if (!emu_valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&primary_mu);
    struct CUctx_st *c = primary[dev];
    if (!c || c->refcount == 0) {
        pthread_mutex_unlock(&primary_mu);
        return RZCUDA_ERROR_INVALID_CONTEXT;
    }
    if (--c->refcount == 0 && atomic_load(&c->alive))
        ctx_teardown(c); /* the handle stays; a later retain reactivates it */
    pthread_mutex_unlock(&primary_mu);
    return RZCUDA_SUCCESS;
}

/* As documented: destroys all allocations and state of the primary context now, without releasing it (the
 * references stay; a later retain activates it again, under the same handle, as cudaDeviceReset and the
 * runtime's next call do). Resetting an inactive primary context is a no-op. */
EMU_API rzcu_result cuDevicePrimaryCtxReset_v2(rzcu_device dev)
{
    ENTER(cuDevicePrimaryCtxReset_v2);
    return primary_reset(dev);
}

static rzcu_result primary_reset(rzcu_device dev)
{
    if (!emu_valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&primary_mu);
    struct CUctx_st *c = primary[dev];
    if (c && atomic_load(&c->alive))
        ctx_teardown(c);
    pthread_mutex_unlock(&primary_mu);
    return RZCUDA_SUCCESS;
}

/* Flags are always 0 (cuDevicePrimaryCtxSetFlags is not emulated); active: retained and not reset since. */
EMU_API rzcu_result cuDevicePrimaryCtxGetState(rzcu_device dev, unsigned int *flags, int *active)
{
    ENTER(cuDevicePrimaryCtxGetState);
    if (!flags || !active)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!emu_valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&primary_mu);
    struct CUctx_st *c = primary[dev];
    *flags = 0;
    *active = c && atomic_load(&c->alive);
    pthread_mutex_unlock(&primary_mu);
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuCtxCreate_v4(rzcu_context *pctx, struct CUctxCreateParams_st *params, unsigned int flags,
                                   rzcu_device dev)
{
    ENTER(cuCtxCreate_v4);
    (void)params; /* execution affinity / CIG parameters: accepted and ignored */
    if (!pctx || (flags & ~0xFFu))
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!emu_valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    struct CUctx_st *c = ctx_reused(dev);
    if (!c)
        c = ctx_new(dev, false);
    if (!c || !ctx_activate(c) || !stack_push(c)) {
        if (c)
            ctx_teardown(c);
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    }
    *pctx = c;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuCtxDestroy_v2(rzcu_context ctx)
{
    ENTER(cuCtxDestroy_v2);
    return ctx_destroy(ctx);
}

static rzcu_result ctx_destroy(rzcu_context ctx)
{
    if (!ctx)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c = ctx_from_handle(ctx);
    if (!c || c->primary || !atomic_load(&c->alive))
        return RZCUDA_ERROR_INVALID_CONTEXT;
    ctx_teardown(c);
    if (stack_top() == c)
        stack_pop();
    ctx_recycle(c);
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuCtxGetCurrent(rzcu_context *pctx)
{
    ENTER(cuCtxGetCurrent);
    if (!pctx)
        return RZCUDA_ERROR_INVALID_VALUE;
    *pctx = stack_top();
    return RZCUDA_SUCCESS;
}

/* A handle that may become current: any primary context handle, or a live created context. */
static struct CUctx_st *settable_ctx(rzcu_context ctx)
{
    struct CUctx_st *c = ctx_from_handle(ctx);
    if (!c || (!c->primary && !atomic_load(&c->alive)))
        return NULL;
    return c;
}

EMU_API rzcu_result cuCtxSetCurrent(rzcu_context ctx)
{
    ENTER(cuCtxSetCurrent);
    if (!ctx) {
        stack_pop();
        return RZCUDA_SUCCESS;
    }
    struct CUctx_st *c = settable_ctx(ctx);
    if (!c)
        return RZCUDA_ERROR_INVALID_CONTEXT;
    if (stack_top())
        tstate->stack[tstate->depth - 1] = c;
    else if (!stack_push(c))
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuCtxPushCurrent_v2(rzcu_context ctx)
{
    ENTER(cuCtxPushCurrent_v2);
    struct CUctx_st *c = settable_ctx(ctx);
    if (!c)
        return RZCUDA_ERROR_INVALID_CONTEXT;
    return stack_push(c) ? RZCUDA_SUCCESS : RZCUDA_ERROR_OUT_OF_MEMORY;
}

EMU_API rzcu_result cuCtxPopCurrent_v2(rzcu_context *pctx)
{
    ENTER(cuCtxPopCurrent_v2);
    struct CUctx_st *c = stack_pop();
    if (!c)
        return RZCUDA_ERROR_INVALID_CONTEXT;
    if (pctx)
        *pctx = c;
    return RZCUDA_SUCCESS;
}

/* ctx NULL: the current context. */
static rzcu_result ctx_or_current(rzcu_context ctx, struct CUctx_st **out)
{
    if (!ctx)
        return emu_current_ctx(out);
    struct CUctx_st *c = ctx_from_handle(ctx);
    if (!c)
        return RZCUDA_ERROR_INVALID_CONTEXT;
    if (!atomic_load(&c->alive))
        return RZCUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = c;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuCtxGetDevice(rzcu_device *dev)
{
    ENTER(cuCtxGetDevice);
    struct CUctx_st *c;
    CHECK(emu_current_ctx(&c));
    if (!dev)
        return RZCUDA_ERROR_INVALID_VALUE;
    *dev = c->device;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuCtxGetDevice_v2(rzcu_device *dev, rzcu_context ctx)
{
    ENTER(cuCtxGetDevice_v2);
    struct CUctx_st *c;
    CHECK(ctx_or_current(ctx, &c));
    if (!dev)
        return RZCUDA_ERROR_INVALID_VALUE;
    *dev = c->device;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuCtxSynchronize(void)
{
    ENTER(cuCtxSynchronize);
    struct CUctx_st *c;
    CHECK(emu_current_ctx(&c));
    CHECK(emu_capture_refuse_sync(c, NULL));
    CHECK(emu_capture_unsafe_call());
    emu_ctx_sync(c);
    return emu_ctx_error(c);
}

EMU_API rzcu_result cuCtxSynchronize_v2(rzcu_context ctx)
{
    ENTER(cuCtxSynchronize_v2);
    struct CUctx_st *c;
    CHECK(ctx_or_current(ctx, &c));
    CHECK(emu_capture_refuse_sync(c, NULL));
    CHECK(emu_capture_unsafe_call());
    emu_ctx_sync(c);
    return emu_ctx_error(c);
}

