/*
 * What every entry point goes through first (emu_enter, called by the ENTER prologue of emu_internal.h):
 * lazy configuration from the environment, per entry point call counts, fault injection (errors and
 * signals), the sticky error, the driver's shutdown at exit; and the exit statistics and the cuEmu*
 * extension API over them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_internal.h"
#include "emu_pool.h"

struct emu_config emu_cfg = {.ndevices = 1, .mem_bytes = (size_t)16 << 30, .kernel_hold = false,
                              .sticky_faults = false};

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static atomic_bool initialized;
static atomic_ullong call_counts[EP_COUNT];

/* Pending injected failures: fire when the entry point's count reaches `at`. A failure either returns
 * `error` or (error == CUDA_SUCCESS) raises signal `signo` in the calling thread and then runs the call. */
struct failure {
    int ep;
    unsigned long long at;
    rzcu_result error;
    bool relative; /* from cuEmuInjectFailure: keeps its distance across cuEmuResetCallCounts */
    int signo;
};
/* The process's sticky error (emu_internal.h): 0 until a kernel fault or an injected sticky error. */
static _Atomic unsigned g_sticky;
/* cuEmuShutdown or the exit handler of CUDA_EMU_SHUTDOWN_AT_EXIT ran: every call is DEINITIALIZED. */
static atomic_bool shut_down;
static bool shutdown_at_exit;
static pthread_mutex_t failures_mu = PTHREAD_MUTEX_INITIALIZER;
static struct failure *failures;
static size_t nfailures, failures_cap;
static atomic_uint failures_pending[EP_COUNT]; /* how many entries of `failures` name each entry point */

static void warn(const char *fmt, const char *value)
{
    fprintf(stderr, "cuda-emu: warning: ");
    fprintf(stderr, fmt, value);
    fputc('\n', stderr);
}

static bool add_failure_locked(int ep, unsigned long long at, rzcu_result error, bool relative, int signo)
{
    if (nfailures == failures_cap) {
        size_t cap = failures_cap ? failures_cap * 2 : 8;
        struct failure *f = realloc(failures, cap * sizeof *f);
        if (!f)
            return false;
        failures = f;
        failures_cap = cap;
    }
    failures[nfailures++] = (struct failure){ep, at, error, relative, signo};
    atomic_fetch_add(&failures_pending[ep], 1);
    return true;
}

static rzcu_result default_failure(int ep)
{
    switch (ep) {
    case EP_cuMemAlloc_v2:
    case EP_cuMemAllocPitch_v2:
    case EP_cuMemAllocManaged:
    case EP_cuMemAllocHost_v2:
    case EP_cuMemAllocAsync:
    case EP_cuMemAllocAsync_ptsz:
    case EP_cuMemAllocFromPoolAsync:
    case EP_cuMemAllocFromPoolAsync_ptsz:
    case EP_cuMemCreate:
    case EP_cuMemAddressReserve:
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    default:
        return RZCUDA_ERROR_UNKNOWN;
    }
}

static bool parse_ull(const char *s, unsigned long long *out)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

/* CUDA_EMU_FAIL=<entry point>:<nth>[:<error>][,...]; all or nothing. */
static void parse_failures(const char *value)
{
    char *copy = strdup(value);
    if (!copy)
        return;
    struct failure parsed[64];
    size_t n = 0;
    bool ok = true;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item && ok; item = strtok_r(NULL, ",", &save)) {
        char *f1 = item, *f2 = strchr(f1, ':'), *f3 = NULL;
        if (!f2) {
            ok = false;
            break;
        }
        *f2++ = '\0';
        f3 = strchr(f2, ':');
        if (f3)
            *f3++ = '\0';
        int ep = emu_ep_by_name(f1);
        unsigned long long nth;
        if (ep < 0 || !parse_ull(f2, &nth) || nth == 0 || n == sizeof parsed / sizeof parsed[0]) {
            ok = false;
            break;
        }
        rzcu_result error = default_failure(ep);
        if (f3) {
            unsigned long long num;
            if (emu_error_by_name(f3, &error))
                ;
            else if (parse_ull(f3, &num) && num <= UINT32_MAX)
                error = (rzcu_result)num;
            else {
                ok = false;
                break;
            }
            if (error == RZCUDA_SUCCESS) {
                ok = false;
                break;
            }
        }
        parsed[n++] = (struct failure){ep, nth, error, false, 0};
    }
    if (!ok || n == 0) {
        warn("malformed CUDA_EMU_FAIL=\"%s\" (want <entry point>:<nth>[:<error>][,...]); no failures injected",
             value);
    } else {
        pthread_mutex_lock(&failures_mu);
        for (size_t i = 0; i < n; i++)
            add_failure_locked(parsed[i].ep, parsed[i].at, parsed[i].error, false, 0);
        pthread_mutex_unlock(&failures_mu);
    }
    free(copy);
}

/* CUDA_EMU_SIGNAL=<entry point>:<nth>:<signal number>[,...]; all or nothing. */
static void parse_signals(const char *value)
{
    char *copy = strdup(value);
    if (!copy)
        return;
    struct failure parsed[64];
    size_t n = 0;
    bool ok = true;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item && ok; item = strtok_r(NULL, ",", &save)) {
        char *f2 = strchr(item, ':'), *f3 = f2 ? strchr(f2 + 1, ':') : NULL;
        if (!f3) {
            ok = false;
            break;
        }
        *f2++ = '\0';
        *f3++ = '\0';
        int ep = emu_ep_by_name(item);
        unsigned long long nth, signo;
        if (ep < 0 || !parse_ull(f2, &nth) || nth == 0 || !parse_ull(f3, &signo) || signo == 0 || signo >= 65 ||
            n == sizeof parsed / sizeof parsed[0]) {
            ok = false;
            break;
        }
        parsed[n++] = (struct failure){ep, nth, RZCUDA_SUCCESS, false, (int)signo};
    }
    if (!ok || n == 0) {
        warn("malformed CUDA_EMU_SIGNAL=\"%s\" (want <entry point>:<nth>:<signal number>[,...]); no signals injected",
             value);
    } else {
        pthread_mutex_lock(&failures_mu);
        for (size_t i = 0; i < n; i++)
            add_failure_locked(parsed[i].ep, parsed[i].at, RZCUDA_SUCCESS, false, parsed[i].signo);
        pthread_mutex_unlock(&failures_mu);
    }
    free(copy);
}

static bool parse_size(const char *s, size_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return false;
    unsigned shift = 0;
    switch (*end) {
    case '\0':
        break;
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    case 'T': case 't': shift = 40; end++; break;
    default:
        return false;
    }
    if (*end || v == 0 || (shift && v > (UINT64_MAX >> shift)))
        return false;
    *out = (size_t)(v << shift);
    return true;
}

static void print_stats(void)
{
    for (int i = 0; i < EP_COUNT; i++) {
        unsigned long long n = atomic_load(&call_counts[i]);
        if (n)
            fprintf(stderr, "cuda-emu: %s %llu\n", emu_ep_names[i], n);
    }
    emu_waits_print(stderr);
}

static void read_config(void)
{
    const char *v = getenv("CUDA_EMU_DEVICES");
    if (v) {
        unsigned long long n;
        if (parse_ull(v, &n) && n <= CUDA_EMU_MAX_DEVICES)
            emu_cfg.ndevices = (int)n; /* 0: a machine without a GPU (cuInit fails, as the NVIDIA driver's) */
        else
            warn("malformed CUDA_EMU_DEVICES=\"%s\" (want 0..8); using 1", v);
    }
    v = getenv("CUDA_EMU_MEM");
    if (v) {
        size_t bytes;
        if (parse_size(v, &bytes))
            emu_cfg.mem_bytes = bytes;
        else
            warn("malformed CUDA_EMU_MEM=\"%s\" (want bytes, optional K/M/G/T suffix); using 16 GiB", v);
    }
    v = getenv("CUDA_EMU_FAIL");
    if (v && *v)
        parse_failures(v);
    emu_trace_configure(getenv("CUDA_EMU_TRACE"));
    v = getenv("CUDA_EMU_SIGNAL");
    if (v && *v)
        parse_signals(v);
    v = getenv("CUDA_EMU_SHUTDOWN_AT_EXIT");
    if (v && strcmp(v, "1") == 0)
        shutdown_at_exit = true;
    else if (v && strcmp(v, "0") != 0)
        warn("malformed CUDA_EMU_SHUTDOWN_AT_EXIT=\"%s\" (want 0 or 1); using 0", v);
    v = getenv("CUDA_EMU_KERNEL_HOLD");
    if (v && strcmp(v, "1") == 0)
        emu_cfg.kernel_hold = true;
    else if (v && strcmp(v, "0") != 0)
        warn("malformed CUDA_EMU_KERNEL_HOLD=\"%s\" (want 0 or 1); using 0", v);
    v = getenv("CUDA_EMU_STICKY_FAULTS");
    if (v && strcmp(v, "1") == 0)
        emu_cfg.sticky_faults = true;
    else if (v && strcmp(v, "0") != 0)
        warn("malformed CUDA_EMU_STICKY_FAULTS=\"%s\" (want 0 or 1); using 0", v);
    v = getenv("CUDA_EMU_KERNEL_NS");
    if (v) {
        char *end;
        errno = 0;
        unsigned long long ns = strtoull(v, &end, 10);
        if (errno || end == v || *end || *v == '-' || ns > 60000000000ull)
            warn("malformed CUDA_EMU_KERNEL_NS=\"%s\" (want nanoseconds, 0..60000000000); using 0", v);
        else
            emu_set_kernel_ns(ns);
    }
    v = getenv("CUDA_EMU_STATS");
    if (v && strcmp(v, "1") == 0)
        atexit(print_stats);
}

static void shutdown_handler(void) { atomic_store(&shut_down, true); }
static void shutdown_handler_register(void) { atexit(shutdown_handler); }

/* Like a real driver, which tears itself down from an exit handler it registers when initialised: exit
 * handlers registered before cuInit run after it and find the driver gone. */
void emu_note_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (shutdown_at_exit)
        pthread_once(&once, shutdown_handler_register);
}

static atomic_bool config_read; /* fast path past pthread_once */

static void read_config_once(void)
{
    if (atomic_load_explicit(&config_read, memory_order_acquire))
        return;
    pthread_once(&config_once, read_config);
    atomic_store_explicit(&config_read, true, memory_order_release);
}

rzcu_result emu_sticky_error(void) { return (rzcu_result)atomic_load(&g_sticky); }

void emu_set_sticky_error(rzcu_result r)
{
    unsigned none = 0;
    atomic_compare_exchange_strong(&g_sticky, &none, (unsigned)r);
}

/* The entry points that do no CUDA work and still answer after a sticky error: naming results (what a program
 * reports the error with) and the driver's version. Everything else returns the error (docs/emulated-driver.md). */
static bool survives_sticky(enum emu_ep ep)
{
    return ep == EP_cuGetErrorName || ep == EP_cuGetErrorString || ep == EP_cuDriverGetVersion;
}

rzcu_result emu_enter(enum emu_ep ep, void *caller)
{
    read_config_once();
    unsigned long long count = atomic_fetch_add(&call_counts[ep], 1) + 1;
    if (ep == EP_cuStreamSynchronize || ep == EP_cuStreamSynchronize_ptsz || ep == EP_cuCtxSynchronize ||
        ep == EP_cuCtxSynchronize_v2 || ep == EP_cuEventSynchronize)
        emu_pool_at_sync(); /* pools above their release threshold release (emu_pool.c) */
    emu_waits_enter((int)ep);
    if (emu_trace_on())
        emu_trace_enter(ep, caller);
    if (__builtin_expect(atomic_load_explicit(&shut_down, memory_order_relaxed), 0))
        return RZCUDA_ERROR_DEINITIALIZED;
    rzcu_result sticky = (rzcu_result)atomic_load_explicit(&g_sticky, memory_order_acquire);
    if (__builtin_expect(sticky != RZCUDA_SUCCESS, 0) && !survives_sticky(ep))
        return sticky;
    if (atomic_load_explicit(&failures_pending[ep], memory_order_relaxed) == 0)
        return RZCUDA_SUCCESS;
    rzcu_result r = RZCUDA_SUCCESS;
    int signo = 0;
    pthread_mutex_lock(&failures_mu);
    for (size_t i = 0; i < nfailures; i++) {
        if (failures[i].ep == (int)ep && failures[i].at == count) {
            r = failures[i].error;
            signo = failures[i].signo;
            failures[i] = failures[--nfailures];
            atomic_fetch_sub(&failures_pending[ep], 1);
            break;
        }
    }
    pthread_mutex_unlock(&failures_mu);
    if (signo)
        raise(signo); /* then the call runs, unless the handler does not return */
    if (emu_error_is_sticky(r)) {
        /* What a real driver returns this for, an asynchronous kernel fault, ends all CUDA work: so here. */
        emu_set_sticky_error(r);
        return emu_sticky_error();
    }
    return r;
}

bool emu_initialized(void) { return atomic_load(&initialized); }
void emu_set_initialized(void) { atomic_store(&initialized, true); }

/* ---- extension API ---- */

int cuEmuIsEmulated(void) { return 1; }

unsigned long long cuEmuCallCount(const char *entry_point)
{
    int ep = emu_ep_by_name(entry_point);
    return ep < 0 ? 0 : atomic_load(&call_counts[ep]);
}

unsigned long long cuEmuCallCountAll(void)
{
    unsigned long long n = 0;
    for (int i = 0; i < EP_COUNT; i++)
        n += atomic_load(&call_counts[i]);
    return n;
}

void cuEmuResetCallCounts(void)
{
    pthread_once(&config_once, read_config);
    pthread_mutex_lock(&failures_mu);
    unsigned long long old[EP_COUNT];
    for (int i = 0; i < EP_COUNT; i++)
        old[i] = atomic_exchange(&call_counts[i], 0);
    emu_waits_reset();
    for (size_t i = 0; i < nfailures; i++)
        if (failures[i].relative)
            failures[i].at = failures[i].at > old[failures[i].ep] ? failures[i].at - old[failures[i].ep] : 1;
    pthread_mutex_unlock(&failures_mu);
}

int cuEmuInjectFailure(const char *entry_point, unsigned long long nth, unsigned int error)
{
    int ep = emu_ep_by_name(entry_point);
    if (ep < 0 || nth == 0 || error == RZCUDA_SUCCESS)
        return -1;
    pthread_once(&config_once, read_config);
    pthread_mutex_lock(&failures_mu);
    bool ok = add_failure_locked(ep, atomic_load(&call_counts[ep]) + nth, error, true, 0);
    pthread_mutex_unlock(&failures_mu);
    return ok ? 0 : -1;
}

int cuEmuInjectSignal(const char *entry_point, unsigned long long nth, int signo)
{
    int ep = emu_ep_by_name(entry_point);
    if (ep < 0 || nth == 0 || signo <= 0 || signo >= 65)
        return -1;
    pthread_once(&config_once, read_config);
    pthread_mutex_lock(&failures_mu);
    bool ok = add_failure_locked(ep, atomic_load(&call_counts[ep]) + nth, RZCUDA_SUCCESS, true, signo);
    pthread_mutex_unlock(&failures_mu);
    return ok ? 0 : -1;
}

void cuEmuShutdown(void) { atomic_store(&shut_down, true); }

void cuEmuClearFailures(void)
{
    pthread_once(&config_once, read_config);
    pthread_mutex_lock(&failures_mu);
    nfailures = 0;
    for (int i = 0; i < EP_COUNT; i++)
        atomic_store(&failures_pending[i], 0);
    pthread_mutex_unlock(&failures_mu);
}
