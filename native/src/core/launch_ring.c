/*
 * The launch ring: the recent kernel launches (their names and the creation index each saw), exported as
 * `__redzone_launches` so a debugger judging bands itself names the same kernels, and the report line
 * naming the kernels that may have written a violated zone (launched since it was last known clean).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "launch_ring.h"
#include "format.h"
#include "kernel_names.h"
#include "report.h"
#include "state.h"

#define NAMES_SHOWN 8

/* The ring, exported so a debugger judging bands itself names the same kernels (state.h). */
RZ_EXPORT rz_launches_t __redzone_launches = {
    .magic = RZ_LAUNCHES_MAGIC,
    .version = RZ_LAUNCHES_VERSION,
    .size = sizeof(rz_launches_t),
};
#define L __redzone_launches
static pthread_mutex_t g_ring_lock = PTHREAD_MUTEX_INITIALIZER;

static inline __attribute__((always_inline)) const char *driver_kernel_name(rzcu_function f) {
    const char *name = rz__dev_kernel_name(f); /* cuFuncGetName, else cuKernelGetName (kernel_names.h) */
    return name ? name : "(unnamed kernel)";
}

const char *rz__launch_kernel_name(rzcu_function f) { return driver_kernel_name(f); }

static inline __attribute__((always_inline)) uint64_t record_name(const char *name) {
    uint64_t next = atomic_load_explicit(&RZ_STATE.next_index, memory_order_relaxed);
    pthread_mutex_lock(&g_ring_lock);
    struct rz_launch *l = &L.ring[L.seq % RZ_LAUNCH_RING];
    l->seq = L.seq + 1;
    l->next_index = next;
    snprintf(l->name, sizeof l->name, "%s", name);
    uint64_t seq = ++L.seq;
    pthread_mutex_unlock(&g_ring_lock);
    return seq;
}

uint64_t rz__launch_record_name(const char *name) { return record_name(name); }

void rz__launch_record(rzcu_function f) { record_name(driver_kernel_name(f)); }

/* Under the registry lock, at the start of a scan. A sync scan that leaves out a context with work still
 * running (sync_scan.c) keeps the mark: that context's zones were not seen clean now. */
void rz__launch_scan_begin(int whole) {
    pthread_mutex_lock(&g_ring_lock);
    L.report_since = L.scan_start;
    if (whole)
        L.scan_start = L.seq;
    pthread_mutex_unlock(&g_ring_lock);
}

void rz__launch_report(const rz_zone_node_t *z) {
    char line[1024];
    pthread_mutex_lock(&g_ring_lock);
    size_t n = rz__format_launch_candidates(&L, L.report_since, z->index, line, sizeof line);
    pthread_mutex_unlock(&g_ring_lock);
    if (n)
        rz__log("%s", line);
}
unsigned rz__launch_candidates(const rz_zone_node_t *z, char *names, size_t stride, unsigned max) {
    unsigned n = 0;
    pthread_mutex_lock(&g_ring_lock);
    uint64_t newest = L.seq;
    uint64_t oldest_kept = newest > RZ_LAUNCH_RING ? newest - RZ_LAUNCH_RING + 1 : 1;
    for (uint64_t seq = newest; seq > L.report_since && seq >= oldest_kept && n < max; seq--) {
        const struct rz_launch *l = &L.ring[(seq - 1) % RZ_LAUNCH_RING];
        if (l->next_index <= z->index)
            continue; /* launched before this zone existed (as rz__format_launch_candidates) */
        snprintf(names + n++ * stride, stride, "%.*s", (int)sizeof l->name, l->name);
    }
    pthread_mutex_unlock(&g_ring_lock);
    return n;
}

/* A free-time check reports against the launches since the last whole scan began. */
void rz__launch_ring_since_scan(void) {
    pthread_mutex_lock(&g_ring_lock);
    L.report_since = L.scan_start;
    pthread_mutex_unlock(&g_ring_lock);
}
uint64_t rz__launch_seq(void) {
    pthread_mutex_lock(&g_ring_lock);
    uint64_t seq = L.seq;
    pthread_mutex_unlock(&g_ring_lock);
    return seq;
}

unsigned rz__launch_names_since(uint64_t since, uint64_t *seqs, char *names, size_t stride, unsigned max,
                                uint64_t *total) {
    pthread_mutex_lock(&g_ring_lock);
    uint64_t seq = L.seq, n = seq > since ? seq - since : 0;
    unsigned k = 0;
    for (; k < n && k < max && k < RZ_LAUNCH_RING; k++) {
        const struct rz_launch *x = &L.ring[(seq - 1 - k) % RZ_LAUNCH_RING];
        seqs[k] = x->seq;
        size_t len = strnlen(x->name, sizeof x->name);
        len = len < stride - 1 ? len : stride - 1;
        memcpy(names + k * stride, x->name, len);
        names[k * stride + len] = '\0';
    }
    pthread_mutex_unlock(&g_ring_lock);
    *total = n;
    return k;
}

#undef L
