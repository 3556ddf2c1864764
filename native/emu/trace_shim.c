/*
 * libcudatrace.so, the call-trace shim: preloaded first (LD_PRELOAD="libcudatrace.so [libredzone.so]"), it
 * defines every driver entry point of cu.h under its exported name and forwards each call to the next
 * definition (an interposer preloaded after it, such as libredzone.so, else the driver), so it sees exactly
 * what the program calls and what the program gets back. With CUDA_EMU_TRACE=<path> it appends one `call`
 * line per call, on return:
 *
 *   call cuMemAlloc_v2 bytes=1000 = CUDA_SUCCESS a1
 *   call cuMemcpyHtoD_v2 dst=a1+0 n=1008 src.sum=0x6c1c3e5ad5f0d7c5 = CUDA_ERROR_INVALID_VALUE
 *
 * Arguments are written so that two runs of a deterministic program compare line by line whatever the
 * addresses: device pointers as a<k>+<offset> (a<k>: on the emulated driver, the driver's serial number of
 * the allocation, as in its `dev` lines, so allocations made where the shim cannot see them are named too;
 * on another driver, the k-th successful device allocation seen here; a pointer past the end of an
 * allocation stays relative to it), streams as s<k>, host pointers as `host`, data by FNV-1a checksums (what the program copies
 * in and reads back; on the emulated driver also each allocation's bytes when it is freed, and, at exit,
 * those of every allocation still live: `end a<k> sum=...`). Allocation lines also carry the address
 * (@0x...), which comparisons drop.
 *
 * Lookups are followed as the program makes them: dlsym and cuGetProcAddress (v1, v2) are interposed here too
 * and hand out this shim's forwarders, named by the exported name of the pointer the next layer returned.
 * An entry point outside cu.h's lists is handed out untouched (not traced). dlsym(RTLD_NEXT, ...) is answered
 * for its caller, as without the shim, and not traced (dlsym_next.h).
 *
 * The shim works over any driver; data checksums of device memory need the emulated driver (whose device
 * pointers are host addresses) and are left out otherwise. It is a test tool: it never changes an argument
 * or a result.
 */
#define _GNU_SOURCE
#define CUDA_EMU_NO_DRIVER_DECLS
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_emu.h"
#include "dlsym_next.h"
#include "trace_calls.h"
#include "trace_line.h"

#define SHIM_EXPORT __attribute__((visibility("default")))

const char *emu_error_name(rzcu_result r); /* emu_errors.c, compiled in here too */

/* ---- forwarding ------------------------------------------------------------------------------------- */
__attribute__((used, visibility("hidden"))) rz_dlsym_fn *shim_real_dlsym; /* libc's, once resolved */
static rz_dlsym_fn *next_dlsym_fn;

RZ_DLSYM_NO_SANITIZE __attribute__((used, visibility("hidden"))) rz_dlsym_fn *shim_resolve_dlsym(void);
rz_dlsym_fn *shim_resolve_dlsym(void) { return rz_dlsym_resolve(&shim_real_dlsym); }

/* libc's dlsym called from here, so RTLD_NEXT means the definitions after this shim. */
RZ_DLSYM_NO_SANITIZE static void *real_dlsym(void *handle, const char *name)
{
    rz_dlsym_fn *real = shim_resolve_dlsym();
    return real ? real(handle, name) : NULL;
}

/* The next dlsym: that of an interposer preloaded after this shim (libredzone's), else libc's. */
RZ_DLSYM_NO_SANITIZE static void *next_dlsym(void *handle, const char *name)
{
    rz_dlsym_fn *next = __atomic_load_n(&next_dlsym_fn, __ATOMIC_ACQUIRE);
    if (next == NULL) {
        next = (rz_dlsym_fn *)real_dlsym(RTLD_NEXT, "dlsym");
        if (next == NULL)
            next = shim_resolve_dlsym();
        __atomic_store_n(&next_dlsym_fn, next, __ATOMIC_RELEASE);
    }
    return next ? next(handle, name) : NULL;
}

/* The next definition of `name`: what dlsym or cuGetProcAddress handed out for it, else the next one in
 * the global scope, else the driver's (a program that dlopens it has it out of the global scope). */
static void *resolve(void *_Atomic *slot, const char *name)
{
    void *p = atomic_load_explicit(slot, memory_order_acquire);
    if (p)
        return p;
    p = real_dlsym(RTLD_NEXT, name);
    if (p == NULL) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (h)
            p = real_dlsym(h, name);
    }
    void *expected = NULL;
    if (p && !atomic_compare_exchange_strong(slot, &expected, p))
        p = expected;
    return p;
}

/* ---- the trace ---------------------------------------------------------------------------------------- */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_fd = -1;
static int g_emulated; /* device pointers are host addresses: data checksums possible */
/* The emulated driver's allocation numbers (the `dev` lines'), so that allocations made where the shim does
 * not see them (through a library's own API) are named the same way. */
static int (*g_serial)(rzcu_deviceptr, unsigned long long *, unsigned long long *);
static pid_t g_pid;    /* the process whose allocations these are (a forked child writes no end lines) */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

/* Device allocations the program made, in order; `freed` ones are kept to name stale pointers. */
static struct alloc {
    uintptr_t base;
    size_t user; /* bytes the program asked for (pitch * height for pitched ones) */
    unsigned long long k;
    int freed;
} *g_allocs;
static size_t g_nallocs, g_cap_allocs;
static struct handle {
    const void *h;
    unsigned long long k;
} *g_streams, *g_funcs;
static size_t g_nstreams, g_nfuncs, g_cap_streams, g_cap_funcs;

static void end_report(void);

static void init(void)
{
    const char *path = getenv("CUDA_EMU_TRACE");
    if (path && *path)
        g_fd = emu_trace_open(path);
    g_emulated = next_dlsym(RTLD_DEFAULT, "cuEmuIsEmulated") != NULL;
    g_serial = (int (*)(rzcu_deviceptr, unsigned long long *, unsigned long long *))next_dlsym(RTLD_DEFAULT,
                                                                                               "cuEmuTraceSerial");
    g_pid = getpid();
    if (g_fd >= 0)
        atexit(end_report); /* at the first call: it runs after the exit handlers registered later */
}

static uint64_t fnv(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The latest allocation whose base is at or below p and that p is near (an offset past the end stays
 * relative to it, as a write past the end does). Under g_mu. */
static const struct alloc *alloc_at(uintptr_t p)
{
    const struct alloc *best = NULL;
    for (size_t i = 0; i < g_nallocs; i++) {
        const struct alloc *a = &g_allocs[i];
        if (a->base <= p && p - a->base < a->user + 4096 &&
            (!best || a->base > best->base || (a->base == best->base && a->k > best->k)))
            best = a;
    }
    return best;
}

/* Device pointer p as a<k>+off, or a small constant in hex, or `host`. Under g_mu. */
static const char *ptr_name(uint64_t p, char *buf, size_t cap)
{
    const struct alloc *a = alloc_at((uintptr_t)p);
    unsigned long long k, off;
    if (p == 0)
        snprintf(buf, cap, "null");
    else if (a)
        snprintf(buf, cap, "a%llu+%" PRIuPTR "%s", a->k, (uintptr_t)p - a->base, a->freed ? "(freed)" : "");
    else if (g_serial && g_serial((rzcu_deviceptr)p, &k, &off) == 0)
        snprintf(buf, cap, "a%llu+%llu", k, off);
    else if (p < 0x10000)
        snprintf(buf, cap, "0x%" PRIx64, p);
    else
        snprintf(buf, cap, "host");
    return buf;
}

/* A handle's number in order of first appearance (add: number a new one). ~0 when unknown. Under g_mu. */
static unsigned long long handle_id(struct handle **tab, size_t *n, size_t *cap, const void *h, int add_new)
{
    for (size_t i = 0; i < *n; i++)
        if ((*tab)[i].h == h)
            return (*tab)[i].k;
    if (!add_new)
        return ~0ull;
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        struct handle *t = realloc(*tab, c * sizeof *t);
        if (t == NULL)
            return ~0ull;
        *tab = t;
        *cap = c;
    }
    (*tab)[*n] = (struct handle){h, *n};
    return (*tab)[(*n)++].k;
}

static const char *stream_name(uint64_t s, char *buf, size_t cap)
{
    if (s == 0)
        return "null";
    if (s == (uint64_t)(uintptr_t)RZCU_STREAM_LEGACY)
        return "legacy";
    if (s == (uint64_t)(uintptr_t)RZCU_STREAM_PER_THREAD)
        return "per-thread";
    unsigned long long k = handle_id(&g_streams, &g_nstreams, &g_cap_streams, (const void *)(uintptr_t)s, 0);
    if (k == ~0ull)
        snprintf(buf, cap, "unknown");
    else
        snprintf(buf, cap, "s%llu", k);
    return buf;
}

static unsigned long long add_alloc(uintptr_t base, size_t user)
{
    unsigned long long k = g_nallocs, off;
    if (g_serial && (g_serial((rzcu_deviceptr)base, &k, &off) != 0 || off != 0))
        k = g_nallocs;
    if (g_nallocs == g_cap_allocs) {
        size_t cap = g_cap_allocs ? 2 * g_cap_allocs : 256;
        struct alloc *a = realloc(g_allocs, cap * sizeof *a);
        if (!a)
            return k;
        g_allocs = a;
        g_cap_allocs = cap;
    }
    g_allocs[g_nallocs] = (struct alloc){base, user, k, 0};
    g_nallocs++;
    return k;
}

/* The live allocation based at p, or NULL. Under g_mu. */
static struct alloc *live_base(uintptr_t p)
{
    for (size_t i = g_nallocs; i-- > 0;)
        if (g_allocs[i].base == p && !g_allocs[i].freed)
            return &g_allocs[i];
    return NULL;
}

/* What each entry point's line says about its arguments. */
enum kind {
    K_OTHER, K_ALLOC, K_ALLOC_MANAGED, K_ALLOC_PITCH, K_ALLOC_ASYNC, K_ALLOC_POOL, K_FREE, K_FREE_ASYNC, K_RANGE,
    K_SET, K_SET_ASYNC, K_HTOD, K_HTOD_ASYNC, K_DTOH, K_DTOH_ASYNC, K_DTOD, K_DTOD_ASYNC, K_BATCH, K_BATCH3D, K_STREAM_CREATE,
    K_STREAM_SYNC, K_LAUNCH, K_LAUNCH_EX, K_PROC, K_PROC1, K_POINTER_ATTR, K_CTX_SYNC
};

struct entry {
    const char *name;
    void *fwd;           /* this shim's definition */
    void *_Atomic *next; /* the next definition */
    enum kind kind;
};

/* Line buffer with bounded appends. */
struct line {
    char buf[2048];
    size_t n;
};

__attribute__((format(printf, 2, 3))) static void add(struct line *l, const char *fmt, ...)
{
    if (l->n >= sizeof l->buf)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(l->buf + l->n, sizeof l->buf - l->n, fmt, ap);
    va_end(ap);
    if (w > 0)
        l->n += (size_t)w < sizeof l->buf - l->n ? (size_t)w : sizeof l->buf - l->n - 1;
}

/* Before the call: what the arguments hold now (the checksum of what is copied in, of what is freed). */
static void before(struct line *l, const struct entry *e, const uint64_t *a)
{
    char p1[64], p2[64], s1[32];
    switch (e->kind) {
    case K_ALLOC:
    case K_ALLOC_ASYNC:
    case K_ALLOC_POOL:
        add(l, " bytes=%" PRIu64, a[1]);
        if (e->kind != K_ALLOC)
            add(l, " stream=%s", stream_name(a[e->kind == K_ALLOC_POOL ? 3 : 2], s1, sizeof s1));
        break;
    case K_ALLOC_MANAGED:
        add(l, " bytes=%" PRIu64 " flags=%" PRIu64, a[1], a[2]);
        break;
    case K_ALLOC_PITCH:
        add(l, " width=%" PRIu64 " height=%" PRIu64 " element=%" PRIu64, a[2], a[3], a[4]);
        break;
    case K_FREE:
    case K_FREE_ASYNC: {
        add(l, " %s", ptr_name(a[0], p1, sizeof p1));
        if (e->kind == K_FREE_ASYNC)
            add(l, " stream=%s", stream_name(a[1], s1, sizeof s1));
        const struct alloc *al = live_base((uintptr_t)a[0]);
        if (al && g_emulated && e->kind == K_FREE) /* an async free's data may still be changing */
            add(l, " sum=0x%016" PRIx64, fnv((const void *)al->base, al->user));
        break;
    }
    case K_RANGE:
        add(l, " ptr=%s", ptr_name(a[2], p1, sizeof p1));
        break;
    case K_SET:
    case K_SET_ASYNC:
        add(l, " dst=%s value=%" PRIu64 " n=%" PRIu64, ptr_name(a[0], p1, sizeof p1), a[1] & 0xff, a[2]);
        break;
    case K_HTOD:
    case K_HTOD_ASYNC:
        add(l, " dst=%s n=%" PRIu64, ptr_name(a[0], p1, sizeof p1), a[2]);
        if (a[1])
            add(l, " src.sum=0x%016" PRIx64, fnv((const void *)(uintptr_t)a[1], (size_t)a[2]));
        break;
    case K_DTOH:
    case K_DTOH_ASYNC:
        add(l, " src=%s n=%" PRIu64, ptr_name(a[1], p1, sizeof p1), a[2]);
        break;
    case K_DTOD:
    case K_DTOD_ASYNC:
        add(l, " dst=%s src=%s n=%" PRIu64, ptr_name(a[0], p1, sizeof p1), ptr_name(a[1], p2, sizeof p2), a[2]);
        break;
    case K_BATCH: {
        const rzcu_deviceptr *dsts = (const rzcu_deviceptr *)(uintptr_t)a[0];
        const rzcu_deviceptr *srcs = (const rzcu_deviceptr *)(uintptr_t)a[1];
        const size_t *sizes = (const size_t *)(uintptr_t)a[2];
        add(l, " count=%" PRIu64, a[3]);
        for (uint64_t i = 0; dsts && srcs && sizes && i < a[3] && i < 16; i++)
            add(l, " [%s<-%s n=%zu]", ptr_name(dsts[i], p1, sizeof p1), ptr_name(srcs[i], p2, sizeof p2), sizes[i]);
        break;
    }
    case K_BATCH3D: { /* [dst<-src widthxheightxdepth], each pointer with its rowLength/layerHeight */
        const rzcu_memcpy3d_batch_op *ops = (const rzcu_memcpy3d_batch_op *)(uintptr_t)a[1];
        add(l, " count=%" PRIu64, a[0]);
        for (uint64_t i = 0; ops && i < a[0] && i < 16; i++) {
            const rzcu_memcpy3d_operand *d = &ops[i].dst, *sr = &ops[i].src;
            int dp = d->type == RZCU_MEMCPY_OPERAND_TYPE_POINTER, sp = sr->type == RZCU_MEMCPY_OPERAND_TYPE_POINTER;
            add(l, " [%s/%zu/%zu<-%s/%zu/%zu %zux%zux%zu]", dp ? ptr_name(d->op.ptr.ptr, p1, sizeof p1) : "array",
                dp ? d->op.ptr.rowLength : 0, dp ? d->op.ptr.layerHeight : 0,
                sp ? ptr_name(sr->op.ptr.ptr, p2, sizeof p2) : "array", sp ? sr->op.ptr.rowLength : 0,
                sp ? sr->op.ptr.layerHeight : 0, ops[i].extent.width, ops[i].extent.height, ops[i].extent.depth);
        }
        break;
    }
    case K_STREAM_SYNC:
        add(l, " stream=%s", stream_name(a[0], s1, sizeof s1));
        break;
    case K_STREAM_CREATE:
        add(l, " flags=%" PRIu64, a[1]);
        break;
    case K_LAUNCH:
        add(l, " f=f%llu grid=%" PRIu64 "x%" PRIu64 "x%" PRIu64 " block=%" PRIu64 "x%" PRIu64 "x%" PRIu64 " stream=%s",
            handle_id(&g_funcs, &g_nfuncs, &g_cap_funcs, (const void *)(uintptr_t)a[0], 1), a[1], a[2], a[3], a[4],
            a[5], a[6], stream_name(a[8], s1, sizeof s1));
        break;
    case K_LAUNCH_EX:
        add(l, " f=f%llu", handle_id(&g_funcs, &g_nfuncs, &g_cap_funcs, (const void *)(uintptr_t)a[1], 1));
        break;
    case K_PROC:
    case K_PROC1:
        add(l, " symbol=%s version=%" PRIu64 " flags=%" PRIu64, a[0] ? (const char *)(uintptr_t)a[0] : "(null)",
            a[2], a[3]);
        break;
    case K_POINTER_ATTR:
        add(l, " attribute=%" PRIu64 " ptr=%s", a[1], ptr_name(a[2], p1, sizeof p1));
        break;
    case K_CTX_SYNC:
    case K_OTHER:
        break;
    }
}

/* After a successful call: what it handed back. */
static void after(struct line *l, const struct entry *e, const uint64_t *a)
{
    char p1[64];
    switch (e->kind) {
    case K_ALLOC:
    case K_ALLOC_MANAGED:
    case K_ALLOC_ASYNC:
    case K_ALLOC_POOL:
    case K_ALLOC_PITCH: {
        if (a[0] == 0)
            break;
        uintptr_t p = (uintptr_t) * (const rzcu_deviceptr *)(uintptr_t)a[0];
        size_t user = (size_t)a[1];
        if (e->kind == K_ALLOC_PITCH) {
            size_t pitch = *(const size_t *)(uintptr_t)a[1];
            user = pitch * (size_t)a[3];
            add(l, " pitch=%zu", pitch);
        }
        add(l, " a%llu @0x%" PRIxPTR, add_alloc(p, user), p);
        break;
    }
    case K_FREE:
    case K_FREE_ASYNC: {
        struct alloc *al = live_base((uintptr_t)a[0]);
        if (al)
            al->freed = 1;
        break;
    }
    case K_RANGE:
        if (a[0])
            add(l, " base=%s", ptr_name(*(const rzcu_deviceptr *)(uintptr_t)a[0], p1, sizeof p1));
        if (a[1])
            add(l, " size=%zu", *(const size_t *)(uintptr_t)a[1]);
        break;
    case K_DTOH:
        if (a[0])
            add(l, " dst.sum=0x%016" PRIx64, fnv((const void *)(uintptr_t)a[0], (size_t)a[2]));
        break;
    case K_STREAM_CREATE: {
        const void *s = *(void *const *)(uintptr_t)a[0];
        add(l, " s%llu", handle_id(&g_streams, &g_nstreams, &g_cap_streams, s, 1));
        break;
    }
    case K_PROC:
    case K_PROC1: {
        void *fn = *(void *const *)(uintptr_t)a[1];
        Dl_info info;
        add(l, " -> %s", fn && dladdr(fn, &info) && info.dli_sname && info.dli_saddr == fn ? info.dli_sname : "?");
        break;
    }
    default:
        break;
    }
}

static void trace(const struct entry *e, const uint64_t *a, rzcu_result r, struct line *l)
{
    const char *name = emu_error_name(r);
    if (name)
        add(l, " = %s", name);
    else
        add(l, " = %u", (unsigned)r);
    if (r == RZCUDA_SUCCESS)
        after(l, e, a);
    add(l, "\n");
    emu_trace_write_line(g_fd, l->buf, l->n);
}

/* At exit (after the exit handlers registered after the shim's first call, redzone's exit scan included):
 * the bytes of every allocation still live. */
static void end_report(void)
{
    if (!g_emulated || getpid() != g_pid)
        return;
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_nallocs; i++) {
        if (g_allocs[i].freed)
            continue;
        char line[128];
        int n = snprintf(line, sizeof line, "end a%llu sum=0x%016" PRIx64 "\n", g_allocs[i].k,
                         fnv((const void *)g_allocs[i].base, g_allocs[i].user));
        emu_trace_write_line(g_fd, line, (size_t)n);
    }
    pthread_mutex_unlock(&g_mu);
}

/* ---- the forwarders ----------------------------------------------------------------------------------- */
/* Each argument as a uint64_t, in order (up to 12). */
#define SHIM_U64(x) (uint64_t)(uintptr_t)(x)
#define SHIM_NARGS(...) SHIM_NARGS_(__VA_ARGS__, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define SHIM_NARGS_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, n, ...) n
#define SHIM_CAT(a, b) SHIM_CAT_(a, b)
#define SHIM_CAT_(a, b) a##b
#define SHIM_U64S(...) SHIM_CAT(SHIM_U64S_, SHIM_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define SHIM_U64S_1(a) SHIM_U64(a)
#define SHIM_U64S_2(a, ...) SHIM_U64(a), SHIM_U64S_1(__VA_ARGS__)
#define SHIM_U64S_3(a, ...) SHIM_U64(a), SHIM_U64S_2(__VA_ARGS__)
#define SHIM_U64S_4(a, ...) SHIM_U64(a), SHIM_U64S_3(__VA_ARGS__)
#define SHIM_U64S_5(a, ...) SHIM_U64(a), SHIM_U64S_4(__VA_ARGS__)
#define SHIM_U64S_6(a, ...) SHIM_U64(a), SHIM_U64S_5(__VA_ARGS__)
#define SHIM_U64S_7(a, ...) SHIM_U64(a), SHIM_U64S_6(__VA_ARGS__)
#define SHIM_U64S_8(a, ...) SHIM_U64(a), SHIM_U64S_7(__VA_ARGS__)
#define SHIM_U64S_9(a, ...) SHIM_U64(a), SHIM_U64S_8(__VA_ARGS__)
#define SHIM_U64S_10(a, ...) SHIM_U64(a), SHIM_U64S_9(__VA_ARGS__)
#define SHIM_U64S_11(a, ...) SHIM_U64(a), SHIM_U64S_10(__VA_ARGS__)
#define SHIM_U64S_12(a, ...) SHIM_U64(a), SHIM_U64S_11(__VA_ARGS__)


static struct entry *entry_by_name(const char *name);
static void swap_for_forwarder(void **pfn);
typedef rzcu_result shim_fn_cuCtxGetDevice_v2(rzcu_device *dev, rzcu_context ctx); /* not in cu.h */

static _Thread_local int t_depth; /* a forwarder calling back into the shim (a driver calling itself) */

/* The body of every forwarder (locals prefixed: the parameters have short names). */
#define SHIM_BODY(name, fn_type, args)                                                                       \
    {                                                                                                        \
        fn_type *shim_f_ = (fn_type *)resolve(&next_##name, #name);                                          \
        if (shim_f_ == NULL)                                                                                 \
            return RZCUDA_ERROR_NOT_INITIALIZED;                                                             \
        pthread_once(&g_once, init);                                                                         \
        if (g_fd < 0 || t_depth)                                                                             \
            return shim_f_ args;                                                                             \
        const uint64_t shim_a_[12] = {SHIM_U64S args};                                                       \
        const struct entry *shim_e_ = entry_by_name(#name);                                                  \
        struct line *shim_l_ = malloc(sizeof *shim_l_);                                                      \
        if (shim_l_ == NULL)                                                                                 \
            return shim_f_ args;                                                                             \
        shim_l_->n = 0;                                                                                      \
        add(shim_l_, "call %s", #name);                                                                      \
        pthread_mutex_lock(&g_mu);                                                                           \
        before(shim_l_, shim_e_, shim_a_);                                                                   \
        pthread_mutex_unlock(&g_mu);                                                                         \
        t_depth++;                                                                                           \
        rzcu_result shim_r_ = shim_f_ args;                                                                  \
        t_depth--;                                                                                           \
        if (shim_r_ == RZCUDA_SUCCESS && (shim_e_->kind == K_PROC || shim_e_->kind == K_PROC1))              \
            swap_for_forwarder((void **)(uintptr_t)shim_a_[1]);                                              \
        pthread_mutex_lock(&g_mu);                                                                           \
        trace(shim_e_, shim_a_, shim_r_, shim_l_);                                                           \
        pthread_mutex_unlock(&g_mu);                                                                         \
        free(shim_l_);                                                                                       \
        return shim_r_;                                                                                      \
    }

#define SHIM_DEFINE(name, fn_type, params, args)                                                             \
    static void *_Atomic next_##name;                                                                        \
    SHIM_EXPORT fn_type name;                                                                                \
    rzcu_result name params SHIM_BODY(name, fn_type, args)
SHIM_CALLS(SHIM_DEFINE)
SHIM_VMM_CALLS(SHIM_DEFINE)

#define SHIM_DEFINE_WRITER(exported, base, since, per_thread, params, args)                                  \
    SHIM_DEFINE(exported, rzcu_wfn_##exported, params, args)
RZCU_DEVICE_WRITERS(SHIM_DEFINE_WRITER)

/* No arguments: written out. */
static void *_Atomic next_cuCtxSynchronize;
SHIM_EXPORT rzcu_fn_cuCtxSynchronize cuCtxSynchronize;
rzcu_result cuCtxSynchronize(void)
{
    rzcu_fn_cuCtxSynchronize *f = (rzcu_fn_cuCtxSynchronize *)resolve(&next_cuCtxSynchronize, "cuCtxSynchronize");
    if (f == NULL)
        return RZCUDA_ERROR_NOT_INITIALIZED;
    pthread_once(&g_once, init);
    if (g_fd < 0 || t_depth)
        return f();
    t_depth++;
    rzcu_result r = f();
    t_depth--;
    struct line l = {.n = 0};
    add(&l, "call cuCtxSynchronize");
    pthread_mutex_lock(&g_mu);
    trace(entry_by_name("cuCtxSynchronize"), NULL, r, &l);
    pthread_mutex_unlock(&g_mu);
    return r;
}

/* ---- the table of forwarders, and lookups ------------------------------------------------------------ */
static enum kind kind_of(const char *n)
{
    static const struct {
        const char *name;
        enum kind kind;
    } kinds[] = {
        {"cuMemAlloc_v2", K_ALLOC}, {"cuMemAllocManaged", K_ALLOC_MANAGED}, {"cuMemAllocPitch_v2", K_ALLOC_PITCH},
        {"cuMemAllocAsync", K_ALLOC_ASYNC}, {"cuMemAllocAsync_ptsz", K_ALLOC_ASYNC},
        {"cuMemAllocFromPoolAsync", K_ALLOC_POOL}, {"cuMemAllocFromPoolAsync_ptsz", K_ALLOC_POOL},
        {"cuMemFree_v2", K_FREE}, {"cuMemFreeAsync", K_FREE_ASYNC}, {"cuMemFreeAsync_ptsz", K_FREE_ASYNC},
        {"cuMemGetAddressRange_v2", K_RANGE}, {"cuMemsetD8_v2", K_SET}, {"cuMemsetD8_v2_ptds", K_SET},
        {"cuMemsetD8Async", K_SET_ASYNC}, {"cuMemsetD8Async_ptsz", K_SET_ASYNC}, {"cuMemcpyHtoD_v2", K_HTOD},
        {"cuMemcpyHtoD_v2_ptds", K_HTOD}, {"cuMemcpyHtoDAsync_v2", K_HTOD_ASYNC},
        {"cuMemcpyHtoDAsync_v2_ptsz", K_HTOD_ASYNC}, {"cuMemcpyDtoH_v2", K_DTOH}, {"cuMemcpyDtoH_v2_ptds", K_DTOH},
        {"cuMemcpyDtoHAsync_v2", K_DTOH_ASYNC}, {"cuMemcpyDtoHAsync_v2_ptsz", K_DTOH_ASYNC},
        {"cuMemcpyDtoD_v2", K_DTOD}, {"cuMemcpyDtoD_v2_ptds", K_DTOD}, {"cuMemcpyDtoDAsync_v2", K_DTOD_ASYNC},
        {"cuMemcpyDtoDAsync_v2_ptsz", K_DTOD_ASYNC}, {"cuMemcpyBatchAsync_v2", K_BATCH},
        {"cuMemcpyBatchAsync_v2_ptsz", K_BATCH}, {"cuMemcpyBatchAsync", K_BATCH}, {"cuMemcpyBatchAsync_ptsz", K_BATCH},
        {"cuMemcpy3DBatchAsync", K_BATCH3D}, {"cuMemcpy3DBatchAsync_ptsz", K_BATCH3D},
        {"cuMemcpy3DBatchAsync_v2", K_BATCH3D}, {"cuMemcpy3DBatchAsync_v2_ptsz", K_BATCH3D},
        {"cuStreamCreate", K_STREAM_CREATE}, {"cuStreamSynchronize", K_STREAM_SYNC},
        {"cuStreamSynchronize_ptsz", K_STREAM_SYNC}, {"cuLaunchKernel", K_LAUNCH}, {"cuLaunchKernel_ptsz", K_LAUNCH},
        {"cuLaunchKernelEx", K_LAUNCH_EX}, {"cuLaunchKernelEx_ptsz", K_LAUNCH_EX}, {"cuGetProcAddress_v2", K_PROC},
        {"cuGetProcAddress", K_PROC1}, {"cuPointerGetAttribute", K_POINTER_ATTR}, {"cuCtxSynchronize", K_CTX_SYNC},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(kinds[i].name, n) == 0)
            return kinds[i].kind;
    return K_OTHER;
}

static struct entry g_entries[] = {
#define SHIM_ENTRY(name, fn_type, params, args) {#name, (void *)name, &next_##name, K_OTHER},
    SHIM_CALLS(SHIM_ENTRY)
    SHIM_VMM_CALLS(SHIM_ENTRY)
#define SHIM_WRITER_ENTRY(exported, base, since, per_thread, params, args) SHIM_ENTRY(exported, x, y, z)
    RZCU_DEVICE_WRITERS(SHIM_WRITER_ENTRY)
#undef SHIM_WRITER_ENTRY
#undef SHIM_ENTRY
    {"cuCtxSynchronize", (void *)cuCtxSynchronize, &next_cuCtxSynchronize, K_CTX_SYNC},
};
#define NENTRIES (sizeof g_entries / sizeof g_entries[0])

static pthread_once_t g_kinds_once = PTHREAD_ONCE_INIT;
static void set_kinds(void)
{
    for (size_t i = 0; i < NENTRIES; i++)
        g_entries[i].kind = kind_of(g_entries[i].name);
}

static struct entry *entry_by_name(const char *name)
{
    pthread_once(&g_kinds_once, set_kinds);
    for (size_t i = 0; i < NENTRIES; i++)
        if (strcmp(g_entries[i].name, name) == 0)
            return &g_entries[i];
    return NULL;
}

/* The entry whose next definition is p (by the exported name at p), made to forward there. */
static struct entry *entry_for(void *p)
{
    Dl_info info;
    if (p == NULL || !dladdr(p, &info) || info.dli_sname == NULL || info.dli_saddr != p)
        return NULL;
    struct entry *e = entry_by_name(info.dli_sname);
    if (e == NULL || e->fwd == p) /* an interposer after us names its definitions by the global ones: ours */
        return e;
    void *expected = NULL;
    if (!atomic_compare_exchange_strong(e->next, &expected, p) && expected != p)
        return NULL; /* another definition is already the target: hand this one out untraced */
    return e;
}

static void swap_for_forwarder(void **pfn)
{
    if (pfn == NULL || *pfn == NULL)
        return;
    struct entry *e = entry_for(*pfn);
    if (e)
        *pfn = e->fwd;
}

/* Whether p is what the next layer hands out for the driver's own `name` (the driver's definition, or an
 * interposer's after us that stands for it): a function of that name in another library (a program's shim)
 * is not the driver's, and must neither be traced as it nor become the forwarders' target. */
static int driver_entry(const char *name, void *p)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL)
        return 0;
    int same = next_dlsym(h, name) == p;
    dlclose(h);
    return same;
}

/* dlsym: RTLD_NEXT requests go to libc's dlsym untouched, answered for the caller (dlsym_next.h says
 * why: sanitizer runtimes depend on it), so they are not traced; the rest to shim_dlsym, which hands out
 * forwarders for the driver's entry points. */
RZ_DLSYM_NO_SANITIZE __attribute__((used, visibility("hidden"))) void *shim_dlsym(void *handle, const char *name);
void *shim_dlsym(void *handle, const char *name)
{
    void *p = next_dlsym(handle, name);
    if (p == NULL || name[0] != 'c' || name[1] != 'u')
        return p;
    struct entry *e = entry_by_name(name);
    if (e == NULL || p == e->fwd) /* an interposer after us names its definitions by the global ones: ours */
        return p;
    if (!driver_entry(name, p))
        return p;
    void *expected = NULL;
    if (!atomic_compare_exchange_strong(e->next, &expected, p) && expected != p)
        return p;
    return e->fwd;
}
RZ_DLSYM_INTERPOSER(shim_dlsym, shim_real_dlsym, shim_resolve_dlsym);
