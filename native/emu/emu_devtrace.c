/*
 * CUDA_EMU_TRACE, the driver's side: one `dev` line for every device allocation, free and write the
 * emulated driver performs, so a test can check what a library running in the program did to device
 * memory (redzone's: that it writes only inside its bands). Each line names the allocation by its serial
 * number (a<k>: the k-th successful device allocation of the process, counted from 0) rather than by
 * address, so runs with and without padding compare; the entry point that did it (via=); and who called
 * that entry point (by=<object>:<function>): the object holding the return address and the exported
 * function of that object containing it ("?" when it is not inside an exported function, e.g. a library's
 * internal code).
 *
 *   dev alloc a3 size=1064 via=cuMemAlloc_v2 by=libredzone.so:?
 *   dev write a3+1000 n=64 via=cuMemcpyBatchAsync_v2 by=libredzone.so:?
 *   dev write a3+0 n=100 via=cuMemsetD8_v2 by=libredzone.so:cuMemsetD8_v2
 *   dev free a3 via=cuMemFree_v2 by=libredzone.so:?
 *
 * Writes are logged when the driver accepts them (copies to device memory, memsets, each item of a batched
 * copy), not when they execute; kernels' writes are the program's own code and are not seen. The write
 * lines, which name the allocation containing an address, are emu_trace_writes.c.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>

#include "emu_internal.h"
#include "trace_line.h"

static int trace_fd = -1;

/* The entry point running on this thread and its return address (set on entry, read by the hooks below). */
static _Thread_local int t_ep __attribute__((tls_model("initial-exec")));
static _Thread_local void *t_caller __attribute__((tls_model("initial-exec")));

void emu_trace_configure(const char *path)
{
    if (path && *path)
        trace_fd = emu_trace_open(path);
}

bool emu_trace_on(void) { return trace_fd >= 0; }

void emu_trace_enter(enum emu_ep ep, void *caller)
{
    t_ep = (int)ep;
    t_caller = caller;
}

/* ---- allocation serials: base address -> serial of the allocation made there last ---- */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct slot {
    rzcu_deviceptr base;
    unsigned long long serial;
} *slots;
static size_t nslots, nused;
static unsigned long long next_serial;

static size_t slot_of(rzcu_deviceptr base)
{
    size_t i = (size_t)((base >> 8) * 0x9E3779B97F4A7C15ull) & (nslots - 1);
    while (slots[i].base && slots[i].base != base)
        i = (i + 1) & (nslots - 1);
    return i;
}

/* Under mu. Allocations are never removed: a later allocation at the same base replaces the entry. */
static bool remember(rzcu_deviceptr base, unsigned long long serial)
{
    if (2 * (nused + 1) > nslots) {
        size_t n = nslots ? 2 * nslots : 1024;
        struct slot *old = slots;
        size_t old_n = nslots;
        slots = calloc(n, sizeof *slots);
        if (!slots) {
            slots = old;
            return false;
        }
        nslots = n;
        nused = 0;
        for (size_t i = 0; i < old_n; i++)
            if (old[i].base) {
                slots[slot_of(old[i].base)] = old[i];
                nused++;
            }
        free(old);
    }
    size_t i = slot_of(base);
    if (!slots[i].base)
        nused++;
    slots[i] = (struct slot){base, serial};
    return true;
}

static bool serial_of(rzcu_deviceptr base, unsigned long long *serial)
{
    if (!nslots)
        return false;
    size_t i = slot_of(base);
    if (!slots[i].base)
        return false;
    *serial = slots[i].serial;
    return true;
}

/* ---- who called ---- */
static void describe_caller(char *out, size_t cap)
{
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    uintptr_t at = (uintptr_t)t_caller - 1; /* inside the call instruction, not after it */
    if (!t_caller || !dladdr1((void *)at, &info, (void **)&sym, RTLD_DL_SYMENT)) {
        snprintf(out, cap, "?:?");
        return;
    }
    const char *obj = info.dli_fname && *info.dli_fname ? info.dli_fname : "main";
    const char *slash = strrchr(obj, '/');
    obj = slash ? slash + 1 : obj;
    const char *fn = "?";
    if (info.dli_sname && sym && info.dli_saddr && at >= (uintptr_t)info.dli_saddr &&
        at < (uintptr_t)info.dli_saddr + sym->st_size)
        fn = info.dli_sname;
    snprintf(out, cap, "%s:%s", obj, fn);
}

static void emit(const char *what)
{
    char by[256], line[512];
    describe_caller(by, sizeof by);
    int n = snprintf(line, sizeof line, "dev %s via=%s by=%s\n", what, emu_ep_names[t_ep], by);
    if (n > 0)
        emu_trace_write_line(trace_fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

void emu_trace_alloc(rzcu_deviceptr base, size_t size)
{
    if (trace_fd < 0)
        return;
    pthread_mutex_lock(&mu);
    unsigned long long k = next_serial++;
    remember(base, k);
    pthread_mutex_unlock(&mu);
    char what[96];
    snprintf(what, sizeof what, "alloc a%llu size=%zu", k, size);
    emit(what);
}

void emu_trace_free(rzcu_deviceptr base)
{
    if (trace_fd < 0)
        return;
    unsigned long long k = 0;
    pthread_mutex_lock(&mu);
    bool known = serial_of(base, &k);
    pthread_mutex_unlock(&mu);
    char what[96];
    if (known)
        snprintf(what, sizeof what, "free a%llu", k);
    else
        snprintf(what, sizeof what, "free 0x%llx", (unsigned long long)base);
    emit(what);
}

bool emu_trace_serial_of(rzcu_deviceptr base, unsigned long long *serial)
{
    pthread_mutex_lock(&mu);
    bool known = serial_of(base, serial);
    pthread_mutex_unlock(&mu);
    return known;
}

void emu_trace_emit(const char *what) { emit(what); }
