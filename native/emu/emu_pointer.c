/*
 * The emulated driver's pointer queries: cuMemGetAddressRange, cuPointerGetAttribute and
 * cuPointerGetAttributes, for the attributes redzone asks for (CONTEXT, DEVICE_ORDINAL) and the allocation's
 * range (RANGE_START_ADDR, RANGE_SIZE: the whole allocation containing the address, as the driver answers);
 * other attributes are not emulated (CUDA_ERROR_NOT_SUPPORTED).
 */
#include "emu_internal.h"

#define DEVICE_INVALID (-2) /* CU_DEVICE_INVALID */

EMU_API rzcu_result cuMemGetAddressRange_v2(rzcu_deviceptr *pbase, size_t *psize, rzcu_deviceptr dptr)
{
    ENTER_CTX(cuMemGetAddressRange_v2, c);
    rzcu_deviceptr base;
    size_t size;
    if (!emu_mem_lookup(dptr, &base, &size))
        return RZCUDA_ERROR_NOT_FOUND;
    if (pbase)
        *pbase = base;
    if (psize)
        *psize = size;
    return RZCUDA_SUCCESS;
}

static bool emulated(rzcu_pointer_attribute a)
{
    return a == RZCU_POINTER_ATTRIBUTE_CONTEXT || a == RZCU_POINTER_ATTRIBUTE_DEVICE_ORDINAL ||
           a == RZCU_POINTER_ATTRIBUTE_RANGE_START_ADDR || a == RZCU_POINTER_ATTRIBUTE_RANGE_SIZE;
}

/* One emulated attribute of ptr into data: CUDA_ERROR_INVALID_VALUE when no device memory holds ptr (or, for
 * CONTEXT, when it is VMM memory, which no context allocated). */
static rzcu_result attribute_of(void *data, rzcu_pointer_attribute attribute, rzcu_deviceptr ptr)
{
    struct CUctx_st *owner;
    int device;
    if (!emu_mem_owner(ptr, &owner, &device))
        return RZCUDA_ERROR_INVALID_VALUE; /* not device memory the driver knows */
    if (attribute == RZCU_POINTER_ATTRIBUTE_RANGE_START_ADDR || attribute == RZCU_POINTER_ATTRIBUTE_RANGE_SIZE) {
        rzcu_deviceptr base;
        size_t size;
        if (!emu_mem_lookup(ptr, &base, &size))
            return RZCUDA_ERROR_INVALID_VALUE;
        if (attribute == RZCU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
            *(rzcu_deviceptr *)data = base;
        else
            *(size_t *)data = size;
        return RZCUDA_SUCCESS;
    }
    if (attribute == RZCU_POINTER_ATTRIBUTE_CONTEXT && !owner)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (attribute == RZCU_POINTER_ATTRIBUTE_CONTEXT)
        *(rzcu_context *)data = (rzcu_context)owner;
    else
        *(int *)data = device;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuPointerGetAttribute(void *data, rzcu_pointer_attribute attribute, rzcu_deviceptr ptr)
{
    ENTER(cuPointerGetAttribute);
    if (!data)
        return RZCUDA_ERROR_INVALID_VALUE;
    CHECK(emu_capture_unsafe_call()); /* the documentation is silent: the stricter reading */
    if (!emulated(attribute))
        return RZCUDA_ERROR_NOT_SUPPORTED;
    return attribute_of(data, attribute, ptr);
}

/*
 * Several attributes at once. Unlike cuPointerGetAttribute, an address that is no valid device pointer is
 * no error: as documented, its attributes get default values (CONTEXT NULL, RANGE_START_ADDR and RANGE_SIZE
 * 0; DEVICE_ORDINAL CU_DEVICE_INVALID, -2, the emulator's choice) and the call succeeds. NULL arrays or a
 * NULL data[i] are CUDA_ERROR_INVALID_VALUE, an attribute not emulated CUDA_ERROR_NOT_SUPPORTED, both before
 * anything is written.
 */
EMU_API rzcu_result cuPointerGetAttributes(unsigned int num, rzcu_pointer_attribute *attributes, void **data,
                                           rzcu_deviceptr ptr)
{
    ENTER(cuPointerGetAttributes);
    if (!attributes || !data)
        return RZCUDA_ERROR_INVALID_VALUE;
    CHECK(emu_capture_unsafe_call()); /* as cuPointerGetAttribute */
    for (unsigned i = 0; i < num; i++)
        if (!data[i])
            return RZCUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < num; i++)
        if (!emulated(attributes[i]))
            return RZCUDA_ERROR_NOT_SUPPORTED;
    for (unsigned i = 0; i < num; i++) {
        if (attribute_of(data[i], attributes[i], ptr) == RZCUDA_SUCCESS)
            continue;
        switch (attributes[i]) {
        case RZCU_POINTER_ATTRIBUTE_CONTEXT:
            *(rzcu_context *)data[i] = NULL;
            break;
        case RZCU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
            *(int *)data[i] = DEVICE_INVALID;
            break;
        case RZCU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
            *(rzcu_deviceptr *)data[i] = 0;
            break;
        default: /* RANGE_SIZE */
            *(size_t *)data[i] = 0;
            break;
        }
    }
    return RZCUDA_SUCCESS;
}
