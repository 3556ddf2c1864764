/*
 * Launch checks compared on the device (METRALE_REDZONE_SCAN=launch, METRALE_REDZONE_LAUNCH_KERNEL=1): the
 * check kernel's rz_check_changed (native/kernels/rz_check.cu; the emulated driver runs its host twin) reads
 * a context's bands where they are, against a table of their descriptors kept in device memory, and copies
 * the bands that changed into a small result area that one copy brings back. A launch whose zones did not
 * change since the table was uploaded costs one kernel launch and one copy of RZ_CHANGED_CAP entries and
 * RZ_CHANGED_BYTES of band bytes, whatever the number of zones: no host walk, no per-band copy. A table is
 * uploaded (from page-locked memory: no host wait) when a check meets a layout it has no table for. Areas
 * are made as checks in flight need them, up to AREAS per context (4.4 KiB each, device and host); past those a launch waits for its context's work.
 *
 * A table serves one layout (launch_check.c makes a new one when the registry changed). Its upload is queued
 * on the stream of the check that made it, so another stream uses it only once a check using it completed
 * (its work, upload included, ran); until then a check on another stream makes its own. Tables and result
 * areas are reused once their checks completed (released from the check's host function: no driver call),
 * at most TABLES and AREAS per context; past those the check copies bands instead. Their memory belongs to
 * the context and goes with it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common.h"
#include "check_changed.h"
#include "band_io.h"
#include "capture_mode.h"
#include "driver.h"
#include "options.h"

#define MAX_CTX 16
#define TABLES 8
#define AREAS 1024
#define BLOCK 256u
#define AREA_HEAD (8u + 8u * RZ_CHANGED_CAP)
#define AREA_BYTES (AREA_HEAD + RZ_CHANGED_BYTES)
/* Behind the result in the same page-locked host copy: the rows one check uploads (RZ_CHANGED_ROWS). */
#define ROWS_OFF ((AREA_BYTES + 15u) & ~15u)
#define AREA_PAGES ((ROWS_OFF + RZ_CHANGED_ROWS * sizeof(rz_check_desc_t) + 4095u) & ~4095u)

struct rz_changed_table {
    void *ctx;
    uint64_t id;          /* layout served (0: none yet) */
    size_t n, cap;
    rz_devptr_t dev;
    rz_check_desc_t *host; /* page-locked: the upload's source, kept until the next upload */
    uintptr_t skey;       /* the stream its upload was queued on (launch_check.c's identity of a stream) */
    int visible;          /* a check using it completed: the upload ran */
    int users;
    /* Kept in step with rows (launch_rows.c; id 0): the rows' epoch (0: not, or no longer, in step) and the
     * position in their change log its device copy has seen, once the work queued on skey ran. */
    uint64_t epoch, synced;
    pthread_mutex_t qlock; /* held from a check's look at the rows until its updates are queued */
};

struct rz_changed_area {
    void *ctx;
    rz_devptr_t dev;
    uint32_t *host;       /* page-locked copy of the device area */
    uint32_t base_count, base_bytes;
    int busy;
    int cleared;          /* the device area's counters were zeroed (queued before its first use) */
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kctx {
    void *ctx;
    int state; /* 1: ready, -1: no kernel in this context */
    rzcu_module mod;
    rzcu_function fn;
    rz_changed_table_t tables[TABLES];
    rz_changed_area_t areas[AREAS];
} *g_ctx[MAX_CTX]; /* allocated once each: checks in flight hold pointers into them */
static int g_nctx;
static _Atomic uint64_t g_uploads;
static _Atomic uint64_t g_row_copies;

static _Atomic int g_off;

void rz__changed_enable(int on) { atomic_store_explicit(&g_off, !on, memory_order_relaxed); }

uint64_t rz__changed_uploads(void) { return atomic_load_explicit(&g_uploads, memory_order_relaxed); }

static struct kctx *find_locked(void *ctx) {
    for (int i = 0; i < g_nctx; i++)
        if (g_ctx[i]->ctx == ctx)
            return g_ctx[i];
    return NULL;
}

/* Page-locked host memory (mmap'd, registered), or NULL. */
static void *pinned(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (rz__dev_host_register(p, bytes) != RZCUDA_SUCCESS) {
        munmap(p, bytes);
        return NULL;
    }
    return p;
}

static void unpin(void *p, size_t bytes) {
    if (p == NULL)
        return;
    if (rz__drv.cuMemHostUnregister)
        rz__drv.cuMemHostUnregister(p);
    munmap(p, bytes);
}

static size_t page_round(size_t bytes) { return (bytes + 4095) & ~(size_t)4095; }

int rz__changed_available(void *ctx) {
    if (atomic_load_explicit(&g_off, memory_order_relaxed) || !rz__options()->launch_kernel ||
        !rz__check_kernel_built() || ctx == NULL)
        return 0;
    pthread_mutex_lock(&g_lock);
    struct kctx *k = find_locked(ctx);
    int state = k ? k->state : 0;
    pthread_mutex_unlock(&g_lock);
    if (state != 0)
        return state > 0;
    /* First use in this context (the current one): load the module; a second thread may race here and
     * load it too, the loser's module is unloaded. */
    size_t size;
    const unsigned char *image = rz__check_kernel_image(&size);
    rzcu_module mod = NULL;
    rzcu_function fn = NULL;
    int ok = 0;
    if (rz__drv.cuModuleLoadData && rz__drv.cuModuleGetFunction && rz__drv.cuLaunchKernel && rz__drv.cuModuleUnload &&
        rz__drv.cuMemcpyHtoDAsync_v2 && rz__drv.cuMemcpyDtoHAsync_v2) {
        rzcu_capture_mode saved = rz__dev_relaxed_begin();
        if (rz__drv.cuModuleLoadData(&mod, image) == RZCUDA_SUCCESS) {
            ok = rz__drv.cuModuleGetFunction(&fn, mod, "rz_check_changed") == RZCUDA_SUCCESS;
            if (!ok)
                rz__drv.cuModuleUnload(mod);
        }
        rz__dev_relaxed_end(saved);
    }
    pthread_mutex_lock(&g_lock);
    k = find_locked(ctx);
    if (k == NULL && g_nctx < MAX_CTX && (k = calloc(1, sizeof *k)) != NULL) {
        k->ctx = ctx;
        for (int i = 0; i < TABLES; i++)
            pthread_mutex_init(&k->tables[i].qlock, NULL);
        g_ctx[g_nctx++] = k;
    }
    int lost = k == NULL || k->state != 0;
    if (!lost) {
        k->state = ok ? 1 : -1;
        k->mod = mod;
        k->fn = fn;
    }
    state = k ? k->state : -1;
    pthread_mutex_unlock(&g_lock);
    if (lost && ok)
        rz__drv.cuModuleUnload(mod);
    return state > 0;
}

rz_changed_table_t *rz__changed_table(void *ctx, uint64_t id, size_t n,
                                      void (*fill)(rz_check_desc_t *descs, size_t n, const void *arg),
                                      const void *arg, rzcu_stream s, uintptr_t skey) {
    if (n == 0 || n > UINT32_MAX)
        return NULL;
    pthread_mutex_lock(&g_lock);
    struct kctx *k = find_locked(ctx);
    rz_changed_table_t *t = NULL, *spare = NULL;
    for (int i = 0; k && k->state > 0 && i < TABLES && t == NULL; i++) {
        rz_changed_table_t *c = &k->tables[i];
        if (id != 0 && c->id == id && c->dev && (c->visible || c->skey == skey))
            t = c;
        else if (c->users == 0 && (spare == NULL || (c->cap >= n && spare->cap < n) || spare->dev == 0))
            spare = c;
    }
    if (t) {
        t->users++;
        pthread_mutex_unlock(&g_lock);
        return t;
    }
    if (spare == NULL) {
        pthread_mutex_unlock(&g_lock);
        return NULL;
    }
    t = spare;
    t->users = 1; /* ours while it is uploaded: no one else takes it */
    t->id = 0;
    t->epoch = 0;
    pthread_mutex_unlock(&g_lock);
    rzcu_result r = RZCUDA_SUCCESS;
    if (t->cap < n) {
        size_t cap = n + n / 2 + 64;
        rzcu_capture_mode saved = rz__dev_relaxed_begin();
        if (t->dev)
            rz__dev_retire_device(ctx, t->dev); /* freed later, outside any lock: cuMemFree may wait */
        unpin(t->host, page_round(t->cap * sizeof *t->host));
        t->dev = 0;
        t->cap = 0;
        t->host = pinned(page_round(cap * sizeof *t->host));
        r = t->host ? rz__drv.cuMemAlloc_v2(&t->dev, cap * sizeof *t->host) : RZCUDA_ERROR_OUT_OF_MEMORY;
        rz__dev_relaxed_end(saved);
        if (r == RZCUDA_SUCCESS)
            t->cap = cap;
        else
            t->dev = 0;
    }
    if (r == RZCUDA_SUCCESS) {
        fill(t->host, n, arg);
        r = rz__drv.cuMemcpyHtoDAsync_v2(t->dev, t->host, n * sizeof *t->host, s);
    }
    pthread_mutex_lock(&g_lock);
    if (r == RZCUDA_SUCCESS) {
        t->id = id;
        t->n = n;
        t->ctx = ctx;
        t->skey = skey;
        t->visible = 0;
        atomic_fetch_add_explicit(&g_uploads, 1, memory_order_relaxed);
    } else {
        t->users = 0;
        t = NULL;
    }
    pthread_mutex_unlock(&g_lock);
    return t;
}

rz_changed_area_t *rz__changed_area(void *ctx) {
    pthread_mutex_lock(&g_lock);
    struct kctx *k = find_locked(ctx);
    rz_changed_area_t *a = NULL;
    for (int i = 0; k && k->state > 0 && i < AREAS && a == NULL; i++)
        if (!k->areas[i].busy && (k->areas[i].dev || a == NULL))
            a = &k->areas[i];
    for (int i = 0; k && a && a->dev == 0 && i < AREAS; i++)
        if (!k->areas[i].busy && k->areas[i].dev)
            a = &k->areas[i]; /* one already made */
    if (a)
        a->busy = 1;
    pthread_mutex_unlock(&g_lock);
    if (a == NULL || a->dev)
        return a;
    rzcu_capture_mode saved = rz__dev_relaxed_begin();
    a->host = pinned(AREA_PAGES);
    rzcu_result r = a->host ? rz__drv.cuMemAlloc_v2(&a->dev, AREA_BYTES) : RZCUDA_ERROR_OUT_OF_MEMORY;
    rz__dev_relaxed_end(saved);
    if (r != RZCUDA_SUCCESS) {
        unpin(a->host, AREA_PAGES);
        a->host = NULL;
        a->dev = 0;
        pthread_mutex_lock(&g_lock);
        a->busy = 0;
        pthread_mutex_unlock(&g_lock);
        return NULL;
    }
    a->ctx = ctx;
    a->base_count = a->base_bytes = 0;
    a->cleared = 0;
    return a;
}

rzcu_result rz__changed_queue(rz_changed_table_t *t, rz_changed_area_t *a, size_t n, rzcu_stream s) {
    pthread_mutex_lock(&g_lock);
    struct kctx *k = find_locked(t->ctx);
    rzcu_function fn = k ? k->fn : NULL;
    pthread_mutex_unlock(&g_lock);
    if (fn == NULL)
        return RZCUDA_ERROR_NOT_FOUND;
    if (!a->cleared) {
        rzcu_result r = rz__drv.cuMemsetD8Async(a->dev, 0, 8, s); /* the counters, once per area */
        if (r != RZCUDA_SUCCESS)
            return r;
        a->cleared = 1;
    }
    rz_devptr_t descs = t->dev, out = a->dev;
    unsigned n32 = (unsigned)n, cap = RZ_CHANGED_CAP, bytecap = RZ_CHANGED_BYTES;
    unsigned base_count = a->base_count, base_bytes = a->base_bytes;
    void *params[] = {&descs, &n32, &out, &cap, &bytecap, &base_count, &base_bytes};
    unsigned grid = (unsigned)((n + BLOCK - 1) / BLOCK);
    rzcu_result r = rz__drv.cuLaunchKernel(fn, grid, 1, 1, BLOCK, 1, 1, 0, s, params, NULL);
    if (r == RZCUDA_SUCCESS)
        r = rz__drv.cuMemcpyDtoHAsync_v2(a->host, a->dev, AREA_BYTES, s);
    return r;
}

uint32_t rz__changed_result(rz_changed_area_t *a, rz_changed_band_t *out) {
    uint32_t count = a->host[0] - a->base_count, used = a->host[1] - a->base_bytes;
    const uint32_t *ent = a->host + 2;
    const uint8_t *data = (const uint8_t *)(a->host + 2 + 2 * RZ_CHANGED_CAP);
    uint32_t shown = count < RZ_CHANGED_CAP ? count : RZ_CHANGED_CAP;
    for (uint32_t k = 0; k < shown; k++) {
        uint32_t off = ent[2 * k + 1];
        out[k].pos = ent[2 * k];
        out[k].bytes = off < RZ_CHANGED_BYTES ? data + off : NULL;
    }
    (void)used;
    a->base_count = a->host[0];
    a->base_bytes = a->host[1];
    return count;
}

void rz__changed_table_release(rz_changed_table_t *t, int completed) {
    if (t == NULL)
        return;
    pthread_mutex_lock(&g_lock);
    if (completed)
        t->visible = 1;
    else
        t->epoch = 0; /* its updates may not have run: not in step with the rows any more */
    t->users--;
    pthread_mutex_unlock(&g_lock);
}

/*
 * Tables kept in step with rows (launch_rows.c). A stream's checks keep using the table their stream's
 * last check used, each queueing the rows changed since (at most RZ_CHANGED_ROWS, from the check's own
 * result area's host copy: it is not reused before the check completed) ahead of its kernel on that stream.
 * Only work on one stream is ordered, so a table follows one stream (skey); another stream takes it over
 * only when no check holds it (all its work ran). The queue lock orders two threads' checks of one stream:
 * the rows one looked at are queued before the next one looks.
 */
rz_changed_table_t *rz__changed_rows_take(void *ctx, uintptr_t skey, uint64_t *epoch, uint64_t *synced, size_t *cap) {
    pthread_mutex_lock(&g_lock);
    struct kctx *k = find_locked(ctx);
    rz_changed_table_t *t = NULL;
    for (int i = 0; k && k->state > 0 && i < TABLES; i++) {
        rz_changed_table_t *c = &k->tables[i];
        if (c->epoch == 0 || c->dev == 0 || c->id != 0)
            continue;
        if (c->skey == skey) {
            t = c;
            break;
        }
        if (c->users == 0 && t == NULL)
            t = c;
    }
    if (t) {
        t->users++;
        t->skey = skey;
    }
    pthread_mutex_unlock(&g_lock);
    if (t == NULL)
        return NULL;
    pthread_mutex_lock(&t->qlock);
    pthread_mutex_lock(&g_lock);
    *epoch = t->epoch;
    *synced = t->synced;
    *cap = t->cap;
    pthread_mutex_unlock(&g_lock);
    return t;
}

rzcu_result rz__changed_rows_update(rz_changed_table_t *t, rz_changed_area_t *a, const uint32_t *rows,
                                    const rz_check_desc_t *descs, size_t k, size_t n, uint64_t synced, rzcu_stream s) {
    rz_check_desc_t *up = (rz_check_desc_t *)((uint8_t *)a->host + ROWS_OFF);
    memcpy(up, descs, k * sizeof *up);
    for (size_t i = 0; i < k;) {
        size_t j = i + 1;
        while (j < k && rows[j] == rows[j - 1] + 1)
            j++; /* one copy for each run of neighbouring rows */
        rzcu_result r = rz__drv.cuMemcpyHtoDAsync_v2(t->dev + (rz_devptr_t)rows[i] * sizeof *up, up + i,
                                                     (j - i) * sizeof *up, s);
        if (r != RZCUDA_SUCCESS) {
            pthread_mutex_lock(&g_lock);
            t->epoch = 0;
            pthread_mutex_unlock(&g_lock);
            return r;
        }
        atomic_fetch_add_explicit(&g_row_copies, 1, memory_order_relaxed);
        i = j;
    }
    pthread_mutex_lock(&g_lock);
    t->n = n;
    t->synced = synced;
    pthread_mutex_unlock(&g_lock);
    return RZCUDA_SUCCESS;
}

void rz__changed_rows_bind(rz_changed_table_t *t, uint64_t epoch, uint64_t synced) {
    pthread_mutex_lock(&g_lock);
    t->epoch = epoch;
    t->synced = synced;
    pthread_mutex_unlock(&g_lock);
}

void rz__changed_rows_unlock(rz_changed_table_t *t) { pthread_mutex_unlock(&t->qlock); }

uint64_t rz__changed_row_copies(void) { return atomic_load_explicit(&g_row_copies, memory_order_relaxed); }

void rz__changed_area_release(rz_changed_area_t *a, int completed) {
    if (a == NULL)
        return;
    pthread_mutex_lock(&g_lock);
    if (!completed) { /* its counters may have moved without this host copy seeing it: zeroed again */
        a->cleared = 0;
        a->base_count = a->base_bytes = 0;
    }
    a->busy = 0;
    pthread_mutex_unlock(&g_lock);
}

void rz__changed_forget(void *ctx) {
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_nctx; i++) {
        struct kctx *k = g_ctx[i];
        if (k->ctx != ctx)
            continue;
        /* The device memory and the module went with the context; the page-locked host memory is the
         * process's (its registration ended with the context): unmapped where no check holds it. One a
         * check still holds (it failed or completed with the context, nothing reads it again) stays, with
         * its slot, which is no longer found. */
        int held = 0;
        for (int t = 0; t < TABLES; t++) {
            rz_changed_table_t *tb = &k->tables[t];
            if (tb->users == 0 && tb->host) {
                munmap(tb->host, page_round(tb->cap * sizeof *tb->host));
                tb->host = NULL;
            }
            held |= tb->users != 0;
        }
        for (int a = 0; a < AREAS; a++) {
            rz_changed_area_t *ar = &k->areas[a];
            if (!ar->busy && ar->host) {
                munmap(ar->host, AREA_PAGES);
                ar->host = NULL;
            }
            held |= ar->busy;
        }
        g_ctx[i] = g_ctx[--g_nctx];
        if (held)
            k->ctx = NULL; /* kept: its holders release into it */
        else
            free(k);
        break;
    }
    pthread_mutex_unlock(&g_lock);
}
