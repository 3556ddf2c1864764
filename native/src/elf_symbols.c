/*
 * The function containing an address, from an ELF file's own symbol table (.symtab, else .dynsym): shared by
 * the library's symbolizer (symbolize.c) and the debugger's view library (view.c), so an allocation stack
 * reads the same whether the library or gdb prints it. Pure: the caller maps the file.
 */
#include <elf.h>
#include <string.h>

#include "rz_internal.h"

/* Find the function containing `rel` in the mapped ELF image; NULL if none. */
const char *rz__elf_lookup(const unsigned char *img, size_t size, uint64_t rel, uint64_t *offset) {
    if (size < sizeof(Elf64_Ehdr) || memcmp(img, ELFMAG, SELFMAG) != 0 || img[EI_CLASS] != ELFCLASS64)
        return NULL;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
    if (eh->e_shoff == 0 || eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > size)
        return NULL;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
    const char *best = NULL;
    uint64_t best_off = 0;
    for (int pass = 0; pass < 2 && best == NULL; pass++) {
        uint32_t want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;
        for (unsigned i = 0; i < eh->e_shnum; i++) {
            if (sh[i].sh_type != want || sh[i].sh_link >= eh->e_shnum)
                continue;
            const Elf64_Shdr *strs = &sh[sh[i].sh_link];
            if (sh[i].sh_offset + sh[i].sh_size > size || strs->sh_offset + strs->sh_size > size)
                continue;
            const Elf64_Sym *sym = (const Elf64_Sym *)(img + sh[i].sh_offset);
            size_t count = sh[i].sh_size / sizeof(Elf64_Sym);
            for (size_t k = 0; k < count; k++) {
                if (ELF64_ST_TYPE(sym[k].st_info) != STT_FUNC || sym[k].st_value == 0)
                    continue;
                if (rel < sym[k].st_value || rel - sym[k].st_value >= (sym[k].st_size ? sym[k].st_size : 1))
                    continue;
                if (sym[k].st_name >= strs->sh_size)
                    continue;
                best = (const char *)(img + strs->sh_offset + sym[k].st_name);
                best_off = rel - sym[k].st_value;
                break;
            }
        }
    }
    *offset = best_off;
    return best;
}

