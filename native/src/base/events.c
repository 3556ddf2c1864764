/*
 * Events: what a lower layer tells whoever above subscribed, without naming them. The interposer raises
 * "context ending" and "context ended" once per context end; the band engine, the sync scans and the launch
 * policy each subscribe their handler (interpose/subscriptions.c, once). A handler runs on the raising
 * thread, in subscription order, so the order of the steps is the order of the subscriptions.
 *
 * Why no lock: subscribers are added before the first raise (under a pthread_once in the subscriber), and a
 * raise reads the count with acquire, so a raise sees every subscription completed before it.
 */
#include <stdatomic.h>

#include "events.h"

#define SUBSCRIBERS 8

static rz_event_fn *g_fn[RZ_EVENTS][SUBSCRIBERS];
static _Atomic unsigned g_n[RZ_EVENTS];

int rz__event_subscribe(rz_event_t ev, rz_event_fn *fn) {
    if ((unsigned)ev >= RZ_EVENTS || fn == NULL)
        return RZ_EINVAL;
    unsigned n = atomic_load_explicit(&g_n[ev], memory_order_relaxed);
    if (n == SUBSCRIBERS)
        return RZ_EINVAL;
    g_fn[ev][n] = fn;
    atomic_store_explicit(&g_n[ev], n + 1, memory_order_release);
    return RZ_OK;
}

void rz__event_raise(rz_event_t ev, void *arg) {
    unsigned n = atomic_load_explicit(&g_n[ev], memory_order_acquire);
    for (unsigned i = 0; i < n; i++)
        g_fn[ev][i](arg);
}
