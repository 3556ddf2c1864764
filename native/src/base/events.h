/*
 * Events a lower layer raises and higher ones subscribe to (events.c).
 */
#ifndef REDZONE_EVENTS_H
#define REDZONE_EVENTS_H

#include "common.h"

typedef enum {
    RZ_EVENT_CONTEXT_ENDING, /* a context is about to end (arg: its handle): its memory is still there */
    RZ_EVENT_CONTEXT_ENDED,  /* it ended (arg: its handle, which a later context may get) */
    RZ_EVENTS
} rz_event_t;

typedef void rz_event_fn(void *arg);

/* Add fn to the event's subscribers, called in the order they subscribed. Subscriptions are made once, before
 * the event is first raised (a fixed few: RZ_EINVAL when full). */
int rz__event_subscribe(rz_event_t ev, rz_event_fn *fn);

/* Call every subscriber of ev with arg, on this thread, in order. */
void rz__event_raise(rz_event_t ev, void *arg);

#endif /* REDZONE_EVENTS_H */
