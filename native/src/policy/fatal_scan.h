/*
 * The fatal-signal scan (fatal_scan.c).
 */
#ifndef REDZONE_FATAL_SCAN_H
#define REDZONE_FATAL_SCAN_H

#include "common.h"

/* Put the fatal-signal scan's handler in front of the program's dispositions, and make this process the one
 * whose zones the final scan checks (fatal_scan.c; again in a forked child at its own first allocation). */
void rz__fatal_arm(void);

/* The program's sigaction for the signals the final scan hooks (hooks_signal.c calls it for those only): it
 * sees and sets its own dispositions; redzone's handler stays in front and calls the program's. As
 * sigaction: 0, or -1 with errno. */
struct sigaction;
int rz__fatal_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/* Whether sig is one of them (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT). */
int rz__fatal_signal(int sig);

/* The next definition of sigaction after libredzone (libc's), for every other signal. */
int rz__sigaction_next(int sig, const struct sigaction *act, struct sigaction *old);

#endif /* REDZONE_FATAL_SCAN_H */
