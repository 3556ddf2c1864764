/*
 * Bad frees: a free of a pointer that is no live allocation's start. One inside a block held in the quarantine
 * (a double free, or a pointer inside a freed block) is answered as the driver answers memory it freed, the
 * block left held; any other goes to the driver, and when the driver refuses it the report says what the
 * pointer points into: a zone freed recently (a double free), a live zone (not its start), a zone whose
 * context ended (the registry keeps the newest of those), or nothing redzone knows (foreign). Each report gives the stacks kept (the free's, the earlier free's, the allocation's), is
 * counted as a violation and calls __redzone_refused (how: RZ_REFUSED_*_FREE) with no lock held. The driver's
 * answer reaches the program unchanged.
 */
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "bad_free.h"
#include "depot.h"
#include "finding.h"
#include "format.h"
#include "options.h"
#include "quarantine.h"
#include "registry.h"
#include "report.h"
#include "stats.h"
#include "symbolize.h"

static void print_stack(uint32_t id, const char *what) {
    const uint64_t *kept;
    if (id == 0 || rz__depot_get(id, &kept) == 0)
        return;
    rz__log("  %s", what);
    rz__depot_symbolize(id);
}

static void report(rz_refusal_t *r, const rz_free_req_t *req, uint32_t earlier_free, uint32_t alloc_stack) {
    snprintf(r->entry, sizeof r->entry, "%s", req->async ? "cuMemFreeAsync" : "cuMemFree");
    char line[512];
    rz__format_refusal(r, rz__cu_name(r->result), line, sizeof line);
    const uint64_t *kept = NULL;
    uint32_t nkept = alloc_stack ? rz__depot_get(alloc_stack, &kept) : 0;
    rz_finding_t f = {.kind = RZ_FINDING_BAD_FREE, .alloc = r->index, .ptr = r->ptr, .user_bytes = r->user_bytes,
                      .pad = RZ_FINDING_NONE, .first = r->ptr ? r->first : RZ_FINDING_NONE,
                      .last = r->ptr ? r->first : RZ_FINDING_NONE, .changed = RZ_FINDING_NONE,
                      .first_bad = RZ_FINDING_NONE, .addr = r->addr, .bytes = 0, .entry = r->entry, .text = line,
                      .alloc_frames = kept, .nalloc = nkept};
    int fate = rz__finding_admit(&f);
    if (fate == RZ_FINDING_SUPPRESSED)
        return; /* the driver's answer still reaches the program: only the report and count are left out */
    rz__log_mute(fate != RZ_FINDING_REPORT);
    rz__log("%s", line);
    const rz_options_t *o = rz__options();
    if (o->stacks) {
        void *frames[RZ_STACK_MAX];
        int n = rz__capture_stack(frames, (int)o->stacks);
        if (n > 0) {
            rz__log("  this free:");
            rz__symbolize_frames(frames, n);
        }
    }
    char what[96];
    snprintf(what, sizeof what, "alloc#%llu was freed at:", (unsigned long long)r->index);
    print_stack(earlier_free, what);
    snprintf(what, sizeof what, "alloc#%llu was allocated at:", (unsigned long long)r->index);
    print_stack(alloc_stack, what);
    rz__log_mute(0);
    rz__count(RZ_C_violations, 1); /* before the hook, so a debugger stopped there sees it counted */
    __redzone_refused(r);
    rz__finding_done(fate);
}

int rz__bad_free_held(rz_devptr_t dptr, const rz_free_req_t *req, int *answer) {
    rz_qentry_t e;
    if (RZ_LIKELY(!rz__quarantine_find(dptr, &e)))
        return 0;
    rz_refusal_t r = {.index = e.index, .ptr = e.ptr, .user_bytes = e.user_bytes, .addr = dptr,
                      .first = (int64_t)(dptr - e.ptr), .result = RZCUDA_ERROR_INVALID_VALUE,
                      .how = dptr == e.ptr ? RZ_REFUSED_DOUBLE_FREE : RZ_REFUSED_FREED_INTERIOR};
    report(&r, req, e.free_stack, e.alloc_stack);
    *answer = RZCUDA_ERROR_INVALID_VALUE;
    return 1;
}

int rz__bad_free_refused(rz_devptr_t dptr, int result, const rz_free_req_t *req) {
    if (RZ_LIKELY(result == RZCUDA_SUCCESS) || dptr == 0)
        return result;
    /* No context current (the program destroyed its only one): a bad free only of a pointer whose context
     * ended; any other answer (a sticky error, the driver shut down) says nothing of the pointer. */
    int no_ctx = result == RZCUDA_ERROR_INVALID_CONTEXT || result == RZCUDA_ERROR_CONTEXT_IS_DESTROYED;
    if (result != RZCUDA_ERROR_INVALID_VALUE && !no_ctx)
        return result;
    rz_refusal_t r = {.addr = dptr, .result = result, .how = RZ_REFUSED_FOREIGN_FREE};
    uint32_t earlier = 0, alloc_stack = 0;
    rz_qentry_t f;
    rz_ended_zone_t ended;
    int freed = rz__quarantine_freed(dptr, &f);
    rz__registry_lock();
    int was_ended = rz__registry_ended_find(dptr, &ended);
    for (const rz_zone_node_t *z = rz__registry_first(); z && !freed; z = rz__registry_next(z)) {
        if (dptr > z->ptr && dptr - z->ptr < z->user_bytes + z->pad_bytes) {
            r.how = RZ_REFUSED_INTERIOR_FREE; /* a live zone there now: it is what the pointer points into */
            r.index = z->index;
            r.ptr = z->ptr;
            r.user_bytes = z->user_bytes;
            r.first = (int64_t)(dptr - z->ptr);
            alloc_stack = rz__registry_stack_id(z);
            was_ended = 0;
            break;
        }
    }
    rz__registry_unlock();
    if (was_ended && (!freed || ended.index > f.index)) {
        /* The newest allocation there is one whose context ended (a later one freed there: a double free). */
        r.how = RZ_REFUSED_ENDED_FREE;
        r.index = ended.index;
        r.ptr = ended.ptr;
        r.user_bytes = ended.user_bytes;
        r.first = (int64_t)(dptr - ended.ptr);
        alloc_stack = ended.alloc_stack;
    } else if (no_ctx) {
        return result; /* no context: the driver refuses every free; this pointer says nothing more */
    } else if (freed) {
        r.how = RZ_REFUSED_DOUBLE_FREE;
        r.index = f.index;
        r.ptr = f.ptr;
        r.user_bytes = f.user_bytes;
        earlier = f.free_stack;
        alloc_stack = f.alloc_stack;
    }
    report(&r, req, earlier, alloc_stack);
    return result;
}
