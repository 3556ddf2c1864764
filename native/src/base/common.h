/*
 * What every file of the library uses: the driver types (cu.h), the public API (redzone.h), the export, inline and
 * thread-local macros, and the always-on check.
 */
#ifndef REDZONE_COMMON_H
#define REDZONE_COMMON_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "cu.h"
#include "redzone.h"

#define RZ_EXPORT __attribute__((visibility("default")))
#define RZ_NOINLINE __attribute__((noinline, noclone))
/* Thread-locals of a preloaded library: initial-exec, so reading one is one instruction, not a call. */
#define RZ_TLS _Thread_local __attribute__((tls_model("initial-exec")))
#define RZ_LIKELY(x) __builtin_expect(!!(x), 1)
#define RZ_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Always-on check for invariants whose failure would corrupt the registry: report and abort. */
#define RZ_CHECK(cond)                                                                                       \
    do {                                                                                                     \
        if (RZ_UNLIKELY(!(cond)))                                                                            \
            rz__check_failed(__FILE__, __LINE__, #cond);                                                     \
    } while (0)
/* Debug-only assertion. */
#ifdef NDEBUG
#define RZ_ASSERT(cond) ((void)0)
#else
#define RZ_ASSERT(cond) RZ_CHECK(cond)
#endif
_Noreturn void rz__check_failed(const char *file, int line, const char *what);

#endif /* REDZONE_COMMON_H */
