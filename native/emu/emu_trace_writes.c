/*
 * CUDA_EMU_TRACE's `dev write` lines (see emu_devtrace.c) and cuEmuTraceSerial: an address is named by the
 * allocation containing it (device memory's lookup, emu_mem.c) and that allocation's serial number.
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "emu_internal.h"

void emu_trace_write(rzcu_deviceptr dst, size_t n)
{
    if (!emu_trace_on() || n == 0)
        return;
    rzcu_deviceptr base;
    unsigned long long k = 0;
    bool known = emu_mem_lookup(dst, &base, NULL);
    if (known)
        known = emu_trace_serial_of(base, &k);
    char what[128];
    if (known)
        snprintf(what, sizeof what, "write a%llu+%llu n=%zu", k, (unsigned long long)(dst - base), n);
    else
        snprintf(what, sizeof what, "write 0x%llx n=%zu", (unsigned long long)dst, n);
    emu_trace_emit(what);
}

int cuEmuTraceSerial(rzcu_deviceptr p, unsigned long long *serial, unsigned long long *offset)
{
    rzcu_deviceptr base;
    unsigned long long k = 0;
    if (!emu_trace_on() || !serial || !offset || !emu_mem_lookup(p, &base, NULL))
        return -1;
    if (!emu_trace_serial_of(base, &k))
        return -1;
    *serial = k;
    *offset = p - base;
    return 0;
}
