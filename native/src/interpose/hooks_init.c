/*
 * Whether the CUDA driver started (libredzone.so only). A program whose driver cannot start makes no device
 * allocation, so without this redzone would leave no trace at all: cuInit failing (no GPU: the NVIDIA
 * driver's CUDA_ERROR_NO_DEVICE), or never called because the CUDA runtime refused the driver from its
 * version alone (a runtime newer than the driver: cudaErrorInsufficientDriver, decided after cuGetProcAddress
 * lookups and cuDriverGetVersion, before any cuInit). So cuInit is wrapped (its answer recorded) and the
 * lookups note the newest CUDA version asked for; the first of either registers an exit handler that, when
 * no allocation was registered and the driver still says it is not initialised, prints one line naming the
 * cause and that nothing was checked. The program's calls get the driver's answers unchanged.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"
#include "driver.h"
#include "hooks.h"
#include "options.h"
#include "report.h"
#include "subscriptions.h"

#define NEVER_CALLED (-1)

static _Atomic int g_init_result = NEVER_CALLED; /* cuInit's last failure, or NEVER_CALLED */
static _Atomic int g_started;                    /* some cuInit succeeded */
static _Atomic int g_asked_version;              /* the newest CUDA version a lookup asked for */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pid_t g_pid;

static void version_text(char *out, size_t cap, int v) { snprintf(out, cap, "%d.%d", v / 1000, v % 1000 / 10); }

static void at_exit(void) {
    if (getpid() != g_pid || atomic_load(&g_started))
        return; /* a forked child (the driver state is its parent's), or the driver started */
    rz_stats_t s;
    rz_stats_get(&s);
    if (s.map_calls > 0 || rz__dev_load() != RZ_OK)
        return; /* something was checked (the exit line says what), or no driver (its warning said so) */
    /* A cuInit that reached the driver by a way not wrapped: the driver knows better than the wrapper. It
     * answers DEINITIALIZED once its own exit handler ran, which it registers in cuInit even when that fails
     * (the NVIDIA driver does), so that answer only says that some cuInit was called. */
    int count = 0, r = atomic_load(&g_init_result);
    rzcu_result now = rz__drv.cuDeviceGetCount ? rz__drv.cuDeviceGetCount(&count) : RZCUDA_ERROR_NOT_INITIALIZED;
    if (now == RZCUDA_SUCCESS || (now == RZCUDA_ERROR_DEINITIALIZED && r == NEVER_CALLED))
        return;
    char why[192];
    if (r != NEVER_CALLED) {
        snprintf(why, sizeof why, "cuInit: %s", rz__cu_name((rzcu_result)r));
    } else {
        int driver = 0, asked = atomic_load(&g_asked_version);
        char dv[16], av[16];
        if (rz__drv.cuDriverGetVersion && rz__drv.cuDriverGetVersion(&driver) == RZCUDA_SUCCESS && driver > 0 &&
            asked > driver) {
            version_text(dv, sizeof dv, driver);
            version_text(av, sizeof av, asked);
            snprintf(why, sizeof why,
                     "cuInit was never called; the driver is CUDA %s, older than the CUDA %s entry points the "
                     "program asked for: to the CUDA runtime an insufficient driver", dv, av);
        } else {
            snprintf(why, sizeof why, "cuInit was never called");
        }
    }
    rz__log("redzone: the CUDA driver did not start (%s): nothing was checked", why);
}

static void arm(void) {
    rz__subscriptions_make(); /* before the program's first call that may need them */
    rz__log_start(); /* the log (METRALE_REDZONE_LOG) opens now, as it does at a first allocation */
    g_pid = getpid();
    atexit(at_exit);
}

void rz__start_note_lookup(int cuda_version) {
    int seen = atomic_load_explicit(&g_asked_version, memory_order_relaxed);
    while (cuda_version > seen &&
           !atomic_compare_exchange_weak_explicit(&g_asked_version, &seen, cuda_version, memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
    pthread_once(&g_once, arm);
}

RZ_EXPORT rzcu_fn_cuInit cuInit;
rzcu_result cuInit(unsigned int flags) {
    rzcu_fn_cuInit *real = REAL(cuInit);
    if (real == NULL)
        return rz__hook_missing();
    rzcu_result r = real(flags);
    if (r == RZCUDA_SUCCESS)
        atomic_store(&g_started, 1);
    else
        atomic_store(&g_init_result, (int)r);
    pthread_once(&g_once, arm);
    return r;
}
