/*
 * The driver's sticky error. cuda.h documents the kernel faults (CUDA_ERROR_ILLEGAL_ADDRESS, LAUNCH_FAILED,
 * ...) as leaving "the process in an inconsistent state and any further CUDA work will return the same
 * error": not one context, the process, and nothing but a new process clears it. So the first such result
 * any of the library's own driver calls gets is kept here, and from then on the library does no device work
 * of its own (no band read, write, settle, check or event: each would fail, and none may wait), says once
 * what it could not check (core/sticky_said.c), and leaves the program's calls to the driver, whose answers
 * reach the program unchanged.
 */
#include "common.h"
#include "sticky.h"

static _Atomic unsigned g_sticky; /* the first sticky result seen; 0 (CUDA_SUCCESS) until then */

int rz__cu_sticky(rzcu_result r) {
    switch (r) {
#define RZ_STICKY_CASE(name) case RZ##name:
        RZCU_STICKY_RESULTS(RZ_STICKY_CASE)
#undef RZ_STICKY_CASE
        return 1;
    default:
        return 0;
    }
}

rzcu_result rz__sticky_note(rzcu_result r) {
    if (RZ_UNLIKELY(rz__cu_sticky(r))) {
        unsigned none = 0;
        atomic_compare_exchange_strong(&g_sticky, &none, (unsigned)r);
    }
    return r;
}

rzcu_result rz__sticky(void) { return (rzcu_result)atomic_load_explicit(&g_sticky, memory_order_acquire); }
