/*
 * Kernel names for launch checks (launch_check.c), cached: a launch asks the driver once per kernel.
 * Kernel handles stay valid until their module or library is unloaded or their context ends; any of those
 * forgets every name (a later kernel may get a freed handle).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "launch_names.h"
#include "launch_check.h"
#include "launch_ring.h"

#define NAME_SLOTS 256
static pthread_mutex_t g_name_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    rzcu_function f;
    uint64_t gen;
    char name[RZ_KERNEL_NAME];
} g_names[NAME_SLOTS];
static uint64_t g_name_gen = 1; /* entries of older generations are empty */

void rz__launch_names_forget(void) {
    pthread_mutex_lock(&g_name_lock);
    g_name_gen++;
    pthread_mutex_unlock(&g_name_lock);
}

void rz__launch_kernel_name_cached(rzcu_function f, char *out) {
    size_t slot = (size_t)(((uintptr_t)f >> 4) * UINT64_C(0x9E3779B97F4A7C15) >> 56) % NAME_SLOTS;
    pthread_mutex_lock(&g_name_lock);
    if (g_names[slot].f == f && g_names[slot].gen == g_name_gen) {
        memcpy(out, g_names[slot].name, RZ_KERNEL_NAME);
        pthread_mutex_unlock(&g_name_lock);
        return;
    }
    uint64_t gen = g_name_gen;
    pthread_mutex_unlock(&g_name_lock);
    snprintf(out, RZ_KERNEL_NAME, "%s", rz__launch_kernel_name(f));
    pthread_mutex_lock(&g_name_lock);
    if (gen == g_name_gen) { /* no unload meanwhile */
        g_names[slot].f = f;
        g_names[slot].gen = gen;
        memcpy(g_names[slot].name, out, RZ_KERNEL_NAME);
    }
    pthread_mutex_unlock(&g_name_lock);
}
