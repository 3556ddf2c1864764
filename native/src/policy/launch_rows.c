/*
 * Launch checks compared on the device, kept in step with the registry (METRALE_REDZONE_SCAN=launch): every
 * installed band of a context is a row (its descriptor for the check kernel and what the judge needs), and
 * the rows change at each allocation and free (the registry's observer), so the first launch after an
 * allocation or a free uploads the rows that changed (check_changed.c: a few 16-byte copies on the launch's
 * stream, ahead of its check), not a table of every band. A launch costs no walk over the zones.
 *
 * A new zone waits (a list of pointers) until a launch finds its band ready (installed: lazy install; its
 * stream-ordered fill done; watched, not graph memory), then gets a row: a row freed earlier, or a new one at
 * the end. A freed zone's rows become tombstones at once (size 0: the kernel reads nothing there), uploaded by
 * the next check of each stream before its kernel. A tombstone keeps its zone's description and is reused
 * only once every check begun before the free has been judged: a check judges the rows it was queued with.
 * Each change is noted in a change log (a ring of row numbers); a table that is more than the log behind,
 * or more than RZ_CHANGED_ROWS rows behind, is uploaded whole, as is a table of an earlier epoch: the rows
 * are numbered afresh (an epoch) when the registry changed without the observer (before it was set, a failed
 * allocation here) or a poison window moved, from one walk of the registry. Checks of an older epoch are not
 * judged (their bands are still changed on the device: the next check reports them).
 *
 * Everything here runs under the registry lock: the observer's calls, the launch's look at the rows, and
 * the judge's reading of a row's description.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "launch_rows.h"
#include "check_changed.h"
#include "registry.h"
#include "state.h"
#include "stream_fills.h"

#define MAX_STORES 16
#define LOG_CAP 4096u /* a power of two */
#define NONE UINT32_MAX

struct rz_rows {
    void *ctx;             /* NULL: a free slot (its context ended) */
    uint64_t epoch;
    uint32_t n, cap, live; /* rows (the high-water mark), allocated, not tombstones */
    rz_check_desc_t *desc;
    rz_band_meta_t *meta;
    uint64_t *freed_at;    /* a tombstone's: launches begun when its zone was freed */
    uint32_t *freeq;       /* tombstones to reuse, oldest first (a ring of cap entries) */
    uint32_t fq_head, fq_len;
    uint64_t log_end;      /* changes made (the next one's position) */
    uint32_t log[LOG_CAP];
};

/* A zone of the registry: its rows (NONE: none yet) in the store of its context at that store's epoch. */
struct entry {
    uint64_t ptr; /* 0: empty */
    uint64_t index;
    struct rz_rows *rows;
    uint64_t epoch;
    uint32_t back, front;
};

struct waiting {
    uint64_t ptr, index;
};

static const rz_launch_counts_t *g_counts;
static int g_built; /* the map holds every zone of the registry */
static uint64_t g_epochs;
static struct rz_rows *g_stores[MAX_STORES];
static struct entry *g_map; /* open addressing, linear probing, kept under half full */
static size_t g_mask, g_count;
static struct waiting *g_wait;
static size_t g_nwait, g_wcap;
static uint8_t g_poison_active;
static uint64_t g_poison_lo, g_poison_hi;

static size_t slot_of(uint64_t ptr) { return (size_t)(((ptr >> 4) * UINT64_C(0x9E3779B97F4A7C15)) >> 20) & g_mask; }

static struct entry *map_get(uint64_t ptr) {
    if (g_map == NULL)
        return NULL;
    for (size_t i = slot_of(ptr);; i = (i + 1) & g_mask) {
        if (g_map[i].ptr == ptr)
            return &g_map[i];
        if (g_map[i].ptr == 0)
            return NULL;
    }
}

static int map_grow(void) {
    size_t cap = g_map ? 2 * (g_mask + 1) : 1024;
    struct entry *m = calloc(cap, sizeof *m), *old = g_map;
    if (m == NULL)
        return 0;
    size_t old_cap = g_map ? g_mask + 1 : 0;
    g_map = m;
    g_mask = cap - 1;
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i].ptr == 0)
            continue;
        size_t j = slot_of(old[i].ptr);
        while (g_map[j].ptr)
            j = (j + 1) & g_mask;
        g_map[j] = old[i];
    }
    free(old);
    return 1;
}

static struct entry *map_put(uint64_t ptr, uint64_t index) {
    if ((g_count + 1) * 2 > (g_map ? g_mask + 1 : 0) && !map_grow())
        return NULL;
    size_t i = slot_of(ptr);
    while (g_map[i].ptr && g_map[i].ptr != ptr)
        i = (i + 1) & g_mask;
    if (g_map[i].ptr == 0)
        g_count++;
    g_map[i] = (struct entry){.ptr = ptr, .index = index, .back = NONE, .front = NONE};
    return &g_map[i];
}

/* Backward-shift deletion: no tombstones in the map. */
static void map_del(struct entry *e) {
    size_t i = (size_t)(e - g_map);
    for (size_t j = (i + 1) & g_mask; g_map[j].ptr; j = (j + 1) & g_mask) {
        size_t home = slot_of(g_map[j].ptr);
        if (((j - home) & g_mask) >= ((j - i) & g_mask)) { /* j's home is not between i and j: it may move to i */
            g_map[i] = g_map[j];
            i = j;
        }
    }
    g_map[i].ptr = 0;
    g_count--;
}

static int wait_push(uint64_t ptr, uint64_t index) {
    if (g_nwait == g_wcap) {
        size_t cap = g_wcap ? 2 * g_wcap : 256;
        struct waiting *w = realloc(g_wait, cap * sizeof *w);
        if (w == NULL)
            return 0;
        g_wait = w;
        g_wcap = cap;
    }
    g_wait[g_nwait++] = (struct waiting){ptr, index};
    return 1;
}

static void log_push(struct rz_rows *r, uint32_t row) { r->log[r->log_end++ & (LOG_CAP - 1)] = row; }

static void tombstone(struct rz_rows *r, uint32_t row) {
    if (row == NONE || row >= r->n)
        return;
    r->desc[row] = (rz_check_desc_t){0};
    r->freed_at[row] = g_counts->begun();
    r->freeq[(r->fq_head + r->fq_len++) % r->cap] = row;
    r->live--;
    log_push(r, row);
}

static void observe(const rz_zone_node_t *z, int added) {
    if (!g_built)
        return; /* the next launch walks the registry */
    if (z == NULL) {
        g_built = 0;
        return;
    }
    if (added) {
        if (map_put(z->ptr, z->index) == NULL || !wait_push(z->ptr, z->index))
            g_built = 0; /* out of memory: numbered afresh at the next launch */
        return;
    }
    struct entry *e = map_get(z->ptr);
    if (e == NULL || e->index != z->index)
        return;
    if (e->rows && e->rows->ctx && e->epoch == e->rows->epoch) {
        tombstone(e->rows, e->back);
        tombstone(e->rows, e->front);
    }
    map_del(e);
}

void rz__rows_arm(const rz_launch_counts_t *counts) { g_counts = counts; }

static struct rz_rows *store_of(void *ctx) {
    struct rz_rows *spare = NULL;
    for (int i = 0; i < MAX_STORES; i++) {
        if (g_stores[i] && g_stores[i]->ctx == ctx)
            return g_stores[i];
        if (spare == NULL && (g_stores[i] == NULL || g_stores[i]->ctx == NULL))
            spare = g_stores[i] ? g_stores[i] : (g_stores[i] = calloc(1, sizeof *spare));
    }
    if (spare) { /* a slot's store is never freed: checks in flight may point at it (another epoch then) */
        spare->ctx = ctx;
        spare->epoch = ++g_epochs;
        spare->n = spare->live = spare->fq_head = spare->fq_len = 0;
    }
    return spare;
}

static int grow_rows(struct rz_rows *r) {
    uint32_t cap = r->cap ? 2 * r->cap : 1024;
    rz_check_desc_t *d = realloc(r->desc, cap * sizeof *d);
    if (d)
        r->desc = d;
    rz_band_meta_t *m = d ? realloc(r->meta, cap * sizeof *m) : NULL;
    if (m)
        r->meta = m;
    uint64_t *f = m ? realloc(r->freed_at, cap * sizeof *f) : NULL;
    if (f)
        r->freed_at = f;
    uint32_t *q = f ? malloc(cap * sizeof *q) : NULL;
    if (q == NULL)
        return 0;
    for (uint32_t i = 0; i < r->fq_len; i++)
        q[i] = r->freeq[(r->fq_head + i) % r->cap];
    free(r->freeq);
    r->freeq = q;
    r->fq_head = 0;
    r->cap = cap;
    return 1;
}

/* A row for a band: the oldest tombstone no unjudged check can still name, or a new one. */
static uint32_t take_row(struct rz_rows *r, uint64_t *oldest) {
    if (r->fq_len) {
        uint32_t row = r->freeq[r->fq_head];
        if (*oldest == 0)
            *oldest = g_counts->oldest_unjudged();
        if (r->freed_at[row] < *oldest) {
            r->fq_head = (r->fq_head + 1) % r->cap;
            r->fq_len--;
            return row;
        }
    }
    return r->n++; /* room made by the caller */
}

static void set_row(struct rz_rows *r, uint32_t row, const rz_zone_node_t *z, int front) {
    uint64_t size = front ? rz__zone_front(z) : z->pad_bytes;
    uint64_t band = front ? z->ptr - size : z->ptr + z->user_bytes;
    r->desc[row] = (rz_check_desc_t){.band = band, .bytes = (uint32_t)size, .expected = z->expected};
    r->meta[row] = (rz_band_meta_t){.ptr = z->ptr, .user_bytes = z->user_bytes, .index = z->index,
                                    .bytes = (uint32_t)size, .pad_bytes = z->pad_bytes,
                                    .front_units = z->front_units, .expected = z->expected,
                                    .front = (uint8_t)front, .flags = z->flags};
    r->freed_at[row] = 0;
    r->live++;
    log_push(r, row);
}

/* The waiting zones whose bands are ready get their rows; those that never will be leave the list. */
static void resolve_waiting(void) {
    uint64_t oldest = 0;
    size_t k = 0;
    for (size_t i = 0; i < g_nwait; i++) {
        struct waiting w = g_wait[i];
        struct entry *e = map_get(w.ptr);
        rz_zone_node_t *z = e && e->index == w.index && e->rows == NULL ? rz__registry_find(w.ptr) : NULL;
        if (z == NULL || z->index != w.index)
            continue; /* freed, or has its rows */
        if ((z->flags & RZ_ZONE_FILLING) && z->ctx && !rz__zone_filled(z)) {
            g_wait[k++] = w; /* its stream-ordered fill is still queued */
            continue;
        }
        if (z->flags & (RZ_ZONE_PENDING | RZ_ZONE_FILLING)) {
            g_wait[k++] = w; /* its band is not written yet */
            continue;
        }
        if (!rz__zone_watched(z) || (z->flags & RZ_ZONE_GRAPH) || z->ctx == NULL)
            continue; /* nothing a launch check can read */
        struct rz_rows *r = store_of(z->ctx);
        if (r == NULL || (r->n + 2 > r->cap && !grow_rows(r))) {
            g_wait[k++] = w; /* out of memory (or of stores): tried again at the next launch */
            continue;
        }
        uint32_t back = take_row(r, &oldest), front = z->front_units ? take_row(r, &oldest) : NONE;
        set_row(r, back, z, 0);
        if (front != NONE)
            set_row(r, front, z, 1);
        e->rows = r;
        e->epoch = r->epoch;
        e->back = back;
        e->front = front;
    }
    g_nwait = k;
}

/* Number every zone afresh: one walk of the registry. */
static void rebuild(void) {
    for (int i = 0; i < MAX_STORES; i++) {
        struct rz_rows *r = g_stores[i];
        if (r && r->ctx) {
            r->epoch = ++g_epochs;
            r->n = r->live = r->fq_head = r->fq_len = 0;
        }
    }
    if (g_map)
        memset(g_map, 0, (g_mask + 1) * sizeof *g_map);
    g_count = g_nwait = 0;
    g_built = 1;
    /* From here on every change comes through the observer (this walk under the same hold of the lock):
     * allocations and frees made before the first check on the device call nothing. */
    rz__registry_observe_locked(observe);
    for (rz_zone_node_t *z = rz__registry_first(); z && g_built; z = rz__registry_next(z))
        observe(z, 1);
    g_poison_active = RZ_STATE.poison_active;
    g_poison_lo = RZ_STATE.poison_lo;
    g_poison_hi = RZ_STATE.poison_hi;
}

struct rz_rows *rz__rows_sync_locked(void *ctx, int *none) {
    *none = 0;
    if (!g_built || g_count != rz__registry_count() || g_poison_active != RZ_STATE.poison_active ||
        g_poison_lo != RZ_STATE.poison_lo || g_poison_hi != RZ_STATE.poison_hi)
        rebuild();
    if (!g_built)
        return NULL;
    if (g_nwait)
        resolve_waiting();
    for (int i = 0; i < MAX_STORES; i++)
        if (g_stores[i] && g_stores[i]->ctx == ctx)
            return g_stores[i];
    *none = 1; /* no band of ctx was ever ready: a store is made with its first row */
    return NULL;
}

uint32_t rz__rows_live(const struct rz_rows *r) { return r->live; }
uint32_t rz__rows_n(const struct rz_rows *r) { return r->n; }
uint64_t rz__rows_epoch(const struct rz_rows *r) { return r->epoch; }
uint64_t rz__rows_log_end(const struct rz_rows *r) { return r->log_end; }

long rz__rows_changes_locked(const struct rz_rows *r, uint64_t epoch, uint64_t synced, size_t cap, uint32_t *rows,
                             rz_check_desc_t *descs, size_t max) {
    if (epoch != r->epoch || r->n > cap || synced > r->log_end || r->log_end - synced > LOG_CAP)
        return -1;
    size_t k = 0;
    for (uint64_t p = synced; p < r->log_end; p++) {
        uint32_t row = r->log[p & (LOG_CAP - 1)], at = (uint32_t)k;
        while (at > 0 && rows[at - 1] > row)
            at--; /* kept ascending: neighbouring rows go in one copy */
        if (at > 0 && rows[at - 1] == row)
            continue;
        if (k == max)
            return -1;
        memmove(rows + at + 1, rows + at, (k - at) * sizeof *rows);
        rows[at] = row;
        k++;
    }
    for (size_t i = 0; i < k; i++)
        descs[i] = r->desc[rows[i]];
    return (long)k;
}

rz_check_desc_t *rz__rows_copy_locked(const struct rz_rows *r) {
    rz_check_desc_t *d = malloc((r->n ? r->n : 1) * sizeof *d);
    if (d)
        memcpy(d, r->desc, r->n * sizeof *d);
    return d;
}

const rz_band_meta_t *rz__rows_meta_locked(const struct rz_rows *r, uint64_t epoch, uint32_t pos) {
    return r && r->ctx && r->epoch == epoch && pos < r->n ? &r->meta[pos] : NULL;
}

void rz__rows_forget_locked(void *ctx) {
    for (int i = 0; i < MAX_STORES; i++) {
        struct rz_rows *r = g_stores[i];
        if (r && r->ctx == ctx) {
            r->ctx = NULL;
            r->epoch = ++g_epochs; /* its zones' entries and the checks naming it see another epoch */
        }
    }
}

static void fill_whole(rz_check_desc_t *d, size_t n, const void *arg) { memcpy(d, arg, n * sizeof *d); }

/*
 * Queue check c on stream s against a table kept in step with the rows of its context (the path of every
 * launch where the check kernel runs): the rows changed since that table's stream last saw them are
 * uploaded, then the kernel and the copy back (check_changed.c). area_for gives the check a result area
 * (waiting for the context's work when every area is held). 1: handled (*q the result of queueing), 0: the
 * caller builds a layout instead, -1: no band in this context (nothing to check).
 */
int rz__rows_queue(rz_check_t *c, rzcu_stream s, rz_changed_area_t *(*area_for)(void *ctx), rzcu_result *q) {
    uint64_t t_epoch = 0, t_synced = 0;
    size_t t_cap = 0;
    rz_changed_table_t *t = rz__changed_rows_take(c->ctx, c->skey, &t_epoch, &t_synced, &t_cap);
    uint32_t rows[RZ_CHANGED_ROWS];
    rz_check_desc_t descs[RZ_CHANGED_ROWS];
    rz__registry_lock();
    int none;
    struct rz_rows *r = rz__rows_sync_locked(c->ctx, &none);
    if (r == NULL || r->live == 0) {
        rz__registry_unlock();
        if (t) {
            rz__changed_rows_unlock(t);
            rz__changed_table_release(t, 1);
        }
        return r || none ? -1 : 0;
    }
    long k = t ? rz__rows_changes_locked(r, t_epoch, t_synced, t_cap, rows, descs, RZ_CHANGED_ROWS) : -1;
    uint64_t epoch = r->epoch, end = r->log_end;
    size_t n = r->n;
    rz_check_desc_t *whole = k < 0 ? rz__rows_copy_locked(r) : NULL;
    rz__registry_unlock();
    c->rows = r;
    c->rows_epoch = epoch;
    if (k >= 0) {
        c->tab = t;
        c->area = area_for(c->ctx);
        *q = c->area ? rz__changed_rows_update(t, c->area, rows, descs, (size_t)k, n, end, s) : RZCUDA_SUCCESS;
        if (c->area && *q == RZCUDA_SUCCESS)
            *q = rz__changed_queue(t, c->area, n, s);
        rz__changed_rows_unlock(t);
        if (c->area)
            return 1;
        rz__changed_table_release(t, 1);
        c->tab = NULL;
        c->rows = NULL;
        return 0;
    }
    if (t) {
        rz__changed_rows_unlock(t);
        rz__changed_table_release(t, 1);
    }
    if (whole == NULL) {
        c->rows = NULL;
        return 0;
    }
    c->tab = rz__changed_table(c->ctx, 0, n, fill_whole, whole, s, c->skey);
    free(whole);
    c->area = c->tab ? area_for(c->ctx) : NULL;
    if (c->area == NULL) {
        rz__changed_table_release(c->tab, 0);
        c->tab = NULL;
        c->rows = NULL;
        return 0;
    }
    rz__changed_rows_bind(c->tab, epoch, end);
    *q = rz__changed_queue(c->tab, c->area, n, s);
    return 1;
}
