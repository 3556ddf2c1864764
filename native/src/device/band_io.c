/*
 * Band transfers (the device seam): reading and filling bands in batches, per context, on the library's own
 * stream in each context (device_ctx.c), with host staging (page-locked when the driver allows) and the
 * device memory and staging given up under the registry lock released after it.
 *
 * Band traffic runs on one non-blocking stream per context, owned by the library, so it never waits on the
 * program's legacy-stream work and the program's streams never wait on it; each batch ends with one
 * synchronisation of that stream. Reads use cuMemcpyBatchAsync where the driver has it, and fall back to
 * one async copy per band on older drivers (decided at run time).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common.h"
#include "band_io.h"
#include "capture.h"
#include "capture_mode.h"
#include "check_kernel.h"
#include "device_ctx.h"
#include "driver.h"
#include "graph_slots.h"
#include "sticky.h"
#include "stream_fills.h"

rzcu_result rz__dev_pointer_attribute(void *data, rzcu_pointer_attribute attribute, rz_devptr_t ptr) {
    if (rz__drv.cuPointerGetAttribute == NULL)
        return RZCUDA_ERROR_NOT_SUPPORTED;
    rzcu_capture_mode saved = rz__dev_quiet_begin();
    rzcu_result r = rz__drv.cuPointerGetAttribute(data, attribute, ptr);
    rz__dev_quiet_end(saved);
    return r;
}

rzcu_result rz__dev_block_of(rz_devptr_t ptr, void **ctx, rz_devptr_t *start) {
    *start = ptr;
    if (rz__drv.cuPointerGetAttributes == NULL) {
        rzcu_result r = rz__dev_pointer_attribute(ctx, RZCU_POINTER_ATTRIBUTE_CONTEXT, ptr);
        if (r == RZCUDA_SUCCESS && rz__dev_pointer_attribute(start, RZCU_POINTER_ATTRIBUTE_RANGE_START_ADDR, ptr) !=
                                       RZCUDA_SUCCESS)
            *start = ptr; /* cannot say: taken as the block's own start */
        return r;
    }
    rzcu_pointer_attribute a[2] = {RZCU_POINTER_ATTRIBUTE_CONTEXT, RZCU_POINTER_ATTRIBUTE_RANGE_START_ADDR};
    rzcu_context c = NULL;
    void *d[2] = {&c, start};
    rzcu_capture_mode saved = rz__dev_quiet_begin();
    rzcu_result r = rz__drv.cuPointerGetAttributes(2, a, d, ptr);
    rz__dev_quiet_end(saved);
    if (r == RZCUDA_SUCCESS && c == NULL)
        return RZCUDA_ERROR_INVALID_VALUE; /* no allocation there: the attributes' NULL answer */
    if (r == RZCUDA_SUCCESS)
        *ctx = c;
    return r;
}

/* cuStreamSynchronize of the library's own stream, in a quiet section. */
static rzcu_result sync_own(rzcu_stream s) {
    rzcu_capture_mode saved = rz__dev_quiet_begin();
    rzcu_result r = rz__drv.cuStreamSynchronize(s);
    rz__dev_quiet_end(saved);
    return r;
}

rzcu_result rz__dev_host_register(void *p, size_t bytes) {
    if (rz__drv.cuMemHostRegister_v2 == NULL)
        return RZCUDA_ERROR_NOT_SUPPORTED;
    rzcu_capture_mode saved = rz__dev_relaxed_begin();
    rzcu_result r = rz__drv.cuMemHostRegister_v2(p, bytes, RZCU_MEMHOSTREGISTER_PORTABLE);
    rz__dev_relaxed_end(saved);
    return r;
}

/*
 * Band transfers, batched: every band of a context in one cuMemcpyBatchAsync (reads into the caller's
 * staging; writes from a host buffer holding the band byte), then one synchronisation, so a scan or poison
 * of N zones costs a constant number of driver calls. The per-band method (one async copy or memset per band)
 * is the fallback for drivers without batch copies, chosen at run time; rz__dev_set_per_band() forces it
 * for benchmarks and for tests that prove both methods report the same.
 * The scratch below is used under the registry lock (all band traffic is).
 */
static int g_force_per_band;
static rzcu_deviceptr *g_dsts, *g_srcs;
static size_t *g_sizes;
static size_t g_scratch_cap;
static uint8_t *g_pattern[256]; /* host buffers holding one byte value, for batched fills */
static size_t g_pattern_size[256];

void rz__dev_set_per_band(int per_band) { g_force_per_band = per_band; }

static int batching(void) { return !g_force_per_band && rz__drv.cuMemcpyBatchAsync_v2 != NULL; }

static int ensure_batch_scratch(size_t n) {
    if (n <= g_scratch_cap)
        return 1;
    size_t cap = g_scratch_cap ? g_scratch_cap : 1024;
    while (cap < n)
        cap *= 2;
    rzcu_deviceptr *d = realloc(g_dsts, cap * sizeof *d);
    if (d)
        g_dsts = d;
    rzcu_deviceptr *sr = realloc(g_srcs, cap * sizeof *sr);
    if (sr)
        g_srcs = sr;
    size_t *sz = realloc(g_sizes, cap * sizeof *sz);
    if (sz)
        g_sizes = sz;
    if (!d || !sr || !sz)
        return 0;
    g_scratch_cap = cap;
    return 1;
}

static const uint8_t *pattern(uint8_t value, size_t bytes) {
    if (g_pattern_size[value] < bytes) {
        uint8_t *p = realloc(g_pattern[value], bytes);
        if (p == NULL)
            return NULL;
        memset(p, value, bytes);
        g_pattern[value] = p;
        g_pattern_size[value] = bytes;
    }
    return g_pattern[value];
}

/* Errors after which no call in the context can succeed: a kernel fault (sticky: every later call returns
 * it), or the context or driver gone. Anything else may be the batch call's own trouble. */
static int context_lost(rzcu_result r) {
    switch (r) {
    case RZCUDA_ERROR_ILLEGAL_ADDRESS:
    case RZCUDA_ERROR_LAUNCH_TIMEOUT:
    case RZCUDA_ERROR_ASSERT:
    case RZCUDA_ERROR_HARDWARE_STACK_ERROR:
    case RZCUDA_ERROR_ILLEGAL_INSTRUCTION:
    case RZCUDA_ERROR_MISALIGNED_ADDRESS:
    case RZCUDA_ERROR_INVALID_ADDRESS_SPACE:
    case RZCUDA_ERROR_INVALID_PC:
    case RZCUDA_ERROR_LAUNCH_FAILED:
    case RZCUDA_ERROR_CONTEXT_IS_DESTROYED:
    case RZCUDA_ERROR_INVALID_CONTEXT:
    case RZCUDA_ERROR_NOT_INITIALIZED:
    case RZCUDA_ERROR_DEINITIALIZED:
        return 1;
    default:
        return 0;
    }
}

/* One batch call for the k collected copies (a single copy goes by the plain entry point, which costs the
 * driver less). When the batch call fails with anything but an error that ends every call in the context,
 * the copies go one by one: a driver may export the batch entry point and not support it, or refuse a batch
 * for a limit it does not document (a batch size), and one refused batch must not fail every scan. A copy
 * that fails that way too fails the batch, with its own error. */
static rzcu_result flush_batch_of(rzcu_deviceptr *dsts, rzcu_deviceptr *srcs, size_t *sizes, size_t k,
                                  rzcu_stream s, int to_host) {
    if (k == 1)
        return to_host ? rz__drv.cuMemcpyDtoHAsync_v2((void *)(uintptr_t)dsts[0], srcs[0], sizes[0], s)
                       : rz__drv.cuMemcpyHtoDAsync_v2(dsts[0], (const void *)(uintptr_t)srcs[0], sizes[0], s);
    rzcu_memcpy_attributes attr = {.srcAccessOrder = RZCU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
    size_t attr_idx = 0;
    rzcu_result r = rz__drv.cuMemcpyBatchAsync_v2(dsts, srcs, sizes, k, &attr, &attr_idx, 1, s);
    if (r == RZCUDA_SUCCESS || context_lost(r))
        return r;
    r = RZCUDA_SUCCESS;
    for (size_t j = 0; j < k && r == RZCUDA_SUCCESS; j++)
        r = to_host ? rz__drv.cuMemcpyDtoHAsync_v2((void *)(uintptr_t)dsts[j], srcs[j], sizes[j], s)
                    : rz__drv.cuMemcpyHtoDAsync_v2(dsts[j], (const void *)(uintptr_t)srcs[j], sizes[j], s);
    return r;
}

static rzcu_result flush_batch(size_t k, rzcu_stream s, int to_host) {
    return flush_batch_of(g_dsts, g_srcs, g_sizes, k, s, to_host);
}

/*
 * Grouping a batch by context, in time linear in the batch: each entry's context gets a group number from
 * a small open-addressing table, then a counting sort lists every group's entries in batch order. (Passes
 * that looked up "seen" contexts among all earlier entries cost O(N^2) once zones spread over contexts.)
 * Small batches (a free-time check, two bands at most) use the caller's stack; large ones (scans, poisons,
 * installs: always under the registry lock) share this scratch, with its own lock for safety.
 */
#define GROUP_SMALL 8
static pthread_mutex_t g_group_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t *g_group_of, *g_group_order;
static size_t g_group_cap;
static void **g_group_ctx;  /* per group: its context */
static size_t *g_group_start; /* per group: where its entries start in the order (one more: the end) */
static size_t g_group_ctx_cap;
static void **g_hash_key;
static uint32_t *g_hash_val;
static size_t g_hash_cap;

static size_t hash_ptr(const void *p, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static int grow_groups(size_t want) {
    if (want <= g_group_ctx_cap)
        return 1;
    size_t cap = g_group_ctx_cap ? 2 * g_group_ctx_cap : 64;
    while (cap < want)
        cap *= 2;
    void **c = realloc(g_group_ctx, cap * sizeof *c);
    if (c)
        g_group_ctx = c;
    size_t *st = realloc(g_group_start, (cap + 1) * sizeof *st);
    if (st)
        g_group_start = st;
    if (!c || !st)
        return 0;
    g_group_ctx_cap = cap;
    return 1;
}

/* Rebuild the table with room for `groups` contexts at most half full. */
static int rehash(size_t groups) {
    size_t cap = 128;
    while (cap < 2 * groups)
        cap *= 2;
    if (cap <= g_hash_cap) {
        memset(g_hash_key, 0, g_hash_cap * sizeof *g_hash_key);
        cap = g_hash_cap;
    } else {
        void **k = calloc(cap, sizeof *k);
        uint32_t *v = malloc(cap * sizeof *v);
        if (!k || !v) {
            free(k);
            free(v);
            return 0;
        }
        free(g_hash_key);
        free(g_hash_val);
        g_hash_key = k;
        g_hash_val = v;
        g_hash_cap = cap;
    }
    return 1;
}

/* NULL is a valid context (the current one): the table stores it as this key. */
#define NULL_CTX_KEY ((void *)(uintptr_t)1)

static uint32_t group_lookup(void *ctx, size_t *ngroups, int *ok) {
    void *key = ctx ? ctx : NULL_CTX_KEY;
    size_t i = hash_ptr(key, g_hash_cap);
    while (g_hash_key[i] != NULL) {
        if (g_hash_key[i] == key)
            return g_hash_val[i];
        i = (i + 1) & (g_hash_cap - 1);
    }
    if (!grow_groups(*ngroups + 1)) {
        *ok = 0;
        return 0;
    }
    if (2 * (*ngroups + 1) > g_hash_cap) {
        /* Over half full: rebuild from the groups so far, then insert. */
        if (!rehash(*ngroups + 1)) {
            *ok = 0;
            return 0;
        }
        for (size_t g = 0; g < *ngroups; g++) {
            void *k = g_group_ctx[g] ? g_group_ctx[g] : NULL_CTX_KEY;
            size_t j = hash_ptr(k, g_hash_cap);
            while (g_hash_key[j] != NULL)
                j = (j + 1) & (g_hash_cap - 1);
            g_hash_key[j] = k;
            g_hash_val[j] = (uint32_t)g;
        }
        i = hash_ptr(key, g_hash_cap);
        while (g_hash_key[i] != NULL)
            i = (i + 1) & (g_hash_cap - 1);
    }
    g_hash_key[i] = key;
    g_hash_val[i] = (uint32_t)*ngroups;
    g_group_ctx[*ngroups] = ctx;
    return (uint32_t)(*ngroups)++;
}

int rz__io_group(const rz_band_io_t *io, size_t n, rz_io_groups_t *out) {
    if (n > UINT32_MAX)
        return 0;
    if (n > g_group_cap) {
        size_t cap = g_group_cap ? g_group_cap : 1024;
        while (cap < n)
            cap *= 2;
        uint32_t *a = realloc(g_group_of, cap * sizeof *a);
        if (a)
            g_group_of = a;
        uint32_t *b = realloc(g_group_order, cap * sizeof *b);
        if (b)
            g_group_order = b;
        if (!a || !b)
            return 0;
        g_group_cap = cap;
    }
    if (!rehash(1) || !grow_groups(1))
        return 0;
    size_t ngroups = 0;
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) /* runs of one context (the common case) skip the table */
        g_group_of[i] = i > 0 && io[i].ctx == io[i - 1].ctx ? g_group_of[i - 1] : group_lookup(io[i].ctx, &ngroups, &ok);
    if (!ok)
        return 0;
    memset(g_group_start, 0, (ngroups + 1) * sizeof *g_group_start);
    for (size_t i = 0; i < n; i++)
        g_group_start[g_group_of[i] + 1]++;
    for (size_t g = 0; g < ngroups; g++)
        g_group_start[g + 1] += g_group_start[g];
    /* Place each entry after the ones before it in its group: start[g] walks forward, then is restored. */
    for (size_t i = 0; i < n; i++)
        g_group_order[g_group_start[g_group_of[i]]++] = (uint32_t)i;
    for (size_t g = ngroups; g > 0; g--)
        g_group_start[g] = g_group_start[g - 1];
    g_group_start[0] = 0;
    out->order = g_group_order;
    out->start = g_group_start;
    out->ctx = g_group_ctx;
    out->n = ngroups;
    return 1;
}

uint64_t rz__dev_scratch_bytes(void) {
    return (uint64_t)g_scratch_cap * (sizeof *g_dsts + sizeof *g_srcs + sizeof *g_sizes) +
           (uint64_t)g_group_cap * (sizeof *g_group_of + sizeof *g_group_order) +
           (uint64_t)g_group_ctx_cap * (sizeof *g_group_ctx + sizeof *g_group_start) +
           (uint64_t)g_hash_cap * (sizeof *g_hash_key + sizeof *g_hash_val);
}

void rz__io_group_lock(void) { pthread_mutex_lock(&g_group_lock); }
void rz__io_group_unlock(void) { pthread_mutex_unlock(&g_group_lock); }

/* Read the m bands listed in order[] (all of context ctx) into their host buffers. */
static rzcu_result read_ctx(rz_band_io_t *io, const uint32_t *order, size_t m, rzcu_stream s) {
    rzcu_result r = RZCUDA_SUCCESS;
    /* A small read (the free-time check, without the registry lock) lists its copies on the stack. */
    rzcu_deviceptr small_dsts[GROUP_SMALL], small_srcs[GROUP_SMALL];
    size_t small_sizes[GROUP_SMALL];
    int small = m <= GROUP_SMALL;
    if (batching() && (small || ensure_batch_scratch(m))) {
        rzcu_deviceptr *dsts = small ? small_dsts : g_dsts, *srcs = small ? small_srcs : g_srcs;
        size_t *sizes = small ? small_sizes : g_sizes;
        size_t k = 0;
        for (size_t x = 0; x < m; x++) {
            const rz_band_io_t *e = &io[order[x]];
            if (e->bytes == 0)
                continue;
            dsts[k] = (rzcu_deviceptr)(uintptr_t)e->host;
            srcs[k] = e->dev;
            sizes[k] = e->bytes;
            k++;
        }
        if (k > 0)
            r = flush_batch_of(dsts, srcs, sizes, k, s, 1);
    } else {
        for (size_t x = 0; x < m && r == RZCUDA_SUCCESS; x++) {
            const rz_band_io_t *e = &io[order[x]];
            if (e->bytes > 0)
                r = rz__drv.cuMemcpyDtoHAsync_v2(e->host, e->dev, e->bytes, s);
        }
    }
    rzcu_result rs = sync_own(s);
    return r != RZCUDA_SUCCESS ? r : rs;
}

/* Fill the m bands listed in order[] (all of one context) with their values. */
static rzcu_result write_ctx(rz_band_io_t *io, const uint32_t *order, size_t m, rzcu_stream s) {
    rzcu_result r = RZCUDA_SUCCESS;
    int batched = batching() && rz__drv.cuMemcpyHtoDAsync_v2 != NULL && ensure_batch_scratch(m);
    if (batched) {
        /* Size every pattern buffer first: growing one later would move it under copies already queued. */
        size_t widest = 0;
        for (size_t x = 0; x < m; x++)
            if (io[order[x]].bytes > widest)
                widest = io[order[x]].bytes;
        for (size_t x = 0; x < m && batched; x++)
            if (pattern(io[order[x]].value, widest) == NULL)
                batched = 0;
    }
    size_t k = 0;
    for (size_t x = 0; x < m && r == RZCUDA_SUCCESS; x++) {
        const rz_band_io_t *e = &io[order[x]];
        if (e->bytes == 0)
            continue;
        const uint8_t *src = batched ? pattern(e->value, e->bytes) : NULL;
        if (src == NULL) {
            r = rz__drv.cuMemsetD8Async(e->dev, e->value, e->bytes, s);
            continue;
        }
        g_dsts[k] = e->dev;
        g_srcs[k] = (rzcu_deviceptr)(uintptr_t)src;
        g_sizes[k] = e->bytes;
        k++;
    }
    if (r == RZCUDA_SUCCESS && k > 0)
        r = flush_batch(k, s, 0);
    rzcu_result rs = sync_own(s);
    return r != RZCUDA_SUCCESS ? r : rs;
}

typedef rzcu_result band_op(rz_band_io_t *, const uint32_t *, size_t, rzcu_stream);

/* Run op on one context's entries; on failure mark them, so the other contexts' results are still used. */
static rzcu_result one_ctx(rz_band_io_t *io, void *ctx, const uint32_t *order, size_t m, band_op *op) {
    int pushed;
    rzcu_result r = rz__sticky(); /* after a sticky error no call can succeed: none is made (sticky.c) */
    if (r == RZCUDA_SUCCESS)
        r = rz__sticky_note(rz__dev_enter(ctx, &pushed));
    if (r == RZCUDA_SUCCESS) {
        rzcu_stream s;
        r = rz__sticky_note(rz__dev_stream(ctx, &s));
        if (r == RZCUDA_SUCCESS)
            r = rz__sticky_note(op(io, order, m, s));
        rz__dev_leave(pushed);
    }
    if (r != RZCUDA_SUCCESS)
        for (size_t x = 0; x < m; x++)
            io[order[x]].failed = 1;
    return r;
}

/* Run op once per distinct context among the entries, in order of first appearance. */
static rzcu_result per_ctx(rz_band_io_t *io, size_t n, band_op *op) {
    rzcu_result first_err = RZCUDA_SUCCESS;
    if (n <= GROUP_SMALL) {
        uint32_t order[GROUP_SMALL];
        for (size_t i = 0; i < n; i++) {
            size_t j = 0;
            while (j < i && io[j].ctx != io[i].ctx)
                j++;
            if (j < i)
                continue; /* taken with its context's first entry */
            size_t m = 0;
            for (size_t x = i; x < n; x++)
                if (io[x].ctx == io[i].ctx)
                    order[m++] = (uint32_t)x;
            rzcu_result r = one_ctx(io, io[i].ctx, order, m, op);
            if (r != RZCUDA_SUCCESS && first_err == RZCUDA_SUCCESS)
                first_err = r;
        }
        return first_err;
    }
    rz__io_group_lock();
    rz_io_groups_t g;
    if (!rz__io_group(io, n, &g)) {
        rz__io_group_unlock();
        for (size_t i = 0; i < n; i++)
            io[i].failed = 1;
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    }
    for (size_t k = 0; k < g.n; k++) {
        rzcu_result r = one_ctx(io, g.ctx[k], g.order + g.start[k], g.start[k + 1] - g.start[k], op);
        if (r != RZCUDA_SUCCESS && first_err == RZCUDA_SUCCESS)
            first_err = r;
    }
    rz__io_group_unlock();
    return first_err;
}

rzcu_result rz__dev_read(rz_band_io_t *io, size_t n) { return per_ctx(io, n, read_ctx); }

/* Order the legacy stream's next operations after the work queued so far on streams[0..ns) (of the current
 * context), with one event recorded on each and waited for by the legacy stream: no host wait. */
static rzcu_result legacy_waits_for(const rzcu_stream *streams, size_t ns) {
    if (ns == 0)
        return RZCUDA_SUCCESS;
    if (rz__drv.cuEventCreate == NULL || rz__drv.cuEventRecord == NULL || rz__drv.cuStreamWaitEvent == NULL ||
        rz__drv.cuEventDestroy_v2 == NULL)
        return RZCUDA_ERROR_NOT_SUPPORTED;
    rzcu_event ev;
    rzcu_result r = rz__drv.cuEventCreate(&ev, 0x2 /* CU_EVENT_DISABLE_TIMING */);
    if (r != RZCUDA_SUCCESS)
        return r;
    /* One event serves every stream: a wait takes the event's last record as it is at the call. */
    for (size_t i = 0; i < ns && r == RZCUDA_SUCCESS; i++) {
        r = rz__drv.cuEventRecord(ev, streams[i]);
        if (r == RZCUDA_SUCCESS)
            r = rz__drv.cuStreamWaitEvent(NULL, ev, 0);
    }
    rz__drv.cuEventDestroy_v2(ev); /* released by the driver once its records have completed */
    return r;
}

rzcu_result rz__dev_read_after_streams(rz_band_io_t *io, size_t n, const rzcu_stream *streams, size_t ns) {
    int pushed;
    rzcu_result r = rz__sticky();
    if (r == RZCUDA_SUCCESS && (n == 0 || rz__drv.cuMemcpyDtoH_v2 == NULL || rz__drv.cuMemcpyDtoHAsync_v2 == NULL))
        r = RZCUDA_ERROR_NOT_SUPPORTED;
    if (r != RZCUDA_SUCCESS)
        return r;
    /* No capture may begin meanwhile (an event recorded on a stream being captured is captured, and the
     * legacy stream's wait for it would invalidate that capture): the caller saw none in progress. */
    if (!rz__capture_quiet_enter()) {
        rz__capture_quiet_leave();
        return RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    r = rz__sticky_note(rz__dev_enter(io[0].ctx, &pushed));
    if (r != RZCUDA_SUCCESS) {
        rz__capture_quiet_leave();
        return r;
    }
    rzcu_capture_mode saved = rz__dev_quiet_begin(); /* no capture in progress: the caller checked */
    r = legacy_waits_for(streams, ns);
    for (size_t i = 0; i + 1 < n && r == RZCUDA_SUCCESS; i++)
        if (io[i].bytes)
            r = rz__drv.cuMemcpyDtoHAsync_v2(io[i].host, io[i].dev, io[i].bytes, NULL);
    if (r == RZCUDA_SUCCESS)
        r = rz__drv.cuMemcpyDtoH_v2(io[n - 1].host, io[n - 1].dev, io[n - 1].bytes);
    rz__dev_quiet_end(saved);
    rz__dev_leave(pushed);
    rz__capture_quiet_leave();
    return rz__sticky_note(r);
}

rzcu_result rz__dev_read_after_default(rz_band_io_t *io, size_t n) {
    return rz__dev_read_after_streams(io, n, NULL, 0);
}

rzcu_result rz__dev_write(rz_band_io_t *io, size_t n) { return per_ctx(io, n, write_ctx); }

/*
 * Buffers given up under the registry lock are released after it: unregistering pinned memory and freeing
 * device memory may wait for the device (the emulated driver drains every stream there, a real one may),
 * which must never happen while the lock is held (a stream's host function may need it, and gdb's agent
 * would wait for the program's kernels).
 */
struct retired {
    void *host; /* staging: munmap (and unregister when pinned) */
    size_t size;
    int pinned;
    rz_devptr_t dev; /* device buffer: cuMemFree in context ctx */
    void *ctx;
};
#define MAX_RETIRED 16
static struct retired g_retired[MAX_RETIRED];
static int g_nretired;
static pthread_mutex_t g_retired_lock = PTHREAD_MUTEX_INITIALIZER;

static void release(const struct retired *r) {
    if (r->host) {
        if (r->pinned) {
            rzcu_capture_mode saved = rz__dev_relaxed_begin();
            rz__drv.cuMemHostUnregister(r->host); /* a failure leaves nothing to undo here */
            rz__dev_relaxed_end(saved);
        }
        munmap(r->host, r->size);
    }
    if (r->dev) {
        int pushed;
        if (rz__dev_enter(r->ctx, &pushed) == RZCUDA_SUCCESS) {
            rzcu_capture_mode saved = rz__dev_relaxed_begin();
            rz__drv.cuMemFree_v2(r->dev);
            rz__dev_relaxed_end(saved);
            rz__dev_leave(pushed);
        }
    }
}

static void retire(struct retired r) {
    pthread_mutex_lock(&g_retired_lock);
    if (g_nretired < MAX_RETIRED) {
        g_retired[g_nretired++] = r;
        r = (struct retired){0};
    }
    pthread_mutex_unlock(&g_retired_lock);
    release(&r); /* no room (not expected: released after every scan): now, as before */
}

void rz__dev_retire_device(void *ctx, rz_devptr_t dev) { retire((struct retired){.dev = dev, .ctx = ctx}); }

void rz__dev_release_retired(void) {
    pthread_mutex_lock(&g_retired_lock);
    int n = g_nretired;
    struct retired r[MAX_RETIRED];
    memcpy(r, g_retired, sizeof r[0] * (size_t)n);
    g_nretired = 0;
    pthread_mutex_unlock(&g_retired_lock);
    for (int i = 0; i < n; i++)
        release(&r[i]);
}

/*
 * Host staging for band reads. Page-locked where the driver allows it (registered with
 * cuMemHostRegister, portable to every context), so device-to-host copies land in it directly instead of
 * going through the driver's own bounce buffer; plain pages otherwise (no context current on the calling
 * thread, or the driver refuses). Pinning is tried when the buffer is (re)made, never per scan. The
 * buffer grows geometrically; its contents are not kept.
 */
int rz__dev_staging_reserve(rz_staging_t *st, size_t bytes) {
    if (bytes <= st->size)
        return RZ_OK;
    size_t size = bytes > 2 * st->size ? bytes : 2 * st->size;
    if (size > bytes && size > RZ_BATCH_STAGING)
        size = bytes > RZ_BATCH_STAGING ? bytes : RZ_BATCH_STAGING;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return RZ_ENOMEM;
    if (st->p)
        retire((struct retired){.host = st->p, .size = st->size, .pinned = st->pinned});
    st->p = p;
    st->size = size;
    /* Without a current context the driver says so (CUDA_ERROR_INVALID_CONTEXT) and the pages stay plain. */
    st->pinned = rz__drv.cuMemHostUnregister && rz__dev_host_register(p, size) == RZCUDA_SUCCESS;
    return RZ_OK;
}
