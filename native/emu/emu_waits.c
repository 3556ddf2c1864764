/*
 * Host waits and kernel durations: what a program on a GPU would feel that the emulated device, finishing
 * kernels at once, hides. A host wait is an entry point call that, by its contract, returns only once device
 * work has completed (whatever its name: a synchronisation of a context, stream or recorded event, a
 * synchronous copy, an asynchronous copy into pageable host memory, a synchronous cuMemFree, cuMemFreeHost,
 * cuMemHostUnregister, a context's end): counted once per call, whether or not the work had already
 * completed, so the count is the same on every run. CUDA_EMU_KERNEL_NS gives every kernel a duration (the
 * worker sleeps that long after running it), so a hidden wait also shows in wall time.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "emu_entry.h"
#include "emu_internal.h"

static atomic_ullong g_waits[EP_COUNT];
static atomic_ullong g_kernel_ns;
/* The calling thread's entry point call: its serial number (0: none yet, a worker) and which one. */
static _Thread_local unsigned long long t_serial, t_counted;
static _Thread_local int t_ep = -1;

void emu_waits_enter(int ep)
{
    t_serial++;
    t_ep = ep;
}

void emu_host_wait(void)
{
    if (t_serial == 0 || t_counted == t_serial || t_ep < 0)
        return; /* not in an entry point call (a stream's worker), or this call counted already */
    t_counted = t_serial;
    atomic_fetch_add_explicit(&g_waits[t_ep], 1, memory_order_relaxed);
}

void emu_waits_reset(void)
{
    for (int i = 0; i < EP_COUNT; i++)
        atomic_store_explicit(&g_waits[i], 0, memory_order_relaxed);
}

void emu_waits_print(FILE *f)
{
    unsigned long long all = 0;
    for (int i = 0; i < EP_COUNT; i++) {
        unsigned long long n = atomic_load(&g_waits[i]);
        if (n)
            fprintf(f, "cuda-emu: host-wait %s %llu\n", emu_ep_names[i], n);
        all += n;
    }
    fprintf(f, "cuda-emu: host-waits %llu\n", all);
}

void emu_set_kernel_ns(unsigned long long ns) { atomic_store(&g_kernel_ns, ns); }

void emu_kernel_duration(void)
{
    unsigned long long ns = atomic_load_explicit(&g_kernel_ns, memory_order_relaxed);
    if (ns == 0)
        return;
    struct timespec t = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (nanosleep(&t, &t) != 0)
        ;
}

/* ---- extension API ---- */

unsigned long long cuEmuHostWaits(const char *entry_point)
{
    if (entry_point == NULL) {
        unsigned long long n = 0;
        for (int i = 0; i < EP_COUNT; i++)
            n += atomic_load(&g_waits[i]);
        return n;
    }
    int ep = emu_ep_by_name(entry_point);
    return ep < 0 ? 0 : atomic_load(&g_waits[ep]);
}

void cuEmuSetKernelDuration(unsigned long long ns) { emu_set_kernel_ns(ns); }
