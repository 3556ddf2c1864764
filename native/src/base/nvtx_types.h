/*
 * The NVTX types redzone needs as an NVTX injection library (issue 32 item 4), declared here so that the
 * library builds where the toolkit's nvtx3 headers are absent, as cu.h does for the driver: the extension
 * module handshake (nvtxExtTypes.h: nvtxExtModuleSegment_t, nvtxExtModuleInfo_t) and the memory extension's
 * descriptors and callback ids (nvToolsExtMem.h, NVTX_EXT_COMPATID_MEM 0x0102). Same layouts and values;
 * tests/test_nvtx_types.c checks each against the toolkit's headers where they are installed.
 */
#ifndef REDZONE_NVTX_TYPES_H
#define REDZONE_NVTX_TYPES_H

#include <stddef.h>
#include <stdint.h>

/* ---- nvtxExtTypes.h: what InitializeInjectionNvtxExtension receives ---- */
typedef intptr_t (*rznvtx_get_export_fn)(uint32_t export_function_id);

typedef struct rznvtx_module_segment {
    size_t segmentId;
    size_t slotCount;
    intptr_t *functionSlots;
} rznvtx_module_segment;

typedef struct rznvtx_module_info {
    uint16_t nvtxVer;
    uint16_t structSize;
    uint16_t moduleId;
    uint16_t compatId;
    size_t segmentsCount;
    rznvtx_module_segment *segments;
    rznvtx_get_export_fn getExportFunction;
    const void *extInfo;
} rznvtx_module_info;

/* ---- nvToolsExtMem.h ---- */
#define RZNVTX_EXT_MODULEID_MEM 1
#define RZNVTX_EXT_COMPATID_MEM 0x0102

#define RZNVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR 0x1
#define RZNVTX_MEM_HEAP_USAGE_TYPE_LAYOUT 0x2
#define RZNVTX_MEM_TYPE_VIRTUAL_ADDRESS 0x1
#define RZNVTX_MEM_REGION_REF_TYPE_POINTER 0x1
#define RZNVTX_MEM_REGION_REF_TYPE_HANDLE 0x2
#define RZNVTX_MESSAGE_TYPE_ASCII 1 /* nvToolsExt.h's nvtxMessageType_t */

/* Opaque handles (pointers to incomplete structs there). */
typedef struct rznvtx_domain_st *rznvtx_domain;      /* nvtxDomainHandle_t */
typedef struct rznvtx_heap_st *rznvtx_heap;          /* nvtxMemHeapHandle_t */
typedef struct rznvtx_region_st *rznvtx_region;      /* nvtxMemRegionHandle_t */

typedef union rznvtx_message_value { /* nvtxMessageValue_t */
    const char *ascii;
    const void *unicode; /* const wchar_t * */
    const void *registered; /* nvtxStringHandle_t */
} rznvtx_message_value;

typedef union rznvtx_region_ref { /* nvtxMemRegionRef_t */
    const void *pointer;
    rznvtx_region handle;
} rznvtx_region_ref;

typedef struct rznvtx_virtual_range_desc { /* nvtxMemVirtualRangeDesc_t */
    size_t size;
    const void *ptr;
} rznvtx_virtual_range_desc;

typedef struct rznvtx_heap_desc { /* nvtxMemHeapDesc_t */
    uint16_t extCompatID;
    uint16_t structSize;
    uint32_t reserved0;
    uint32_t usage;
    uint32_t type;
    size_t typeSpecificDescSize;
    const void *typeSpecificDesc;
    uint32_t category;
    uint32_t messageType;
    rznvtx_message_value message;
} rznvtx_heap_desc;

typedef struct rznvtx_regions_register_batch { /* nvtxMemRegionsRegisterBatch_t */
    uint16_t extCompatID;
    uint16_t structSize;
    uint32_t regionType;
    rznvtx_heap heap;
    size_t regionCount;
    size_t regionDescElementSize;
    const void *regionDescElements;
    rznvtx_region *regionHandleElementsOut;
} rznvtx_regions_register_batch;

typedef struct rznvtx_regions_resize_batch { /* nvtxMemRegionsResizeBatch_t */
    uint16_t extCompatID;
    uint16_t structSize;
    uint32_t regionType;
    size_t regionDescCount;
    size_t regionDescElementSize;
    const void *regionDescElements;
} rznvtx_regions_resize_batch;

typedef struct rznvtx_regions_unregister_batch { /* nvtxMemRegionsUnregisterBatch_t */
    uint16_t extCompatID;
    uint16_t structSize;
    uint32_t refType;
    size_t refCount;
    size_t refElementSize;
    const rznvtx_region_ref *refElements;
} rznvtx_regions_unregister_batch;

typedef struct rznvtx_region_name_desc { /* nvtxMemRegionNameDesc_t */
    uint32_t regionRefType;
    uint32_t nameType;
    rznvtx_region_ref region;
    rznvtx_message_value name;
    uint32_t category;
    uint32_t reserved0;
} rznvtx_region_name_desc;

typedef struct rznvtx_regions_name_batch { /* nvtxMemRegionsNameBatch_t */
    uint16_t extCompatID;
    uint16_t structSize;
    uint32_t reserved0;
    size_t regionCount;
    size_t regionElementSize;
    const rznvtx_region_name_desc *regionElements;
    size_t reserved1;
} rznvtx_regions_name_batch;

/* The memory extension's callback ids: the slot of each in the module's one segment (NVTX3EXT_CBID_*). */
#define RZNVTX_CBID_HEAP_REGISTER 0
#define RZNVTX_CBID_HEAP_UNREGISTER 1
#define RZNVTX_CBID_HEAP_RESET 2
#define RZNVTX_CBID_REGIONS_REGISTER 3
#define RZNVTX_CBID_REGIONS_RESIZE 4
#define RZNVTX_CBID_REGIONS_UNREGISTER 5
#define RZNVTX_CBID_REGIONS_NAME 6

#endif /* REDZONE_NVTX_TYPES_H */
