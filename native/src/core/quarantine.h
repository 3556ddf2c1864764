/*
 * The quarantine of freed blocks (quarantine.c): writes after free.
 */
#ifndef REDZONE_QUARANTINE_H
#define REDZONE_QUARANTINE_H

#include "common.h"
#include "state.h"

/* Called once a held range left the quarantine, after its check: gives the range back (NULL in
 * rz_qhold_t: cuMemFree of its base). Called with no lock of the quarantine held. */
typedef void rz_qrelease_fn(uint64_t base, uint64_t bytes, void *arg);

/* A range to hold (the reusable API: an allocation's whole block, or a pool's region). */
typedef struct rz_qhold {
    rz_devptr_t base;   /* held range [base, base + bytes), filled with the free byte */
    uint64_t bytes;
    rz_devptr_t ptr;    /* the program's pointer: reports give offsets from it */
    uint64_t user_bytes;
    uint64_t index;     /* creation index */
    void *ctx;          /* its context (NULL: the current one, asked of the driver) */
    uint32_t alloc_stack; /* depot ids (depot.h), 0: none */
    uint32_t free_stack;
    rz_qrelease_fn *release;
    void *arg;
    uint8_t region;     /* a pool's region (RZ_QENTRY_REGION): reported as rz__quarantine_on_region says */
} rz_qhold_t;

/* What a held region's report calls it ("nvtx region \"grads\" 0x...+2048, unregistered (heap ...)"), from
 * its hold's arg. Called with a quarantine lock held: it must take no lock. */
typedef void rz_qdescribe_fn(const void *arg, char *out, size_t cap);

/* Registered once by the layer that holds regions (policy/nvtx_regions.c). */
void rz__quarantine_on_region(rz_qdescribe_fn *fn);

/* The held ranges whose release is `owner` that overlap [base, base + bytes) leave the quarantine now: each
 * checked (after its fill, waited for when still queued: the range is about to be the program's again),
 * then released. Takes no lock the caller may hold but the registry's, which it may hold. Returns how many. */
size_t rz__quarantine_withdraw(uint64_t base, uint64_t bytes, rz_qrelease_fn *owner);

/* Hold h: its range is filled with the free byte in the order of stream s (`ordered`; else the legacy stream,
 * which follows the earlier work of every blocking stream), an event recorded after, and queued; the oldest
 * blocks leave (checked, then released) while the held bytes exceed METRALE_REDZONE_QUARANTINE. 1: held (the
 * caller gives nothing back to the driver); 0: not held (off, larger than the bound, a capture in progress, a
 * sticky error, no event slot): the caller frees it as before. Never waits for the device. */
int rz__quarantine_hold(const rz_qhold_t *h, int ordered, rzcu_stream s);

/* The free of zone (out of the registry, its band checked) as the free path (alloc.c) asks it: held (1), or
 * not (0: free it as before). */
struct rz_free_req;
int rz__quarantine_take(const rz_zone_node_t *zone, const struct rz_free_req *req);

/* ptr was exported (cuIpcGetMemHandle): its free is not held, so a handle to it opens no more once freed. */
void rz__quarantine_exported(uint64_t ptr);

/* helgrind (REDZONE_VALGRIND builds): the counters read without the lock are atomics. */
void rz__quarantine_annotate(void);

/* Whether p is a held block's pointer or inside a held block (a free of it is a bad free): fills *out.
 * Held regions are not blocks: never found here. */
int rz__quarantine_find(rz_devptr_t p, rz_qentry_t *out);

/* Whether p is the pointer of one of the newest frees (held or not; 4096 kept): fills *out (no flags). */
int rz__quarantine_freed(rz_devptr_t p, rz_qentry_t *out);

/* Out of device memory: every held block whose fill is done leaves (checked, released). 1 when any left. */
int rz__quarantine_drain(void);

/* Under the registry lock, at the start of a scan: check every held block whose fill is done (a changed byte
 * is reported as written after free, and the block filled again). */
void rz__quarantine_scan_locked(void);

/* At exit, before the exit scan: wait for the contexts whose fills are still queued (the driver's teardown
 * waits too); with `check` (any policy but none) check the held blocks now, whether or not an exit scan
 * follows (it may read nothing when no device work was noted; then it leaves them alone). */
void rz__quarantine_at_exit(int check);

/* SCAN=launch: copies of the held blocks of ctx a check queued right after a launch may judge (quarantine_launch.c
 * asks): fill done, or still queued in the legacy stream when the launch is there too (`legacy`), no writer
 * noted yet; the newest first, at most cap of them and `budget` bytes. *all is 0 when some such block was left
 * out (too many, too large, or its fill not ordered before the launch): a change seen later in it may not be
 * this launch's. */
size_t rz__quarantine_held_of(void *ctx, int legacy, rz_qentry_t *out, size_t cap, uint64_t budget, int *all);

#define RZ_QWRITER_NAME 64 /* a noted writer's kernel name, truncated */

/* A noted writer: the launch after which the held block of creation index `index` was first seen changed. */
typedef struct rz_qwriter {
    uint64_t index, launch, stream;
    char name[RZ_QWRITER_NAME];
} rz_qwriter_t;

/* SCAN=launch: the held block of creation index `index` was first seen changed right after launch #launch
 * (kernel `name`, on `stream`): its report names that launch instead of the kernels launched since the free. */
void rz__quarantine_note_writer(uint64_t index, uint64_t launch, uint64_t stream, const char *name);

/* The driver calls rz__quarantine_after_launch queued so far: single copies, batched copies, host functions
 * (tests count a launch check's own calls apart from them). */
void rz__quarantine_launch_calls(uint64_t *singles, uint64_t *batches, uint64_t *funcs);

/* SCAN=launch: queue, in stream s right after the launch #launch of kernel `name` in ctx, the copy of the held
 * blocks of ctx and a host function that notes this launch as the writer of those it finds changed. No host
 * wait. The launch check (policy/launch_check.c) calls it for each launch it checks. */
void rz__quarantine_after_launch(void *ctx, rzcu_stream s, uint64_t launch, const char *name);

/* Pools (quarantine_pool.c): the allocation at ptr came from the program's pool `pool` (noted while the
 * quarantine is on); its free takes the note (1 and *pool, else 0). */
void rz__quarantine_pool_note(uint64_t ptr, void *pool);
int rz__quarantine_pool_take(uint64_t ptr, void **pool);
/* The release of a held block of a program's pool (its rz_qhold_t release, the pool its argument). */
void rz__quarantine_pool_release(uint64_t base, uint64_t bytes, void *pool);

/* The bytes held whose release is (fn, arg): a pool's held blocks, each rounded up to 256 bytes (the
 * allocation granularity the driver documents; the emulated driver's pools count used memory so). */
uint64_t rz__quarantine_held_for(rz_qrelease_fn *fn, void *arg);

/* Give back (checked, then released) every held block whose release is (fn, arg), waiting for their
 * contexts where a fill is still queued (a trim or a destroy of their pool follows). */
void rz__quarantine_drain_for(rz_qrelease_fn *fn, void *arg);

/* Bytes held now. */
uint64_t rz__quarantine_bytes(void);

/* METRALE_REDZONE_FREE_FILL as used (distinct from the band fill when not set). */
uint8_t rz__quarantine_byte(void);

extern rz_quarantine_t __redzone_quarantine;

#endif /* REDZONE_QUARANTINE_H */
