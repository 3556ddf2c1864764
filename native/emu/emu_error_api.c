/* cuGetErrorName and cuGetErrorString (no cuInit needed), from the error table of emu_errors.c. */
#define _GNU_SOURCE

#include "emu_internal.h"

EMU_API rzcu_result cuGetErrorName(rzcu_result error, const char **pstr)
{
    ENTER_NOINIT(cuGetErrorName);
    if (!pstr)
        return RZCUDA_ERROR_INVALID_VALUE;
    *pstr = emu_error_name(error);
    return *pstr ? RZCUDA_SUCCESS : RZCUDA_ERROR_INVALID_VALUE;
}

EMU_API rzcu_result cuGetErrorString(rzcu_result error, const char **pstr)
{
    ENTER_NOINIT(cuGetErrorString);
    if (!pstr)
        return RZCUDA_ERROR_INVALID_VALUE;
    *pstr = emu_error_string(error);
    return *pstr ? RZCUDA_SUCCESS : RZCUDA_ERROR_INVALID_VALUE;
}
