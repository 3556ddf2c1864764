/*
 * The reserved handle tables: a table of fixed-size slots, never reused, so a handle is validated by range
 * and alignment without touching foreign memory (struct emu_table: modules, functions, libraries, kernels,
 * events, graphs; the context and stream tables use emu_table_reserve and emu_make_dumpable directly).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/mman.h>

#include "emu_engine.h"

/* LeakSanitizer does not scan anonymous mappings: declare the handle tables as roots when it is present. */
extern void __lsan_register_root_region(const void *p, size_t size) __attribute__((weak));

/* A reservation of bytes, not dumped to core files until used; NULL when it cannot be made. */
void *emu_table_reserve(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    madvise(p, bytes, MADV_DONTDUMP);
    if (__lsan_register_root_region)
        __lsan_register_root_region(p, bytes);
    return p;
}

/*
 * The handle tables are large reservations that fill from the start: only the part in use is dumped to core
 * files (the rest is MADV_DONTDUMP), so a core of an emulated process stays small.
 */
static pthread_mutex_t dump_mu = PTHREAD_MUTEX_INITIALIZER;

void emu_make_dumpable(void *table, size_t *mark, size_t used_bytes)
{
    const size_t step = (size_t)64 << 10;
    pthread_mutex_lock(&dump_mu);
    if (used_bytes > *mark) {
        size_t next = (used_bytes + step - 1) / step * step;
        madvise((char *)table + *mark, next - *mark, MADV_DODUMP);
        *mark = next;
    }
    pthread_mutex_unlock(&dump_mu);
}

bool emu_table_init(struct emu_table *t)
{
    if (t->base)
        return true;
    void *p = emu_table_reserve(t->max * t->elem);
    if (!p) {
        fprintf(stderr, "cuda-emu: warning: cannot reserve the %s table\n", t->what);
        return false;
    }
    t->base = p;
    return true;
}

void *emu_table_new(struct emu_table *t)
{
    size_t idx = atomic_fetch_add(&t->n, 1);
    if (!t->base || idx >= t->max)
        return NULL;
    const size_t step = (size_t)64 << 10;
    size_t used = (idx + 1) * t->elem;
    pthread_mutex_lock(&t->dump_mu);
    if (used > t->dump_mark) {
        size_t next = (used + step - 1) / step * step;
        madvise(t->base + t->dump_mark, next - t->dump_mark, MADV_DODUMP);
        t->dump_mark = next;
    }
    pthread_mutex_unlock(&t->dump_mu);
    return t->base + idx * t->elem;
}

void *emu_table_slot(struct emu_table *t, const void *h)
{
    uintptr_t p = (uintptr_t)h, base = (uintptr_t)t->base;
    size_t n = atomic_load(&t->n);
    if (n > t->max)
        n = t->max;
    if (!t->base || p < base || p >= base + n * t->elem || (p - base) % t->elem)
        return NULL;
    return (void *)h;
}
