/*
 * The function containing an address, from an ELF file's own symbol table (.symtab, else .dynsym): shared by
 * the library's symbolizer (symbolize.c) and the debugger's view library (view.c), so an allocation stack
 * reads the same whether the library or gdb prints it. Pure: the caller maps the file.
 *
 * Two ways to the same answer. rz__elf_lookup searches the tables linearly (the view library, which keeps
 * nothing between calls). rz__elf_funcs_fill lays out one table's functions sorted by address, once per
 * object, and rz__elf_funcs_find answers with a binary search (the library's symbolizer caches the sorted
 * table). The rule both follow: among the functions of the first kind of table (.symtab sections, then
 * .dynsym ones) that contain the address, the first in the file's order; a function of size 0 covers one
 * byte.
 */
#include <elf.h>
#include <string.h>

#include "common.h"
#include "elf_symbols.h"

/* Symbol section `i` of kind `want`, validated: its symbols, their count and its string table; 0 if unusable. */
static int sym_section(const unsigned char *img, size_t size, unsigned i, uint32_t want, const Elf64_Sym **sym,
                       size_t *count, const Elf64_Shdr **strs) {
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
    if (sh[i].sh_type != want || sh[i].sh_link >= eh->e_shnum)
        return 0;
    *strs = &sh[sh[i].sh_link];
    if (sh[i].sh_offset > size || sh[i].sh_size > size - sh[i].sh_offset || (*strs)->sh_offset > size ||
        (*strs)->sh_size > size - (*strs)->sh_offset)
        return 0;
    *sym = (const Elf64_Sym *)(img + sh[i].sh_offset);
    *count = sh[i].sh_size / sizeof(Elf64_Sym);
    return 1;
}

static int image_ok(const unsigned char *img, size_t size) {
    if (size < sizeof(Elf64_Ehdr) || memcmp(img, ELFMAG, SELFMAG) != 0 || img[EI_CLASS] != ELFCLASS64)
        return 0;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
    return eh->e_shoff != 0 && eh->e_shoff <= size && (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) <= size - eh->e_shoff;
}

/* A function symbol that names something: the only ones either way looks at. */
static int is_func(const Elf64_Sym *s, const Elf64_Shdr *strs) {
    return ELF64_ST_TYPE(s->st_info) == STT_FUNC && s->st_value != 0 && s->st_name < strs->sh_size;
}

static uint64_t func_end(const Elf64_Sym *s) {
    uint64_t span = s->st_size ? s->st_size : 1;
    return s->st_value + span < s->st_value ? UINT64_MAX : s->st_value + span;
}

/* Find the function containing `rel` in the mapped ELF image; NULL if none. */
const char *rz__elf_lookup(const unsigned char *img, size_t size, uint64_t rel, uint64_t *offset) {
    *offset = 0;
    if (!image_ok(img, size))
        return NULL;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned i = 0; i < eh->e_shnum; i++) {
            const Elf64_Sym *sym;
            const Elf64_Shdr *strs;
            size_t count;
            if (!sym_section(img, size, i, pass == 0 ? SHT_SYMTAB : SHT_DYNSYM, &sym, &count, &strs))
                continue;
            for (size_t k = 0; k < count; k++) {
                if (!is_func(&sym[k], strs) || rel < sym[k].st_value || rel >= func_end(&sym[k]))
                    continue;
                *offset = rel - sym[k].st_value;
                return (const char *)(img + strs->sh_offset + sym[k].st_name);
            }
        }
    }
    return NULL;
}

/* Sorted by start, then by the file's order. */
static int before(const rz_elf_func_t *a, const rz_elf_func_t *b) {
    return a->start < b->start || (a->start == b->start && a->order < b->order);
}

/* Heapsort: no allocation (glibc's qsort may call malloc, and this runs where malloc may not be usable). */
static void sift(rz_elf_func_t *t, size_t root, size_t n) {
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n)
            return;
        if (child + 1 < n && before(&t[child], &t[child + 1]))
            child++;
        if (!before(&t[root], &t[child]))
            return;
        rz_elf_func_t tmp = t[root];
        t[root] = t[child];
        t[child] = tmp;
        root = child;
    }
}

size_t rz__elf_funcs_fill(const unsigned char *img, size_t size, int dynamic, rz_elf_func_t *out, size_t cap) {
    if (!image_ok(img, size) || size > UINT32_MAX)
        return 0; /* names are kept as 32-bit offsets into the image */
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
    size_t n = 0;
    uint32_t order = 0;
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        const Elf64_Sym *sym;
        const Elf64_Shdr *strs;
        size_t count;
        if (!sym_section(img, size, i, dynamic ? SHT_DYNSYM : SHT_SYMTAB, &sym, &count, &strs))
            continue;
        for (size_t k = 0; k < count; k++, order++) {
            if (!is_func(&sym[k], strs))
                continue;
            if (out && n < cap)
                out[n] = (rz_elf_func_t){.start = sym[k].st_value, .end = func_end(&sym[k]),
                                         .name = (uint32_t)(strs->sh_offset + sym[k].st_name), .order = order};
            n++;
        }
    }
    if (out == NULL || n > cap)
        return n; /* a count: the caller makes room */
    for (size_t i = n / 2; i-- > 0;)
        sift(out, i, n);
    for (size_t end = n; end > 1; end--) {
        rz_elf_func_t tmp = out[0];
        out[0] = out[end - 1];
        out[end - 1] = tmp;
        sift(out, 0, end - 1);
    }
    uint64_t reach = 0;
    for (size_t i = 0; i < n; i++) {
        reach = out[i].end > reach ? out[i].end : reach;
        out[i].reach = reach;
    }
    return n;
}

const char *rz__elf_funcs_find(const unsigned char *img, const rz_elf_func_t *t, size_t n, uint64_t rel,
                               uint64_t *offset) {
    /* The last function starting at or before rel; then back while an earlier one may still reach it (its
     * running maximum of ends says when none can), keeping the one first in the file's order. */
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t[mid].start <= rel)
            lo = mid + 1;
        else
            hi = mid;
    }
    const rz_elf_func_t *best = NULL;
    for (size_t i = lo; i-- > 0 && t[i].reach > rel;)
        if (rel < t[i].end && (best == NULL || t[i].order < best->order))
            best = &t[i];
    if (best == NULL)
        return NULL;
    *offset = rel - best->start;
    return (const char *)(img + best->name);
}
