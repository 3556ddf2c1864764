/*
 * The registrations the interposer makes with the layers below (subscriptions.c).
 */
#ifndef REDZONE_SUBSCRIPTIONS_H
#define REDZONE_SUBSCRIPTIONS_H

/* Make them, once (later calls return at once): at the first cuInit or entry-point lookup (hooks_init.c), and
 * before the interposer first raises an event. */
void rz__subscriptions_make(void);

#endif /* REDZONE_SUBSCRIPTIONS_H */
