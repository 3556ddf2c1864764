/*
 * Guard-page allocations (METRALE_REDZONE_GUARD): a selected allocation is mapped with the driver's virtual
 * memory management so that its buffer ends at the end of a mapping and the next granule is reserved and
 * unmapped: an access past the end faults on the device, where a band only shows it at the next check.
 * Which allocations are selected, their layout, their mapping and unmapping, and the lookup of the guard
 * zone whose mapping holds an address (copy checks).
 */
#include <stdatomic.h>
#include <stdint.h>

#include "common.h"
#include "guard_pages.h"
#include "options.h"
#include "registry.h"
#include "report.h"
#include "state.h"
#include "vmm.h"

int rz__guard_selected(const rz_options_t *o, uint64_t index) {
    if (o->guard.every)
        return index % o->guard.every == 0;
    for (uint32_t i = 0; i < o->guard.n; i++)
        if (o->guard.list[i] == index)
            return 1;
    return 0;
}

int rz__guard_available(void) {
    return rz__dev_has_vmm();
}

/* Where a guard zone's mapping starts, how long it is, and its reservation (mapping + one guard granule). */
void rz__guard_layout(const rz_zone_node_t *z, rz_devptr_t *base, size_t *mapped, size_t *reserved) {
    size_t gran = (size_t)1 << z->reserved0;
    size_t r256 = (z->user_bytes + 255) & ~(size_t)255;
    *mapped = (r256 + gran - 1) & ~(gran - 1);
    *base = z->ptr + r256 - *mapped;
    *reserved = *mapped + gran;
}

static rzcu_result guard_over_cap(void) {
    static atomic_int warned;
    if (!atomic_exchange(&warned, 1))
        rz__warn("guard pages: over the %llu-byte cap; further selected allocations get ordinary bands",
                 (unsigned long long)RZ_GUARD_CAP);
    return RZCUDA_ERROR_OUT_OF_MEMORY;
}

/*
 * Reserve the mapping plus one granule, back the mapping with physical memory, make it readable and
 * writable, and place the buffer so that it ends at the mapping's end but for its rounding up to 256 bytes
 * (alignment): those few bytes are an ordinary band. The granule after it stays reserved and unmapped, so
 * any access past the end faults. RZCUDA_SUCCESS, or the first failure with everything undone.
 */
rzcu_result rz__guard_alloc(size_t bytes, rz_zone_node_t *z) {
    if (bytes > RZ_GUARD_CAP - __atomic_load_n(&RZ_STATE.guard_bytes, __ATOMIC_RELAXED))
        return guard_over_cap(); /* cannot fit, whatever the granularity: no driver call */
    rzcu_device dev;
    rzcu_result r = rz__dev_ctx_device(&dev);
    if (r != RZCUDA_SUCCESS)
        return r;
    rzcu_mem_allocation_prop prop = {.type = RZCU_MEM_ALLOCATION_TYPE_PINNED,
                                     .location = {.type = RZCU_MEM_LOCATION_TYPE_DEVICE, .id = dev}};
    size_t gran = 0;
    r = rz__dev_vmm_granularity(&gran, &prop, RZCU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != RZCUDA_SUCCESS)
        return r;
    if (gran < 256 || (gran & (gran - 1)) || bytes > SIZE_MAX - 2 * gran)
        return RZCUDA_ERROR_NOT_SUPPORTED;
    z->reserved0 = (uint8_t)__builtin_ctzll(gran);
    z->user_bytes = bytes;
    rz_devptr_t base;
    size_t mapped, reserved;
    z->ptr = 0;
    rz__guard_layout(z, &base, &mapped, &reserved); /* with ptr 0: sizes only */
    uint64_t held = __atomic_add_fetch(&RZ_STATE.guard_bytes, reserved, __ATOMIC_RELAXED);
    if (held > RZ_GUARD_CAP) {
        __atomic_sub_fetch(&RZ_STATE.guard_bytes, reserved, __ATOMIC_RELAXED);
        return guard_over_cap();
    }
    rzcu_mem_generic_alloc_handle h = 0;
    rzcu_mem_access_desc access = {.location = prop.location, .flags = RZCU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    int reserved_ok = 0, mapped_ok = 0;
    r = rz__dev_vmm_reserve(&base, reserved, gran, 0, 0);
    reserved_ok = r == RZCUDA_SUCCESS;
    if (r == RZCUDA_SUCCESS)
        r = rz__dev_vmm_create(&h, mapped, &prop, 0);
    if (r == RZCUDA_SUCCESS) {
        r = rz__dev_vmm_map(base, mapped, 0, h, 0);
        mapped_ok = r == RZCUDA_SUCCESS;
        rz__dev_vmm_release(h); /* the mapping keeps the memory; unmapping frees it */
    }
    if (r == RZCUDA_SUCCESS)
        r = rz__dev_vmm_set_access(base, mapped, &access, 1);
    if (r != RZCUDA_SUCCESS) {
        if (mapped_ok)
            rz__dev_vmm_unmap(base, mapped);
        if (reserved_ok)
            rz__dev_vmm_address_free(base, reserved);
        __atomic_sub_fetch(&RZ_STATE.guard_bytes, reserved, __ATOMIC_RELAXED);
        return r;
    }
    z->ptr = base + mapped - ((bytes + 255) & ~(size_t)255);
    z->pad_bytes = (uint32_t)(((bytes + 255) & ~(size_t)255) - bytes);
    z->flags |= RZ_ZONE_GUARD;
    __atomic_add_fetch(&RZ_STATE.guard_live, 1, __ATOMIC_RELAXED);
    return RZCUDA_SUCCESS; /* its guard install is counted once, with the slack band (alloc_general) */
}

/*
 * The user pointers of live guard zones, so an address inside a guard mapping finds its zone (the registry
 * is keyed by user pointer, and the driver's cuMemGetAddressRange answers with the mapping). The cap on held
 * reservations bounds them: each holds at least two granules of 256 bytes or more. Under the registry lock.
 */
#define GUARD_SLOTS 2048
static rz_devptr_t g_guard_ptrs[GUARD_SLOTS];
static unsigned g_nguard;

void rz__guard_note(rz_devptr_t ptr, int live) {
    rz__registry_lock();
    if (live && g_nguard < GUARD_SLOTS) {
        g_guard_ptrs[g_nguard++] = ptr;
    } else if (!live) {
        for (unsigned i = 0; i < g_nguard; i++)
            if (g_guard_ptrs[i] == ptr) {
                g_guard_ptrs[i] = g_guard_ptrs[--g_nguard];
                break;
            }
    }
    rz__registry_unlock();
}

const rz_zone_node_t *rz__guard_zone_containing(rz_devptr_t p) {
    for (unsigned i = 0; i < g_nguard; i++) {
        const rz_zone_node_t *z = rz__registry_find(g_guard_ptrs[i]);
        if (z == NULL || !(z->flags & RZ_ZONE_GUARD))
            continue;
        rz_devptr_t base;
        size_t mapped, reserved;
        rz__guard_layout(z, &base, &mapped, &reserved);
        if (p >= base && p < base + mapped)
            return z;
    }
    return NULL;
}

rzcu_result rz__guard_free(const rz_zone_node_t *z) {
    rz_devptr_t base;
    size_t mapped, reserved;
    rz__guard_layout(z, &base, &mapped, &reserved);
    rzcu_result r = rz__dev_vmm_unmap(base, mapped);
    if (r == RZCUDA_SUCCESS)
        r = rz__dev_vmm_address_free(base, reserved);
    if (r == RZCUDA_SUCCESS) {
        __atomic_sub_fetch(&RZ_STATE.guard_bytes, reserved, __ATOMIC_RELAXED);
        __atomic_sub_fetch(&RZ_STATE.guard_live, 1, __ATOMIC_RELAXED);
    }
    return r;
}

