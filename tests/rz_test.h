/*
 * Shared test helpers: a current context on the emulated driver, a per-test log file, and reading it back.
 * Criterion runs every test in its own process, so each test sets the environment it needs before the
 * library's first call reads it.
 */
#ifndef RZ_TEST_H
#define RZ_TEST_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_emu.h"
/* every internal header of the library (tests reach into each module) */
#include "common.h"
#include "agent.h"
#include "alloc.h"
#include "alloc_trace.h"
#include "api.h"
#include "band.h"
#include "band_fill.h"
#include "band_io.h"
#include "capture.h"
#include "capture_mode.h"
#include "check_kernel.h"
#include "check_changed.h"
#include "launch_names.h"
#include "copy_check.h"
#include "copy_ranges.h"
#include "creation_index.h"
#include "ctx_forget.h"
#include "depot.h"
#include "device_ctx.h"
#include "driver.h"
#include "driver_info.h"
#include "elf_symbols.h"
#include "events.h"
#include "exit_scan.h"
#include "fatal_scan.h"
#include "fill_marks.h"
#include "finding.h"
#include "fork.h"
#include "format.h"
#include "free_check.h"
#include "graph_slots.h"
#include "guard_pages.h"
#include "ipc_records.h"
#include "judge.h"
#include "kernel_names.h"
#include "launch_attribution.h"
#include "launch_check.h"
#include "launch_ring.h"
#include "memory.h"
#include "nvtx_regions.h"
#include "nvtx_types.h"
#include "options.h"
#include "proc_names.h"
#include "registry.h"
#include "report.h"
#include "report_file.h"
#include "safeopen.h"
#include "start.h"
#include "state.h"
#include "stats.h"
#include "sticky.h"
#include "sticky_said.h"
#include "suppress.h"
#include "stream_fills.h"
#include "stream_ops.h"
#include "symbolize.h"
#include "sync_scan.h"
#include "thread_state.h"
#include "vmm.h"
#include "work_epoch.h"
#include "write_all.h"
#include "quarantine.h"
#include "bad_free.h"
#include "leak_check.h"

/* cuInit + primary context of device `dev` made current. */
static inline rzcu_context rzt_context(int dev) {
    rzcu_context ctx = NULL;
    cr_assert_eq(cuInit(0), RZCUDA_SUCCESS);
    cr_assert_eq(cuDevicePrimaryCtxRetain(&ctx, dev), RZCUDA_SUCCESS);
    cr_assert_eq(cuCtxSetCurrent(ctx), RZCUDA_SUCCESS);
    return ctx;
}

/* Send the library's log to a fresh file for this test; returns its path (static storage). */
static char rzt_log_path[128];
static inline void rzt_remove_log(void) { unlink(rzt_log_path); }
static inline const char *rzt_log_to_file(void) {
    char *path = rzt_log_path;
    snprintf(path, sizeof rzt_log_path, "/tmp/rz-test-%ld.log", (long)getpid());
    unlink(path);
    atexit(rzt_remove_log);
    /* The same file, named with %p: a per-process log, whose lines carry no pid (docs/report-format.md). */
    setenv("METRALE_REDZONE_LOG", "/tmp/rz-test-%p.log", 1);
    return path;
}

/* The whole log file as a string (caller frees). */
static inline char *rzt_read_log(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return strdup("");
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strdup(buf);
}

/* Number of occurrences of needle in hay. */
static inline int rzt_count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* Simple checksum of a device range read back through the driver. */
static inline uint64_t rzt_device_checksum(rz_devptr_t p, size_t n) {
    uint8_t *buf = malloc(n);
    cr_assert_not_null(buf);
    cr_assert_eq(cuMemcpyDtoH_v2(buf, p, n), RZCUDA_SUCCESS);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ buf[i]) * 1099511628211ull;
    free(buf);
    return h;
}

#endif
