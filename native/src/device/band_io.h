/*
 * Band transfers through the device seam (band_io.c).
 */
#ifndef REDZONE_BAND_IO_H
#define REDZONE_BAND_IO_H

#include "common.h"

/* cuPointerGetAttribute in a quiet section. */
rzcu_result rz__dev_pointer_attribute(void *data, rzcu_pointer_attribute attribute, rz_devptr_t ptr);

/* The context and start of the driver's block holding ptr, in one driver call (cuPointerGetAttributes; two
 * cuPointerGetAttribute calls without it): INVALID_VALUE when no allocation holds ptr. */
rzcu_result rz__dev_block_of(rz_devptr_t ptr, void **ctx, rz_devptr_t *start);

/* Page-lock p (portable), with the mode relaxed: the driver's answer (NOT_SUPPORTED without the entry point). */
rzcu_result rz__dev_host_register(void *p, size_t bytes);

/* One band transfer: device range [dev, dev+bytes) of context ctx; host buffer or fill value. 32 bytes: a
 * batch holds RZ_BATCH_ENTRIES of them. */
typedef struct rz_band_io {
    void *ctx;
    rz_devptr_t dev;
    uint8_t *host;  /* read: destination */
    uint32_t bytes; /* a band: at most RZ_PAD_MAX or RZ_FRONT_MAX */
    uint8_t value;  /* fill: byte to write; scan: the byte expected */
    uint8_t front;  /* the zone's front band (before its pointer), not the one after its end */
    uint8_t failed; /* set by rz__dev_read/rz__dev_write when this entry's context failed */
} rz_band_io_t;

/* A batch grouped by context (linear time): group k is context ctx[k], its entries' indices are
 * order[start[k] .. start[k+1]), in batch order. Scratch shared by every caller: take rz__io_group_lock()
 * around rz__io_group() and the use of its answer. 0 when out of memory. */
typedef struct rz_io_groups {
    const uint32_t *order;
    const size_t *start;
    void *const *ctx;
    size_t n;
} rz_io_groups_t;

int rz__io_group(const rz_band_io_t *io, size_t n, rz_io_groups_t *out);

void rz__io_group_lock(void);

void rz__io_group_unlock(void);

/* Read n bands into their host buffers (batched per context, one sync each). On failure the first error
 * is returned and the entries of every context that failed have `failed` set; the others were read. */
rzcu_result rz__dev_read(rz_band_io_t *io, size_t n);

/* Fill n bands with their values (per context, one sync each). */
rzcu_result rz__dev_write(rz_band_io_t *io, size_t n);

/* Host bytes of the batch scratch held now (the copy lists and grouping here; band.c adds its own). Registry
 * lock held. */
uint64_t rz__dev_scratch_bytes(void);

/* 1: move bands one by one (the fallback for drivers without batch copies); 0: batched when possible. */
void rz__dev_set_per_band(int per_band);

/* One batch of band transfers: at most this many bands, and (reads) this many bytes of them in host staging,
 * page-locked when the driver allows (band.c: bounded batches). */
#define RZ_BATCH_ENTRIES ((size_t)1 << 17)

#define RZ_BATCH_STAGING ((size_t)7 << 20) /* 114,688 bands of 64 bytes */

typedef struct rz_staging {
    uint8_t *p;
    size_t size;
    int pinned;
} rz_staging_t;

/* Device memory given up under the registry lock, freed by rz__dev_release_retired. */
void rz__dev_retire_device(void *ctx, rz_devptr_t dev);

/* Release what was given up under the registry lock (old staging, old device buffers). Call without it. */
void rz__dev_release_retired(void);

/* Make st at least `bytes` long (contents not kept; the old buffer is retired). RZ_OK or RZ_ENOMEM. */
int rz__dev_staging_reserve(rz_staging_t *st, size_t bytes);


/* A page-locked buffer of `bytes` for a copy queued in a program's stream, or NULL (pinned_slots.c): out of
 * the page-locked budget (RZ_PINNED_BUDGET in all), or none can be had (rz__dev_pinned_usable says 0: no
 * driver registration; use pageable memory). Give it back with rz__dev_pinned_free, which returns 0 for
 * memory that is not one. Both take only a mutex (the first use of a size may register memory, which
 * waits for no device work): callable from a stream's host function. */
#define RZ_PINNED_BUDGET ((size_t)64 << 20)
void *rz__dev_pinned_alloc(size_t bytes);

int rz__dev_pinned_free(void *p);

int rz__dev_pinned_usable(void);

/* Page-locked bytes the slots hold now (registered regions). */
size_t rz__dev_pinned_bytes(void);

/* A free's band read (n entries of one context, into page-locked memory where it can): every copy but the last
 * queued on the legacy stream, the last a synchronous copy, so the read is ordered after the program's work
 * on the default streams and every blocking stream (the legacy stream's semantics), in one host wait. Not
 * during a capture (the caller checks). */
rzcu_result rz__dev_read_after_default(rz_band_io_t *io, size_t n);

/* The same read, ordered also after the work queued so far on streams[0..ns) (stream handles, non-blocking
 * ones included): an event recorded on each and waited for by the legacy stream (no host wait), then the
 * read as above: one host wait in all. In a capture quiet section (capture.h): STREAM_CAPTURE_UNSUPPORTED when
 * one may be in progress. An error (a stream of another context than the entries': INVALID_HANDLE, a driver
 * without events) leaves the caller to synchronise the context and read. */
rzcu_result rz__dev_read_after_streams(rz_band_io_t *io, size_t n, const rzcu_stream *streams, size_t ns);

#endif /* REDZONE_BAND_IO_H */
