/*
 * The exit scan (METRALE_REDZONE_SCAN=exit): at exit, after the program's work is done, every band is
 * checked once and one line says what was found (and METRALE_REDZONE_SUMMARY's machine-readable line for
 * `redzone run --error-exitcode`). Registered lazily at the first allocation, so it runs before the driver's
 * own exit handler.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "exit_scan.h"
#include "band.h"
#include "creation_index.h"
#include "driver_info.h"
#include "finding.h"
#include "free_check.h"
#include "launch_check.h"
#include "leak_check.h"
#include "options.h"
#include "quarantine.h"
#include "registry.h"
#include "report.h"
#include "rz_annotate.h"
#include "safeopen.h"
#include "state.h"
#include "sticky.h"
#include "sticky_said.h"

static pthread_once_t g_exit_once = PTHREAD_ONCE_INIT;
static pid_t g_exit_pid;

/* METRALE_REDZONE_SUMMARY: one machine-readable line for `redzone run --error-exitcode`. */
static void write_summary(const rz_options_t *o, const rz_stats_t *s) {
    if (o->summary_path[0] == '\0')
        return;
    int refused = 0;
    int fd = rz__open_append(o->summary_path, &refused); /* 0600, no symlink another user planted */
    if (fd < 0) {
        char quoted[RZ_QUOTE_MAX];
        rz__quote(quoted, o->summary_path);
        rz__warn("cannot open METRALE_REDZONE_SUMMARY=%s (%s); no summary line written", quoted,
                 refused ? rz__refusal(refused)
                         : strerror(errno));
        return;
    }
    char line[256];
    int n = snprintf(line, sizeof line, "pid=%ld violations=%llu scans=%llu allocations=%llu next_index=%llu\n",
                     (long)getpid(), (unsigned long long)s->violations, (unsigned long long)s->scans,
                     (unsigned long long)s->map_calls, (unsigned long long)rz_next_index());
    if (n > 0)
        rz__write_all(fd, line, (size_t)n);
    close(fd);
}

static void exit_scan(void) {
    if (getpid() != g_exit_pid)
        return; /* a forked child: the zones and the driver state are its parent's */
    rz__free_checks_deferred();
    const rz_options_t *o = rz__options();
    rz__quarantine_at_exit(o->scan != 0); /* the held freed blocks, checked once (not again by the exit scan) */
    rz__leak_check_at_exit();
    rz_stats_t s;
    if ((o->scan & RZ_SCAN_LAUNCH) && !rz__dev_deinitialized()) {
        rz__bands_settle(); /* launch checks still in flight complete, and are judged */
        rz__launch_checks();
    }
    if (!(o->scan & RZ_SCAN_EXIT)) {
        /* After a sticky error the checks due at frees, synchronisations or launches could not all be made:
         * said once (sticky.c), if nothing said it yet. Not under the fatal policy alone (nothing was due). */
        if (o->scan & (RZ_SCAN_FREE | RZ_SCAN_SYNC | RZ_SCAN_LAUNCH))
            rz__sticky_say(0);
        rz_stats_get(&s);
        write_summary(o, &s);
        return;
    }
    /* The driver's own exit handler may have run first (it is registered when cuInit runs, which can come
     * after the first allocation call): then every band read fails, so say that instead of scanning. */
    int gone = rz__dev_deinitialized();
    if (!gone)
        rz__bands_settle(); /* kernels still queued or running at exit: the driver's teardown waits too */
    int violated = gone ? RZ_EDRIVER : rz__scan_at_exit(); /* RZ_EDRIVER at once after a sticky error */
    rz_stats_get(&s);
    write_summary(o, &s);
    char now[192];
    rzcu_result read_error = RZCUDA_SUCCESS;
    if (gone)
        snprintf(now, sizeof now, "not checked, the CUDA driver had already shut down (CUDA_ERROR_DEINITIALIZED)");
    else if (rz__sticky() != RZCUDA_SUCCESS && !rz__sticky_said())
        /* A sticky error nothing said yet: this line says it (sticky.c), instead of a warning and a scan line. */
        snprintf(now, sizeof now, "%s ends all CUDA work in this process: %llu zones could not be checked",
                 rz__cu_name(rz__sticky()), (unsigned long long)rz__registry_count());
    else if (rz__sticky() != RZCUDA_SUCCESS)
        snprintf(now, sizeof now, "not checked (%s, above)", rz__cu_name(rz__sticky()));
    else if (violated == RZ_EBUSY) /* this thread was inside a scan or band write: exit from a signal handler */
        snprintf(now, sizeof now, "not checked, exit was called while this thread was scanning (from a signal handler?)");
    else if (violated >= 0)
        snprintf(now, sizeof now, "%d violated at exit", violated);
    else if (violated == RZ_EDRIVER && rz__scan_unread(&read_error) > 0)
        /* e.g. a kernel faulted: on a GPU its context's error is sticky and no band of it can be read */
        snprintf(now, sizeof now, "%llu violated at exit, %llu zones not checked (reading their bands failed with %s)",
                 (unsigned long long)RZ_STATE.last_scan_violated, (unsigned long long)rz__scan_unread(&read_error),
                 rz__cu_name(read_error));
    else
        snprintf(now, sizeof now, "exit scan failed (%s)", rz_status_name(violated));
    /* Live: allocations still registered (a free the driver refused counts as an unmap call, not a release). */
    char tail[160]; /* findings suppressed, or held back by the print limit (finding.c) */
    rz__finding_exit_tail(tail, sizeof tail);
    rz__log("redzone: exit: %s; %llu violations in %llu scans; %llu allocations, %llu live, %llu unpadded%s",
            now, (unsigned long long)s.violations, (unsigned long long)s.scans, (unsigned long long)s.map_calls,
            (unsigned long long)rz__registry_count(), (unsigned long long)s.unpadded_allocs, tail);
}

/* METRALE_REDZONE_HALT_ON_ERROR: the process ends at its first finding; the summary line is written first. */
static void halt_summary(void) {
    rz_stats_t s;
    rz_stats_get(&s);
    write_summary(rz__options(), &s);
}

static void arm(void) {
    rz__free_check_annotate();
    rz__finding_on_halt(halt_summary);
    g_exit_pid = getpid();
    atexit(exit_scan);
}

/* Called on every allocation: the first one happens after cuInit, so this handler is registered after the
 * driver's and runs before it (atexit handlers run in reverse order), while contexts are still alive. */
void rz__exit_scan_arm(void) {
    static _Atomic int armed;
    if (RZ_LIKELY(atomic_load_explicit(&armed, memory_order_acquire)))
        return;
    pthread_once(&g_exit_once, arm);
    atomic_store_explicit(&armed, 1, memory_order_release);
}
