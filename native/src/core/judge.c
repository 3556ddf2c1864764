/*
 * The judge's verdict, reported: one band read back is compared with the byte its zone expects (the pure
 * judge, rz__band_violation in format.c, shared with the gdb plugin), and a violation gets its report line,
 * the zone's allocation stack, the kernels that may have written it, the counters, the state block's record
 * and the __redzone_violation hook a debugger breaks on. Scans hold their reports back while they hold the
 * registry lock and print them after (below); the free-time check reports at once. The hook for a copy or
 * memset refused for leaving its buffer (copy_check.c), __redzone_refused, sits next to it.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "common.h"
#include "judge.h"
#include "depot.h"
#include "finding.h"
#include "format.h"
#include "launch_ring.h"
#include "registry.h"
#include "report.h"
#include "state.h"
#include "stats.h"
#include "symbolize.h"
#include "thread_state.h"

RZ_EXPORT RZ_NOINLINE void __redzone_violation(const rz_violation_t *violation) {
    /* Empty on purpose: a debugger breaks here. The asm keeps the call from being optimised away. */
    __asm__ volatile("" : : "r"(violation) : "memory");
}

RZ_EXPORT RZ_NOINLINE void __redzone_refused(const rz_refusal_t *refusal) {
    /* The same for a copy or memset refused for leaving its buffer (copy_check.c). */
    __asm__ volatile("" : : "r"(refusal) : "memory");
}

static void record_violation(const rz_violation_t *v) {
    uint32_t k = RZ_STATE.last_violation_count;
    if (k < RZ_LAST_VIOLATIONS) {
        RZ_STATE.last_violations[k] = *v;
        RZ_STATE.last_violation_count = k + 1;
    }
}

/*
 * A scan's reports are printed after it releases the registry lock (issue 20.6: symbolizing the allocation
 * stacks of 2000 violated zones held the lock for seconds). While the scan holds the lock its lines are held
 * back (rz__log_hold), and each violated zone is queued: where its lines stop for its allocation stack, the
 * stack's depot id (a stack never changes, while the zone's node may be reused once the lock is released),
 * where its lines end, and its record for the __redzone_violation hook. After the lock, zone by zone in the
 * order found: its lines, its stack symbolized in place, then the hook, so a debugger stopped there has the
 * report before it and the registry free. Counters and the state block's records are still updated under
 * the lock. Memory is mapped on the first violation and unmapped after printing (no heap: the fatal-signal
 * scan runs while the crashing thread may hold malloc's lock); a queue that fills up (REPORT_ITEMS zones, or
 * lines within REPORT_ROOM of RZ_LOG_HELD_MAX) is printed at once, under the lock.
 */
#define REPORT_ITEMS ((size_t)1 << 16)
#define REPORT_ROOM ((size_t)64 << 10) /* more than one zone's lines and any warnings between two zones */

struct report_item {
    size_t stack_at, end; /* offsets in the held lines */
    uint32_t stack;       /* depot id; 0: none to print */
    int fate;             /* rz__finding_admit's (finding.h): suppressed ones call no hook */
    rz_violation_t v;
};

#define t_reports (rz__thread.reports) /* set while this thread's scan holds the registry lock (thread_state.h) */

void rz__reports_begin(rz_reports_t *r) {
    memset(r, 0, sizeof *r);
    t_reports = r;
    rz__log_hold(&r->lines);
}

static void print_stack(uint32_t stack) { (void)rz__depot_symbolize(stack); }

/* Print what is queued, and empty the queue (lines are held back again when the scan goes on). */
static void reports_print(rz_reports_t *r, int go_on) {
    rz__log_hold(NULL);
    size_t at = 0;
    for (size_t i = 0; i < r->n; i++) {
        const struct report_item *it = &r->items[i];
        rz__log_raw(r->lines.text + at, it->stack_at - at);
        print_stack(it->stack);
        rz__log_raw(r->lines.text + it->stack_at, it->end - it->stack_at);
        at = it->end;
        if (it->fate != RZ_FINDING_SUPPRESSED)
            __redzone_violation(&it->v);
        rz__finding_done(it->fate); /* METRALE_REDZONE_HALT_ON_ERROR ends the process here */
    }
    if (r->lines.len > at)
        rz__log_raw(r->lines.text + at, r->lines.len - at);
    r->n = 0;
    r->lines.len = 0;
    if (go_on)
        rz__log_hold(&r->lines);
}

void rz__reports_end(rz_reports_t *r) {
    t_reports = NULL;
    reports_print(r, 0);
    rz__log_held_release(&r->lines);
    if (r->items)
        munmap(r->items, REPORT_ITEMS * sizeof *r->items);
    r->items = NULL;
}

/* Room for one more zone's report in the queue (printing it now, under the lock, when full); 0 without
 * memory for the queue: then the zone is reported at once. */
static int reports_room(rz_reports_t *r) {
    if (r->items == NULL) {
        void *p = mmap(NULL, REPORT_ITEMS * sizeof *r->items, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        if (p == MAP_FAILED)
            return 0;
        r->items = p;
    }
    if (r->n == REPORT_ITEMS || RZ_LOG_HELD_MAX - r->lines.len < REPORT_ROOM)
        reports_print(r, 1);
    return 1;
}

/* Report one violated band of zone z (front: the band before its pointer); its allocation stack is taken from
 * the registry, or given (`stack`, for a zone already removed from it). */
static int judge_with(const rz_zone_node_t *z, const uint8_t *band, uint64_t bytes, int front, const uint64_t *given,
                      uint32_t ngiven);

static int judge(const rz_zone_node_t *z, const uint8_t *band, uint64_t bytes, int front) {
    return judge_with(z, band, bytes, front, NULL, 0);
}

int rz__band_judge_freed(const rz_zone_node_t *z, const uint8_t *band, const uint64_t *frames, uint32_t nframes) {
    int bad = judge_with(z, band, z->pad_bytes, 0, frames, nframes);
    if (z->front_units)
        bad |= judge_with(z, band + z->pad_bytes, rz__zone_front(z), 1, frames, nframes);
    return bad;
}

static _Atomic(rz_who_wrote_fn *) g_who_wrote;

void rz__judge_on_who_wrote(rz_who_wrote_fn *fn) { atomic_store_explicit(&g_who_wrote, fn, memory_order_release); }

static _Atomic(rz_writer_fn *) g_writer;

void rz__judge_on_writer(rz_writer_fn *fn) { atomic_store_explicit(&g_writer, fn, memory_order_release); }

/* A violated band's finding (finding.h): its fields, the kernel that wrote it (a launch check's) or the
 * candidates (the launch ring's), its allocation stack; admitted before any of its lines. */
static int admit(const rz_zone_node_t *z, const rz_violation_t *v, const char *line, const uint64_t *stack,
                 uint32_t nframes) {
    rz_finding_t f = {.kind = v->front ? RZ_FINDING_UNDERRUN : RZ_FINDING_OVERRUN, .alloc = v->index, .ptr = v->ptr,
                      .user_bytes = v->user_bytes, .pad = (int64_t)v->pad_bytes,
                      .first = v->front ? -(int64_t)v->first : (int64_t)v->first,
                      .last = v->front ? -(int64_t)v->last : (int64_t)v->last, .changed = (int64_t)v->changed,
                      .first_bad = v->first_bad, .text = line, .alloc_frames = stack, .nalloc = nframes};
    rz_writer_fn *writer = atomic_load_explicit(&g_writer, memory_order_acquire);
    const char *name = writer ? writer(&f.launch_seq) : NULL;
    if (name)
        snprintf(f.launch, sizeof f.launch, "%s", name);
    else
        f.nkernels = rz__launch_candidates(z, &f.kernels[0][0], sizeof f.kernels[0], RZ_FINDING_KERNELS);
    return rz__finding_admit(&f);
}

static int judged(int fate) {
    return fate == RZ_FINDING_SUPPRESSED ? RZ_JUDGE_SUPPRESSED
           : fate == RZ_FINDING_UNPRINTED ? RZ_JUDGE_UNPRINTED
                                          : RZ_JUDGE_REPORTED;
}

static void who_wrote(const rz_zone_node_t *z, const uint8_t *band, uint64_t bytes, int front) {
    rz_who_wrote_fn *fn = atomic_load_explicit(&g_who_wrote, memory_order_acquire);
    if (fn && fn(z, band, bytes, front))
        return; /* a launch check's report: the launch is named instead */
    rz__launch_report(z);
}

static int judge_with(const rz_zone_node_t *z, const uint8_t *band, uint64_t bytes, int front, const uint64_t *given,
                      uint32_t ngiven) {
    rz_violation_t v;
    if (!rz__band_violation(z, band, bytes, front, &v))
        return 0;
    char line[512];
    rz__format_violation(&v, line, sizeof line);
    rz_reports_t *r = t_reports;
    if (r && reports_room(r)) {
        uint32_t stack = given ? rz__depot_put(given, ngiven) : rz__registry_stack_id(z);
        const uint64_t *kept;
        uint32_t nframes = rz__depot_get(stack, &kept);
        int fate = admit(z, &v, line, kept, nframes);
        rz__log_mute(fate != RZ_FINDING_REPORT); /* its side effects (who_wrote's records) still happen */
        rz__log("%s", line);
        if (nframes)
            rz__log("  alloc#%llu was allocated at:", (unsigned long long)z->index);
        size_t stack_at = r->lines.len;
        who_wrote(z, band, bytes, front);
        rz__log_mute(0);
        if (fate != RZ_FINDING_SUPPRESSED) {
            rz__count(RZ_C_violations, 1); /* before the hook, so a debugger stopped there sees it counted */
            record_violation(&v);
        }
        r->items[r->n++] = (struct report_item){.stack_at = stack_at, .end = r->lines.len,
                                                .stack = nframes && fate == RZ_FINDING_REPORT ? stack : 0,
                                                .fate = fate, .v = v};
        return judged(fate);
    }
    uint32_t nframes = ngiven;
    const uint64_t *stack = given;
    if (stack == NULL)
        stack = rz__registry_stack(z, &nframes);
    int fate = admit(z, &v, line, stack, nframes);
    rz__log_mute(fate != RZ_FINDING_REPORT);
    rz__log("%s", line);
    if (nframes) {
        void *frames[RZ_STACK_MAX];
        for (uint32_t i = 0; i < nframes && i < RZ_STACK_MAX; i++)
            frames[i] = (void *)(uintptr_t)stack[i];
        rz__log("  alloc#%llu was allocated at:", (unsigned long long)z->index);
        if (fate == RZ_FINDING_REPORT)
            rz__symbolize_frames(frames, (int)(nframes < RZ_STACK_MAX ? nframes : RZ_STACK_MAX));
    }
    who_wrote(z, band, bytes, front);
    rz__log_mute(0);
    if (fate == RZ_FINDING_SUPPRESSED)
        return RZ_JUDGE_SUPPRESSED;
    rz__count(RZ_C_violations, 1); /* before the hook, so a debugger stopped there sees it counted */
    record_violation(&v);
    __redzone_violation(&v);
    rz__finding_done(fate);
    return judged(fate);
}

int rz__band_judge(const rz_zone_node_t *z, const uint8_t *band) { return judge(z, band, z->pad_bytes, 0); }

int rz__band_judge_front(const rz_zone_node_t *z, const uint8_t *band) {
    return judge(z, band, rz__zone_front(z), 1);
}

/* This thread entered a scan while in one: a signal handler (calling exit, say) interrupted it. What the scan
 * held back goes out now, without stacks (symbolizing could wait for a lock the interrupted code holds), and
 * from here its reports are printed as found, so nothing is lost if it never resumes. */
void rz__reports_spill(void) {
    rz_reports_t *r = t_reports;
    if (r == NULL)
        return;
    rz__log_hold(NULL);
    if (r->lines.len)
        rz__log_raw(r->lines.text, r->lines.len);
    r->lines.len = 0;
    r->n = 0;
    t_reports = NULL;
}
