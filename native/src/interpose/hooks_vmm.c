/*
 * Interposition of the device-memory entry points that take no band but compete with the quarantine for device
 * memory (libredzone only; hooks.h lists them for hooks.c's lookups): cuMemCreate, the physical memory of the
 * virtual memory management calls. Freed blocks the quarantine holds back (core/quarantine.c) are memory the
 * driver would have had again without redzone, so a cuMemCreate that runs out of it drains the quarantine and
 * is asked once more: the program never fails where it would succeed without redzone. Everything else is the
 * driver's call with the program's arguments and the driver's answer. (The other allocation entry points go
 * through core/alloc.c, which does the same; cuArray* are not interposed, docs/design.md says why.)
 * The pool calls whose answers held blocks of the program's own pools would change (core/quarantine_pool.c):
 * cuMemPoolGetAttribute's used memory less the bytes held for the pool; cuMemPoolTrimTo and cuMemPoolDestroy
 * after the pool's held blocks were given back.
 */
#include <string.h>

#include "common.h"
#include "driver.h"
#include "hooks.h"
#include "quarantine.h"
#include "thread_state.h"

rzcu_result cuMemCreate(rzcu_mem_generic_alloc_handle *handle, size_t size, const RZCU_MEM_ALLOCATION_PROP *prop,
                        unsigned long long flags) {
    rzcu_fn_cuMemCreate *real = REAL(cuMemCreate);
    if (real == NULL)
        return rz__hook_missing();
    rzcu_result r = real(handle, size, prop, flags);
    if (r != RZCUDA_ERROR_OUT_OF_MEMORY || rz__thread.in_hook)
        return r; /* re-entered (a driver calling its own exported name): straight through */
    rz__thread.in_hook = 1;
    if (rz__quarantine_drain()) /* freed blocks held back: give them up, then ask again */
        r = real(handle, size, prop, flags);
    rz__thread.in_hook = 0;
    return r;
}

rzcu_result cuMemPoolGetAttribute(rzcu_mem_pool pool, RZCU_MEMPOOL_ATTRIBUTE attr, void *value) {
    rzcu_fn_cuMemPoolGetAttribute *real = REAL(cuMemPoolGetAttribute);
    if (real == NULL)
        return rz__hook_missing();
    rzcu_result r = real(pool, attr, value);
    if (r == RZCUDA_SUCCESS && attr == RZCU_MEMPOOL_ATTR_USED_MEM_CURRENT && value) {
        uint64_t used, held = rz__quarantine_held_for(rz__quarantine_pool_release, pool);
        memcpy(&used, value, sizeof used);
        used = used > held ? used - held : 0; /* the held blocks are freed, for the program */
        memcpy(value, &used, sizeof used);
    }
    return r;
}

rzcu_result cuMemPoolTrimTo(rzcu_mem_pool pool, size_t min_bytes_to_keep) {
    rzcu_fn_cuMemPoolTrimTo *real = REAL(cuMemPoolTrimTo);
    if (real == NULL)
        return rz__hook_missing();
    if (!rz__thread.in_hook) {
        rz__thread.in_hook = 1;
        rz__quarantine_drain_for(rz__quarantine_pool_release, pool); /* freed blocks go back: the trim sees them */
        rz__thread.in_hook = 0;
    }
    return real(pool, min_bytes_to_keep);
}

rzcu_result cuMemPoolDestroy(rzcu_mem_pool pool) {
    rzcu_fn_cuMemPoolDestroy *real = REAL(cuMemPoolDestroy);
    if (real == NULL)
        return rz__hook_missing();
    if (!rz__thread.in_hook) {
        rz__thread.in_hook = 1;
        rz__quarantine_drain_for(rz__quarantine_pool_release, pool); /* none outstanding, as without redzone */
        rz__thread.in_hook = 0;
    }
    return real(pool);
}
