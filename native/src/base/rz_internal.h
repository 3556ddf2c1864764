/*
 * Declarations shared between the library's source files (functions `rz__*`), the exported state block
 * a debugger reads, and the registry node layout. Nothing here is public API.
 */
#ifndef REDZONE_INTERNAL_H
#define REDZONE_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "cu.h"
#include "redzone.h"

#define RZ_EXPORT __attribute__((visibility("default")))
#define RZ_NOINLINE __attribute__((noinline, noclone))
/* Thread-locals of a preloaded library: initial-exec, so reading one is one instruction, not a call. */
#define RZ_TLS _Thread_local __attribute__((tls_model("initial-exec")))
#define RZ_LIKELY(x) __builtin_expect(!!(x), 1)
#define RZ_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Always-on check for invariants whose failure would corrupt the registry: report and abort. */
#define RZ_CHECK(cond)                                                                                       \
    do {                                                                                                     \
        if (RZ_UNLIKELY(!(cond)))                                                                            \
            rz__check_failed(__FILE__, __LINE__, #cond);                                                     \
    } while (0)
/* Debug-only assertion. */
#ifdef NDEBUG
#define RZ_ASSERT(cond) ((void)0)
#else
#define RZ_ASSERT(cond) RZ_CHECK(cond)
#endif
_Noreturn void rz__check_failed(const char *file, int line, const char *what);

/* ---- options (options.c) ---------------------------------------------------------------------------- */
#define RZ_PAD_MAX ((uint64_t)64 << 20)
#define RZ_FILL_DEFAULT 0xEE
#define RZ_POISON_IN 0xEE
#define RZ_POISON_OUT 0x00
#define RZ_INDEX_NONE UINT64_MAX

#define RZ_PATH_MAX 512
/* METRALE_REDZONE_SCAN bits */
#define RZ_SCAN_FREE 0x1u
#define RZ_SCAN_SYNC 0x2u
#define RZ_SCAN_EXIT 0x4u
#define RZ_SCAN_FATAL 0x8u
#define RZ_SCAN_LAUNCH 0x10u /* check the launch's context's bands after every kernel launch (launch_check.c) */

/* METRALE_REDZONE_GUARD: every N-th allocation (index % every == 0), or a list of creation indices. */
#define RZ_GUARD_LIST_MAX 32
typedef struct rz_guard_sel {
    uint64_t every; /* 0: not by period */
    uint32_t n;     /* entries in list */
    uint64_t list[RZ_GUARD_LIST_MAX];
} rz_guard_sel_t;
/* Physical plus reserved bytes guard allocations may hold at once; beyond it, ordinary bands. */
#define RZ_GUARD_CAP ((uint64_t)1 << 30)

/* A creation-index window [lo, hi) (METRALE_REDZONE_POISON). */
typedef struct rz_window {
    uint64_t lo, hi;
    bool set;
} rz_window_t;

typedef struct rz_options {
    uint64_t pad_bytes;  /* 0: bands off */
    uint64_t front_bytes; /* METRALE_REDZONE_FRONT, a multiple of RZ_FRONT_UNIT; 0: no front bands */
    unsigned scan;       /* RZ_SCAN_* */
    bool agent;          /* start the debugger agent thread */
    bool install_eager;  /* METRALE_REDZONE_INSTALL=eager: fill each band at its allocation */
    rz_window_t poison;  /* METRALE_REDZONE_POISON: window applied from the first allocation on */
    bool check_kernel;   /* METRALE_REDZONE_CHECK_KERNEL: scans may use the device check kernel */
    uint64_t stacks;     /* METRALE_REDZONE_STACKS: frames kept per allocation (0: off) */
    rz_guard_sel_t guard; /* METRALE_REDZONE_GUARD: which allocations get a hardware guard page */
    uint64_t min_idx;
    uint64_t trace_idx;  /* RZ_INDEX_NONE: off */
    uint8_t fill;
    bool help;
    char log_path[RZ_PATH_MAX];     /* empty: stderr */
    char summary_path[RZ_PATH_MAX]; /* empty: no summary file */
    char warnings[2048]; /* one line per rejected value, '\n'-separated */
} rz_options_t;

typedef const char *(*rz_getenv_fn)(const char *name);
/* Parse every option from getenv_fn into out (pure: no output, no global state). */
void rz__options_parse(rz_getenv_fn getenv_fn, rz_options_t *out);
/* The same for a process that is secure (1: set-uid or set-gid, AT_SECURE) or not: a secure one ignores
 * every PATH option (the log, the summary) with one warning line, so it creates and appends to no file. */
void rz__options_parse_env(rz_getenv_fn getenv_fn, int secure, rz_options_t *out);
/* METRALE_REDZONE_SCAN has launch (1) or not (0), -1 until the options are loaded: read by every interposed
 * launch as one load (its fast path is taken on 0 only). */
extern _Atomic int rz__scan_launch;
#define RZ_SCAN_LAUNCH_OFF() (atomic_load_explicit(&rz__scan_launch, memory_order_relaxed) == 0)
/* The process's options, parsed once on first use (thread-safe); also opens the log. */
const rz_options_t *rz__options(void);
/* Option table as a markdown table (docs/options.md body). */
void rz__options_markdown(int fd);

/* ---- output (report.c) ------------------------------------------------------------------------------ */
/* Every line goes through here: fixed buffer, no allocation, recursion guard. */
/* path: METRALE_REDZONE_LOG with %p expanded; template: as given (a %p in it: one file per process, forked
 * children included, lines without the pid; else every line starts with `redzone[<pid>]: `). */
void rz__log_open(const char *path, const char *template);
/* Lines already formatted ('\n'-terminated) to the log, each with the pid where log lines carry it. */
void rz__log_text(const char *text, size_t len);
/* A path option's value with each %p replaced by the process id: 0, or -1 when it does not fit. */
int rz__expand_path(const char *value, char *out, size_t cap);
/* value as a warning shows it (options.c): in double quotes, '"' and '\\' escaped with a backslash, other
 * bytes outside printable ASCII as \xNN, cut after RZ_QUOTE_SHOWN bytes with `"...(<n> bytes)`; out holds
 * RZ_QUOTE_MAX bytes. Async-signal-safe; returns the length written. */
#define RZ_QUOTE_SHOWN 96
#define RZ_QUOTE_MAX (RZ_QUOTE_SHOWN * 4 + 48)
size_t rz__quote(char *out, const char *value);
/* Open one of redzone's own files for appending (safeopen.c): close-on-exec, above descriptor 2, created
 * 0600; in a sticky world-writable directory, a symlink or an existing file another user owns there is
 * refused (*refused RZ_REFUSED_LINK or RZ_REFUSED_FILE, errno EACCES; else 0). The fd, or -1 with errno.
 * Async-signal-safe. rz__refusal: why, in words. */
#define RZ_REFUSED_LINK 1
#define RZ_REFUSED_FILE 2
int rz__open_append(const char *path, int *refused);
const char *rz__refusal(int refused);
/* The rule for such a symlink or file (the kernel's fs.protected_symlinks and fs.protected_regular): 1 when
 * it must not be used. */
int rz__sticky_refused(uid_t owner, uid_t dir_owner, mode_t dir_mode, uid_t euid);
/* The process id in decimal into out (at least 21 bytes), NUL-terminated; async-signal-safe. */
void rz__format_pid(char *out);
/* For writers that cannot use rz__log (the fatal-signal handler), async-signal-safe: a forked child's own
 * per-process log opened if it is still to be, then the `redzone[<pid>]: ` a line gets (empty where lines
 * carry no pid) in out (at least 64 bytes); returns its length. */
size_t rz__log_line_start(char *out);
void rz__log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void rz__warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void rz__write_all(int fd, const char *buf, size_t len);
/* Write lines already formatted (one or more, '\n'-terminated) where rz__log writes. */
void rz__log_raw(const char *buf, size_t len);
/* Lines held back: while a thread has set one with rz__log_hold, its rz__log lines are appended to it (in
 * memory mapped on first use, at most RZ_LOG_HELD_MAX bytes; a line that does not fit goes out at once)
 * instead of written; rz__log_hold(NULL) stops that. The caller writes them (rz__log_raw) and releases the
 * memory. */
#define RZ_LOG_HELD_MAX ((size_t)16 << 20)
typedef struct rz_log_held {
    char *text;
    size_t len;
} rz_log_held_t;
void rz__log_hold(rz_log_held_t *held);
void rz__log_held_release(rz_log_held_t *held);
/* Name of a driver result, from the driver when loaded, else from cu.h's table. */
const char *rz__cu_name(rzcu_result r);
void rz__backtrace(uint64_t index);
/* One line per frame, function names from each object's ELF symbol table (symbolize.c). */
void rz__symbolize_frames(void *const *frames, int n);

/* ---- counters (stats.c) ----------------------------------------------------------------------------- */
enum {
#define RZ_COUNTER_ENUM(name, kind, desc) RZ_C_##name,
    RZ_COUNTERS(RZ_COUNTER_ENUM)
#undef RZ_COUNTER_ENUM
    RZ_NCOUNTERS
};
void rz__record_map(uint64_t bytes);
void rz__record_unmap(uint64_t bytes);
void rz__record_unmap_failure(void);
void rz__record_page_reset(uint64_t bytes);
void rz__record_guard_install(uint64_t bytes);
void rz__record_decommit(uint64_t bytes);
void rz__count(int counter, int64_t delta);

/* ---- registry (registry.c) -------------------------------------------------------------------------- */
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
    uint16_t fill; /* RZ_ZONE_FILLING: the event slot and generation that follow its band fill (streamorder.c) */
} rz_zone_node_t;

/* The front band keeps the driver's alignment for the pointer the program gets: whole 256-byte units. */
#define RZ_FRONT_UNIT 256u
#define RZ_FRONT_MAX ((uint64_t)1 << 20)
static inline uint64_t rz__zone_front(const rz_zone_node_t *z) { return (uint64_t)z->front_units * RZ_FRONT_UNIT; }

#define RZ_ZONE_UNWATCHED 0x1
#define RZ_ZONE_VIOLATED 0x2 /* the last scan that covered this zone found it violated */
#define RZ_ZONE_PENDING 0x4  /* padded, band not installed yet (lazy install): nothing to check */
#define RZ_ZONE_GUARD 0x8    /* a guard-page allocation (METRALE_REDZONE_GUARD): reserved0 = log2 granularity */
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

void rz__registry_lock(void);
/* The agent's way in: RZ_OK, or RZ_EBUSY after timeout_ms (a stopped thread may hold the lock). */
int rz__registry_lock_timed(unsigned timeout_ms);
void rz__registry_unlock(void);
/* How many times the registry lock has been taken (exact when read with no other thread using it). */
uint64_t rz__registry_locks_taken(void);
/* Record a live allocation. Returns RZ_OK or RZ_ENOMEM (then nothing is recorded). Takes the lock. */
int rz__registry_add(const rz_zone_node_t *zone);
/* Remove the zone whose user pointer is ptr, copying it to *out. RZ_ENOTFOUND if unknown. Takes the lock. */
int rz__registry_remove(uint64_t ptr, rz_zone_node_t *out);
/* The allocation stack (at most cap frames) of zone `index`, copied when this thread removed it last; 0 when
 * none was kept (stacks off, or another zone removed since). */
#define RZ_STACK_MAX 32
uint32_t rz__registry_removed_stack(uint64_t index, uint64_t *frames, uint32_t cap);
/* Under the lock: first zone in index order and the one after `node` (NULL at the end). */
rz_zone_node_t *rz__registry_first(void);
rz_zone_node_t *rz__registry_next(const rz_zone_node_t *node);
/* Under the lock: forget the zone at ptr, whose memory the driver released without a free through redzone
 * (counted as unmapped and in stale_zones). */
void rz__registry_drop_stale(uint64_t ptr);
/* Under the lock: forget every zone of context ctx, which has ended (its memory went with it; counted as
 * for rz__registry_drop_stale); guard-page zones stay (their memory is the device's) and lose the context.
 * Returns how many were forgotten. */
size_t rz__registry_drop_ctx(void *ctx);
/* Under the lock: the zone for ptr, or NULL. */
rz_zone_node_t *rz__registry_find(uint64_t ptr);
uint64_t rz__registry_count(void);
/* As rz__registry_add, also keeping the allocation's stack (n frames, at most RZ_STATE.stack_depth). */
int rz__registry_add_stack(const rz_zone_node_t *zone, void *const *frames, uint32_t n);
/* Under the lock: the stack kept for a registry node (NULL, 0 when none), and its depot id (0: none). The
 * frames stay valid after the lock is released (the depot never changes them). */
const uint64_t *rz__registry_stack(const rz_zone_node_t *node, uint32_t *n);
uint32_t rz__registry_stack_id(const rz_zone_node_t *node);
/* The program's frames of the current call, without redzone's own leading ones (at most max). */
int rz__capture_stack(void **frames, int max);
/* Whether an address lies in redzone's own code (the mapping rz__capture_stack skips). */
int rz__in_redzone(uintptr_t addr);
/* Zones waiting for their band (lazy install), plus 1 while a lock holder is installing some; read without
 * the lock, so only a hint, but 0 means no band is waiting or being written. */
uint32_t rz__registry_pending(void);
/* Tell valgrind's helgrind which registry words are atomics (nothing without REDZONE_VALGRIND; rz_annotate.h). */
void rz__registry_annotate(void);
/* Under the lock: up to cap pending zones, oldest first, no longer marked pending (the caller installs them
 * or marks them unwatched). Returns how many. Call it until it returns 0, after writing the last batch. */
size_t rz__registry_take_pending(rz_zone_node_t **out, size_t cap);
/* Host bytes the registry holds for its zones (nodes in use and hash buckets). */
uint64_t rz__registry_bytes(void);
/* Drop every zone (tests and fork children only; does not free device memory). */
void rz__registry_reset(void);

/* ---- stack depot (depot.c) ------------------------------------------------------------------------- */
#define RZ_DEPOT_SHIFT 18     /* words per depot chunk: 2 MiB */
#define RZ_DEPOT_CHUNKS 1024  /* at most 2 GiB of distinct stacks */
/* The id of this stack (n frames, at most RZ_STACK_MAX kept), stored once; 0 when n is 0 or the depot is
 * full or out of memory. Takes the depot's own lock (never while waiting for the registry's). */
uint32_t rz__depot_put(const uint64_t *frames, uint32_t n);
/* The frames of stack `id` (they never change or move) and their count; 0 for id 0. No lock. */
uint32_t rz__depot_get(uint32_t id, const uint64_t **frames);
/* Host bytes the depot holds (stacks and its hash table). */
uint64_t rz__depot_bytes(void);

/* ---- exported state (state.c) ----------------------------------------------------------------------- */
#define RZ_STATE_MAGIC UINT64_C(0x3145544154535a52) /* the bytes "RZSTATE1" in memory order */
#define RZ_STATE_VERSION 5
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

/* ---- debugger agent (agent.c) ---------------------------------------------------------------------- */
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
extern rz_agent_t __redzone_agent;
/* Called by the agent after each request; a debugger stops here. */
void __redzone_agent_done(void);
void rz__agent_start(void);
void rz__agent_after_fork(void);
int rz__is_agent_thread(void);
/* 1 when this process's agent thread could not be started (pthread_create failed). */
int rz__agent_failed(void);
/* pthread_create for every thread redzone starts: the new thread has every asynchronous signal blocked. */
int rz__thread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);
void rz__agent_capture(const char *line, size_t len);
int64_t rz__agent_request(uint32_t op, uint64_t arg0, uint64_t arg1);

/* ---- kernel launches (policy.c) ---------------------------------------------------------------------- */
#define RZ_LAUNCHES_MAGIC UINT64_C(0x3148434e55414c52) /* the bytes "RLAUNCH1" in memory order */
#define RZ_LAUNCHES_VERSION 1
#define RZ_LAUNCH_RING 256
/* The recent kernel launches a report names, exported (`__redzone_launches`) so a debugger that judges bands
 * itself names the same kernels. Changed under policy.c's ring lock. */
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
extern rz_launches_t __redzone_launches;

/* ---- device seam (device.c) ------------------------------------------------------------------------- */
/* The driver's entry points, resolved once from libcuda.so.1. NULL where the driver lacks one. */
typedef struct rz_driver {
#define RZ_DRIVER_FIELD(name, ret, params) rzcu_fn_##name *name;
    RZCU_ENTRY_POINTS(RZ_DRIVER_FIELD)
#undef RZ_DRIVER_FIELD
#define RZ_DRIVER_VARIANT(variant, base) rzcu_fn_##base *variant;
    RZCU_PER_THREAD_VARIANTS(RZ_DRIVER_VARIANT)
    RZCU_LEGACY_ENTRY_POINTS(RZ_DRIVER_VARIANT)
    RZCU_IPC_LEGACY_ENTRY_POINTS(RZ_DRIVER_VARIANT)
#undef RZ_DRIVER_VARIANT
#define RZ_DRIVER_FIELD(name, ret, params) rzcu_fn_##name *name;
    RZCU_OPTIONAL_ENTRY_POINTS(RZ_DRIVER_FIELD)
    RZCU_IPC_ENTRY_POINTS(RZ_DRIVER_FIELD)
#undef RZ_DRIVER_FIELD
#define RZ_DRIVER_VARIANT(variant, base) rzcu_fn_##base *variant;
    RZCU_OPTIONAL_VARIANTS(RZ_DRIVER_VARIANT)
#undef RZ_DRIVER_VARIANT
    rzcu_fn_cuStreamBeginCapture *cuStreamBeginCapture, *cuStreamBeginCapture_ptsz;
    rzcu_fn_cuGetProcAddress *cuGetProcAddress;
    struct { /* the entry points hooks.c wraps to install bands first, by exported name */
#define RZ_WRITER_FIELD(exported, base, since, per_thread, params, args) rzcu_wfn_##exported *exported;
        RZCU_DEVICE_WRITERS(RZ_WRITER_FIELD)
#undef RZ_WRITER_FIELD
    } writers;
} rz_driver_t;
/* The real dlsym (hooks.c interposes dlsym; the library itself must never get its own wrappers). */
void *rz__real_dlsym(void *handle, const char *name);
extern rz_driver_t rz__drv;

/* Load the driver once. RZ_OK or RZ_ENODRIVER (warned once). */
int rz__dev_load(void);
rzcu_result rz__dev_alloc(rz_devptr_t *p, size_t bytes);
rzcu_result rz__dev_free(rz_devptr_t p);
/* Around the library's own allocation-family calls (cuMemAlloc, cuMemFree, cuMemHostRegister, ...): the
 * calling thread's capture mode relaxed, so no capture of the program's is refused or invalidated because of
 * them; end gives the program's mode back. Never around the program's own calls. */
rzcu_capture_mode rz__dev_relaxed_begin(void);
void rz__dev_relaxed_end(rzcu_capture_mode saved);
/* Around the library's own queries and synchronisations (its stream, its events, a program's stream it only
 * asks about, pointer attributes): potentially unsafe calls too, which a real driver refuses from a thread in
 * the global mode while another thread has a global capture (and from the capturing thread) and that capture
 * is lost. A section is counted, and a capture begun through the interposed entry points waits for the
 * sections in flight (capture.c): while no capture is in progress nothing is exchanged and none meets one;
 * while one is, the mode is relaxed as above. Nests. */
rzcu_capture_mode rz__dev_quiet_begin(void);
void rz__dev_quiet_end(rzcu_capture_mode saved);
/* cuPointerGetAttribute in a quiet section. */
rzcu_result rz__dev_pointer_attribute(void *data, rzcu_pointer_attribute attribute, rz_devptr_t ptr);
/* Page-lock p (portable), with the mode relaxed: the driver's answer (NOT_SUPPORTED without the entry point). */
rzcu_result rz__dev_host_register(void *p, size_t bytes);
void *rz__dev_current_ctx(void);
/* Wait for all work of context ctx (the current one when NULL), as the driver's cuMemFree and context
 * teardown do, so a band read afterwards sees what the program's in-flight kernels and copies wrote. Not
 * while a capture is in progress (a context synchronisation conflicts with a capture in it whatever the mode,
 * and is refused beside another thread's global one): RZCUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, nothing done. */
rzcu_result rz__dev_settle(void *ctx);
/* The stream a stream-ordered call names (NULL with a per-thread entry point: the per-thread stream), and
 * whether it is being captured into a graph (where nothing may synchronise it). */
rzcu_stream rz__stream_of(rzcu_stream s, int per_thread);
int rz__stream_capturing(rzcu_stream s);
/* Captures begun and ended through the interposed entry points (capture.c, from hooks_capture.c), so that
 * rz__stream_capturing asks the driver only while one is in progress. */
int rz__capture_beginning(rzcu_stream s);            /* 1: recorded now (undo with rz__capture_not_begun) */
void rz__capture_not_begun(rzcu_stream s, int added); /* the driver refused to begin it */
void rz__capture_ended(rzcu_stream s);
void rz__capture_stream_gone(rzcu_stream s);
int rz__capture_hooks_present(void);
/* Whether a capture begun through the interposed entry points may be in progress (0 without them). */
int rz__capture_in_progress(void);
/* A quiet section: no capture begins through the interposed entry points until rz__capture_quiet_leave
 * (always called after); 1 when none was in progress (the section may run in the program's mode), 0 when
 * one may be. */
int rz__capture_quiet_enter(void);
void rz__capture_quiet_leave(void);
/* At the library's start: a fork child starts with no capture in progress and no section in flight. */
void rz__capture_annotate(void);
/* Fill one band synchronously on the library's stream for the current context. */
rzcu_result rz__dev_fill(rz_devptr_t p, uint8_t value, size_t bytes);

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

/* rz_scan() for the exit scan: no summary line when it checked and found nothing (the exit line says it). */
int rz__scan_at_exit(void);
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
/* The library's stream for ctx (the current context when NULL), created on first use. */
rzcu_result rz__dev_stream(void *ctx, rzcu_stream *out);
/* How many contexts have a library stream now (one each, dropped when the context ends). */
size_t rz__dev_stream_count(void);
/* ---- what the library leaves in a program's stream (streamorder.c) ------------------------------------- */
/* Record an event after a stream-ordered band fill queued on s (of ctx, the current context): *fill, for the
 * zone's `fill`, names it. Never waits. RZCUDA_ERROR_OUT_OF_MEMORY when no event can be had (every slot waits on
 * other streams): the zone is then not watched. */
rzcu_result rz__fill_event(void *ctx, rzcu_stream s, uint16_t *fill);
/* Whether zone z's band is written (no RZ_ZONE_FILLING, or its event done: then the mark is cleared). Never
 * waits. Registry lock held, or z is a copy out of the registry. */
int rz__zone_filled(rz_zone_node_t *z);
/* The stream zone z's fill was queued on, while its event is not seen done: 1 and *s; else 0. */
int rz__zone_fill_stream(const rz_zone_node_t *z, rzcu_stream *s);
/* Note a zone just registered with RZ_ZONE_FILLING; rz__fills_settle (at successful synchronisations) clears
 * the marks of noted zones whose fill is done, so a debugger that cannot ask events sees them soon. Takes the
 * registry lock (one load when nothing is noted). */
void rz__fill_note(uint64_t ptr, uint16_t fill);
void rz__fills_settle(void);
/* Tell helgrind which of these are atomics read without a lock (rz_annotate.h). */
void rz__streamorder_annotate(void);
/* Context ctx has ended: its events went with it. */
void rz__fill_forget_ctx(void *ctx);
/* Events the fill slots hold now (tests: bounded, released with their contexts). */
unsigned rz__fill_events(void);
/* A page-locked slot of `bytes` (at most 4 KiB) for a check captured into a graph, held for the rest of the
 * process (the graph may be launched any time); NULL when none is left or pinning is not possible. */
void *rz__graph_slot_take(size_t bytes);
/* Forget the above (fork child). */
void rz__streamorder_reset(void);
/* Make ctx current for a band operation (pushed only when it is not); undo with rz__dev_leave. */
rzcu_result rz__dev_enter(void *ctx, int *pushed);
void rz__dev_leave(int pushed);

/* ---- device-side check (check.c) -------------------------------------------------------------------- */
/* One band for the check kernel (native/kernels/rz_check.cu: struct rz_check_desc, same layout). */
typedef struct rz_check_desc {
    uint64_t band;
    uint32_t bytes;
    uint8_t expected;
    uint8_t reserved[3];
} rz_check_desc_t;
/* Violated positions one launch returns; more and the scan reads every band of the batch instead. */
#define RZ_CHECK_CAP 4096u
/* Check the n bands of io (any mix of contexts; io[i].value is the expected byte) on the device: sets
 * suspect[i] to 1 exactly for the bands that differ. RZ_OK, or RZ_EDRIVER when a context has no check
 * kernel (no PTX built in, or the driver cannot load it: the emulated driver), more than RZ_CHECK_CAP
 * bands differ, or a driver call failed: the caller then reads every band. Registry lock held. */
int rz__dev_check(const rz_band_io_t *io, size_t n, uint8_t *suspect);
/* 1 when the library was built with the check kernel's image (nvcc was found). */
int rz__dev_check_built(void);
/* That image (a fatbin) and its size. */
const unsigned char *rz__dev_check_image(size_t *size);
/* 0 keeps scans off the check kernel (benchmarks and tests compare methods); 1 (default) uses it. */
void rz__dev_set_check_kernel(int on);
/* Forget the per-context kernel state (fork child). */
void rz__dev_check_reset(void);
/* Whether a scan found a context whose module is still to be loaded; load those (call without the registry
 * lock: loading may JIT-compile). */
int rz__dev_check_wanted(void);
void rz__dev_check_load(void);

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
/* Forget cached streams (fork child). */
void rz__dev_reset(void);
/* The stream part of it (device_ctx.c). */
void rz__dev_streams_reset(void);
/* A page-locked buffer of `bytes` (at most 4 KiB) for a copy queued in a program's stream, or NULL (use
 * pageable memory); give it back with rz__dev_pinned_free, which returns 0 for memory that is not one.
 * Both take only a mutex: callable from a stream's host function. */
void *rz__dev_pinned_alloc(size_t bytes);
int rz__dev_pinned_free(void *p);
/* Context ctx has ended (destroyed, or a primary context released for the last time or reset): forget its
 * stream and check kernel state, so a context that later gets the same handle starts afresh. */
void rz__dev_forget_ctx(void *ctx);
void rz__dev_check_forget(void *ctx);
/* The handle of device dev's primary context when it is active (learned with a retain and a release, which
 * leave its reference count as it was); NULL when inactive or unknown. */
void *rz__dev_primary_ctx(int dev);
/* Whether device dev's primary context is active (1), inactive (0) or unknown (-1). */
int rz__dev_primary_active(int dev);

/* ---- the driver's sticky error (sticky.c) ------------------------------------------------------------- */
/* r is one of cu.h's RZCU_STICKY_RESULTS: after it every CUDA call in the process fails (cuda.h). */
int rz__cu_sticky(rzcu_result r);
/* Note a result of the library's own driver call (a sticky one is kept, the first); returns r. */
rzcu_result rz__sticky_note(rzcu_result r);
/* The sticky error noted, or CUDA_SUCCESS: then the library does no more device work of its own. */
rzcu_result rz__sticky(void);
/* With a sticky error noted: 1, after writing, once per process, the line that says so and how many zones
 * could not be checked (the registry's, plus `held` taken out of it by the caller). 0 without one. */
int rz__sticky_say(uint64_t held);
/* A failure of the library's own work with result r: when r is sticky, noted and said (as above) and 1, so
 * the caller writes no warning of its own; else 0. */
int rz__sticky_failed(rzcu_result r, uint64_t held);
/* The exit line says it instead: whether the line was written already (1) or is now ruled out (0). */
int rz__sticky_said(void);

/* ---- allocation (api.c) ---------------------------------------------------------------------------- */
/* Under the registry lock: the guard-page zone whose mapping contains p, or NULL. */
const rz_zone_node_t *rz__guard_zone_containing(rz_devptr_t p);
typedef enum { RZ_ALLOC_PLAIN, RZ_ALLOC_MANAGED, RZ_ALLOC_PITCH, RZ_ALLOC_ASYNC, RZ_ALLOC_POOL } rz_alloc_kind_t;
typedef struct rz_alloc_req {
    rz_alloc_kind_t kind;
    unsigned flags;        /* MANAGED */
    size_t *pitch;         /* PITCH: out */
    size_t width, height;  /* PITCH: the `bytes` argument of rz__alloc is ignored */
    unsigned element_bytes;
    rzcu_stream stream;    /* ASYNC, POOL */
    rzcu_mem_pool pool;    /* POOL */
    int per_thread;        /* called through a _ptsz entry point */
    int interposed;        /* through the hooks, which install waiting bands before copies and launches */
} rz_alloc_req_t;
typedef struct rz_free_req {
    int async;             /* cuMemFreeAsync */
    rzcu_stream stream;
    int per_thread;
} rz_free_req_t;
/* Allocate (taking a creation index), pad, fill, register. Returns the driver's result code. */
int rz__alloc(rz_devptr_t *dptr, size_t bytes, const rz_alloc_req_t *req);
/* rz__alloc for a plain cuMemAlloc through the hooks. */
int rz__alloc_interposed(rz_devptr_t *dptr, size_t bytes);
/* A forked child: the next allocation runs the start-up steps again (the agent thread is gone). */
void rz__alloc_after_fork(void);
/* Forget, optionally check the band (METRALE_REDZONE_SCAN=free), free. Returns the driver's result code. */
int rz__free(rz_devptr_t dptr, const rz_free_req_t *req);


/* Exported name of the interposed entry point cuGetProcAddress returns for `symbol` at `version` with
 * `flags`, or NULL when redzone does not wrap that symbol at that version (procmap.c). */
const char *rz__proc_exported_name(const char *symbol, int version, rzcu_uint64 flags);

/* ---- sync scans (syncscan.c) ------------------------------------------------------------------------ */
/* The program queued device work (a copy, memset or launch the driver accepted) on stream s (as the call
 * named it; per_thread: through a _ptsz/_ptds entry point). */
void rz__note_device_work(rzcu_stream s, int per_thread);
/* What a successful synchronisation waited for: a stream, a context (NULL: the current one), or an event. */
enum { RZ_SYNC_STREAM, RZ_SYNC_CTX, RZ_SYNC_EVENT };
typedef struct rz_sync {
    int kind;
    rzcu_stream stream; /* RZ_SYNC_STREAM */
    int per_thread;     /* RZ_SYNC_STREAM through a _ptsz entry point */
    void *ctx;          /* RZ_SYNC_CTX */
} rz_sync_t;
/* Taken just before the synchronisation is called: the work noted up to it is what it waits for. */
uint64_t rz__sync_ticket(void);
/* METRALE_REDZONE_SCAN=sync, after a successful synchronisation: judge the contexts that received device work
 * since their last scan and whose work is all complete. 0 and no driver call when no work was noted since
 * every context was judged; else what rz_scan() returns (0 when nothing was scanned). */
int rz__scan_after_sync(const rz_sync_t *what, uint64_t ticket);
/* The program destroys stream s (called before the driver does) / context ctx has ended. */
void rz__sync_stream_destroying(rzcu_stream s);
void rz__sync_context_ended(void *ctx);
/* helgrind annotations and the fork handler (once, at start-up). */
void rz__sync_annotate(void);

/* ---- the program's copies and memsets against its sizes (bounds.c) ----------------------------------- */
/* A copy's source, its destination, a memset: the values rz_refusal_t.how takes (redzone.h). */
enum { RZ_BOUNDS_READ = RZ_REFUSED_READ, RZ_BOUNDS_WRITE = RZ_REFUSED_WRITTEN, RZ_BOUNDS_SET = RZ_REFUSED_SET };
/* Whether a copy or memset could reach a band: bands are on and some allocation is live (two loads). */
static inline int rz__bounds_armed(void) {
    const rz_options_t *o = rz__options();
    return (o->pad_bytes | o->front_bytes) &&
           atomic_load_explicit(&RZ_STATE.counters[RZ_C_current_mapped_bytes], memory_order_relaxed) != 0;
}
/* The device range [p, p + n) that entry point `entry` touches (how: RZ_BOUNDS_*) starts in a padded zone's
 * block and leaves the program's buffer (or starts in a band), where the driver without redzone would refuse
 * it: report it, count a violation and return 1; the caller returns CUDA_ERROR_INVALID_VALUE without calling
 * the driver. 0 otherwise (the driver judges it). */
int rz__bounds_check(const char *entry, int how, rz_devptr_t p, uint64_t n);
/* Under the registry lock: the zone whose padded block the driver says starts at base (its front band first,
 * when front bands are on) or, for a guard-page zone, whose mapping holds p; NULL when none. */
const rz_zone_node_t *rz__zone_of_block(rz_devptr_t base, rz_devptr_t p);
/* Pure: the bytes one side of a pitched copy touches, `depth` layers of `layer_rows` rows (`height` of them
 * copied) of `width` bytes, each row `pitch` bytes on, starting at column x, row y, layer z of base: 1 and
 * [*start, *start + *bytes), or 0 when it touches nothing or the driver refuses it by itself (overflow,
 * overlapping rows or layers). */
int rz__pitched_extent(uint64_t base, uint64_t x, uint64_t y, uint64_t z, uint64_t pitch, uint64_t layer_rows,
                       uint64_t width, uint64_t height, uint64_t depth, uint64_t *start, uint64_t *bytes);
/* The same for the source (dst 0) or destination (dst 1) of a CUDA_MEMCPY2D / CUDA_MEMCPY3D(_PEER); 0 also
 * when that side is host memory or an array. */
int rz__memcpy2d_extent(const rzcu_memcpy2d *d, int dst, uint64_t *start, uint64_t *bytes);
int rz__memcpy3d_extent(const rzcu_memcpy3d *d, int dst, uint64_t *start, uint64_t *bytes);
/* Pure: whether [p, p + n) (n > 0, not wrapping) leaves the buffer [ptr, ptr + user_bytes); if so the bytes
 * outside it as the report gives them: offsets from the end ([0..=7]: the 8 bytes after it), or for a range
 * that starts before the buffer, negative distances back from its start, the farthest first. */
int rz__outside_user_range(uint64_t ptr, uint64_t user_bytes, uint64_t p, uint64_t n, int64_t *first, int64_t *last);

/* ---- scans without a debugger (policy.c) ------------------------------------------------------------ */
/* Put the fatal-signal scan's handler in front of the program's dispositions, and make this process the one
 * whose zones the final scan checks (fatal.c; again in a forked child at its own first allocation). */
void rz__fatal_arm(void);
/* The program's sigaction for the signals the final scan hooks (hooks_signal.c calls it for those only): it
 * sees and sets its own dispositions; redzone's handler stays in front and calls the program's. As
 * sigaction: 0, or -1 with errno. */
struct sigaction;
int rz__fatal_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
/* Whether sig is one of them (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT). */
int rz__fatal_signal(int sig);
/* The next definition of sigaction after libredzone (libc's), for every other signal. */
int rz__sigaction_next(int sig, const struct sigaction *act, struct sigaction *old);
/* Register the exit scan once, lazily (after the driver's own exit handlers, so it runs before them). */
void rz__exit_scan_arm(void);
/* Check one zone's band just before it is freed (stream-ordered for an async free). */
void rz__scan_before_free(const rz_zone_node_t *zone, const rz_free_req_t *req);
/* Judge the stream-ordered checks queued while the registry was busy (policy.c); takes the lock. */
void rz__judge_deferred(void);
/* Kernel attribution: record a launch (returns its launch number); print the kernels that may have touched a
 * violated zone (`band`: what was read, `bytes` long; front: the zone's front band). */
void rz__launch_record(rzcu_function f);
uint64_t rz__launch_record_name(const char *name);
/* The kernel's name as the driver gives it (its storage), "(unnamed kernel)" when it gives none. */
const char *rz__launch_kernel_name(rzcu_function f);
void rz__launch_report(const rz_zone_node_t *zone, const uint8_t *band, uint64_t bytes, int front);
/* Under the registry lock, at the start of a scan: judge queued free-time checks (and launch checks); with
 * `whole` (every zone that may have been touched since the last such scan is covered), move the "last seen
 * clean" mark. */
void rz__launch_scan_begin(int whole);

/* ---- METRALE_REDZONE_SCAN=launch (launch_check.c, attribution.c) ------------------------------------- */
typedef enum { RZ_LAUNCH_KERNEL = 0, RZ_LAUNCH_COOPERATIVE = 1, RZ_LAUNCH_GRAPH = 2 } rz_launch_kind_t;
/* What a launch wrapper knows about a launch. */
typedef struct rz_launch_call {
    rz_launch_kind_t kind;
    rzcu_function f;     /* kernels */
    void *graph;         /* graph launches: the executable graph */
    unsigned grid[3], block[3];
    rzcu_stream stream;  /* as the program passed it */
    int per_thread;      /* through a _ptsz entry point */
    void *ret;           /* the interposed entry point's return address (into the program) */
} rz_launch_call_t;
struct rz_check;
/* Before the driver's launch call (never under the registry lock): under the launch policy, the check this
 * launch will get (NULL otherwise, or when the launch cannot be checked: a stream being captured). */
struct rz_check *rz__launch_pre(const rz_launch_call_t *call);
/* After it: the launch ring (every policy, on success) and, under the launch policy, the check queued in the
 * launch's stream order (or, under a debugger, waited for and judged on this thread). */
void rz__launch_post(struct rz_check *c, const rz_launch_call_t *call, rzcu_result r);
/* Judge the launch checks that completed while the registry was busy, and write back the bands they
 * reported. The _locked form with the registry lock held; the other takes it (one load when nothing waits). */
void rz__launch_checks_locked(void);
void rz__launch_checks(void);
/* Only the judging, no driver call (from a stream's host function too). Registry lock held. */
void rz__launch_judge_locked(void);
/* From rz__launch_report: 1 when the report is a launch check's, whose attribution lines it printed. */
int rz__attrib_report(const rz_zone_node_t *z, const uint8_t *band, uint64_t bytes, int front);
/* A free-time check read `band` (back band, then front band): 1 when a launch check reported exactly these
 * bytes already (the zone is not reported twice). Registry lock held. */
int rz__attrib_freed_reported(const rz_zone_node_t *z, const uint8_t *band);
/* A module or library was unloaded: kernel handles may be reused for other kernels, so the launch policy's
 * cache of kernel names is forgotten. */
void rz__launch_names_forget(void);
/* Context ctx ended: forget the launch policy's state for it (takes the registry lock). */
void rz__launch_forget_ctx(void *ctx);
/* Whether a launch is judged on the launching thread right after it (1), in stream order by the driver's
 * callback thread (0), or, by default (-1), the first under a debugger (any ptrace tracer) only. Tests. */
void rz__launch_set_sync(int mode);

/* ---- formatting (format.c): shared with the gdb plugin through the view library ---------------------- */
size_t rz__format_violation(const rz_violation_t *v, char *out, size_t cap);
size_t rz__format_scan_summary(uint64_t checked, uint64_t violated, char *out, size_t cap);
size_t rz__format_zone_header(char *out, size_t cap);
size_t rz__format_zone_row(const rz_zone_node_t *z, char *out, size_t cap);
size_t rz__format_zone_json(const rz_zone_node_t *z, char *out, size_t cap);
size_t rz__format_counters(const uint64_t *counters, char *out, size_t cap);
size_t rz__format_counters_json(const uint64_t *counters, char *out, size_t cap);
/* A copy or memset refused for leaving alloc#index's buffer (how: RZ_BOUNDS_*; first < 0: before its start). */
size_t rz__format_out_of_range(int how, const char *entry, uint64_t index, uint64_t user_bytes, int64_t first,
                               int64_t last, const char *driver_answer, char *out, size_t cap);
/* The same line from the record passed to __redzone_refused (the gdb plugin formats it through the view). */
size_t rz__format_refusal(const rz_refusal_t *r, const char *driver_answer, char *out, size_t cap);
/* A CUresult's name from the table in cu.h, without asking a driver ("CUDA_ERROR_(unknown)" outside it). */
const char *rz__cu_result_name(int r);
/* A free of a pointer `before` bytes inside alloc#index's front band. */
size_t rz__format_bad_free(uint64_t ptr, uint64_t index, uint64_t user_bytes, uint64_t before, const char *driver_answer,
                           char *out, size_t cap);
/* The judge, pure: whether `bytes` band bytes of zone z differ from z->expected; if so fill *v (front: the
 * band before the pointer) and return 1. The library's scans and the debugger's memory scans both use it. */
int rz__band_violation(const rz_zone_node_t *z, const uint8_t *band, uint64_t bytes, int front, rz_violation_t *v);
/* The byte a zone with this index holds under a window rule (poison active: 0xEE inside, 0x00 outside). */
static inline uint8_t rz__window_byte(int poison_active, uint64_t lo, uint64_t hi, uint8_t fill, uint64_t index) {
    if (poison_active)
        return (index >= lo && index < hi) ? RZ_POISON_IN : RZ_POISON_OUT;
    return fill;
}
/* One frame of an allocation stack as the library prints it: "    #k 0x... in func+0xoff (file)", or without
 * " in func+0xoff" when func is NULL. */
size_t rz__format_frame(int k, uint64_t addr, const char *func, uint64_t off, const char *file, char *out, size_t cap);
/* Whether a frame belongs to redzone's own allocation path (function name, or the frame is in libredzone). */
static inline int rz__frame_is_ours(const char *func, int in_redzone_object) {
    return strncmp(func, "rz_", 3) == 0 || strncmp(func, "do_alloc", 8) == 0 || in_redzone_object;
}
/* The function containing `rel` in a mapped ELF image (elf_symbols.c), its offset in *offset; NULL if none. */
const char *rz__elf_lookup(const unsigned char *img, size_t size, uint64_t rel, uint64_t *offset);
/* The same answer from a table made once per image: its .symtab functions (dynamic 0) or its .dynsym ones
 * (1), sorted by address. rz__elf_funcs_fill with out NULL (or cap too small) returns how many there are; with
 * room, fills and sorts them (no allocation) and returns the count. rz__elf_funcs_find looks in one table:
 * rz__elf_lookup's answer is the .symtab table's, or when that has none, the .dynsym table's. */
typedef struct rz_elf_func {
    uint64_t start, end; /* [start, end): a function of size 0 covers one byte */
    uint64_t reach;      /* the largest end among this entry and every one before it */
    uint32_t name;       /* offset of its name in the image */
    uint32_t order;      /* its place in the file's symbol order: the first containing function wins */
} rz_elf_func_t;
size_t rz__elf_funcs_fill(const unsigned char *img, size_t size, int dynamic, rz_elf_func_t *out, size_t cap);
const char *rz__elf_funcs_find(const unsigned char *img, const rz_elf_func_t *t, size_t n, uint64_t rel,
                               uint64_t *offset);
/* The kernel-candidates line of a report for zone index `index`: launches after `since` still kept in
 * the ring that were made after the zone existed (0 when there are none). */
size_t rz__format_launch_candidates(const rz_launches_t *ring, uint64_t since, uint64_t index, char *out, size_t cap);

/* ---- bands (band.c) --------------------------------------------------------------------------------- */
/* The byte a zone with this index gets when its band is (re)filled now. Caller holds the registry lock or
 * accepts a racing poison (see docs/design.md). */
uint8_t rz__band_byte_for(uint64_t index);
/* Write the bands of zones still waiting for them (lazy install); a no-op costing one load when none wait
 * or when called from inside a scan or poison on this thread. */
void rz__bands_install(void);
/* Wait for the program's work in every context that holds a watched zone (before the exit scan: work still
 * queued or running at exit may write past an end). Never under the registry lock. */
void rz__bands_settle(void);
/* A scan of some contexts (sync scans): ctxs[0..n) sorted by handle, or one NULL for every context. Under the
 * registry lock, before any band is read, pick(arg, ctxs, n) keeps in ctxs the contexts still to judge and
 * returns how many (0: no scan); after the scan, under the same hold, done(arg, rc). `whole`: as for
 * rz__launch_scan_begin. Returns what rz_scan() returns (0 when nothing was scanned). */
typedef struct rz_scan_some {
    void **ctxs;
    size_t n;
    size_t (*pick)(void *arg, void **ctxs, size_t n);
    void (*done)(void *arg, int rc);
    void *arg;
    int whole;
} rz_scan_some_t;
int rz__scan_some(rz_scan_some_t *req);
/* Host bytes of every scan's, poison's and install's scratch held now (bounded: band.c). Registry lock held. */
uint64_t rz__band_scratch_bytes(void);
/* Zones the last full scan could not read, and the driver's error (call after rz_scan, on its thread). */
uint64_t rz__scan_unread(rzcu_result *error);
/* A context is about to end (cuCtxDestroy, the last cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxReset):
 * write waiting bands, wait for its work and check the bands of its zones, which go with it. */
void rz__bands_context_ending(void *ctx);
/* It has ended: forget its zones and the library's state for it. */
void rz__bands_context_ended(void *ctx);
/* ---- the judge's reports (judge.c) ------------------------------------------------------------------- */
/* A scan's reports, held back while it holds the registry lock: rz__reports_begin after taking the lock (this
 * thread's judge calls queue their reports from then on), rz__reports_end after releasing it (prints them,
 * each stack symbolized, each hook called, in order, and frees the memory). rz__reports_spill: this thread's
 * scan was interrupted by a signal handler that scans again (exit): print what it held, stop holding. */
typedef struct rz_reports {
    rz_log_held_t lines;
    struct report_item *items; /* mapped on the first violation */
    size_t n;
} rz_reports_t;
void rz__reports_begin(rz_reports_t *r);
void rz__reports_end(rz_reports_t *r);
void rz__reports_spill(void);
/* Judge one band already read into `band` (pad_bytes long): report, hook, and return 1 if violated. */
int rz__band_judge(const rz_zone_node_t *zone, const uint8_t *band);
/* The same for a zone no longer in the registry (a free-time check), with its allocation stack. */
int rz__band_judge_freed(const rz_zone_node_t *zone, const uint8_t *band, const uint64_t *frames, uint32_t nframes);
/* The same for the zone's front band (rz__zone_front(zone) bytes before its pointer). */
int rz__band_judge_front(const rz_zone_node_t *zone, const uint8_t *band);

#endif /* REDZONE_INTERNAL_H */
