/*
 * libredzone.so as an NVTX injection library (issue 32 item 4): with NVTX_INJECTION64_PATH naming it (`redzone
 * run` sets it), a program's NVTX calls reach it. The core module's InitializeInjectionNvtx2 takes nothing
 * (every core call stays a no-op); the memory extension's InitializeInjectionNvtxExtension fills the slots of
 * the calls a pool makes for its sub-allocations (nvtxMemHeapRegister / Unregister / Reset,
 * nvtxMemRegionsRegister / Resize / Unregister / Name) with the functions below, which hand them to
 * policy/nvtx_regions.c. Virtual-address regions only; other region types, the process-wide heap, and
 * names that are not ASCII are ignored. The types are base/nvtx_types.h's.
 */
#include <stddef.h>

#include "common.h"
#include "nvtx_regions.h"
#include "nvtx_types.h"

/* The i-th element of an array of elements `stride` bytes apart (NVTX batches give the element size). */
static const void *element(const void *base, size_t stride, size_t i) {
    return (const char *)base + i * stride;
}

static rznvtx_heap heap_register(rznvtx_domain domain, const rznvtx_heap_desc *desc) {
    (void)domain;
    if (!desc || desc->type != RZNVTX_MEM_TYPE_VIRTUAL_ADDRESS || !desc->typeSpecificDesc ||
        desc->typeSpecificDescSize < sizeof(rznvtx_virtual_range_desc))
        return NULL;
    const rznvtx_virtual_range_desc *r = desc->typeSpecificDesc;
    return (rznvtx_heap)rz__nvtx_heap_register((uint64_t)(uintptr_t)r->ptr, r->size);
}

static void heap_unregister(rznvtx_domain domain, rznvtx_heap heap) {
    (void)domain;
    if (heap)
        rz__nvtx_heap_unregister(heap);
}

static void heap_reset(rznvtx_domain domain, rznvtx_heap heap) {
    (void)domain;
    if (heap)
        rz__nvtx_heap_reset(heap);
}

static void regions_register(rznvtx_domain domain, const rznvtx_regions_register_batch *b) {
    (void)domain;
    if (!b || b->regionType != RZNVTX_MEM_TYPE_VIRTUAL_ADDRESS || !b->regionDescElements ||
        b->regionDescElementSize < sizeof(rznvtx_virtual_range_desc))
        return;
    for (size_t i = 0; i < b->regionCount; i++) {
        const rznvtx_virtual_range_desc *r = element(b->regionDescElements, b->regionDescElementSize, i);
        if (b->heap)
            rz__nvtx_region_register(b->heap, (uint64_t)(uintptr_t)r->ptr, r->size);
        if (b->regionHandleElementsOut)
            b->regionHandleElementsOut[i] = (rznvtx_region)(uintptr_t)r->ptr; /* a region's handle: its pointer */
    }
}

static void regions_resize(rznvtx_domain domain, const rznvtx_regions_resize_batch *b) {
    (void)domain;
    if (!b || b->regionType != RZNVTX_MEM_TYPE_VIRTUAL_ADDRESS || !b->regionDescElements ||
        b->regionDescElementSize < sizeof(rznvtx_virtual_range_desc))
        return;
    for (size_t i = 0; i < b->regionDescCount; i++) {
        const rznvtx_virtual_range_desc *r = element(b->regionDescElements, b->regionDescElementSize, i);
        rz__nvtx_region_resize((uint64_t)(uintptr_t)r->ptr, r->size);
    }
}

static uint64_t ref_pointer(uint32_t type, rznvtx_region_ref ref) {
    return type == RZNVTX_MEM_REGION_REF_TYPE_HANDLE ? (uint64_t)(uintptr_t)ref.handle
                                                     : (uint64_t)(uintptr_t)ref.pointer; /* handle == pointer */
}

static void regions_unregister(rznvtx_domain domain, const rznvtx_regions_unregister_batch *b) {
    (void)domain;
    if (!b || !b->refElements || b->refElementSize < sizeof(rznvtx_region_ref))
        return;
    for (size_t i = 0; i < b->refCount; i++) {
        const rznvtx_region_ref *ref = element(b->refElements, b->refElementSize, i);
        rz__nvtx_region_unregister(ref_pointer(b->refType, *ref));
    }
}

static void regions_name(rznvtx_domain domain, const rznvtx_regions_name_batch *b) {
    (void)domain;
    if (!b || !b->regionElements || b->regionElementSize < sizeof(rznvtx_region_name_desc))
        return;
    for (size_t i = 0; i < b->regionCount; i++) {
        const rznvtx_region_name_desc *d = element(b->regionElements, b->regionElementSize, i);
        if (d->nameType == RZNVTX_MESSAGE_TYPE_ASCII)
            rz__nvtx_region_name(ref_pointer(d->regionRefType, d->region), d->name.ascii);
    }
}

/* The core module: nothing taken, success (its calls become no-ops instead of an error). */
RZ_EXPORT int InitializeInjectionNvtx2(void *get_export_table);
int InitializeInjectionNvtx2(void *get_export_table) {
    (void)get_export_table;
    return 1;
}

/* An extension module: the memory extension's slots filled; any other module left alone (success, so the
 * program's other NVTX extensions keep working as no-ops). */
RZ_EXPORT int InitializeInjectionNvtxExtension(rznvtx_module_info *info);
int InitializeInjectionNvtxExtension(rznvtx_module_info *info) {
    if (!info || info->moduleId != RZNVTX_EXT_MODULEID_MEM || info->compatId != RZNVTX_EXT_COMPATID_MEM)
        return 1;
    for (size_t s = 0; s < info->segmentsCount; s++) {
        rznvtx_module_segment *seg = &info->segments[s];
        if (seg->segmentId != 1 || seg->slotCount <= RZNVTX_CBID_REGIONS_NAME)
            continue;
        seg->functionSlots[RZNVTX_CBID_HEAP_REGISTER] = (intptr_t)heap_register;
        seg->functionSlots[RZNVTX_CBID_HEAP_UNREGISTER] = (intptr_t)heap_unregister;
        seg->functionSlots[RZNVTX_CBID_HEAP_RESET] = (intptr_t)heap_reset;
        seg->functionSlots[RZNVTX_CBID_REGIONS_REGISTER] = (intptr_t)regions_register;
        seg->functionSlots[RZNVTX_CBID_REGIONS_RESIZE] = (intptr_t)regions_resize;
        seg->functionSlots[RZNVTX_CBID_REGIONS_UNREGISTER] = (intptr_t)regions_unregister;
        seg->functionSlots[RZNVTX_CBID_REGIONS_NAME] = (intptr_t)regions_name;
    }
    return 1;
}
