/*
 * redzone: guard bands ("red zones") after CUDA device allocations, a registry of zones with creation
 * indices, scans that find writes past the end, and poison windows that bisect reads past the end.
 *
 * This is the one public header. Allocation calls are shaped like the driver API (a CUdeviceptr out
 * parameter, a byte count) and return the driver's own CUresult untouched; every other call returns 0 or
 * a positive count on success and a negative RZ_E* status on failure. The library reaches the driver only
 * through dlopen("libcuda.so.1"); it never links against it.
 */
#ifndef REDZONE_H
#define REDZONE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(REDZONE_BUILDING)
#define RZ_API __attribute__((visibility("default")))
#else
#define RZ_API
#endif

/* Device pointer, the same type as CUdeviceptr (unsigned long long). */
typedef unsigned long long rz_devptr_t;

/* X(name, value, message): the status table. 0 is success, every error is negative. */
#define RZ_STATUS_MAP(X)                                                              \
    X(RZ_OK, 0, "success")                                                            \
    X(RZ_EINVAL, -1, "invalid argument")                                              \
    X(RZ_ENOMEM, -2, "out of host memory")                                            \
    X(RZ_ENODRIVER, -3, "the CUDA driver (libcuda.so.1) could not be loaded")         \
    X(RZ_EDRIVER, -4, "a CUDA driver call failed")                                    \
    X(RZ_EOVERFLOW, -5, "size overflow")                                              \
    X(RZ_ENOTFOUND, -6, "no such zone")                                               \
    X(RZ_EDISABLED, -7, "red zones are disabled (METRALE_REDZONE unset or 0)")        \
    X(RZ_EBUSY, -8, "busy: a scan or poison is already running on this thread, or the registry is held by a stopped thread") \
    X(RZ_EIO, -9, "a file redzone keeps could not be written or read")

typedef enum rz_status {
#define RZ_STATUS_ENUM(name, value, msg) name = value,
    RZ_STATUS_MAP(RZ_STATUS_ENUM)
#undef RZ_STATUS_ENUM
} rz_status_t;

/* "RZ_EINVAL" for RZ_EINVAL; "RZ_UNKNOWN" for values outside the table. */
RZ_API const char *rz_status_name(int status);
/* A human sentence for a status; "unknown status" outside the table. */
RZ_API const char *rz_strerror(int status);

/*
 * Allocate `bytes` of device memory in the current context, followed by a guard band when red zones are
 * enabled for this allocation's creation index. Returns the driver's CUresult (0 = CUDA_SUCCESS). Every call
 * consumes one creation index, failed calls included. If padding makes the driver run out of memory the
 * allocation is retried without a band (counted in unpadded_allocs, one warning).
 */
RZ_API int rz_mem_alloc(rz_devptr_t *dptr, size_t bytes);
/* Free an allocation made by rz_mem_alloc (or any device pointer: unknown ones pass straight through).
 * Returns the driver's CUresult. */
RZ_API int rz_mem_free(rz_devptr_t dptr);

/*
 * Read every band back and compare each byte with the byte that zone is expected to hold. Each violated
 * zone is reported (one REDZONE VIOLATION line), passed to __redzone_violation(), and re-filled, so a later
 * scan reports only new writes. Returns the number of violated zones, or a negative status.
 */
RZ_API int rz_scan(void);

/*
 * Poison window [lo, hi): bands of zones whose creation index is in the window are filled with 0xEE, all
 * others with 0x00, and zones allocated later follow the same rule until rz_unpoison(). Each zone remembers
 * the byte it holds, so a scan right after a poison reports nothing. Returns 0 or a negative status
 * (RZ_EINVAL when lo > hi).
 */
RZ_API int rz_poison(uint64_t lo, uint64_t hi);
/* End the poison window: every band gets the configured fill byte again. */
RZ_API int rz_unpoison(void);

/* X(name, kind, description): the counters. kind is "gauge" (a current value), "peak" (the highest value a
 * gauge reached; never regresses) or "counter" (only grows). */
#define RZ_COUNTERS(X)                                                                                      \
    X(current_mapped_bytes, gauge, "device bytes held by live allocations made through redzone, pad included") \
    X(peak_mapped_bytes, peak, "highest current_mapped_bytes so far; never regresses")                         \
    X(map_calls, counter, "confirmed device allocations redzone registered (not one the registry had no host memory for, nor its free)")                                                     \
    X(unmap_calls, counter, "free calls for known allocations, failed ones included")                         \
    X(page_reset_calls, counter, "bands re-filled after creation (poison, unpoison, re-fill after a violation)") \
    X(page_reset_bytes, counter, "bytes written by those re-fills")                                           \
    X(guard_install_calls, counter, "bands installed: one per padded allocation, a guard-page one included")                            \
    X(guard_install_bytes, counter, "pad bytes of those bands (a guard-page allocation: its guard granule and slack band)")                                               \
    X(decommit_calls, counter, "physical backing released with the address range kept (not used yet: 0)")    \
    X(decommit_bytes, counter, "bytes of those releases (not used yet: 0)")                                   \
    X(live_zones, gauge, "padded zones registered now")                                                       \
    X(scans, counter, "full scans run (rz_scan: exit, fatal, sync, gdb, the API), failed ones included; free-time checks are not scans") \
    X(violations, counter, "violation reports: REDZONE VIOLATION lines (changed bands found by scans, by checks before frees and before a context ends; a zone with both bands changed counts twice), bad frees, and copies and memsets refused for leaving their buffer (one per side)")                                      \
    X(unpadded_allocs, counter, "allocations that should have had a band but got none (out of memory, size overflow, failed fill)") \
    X(stale_zones, counter, "zones forgotten without a free: their context ended (destroyed, released or reset), or the driver handed their address out again or no longer knows it") \
    X(quarantine_bytes, gauge, "device bytes of freed blocks held in the quarantine now (METRALE_REDZONE_QUARANTINE), not in current_mapped_bytes") \
    X(peak_quarantine_bytes, peak, "highest quarantine_bytes so far; never regresses")

typedef struct rz_stats {
#define RZ_STATS_FIELD(name, kind, desc) uint64_t name;
    RZ_COUNTERS(RZ_STATS_FIELD)
#undef RZ_STATS_FIELD
} rz_stats_t;

/* Snapshot of the counters (relaxed reads: telemetry, not synchronisation). RZ_EINVAL for NULL. */
RZ_API int rz_stats_get(rz_stats_t *out);

/* One zone as seen by rz_zone_foreach. */
typedef struct rz_zone_info {
    uint64_t index;       /* creation index */
    rz_devptr_t ptr;      /* the pointer the program got */
    uint64_t user_bytes;  /* bytes the program asked for */
    uint64_t pad_bytes;   /* band size after the user bytes (0: unpadded allocation) */
    void *context;        /* the CUcontext owning it; NULL for an unpadded zone, and for a padded one until
                           * its band is first written (lazy install, see METRALE_REDZONE_INSTALL) */
    uint8_t expected;     /* the byte the band holds when untouched */
} rz_zone_info_t;

/*
 * Call fn for every live allocation in creation-index order (padded zones, and allocations that went
 * unpadded with pad_bytes 0). fn returns 0 to go on, anything else to stop (which is returned). Runs under
 * the registry lock: fn must not allocate or free through redzone.
 */
typedef int (*rz_zone_visit_fn)(const rz_zone_info_t *zone, void *arg);
RZ_API int rz_zone_foreach(rz_zone_visit_fn fn, void *arg);

/* The creation index the next allocation call will take. */
RZ_API uint64_t rz_next_index(void);

/* Write the option table (variable, type, default, description) to fd, as METRALE_REDZONE_HELP=1 does. */
RZ_API void rz_options_help(int fd);

/*
 * Fixed-layout record of one violation, passed to __redzone_violation() so a debugger can break there and
 * read it. Offsets are pinned by _Static_assert in the library.
 */
typedef struct rz_violation {
    uint64_t index;       /* creation index of the zone */
    rz_devptr_t ptr;      /* user pointer */
    uint64_t user_bytes;
    uint64_t pad_bytes;   /* size of the violated band (the front band's when `front`) */
    uint64_t first;       /* first changed offset past the end; front: distance before the start (largest) */
    uint64_t last;        /* last changed offset past the end; front: distance before the start (smallest) */
    uint64_t changed;     /* how many band bytes changed */
    uint8_t first_bad;    /* value found at `first` */
    uint8_t expected;     /* value the band should hold */
    uint8_t front;        /* 1: the front band (bytes before the start) was written */
    uint8_t after_free;   /* 1: a block held in the quarantine was written after its free: first and last are
                           * offsets from ptr (negative in its front band), pad_bytes the bytes held */
    uint8_t reserved[4];
} rz_violation_t;

/* Called once per violated zone found by a scan, before the zone is re-filled. Break here in a debugger. */
RZ_API void __redzone_violation(const rz_violation_t *violation);

/* rz_refusal_t.how: the side of the call that leaves its buffer, or a free of a pointer in a front band. */
enum { RZ_REFUSED_READ = 0, RZ_REFUSED_WRITTEN = 1, RZ_REFUSED_SET = 2, RZ_REFUSED_FREE = 3 };

/* rz_refusal_t.how for the other bad frees (the `bad free` lines): a free of a pointer freed already (a double
 * free: index names the freed allocation), of one inside an allocation but not its start (first: its offset),
 * of one inside a freed block held in the quarantine, of one no allocation redzone knows holds, and of one
 * into an allocation whose context has ended (first: its offset, 0 for the allocation's start). */
enum { RZ_REFUSED_DOUBLE_FREE = 4, RZ_REFUSED_INTERIOR_FREE = 5, RZ_REFUSED_FREED_INTERIOR = 6, RZ_REFUSED_FOREIGN_FREE = 7,
       RZ_REFUSED_ENDED_FREE = 8 };

/*
 * Fixed-layout record of one copy or memset refused for leaving its buffer (the `copy past the end of
 * alloc#N` line), or of a free refused for pointing into a front band (the `bad free` line: how is
 * RZ_REFUSED_FREE, addr the pointer given, bytes 0, first and last its distance before the start, negative),
 * passed to __redzone_refused() so a debugger can break there and read it. Offsets are pinned by
 * _Static_assert in the library.
 */
typedef struct rz_refusal {
    uint64_t index;       /* creation index of the allocation the range starts in (its buffer or a band) */
    rz_devptr_t ptr;      /* its user pointer */
    uint64_t user_bytes;
    rz_devptr_t addr;     /* the device range the call asked for: [addr, addr + bytes) */
    uint64_t bytes;
    int64_t first;        /* the bytes outside the buffer, as the line gives them: offsets from its end (>= 0), */
    int64_t last;         /* or, before its start, negative distances back from it (the farthest first) */
    int32_t result;       /* the CUresult the program gets (CUDA_ERROR_INVALID_VALUE, 1), the driver not called */
    uint8_t how;          /* RZ_REFUSED_READ (a copy's source), _WRITTEN (its destination), _SET (a memset), _FREE */
    uint8_t reserved[3];
    char entry[48];       /* the driver call's base name ("cuMemcpyDtoH"), NUL-terminated */
} rz_refusal_t;

/* Called once per refused range (per line: a device-to-device copy wrong at both ends is two) or free, after its
 * lines are printed and it is counted, before the call returns its error to the program, with no lock of the
 * library held. Break here in a debugger. */
RZ_API void __redzone_refused(const rz_refusal_t *refusal);

#ifdef __cplusplus
}
#endif

#endif /* REDZONE_H */
