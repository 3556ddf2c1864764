/*
 * The layouts a debugger reads straight from memory (live or a core file): the exported state block, the registry
 * node, the counters' indices, the agent's request block and the launch ring (state.c pins them).
 */
#ifndef REDZONE_STATE_H
#define REDZONE_STATE_H

#include "common.h"

enum {
#define RZ_COUNTER_ENUM(name, kind, desc) RZ_C_##name,
    RZ_COUNTERS(RZ_COUNTER_ENUM)
#undef RZ_COUNTER_ENUM
    RZ_NCOUNTERS
};

enum { RZ_ZONE_UNUSED = 0, RZ_ZONE_LIVE = 1 };

/* One allocation. Layout is read by the debugger through the offsets in rz_state_t. */
typedef struct rz_zone_node {
    uint64_t ptr;
    uint64_t user_bytes;
    uint64_t index;
    void *ctx;
    uint32_t pad_bytes;
    uint32_t next;  /* node id + 1 of the next zone in creation-index order; 0 = none */
    uint32_t prev;
    uint32_t hnext; /* hash chain, or free list when unused */
    uint8_t expected;
    uint8_t state;
    uint8_t flags; /* RZ_ZONE_UNWATCHED: pad bytes were allocated but hold no known band */
    uint8_t reserved0;
    uint16_t front_units; /* front band (METRALE_REDZONE_FRONT) in units of RZ_FRONT_UNIT bytes, before ptr */
    uint16_t fill; /* RZ_ZONE_FILLING: the event slot and generation that follow its band fill (stream_fills.c) */
} rz_zone_node_t;

/* The front band keeps the driver's alignment for the pointer the program gets: whole 256-byte units. */
#define RZ_FRONT_UNIT 256u

#define RZ_FRONT_MAX ((uint64_t)1 << 20)

static inline uint64_t rz__zone_front(const rz_zone_node_t *z) { return (uint64_t)z->front_units * RZ_FRONT_UNIT; }

#define RZ_ZONE_UNWATCHED 0x1

#define RZ_ZONE_VIOLATED 0x2 /* the last scan that covered this zone found it violated */

#define RZ_ZONE_PENDING 0x4  /* padded, band not installed yet (lazy install): nothing to check */

#define RZ_ZONE_GUARD 0x8    /* a guard-page allocation (METRALE_REDZONE_GUARD): reserved0 = log2 granularity */

/* reserved0 of a zone that is not RZ_ZONE_GUARD: an interposed allocation (not managed, not stream-ordered),
 * whose every write the hooks see, so its band can change only after device work they note (work_epoch.h). */
#define RZ_ZONE_SEEN 0x1
static inline int rz__zone_seen(const rz_zone_node_t *z) { return !(z->flags & RZ_ZONE_GUARD) && (z->reserved0 & RZ_ZONE_SEEN); }
/* reserved0 of a zone that is not RZ_ZONE_GUARD: from cuMemAllocFromPoolAsync, a memory pool the program made and
 * manages itself (its trim, release threshold and used-memory attributes): its free goes to that pool at once,
 * never held in the quarantine (docs/design.md). */
#define RZ_ZONE_OWN_POOL 0x2

#define RZ_ZONE_STREAM_ORDERED 0x10 /* from cuMemAllocAsync/FromPoolAsync: cuMemFree of it does not wait */

#define RZ_ZONE_QUEUED 0x20 /* transient, registry lock held: kept once while compacting the pending list */

/* Stream-ordered band fill queued in the program's stream and not yet seen done (`fill` names its event): not
 * read or judged until it is (rz__zone_filled), so a scan never judges a band the memset has not reached. */
#define RZ_ZONE_FILLING 0x40

/* Allocated while its stream was captured into a graph: the memory is the graph's, allocated only while a
 * launch has it, and the band is written by a memset node at each launch. Scans and poisons leave it alone;
 * its free (in the graph, or by the program after a launch) checks it. */
#define RZ_ZONE_GRAPH 0x80

/* Device bytes a zone holds, as counted in current_mapped_bytes: the user bytes and bands, or for a guard-page
 * zone its whole mapping (its 256-byte rounding up to whole granules). */
static inline uint64_t rz__zone_mapped_bytes(const rz_zone_node_t *z) {
    if (z->flags & RZ_ZONE_GUARD) {
        uint64_t gran = (uint64_t)1 << z->reserved0, r256 = (z->user_bytes + 255) & ~(uint64_t)255;
        return (r256 + gran - 1) & ~(gran - 1);
    }
    return z->user_bytes + z->pad_bytes + rz__zone_front(z);
}

/* A zone whose band scans and poisons cover. */
static inline int rz__zone_watched(const rz_zone_node_t *z) { return z->pad_bytes && !(z->flags & RZ_ZONE_UNWATCHED); }

#define RZ_CHUNK_SHIFT 16

#define RZ_CHUNK_NODES (1u << RZ_CHUNK_SHIFT)

#define RZ_MAX_CHUNKS 1024 /* 64M zones */

/* The allocation stack (at most cap frames) of zone `index`, copied when this thread removed it last; 0 when
 * none was kept (stacks off, or another zone removed since). */
#define RZ_STACK_MAX 32

#define RZ_DEPOT_SHIFT 18     /* words per depot chunk: 2 MiB */

#define RZ_DEPOT_CHUNKS 1024  /* at most 2 GiB of distinct stacks */

#define RZ_STATE_MAGIC UINT64_C(0x3145544154535a52) /* the bytes "RZSTATE1" in memory order */

#define RZ_STATE_VERSION 6

#define RZ_LAST_VIOLATIONS 16

typedef struct rz_state {
    uint64_t magic;                  /* RZ_STATE_MAGIC */
    uint32_t version;                /* RZ_STATE_VERSION */
    uint32_t size;                   /* sizeof(rz_state_t) */
    _Atomic uint64_t seq;            /* odd while the registry is being changed */
    _Atomic uint64_t next_index;     /* creation index of the next allocation call */
    uint64_t pad_bytes;              /* options, valid once options_loaded */
    uint64_t min_idx;
    uint64_t trace_idx;
    uint8_t fill;
    uint8_t options_loaded;
    uint8_t poison_active;
    uint8_t driver_loaded;
    int32_t log_fd; /* where the library's lines go (2: stderr) */
    uint64_t poison_lo;
    uint64_t poison_hi;
    _Atomic uint64_t counters[RZ_NCOUNTERS];
    /* registry */
    rz_zone_node_t *chunks[RZ_MAX_CHUNKS];
    uint32_t chunk_shift;
    uint32_t node_size;
    uint32_t head; /* node id + 1 of the lowest index, 0 if empty */
    uint32_t tail;
    uint64_t zone_count;
    /* node layout for readers without debug info */
    uint16_t off_ptr, off_user_bytes, off_index, off_ctx, off_pad_bytes, off_next, off_expected, off_state, off_flags;
    /* last scan */
    uint64_t last_scan_checked;
    uint64_t last_scan_violated;
    uint32_t last_violation_count; /* entries used in last_violations (at most RZ_LAST_VIOLATIONS) */
    _Atomic uint32_t lock;          /* the registry lock (registry.c): 0 free, 1 held, 2 held with waiters; a
                                     * debugger judging bands itself refuses while it is held */
    rz_violation_t last_violations[RZ_LAST_VIOLATIONS];
    /* allocation stacks (METRALE_REDZONE_STACKS): per node id a 4-byte stack id (0: none), in chunks parallel
     * to the node chunks (NULL: none yet); the stacks themselves, each stored once, in the depot's chunks
     * (depot.c: a header word, frame count in its low 32 bits, then the return addresses; id - 1 is the
     * header's word position, chunk << depot_shift | word) */
    uint32_t stack_depth; /* 0: off */
    uint32_t depot_shift; /* RZ_DEPOT_SHIFT */
    uint32_t *stack_ids[RZ_MAX_CHUNKS];
    uint64_t *depot_chunks[RZ_DEPOT_CHUNKS];
    /* guard-page allocations now: how many, bytes of device memory and address space they hold, the cap */
    uint64_t guard_live;
    uint64_t guard_bytes;
    uint64_t guard_cap;
} rz_state_t;

extern rz_state_t __redzone_state;

/* The same object under a hidden name: the library's own accesses skip the GOT. */
extern rz_state_t rz__state __attribute__((visibility("hidden")));

#define RZ_STATE (rz__state)

#define RZ_AGENT_MAGIC UINT64_C(0x31544e4547415a52) /* the bytes "RZAGENT1" in memory order */

#define RZ_AGENT_VERSION 1

#define RZ_AGENT_OUT (1u << 20)

enum { RZ_AGENT_PING = 1, RZ_AGENT_SCAN = 2, RZ_AGENT_POISON = 3, RZ_AGENT_UNPOISON = 4 };

/* The request block a debugger writes and reads. Layout pinned in state.c. */
typedef struct rz_agent {
    uint64_t magic;             /* RZ_AGENT_MAGIC */
    uint32_t version;           /* RZ_AGENT_VERSION */
    uint32_t size;              /* sizeof(rz_agent_t) */
    _Atomic uint32_t request;   /* futex word: the debugger writes answered + 1 to post a request */
    uint32_t answered;          /* the last request served */
    uint32_t op;                /* RZ_AGENT_* */
    _Atomic uint32_t serving;   /* 1 while a request runs: violation breakpoints do not stop then */
    uint64_t arg0, arg1;        /* poison window */
    int64_t result;             /* rz_scan / rz_poison / rz_unpoison result */
    uint64_t tid;               /* the agent's thread id (LWP) */
    _Atomic uint32_t alive;     /* the agent thread is running */
    uint32_t out_truncated;     /* out filled up */
    uint32_t out_len;
    _Atomic uint32_t abandoned; /* number of a request the debugger gave up on: its answer goes to the log */
    char out[RZ_AGENT_OUT];     /* report lines the request produced, '\n'-terminated */
} rz_agent_t;

#define RZ_LAUNCHES_MAGIC UINT64_C(0x3148434e55414c52) /* the bytes "RLAUNCH1" in memory order */

#define RZ_LAUNCHES_VERSION 1

#define RZ_LAUNCH_RING 256

/* The recent kernel launches a report names, exported (`__redzone_launches`) so a debugger that judges bands
 * itself names the same kernels. Changed under free_check.c's ring lock. */
typedef struct rz_launches {
    uint64_t magic;        /* RZ_LAUNCHES_MAGIC */
    uint32_t version;      /* RZ_LAUNCHES_VERSION */
    uint32_t size;         /* sizeof(rz_launches_t) */
    uint64_t seq;          /* launches recorded so far */
    uint64_t scan_start;   /* seq when the last full scan started */
    uint64_t report_since; /* launches after this one are candidates in the current report */
    struct rz_launch {
        uint64_t seq;
        uint64_t next_index; /* zones with index below this existed when the kernel was launched */
        char name[56];
    } ring[RZ_LAUNCH_RING];
} rz_launches_t;

#define RZ_QUARANTINE_MAGIC UINT64_C(0x3151544e41555152) /* the bytes "RQUANTQ1" in memory order */

#define RZ_QUARANTINE_VERSION 1

#define RZ_QENTRY_FILLING 0x1 /* its free-fill event is not seen done: not checked yet */
#define RZ_QENTRY_VIOLATED 0x2 /* a check found it written after free (and filled it again) */
#define RZ_QENTRY_REGION 0x4   /* a pool's region NVTX unregistered (policy/nvtx_regions.c), not a freed block */
#define RZ_QENTRY_ORDERED 0x8  /* filled in the order of the stream of its cuMemFreeAsync (else the legacy stream) */

/* One block held in the quarantine (core/quarantine.c). Layout read by the debugger. */
typedef struct rz_qentry {
    uint64_t base;       /* held range [base, base + bytes), filled with the free byte */
    uint64_t bytes;
    uint64_t ptr;        /* the program's pointer */
    uint64_t user_bytes;
    uint64_t index;      /* creation index */
    void *ctx;
    uint64_t launch_seq; /* launches recorded (__redzone_launches.seq) when it was freed */
    uint32_t alloc_stack, free_stack; /* depot ids (0: none) */
    uint16_t fill;       /* RZ_QENTRY_FILLING: the fill event's slot and generation (stream_fills.c) */
    uint8_t byte;        /* the free byte it holds */
    uint8_t flags;       /* RZ_QENTRY_* */
    uint32_t reserved;
    void (*release)(uint64_t base, uint64_t bytes, void *arg);
    void *arg;
} rz_qentry_t;

/* The quarantine, exported (`__redzone_quarantine`): held blocks oldest first, ring[(head + i) % cap] for i
 * in [0, count). Changed under the quarantine's lock; seq is odd while it changes. */
typedef struct rz_quarantine {
    uint64_t magic;   /* RZ_QUARANTINE_MAGIC */
    uint32_t version; /* RZ_QUARANTINE_VERSION */
    uint32_t size;    /* sizeof(rz_quarantine_t) */
    _Atomic uint64_t seq;
    rz_qentry_t *ring;
    uint64_t cap, head, count;
    uint64_t bytes, peak_bytes, bound; /* held now, most ever held, METRALE_REDZONE_QUARANTINE */
    uint32_t entry_size; /* sizeof(rz_qentry_t) */
    uint8_t byte;        /* the free byte */
    uint8_t reserved[3];
} rz_quarantine_t;

#endif /* REDZONE_STATE_H */
