/*
 * The one owner of fork (fork.c): a single pthread_atfork registration, through which every module's
 * handlers run.
 */
#ifndef REDZONE_FORK_H
#define REDZONE_FORK_H

#include "common.h"

/*
 * Run these around every fork from now on (any may be NULL), as pthread_atfork would: prepare handlers in
 * the reverse order of registration, parent and child handlers in registration order. A module registers
 * once (pthread_once), at its first use, never in a constructor. The first registration of the process
 * calls pthread_atfork, which may allocate: never on the fatal-signal path.
 */
void rz__fork_register(void (*prepare)(void), void (*parent)(void), void (*child)(void));

#endif /* REDZONE_FORK_H */
