/*
 * The entry points' names, by number (the order of enum emu_ep), and the number of a name: the bottom of
 * the emulated driver, used by the call counts, the fault injection, the host-wait counts and the traces.
 */
#include <string.h>

#include "emu_internal.h"

const char *const emu_ep_names[EP_COUNT] = {
#define EMU_EP_NAME(name, ret, params) #name,
#define EMU_EP_VARIANT_NAME(variant, base) #variant,
    RZCU_ENTRY_POINTS(EMU_EP_NAME) RZCU_PER_THREAD_VARIANTS(EMU_EP_VARIANT_NAME)
        CUDA_EMU_EXTRA_ENTRY_POINTS(EMU_EP_NAME)
#undef EMU_EP_NAME
#undef EMU_EP_VARIANT_NAME
};

int emu_ep_by_name(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < EP_COUNT; i++)
        if (strcmp(emu_ep_names[i], name) == 0)
            return i;
    return -1;
}
