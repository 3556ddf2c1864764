/*
 * cuInit and cuDriverGetVersion: the one place that initialises every part of the emulated driver (the
 * handle tables, device memory), once, at the first cuInit.
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "emu_engine.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static rzcu_result init_result;

static void init_tables(void)
{
    if (!emu_contexts_init() || !emu_streams_init()) {
        fprintf(stderr, "cuda-emu: warning: cannot reserve handle tables\n");
        init_result = RZCUDA_ERROR_OUT_OF_MEMORY;
        return;
    }
    init_result = emu_mem_init();
    if (init_result == RZCUDA_SUCCESS && !(emu_modules_init() && emu_libraries_init() && emu_graphs_init() && emu_events_init()))
        init_result = RZCUDA_ERROR_OUT_OF_MEMORY;
}

EMU_API rzcu_result cuInit(unsigned int flags)
{
    ENTER_NOINIT(cuInit);
    if (flags != 0)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (emu_cfg.ndevices == 0)
        return RZCUDA_ERROR_NO_DEVICE; /* every call, as the NVIDIA driver's on a machine without a GPU */
    pthread_once(&init_once, init_tables);
    if (init_result != RZCUDA_SUCCESS)
        return init_result;
    emu_set_initialized();
    emu_note_init();
    return RZCUDA_SUCCESS;
}

EMU_API rzcu_result cuDriverGetVersion(int *version)
{
    ENTER_NOINIT(cuDriverGetVersion);
    if (!version)
        return RZCUDA_ERROR_INVALID_VALUE;
    *version = CUDA_EMU_DRIVER_VERSION;
    return RZCUDA_SUCCESS;
}
