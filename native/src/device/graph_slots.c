/*
 * Graph check slots (part of the device seam). A cuMemFreeAsync captured into a graph gets a band copy and a host function captured
 * before it; they run at every launch of the graph, for as long as the graph exists, which the library cannot
 * see end. So the copy's destination must never be freed: GRAPH_SLOTS page-locked slots, taken for good (the
 * process's lifetime), one per captured check. When they are gone, captured frees go unchecked (warned once).
 * Launches of one executable are ordered one after another, so a slot is never written by one launch while
 * the host function of the previous one reads it.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "common.h"
#include "graph_slots.h"
#include "band_io.h"
#include "driver.h"

#define GRAPH_SLOT ((size_t)4096)
#define GRAPH_SLOTS 64u
static pthread_mutex_t g_graph_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *g_graph;
static int g_graph_state; /* 0: not tried (or no context yet), 1: registered, -1: unavailable */
static unsigned g_graph_used;

void *rz__graph_slot_take(size_t bytes) {
    if (bytes > GRAPH_SLOT || rz__drv.cuMemHostRegister_v2 == NULL)
        return NULL;
    void *slot = NULL;
    pthread_mutex_lock(&g_graph_lock);
    if (g_graph_state == 0) {
        size_t size = GRAPH_SLOT * GRAPH_SLOTS;
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        /* This thread is capturing: in the default (global) capture mode the driver refuses registering host
         * memory and invalidates the program's capture. Made with the mode relaxed, as the driver allows. */
        rzcu_result r = p == MAP_FAILED ? RZCUDA_ERROR_OUT_OF_MEMORY : rz__dev_host_register(p, size);
        if (r == RZCUDA_SUCCESS) {
            g_graph = p;
            g_graph_state = 1;
        } else {
            if (p != MAP_FAILED)
                munmap(p, size);
            g_graph_state = r == RZCUDA_ERROR_INVALID_CONTEXT ? 0 : -1; /* no context: try again later */
        }
    }
    if (g_graph_state == 1 && g_graph_used < GRAPH_SLOTS)
        slot = g_graph + GRAPH_SLOT * g_graph_used++;
    pthread_mutex_unlock(&g_graph_lock);
    return slot;
}

