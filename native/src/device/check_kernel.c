/*
 * Scans on the device (GPU): the check kernel (native/kernels/rz_check.cu, a fatbin built in by nvcc at
 * build time: SASS for the common architectures, PTX for newer ones) compares every band with its expected byte where the bands are, and only the positions of
 * bands that differ come back. Per context and scan batch: one upload of the descriptors (with the zeroed
 * result count in front), one launch, one read of the count and positions, one synchronisation, all on
 * the library's own stream. The scan then reads just those bands for the report.
 *
 * The module is loaded after the first scan that meets each context, outside the registry lock (that scan
 * uses copies); the kernel is off by default (METRALE_REDZONE_CHECK_KERNEL) until measured on a GPU. When
 * there is no image (built without nvcc) or the
 * driver cannot load it or find the kernel (the emulated driver has no such kernel unless a test program
 * provides one), that context is marked and scans read bands with batched copies (band.c), silently: the
 * results are the same, only the cost differs. Everything here runs under the registry lock.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "check_kernel.h"
#include "band_io.h"
#include "capture_mode.h"
#include "device_ctx.h"
#include "driver.h"
#include "options.h"
#include "rz_check_ptx.h"

_Static_assert(sizeof(rz_check_desc_t) == 16, "rz_check_desc matches the kernel's struct");
_Static_assert(offsetof(rz_check_desc_t, bytes) == 8 && offsetof(rz_check_desc_t, expected) == 12,
               "rz_check_desc matches the kernel's struct");

#define MAX_CTX 64
#define BLOCK 256u
/* The upload: the result area (count, then RZ_CHECK_CAP positions) zeroed, then the descriptors, which start
 * 16-byte aligned: the kernel loads their 64-bit field whole (a misaligned address is a sticky error that
 * ends the context on a GPU), and the host writes them as rz_check_desc_t. */
#define HEAD_BYTES ((((size_t)4 * (1 + RZ_CHECK_CAP)) + 15) & ~(size_t)15)
_Static_assert(HEAD_BYTES % 16 == 0 && HEAD_BYTES >= 4 * (1 + RZ_CHECK_CAP), "descriptors aligned after the result");

static struct kernel_ctx {
    void *ctx;
    int state; /* 0: not tried, 1: ready, -1: unavailable in this context */
    rzcu_module mod;
    rzcu_function fn;
    rz_devptr_t buf; /* HEAD_BYTES + descriptors */
    size_t buf_size;
} g_kctx[MAX_CTX];
static int g_nkctx;
static int g_off;

static uint8_t *g_upload;   /* host side of the upload */
static size_t g_upload_size;
static uint32_t *g_pos;     /* descriptor -> position in the caller's io */
static size_t g_pos_cap;
static uint32_t g_result[1 + RZ_CHECK_CAP];

int rz__check_kernel_built(void) { return rz_check_image[0] != 0; }

const unsigned char *rz__check_kernel_image(size_t *size) {
    *size = sizeof rz_check_image;
    return rz_check_image;
}

void rz__check_kernel_enable(int on) { g_off = !on; }

void rz__check_kernel_forget(void *ctx) {
    for (int i = 0; i < g_nkctx; i++) {
        if (g_kctx[i].ctx != ctx)
            continue;
        g_kctx[i] = g_kctx[--g_nkctx]; /* its module and buffer went with the context */
        return;
    }
}

/* The kernel state of ctx (current), loading the module on first use. NULL when unavailable. */
/*
 * Loading the module JIT-compiles its PTX on a GPU where no SASS fits (tens of milliseconds or more): never
 * under the registry lock, which every allocation and free of the program takes. A scan marks the contexts
 * it found without a module (state 2) and the scanning thread loads them once the lock is released.
 */
static pthread_mutex_t g_load_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int g_wanted;

int rz__check_kernel_wanted(void) { return atomic_load_explicit(&g_wanted, memory_order_relaxed); }

void rz__check_kernel_load(void (*lock)(void), void (*unlock)(void)) {
    pthread_mutex_lock(&g_load_lock); /* one loader at a time; scans may run meanwhile */
    atomic_store_explicit(&g_wanted, 0, memory_order_relaxed);
    lock();
    void *want[MAX_CTX];
    int n = 0;
    for (int i = 0; i < g_nkctx; i++)
        if (g_kctx[i].state == 2)
            want[n++] = g_kctx[i].ctx;
    unlock();
    for (int i = 0; i < n; i++) {
        rzcu_module mod = NULL;
        rzcu_function fn = NULL;
        int ok = 0, pushed;
        if (rz__check_kernel_built() && rz__drv.cuModuleLoadData && rz__drv.cuModuleGetFunction &&
            rz__drv.cuLaunchKernel && rz__drv.cuModuleUnload && rz__dev_enter(want[i], &pushed) == RZCUDA_SUCCESS) {
            if (rz__drv.cuModuleLoadData(&mod, rz_check_image) == RZCUDA_SUCCESS) {
                ok = rz__drv.cuModuleGetFunction(&fn, mod, "rz_check_bands") == RZCUDA_SUCCESS;
                if (!ok)
                    rz__drv.cuModuleUnload(mod);
            }
            rz__dev_leave(pushed);
        }
        lock();
        for (int j = 0; j < g_nkctx; j++) {
            if (g_kctx[j].ctx != want[i] || g_kctx[j].state != 2)
                continue; /* forgotten meanwhile (its context ended): the module went with it */
            g_kctx[j].state = ok ? 1 : -1;
            g_kctx[j].mod = mod;
            g_kctx[j].fn = fn;
        }
        unlock();
    }
    pthread_mutex_unlock(&g_load_lock);
}

static struct kernel_ctx *kernel_for(void *ctx) {
    struct kernel_ctx *k = NULL;
    for (int i = 0; i < g_nkctx && !k; i++)
        if (g_kctx[i].ctx == ctx)
            k = &g_kctx[i];
    if (k == NULL) {
        if (g_nkctx == MAX_CTX)
            return NULL; /* more contexts than slots: those scan with copies */
        k = &g_kctx[g_nkctx++];
        *k = (struct kernel_ctx){.ctx = ctx};
    }
    if (k->state == 0) {
        k->state = 2; /* loaded after the registry lock (rz__check_kernel_load): this scan uses copies */
        atomic_store_explicit(&g_wanted, 1, memory_order_relaxed);
    }
    return k->state == 1 ? k : NULL;
}

static int grow(void **p, size_t *cap, size_t want, size_t elem) {
    if (want <= *cap)
        return RZ_OK;
    size_t n = *cap ? *cap : 1024;
    while (n < want)
        n *= 2;
    void *q = realloc(*p, n * elem);
    if (q == NULL)
        return RZ_ENOMEM;
    *p = q;
    *cap = n;
    return RZ_OK;
}

/* Check the bands of io that belong to ctx (m of them, positions already in g_pos, descriptors in
 * g_upload after the head). Marks suspects; RZ_EDRIVER on anything that prevents a complete answer. */
static int check_ctx(void *ctx, size_t m, uint8_t *suspect) {
    for (int i = 0; i < g_nkctx; i++)
        if (g_kctx[i].ctx == ctx && g_kctx[i].state < 0)
            return RZ_EDRIVER; /* known to have no kernel: no driver call at all */
    int pushed, rc = RZ_EDRIVER;
    if (rz__dev_enter(ctx, &pushed) != RZCUDA_SUCCESS)
        return RZ_EDRIVER;
    struct kernel_ctx *k = kernel_for(ctx);
    rzcu_stream s;
    size_t bytes = HEAD_BYTES + m * sizeof(rz_check_desc_t);
    if (k == NULL || rz__dev_stream(ctx, &s) != RZCUDA_SUCCESS)
        goto out;
    if (bytes > k->buf_size) {
        if (k->buf)
            rz__dev_retire_device(ctx, k->buf); /* freed after the registry lock: cuMemFree may wait */
        k->buf = 0;
        k->buf_size = 0;
        size_t size = bytes < ((size_t)1 << 20) ? ((size_t)1 << 20) : bytes + bytes / 2;
        rzcu_capture_mode saved = rz__dev_relaxed_begin(); /* the library's buffer: no capture's business */
        rzcu_result ar = rz__drv.cuMemAlloc_v2(&k->buf, size);
        rz__dev_relaxed_end(saved);
        if (ar != RZCUDA_SUCCESS)
            goto out;
        k->buf_size = size;
    }
    rz_devptr_t result = k->buf, descs = k->buf + HEAD_BYTES;
    unsigned n32 = (unsigned)m, cap32 = RZ_CHECK_CAP;
    void *params[] = {&descs, &n32, &result, &cap32};
    unsigned grid = (unsigned)((m + BLOCK - 1) / BLOCK);
    if (rz__drv.cuMemcpyHtoDAsync_v2(k->buf, g_upload, bytes, s) != RZCUDA_SUCCESS ||
        rz__drv.cuLaunchKernel(k->fn, grid, 1, 1, BLOCK, 1, 1, 0, s, params, NULL) != RZCUDA_SUCCESS ||
        rz__drv.cuMemcpyDtoHAsync_v2(g_result, result, sizeof g_result, s) != RZCUDA_SUCCESS)
        goto out;
    rzcu_capture_mode saved = rz__dev_quiet_begin(); /* the library's own stream */
    rzcu_result sr = rz__drv.cuStreamSynchronize(s);
    rz__dev_quiet_end(saved);
    if (sr != RZCUDA_SUCCESS)
        goto out;
    if (g_result[0] > RZ_CHECK_CAP)
        goto out; /* too many to list: read every band */
    for (uint32_t i = 0; i < g_result[0]; i++) {
        if (g_result[1 + i] >= m)
            goto out; /* not an answer this kernel gives */
        suspect[g_pos[g_result[1 + i]]] = 1;
    }
    rc = RZ_OK;
out:
    rz__dev_leave(pushed);
    return rc;
}

int rz__check_kernel_run(const rz_band_io_t *io, size_t n, uint8_t *suspect) {
    if (g_off || !rz__options()->check_kernel || !rz__check_kernel_built() || n == 0 || n > UINT32_MAX)
        return RZ_EDRIVER;
    if (grow((void **)&g_pos, &g_pos_cap, n, sizeof *g_pos) != RZ_OK ||
        grow((void **)&g_upload, &g_upload_size, HEAD_BYTES + n * sizeof(rz_check_desc_t), 1) != RZ_OK)
        return RZ_EDRIVER;
    memset(suspect, 0, n);
    memset(g_upload, 0, HEAD_BYTES);
    rz_check_desc_t *descs = (rz_check_desc_t *)(void *)(g_upload + HEAD_BYTES);
    /* One pass per distinct context, grouped in linear time. */
    rz__io_group_lock();
    rz_io_groups_t groups;
    int rc = rz__io_group(io, n, &groups) ? RZ_OK : RZ_EDRIVER;
    for (size_t k = 0; rc == RZ_OK && k < groups.n; k++) {
        size_t m = 0;
        for (size_t x = groups.start[k]; x < groups.start[k + 1]; x++) {
            size_t j = groups.order[x];
            descs[m] = (rz_check_desc_t){.band = io[j].dev, .bytes = (uint32_t)io[j].bytes, .expected = io[j].value};
            g_pos[m++] = (uint32_t)j;
        }
        if (check_ctx(groups.ctx[k], m, suspect) != RZ_OK)
            rc = RZ_EDRIVER;
    }
    rz__io_group_unlock();
    return rc;
}
