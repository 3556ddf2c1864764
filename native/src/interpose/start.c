/*
 * Start-up, in one place, above every layer it starts: once per process, at its first allocation (the entry
 * points call rz__start, interpose/api.h, after taking the allocation's creation index), never in a
 * constructor. Again in a forked child when the agent runs (its thread is not in the child): the agent
 * thread restarted, the fatal-signal handler re-armed for the child. The flag keeps the steady state to one
 * load.
 */
#include "start.h"
#include "quarantine.h"
#include "agent.h"
#include "alloc.h"
#include "capture.h"
#include "creation_index.h"
#include "driver.h"
#include "exit_scan.h"
#include "fatal_scan.h"
#include "fill_marks.h"
#include "finding.h"
#include "fork.h"
#include "free_check.h"
#include "launch_check.h"
#include "options.h"
#include "registry.h"
#include "report.h"
#include "rz_annotate.h"
#include "state.h"
#include "sync_scan.h"

_Atomic int rz__started;

/* Threads whose first allocations race all come to rz__start_slow: one does the work, under this lock. */
static pthread_mutex_t g_start_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;

/* A forked child: the next allocation runs the start-up again (the agent thread is gone). */
static void after_fork_child(void) {
    atomic_store(&rz__started, 0);
    pthread_mutex_init(&g_start_lock, NULL); /* another thread of the parent may have held it at the fork */
}

static void register_fork_handler(void) { rz__fork_register(NULL, NULL, after_fork_child); }

static int start_locked(void) {
    RZ_ANNOTATE_ATOMIC(&RZ_STATE.counters, sizeof RZ_STATE.counters); /* helgrind: relaxed atomics */
    rz__index_annotate();
    rz__registry_annotate();
    rz__sync_annotate();
    rz__capture_annotate();
    rz__fill_marks_annotate();
    rz__quarantine_annotate();
    rz__log_start(); /* the options, and the log they name with their warnings */
    rz__findings_start(); /* suppression rules read, the report file opened (finding.c), before the exit scan's */
    if (rz__dev_load() != RZ_OK)
        return RZ_ENODRIVER;
    rz__free_check_arm();
    rz__launch_check_arm();
    rz__exit_scan_arm();
    /* Only for the agent, whose thread a child must start again: without it a child keeps its parent's
     * start-up. */
    if (rz__options()->agent)
        pthread_once(&g_fork_once, register_fork_handler);
    rz__agent_start();
    rz__fatal_arm();
    rz__alloc_prepare();
    atomic_store_explicit(&rz__started, 1, memory_order_release);
    return RZ_OK;
}

int rz__start_slow(void) {
    pthread_mutex_lock(&g_start_lock);
    int rc = atomic_load_explicit(&rz__started, memory_order_relaxed) ? RZ_OK : start_locked();
    pthread_mutex_unlock(&g_start_lock);
    return rc;
}
