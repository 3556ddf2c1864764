/*
 * Annotations for valgrind's helgrind, compiled in only when the build defines REDZONE_VALGRIND (CMake
 * option REDZONE_VALGRIND; the tree scripts/test runs helgrind on): helgrind understands pthread
 * primitives but neither the registry's futex lock nor C11 atomics, so without these every access the
 * lock protects, and every atomic counter, would be reported as a race. Elsewhere every macro is empty and
 * the library is unchanged. (ThreadSanitizer needs none of this: it models atomics.) The emulated driver
 * uses them too (its streams' completion counters).
 */
#ifndef REDZONE_ANNOTATE_H
#define REDZONE_ANNOTATE_H

#ifdef REDZONE_VALGRIND
#include <valgrind/helgrind.h>
/* A lock built from atomics: taken exclusively, released. */
#define RZ_ANNOTATE_LOCK_ACQUIRED(lock) ANNOTATE_RWLOCK_ACQUIRED(lock, 1)
#define RZ_ANNOTATE_LOCK_RELEASED(lock) ANNOTATE_RWLOCK_RELEASED(lock, 1)
/* An object only ever accessed through atomic operations (counters, hints read without the lock). */
#define RZ_ANNOTATE_ATOMIC(addr, size) ANNOTATE_BENIGN_RACE_SIZED(addr, size, "C11 atomic")
/* A release store (BEFORE, just ahead of it) and the acquire loads that see it (AFTER, just after them). */
#define RZ_ANNOTATE_HAPPENS_BEFORE(addr) ANNOTATE_HAPPENS_BEFORE(addr)
#define RZ_ANNOTATE_HAPPENS_AFTER(addr) ANNOTATE_HAPPENS_AFTER(addr)
#else
#define RZ_ANNOTATE_LOCK_ACQUIRED(lock) ((void)0)
#define RZ_ANNOTATE_LOCK_RELEASED(lock) ((void)0)
#define RZ_ANNOTATE_ATOMIC(addr, size) ((void)0)
#define RZ_ANNOTATE_HAPPENS_BEFORE(addr) ((void)0)
#define RZ_ANNOTATE_HAPPENS_AFTER(addr) ((void)0)
#endif

#endif /* REDZONE_ANNOTATE_H */
