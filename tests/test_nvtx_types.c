/*
 * base/nvtx_types.h against the toolkit's nvtx3 headers (issue 32 item 4): every struct redzone declares has
 * the size and field offsets of NVTX's, every constant its value. Checked when this compiles (the asserts are
 * static) and counted when it runs. Built only where the headers are found (tests/CMakeLists.txt).
 */
#include <stddef.h>
#include <stdio.h>

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

#include "nvtx_types.h"

#define SAME_SIZE(ours, theirs) _Static_assert(sizeof(ours) == sizeof(theirs), #ours " vs " #theirs);
#define SAME_FIELD(ours, theirs, f)                                                                          \
    _Static_assert(offsetof(ours, f) == offsetof(theirs, f) && sizeof(((ours *)0)->f) == sizeof(((theirs *)0)->f), \
                   #ours "." #f);
#define SAME_VALUE(ours, theirs) _Static_assert((ours) == (theirs), #ours " vs " #theirs);

SAME_SIZE(rznvtx_module_segment, nvtxExtModuleSegment_t)
SAME_FIELD(rznvtx_module_segment, nvtxExtModuleSegment_t, segmentId)
SAME_FIELD(rznvtx_module_segment, nvtxExtModuleSegment_t, slotCount)
SAME_FIELD(rznvtx_module_segment, nvtxExtModuleSegment_t, functionSlots)
SAME_SIZE(rznvtx_module_info, nvtxExtModuleInfo_t)
SAME_FIELD(rznvtx_module_info, nvtxExtModuleInfo_t, nvtxVer)
SAME_FIELD(rznvtx_module_info, nvtxExtModuleInfo_t, structSize)
SAME_FIELD(rznvtx_module_info, nvtxExtModuleInfo_t, moduleId)
SAME_FIELD(rznvtx_module_info, nvtxExtModuleInfo_t, compatId)
SAME_FIELD(rznvtx_module_info, nvtxExtModuleInfo_t, segmentsCount)
SAME_FIELD(rznvtx_module_info, nvtxExtModuleInfo_t, segments)
SAME_FIELD(rznvtx_module_info, nvtxExtModuleInfo_t, getExportFunction)
SAME_FIELD(rznvtx_module_info, nvtxExtModuleInfo_t, extInfo)
SAME_SIZE(rznvtx_virtual_range_desc, nvtxMemVirtualRangeDesc_t)
SAME_FIELD(rznvtx_virtual_range_desc, nvtxMemVirtualRangeDesc_t, size)
SAME_FIELD(rznvtx_virtual_range_desc, nvtxMemVirtualRangeDesc_t, ptr)
SAME_SIZE(rznvtx_heap_desc, nvtxMemHeapDesc_t)
SAME_FIELD(rznvtx_heap_desc, nvtxMemHeapDesc_t, extCompatID)
SAME_FIELD(rznvtx_heap_desc, nvtxMemHeapDesc_t, structSize)
SAME_FIELD(rznvtx_heap_desc, nvtxMemHeapDesc_t, reserved0)
SAME_FIELD(rznvtx_heap_desc, nvtxMemHeapDesc_t, usage)
SAME_FIELD(rznvtx_heap_desc, nvtxMemHeapDesc_t, type)
SAME_FIELD(rznvtx_heap_desc, nvtxMemHeapDesc_t, typeSpecificDescSize)
SAME_FIELD(rznvtx_heap_desc, nvtxMemHeapDesc_t, typeSpecificDesc)
SAME_FIELD(rznvtx_heap_desc, nvtxMemHeapDesc_t, category)
SAME_FIELD(rznvtx_heap_desc, nvtxMemHeapDesc_t, messageType)
SAME_FIELD(rznvtx_heap_desc, nvtxMemHeapDesc_t, message)
SAME_SIZE(rznvtx_regions_register_batch, nvtxMemRegionsRegisterBatch_t)
SAME_FIELD(rznvtx_regions_register_batch, nvtxMemRegionsRegisterBatch_t, extCompatID)
SAME_FIELD(rznvtx_regions_register_batch, nvtxMemRegionsRegisterBatch_t, structSize)
SAME_FIELD(rznvtx_regions_register_batch, nvtxMemRegionsRegisterBatch_t, regionType)
SAME_FIELD(rznvtx_regions_register_batch, nvtxMemRegionsRegisterBatch_t, heap)
SAME_FIELD(rznvtx_regions_register_batch, nvtxMemRegionsRegisterBatch_t, regionCount)
SAME_FIELD(rznvtx_regions_register_batch, nvtxMemRegionsRegisterBatch_t, regionDescElementSize)
SAME_FIELD(rznvtx_regions_register_batch, nvtxMemRegionsRegisterBatch_t, regionDescElements)
SAME_FIELD(rznvtx_regions_register_batch, nvtxMemRegionsRegisterBatch_t, regionHandleElementsOut)
SAME_SIZE(rznvtx_regions_resize_batch, nvtxMemRegionsResizeBatch_t)
SAME_FIELD(rznvtx_regions_resize_batch, nvtxMemRegionsResizeBatch_t, extCompatID)
SAME_FIELD(rznvtx_regions_resize_batch, nvtxMemRegionsResizeBatch_t, structSize)
SAME_FIELD(rznvtx_regions_resize_batch, nvtxMemRegionsResizeBatch_t, regionType)
SAME_FIELD(rznvtx_regions_resize_batch, nvtxMemRegionsResizeBatch_t, regionDescCount)
SAME_FIELD(rznvtx_regions_resize_batch, nvtxMemRegionsResizeBatch_t, regionDescElementSize)
SAME_FIELD(rznvtx_regions_resize_batch, nvtxMemRegionsResizeBatch_t, regionDescElements)
SAME_SIZE(rznvtx_regions_unregister_batch, nvtxMemRegionsUnregisterBatch_t)
SAME_FIELD(rznvtx_regions_unregister_batch, nvtxMemRegionsUnregisterBatch_t, extCompatID)
SAME_FIELD(rznvtx_regions_unregister_batch, nvtxMemRegionsUnregisterBatch_t, structSize)
SAME_FIELD(rznvtx_regions_unregister_batch, nvtxMemRegionsUnregisterBatch_t, refType)
SAME_FIELD(rznvtx_regions_unregister_batch, nvtxMemRegionsUnregisterBatch_t, refCount)
SAME_FIELD(rznvtx_regions_unregister_batch, nvtxMemRegionsUnregisterBatch_t, refElementSize)
SAME_FIELD(rznvtx_regions_unregister_batch, nvtxMemRegionsUnregisterBatch_t, refElements)
SAME_SIZE(rznvtx_region_name_desc, nvtxMemRegionNameDesc_t)
SAME_FIELD(rznvtx_region_name_desc, nvtxMemRegionNameDesc_t, regionRefType)
SAME_FIELD(rznvtx_region_name_desc, nvtxMemRegionNameDesc_t, nameType)
SAME_FIELD(rznvtx_region_name_desc, nvtxMemRegionNameDesc_t, region)
SAME_FIELD(rznvtx_region_name_desc, nvtxMemRegionNameDesc_t, name)
SAME_FIELD(rznvtx_region_name_desc, nvtxMemRegionNameDesc_t, category)
SAME_FIELD(rznvtx_region_name_desc, nvtxMemRegionNameDesc_t, reserved0)
SAME_SIZE(rznvtx_regions_name_batch, nvtxMemRegionsNameBatch_t)
SAME_FIELD(rznvtx_regions_name_batch, nvtxMemRegionsNameBatch_t, extCompatID)
SAME_FIELD(rznvtx_regions_name_batch, nvtxMemRegionsNameBatch_t, structSize)
SAME_FIELD(rznvtx_regions_name_batch, nvtxMemRegionsNameBatch_t, reserved0)
SAME_FIELD(rznvtx_regions_name_batch, nvtxMemRegionsNameBatch_t, regionCount)
SAME_FIELD(rznvtx_regions_name_batch, nvtxMemRegionsNameBatch_t, regionElementSize)
SAME_FIELD(rznvtx_regions_name_batch, nvtxMemRegionsNameBatch_t, regionElements)
SAME_FIELD(rznvtx_regions_name_batch, nvtxMemRegionsNameBatch_t, reserved1)
SAME_VALUE(RZNVTX_EXT_MODULEID_MEM, NVTX_EXT_MODULEID_MEM)
SAME_VALUE(RZNVTX_EXT_COMPATID_MEM, NVTX_EXT_COMPATID_MEM)
SAME_VALUE(RZNVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR, NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR)
SAME_VALUE(RZNVTX_MEM_HEAP_USAGE_TYPE_LAYOUT, NVTX_MEM_HEAP_USAGE_TYPE_LAYOUT)
SAME_VALUE(RZNVTX_MEM_TYPE_VIRTUAL_ADDRESS, NVTX_MEM_TYPE_VIRTUAL_ADDRESS)
SAME_VALUE(RZNVTX_MEM_REGION_REF_TYPE_POINTER, NVTX_MEM_REGION_REF_TYPE_POINTER)
SAME_VALUE(RZNVTX_MEM_REGION_REF_TYPE_HANDLE, NVTX_MEM_REGION_REF_TYPE_HANDLE)
SAME_VALUE(RZNVTX_MESSAGE_TYPE_ASCII, NVTX_MESSAGE_TYPE_ASCII)
SAME_VALUE(RZNVTX_CBID_HEAP_REGISTER, NVTX3EXT_CBID_nvtxMemHeapRegister)
SAME_VALUE(RZNVTX_CBID_HEAP_UNREGISTER, NVTX3EXT_CBID_nvtxMemHeapUnregister)
SAME_VALUE(RZNVTX_CBID_HEAP_RESET, NVTX3EXT_CBID_nvtxMemHeapReset)
SAME_VALUE(RZNVTX_CBID_REGIONS_REGISTER, NVTX3EXT_CBID_nvtxMemRegionsRegister)
SAME_VALUE(RZNVTX_CBID_REGIONS_RESIZE, NVTX3EXT_CBID_nvtxMemRegionsResize)
SAME_VALUE(RZNVTX_CBID_REGIONS_UNREGISTER, NVTX3EXT_CBID_nvtxMemRegionsUnregister)
SAME_VALUE(RZNVTX_CBID_REGIONS_NAME, NVTX3EXT_CBID_nvtxMemRegionsName)
SAME_SIZE(rznvtx_region_ref, nvtxMemRegionRef_t)
SAME_SIZE(rznvtx_message_value, nvtxMessageValue_t)

int main(void) {
    printf("nvtx_types: 82 sizes, offsets and values agree with the toolkit's nvtx3 headers\n");
    return 0;
}
