/*
 * Memory pools of the emulated driver: each device's default pool (cuDeviceGetDefaultMemPool), pools made by
 * cuMemPoolCreate and destroyed by cuMemPoolDestroy, the current pool of a device (cuDeviceGetMemPool /
 * cuDeviceSetMemPool, what cuMemAllocAsync allocates from), pool attributes (release threshold, reuse
 * flags, reserved and used memory with their high watermarks), cuMemPoolTrimTo, and pool export within the
 * process (cuMemPoolExportToShareableHandle / ImportFromShareableHandle, cuMemPoolExportPointer /
 * ImportPointer). The memory itself is emu_mem.c's, allocated and freed by emu_alloc.c; a pool only counts
 * it. The rules, and where the documentation is silent the stricter reading taken, are in
 * docs/emulated-driver.md (Memory pools).
 *
 * A pool handle is the address of its slot in one table; slots are never reused, so a destroyed pool's
 * handle stays invalid (CUDA_ERROR_INVALID_VALUE) for the rest of the process.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu_engine.h"
#include "emu_pool.h"

#define MAX_POOLS 1024
#define REC_BUCKETS 1024

enum pool_kind { POOL_FREE_SLOT, POOL_DEFAULT, POOL_CREATED, POOL_IMPORTED };

struct CUmemPoolHandle_st {
    enum pool_kind kind;
    bool destroyed;
    int device;
    unsigned handle_types;
    size_t max_size; /* 0: none */
    uint64_t threshold;
    int reuse[3]; /* the three REUSE_* flags, 1 by default */
    uint64_t used, used_high, reserved, reserved_high;
    struct CUmemPoolHandle_st *exporter; /* an imported pool: the pool its handle named */
};

/* A live allocation from a pool. */
struct rec {
    struct rec *next;
    rzcu_deviceptr p;
    struct CUmemPoolHandle_st *pool;
    uint64_t bytes;         /* as counted: rounded up to CUDA_EMU_ALLOC_ALIGN */
    unsigned long imports;  /* cuMemPoolImportPointer of it not yet freed */
};

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct CUmemPoolHandle_st pools[MAX_POOLS];
static size_t npools = CUDA_EMU_MAX_DEVICES; /* the default pools first */
static struct CUmemPoolHandle_st *current[CUDA_EMU_MAX_DEVICES];
static struct rec *recs[REC_BUCKETS];

static size_t rec_bucket(rzcu_deviceptr p) { return (size_t)((p >> 8) * 0x9E3779B97F4A7C15ull >> 54) % REC_BUCKETS; }

static void pool_init(struct CUmemPoolHandle_st *p, enum pool_kind kind, int device)
{
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->device = device;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
}

/* The default pools exist from the start (called with pool_mu held). */
static void defaults_once(void)
{
    for (int i = 0; i < CUDA_EMU_MAX_DEVICES; i++)
        if (pools[i].kind == POOL_FREE_SLOT)
            pool_init(&pools[i], POOL_DEFAULT, i);
}

/* The live pool h names (any kind), or NULL; pool_mu held. */
static struct CUmemPoolHandle_st *lookup(rzcu_mem_pool h)
{
    defaults_once();
    uintptr_t a = (uintptr_t)h, base = (uintptr_t)pools;
    if (a < base || a >= base + npools * sizeof pools[0] || (a - base) % sizeof pools[0])
        return NULL;
    struct CUmemPoolHandle_st *p = h;
    if (p->kind == POOL_FREE_SLOT || p->destroyed)
        return NULL;
    if (p->kind == POOL_DEFAULT && p->device >= emu_cfg.ndevices)
        return NULL;
    return p;
}

static struct rec *rec_find(rzcu_deviceptr p)
{
    struct rec *r = recs[rec_bucket(p)];
    while (r && r->p != p)
        r = r->next;
    return r;
}

static void rec_drop(rzcu_deviceptr p)
{
    for (struct rec **l = &recs[rec_bucket(p)]; *l; l = &(*l)->next) {
        if ((*l)->p == p) {
            struct rec *dead = *l;
            *l = dead->next;
            free(dead);
            return;
        }
    }
}

static uint64_t rounded(size_t bytes) { return (bytes + CUDA_EMU_ALLOC_ALIGN - 1) / CUDA_EMU_ALLOC_ALIGN * CUDA_EMU_ALLOC_ALIGN; }

/* ---- what emu_alloc.c asks ---- */

rzcu_result emu_pool_begin_alloc(rzcu_mem_pool h, int stream_device, size_t bytes, int *device, rzcu_mem_pool *out)
{
    pthread_mutex_lock(&pool_mu);
    struct CUmemPoolHandle_st *p;
    if (h) {
        p = lookup(h);
    } else {
        defaults_once();
        p = current[stream_device] ? current[stream_device] : &pools[stream_device];
    }
    rzcu_result r = RZCUDA_SUCCESS;
    if (!p || p->kind == POOL_IMPORTED)
        r = RZCUDA_ERROR_INVALID_VALUE; /* imported pools cannot allocate (documented) */
    else if (p->max_size && (rounded(bytes) > p->max_size || p->used + rounded(bytes) > p->max_size))
        r = RZCUDA_ERROR_OUT_OF_MEMORY;
    if (r == RZCUDA_SUCCESS) {
        *device = p->device;
        *out = p;
    }
    pthread_mutex_unlock(&pool_mu);
    return r;
}

void emu_pool_note_alloc(rzcu_mem_pool h, rzcu_deviceptr ptr, size_t bytes)
{
    struct rec *n = calloc(1, sizeof *n);
    pthread_mutex_lock(&pool_mu);
    struct CUmemPoolHandle_st *p = h;
    rec_drop(ptr); /* an earlier allocation at this address went with its context */
    uint64_t b = rounded(bytes), cached = p->reserved - p->used;
    p->used += b;
    if (b > cached)
        p->reserved += b - cached; /* what the pool holds unused is reused first */
    if (p->used > p->used_high)
        p->used_high = p->used;
    if (p->reserved > p->reserved_high)
        p->reserved_high = p->reserved;
    if (n) {
        *n = (struct rec){recs[rec_bucket(ptr)], ptr, p, b, 0};
        recs[rec_bucket(ptr)] = n;
    }
    pthread_mutex_unlock(&pool_mu);
}

void emu_pool_note_free(rzcu_deviceptr ptr)
{
    pthread_mutex_lock(&pool_mu);
    struct rec *r = rec_find(ptr);
    if (r) {
        struct CUmemPoolHandle_st *p = r->pool;
        p->used -= r->bytes; /* the bytes stay reserved: freed into the pool */
        if (p->destroyed)
            p->reserved = p->used; /* a destroyed pool releases as its allocations go */
        rec_drop(ptr);
    }
    pthread_mutex_unlock(&pool_mu);
}

bool emu_pool_free_import(rzcu_deviceptr ptr)
{
    pthread_mutex_lock(&pool_mu);
    struct rec *r = rec_find(ptr);
    bool consumed = r && r->imports > 0;
    if (consumed)
        r->imports--;
    pthread_mutex_unlock(&pool_mu);
    return consumed;
}

void emu_pool_at_sync(void)
{
    pthread_mutex_lock(&pool_mu);
    for (size_t i = 0; i < npools; i++) {
        struct CUmemPoolHandle_st *p = &pools[i];
        if (p->kind != POOL_FREE_SLOT && p->reserved > p->threshold)
            p->reserved = p->used > p->threshold ? p->used : p->threshold;
    }
    pthread_mutex_unlock(&pool_mu);
}

/* ---- creation, the current pool ---- */

EMU_API rzcu_result cuDeviceGetDefaultMemPool(rzcu_mem_pool *pool, rzcu_device dev)
{
    ENTER(cuDeviceGetDefaultMemPool);
    if (!pool)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!emu_valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&pool_mu);
    defaults_once();
    pthread_mutex_unlock(&pool_mu);
    *pool = &pools[dev];
    return RZCUDA_SUCCESS;
}

/*
 * Device memory pools only (location CU_MEM_LOCATION_TYPE_DEVICE, a valid device; host pools are
 * CUDA_ERROR_NOT_SUPPORTED), allocType CU_MEM_ALLOCATION_TYPE_PINNED, handleTypes NONE or
 * POSIX_FILE_DESCRIPTOR (the others CUDA_ERROR_NOT_SUPPORTED, as cuMemCreate's here),
 * win32SecurityAttributes NULL, usage 0 and the reserved bytes zero (else CUDA_ERROR_INVALID_VALUE).
 */
EMU_API rzcu_result cuMemPoolCreate(rzcu_mem_pool *pool, const cuda_emu_mem_pool_props_t *props)
{
    ENTER(cuMemPoolCreate);
    if (!pool || !props || props->allocType != RZCU_MEM_ALLOCATION_TYPE_PINNED || props->win32SecurityAttributes)
        return RZCUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof props->reserved; i++)
        if (props->reserved[i])
            return RZCUDA_ERROR_INVALID_VALUE;
    if (props->location.type != RZCU_MEM_LOCATION_TYPE_DEVICE)
        return RZCUDA_ERROR_NOT_SUPPORTED;
    if (!emu_valid_device(props->location.id) || props->usage)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (props->handleTypes & ~(unsigned)RZCU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return RZCUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&pool_mu);
    defaults_once();
    struct CUmemPoolHandle_st *p = npools < MAX_POOLS ? &pools[npools++] : NULL;
    if (p) {
        pool_init(p, POOL_CREATED, props->location.id);
        p->handle_types = props->handleTypes;
        p->max_size = props->maxSize;
    }
    pthread_mutex_unlock(&pool_mu);
    if (!p)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    *pool = p;
    return RZCUDA_SUCCESS;
}

/*
 * A default pool cannot be destroyed (CUDA_ERROR_INVALID_VALUE). A pool with allocations not yet freed is
 * destroyed at once for the program (its handle is invalid from here on) and its memory released as they
 * are freed, as documented; a device whose current pool it was gets its default pool back.
 */
EMU_API rzcu_result cuMemPoolDestroy(rzcu_mem_pool pool)
{
    ENTER(cuMemPoolDestroy);
    pthread_mutex_lock(&pool_mu);
    struct CUmemPoolHandle_st *p = lookup(pool);
    rzcu_result r = RZCUDA_ERROR_INVALID_VALUE;
    if (p && p->kind != POOL_DEFAULT) {
        p->destroyed = true;
        p->reserved = p->used;
        for (int i = 0; i < CUDA_EMU_MAX_DEVICES; i++)
            if (current[i] == p)
                current[i] = NULL;
        r = RZCUDA_SUCCESS;
    }
    pthread_mutex_unlock(&pool_mu);
    return r;
}

EMU_API rzcu_result cuDeviceGetMemPool(rzcu_mem_pool *pool, rzcu_device dev)
{
    ENTER(cuDeviceGetMemPool);
    if (!pool)
        return RZCUDA_ERROR_INVALID_VALUE;
    if (!emu_valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&pool_mu);
    defaults_once();
    *pool = current[dev] ? current[dev] : &pools[dev];
    pthread_mutex_unlock(&pool_mu);
    return RZCUDA_SUCCESS;
}

/* The pool must be a live pool of that device, not an imported one. */
EMU_API rzcu_result cuDeviceSetMemPool(rzcu_device dev, rzcu_mem_pool pool)
{
    ENTER(cuDeviceSetMemPool);
    if (!emu_valid_device(dev))
        return RZCUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&pool_mu);
    struct CUmemPoolHandle_st *p = lookup(pool);
    rzcu_result r = RZCUDA_ERROR_INVALID_VALUE;
    if (p && p->kind != POOL_IMPORTED && p->device == dev) {
        current[dev] = p->kind == POOL_DEFAULT ? NULL : p;
        r = RZCUDA_SUCCESS;
    }
    pthread_mutex_unlock(&pool_mu);
    return r;
}

/* ---- attributes, trimming ---- */

/*
 * The REUSE_* flags take an int (stored as 0 or 1), RELEASE_THRESHOLD a cuuint64_t; RESERVED_MEM_HIGH and
 * USED_MEM_HIGH can only be set to 0 (which resets the watermark to the current value), the CURRENT
 * attributes not at all (CUDA_ERROR_INVALID_VALUE). An imported pool has no attributes here (stricter: its
 * memory is the exporter's).
 */
EMU_API rzcu_result cuMemPoolSetAttribute(rzcu_mem_pool pool, int attr, void *value)
{
    ENTER(cuMemPoolSetAttribute);
    if (!value)
        return RZCUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_mu);
    struct CUmemPoolHandle_st *p = lookup(pool);
    rzcu_result r = RZCUDA_ERROR_INVALID_VALUE;
    if (p && p->kind != POOL_IMPORTED) {
        uint64_t v64 = 0; /* the 64-bit attributes' value; the REUSE_* flags are an int, read as such */
        if (attr > CUDA_EMU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES)
            memcpy(&v64, value, sizeof v64);
        r = RZCUDA_SUCCESS;
        switch (attr) {
        case CUDA_EMU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CUDA_EMU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CUDA_EMU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            p->reuse[attr - 1] = *(const int *)value != 0;
            break;
        case CUDA_EMU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
            p->threshold = v64;
            break;
        case CUDA_EMU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
            if (v64)
                r = RZCUDA_ERROR_INVALID_VALUE;
            else
                p->reserved_high = p->reserved;
            break;
        case CUDA_EMU_MEMPOOL_ATTR_USED_MEM_HIGH:
            if (v64)
                r = RZCUDA_ERROR_INVALID_VALUE;
            else
                p->used_high = p->used;
            break;
        default:
            r = RZCUDA_ERROR_INVALID_VALUE;
        }
    }
    pthread_mutex_unlock(&pool_mu);
    return r;
}

EMU_API rzcu_result cuMemPoolGetAttribute(rzcu_mem_pool pool, int attr, void *value)
{
    ENTER(cuMemPoolGetAttribute);
    if (!value)
        return RZCUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_mu);
    struct CUmemPoolHandle_st *p = lookup(pool);
    rzcu_result r = RZCUDA_ERROR_INVALID_VALUE;
    if (p && p->kind != POOL_IMPORTED) {
        r = RZCUDA_SUCCESS;
        uint64_t v = 0;
        switch (attr) {
        case CUDA_EMU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CUDA_EMU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CUDA_EMU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            *(int *)value = p->reuse[attr - 1];
            break;
        case CUDA_EMU_MEMPOOL_ATTR_RELEASE_THRESHOLD: v = p->threshold; break;
        case CUDA_EMU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: v = p->reserved; break;
        case CUDA_EMU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: v = p->reserved_high; break;
        case CUDA_EMU_MEMPOOL_ATTR_USED_MEM_CURRENT: v = p->used; break;
        case CUDA_EMU_MEMPOOL_ATTR_USED_MEM_HIGH: v = p->used_high; break;
        default: r = RZCUDA_ERROR_INVALID_VALUE;
        }
        if (r == RZCUDA_SUCCESS && attr >= CUDA_EMU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
            memcpy(value, &v, sizeof v);
    }
    pthread_mutex_unlock(&pool_mu);
    return r;
}

/* Releases what the pool holds unused down to min_bytes_to_keep (never below its used memory). */
EMU_API rzcu_result cuMemPoolTrimTo(rzcu_mem_pool pool, size_t min_bytes_to_keep)
{
    ENTER(cuMemPoolTrimTo);
    pthread_mutex_lock(&pool_mu);
    struct CUmemPoolHandle_st *p = lookup(pool);
    rzcu_result r = RZCUDA_ERROR_INVALID_VALUE;
    if (p && p->kind != POOL_IMPORTED) {
        if (p->reserved > min_bytes_to_keep)
            p->reserved = p->used > min_bytes_to_keep ? p->used : min_bytes_to_keep;
        r = RZCUDA_SUCCESS;
    }
    pthread_mutex_unlock(&pool_mu);
    return r;
}

/* ---- export within the process ---- */

static const char POOL_MAGIC[8] = "cuemuPOL", PTR_MAGIC[8] = "cuemuPTR";

/* What a pool's file descriptor holds, and the 64 bytes of a CUmemPoolPtrExportData. */
struct pool_handle_bytes {
    char magic[8];
    int32_t pid;
    uint32_t slot;
};
struct ptr_bytes {
    char magic[8];
    int32_t pid;
    uint32_t slot; /* the exporting pool */
    uint64_t ptr, serial;
    char unused[32];
};
_Static_assert(sizeof(struct ptr_bytes) == sizeof(cuda_emu_mem_pool_ptr_export_data_t), "64 bytes");

/*
 * Only POSIX file descriptors (handle_out: an int), of a pool created with that handle type, flags 0: else
 * CUDA_ERROR_INVALID_VALUE (a default or imported pool has no handle types). The descriptor is
 * close-on-exec; it is the caller's to close.
 */
EMU_API rzcu_result cuMemPoolExportToShareableHandle(void *handle_out, rzcu_mem_pool pool, unsigned int handle_type,
                                                     unsigned long long flags)
{
    ENTER(cuMemPoolExportToShareableHandle);
    if (!handle_out || flags || handle_type != RZCU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return RZCUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_mu);
    struct CUmemPoolHandle_st *p = lookup(pool);
    bool ok = p && p->kind == POOL_CREATED && (p->handle_types & handle_type);
    struct pool_handle_bytes h = {{0}, (int32_t)getpid(), ok ? (uint32_t)(p - pools) : 0};
    pthread_mutex_unlock(&pool_mu);
    if (!ok)
        return RZCUDA_ERROR_INVALID_VALUE;
    memcpy(h.magic, POOL_MAGIC, sizeof h.magic);
    int fd = memfd_create("cuda-emu-pool", MFD_CLOEXEC);
    if (fd < 0)
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    if (pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) {
        close(fd);
        return RZCUDA_ERROR_OUT_OF_MEMORY;
    }
    *(int *)handle_out = fd;
    return RZCUDA_SUCCESS;
}

/*
 * handle is the descriptor itself (cast to void *, as cuda.h's samples pass it). A descriptor that is not
 * one the emulator made, or whose pool has been destroyed, is CUDA_ERROR_INVALID_VALUE; one of another
 * process CUDA_ERROR_NOT_SUPPORTED (no memory is shared between processes here). Each import is a new
 * imported pool, which allocates nothing and is released by cuMemPoolDestroy.
 */
EMU_API rzcu_result cuMemPoolImportFromShareableHandle(rzcu_mem_pool *pool_out, void *handle, unsigned int handle_type,
                                                       unsigned long long flags)
{
    ENTER(cuMemPoolImportFromShareableHandle);
    if (!pool_out || flags || handle_type != RZCU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return RZCUDA_ERROR_INVALID_VALUE;
    int fd = (int)(intptr_t)handle;
    struct pool_handle_bytes h;
    if (fd < 0 || pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h || memcmp(h.magic, POOL_MAGIC, sizeof h.magic))
        return RZCUDA_ERROR_INVALID_VALUE;
    if (h.pid != (int32_t)getpid())
        return RZCUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&pool_mu);
    struct CUmemPoolHandle_st *exp = h.slot < npools ? lookup(&pools[h.slot]) : NULL, *p = NULL;
    rzcu_result r = RZCUDA_ERROR_INVALID_VALUE;
    if (exp && exp->kind == POOL_CREATED) {
        r = RZCUDA_ERROR_OUT_OF_MEMORY;
        if (npools < MAX_POOLS) {
            p = &pools[npools++];
            pool_init(p, POOL_IMPORTED, exp->device);
            p->exporter = exp;
            r = RZCUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&pool_mu);
    if (p)
        *pool_out = p;
    return r;
}

/* ptr must be the base of a live allocation from a pool created with a handle type (stricter: no inner
 * pointers), else CUDA_ERROR_INVALID_VALUE. */
EMU_API rzcu_result cuMemPoolExportPointer(cuda_emu_mem_pool_ptr_export_data_t *out, rzcu_deviceptr ptr)
{
    ENTER(cuMemPoolExportPointer);
    uint64_t serial;
    if (!out || !emu_mem_base_serial(ptr, &serial))
        return RZCUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_mu);
    struct rec *r = rec_find(ptr);
    bool ok = r && r->pool->kind == POOL_CREATED && r->pool->handle_types;
    struct ptr_bytes b;
    memset(&b, 0, sizeof b);
    memcpy(b.magic, PTR_MAGIC, sizeof b.magic);
    b.pid = (int32_t)getpid();
    b.slot = ok ? (uint32_t)(r->pool - pools) : 0;
    b.ptr = ptr;
    b.serial = serial;
    pthread_mutex_unlock(&pool_mu);
    if (!ok)
        return RZCUDA_ERROR_INVALID_VALUE;
    memcpy(out, &b, sizeof b);
    return RZCUDA_SUCCESS;
}

/*
 * pool must be a pool imported from the allocation's pool, and the allocation still live (the same serial
 * number), else CUDA_ERROR_INVALID_VALUE. The pointer is the allocation's own address (one process); each
 * import must be freed (cuMemFree or cuMemFreeAsync) before the exporter's free, as documented: while
 * imports of it are outstanding, a free of that address is an importer's (emu_pool_free_import).
 */
EMU_API rzcu_result cuMemPoolImportPointer(rzcu_deviceptr *ptr_out, rzcu_mem_pool pool,
                                           cuda_emu_mem_pool_ptr_export_data_t *data)
{
    ENTER(cuMemPoolImportPointer);
    if (!ptr_out || !data)
        return RZCUDA_ERROR_INVALID_VALUE;
    struct ptr_bytes b;
    memcpy(&b, data, sizeof b);
    if (memcmp(b.magic, PTR_MAGIC, sizeof b.magic))
        return RZCUDA_ERROR_INVALID_VALUE;
    if (b.pid != (int32_t)getpid())
        return RZCUDA_ERROR_NOT_SUPPORTED;
    uint64_t serial;
    if (!emu_mem_base_serial((rzcu_deviceptr)b.ptr, &serial) || serial != b.serial)
        return RZCUDA_ERROR_INVALID_VALUE; /* freed since */
    pthread_mutex_lock(&pool_mu);
    struct CUmemPoolHandle_st *p = lookup(pool);
    struct rec *r = rec_find((rzcu_deviceptr)b.ptr);
    bool ok = p && p->kind == POOL_IMPORTED && r && b.slot < npools && p->exporter == &pools[b.slot] &&
              r->pool == p->exporter;
    if (ok)
        r->imports++;
    pthread_mutex_unlock(&pool_mu);
    if (!ok)
        return RZCUDA_ERROR_INVALID_VALUE;
    *ptr_out = (rzcu_deviceptr)b.ptr;
    return RZCUDA_SUCCESS;
}
