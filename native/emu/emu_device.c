/* The device entry points: cuDeviceGet, cuDeviceGetCount, cuDeviceGetName, cuDeviceGetAttribute (the values
 * of an H100-class device), cuDeviceTotalMem. */
#define _GNU_SOURCE
#include <stdio.h>

#include "emu_engine.h"

EMU_API rzcu_result cuDeviceGet(rzcu_device *dev, int ordinal)
{
    ENTER(cuDeviceGet);
    if (!dev)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!emu_valid_device(ordinal))
        return RZCUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuDeviceGetCount(int *count)
{
    ENTER(cuDeviceGetCount);
    if (!count)
        return RZCUDA_ERROR_INVALID_VALUE;
    *count = emu_cfg.ndevices;
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuDeviceGetName(char *name, int len, rzcu_device dev)
{
    ENTER(cuDeviceGetName);
    if (!name || len <= 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!emu_valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "redzone emulated device %d", dev);
    return RZCUDA_SUCCESS;
}

/* Values of an H100-class device (compute capability 9.0). */
static bool device_attribute(rzcu_device_attribute attr, int dev, int *out)
{
    static const struct {
        unsigned attr;
        int value;
    } table[] = {
        {1, 1024},       /* MAX_THREADS_PER_BLOCK */
        {2, 1024},       {3, 1024}, {4, 64},           /* MAX_BLOCK_DIM_X/Y/Z */
        {5, 2147483647}, {6, 65535}, {7, 65535},       /* MAX_GRID_DIM_X/Y/Z */
        {8, 49152},      /* MAX_SHARED_MEMORY_PER_BLOCK */
        {9, 65536},      /* TOTAL_CONSTANT_MEMORY */
        {10, 32},        /* WARP_SIZE */
        {11, 2147483647}, /* MAX_PITCH */
        {12, 65536},     /* MAX_REGISTERS_PER_BLOCK */
        {13, 1980000},   /* CLOCK_RATE (kHz) */
        {14, 512},       /* TEXTURE_ALIGNMENT */
        {15, 1},         /* GPU_OVERLAP */
        {16, 132},       /* MULTIPROCESSOR_COUNT */
        {17, 0},         /* KERNEL_EXEC_TIMEOUT */
        {18, 0},         /* INTEGRATED */
        {19, 1},         /* CAN_MAP_HOST_MEMORY */
        {20, 0},         /* COMPUTE_MODE (default) */
        {30, 512},       /* SURFACE_ALIGNMENT */
        {31, 1},         /* CONCURRENT_KERNELS */
        {32, 0},         /* ECC_ENABLED */
        {34, 0},         /* PCI_DEVICE_ID */
        {35, 0},         /* TCC_DRIVER */
        {36, 2619000},   /* MEMORY_CLOCK_RATE (kHz) */
        {37, 5120},      /* GLOBAL_MEMORY_BUS_WIDTH */
        {38, 52428800},  /* L2_CACHE_SIZE */
        {39, 2048},      /* MAX_THREADS_PER_MULTIPROCESSOR */
        {40, 3},         /* ASYNC_ENGINE_COUNT */
        {41, 1},         /* UNIFIED_ADDRESSING */
        {50, 0},         /* PCI_DOMAIN_ID */
        {51, 32},        /* TEXTURE_PITCH_ALIGNMENT */
        {75, 9},         /* COMPUTE_CAPABILITY_MAJOR */
        {76, 0},         /* COMPUTE_CAPABILITY_MINOR */
        {78, 1},         /* STREAM_PRIORITIES_SUPPORTED */
        {79, 1},         /* GLOBAL_L1_CACHE_SUPPORTED */
        {80, 1},         /* LOCAL_L1_CACHE_SUPPORTED */
        {81, 233472},    /* MAX_SHARED_MEMORY_PER_MULTIPROCESSOR */
        {82, 65536},     /* MAX_REGISTERS_PER_MULTIPROCESSOR */
        {83, 1},         /* MANAGED_MEMORY */
        {84, 0},         /* MULTI_GPU_BOARD */
        {85, 0},         /* MULTI_GPU_BOARD_GROUP_ID */
        {86, 0},         /* HOST_NATIVE_ATOMIC_SUPPORTED */
        {88, 0},         /* PAGEABLE_MEMORY_ACCESS */
        {89, 1},         /* CONCURRENT_MANAGED_ACCESS */
        {90, 1},         /* COMPUTE_PREEMPTION_SUPPORTED */
        {95, 1},         /* COOPERATIVE_LAUNCH */
        {97, 232448},    /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
        {99, 1},         /* HOST_REGISTER_SUPPORTED */
        {106, 32},       /* MAX_BLOCKS_PER_MULTIPROCESSOR */
        {115, 1},        /* MEMORY_POOLS_SUPPORTED */
    };
    if (attr == 33) { /* PCI_BUS_ID */
        *out = dev + 1;
        return true;
    }
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].attr == attr) {
            *out = table[i].value;
            return true;
        }
    return false;
}

EMU_API rzcu_result cuDeviceGetAttribute(int *pi, rzcu_device_attribute attrib, rzcu_device dev)
{
    ENTER(cuDeviceGetAttribute);
    if (!pi)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!emu_valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    return device_attribute(attrib, dev, pi) ? RZCUDA_SUCCESS : RZCUDA_ERROR_INVALID_VALUE;
}

EMU_API rzcu_result cuDeviceTotalMem_v2(size_t *bytes, rzcu_device dev)
{
    ENTER(cuDeviceTotalMem_v2);
    if (!bytes)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!emu_valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    *bytes = emu_cfg.mem_bytes;
    return RZCUDA_SUCCESS;
}
