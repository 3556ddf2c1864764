/*
 * Findings: every report of a fault in the program (a violated band, a copy or memset refused, a bad free,
 * and each kind added to finding.h's table) is admitted here before its first line, from the same place its
 * text is made, so that the same rules hold for every kind:
 *   - suppression rules (METRALE_REDZONE_SUPPRESSIONS, suppress.c): a matching finding gets no text, is not
 *     counted as a violation and calls no debugger hook; the exit line counts it as suppressed;
 *   - the report file (METRALE_REDZONE_REPORT, report_file.c) gets a record of every finding not suppressed;
 *   - METRALE_REDZONE_PRINT_SUPPRESSIONS prints the rule that would suppress it, just before its text;
 *   - METRALE_REDZONE_PRINT_LIMIT: past that many, a finding is counted and recorded but its text dropped;
 *   - METRALE_REDZONE_HALT_ON_ERROR: after the first finding's report is complete (rz__finding_done), the
 *     summary line and the report file are written, the program's stdio streams flushed, and the process ends
 *     with _exit(RZ_HALT_STATUS), as ASan's halt_on_error: the program's exit handlers do not run (the report
 *     may be made with redzone's registry lock held, which the exit scan and any CUDA call there would need).
 * The stacks are resolved here only when a rule, the report file or the rule printing wants them; into static
 * memory under one lock (no heap: findings are made where malloc's lock may be held).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "finding.h"
#include "fork.h"
#include "options.h"
#include "report.h"
#include "report_file.h"
#include "state.h"
#include "suppress.h"
#include "symbolize.h"
#include "thread_state.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_by_kind[RZ_FINDING_NKINDS], g_findings, g_suppressed, g_unprinted, g_printed;
static _Atomic uint64_t g_suppressed_seen, g_unprinted_seen; /* read by the exit line without the lock */
static rz_frame_sym_t g_alloc[RZ_STACK_MAX], g_call[RZ_STACK_MAX];
static _Atomic int g_halting;
static _Atomic(rz_halt_fn *) g_on_halt;

static void totals(rz_finding_totals_t *t, int halted) {
    memset(t, 0, sizeof *t);
    memcpy(t->by_kind, g_by_kind, sizeof g_by_kind);
    t->findings = g_findings;
    t->suppressed = g_suppressed;
    t->unprinted = g_unprinted;
    t->halted = halted;
}

static void at_exit(void) {
    if (atomic_load(&g_halting))
        return;
    rz_finding_totals_t t;
    pthread_mutex_lock(&g_lock);
    totals(&t, 0);
    pthread_mutex_unlock(&g_lock);
    rz__report_file_finish(&t);
}

/* A forked child counts its own findings (its parent's are in its parent's summary). */
static void after_fork_child(void) {
    pthread_mutex_init(&g_lock, NULL);
    memset(g_by_kind, 0, sizeof g_by_kind);
    g_findings = g_suppressed = g_unprinted = g_printed = 0;
    atomic_store(&g_suppressed_seen, 0);
    atomic_store(&g_unprinted_seen, 0);
}

static pthread_once_t g_start_once = PTHREAD_ONCE_INIT;

static void start_once(void) {
    rz__suppress_load();
    rz__fork_register(NULL, NULL, after_fork_child);
    if (rz__report_file_start())
        atexit(at_exit); /* registered before the exit scan's (start.c): runs after it, its findings included */
}

void rz__findings_start(void) { pthread_once(&g_start_once, start_once); }

/* A name in a printed rule: spaces (which separate conditions) become '?'. */
static void rule_word(char *out, size_t cap, const char *prefix, const char *name) {
    int n = snprintf(out, cap, " %s", prefix);
    size_t at = n > 0 ? (size_t)n : 0;
    for (const char *c = name; *c && at + 1 < cap; c++)
        out[at++] = (*c == ' ' || *c == '\t' || *c == '#') ? '?' : *c;
    out[at < cap ? at : cap - 1] = '\0';
}

static void print_rule(const rz_finding_t *f, const rz_frame_sym_t *alloc, int nalloc) {
    char kernel[RZ_FINDING_NAME + 16] = "", frame[sizeof alloc->func + 16] = "";
    const char *k = f->launch[0] ? f->launch : f->nkernels ? f->kernels[0] : NULL;
    if (k)
        rule_word(kernel, sizeof kernel, "kernel:", k);
    if (nalloc) {
        const char *slash = strrchr(alloc[0].file, '/');
        rule_word(frame, sizeof frame, "alloc-frame:", alloc[0].named ? alloc[0].func : slash ? slash + 1 : alloc[0].file);
    }
    rz__log("redzone: suppression: kind:%s%s%s", rz__finding_kind_name(f->kind), kernel, frame);
}

int rz__finding_admit(const rz_finding_t *f) {
    rz__findings_start();
    const rz_options_t *o = rz__options();
    int want = rz__suppress_wants_frames() || rz__report_file_on() || o->print_suppressions;
    pthread_mutex_lock(&g_lock);
    int nalloc = 0, ncall = 0;
    if (want && f->nalloc) {
        void *frames[RZ_STACK_MAX];
        uint32_t n = f->nalloc < RZ_STACK_MAX ? f->nalloc : RZ_STACK_MAX;
        for (uint32_t i = 0; i < n; i++)
            frames[i] = (void *)(uintptr_t)f->alloc_frames[i];
        nalloc = rz__symbolize_to(frames, (int)n, g_alloc, RZ_STACK_MAX);
    }
    if (want && f->ncall)
        ncall = rz__symbolize_to(f->call_frames, (int)(f->ncall < RZ_STACK_MAX ? f->ncall : RZ_STACK_MAX), g_call,
                                 RZ_STACK_MAX);
    if (rz__suppress_match(f, g_alloc, nalloc)) {
        g_suppressed++;
        atomic_fetch_add(&g_suppressed_seen, 1);
        pthread_mutex_unlock(&g_lock);
        return RZ_FINDING_SUPPRESSED;
    }
    uint64_t seq = ++g_findings;
    g_by_kind[f->kind >= 0 && f->kind < RZ_FINDING_NKINDS ? f->kind : 0]++;
    rz__report_file_finding(f, seq, g_alloc, nalloc, g_call, ncall);
    int fate = RZ_FINDING_REPORT;
    /* A debugger's request (its lines go to gdb) is always answered in full. */
    if (o->print_limit && !rz__thread.log_sink && ++g_printed > o->print_limit) {
        fate = RZ_FINDING_UNPRINTED;
        g_unprinted++;
        atomic_fetch_add(&g_unprinted_seen, 1);
    }
    if (fate == RZ_FINDING_REPORT && o->print_suppressions)
        print_rule(f, g_alloc, nalloc);
    pthread_mutex_unlock(&g_lock);
    return fate;
}

void rz__finding_on_halt(rz_halt_fn *fn) { atomic_store(&g_on_halt, fn); }

void rz__finding_done(int fate) {
    if (fate == RZ_FINDING_SUPPRESSED || !rz__options()->halt_on_error || rz__thread.log_sink)
        return; /* a debugger's request (its lines go to gdb) never ends the program */
    if (atomic_exchange(&g_halting, 1))
        return;
    rz__log_mute(0);
    rz_halt_fn *fn = atomic_load(&g_on_halt);
    if (fn)
        fn();
    rz_finding_totals_t t;
    totals(&t, 1); /* without the lock: another thread may hold it, and this one ends the process */
    rz__report_file_finish(&t);
    rz__log("redzone: halting after the first finding (METRALE_REDZONE_HALT_ON_ERROR=1): exit status %d",
            RZ_HALT_STATUS);
    /* The program's buffered output is its own: flushed, but not from the agent thread, which serves the
     * fatal-signal scan while the crashing thread may hold a stream's lock. */
    if (!rz__thread.is_agent)
        fflush(NULL);
    _exit(RZ_HALT_STATUS);
}

void rz__finding_counts(uint64_t *suppressed, uint64_t *unprinted) {
    *suppressed = atomic_load(&g_suppressed_seen);
    *unprinted = atomic_load(&g_unprinted_seen);
}

size_t rz__finding_exit_tail(char *out, size_t cap) {
    uint64_t s, u;
    rz__finding_counts(&s, &u);
    int n = 0;
    if (s && u)
        n = snprintf(out, cap, "; %llu findings suppressed, %llu not printed (METRALE_REDZONE_PRINT_LIMIT=%llu)",
                     (unsigned long long)s, (unsigned long long)u, (unsigned long long)rz__options()->print_limit);
    else if (s)
        n = snprintf(out, cap, "; %llu findings suppressed", (unsigned long long)s);
    else if (u)
        n = snprintf(out, cap, "; %llu findings not printed (METRALE_REDZONE_PRINT_LIMIT=%llu)", (unsigned long long)u,
                     (unsigned long long)rz__options()->print_limit);
    else if (cap)
        out[0] = '\0';
    return n > 0 ? (size_t)n : 0;
}
