/*
 * Judging launch checks (METRALE_REDZONE_SCAN=launch, launch_check.c queues them): a band a check saw
 * changed is reported through the band engine's judge (the REDZONE VIOLATION line, byte for byte as a scan
 * prints it, the allocation stack, the counters, the debugger's __redzone_violation), with the launch named
 * on the lines after it instead of the list of candidate kernels:
 *
 *   written by kernel <name> (launch #<n>, grid XxYxZ, block XxYxZ, stream 0x<s>), launched at:
 *       #0 0x... in <function>+0x.. (<object>)
 *   other streams' launches in flight then, which may have written it instead: launch #<m> <name> (stream 0x<t>)
 *
 * Why records: a host function may make no driver call, so a reported band is written back later, by the
 * next program thread that enters the library (a launch, a synchronisation, a scan). Until then every later
 * check still sees the same changed bytes, and a check whose copy was queued before the write-back may see
 * them after it: neither is a new write. Each report keeps the changed bytes and, once written back, the
 * begin counter then; a band keeps several (checks complete out of order across streams, so one queued
 * before an older write-back may be judged after a newer report). A check whose copy may come before a
 * record's write-back (begun before it, or not written back yet), or that overlapped a launch of another
 * stream begun before it (whose kernel may write the same bytes again after it), and that sees only bytes of
 * that record saw the reported write. A copy may also overlap the writing kernel (another stream's) and see
 * part of a write: a later view that agrees with the record where both changed and shows more is that write
 * seen further on, noted on one line (no second violation):
 *
 *   redzone: more of alloc#<n>'s reported write seen by launch #<m>: bytes [a..=b] past the end (k of P pad
 *   bytes changed)
 *
 * So that no write is erased or split, a band is written back only once the other streams' launches in
 * flight when it was seen have completed (their kernels are done), and only while a read right before shows
 * nothing but reported bytes (a newer write is left for a check to report).
 * A scan's or free-time check's reports are recorded too (their write-back time is known once the scan is
 * over), so a launch check does not report again what they reported.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "launch_attribution.h"
#include "band_io.h"
#include "check_changed.h"
#include "launch_rows.h"
#include "quarantine.h"
#include "format.h"
#include "judge.h"
#include "launch_check.h"
#include "options.h"
#include "registry.h"
#include "report.h"
#include "state.h"
#include "stats.h"
#include "sticky.h"
#include "sticky_said.h"
#include "symbolize.h"
#include "thread_state.h"

#define RECORDS 64
#define REFILLED_BY_SCAN UINT64_MAX /* written back by a scan that may still be running */

struct record {
    int used;
    uint8_t front;
    uint8_t *content; /* the changed band as reported */
    uint32_t bytes;
    uint64_t index;
    uint64_t ptr;         /* the zone's user pointer */
    uint64_t refilled_at; /* 0: not written back yet; else the begin counter when it was */
    uint64_t hold;        /* not written back while a launch begun at or before this is in flight (0: none) */
    uint64_t age;
};

/* launch_check.c's counters (rz__attrib_arm); before it, no launch was begun that attribution can know of. */
static _Atomic(const rz_launch_counts_t *) g_counts;

void rz__attrib_arm(const rz_launch_counts_t *counts) {
    atomic_store_explicit(&g_counts, counts, memory_order_release);
}

static uint64_t launch_begun(void) {
    const rz_launch_counts_t *c = atomic_load_explicit(&g_counts, memory_order_acquire);
    return c ? c->begun() : 0;
}

static uint64_t launch_oldest_in_flight(void) {
    const rz_launch_counts_t *c = atomic_load_explicit(&g_counts, memory_order_acquire);
    return c ? c->oldest_in_flight() : 1;
}

static uint64_t launch_oldest_unjudged(void) {
    const rz_launch_counts_t *c = atomic_load_explicit(&g_counts, memory_order_acquire);
    return c ? c->oldest_unjudged() : 1;
}

static struct record g_rec[RECORDS]; /* registry lock held */
static uint64_t g_age;
static _Atomic int g_refill_wanted;
#define t_judging (rz__thread.judging) /* the check being judged on this thread (its report names it; thread_state.h) */

int rz__attrib_refill_wanted(void) { return atomic_load_explicit(&g_refill_wanted, memory_order_relaxed); }

static void rec_clear(struct record *r) {
    free(r->content);
    memset(r, 0, sizeof *r);
}

/* A slot for a new record: a free one, else one no check can still need (written back before every check
 * not judged yet began), else the oldest written back, else the oldest. */
static struct record *rec_slot(uint64_t oldest) {
    for (int i = 0; i < RECORDS; i++)
        if (!g_rec[i].used)
            return &g_rec[i];
    struct record *best = NULL;
    for (int i = 0; i < RECORDS; i++) {
        struct record *r = &g_rec[i];
        if (r->refilled_at != 0 && r->refilled_at != REFILLED_BY_SCAN && r->refilled_at <= oldest) {
            best = r;
            break;
        }
        int done = r->refilled_at != 0;
        if (best == NULL || (done && best->refilled_at == 0) ||
            (done == (best->refilled_at != 0) && r->age < best->age))
            best = r;
    }
    rec_clear(best);
    return best;
}

/* Record a reported band (refilled_at: 0, or REFILLED_BY_SCAN); oldest: launch_oldest_unjudged() or
 * below. */
static void rec_add(uint64_t index, uint64_t ptr, int front, const uint8_t *band, uint64_t bytes,
                    uint64_t refilled_at, uint64_t oldest, uint64_t hold) {
    uint8_t *copy = bytes <= UINT32_MAX ? malloc(bytes ? bytes : 1) : NULL;
    if (copy == NULL)
        return; /* no memory: this band may be reported again */
    memcpy(copy, band, bytes);
    struct record *r = NULL;
    for (int i = 0; i < RECORDS && r == NULL; i++)
        if (g_rec[i].used && g_rec[i].index == index && g_rec[i].front == front && g_rec[i].bytes == bytes &&
            memcmp(g_rec[i].content, band, bytes) == 0)
            r = &g_rec[i]; /* the same bytes reported again (a new write of them): one record */
    if (r)
        rec_clear(r);
    else
        r = rec_slot(oldest);
    *r = (struct record){.used = 1, .front = (uint8_t)front, .content = copy, .bytes = (uint32_t)bytes,
                         .index = index, .ptr = ptr, .refilled_at = refilled_at, .hold = hold, .age = ++g_age};
    if (refilled_at == 0)
        atomic_store_explicit(&g_refill_wanted, 1, memory_order_relaxed);
}

enum seen { SEEN_NEW, SEEN_BEFORE, SEEN_MORE };

/* How a band as a check saw it relates to what r reported, when the check's copy may have come before r's
 * write-back: only bytes r reported, as it reported them (that write, seen again or in part); those and
 * more, agreeing where both changed (that write seen further on); else a new write. */
static enum seen relate(const struct record *r, const uint8_t *band, uint32_t bytes, uint8_t expected) {
    if (r->bytes != bytes)
        return SEEN_NEW;
    int more = 0;
    for (uint32_t i = 0; i < bytes; i++) {
        if (band[i] == expected)
            continue;
        if (r->content[i] == expected)
            more = 1;
        else if (r->content[i] != band[i])
            return SEEN_NEW;
    }
    return more ? SEEN_MORE : SEEN_BEFORE;
}

/* Whether a check of a launch begun at `begin` may have copied the band before r was written back. */
static int copied_before(const struct record *r, uint64_t begin) {
    return r->refilled_at == 0 || r->refilled_at == REFILLED_BY_SCAN || begin < r->refilled_at;
}

/* The band of zone `index` (front or not) as a copy saw it: SEEN_BEFORE when a record covers it; else
 * SEEN_MORE with *more the record it extends (one sharing a changed byte with it); else SEEN_NEW. begin: the
 * begin counter of the earliest launch whose writes the copy may show (a check's own launch, or a launch of
 * another stream still running then: a kernel made before a write-back may write again after it); any_time:
 * the copy may come before every write-back (free-time checks). */
static enum seen seen_before(uint64_t index, int front, uint64_t begin, int any_time, const uint8_t *band,
                             uint32_t bytes, uint8_t expected, struct record **more) {
    enum seen seen = SEEN_NEW;
    for (int i = 0; i < RECORDS; i++) {
        struct record *r = &g_rec[i];
        if (!r->used || r->index != index || r->front != front || (!any_time && !copied_before(r, begin)))
            continue;
        enum seen how = relate(r, band, bytes, expected);
        if (how == SEEN_BEFORE)
            return SEEN_BEFORE;
        if (how == SEEN_MORE && seen == SEEN_NEW) {
            int shared = 0;
            for (uint32_t k = 0; k < bytes && !shared; k++)
                shared = band[k] != expected && r->content[k] == band[k];
            if (shared) {
                seen = SEEN_MORE;
                *more = r;
            }
        }
    }
    return seen;
}

/* The same write, seen further on: the record grows to it (and is written back again, the new bytes with it),
 * and one line says so. */
static void note_more(struct record *r, const uint8_t *band, const rz_band_meta_t *m, const char *by,
                      uint64_t hold) {
    for (uint32_t i = 0; i < r->bytes; i++)
        if (band[i] != m->expected)
            r->content[i] = band[i];
    r->refilled_at = 0;
    r->hold = hold > r->hold ? hold : r->hold;
    atomic_store_explicit(&g_refill_wanted, 1, memory_order_relaxed);
    rz_zone_node_t n = {.ptr = m->ptr, .user_bytes = m->user_bytes, .index = m->index, .expected = m->expected};
    rz_violation_t v;
    if (!rz__band_violation(&n, r->content, r->bytes, r->front, &v))
        return;
    rz__log("redzone: more of alloc#%llu's reported write seen %s: bytes [%s%llu..=%s%llu] %s (%llu of %llu %s bytes "
            "changed)",
            (unsigned long long)v.index, by, v.front ? "-" : "", (unsigned long long)v.first, v.front ? "-" : "",
            (unsigned long long)v.last, v.front ? "before the start" : "past the end", (unsigned long long)v.changed,
            (unsigned long long)v.pad_bytes, v.front ? "front" : "pad");
}

static int band_clean(const uint8_t *b, uint32_t bytes, uint8_t expected) {
    return bytes == 0 || (b[0] == expected && memcmp(b, b + 1, bytes - 1) == 0);
}

static int only_band_or_free_byte(const uint8_t *b, uint32_t bytes, uint8_t expected) {
    uint8_t freed = rz__quarantine_byte();
    for (uint32_t i = 0; i < bytes; i++)
        if (b[i] != expected && b[i] != freed)
            return 0;
    return 1;
}

/* One band of check c's layout (m) that its copy or the device saw changed (band: its bytes then). */
static void judge_band(rz_check_t *c, const rz_band_meta_t *m, const uint8_t *band) {
    rz_zone_node_t *z = rz__registry_find(m->ptr);
    int live = z != NULL && z->index == m->index;
    /* Freed since the launch: a stream-ordered free may have run before the copy (its own check judges
     * the band, in the freeing stream's order); cuMemFree waits for the device, so the copy came first. */
    if (!live && (m->flags & RZ_ZONE_STREAM_ORDERED))
        return;
    /* Freed since the check was queued and held in the quarantine: its fill with the free byte runs in the
     * legacy stream's order (cuMemFree), which a non-blocking stream's check does not follow, so the check
     * may see it; bytes that are all the band's or the free byte are that fill, not a write (a write the fill
     * overtook is erased by it: seen only by a free-time check, SCAN=free, which reads the band first). */
    if (!live && rz__options()->quarantine && only_band_or_free_byte(band, m->bytes, m->expected))
        return;
    /* Re-filled by a poison window since the layout was made: the copy may have raced with the fill. */
    if (live && (!rz__zone_watched(z) || z->expected != m->expected))
        return;
    struct record *more = NULL;
    uint64_t since = c->overlap_begin && c->overlap_begin < c->begin ? c->overlap_begin : c->begin;
    enum seen seen = seen_before(m->index, m->front, since, 0, band, m->bytes, m->expected, &more);
    if (seen == SEEN_BEFORE)
        return;
    if (seen == SEEN_MORE) {
        char by[48];
        snprintf(by, sizeof by, "by launch #%llu", (unsigned long long)c->launch);
        note_more(more, band, m, by, c->overlap_last);
        return;
    }
    uint64_t oldest = launch_oldest_unjudged();
    rec_add(m->index, m->ptr, m->front, band, m->bytes, 0, oldest < c->begin ? oldest : c->begin, c->overlap_last);
    rz_zone_node_t gone = {.ptr = m->ptr, .user_bytes = m->user_bytes, .index = m->index, .ctx = c->ctx,
                           .pad_bytes = m->pad_bytes, .expected = m->expected, .front_units = m->front_units};
    rz_zone_node_t *node = live ? z : &gone;
    t_judging = c;
    if (m->front)
        rz__band_judge_front(node, band);
    else
        rz__band_judge(node, band);
    t_judging = NULL;
    if (live)
        z->flags |= RZ_ZONE_VIOLATED;
}

void rz__attrib_judge_locked(rz_check_t *c) {
    const rz_layout_t *l = c->layout;
    if (c->area) {
        /* Compared on the device: only the bands that changed came back. One whose bytes did not fit is
         * still changed on the device, so a later check (or scan) reports it. */
        rz_changed_band_t changed[RZ_CHANGED_CAP];
        uint32_t n = rz__changed_result(c->area, changed);
        for (uint32_t k = 0; k < n && k < RZ_CHANGED_CAP; k++) {
            uint32_t pos = changed[k].pos;
            /* A table kept in step with rows: their descriptions (rows are reused only once the checks
             * queued before their zone's free are judged); numbered afresh since: not judged (above). */
            const rz_band_meta_t *m = c->rows ? rz__rows_meta_locked(c->rows, c->rows_epoch, pos)
                                              : l && pos < l->n ? &l->meta[pos] : NULL;
            if (m && changed[k].bytes != NULL && !band_clean(changed[k].bytes, m->bytes, m->expected))
                judge_band(c, m, changed[k].bytes);
        }
        return;
    }
    const uint8_t *base = c->st->p;
    for (size_t i = 0; i < l->n; i++) {
        const rz_band_meta_t *m = &l->meta[i];
        const uint8_t *band = base + l->offs[i];
        if (RZ_LIKELY(band_clean(band, m->bytes, m->expected)))
            continue;
        judge_band(c, m, band);
    }
}

static const char *kind_word(rz_launch_kind_t kind) {
    return kind == RZ_LAUNCH_COOPERATIVE ? "cooperative kernel " : kind == RZ_LAUNCH_GRAPH ? "" : "kernel ";
}

/* The overlap line: other streams' launches that may have written the band instead. */
static void log_overlaps(const rz_check_t *c) {
    if (c->noverlap == 0)
        return;
    char line[1024];
    size_t n = (size_t)snprintf(line, sizeof line,
                                "  other streams' launches in flight then, which may have written it instead:");
    for (uint32_t i = 0; i < c->noverlap && n < sizeof line; i++) {
        const rz_overlap_t *o = &c->overlap[i];
        int w = o->launch
                    ? snprintf(line + n, sizeof line - n, "%s launch #%llu %s (stream 0x%llx)", i ? "," : "",
                               (unsigned long long)o->launch, o->name, (unsigned long long)(uintptr_t)o->stream)
                    : snprintf(line + n, sizeof line - n, "%s a launch still being made (stream 0x%llx)", i ? "," : "",
                               (unsigned long long)(uintptr_t)o->stream);
        n += w > 0 ? (size_t)w : 0;
    }
    if (c->overlap_more && n < sizeof line)
        snprintf(line + n, sizeof line - n, " and %u more", c->overlap_more);
    rz__log("%s", line);
}

int rz__attrib_report(const rz_zone_node_t *z, const uint8_t *band, uint64_t bytes, int front) {
    const rz_check_t *c = t_judging;
    if (c == NULL) {
        /* A scan or a free-time check reported it and writes it back itself: launch checks in flight whose
         * copy came before that must not report it again. */
        if (rz__options()->scan & RZ_SCAN_LAUNCH)
            rec_add(z->index, z->ptr, front, band, bytes, REFILLED_BY_SCAN, launch_oldest_unjudged(), 0);
        return 0;
    }
    const char *tail = c->nframes ? ", launched at:" : "";
    if (c->kind == RZ_LAUNCH_GRAPH)
        rz__log("  written by graph launch (launch #%llu, graph 0x%llx, stream 0x%llx)%s", (unsigned long long)c->launch,
                (unsigned long long)(uintptr_t)c->graph, (unsigned long long)(uintptr_t)c->stream, tail);
    else
        rz__log("  written by %s%s (launch #%llu, grid %ux%ux%u, block %ux%ux%u, stream 0x%llx)%s", kind_word(c->kind),
                c->name, (unsigned long long)c->launch, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1],
                c->block[2], (unsigned long long)(uintptr_t)c->stream, tail);
    if (c->nframes)
        rz__symbolize_frames(c->frames, (int)c->nframes);
    log_overlaps(c);
    return 1;
}

const char *rz__attrib_writer(uint64_t *launch) {
    const rz_check_t *c = t_judging;
    if (c == NULL)
        return NULL;
    *launch = c->launch;
    return c->kind == RZ_LAUNCH_GRAPH ? "(graph launch)" : c->name;
}

int rz__attrib_freed_reported(const rz_zone_node_t *z, const uint8_t *band) {
    int reported = 0, fresh = 0;
    for (int front = 0; front <= (z->front_units ? 1 : 0); front++) {
        uint32_t bytes = front ? (uint32_t)rz__zone_front(z) : z->pad_bytes;
        const uint8_t *b = front ? band + z->pad_bytes : band;
        if (band_clean(b, bytes, z->expected))
            continue;
        struct record *more = NULL;
        enum seen seen = seen_before(z->index, front, 0, 1, b, bytes, z->expected, &more);
        if (seen == SEEN_MORE) {
            rz_band_meta_t m = {.ptr = z->ptr, .user_bytes = z->user_bytes, .index = z->index, .expected = z->expected};
            note_more(more, b, &m, "at its free", 0);
        }
        if (seen == SEEN_NEW)
            fresh = 1;
        else
            reported = 1;
    }
    /* The zone is gone, but checks copied before the free may still be judged (a free waits for the device,
     * not for the host functions that complete checks): its records stay, as written back now. */
    for (int i = 0; i < RECORDS; i++)
        if (g_rec[i].used && g_rec[i].index == z->index &&
            (g_rec[i].refilled_at == 0 || g_rec[i].refilled_at == REFILLED_BY_SCAN))
            g_rec[i].refilled_at = launch_begun() + 1;
    return reported && !fresh;
}

/* Whether r's band may still be being written by a launch of another stream that was in flight when a check
 * saw it changed (a copy can see part of a write): its write-back waits until every such launch's check
 * completed, that is, its kernel is done. flying: launch_oldest_in_flight(). */
static int band_held(const struct record *r, uint64_t flying) {
    for (int i = 0; i < RECORDS; i++) {
        const struct record *q = &g_rec[i];
        if (q->used && q->refilled_at == 0 && q->index == r->index && q->front == r->front && q->hold &&
            flying <= q->hold)
            return 1;
    }
    return 0;
}

/* Read the n bands about to be written back; changed[i] = 1 where band i holds bytes no record of it (not
 * written back) covers. Returns whether any did. A band that cannot be read is written back as before. */
static int changed_since_reported(const rz_band_io_t *io, struct record *const *of, size_t n, uint8_t *changed) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += io[i].bytes;
    uint8_t *buf = malloc(total ? total : 1);
    if (buf == NULL)
        return 0;
    rz_band_io_t rd[RECORDS];
    for (size_t i = 0, at = 0; i < n; at += io[i].bytes, i++)
        rd[i] = (rz_band_io_t){.ctx = io[i].ctx, .dev = io[i].dev, .host = buf + at, .bytes = io[i].bytes,
                               .value = io[i].value, .front = io[i].front};
    rz__dev_read(rd, n);
    int any = 0;
    for (size_t i = 0; i < n; i++) {
        if (rd[i].failed || band_clean(rd[i].host, rd[i].bytes, rd[i].value))
            continue;
        int covered = 0;
        for (int k = 0; k < RECORDS && !covered; k++) {
            const struct record *q = &g_rec[k];
            covered = q->used && q->refilled_at == 0 && q->index == of[i]->index && q->front == of[i]->front &&
                      relate(q, rd[i].host, rd[i].bytes, rd[i].value) == SEEN_BEFORE;
        }
        changed[i] = !covered;
        any |= changed[i];
    }
    free(buf);
    return any;
}

void rz__attrib_refill_locked(void) {
    if (!atomic_load_explicit(&g_refill_wanted, memory_order_relaxed)) {
        /* Records a scan wrote back: it is over (this thread holds the lock outside it). */
        for (int i = 0; i < RECORDS; i++)
            if (g_rec[i].used && g_rec[i].refilled_at == REFILLED_BY_SCAN)
                g_rec[i].refilled_at = launch_begun() + 1;
        return;
    }
    atomic_store_explicit(&g_refill_wanted, 0, memory_order_relaxed);
    rz_band_io_t io[RECORDS];
    struct record *of[RECORDS];
    size_t n = 0;
    uint64_t flying = launch_oldest_in_flight();
    int held = 0;
    for (int i = 0; i < RECORDS; i++) {
        struct record *r = &g_rec[i];
        if (!r->used)
            continue;
        if (r->refilled_at == REFILLED_BY_SCAN) {
            r->refilled_at = launch_begun() + 1;
            continue;
        }
        if (r->refilled_at != 0)
            continue;
        if (band_held(r, flying)) {
            held = 1; /* asked again at the next entry into the library */
            continue;
        }
        size_t same = 0;
        while (same < n && !(of[same]->index == r->index && of[same]->front == r->front))
            same++;
        if (same < n)
            continue; /* another record of a band already taken: written back once (below) */
        rz_zone_node_t *z = rz__registry_find(r->ptr);
        if (z == NULL || z->index != r->index || !rz__zone_watched(z)) {
            /* Freed (or being freed: its free-time check, still to come, must find the record): nothing to
             * write back. */
            r->refilled_at = launch_begun() + 1;
            continue;
        }
        uint64_t size = r->front ? rz__zone_front(z) : z->pad_bytes;
        io[n] = (rz_band_io_t){.ctx = z->ctx, .dev = r->front ? z->ptr - size : z->ptr + z->user_bytes,
                               .bytes = size, .value = z->expected, .front = r->front};
        of[n++] = r;
    }
    if (n == 0) {
        if (held)
            atomic_store_explicit(&g_refill_wanted, 1, memory_order_relaxed);
        return;
    }
    /* Only a band that still holds what was reported is written back: a write made since (by a kernel of the
     * same program, say the same overrun with other bytes) must first be seen by a check, not erased. */
    uint8_t changed[RECORDS] = {0};
    if (changed_since_reported(io, of, n, changed))
        held = 1;
    rz_band_io_t writes[RECORDS];
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!changed[i])
            writes[m++] = io[i];
    rzcu_result e = m ? rz__dev_write(writes, m) : RZCUDA_SUCCESS;
    for (size_t i = 0, j = 0; i < n; i++)
        if (!changed[i])
            io[i].failed = writes[j++].failed;
    if (held)
        atomic_store_explicit(&g_refill_wanted, 1, memory_order_relaxed);
    /* Launches begun from now on are copied after the write-back. */
    uint64_t now = launch_begun() + 1;
    for (int k = 0; k < RECORDS; k++) {
        struct record *r = &g_rec[k];
        if (!r->used || r->refilled_at != 0 || band_held(r, flying))
            continue;
        size_t i = 0;
        while (i < n && !(of[i]->index == r->index && of[i]->front == r->front))
            i++;
        if (i < n && changed[i])
            continue; /* written again since: left for a check to see */
        if (i == n || io[i].failed)
            rec_clear(r); /* not written back: reported again if seen again */
        else
            r->refilled_at = now;
    }
    for (size_t i = 0; i < n; i++)
        if (!changed[i] && !io[i].failed)
            rz__record_page_reset(io[i].bytes);
    if (e != RZCUDA_SUCCESS && !rz__sticky_failed(e, 0))
        rz__warn("launch checks: writing back %zu reported bands failed with %s", n, rz__cu_name(e));
}

void rz__attrib_forget_ctx(void *ctx) {
    (void)ctx; /* records name zones by creation index and pointer: a context's zones are gone with it */
    for (int i = 0; i < RECORDS; i++)
        if (g_rec[i].used && rz__registry_find(g_rec[i].ptr) == NULL)
            rec_clear(&g_rec[i]);
}
