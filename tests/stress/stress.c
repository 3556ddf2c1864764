/*
 * rzstress: concurrency stress of libredzone.so through its interposed driver entry points (issue #7).
 *
 * T worker threads (default 8) each make N allocation or free calls (default 100000) of random sizes and
 * kinds: cuMemAlloc_v2 (band installed lazily), cuMemAllocManaged, cuMemAllocPitch_v2, stream-ordered
 * cuMemAllocAsync / cuMemFreeAsync (band checked in stream order at the free), rz_mem_alloc (band written
 * at once) and zero-byte requests the driver refuses. They fill and read back their own bytes through
 * memsets and copies (which install waiting bands first), ask cuMemGetAddressRange_v2 about them, synchronise
 * now and then, and once in a while write one byte past the end of a fresh allocation on purpose, then free
 * it. Meanwhile a checker thread scans, poisons and unpoisons, synchronises, and walks the registry.
 *
 * What must hold, checked by the program itself (the first broken invariant prints one "rzstress: FAIL:"
 * line and the program exits 1; bad arguments exit 2):
 *   - all the time: live zones never overlap and are listed once each in strictly increasing creation
 *     index; scans never count more violations than deliberate overruns were made (no false violations);
 *     a scan right after a poison or an unpoison finds nothing; every call returns what the driver would;
 *   - at each phase end, with every worker stopped at a barrier: the registry holds exactly the allocations
 *     the workers hold, with the sizes and pads asked for (no lost or duplicated zones);
 *     map_calls - unmap_calls = live allocations; current_mapped_bytes = the sum of their sizes and pads;
 *     live_zones = live allocations; every allocation call took exactly one creation index; violations =
 *     deliberate overruns so far; nothing went unpadded or stale;
 *   - the workers' own bytes are never changed by band installs, scans or poisons;
 *   - at the end: nothing live, every counter back in balance, each deliberate overrun reported exactly
 *     once in the log, for the right zone, and no other violation line.
 *
 * Synchronisation is only by barriers, mutexes and a reader-writer lock (poisons take it for writing,
 * an overrun from its write to its free for reading: a poison re-fills bands, which would erase an
 * overrun no scan has seen yet, a documented limit), never by sleeping.
 *
 * Run it preloaded on the emulated driver, as ctest does (docs/testing.md):
 *   LD_PRELOAD=build/native/libredzone.so LD_LIBRARY_PATH=build/emu build/tests/rzstress [options]
 *   --threads T (8)  --ops N per thread (100000)  --phases P (4)  --seed S (1)  --max-live L per thread (64)
 *   --overrun-every K (a deliberate overrun after one call in K on average; 50)
 *   --warm (start the library in the main thread before the others: for helgrind, which cannot see the
 *   atomic flags that publish the library's one-time start to the threads)
 * REDZONE_LONG=1 in the environment raises --ops to at least 100000, the size the issue asks for. The
 * program sets METRALE_REDZONE (64 unless set), METRALE_REDZONE_SCAN=free,sync,exit and
 * METRALE_REDZONE_LOG (a file it reads back; kept and named on failure) for itself.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../programs/device_store.h"
#include "cuda_emu.h"
#include "redzone.h"

#define LONG_OPS 100000u
#define OVERRUN_BYTE 0x5A /* never a band byte: the fill is 0xEE and poison windows use 0xEE and 0x00 */

/* ---- failing ---------------------------------------------------------------------------------------- */
static char g_log_path[256];

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "rzstress: FAIL: %s\n", msg);
    if (g_log_path[0])
        fprintf(stderr, "rzstress: the library's log is kept in %s\n", g_log_path);
    fflush(stderr);
    _exit(1); /* now: other threads are still running, and atexit handlers would scan */
}

#define CU(call)                                                                                             \
    do {                                                                                                     \
        rzcu_result rc_ = (call);                                                                            \
        if (rc_ != RZCUDA_SUCCESS)                                                                           \
            fail("%s:%d: %s returned %u", __FILE__, __LINE__, #call, rc_);                                   \
    } while (0)

/* ---- the library's API, found in the preloaded libredzone.so -------------------------------------------- */
static int (*p_mem_alloc)(rz_devptr_t *, size_t);
static int (*p_mem_free)(rz_devptr_t);
static int (*p_scan)(void);
static int (*p_poison)(uint64_t, uint64_t);
static int (*p_unpoison)(void);
static int (*p_stats_get)(rz_stats_t *);
static int (*p_zone_foreach)(rz_zone_visit_fn, void *);
static uint64_t (*p_next_index)(void);

static void *api(const char *name) {
    void *p = dlsym(RTLD_DEFAULT, name);
    if (p == NULL) {
        fprintf(stderr, "rzstress: %s not found: run with LD_PRELOAD=.../libredzone.so (see docs/testing.md)\n",
                name);
        exit(2);
    }
    return p;
}

static void load_api(void) {
    *(void **)&p_mem_alloc = api("rz_mem_alloc");
    *(void **)&p_mem_free = api("rz_mem_free");
    *(void **)&p_scan = api("rz_scan");
    *(void **)&p_poison = api("rz_poison");
    *(void **)&p_unpoison = api("rz_unpoison");
    *(void **)&p_stats_get = api("rz_stats_get");
    *(void **)&p_zone_foreach = api("rz_zone_foreach");
    *(void **)&p_next_index = api("rz_next_index");
}

/* ---- settings ----------------------------------------------------------------------------------------- */
static unsigned g_threads = 8, g_phases = 4, g_max_live = 64, g_overrun_every = 50;
static unsigned long g_ops = LONG_OPS;
static uint64_t g_seed = 1;
static int g_warm;            /* --warm: the library starts in main before the threads (valgrind runs) */
static uint64_t g_main_alloc_calls;
static size_t g_pad;          /* METRALE_REDZONE rounded up to 16, as the library does */
static rzcu_context g_ctx;

static unsigned long number(const char *opt, const char *text, unsigned long lo, unsigned long hi) {
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (errno || end == text || *end || text[0] == '-' || v < lo || v > hi) {
        fprintf(stderr, "rzstress: %s wants a number from %lu to %lu, not \"%s\"\n", opt, lo, hi, text);
        exit(2);
    }
    return v;
}

static void parse_args(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--warm") == 0) {
            g_warm = 1;
            continue;
        }
        if (strcmp(a, "--help") == 0) {
            printf("usage: rzstress [--threads T] [--ops N] [--phases P] [--seed S] [--max-live L]\n"
                   "                [--overrun-every K] [--warm]\n"
                   "run with LD_PRELOAD=libredzone.so on the emulated driver; see docs/testing.md\n");
            exit(0);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "rzstress: %s: unknown option or missing value (try --help)\n", a);
            exit(2);
        }
        const char *v = argv[++i];
        if (strcmp(a, "--threads") == 0)
            g_threads = (unsigned)number(a, v, 1, 64);
        else if (strcmp(a, "--ops") == 0)
            g_ops = number(a, v, 1, 100000000);
        else if (strcmp(a, "--phases") == 0)
            g_phases = (unsigned)number(a, v, 1, 1000);
        else if (strcmp(a, "--seed") == 0)
            g_seed = number(a, v, 0, ULONG_MAX);
        else if (strcmp(a, "--overrun-every") == 0)
            g_overrun_every = (unsigned)number(a, v, 1, 1000000000);
        else if (strcmp(a, "--max-live") == 0)
            g_max_live = (unsigned)number(a, v, 1, 4096);
        else {
            fprintf(stderr, "rzstress: unknown option %s (try --help)\n", a);
            exit(2);
        }
    }
    const char *lng = getenv("REDZONE_LONG");
    if (lng && strcmp(lng, "1") == 0 && g_ops < LONG_OPS)
        g_ops = LONG_OPS;
    if (g_phases > g_ops)
        g_phases = (unsigned)g_ops;
}

/* The library reads its options at its first call: set ours before that. */
static void set_library_options(void) {
    const char *bytes = getenv("METRALE_REDZONE");
    if (bytes == NULL) {
        setenv("METRALE_REDZONE", "64", 1);
        bytes = "64";
    }
    unsigned long pad = number("METRALE_REDZONE", bytes, 1, 1u << 20);
    g_pad = (pad + 15) & ~(size_t)15;
    setenv("METRALE_REDZONE_SCAN", "free,sync,exit", 1);
    /* These would change which bands exist or the bytes they hold, which the checks rely on. */
    const char *unset[] = {"METRALE_REDZONE_FILL", "METRALE_REDZONE_POISON", "METRALE_REDZONE_MIN_IDX",
                           "METRALE_REDZONE_TRACE_IDX", "METRALE_REDZONE_HELP"};
    for (size_t i = 0; i < sizeof unset / sizeof unset[0]; i++)
        unsetenv(unset[i]);
    const char *tmp = getenv("TMPDIR");
    snprintf(g_log_path, sizeof g_log_path, "%s/rzstress-%ld.log", tmp && *tmp ? tmp : "/tmp", (long)getpid());
    unlink(g_log_path);
    setenv("METRALE_REDZONE_LOG", g_log_path, 1);
}

/* ---- random numbers: xorshift64*, one state per thread ---------------------------------------------------- */
static uint64_t rnd(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * UINT64_C(2685821657736338717);
}

static uint64_t below(uint64_t *s, uint64_t n) { return rnd(s) % n; }

/* ---- shared bookkeeping (mutexes only: helgrind and drd check this program too) ---------------------------- */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_overruns_started; /* counted before the byte is written */
static uint64_t g_overruns_done;    /* counted after the free that must report it */
static uint64_t *g_overrun_index;   /* creation index of each deliberate overrun */
static size_t *g_overrun_user;
static uint8_t *g_overrun_kind;
static size_t g_overrun_n, g_overrun_cap;
static int g_done;

static pthread_rwlock_t g_poison_lock = PTHREAD_RWLOCK_INITIALIZER;
static pthread_barrier_t g_barrier;

static uint64_t overruns_started(void) {
    pthread_mutex_lock(&g_mu);
    uint64_t n = g_overruns_started;
    pthread_mutex_unlock(&g_mu);
    return n;
}

/* ---- one worker ----------------------------------------------------------------------------------------- */
enum kind { K_PLAIN, K_MANAGED, K_PITCH, K_ASYNC, K_API, K_NKINDS };
static const char *const kind_name[] = {"cuMemAlloc_v2", "cuMemAllocManaged", "cuMemAllocPitch_v2",
                                        "cuMemAllocAsync", "rz_mem_alloc"};

struct alloc {
    rzcu_deviceptr p;
    size_t user; /* bytes the program may use (pitch * height for a pitched one) */
    size_t pad;  /* band the library should have added */
    uint8_t kind;
    uint8_t filled; /* 1: every user byte holds `pattern` */
    uint8_t pattern;
};

struct worker {
    unsigned id;
    pthread_t thread;
    uint64_t rng;
    rzcu_stream stream;
    struct alloc *live;
    unsigned nlive;
    uint64_t alloc_calls; /* every allocation call, failed ones included: each takes one creation index */
    uint8_t buf[4096];
};
static struct worker *g_workers;

static size_t random_size(uint64_t *s) {
    uint64_t r = below(s, 100);
    if (r < 70)
        return 1 + (size_t)below(s, 1024);
    if (r < 97)
        return 1 + (size_t)below(s, 65536);
    return 1 + (size_t)below(s, 1u << 20);
}

/* Read back up to the first and last 2 KiB of a filled allocation. */
static void verify_bytes(struct worker *w, const struct alloc *a, const char *when) {
    if (!a->filled)
        return;
    size_t half = sizeof w->buf / 2;
    size_t head = a->user < half ? a->user : half;
    CU(cuMemcpyDtoH_v2(w->buf, a->p, head));
    size_t tail = a->user - head < half ? a->user - head : half;
    if (tail)
        CU(cuMemcpyDtoH_v2(w->buf + head, a->p + a->user - tail, tail));
    for (size_t i = 0; i < head + tail; i++)
        if (w->buf[i] != a->pattern)
            fail("thread %u %s: %s allocation 0x%llx (%zu bytes) byte %zu is 0x%02x, the program wrote 0x%02x", w->id,
                 when, kind_name[a->kind], a->p, a->user, i < head ? i : a->user - tail + (i - head), w->buf[i],
                 a->pattern);
}

static void fill(struct worker *w, struct alloc *a) {
    a->pattern = (uint8_t)(1 + below(&w->rng, 250)); /* never OVERRUN_BYTE's neighbours matter: user bytes */
    CU(cuMemsetD8_v2(a->p, a->pattern, a->user));
    a->filled = 1;
}

static void check_range(struct worker *w, const struct alloc *a) {
    rzcu_deviceptr base = 0;
    size_t size = 0;
    rzcu_deviceptr inside = a->p + below(&w->rng, a->user);
    CU(cuMemGetAddressRange_v2(&base, &size, inside));
    if (base != a->p || size != a->user)
        fail("thread %u: cuMemGetAddressRange_v2(0x%llx) = 0x%llx + %zu, want 0x%llx + %zu (the user range)", w->id,
             inside, base, size, a->p, a->user);
    rzcu_result r = cuMemGetAddressRange_v2(&base, &size, a->p + a->user);
    if (r != RZCUDA_ERROR_NOT_FOUND)
        fail("thread %u: cuMemGetAddressRange_v2 of a band byte returned %u, want CUDA_ERROR_NOT_FOUND", w->id, r);
}

/* One allocation call of a random kind; 0 if the call was a refused zero-byte request. */
static int do_alloc(struct worker *w, struct alloc *a) {
    memset(a, 0, sizeof *a);
    a->kind = (uint8_t)below(&w->rng, K_NKINDS);
    a->pad = g_pad;
    w->alloc_calls++;
    if (below(&w->rng, 100) == 0) { /* the driver's own answer to a zero-byte request, untouched */
        rzcu_deviceptr p = 0;
        rzcu_result r = cuMemAlloc_v2(&p, 0);
        if (r != RZCUDA_ERROR_INVALID_VALUE)
            fail("thread %u: cuMemAlloc_v2(0 bytes) returned %u, want CUDA_ERROR_INVALID_VALUE", w->id, r);
        return 0;
    }
    size_t n = random_size(&w->rng);
    a->user = n;
    switch (a->kind) {
    case K_PLAIN:
        CU(cuMemAlloc_v2(&a->p, n));
        break;
    case K_MANAGED:
        CU(cuMemAllocManaged(&a->p, n, RZCU_MEM_ATTACH_GLOBAL));
        break;
    case K_PITCH: {
        size_t width = 1 + (size_t)below(&w->rng, 4096), height = 1 + (size_t)below(&w->rng, 16), pitch = 0;
        CU(cuMemAllocPitch_v2(&a->p, &pitch, width, height, 4));
        if (pitch < width)
            fail("thread %u: pitch %zu for width %zu", w->id, pitch, width);
        a->user = pitch * height;
        a->pad = pitch * ((g_pad + width - 1) / width); /* whole extra rows holding at least the band */
        break;
    }
    case K_ASYNC:
        CU(cuMemAllocAsync(&a->p, n, w->stream));
        break;
    case K_API: {
        int r = p_mem_alloc(&a->p, n);
        if (r != 0)
            fail("thread %u: rz_mem_alloc(%zu) returned %d", w->id, n, r);
        break;
    }
    }
    if (a->p == 0 || a->p % CUDA_EMU_ALLOC_ALIGN)
        fail("thread %u: %s returned pointer 0x%llx", w->id, kind_name[a->kind], a->p);
    if (below(&w->rng, 2))
        fill(w, a);
    return 1;
}

static void do_free(struct worker *w, const struct alloc *a) {
    verify_bytes(w, a, "before free");
    if (a->kind == K_ASYNC)
        CU(cuMemFreeAsync(a->p, w->stream));
    else if (a->kind == K_API) {
        int r = p_mem_free(a->p);
        if (r != 0)
            fail("thread %u: rz_mem_free returned %d", w->id, r);
    } else
        CU(cuMemFree_v2(a->p));
}

/* The creation index of the live zone at p (0 when not found, which the caller treats as a failure). */
struct find {
    rzcu_deviceptr p;
    uint64_t index;
    int found;
};
static int find_cb(const rz_zone_info_t *z, void *arg) {
    struct find *f = arg;
    if (z->ptr != f->p)
        return 0;
    f->index = z->index;
    f->found = 1;
    return 1;
}

/* Write one byte past the end of a fresh allocation, then free it: the free's band check (or a scan that
 * gets there first) must report exactly this zone, once. */
static void overrun(struct worker *w) {
    pthread_rwlock_rdlock(&g_poison_lock);
    struct alloc a;
    do {
        if (!do_alloc(w, &a)) {
            pthread_rwlock_unlock(&g_poison_lock);
            return;
        }
        if (a.kind == K_PITCH || a.kind == K_MANAGED) /* keep the expected report line simple */
            do_free(w, &a);
    } while (a.kind == K_PITCH || a.kind == K_MANAGED);
    struct find f = {.p = a.p};
    p_zone_foreach(find_cb, &f);
    if (!f.found)
        fail("thread %u: a live %s allocation 0x%llx is not in the registry", w->id, kind_name[a.kind], a.p);
    pthread_mutex_lock(&g_mu);
    g_overruns_started++;
    if (g_overrun_n == g_overrun_cap) {
        g_overrun_cap = g_overrun_cap ? 2 * g_overrun_cap : 64;
        g_overrun_index = realloc(g_overrun_index, g_overrun_cap * sizeof *g_overrun_index);
        g_overrun_user = realloc(g_overrun_user, g_overrun_cap * sizeof *g_overrun_user);
        g_overrun_kind = realloc(g_overrun_kind, g_overrun_cap * sizeof *g_overrun_kind);
        if (!g_overrun_index || !g_overrun_user || !g_overrun_kind)
            fail("out of host memory");
    }
    g_overrun_index[g_overrun_n] = f.index;
    g_overrun_user[g_overrun_n] = a.user;
    g_overrun_kind[g_overrun_n] = a.kind;
    g_overrun_n++;
    pthread_mutex_unlock(&g_mu);
    CU(device_fill(a.p + a.user, OVERRUN_BYTE, 1)); /* a kernel's store: inside the padded allocation */
    do_free(w, &a);
    if (a.kind == K_ASYNC)
        CU(cuStreamSynchronize(w->stream)); /* the band is judged when the stream reaches the free */
    pthread_mutex_lock(&g_mu);
    g_overruns_done++;
    pthread_mutex_unlock(&g_mu);
    pthread_rwlock_unlock(&g_poison_lock);
}

static void phase_end(struct worker *w) {
    CU(cuStreamSynchronize(w->stream)); /* stream-ordered frees and their band checks are done */
    pthread_barrier_wait(&g_barrier);   /* main checks everything now */
    pthread_barrier_wait(&g_barrier);
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    CU(cuCtxSetCurrent(g_ctx));
    CU(cuStreamCreate(&w->stream, 0));
    unsigned long per_phase = g_ops / g_phases, next_phase = per_phase;
    unsigned phase = 0;
    for (unsigned long op = 0; op < g_ops; op++) {
        uint64_t r = below(&w->rng, 1000);
        if (w->nlive == 0 || (w->nlive < g_max_live && r < 520)) {
            if (do_alloc(w, &w->live[w->nlive]))
                w->nlive++;
        } else {
            unsigned k = (unsigned)below(&w->rng, w->nlive);
            do_free(w, &w->live[k]);
            w->live[k] = w->live[--w->nlive];
        }
        if (w->nlive && below(&w->rng, 16) == 0) {
            struct alloc *a = &w->live[below(&w->rng, w->nlive)];
            verify_bytes(w, a, "before a re-fill");
            fill(w, a);
            check_range(w, a);
        }
        if (below(&w->rng, 256) == 0)
            CU(below(&w->rng, 2) ? cuCtxSynchronize() : cuStreamSynchronize(w->stream));
        if (below(&w->rng, g_overrun_every) == 0)
            overrun(w);
        if (op + 1 == next_phase && phase + 1 < g_phases) {
            phase_end(w);
            phase++;
            next_phase += per_phase;
        }
    }
    while (w->nlive)
        do_free(w, &w->live[--w->nlive]);
    phase_end(w);
    return NULL;
}

/* ---- registry walks ---------------------------------------------------------------------------------------- */
struct zone {
    uint64_t index;
    rzcu_deviceptr ptr;
    uint64_t user, pad;
    uint8_t expected;
};
struct walk {
    struct zone *z;
    size_t n, cap;
    const char *who;
};

static int walk_cb(const rz_zone_info_t *zi, void *arg) {
    struct walk *w = arg;
    if (w->n == w->cap)
        fail("%s: more than %zu zones listed: the workers never hold that many", w->who, w->cap);
    if (w->n && zi->index <= w->z[w->n - 1].index)
        fail("%s: zone #%" PRIu64 " listed after #%" PRIu64 ": not in strictly increasing creation index", w->who,
             zi->index, w->z[w->n - 1].index);
    if (zi->pad_bytes == 0)
        fail("%s: zone #%" PRIu64 " has no band (unpadded or unwatched)", w->who, zi->index);
    if (zi->expected != 0xEE && zi->expected != 0x00)
        fail("%s: zone #%" PRIu64 " expects band byte 0x%02x: neither the fill nor a poison byte", w->who, zi->index,
             zi->expected);
    w->z[w->n++] = (struct zone){zi->index, zi->ptr, zi->user_bytes, zi->pad_bytes, zi->expected};
    return 0;
}

static int by_ptr(const void *a, const void *b) {
    const struct zone *x = a, *y = b;
    return x->ptr < y->ptr ? -1 : x->ptr > y->ptr;
}

static void walk(struct walk *w, const char *who) {
    w->n = 0;
    w->who = who;
    int rc = p_zone_foreach(walk_cb, w);
    if (rc != 0)
        fail("%s: rz_zone_foreach returned %d", who, rc);
    qsort(w->z, w->n, sizeof *w->z, by_ptr);
    for (size_t i = 1; i < w->n; i++)
        if (w->z[i - 1].ptr + w->z[i - 1].user + w->z[i - 1].pad > w->z[i].ptr)
            fail("%s: zones #%" PRIu64 " (0x%llx + %" PRIu64 " + %" PRIu64 ") and #%" PRIu64 " (0x%llx) overlap", who,
                 w->z[i - 1].index, w->z[i - 1].ptr, w->z[i - 1].user, w->z[i - 1].pad, w->z[i].index, w->z[i].ptr);
}

/* ---- checker thread: scans, poisons and walks while the workers run -------------------------------------- */
static void scan_clean(const char *after) {
    int v = p_scan();
    if (v != 0)
        fail("checker: the scan right after %s returned %d, want 0 (no overrun can be in flight)", after, v);
}

static void *checker_main(void *arg) {
    (void)arg;
    uint64_t rng = g_seed * 7919 + 17;
    struct walk w = {.cap = (size_t)g_threads * (g_max_live + 2) + 16};
    w.z = malloc(w.cap * sizeof *w.z);
    if (w.z == NULL)
        fail("out of host memory");
    CU(cuCtxSetCurrent(g_ctx));
    for (;;) {
        pthread_mutex_lock(&g_mu);
        int done = g_done;
        pthread_mutex_unlock(&g_mu);
        if (done)
            break;
        switch (below(&rng, 8)) {
        case 0:
        case 1:
        case 2: {
            int v = p_scan();
            if (v < 0)
                fail("checker: rz_scan returned %d", v);
            rz_stats_t s;
            p_stats_get(&s);
            uint64_t started = overruns_started();
            if (s.violations > started)
                fail("checker: %" PRIu64 " violations counted, only %" PRIu64 " overruns made: a false violation",
                     s.violations, started);
            break;
        }
        case 3:
        case 4:
            walk(&w, "checker");
            break;
        case 5: {
            uint64_t next = p_next_index();
            uint64_t lo = below(&rng, next + 16), hi = lo + below(&rng, 64);
            pthread_rwlock_wrlock(&g_poison_lock);
            int rc = p_poison(lo, hi);
            if (rc != 0)
                fail("checker: rz_poison(%" PRIu64 ", %" PRIu64 ") returned %d", lo, hi, rc);
            scan_clean("a poison");
            pthread_rwlock_unlock(&g_poison_lock);
            break;
        }
        case 6: {
            pthread_rwlock_wrlock(&g_poison_lock);
            int rc = p_unpoison();
            if (rc != 0)
                fail("checker: rz_unpoison returned %d", rc);
            scan_clean("an unpoison");
            pthread_rwlock_unlock(&g_poison_lock);
            break;
        }
        case 7:
            CU(cuCtxSynchronize()); /* installs waiting bands, then scans (METRALE_REDZONE_SCAN=sync) */
            break;
        }
    }
    free(w.z);
    return NULL;
}

static void check_log(void);

/* ---- checks at a barrier ---------------------------------------------------------------------------------- */
static void check_quiescent(unsigned phase, struct walk *w) {
    char who[64];
    snprintf(who, sizeof who, "phase %u end", phase);
    uint64_t calls = g_main_alloc_calls, live = 0, bytes = 0;
    size_t m = 0;
    static struct zone *held;
    static size_t held_cap;
    size_t cap = (size_t)g_threads * g_max_live + 1;
    if (held_cap < cap) {
        held = realloc(held, cap * sizeof *held);
        if (held == NULL)
            fail("out of host memory");
        held_cap = cap;
    }
    for (unsigned t = 0; t < g_threads; t++) {
        const struct worker *wk = &g_workers[t];
        calls += wk->alloc_calls;
        for (unsigned i = 0; i < wk->nlive; i++) {
            const struct alloc *a = &wk->live[i];
            held[m++] = (struct zone){0, a->p, a->user, a->pad, 0};
            live++;
            bytes += a->user + a->pad;
        }
    }
    qsort(held, m, sizeof *held, by_ptr);
    walk(w, who);
    for (size_t i = 0, j = 0; i < m || j < w->n; ) {
        if (j == w->n || (i < m && held[i].ptr < w->z[j].ptr))
            fail("%s: allocation 0x%llx (%" PRIu64 " bytes) is held by a worker but missing from the registry (lost "
                 "zone)", who, held[i].ptr, held[i].user);
        if (i == m || w->z[j].ptr < held[i].ptr)
            fail("%s: registry zone #%" PRIu64 " at 0x%llx is held by no worker (stale or duplicated zone)", who,
                 w->z[j].index, w->z[j].ptr);
        if (held[i].user != w->z[j].user || held[i].pad != w->z[j].pad)
            fail("%s: zone #%" PRIu64 " at 0x%llx is %" PRIu64 " + %" PRIu64 " pad bytes, the worker asked for %" PRIu64
                 " + %" PRIu64, who, w->z[j].index, w->z[j].ptr, w->z[j].user, w->z[j].pad, held[i].user,
                 held[i].pad);
        i++;
        j++;
    }
    rz_stats_t s;
    p_stats_get(&s);
    uint64_t next = p_next_index();
    pthread_mutex_lock(&g_mu);
    uint64_t overruns = g_overruns_done;
    uint64_t started = g_overruns_started;
    pthread_mutex_unlock(&g_mu);
    if (started != overruns)
        fail("%s: %" PRIu64 " overruns started, %" PRIu64 " finished", who, started, overruns);
#define EXPECT(cond, ...)                                                                                   \
    do {                                                                                                     \
        if (!(cond))                                                                                         \
            fail(__VA_ARGS__);                                                                               \
    } while (0)
    EXPECT(next == calls, "%s: next creation index %" PRIu64 " after %" PRIu64 " allocation calls (each takes one)",
           who, next, calls);
    EXPECT(s.map_calls - s.unmap_calls == live, "%s: map_calls %" PRIu64 " - unmap_calls %" PRIu64 " != %" PRIu64
           " live allocations", who, s.map_calls, s.unmap_calls, live);
    EXPECT(s.current_mapped_bytes == bytes, "%s: current_mapped_bytes %" PRIu64 ", the live allocations and their "
           "bands hold %" PRIu64, who, s.current_mapped_bytes, bytes);
    EXPECT(s.peak_mapped_bytes >= s.current_mapped_bytes, "%s: peak_mapped_bytes %" PRIu64 " < current %" PRIu64, who,
           s.peak_mapped_bytes, s.current_mapped_bytes);
    EXPECT(s.live_zones == live, "%s: live_zones %" PRIu64 ", %" PRIu64 " live allocations", who, s.live_zones, live);
    if (s.violations != overruns)
        check_log(); /* names the overrun that went unreported, or reported twice */
    EXPECT(s.violations == overruns, "%s: %" PRIu64 " violations counted for %" PRIu64 " deliberate overruns", who,
           s.violations, overruns);
    EXPECT(s.unpadded_allocs == 0, "%s: %" PRIu64 " allocations went unpadded", who, s.unpadded_allocs);
    EXPECT(s.stale_zones == 0, "%s: %" PRIu64 " zones were dropped as stale", who, s.stale_zones);
    EXPECT(s.guard_install_calls <= s.map_calls, "%s: %" PRIu64 " bands installed for %" PRIu64 " allocations", who,
           s.guard_install_calls, s.map_calls);
}

/* ---- the log: each deliberate overrun reported exactly once, nothing else --------------------------------- */
static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail("cannot read the library's log %s", path);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (buf == NULL)
        fail("out of host memory");
    buf[n] = '\0';
    return buf;
}

static size_t count(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void check_log(void) {
    char *log = read_file(g_log_path);
    for (size_t i = 0; i < g_overrun_n; i++) {
        char want[256];
        snprintf(want, sizeof want,
                 "REDZONE VIOLATION alloc#%" PRIu64 " user_bytes=%zu pad=%zu : bytes [0..=0] past the end were "
                 "written (1 of %zu pad bytes changed), first bad value 0x%02x\n",
                 g_overrun_index[i], g_overrun_user[i], g_pad, g_pad, OVERRUN_BYTE);
        if (count(log, want) != 1)
            fail("the overrun of alloc#%" PRIu64 " (%s) is reported %zu times, want once as: %s", g_overrun_index[i],
                 kind_name[g_overrun_kind[i]], count(log, want), want);
    }
    size_t lines = count(log, "REDZONE VIOLATION");
    if (lines != g_overrun_n)
        fail("the log has %zu violation lines for %zu deliberate overruns", lines, g_overrun_n);
    if (strstr(log, "redzone: warning:"))
        fail("the library warned: %s", strstr(log, "redzone: warning:"));
    free(log);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    parse_args(argc, argv);
    load_api();
    set_library_options();
    CU(cuInit(0));
    CU(cuDevicePrimaryCtxRetain(&g_ctx, 0));
    CU(cuCtxSetCurrent(g_ctx));
    printf("rzstress: %u threads x %lu allocation/free calls in %u phases, seed %" PRIu64 ", band %zu bytes%s\n",
           g_threads, g_ops, g_phases, g_seed, g_pad, g_warm ? ", started warm" : "");
    if (g_warm) {
        /* The library's one-time start (options, driver, exit handler, agent, scan staging) here, before any
         * thread exists: helgrind cannot see the atomic flags that publish it to threads that start later. */
        rzcu_deviceptr p;
        CU(cuMemAlloc_v2(&p, 1));
        g_main_alloc_calls++;
        CU(cuMemsetD8_v2(p, 1, 1));
        if (p_scan() != 0)
            fail("warm-up: the first scan found a violation");
        CU(cuMemFree_v2(p));
    }

    g_workers = calloc(g_threads, sizeof *g_workers);
    if (g_workers == NULL || pthread_barrier_init(&g_barrier, NULL, g_threads + 1) != 0)
        fail("out of host memory");
    for (unsigned t = 0; t < g_threads; t++) {
        struct worker *w = &g_workers[t];
        w->id = t;
        w->rng = (g_seed + 1) * UINT64_C(0x9E3779B97F4A7C15) + t * UINT64_C(0xBF58476D1CE4E5B9) + 1;
        w->live = calloc(g_max_live, sizeof *w->live);
        if (w->live == NULL)
            fail("out of host memory");
    }
    pthread_t checker;
    if (pthread_create(&checker, NULL, checker_main, NULL) != 0)
        fail("cannot start the checker thread");
    for (unsigned t = 0; t < g_threads; t++)
        if (pthread_create(&g_workers[t].thread, NULL, worker_main, &g_workers[t]) != 0)
            fail("cannot start worker thread %u", t);

    struct walk w = {.cap = (size_t)g_threads * g_max_live + 16};
    w.z = malloc(w.cap * sizeof *w.z);
    if (w.z == NULL)
        fail("out of host memory");
    for (unsigned phase = 0; phase < g_phases; phase++) {
        pthread_barrier_wait(&g_barrier); /* every worker stopped at its phase end */
        check_quiescent(phase, &w);
        printf("rzstress: phase %u held: registry, counters, indices and violations agree\n", phase);
        pthread_barrier_wait(&g_barrier);
    }
    for (unsigned t = 0; t < g_threads; t++)
        pthread_join(g_workers[t].thread, NULL);
    pthread_mutex_lock(&g_mu);
    g_done = 1;
    pthread_mutex_unlock(&g_mu);
    pthread_join(checker, NULL);

    /* Everything freed: nothing live, counters back in balance, a last scan clean. */
    check_quiescent(g_phases, &w);
    if (w.n != 0)
        fail("end: %zu zones still registered after every free", w.n);
    int v = p_scan();
    if (v != 0)
        fail("end: the final scan returned %d", v);
    rz_stats_t s;
    p_stats_get(&s);
    if (s.scans == 0)
        fail("end: no scan ran");
    check_log();
    printf("rzstress: passed: %" PRIu64 " allocations, %" PRIu64 " scans, %zu deliberate overruns each reported "
           "once, %" PRIu64 " bands installed\n",
           s.map_calls, s.scans, g_overrun_n, s.guard_install_calls);
    unlink(g_log_path);
    for (unsigned t = 0; t < g_threads; t++)
        free(g_workers[t].live);
    free(g_workers);
    free(w.z);
    free(g_overrun_index);
    free(g_overrun_user);
    free(g_overrun_kind);
    pthread_barrier_destroy(&g_barrier);
    return 0;
}
