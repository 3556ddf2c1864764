/*
 * The driver's entry points (rz__drv), resolved once from libcuda.so.1 with dlopen and the real dlsym, never
 * by linking: on a GPU machine the NVIDIA driver, in tests and demos the emulated driver (a host-memory
 * libcuda.so.1), the same code path either way. Only the device seam (this folder) and the interposers, which
 * forward the program's own calls, call through it.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common.h"
#include "driver.h"
#include "driver_hashes.h" /* generated: RZ_GNU_HASH_<name> (tools/drv_hashes.c) */
#include "driver_info.h"
#include "report.h"
#include "state.h"

rz_driver_t rz__drv;

void *rz__real_dlsym(void *handle, const char *name) {
    typedef void *dlsym_fn(void *, const char *);
    static dlsym_fn *real;
    if (real == NULL) {
        /* glibc 2.34 moved dlsym into libc with a new version; older ones have only GLIBC_2.2.5. */
        dlsym_fn *f = (dlsym_fn *)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (f == NULL)
            f = (dlsym_fn *)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        real = f;
    }
    return real ? real(handle, name) : NULL;
}

/*
 * The driver's own symbol table, read in place: the start-up of every program resolves a few hundred names,
 * and dlsym costs about 600 instructions a name (its error handling, locks, the search of every library the
 * driver depends on, a formatted error for each name the driver lacks), most of the library's start-up.
 * Looking each name up in the driver's GNU hash table costs a fifth of that, with the same answer for the
 * driver's entry points: a function the driver itself defines, at its default version (hidden versions are
 * not what dlsym returns). A name the driver itself does not define is looked up in the libraries it names
 * as needed, as dlsym does (a shim driver forwards what it does not define to the one it wraps, as the
 * emulated driver's trace shim does); a name none of them defines is NULL. A name that is an indirect
 * function or has only a hidden version, and every name when the driver or one of those libraries has no GNU
 * hash table, are asked of dlsym, as before.
 */
struct elf_lookup {
    uintptr_t base;
    const ElfW(Sym) *symtab;
    const char *strtab;
    const ElfW(Half) *versym;
    const uint32_t *buckets, *chain;
    const ElfW(Addr) *bloom;
    uint32_t nbuckets, symoffset, bloom_size, bloom_shift;
};

static uintptr_t dyn_ptr(uintptr_t base, ElfW(Addr) v) { return v < base ? base + v : v; }

/* One library's table, from its load address and dynamic section. */
static int elf_lookup_init(uintptr_t base, const ElfW(Dyn) *dyn, struct elf_lookup *e) {
    if (dyn == NULL)
        return 0;
    memset(e, 0, sizeof *e);
    e->base = base;
    const uint32_t *gnu = NULL;
    for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_SYMTAB)
            e->symtab = (const ElfW(Sym) *)dyn_ptr(e->base, d->d_un.d_ptr);
        else if (d->d_tag == DT_STRTAB)
            e->strtab = (const char *)dyn_ptr(e->base, d->d_un.d_ptr);
        else if (d->d_tag == DT_GNU_HASH)
            gnu = (const uint32_t *)dyn_ptr(e->base, d->d_un.d_ptr);
        else if (d->d_tag == DT_VERSYM)
            e->versym = (const ElfW(Half) *)dyn_ptr(e->base, d->d_un.d_ptr);
    }
    if (gnu == NULL || e->symtab == NULL || e->strtab == NULL || gnu[0] == 0 || gnu[2] == 0)
        return 0;
    e->nbuckets = gnu[0];
    e->symoffset = gnu[1];
    e->bloom_size = gnu[2];
    e->bloom_shift = gnu[3];
    e->bloom = (const ElfW(Addr) *)(const void *)(gnu + 4);
    e->buckets = (const uint32_t *)(const void *)(e->bloom + e->bloom_size);
    e->chain = e->buckets + e->nbuckets;
    return 1;
}

#define FALLBACK ((void *)1) /* this table cannot say: ask dlsym */

/* name's definition in one library's table: its address, NULL when the table has no such name, or
 * FALLBACK. hash is name's GNU hash, computed at build time (driver_hashes.h). */
static void *elf_find(const struct elf_lookup *e, const char *name, uint32_t hash) {
    const unsigned bits = sizeof(ElfW(Addr)) * 8;
    ElfW(Addr) word = e->bloom[(hash / bits) % e->bloom_size];
    ElfW(Addr) mask = ((ElfW(Addr))1 << (hash % bits)) | ((ElfW(Addr))1 << ((hash >> e->bloom_shift) % bits));
    if ((word & mask) != mask)
        return NULL;
    uint32_t i = e->buckets[hash % e->nbuckets];
    if (i < e->symoffset)
        return NULL;
    for (;; i++) {
        uint32_t h2 = e->chain[i - e->symoffset];
        if ((h2 | 1) == (hash | 1)) {
            const ElfW(Sym) *s = &e->symtab[i];
            if (strcmp(e->strtab + s->st_name, name) == 0 && s->st_shndx != SHN_UNDEF &&
                (e->versym == NULL || !(e->versym[i] & 0x8000))) {
                if (ELF64_ST_TYPE(s->st_info) != STT_FUNC)
                    return FALLBACK; /* an indirect function, an object: dlsym's business */
                return (void *)(e->base + s->st_value);
            }
        }
        if (h2 & 1)
            return NULL;
    }
}

/* The driver and the libraries it names as needed, in dlsym's order (the driver, then its dependencies;
 * theirs are not searched: a name none of these defines is asked of dlsym). */
#define LOOKUP_LIBS 16
struct driver_lookup {
    struct elf_lookup lib[LOOKUP_LIBS];
    int n;
    int complete; /* every needed library has a table here */
};

/*
 * The driver's needed libraries, found as dlopen(name, RTLD_NOLOAD) finds a loaded one (each was a dlopen
 * and a dlclose, about 3k instructions): the first library, in load order, whose file name or DT_SONAME is
 * the name. One pass of dl_iterate_phdr (under the loader's lock) over every loaded library; the driver keeps
 * them loaded. A name not found makes the look-up incomplete (dlsym then answers what the tables do not).
 */
struct needed_search {
    const char *names[LOOKUP_LIBS];
    uintptr_t base[LOOKUP_LIBS];
    const ElfW(Dyn) *dyn[LOOKUP_LIBS];
    int n;
};

static int find_needed(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    struct needed_search *q = arg;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum && dyn == NULL; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (dyn == NULL)
        return 0;
    const char *strtab = NULL, *soname = NULL;
    ElfW(Addr) soname_off = 0;
    int has_soname = 0;
    for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_STRTAB)
            strtab = (const char *)dyn_ptr(info->dlpi_addr, d->d_un.d_ptr);
        else if (d->d_tag == DT_SONAME)
            soname_off = d->d_un.d_val, has_soname = 1;
    }
    if (has_soname && strtab)
        soname = strtab + soname_off;
    int left = 0;
    for (int i = 0; i < q->n; i++) {
        if (q->dyn[i] == NULL && ((info->dlpi_name && strcmp(info->dlpi_name, q->names[i]) == 0) ||
                                  (soname && strcmp(soname, q->names[i]) == 0))) {
            q->base[i] = info->dlpi_addr;
            q->dyn[i] = dyn;
        }
        left += q->dyn[i] == NULL;
    }
    return left == 0; /* all found: stop */
}

static int driver_lookup_init(void *h, struct driver_lookup *d) {
    d->n = 0;
    d->complete = 0;
    struct link_map *lm = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL || !elf_lookup_init(lm->l_addr, lm->l_ld, &d->lib[0]))
        return 0;
    d->n = 1;
    struct needed_search q = {.n = 0};
    int complete = 1;
    for (const ElfW(Dyn) *dy = lm->l_ld; dy->d_tag != DT_NULL; dy++) {
        if (dy->d_tag != DT_NEEDED)
            continue;
        if (q.n < LOOKUP_LIBS - 1)
            q.names[q.n++] = d->lib[0].strtab + dy->d_un.d_val;
        else
            complete = 0;
    }
    if (q.n > 0)
        dl_iterate_phdr(find_needed, &q);
    for (int i = 0; i < q.n; i++) {
        if (q.dyn[i] && elf_lookup_init(q.base[i], q.dyn[i], &d->lib[d->n]))
            d->n++;
        else
            complete = 0;
    }
    d->complete = complete;
    return 1;
}

/* The definition of name dlsym(h, name) would return. */
static void *elf_lookup(const struct driver_lookup *d, void *h, const char *name, uint32_t hash) {
    for (int i = 0; i < d->n; i++) {
        void *p = elf_find(&d->lib[i], name, hash);
        if (p == FALLBACK)
            return rz__real_dlsym(h, name);
        if (p != NULL)
            return p;
    }
    return d->complete ? NULL : rz__real_dlsym(h, name);
}

static pthread_once_t g_load_once = PTHREAD_ONCE_INIT;
static int g_load_status = RZ_ENODRIVER;

static void load(void) {
    /* RTLD_NOLOAD first: a program that already loaded a driver (maybe from a non-default path) keeps it. */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL)
        h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *err = dlerror();
        rz__warn("cannot load the CUDA driver libcuda.so.1 (%s)", err ? err : "unknown error");
        return;
    }
    static struct driver_lookup e; /* once, under pthread_once */
    int fast = driver_lookup_init(h, &e);
#define find(e, h, name) (fast ? elf_lookup(e, h, #name, RZ_GNU_HASH_##name) : rz__real_dlsym(h, #name))
#define RZ_RESOLVE(name, ret, params) rz__drv.name = (rzcu_fn_##name *)find(&e, h, name);
    RZCU_ENTRY_POINTS(RZ_RESOLVE)
    RZCU_IPC_ENTRY_POINTS(RZ_RESOLVE)
#undef RZ_RESOLVE
#define RZ_RESOLVE_VARIANT(variant, base) rz__drv.variant = (rzcu_fn_##base *)find(&e, h, variant);
    RZCU_PER_THREAD_VARIANTS(RZ_RESOLVE_VARIANT)
    RZCU_LEGACY_ENTRY_POINTS(RZ_RESOLVE_VARIANT)
    RZCU_IPC_LEGACY_ENTRY_POINTS(RZ_RESOLVE_VARIANT)
    RZCU_CTX_LEGACY_ENTRY_POINTS(RZ_RESOLVE_VARIANT)
    RZCU_CTX_CREATE_VARIANTS(RZ_RESOLVE_VARIANT)
#undef RZ_RESOLVE_VARIANT
#define RZ_RESOLVE(name, ret, params) rz__drv.name = (rzcu_fn_##name *)find(&e, h, name);
    RZCU_OPTIONAL_ENTRY_POINTS(RZ_RESOLVE)
    RZCU_CTX_CREATE_ENTRY_POINTS(RZ_RESOLVE)
#undef RZ_RESOLVE
#define RZ_RESOLVE_VARIANT(variant, base) rz__drv.variant = (rzcu_fn_##base *)find(&e, h, variant);
    RZCU_OPTIONAL_VARIANTS(RZ_RESOLVE_VARIANT)
#undef RZ_RESOLVE_VARIANT
    rz__drv.cuStreamBeginCapture = (rzcu_fn_cuStreamBeginCapture *)find(&e, h, cuStreamBeginCapture);
    rz__drv.cuStreamBeginCapture_ptsz = (rzcu_fn_cuStreamBeginCapture *)find(&e, h, cuStreamBeginCapture_ptsz);
    rz__drv.cuGetProcAddress = (rzcu_fn_cuGetProcAddress *)find(&e, h, cuGetProcAddress);
#define RZ_RESOLVE_WRITER(exported, base, since, per_thread, params, args)                                   \
    rz__drv.writers.exported = (rzcu_wfn_##exported *)find(&e, h, exported);
    RZCU_DEVICE_WRITERS(RZ_RESOLVE_WRITER)
#undef RZ_RESOLVE_WRITER
#undef find
    if (rz__drv.cuMemAlloc_v2 == NULL || rz__drv.cuMemFree_v2 == NULL || rz__drv.cuCtxGetCurrent == NULL ||
        rz__drv.cuMemsetD8Async == NULL || rz__drv.cuMemcpyDtoHAsync_v2 == NULL || rz__drv.cuStreamCreate == NULL ||
        rz__drv.cuStreamSynchronize == NULL || rz__drv.cuCtxPushCurrent_v2 == NULL || rz__drv.cuCtxPopCurrent_v2 == NULL) {
        rz__warn("libcuda.so.1 lacks entry points redzone needs; red zones are off");
        memset(&rz__drv, 0, sizeof rz__drv);
        return;
    }
    g_load_status = RZ_OK;
    rz__report_error_namer(rz__dev_error_name); /* rz__cu_name asks the driver from now on */
    __atomic_store_n(&RZ_STATE.driver_loaded, 1, __ATOMIC_RELEASE);
}

int rz__dev_load(void) {
    if (RZ_LIKELY(__atomic_load_n(&RZ_STATE.driver_loaded, __ATOMIC_ACQUIRE)))
        return RZ_OK;
    pthread_once(&g_load_once, load);
    return g_load_status;
}

rzcu_result rz__dev_alloc(rz_devptr_t *p, size_t bytes) { return rz__drv.cuMemAlloc_v2(p, bytes); }

rzcu_result rz__dev_free(rz_devptr_t p) { return rz__drv.cuMemFree_v2(p); }

