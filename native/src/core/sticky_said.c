/*
 * Saying once what a sticky error (device/sticky.c) left unchecked: the line that names the error and how
 * many zones could not be checked, written once per process, or left to the exit line.
 */
#include "common.h"
#include "sticky_said.h"
#include "registry.h"
#include "report.h"
#include "sticky.h"

static _Atomic int g_said; /* the line has been written (or the exit line says it) */

int rz__sticky_say(uint64_t held) {
    rzcu_result r = rz__sticky();
    if (r == RZCUDA_SUCCESS)
        return 0;
    if (atomic_exchange(&g_said, 1) == 0)
        rz__warn("%s ends all CUDA work in this process: %llu zones could not be checked", rz__cu_name(r),
                 (unsigned long long)(rz__registry_count() + held));
    return 1;
}

int rz__sticky_failed(rzcu_result r, uint64_t held) {
    if (!rz__cu_sticky(rz__sticky_note(r)))
        return 0;
    rz__sticky_say(held);
    return 1;
}

int rz__sticky_said(void) { return atomic_exchange(&g_said, 1); }
