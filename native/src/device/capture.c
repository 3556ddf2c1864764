/*
 * Whether a stream is being captured into a graph, without asking the driver at every launch.
 *
 * The library must never queue its own work (a band copy, a host function, a fill) into a program's
 * capture, so before it queues work on a program's stream it asks cuStreamIsCapturing. That is one driver
 * call per kernel launch under METRALE_REDZONE_SCAN=launch, and per stream-ordered allocation. A capture
 * always starts with cuStreamBeginCapture* on its origin stream (other streams only join a capture that is
 * in progress, by waiting for an event recorded in it) and ends with cuStreamEndCapture on that stream, so
 * while no capture begun through the interposed entry points is in progress, no stream is capturing and the
 * question need not be asked. hooks_capture.c reports each capture here before the driver begins it (so the
 * driver is asked from then on) and after it ends; while one is in
 * progress anywhere in the process (or after more than ORIGINS at once, for ever), every question goes to
 * the driver as before. The same knowledge lets the library's own queries and synchronisations run in the
 * program's capture mode while no capture is in progress (rz__capture_quiet_enter, band_io.c's quiet sections)
 * and relaxed while one is. In a build without the interposed entry points (the unit tests link the library's
 * objects next to the emulated driver, and call cuStreamBeginCapture there directly) the driver is always
 * asked: only hooks_capture.c, once the interposer makes its registrations (before its first capture query
 * can come), says through rz__capture_all_reported that every begun capture is reported here.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "common.h"
#include "capture.h"
#include "driver.h"
#include "fork.h"
#include "rz_annotate.h"

#define ORIGINS 64

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t g_origin[ORIGINS]; /* origin streams of the captures in progress (per-thread: by thread) */
static int g_norigins;
static int g_overflow;        /* more than ORIGINS at once were seen: ask the driver from then on */
static _Atomic int g_active; /* g_norigins + g_overflow, read without the lock */
static _Atomic int g_quiet;  /* the library's potentially unsafe calls in flight in the program's mode */
static RZ_TLS char t_per_thread; /* the per-thread default stream's identity: one per thread */

/* 1 where hooks_capture.c is linked in (libredzone.so) and said so, so every begun capture is reported. */
static _Atomic int g_all_reported;

void rz__capture_all_reported(void) { atomic_store_explicit(&g_all_reported, 1, memory_order_release); }

static uintptr_t key_of(rzcu_stream s) {
    return s == RZCU_STREAM_PER_THREAD ? (uintptr_t)&t_per_thread : (uintptr_t)s;
}

static void publish_locked(void) {
    atomic_store(&g_active, g_norigins + g_overflow); /* sequentially consistent: see rz__capture_quiet_enter */
}

static int find_locked(uintptr_t k) {
    for (int i = 0; i < g_norigins; i++)
        if (g_origin[i] == k)
            return i;
    return -1;
}

static void remove_locked(int i) {
    g_origin[i] = g_origin[--g_norigins];
    publish_locked();
}

int rz__capture_beginning(rzcu_stream s) {
    uintptr_t k = key_of(s);
    int added = 0;
    pthread_mutex_lock(&g_lock);
    if (find_locked(k) < 0) {
        if (g_norigins < ORIGINS) {
            g_origin[g_norigins++] = k;
            added = 1;
        } else {
            g_overflow = 1;
        }
    }
    publish_locked();
    pthread_mutex_unlock(&g_lock);
    /* The library's quiet sections in flight began without knowing of this capture (those that saw no
     * capture in progress run in the program's mode; a relaxed one may have found a stream not capturing):
     * the capture begins only once they are done. They wait for nothing of the program's but what the
     * program's own call, or the driver's, waits for too (a query, the library's own stream, a pointer
     * attribute; a context's work at a free, an exit, a context's end), or, under a debugger, the launch
     * whose check is judged inside its launch call. */
    while (atomic_load(&g_quiet) > 0)
        sched_yield();
    return added;
}

/* Dekker's handshake, both sides sequentially consistent: a section counts itself, then looks for a capture;
 * a capture publishes itself, then waits for the sections counted. Either the section sees the capture (and
 * relaxes the mode, or leaves out what no mode allows) or the capture waits for it. */
int rz__capture_quiet_enter(void) {
    atomic_fetch_add(&g_quiet, 1);
    return atomic_load(&g_active) == 0;
}

void rz__capture_quiet_leave(void) { atomic_fetch_sub(&g_quiet, 1); }

/* A fork child: the parent's captures are not its own, and the sections other threads had in flight never
 * end here (a capture begun in the child would wait for them for ever). */
static void after_fork_child(void) {
    pthread_mutex_init(&g_lock, NULL);
    g_norigins = 0;
    g_overflow = 0;
    atomic_store(&g_active, 0);
    atomic_store(&g_quiet, 0);
}

static void arm_fork(void) { rz__fork_register(NULL, NULL, after_fork_child); }

void rz__capture_annotate(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, arm_fork);
    RZ_ANNOTATE_ATOMIC(&g_active, sizeof g_active); /* helgrind: C11 atomics read without the lock */
    RZ_ANNOTATE_ATOMIC(&g_quiet, sizeof g_quiet);
}

void rz__capture_not_begun(rzcu_stream s, int added) {
    if (added)
        rz__capture_stream_gone(s);
}

void rz__capture_ended(rzcu_stream s) {
    uintptr_t k = key_of(s);
    pthread_mutex_lock(&g_lock);
    int i = find_locked(k);
    /* cuStreamEndCapture on a stream that is not the capture's origin leaves the capture going: keep it
     * until the driver says the stream captures nothing. */
    rzcu_capture_status status = 1;
    if (i >= 0 && rz__drv.cuStreamIsCapturing && rz__drv.cuStreamIsCapturing(s, &status) == RZCUDA_SUCCESS &&
        status == 0)
        remove_locked(i);
    pthread_mutex_unlock(&g_lock);
}

void rz__capture_stream_gone(rzcu_stream s) {
    uintptr_t k = key_of(s);
    pthread_mutex_lock(&g_lock);
    int i = find_locked(k);
    if (i >= 0)
        remove_locked(i);
    pthread_mutex_unlock(&g_lock);
}

int rz__capture_in_progress(void) { return atomic_load_explicit(&g_active, memory_order_acquire) != 0; }

int rz__stream_capturing(rzcu_stream s) {
    if (atomic_load_explicit(&g_active, memory_order_acquire) == 0 &&
        atomic_load_explicit(&g_all_reported, memory_order_relaxed))
        return 0; /* no capture in progress: no stream is capturing */
    rzcu_capture_status status = 0;
    return rz__drv.cuStreamIsCapturing && rz__drv.cuStreamIsCapturing(s, &status) == RZCUDA_SUCCESS && status != 0;
}
