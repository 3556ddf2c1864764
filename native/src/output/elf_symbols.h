/*
 * Function names from ELF symbol tables (elf_symbols.c).
 */
#ifndef REDZONE_ELF_SYMBOLS_H
#define REDZONE_ELF_SYMBOLS_H

#include "common.h"

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

#endif /* REDZONE_ELF_SYMBOLS_H */
