/*
 * Page-locked slots for band copies queued in the program's stream order (the check before a stream-ordered
 * free) and for a free's band read: a driver returns from a device-to-pageable copy only once it has
 * completed, which would make cuMemFreeAsync wait for all the stream's earlier work, a host wait the program
 * never asked for. Size classes of 4 KiB << k; each class takes regions of 1 MiB (a band wider than that: a
 * region of its own), registered (portable) with the driver on first need, with a context current, and kept
 * for reuse. All regions together stay within RZ_PINNED_BUDGET: past it rz__dev_pinned_alloc says NULL and
 * the caller decides (free_check.c: a stream-ordered free is then not checked rather than waited for).
 */
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>

#include "common.h"
#include "band_io.h"
#include "driver.h"

#define SLOT_MIN ((size_t)4096)
#define REGION ((size_t)1 << 20)
#define CLASSES 9 /* 4 KiB .. 1 MiB */
#define MAX_REGIONS 512

struct region {
    uint8_t *p;
    size_t size, slot;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct region g_regions[MAX_REGIONS];
static int g_nregions;
static size_t g_bytes;        /* registered, in g_regions */
static void *g_free[CLASSES]; /* free slots of each class, linked through their first bytes */
static void *g_big;           /* free oversized regions (one slot each), linked the same way */
static int g_state;           /* 0: not tried (or no context yet), 1: registered once, -1: unavailable */

static int class_of(size_t bytes) {
    int k = 0;
    while (k < CLASSES && (SLOT_MIN << k) < bytes)
        k++;
    return k; /* CLASSES: oversized */
}

static struct region *region_of(const uint8_t *b) {
    for (int i = 0; i < g_nregions; i++)
        if (b >= g_regions[i].p && b < g_regions[i].p + g_regions[i].size)
            return &g_regions[i];
    return NULL;
}

/* A new registered region of `size` bytes cut into slots of `slot`, all free. Lock held. */
static int grow_locked(size_t size, size_t slot, void **list) {
    if (g_state < 0 || g_nregions == MAX_REGIONS || g_bytes + size > RZ_PINNED_BUDGET || !rz__drv.cuMemHostRegister_v2)
        return 0;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return 0;
    rzcu_result r = rz__dev_host_register(p, size);
    if (r != RZCUDA_SUCCESS) {
        munmap(p, size);
        if (g_state == 0 && r != RZCUDA_ERROR_INVALID_CONTEXT)
            g_state = -1; /* the driver cannot page-lock: pageable memory from now on */
        return 0;
    }
    g_state = 1;
    g_regions[g_nregions++] = (struct region){p, size, slot};
    g_bytes += size;
    for (size_t off = size; off >= slot; off -= slot) {
        void **s = (void **)((uint8_t *)p + off - slot);
        *s = *list;
        *list = s;
    }
    return 1;
}

void *rz__dev_pinned_alloc(size_t bytes) {
    if (bytes == 0)
        bytes = 1;
    int k = class_of(bytes);
    void *p = NULL;
    pthread_mutex_lock(&g_lock);
    if (k < CLASSES) {
        if (g_free[k] == NULL)
            grow_locked(REGION, SLOT_MIN << k, &g_free[k]);
        if ((p = g_free[k]) != NULL)
            g_free[k] = *(void **)p;
    } else {
        /* An oversized band: a free region big enough, else a new one. */
        void **link = &g_big;
        size_t need = (bytes + SLOT_MIN - 1) & ~(SLOT_MIN - 1);
        while (*link && region_of(*link)->size < need)
            link = (void **)*link;
        if (*link == NULL) {
            void *fresh = NULL;
            if (grow_locked(need, need, &fresh))
                p = fresh;
        } else {
            p = *link;
            *link = *(void **)p;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return p;
}

int rz__dev_pinned_free(void *p) {
    pthread_mutex_lock(&g_lock);
    struct region *r = region_of(p);
    if (r) {
        int k = class_of(r->slot);
        void **list = r->slot == r->size && k == CLASSES ? &g_big : &g_free[k];
        *(void **)p = *list;
        *list = p;
    }
    pthread_mutex_unlock(&g_lock);
    return r != NULL;
}

int rz__dev_pinned_usable(void) {
    pthread_mutex_lock(&g_lock);
    int ok = g_state >= 0 && rz__drv.cuMemHostRegister_v2 != NULL;
    pthread_mutex_unlock(&g_lock);
    return ok;
}

size_t rz__dev_pinned_bytes(void) {
    pthread_mutex_lock(&g_lock);
    size_t n = g_bytes;
    pthread_mutex_unlock(&g_lock);
    return n;
}
