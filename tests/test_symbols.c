/* The symbolizer's sorted function tables (elf_symbols.c, issue 20.6) give the same answer as the linear
 * search the gdb plugin's view library keeps: on a made-up image with overlapping, nested, aliased and
 * zero-sized functions and a .dynsym fallback, every address; on real files (this program, libc), around
 * every function. */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "rz_test.h"

/* The table answer: .symtab's table, then .dynsym's. */
static const char *table_lookup(const unsigned char *img, const rz_elf_func_t *sym, size_t nsym,
                                const rz_elf_func_t *dyn, size_t ndyn, uint64_t rel, uint64_t *off) {
    const char *name = rz__elf_funcs_find(img, sym, nsym, rel, off);
    return name ? name : rz__elf_funcs_find(img, dyn, ndyn, rel, off);
}

/* Compare both ways at rel; returns 1 when a function was found. */
static int same_answer(const unsigned char *img, size_t size, const rz_elf_func_t *sym, size_t nsym,
                       const rz_elf_func_t *dyn, size_t ndyn, uint64_t rel) {
    uint64_t off_linear = 0, off_table = 0;
    const char *linear = rz__elf_lookup(img, size, rel, &off_linear);
    const char *table = table_lookup(img, sym, nsym, dyn, ndyn, rel, &off_table);
    cr_assert_eq(linear, table, "at %#llx: linear %s, table %s", (unsigned long long)rel, linear ? linear : "none",
                 table ? table : "none");
    if (linear)
        cr_assert_eq(off_linear, off_table, "offset at %#llx", (unsigned long long)rel);
    return linear != NULL;
}

static size_t tables(const unsigned char *img, size_t size, rz_elf_func_t **sym, size_t *nsym, rz_elf_func_t **dyn,
                     size_t *ndyn) {
    *nsym = rz__elf_funcs_fill(img, size, 0, NULL, 0);
    *ndyn = rz__elf_funcs_fill(img, size, 1, NULL, 0);
    *sym = calloc(*nsym + 1, sizeof **sym);
    *dyn = calloc(*ndyn + 1, sizeof **dyn);
    cr_assert_eq(rz__elf_funcs_fill(img, size, 0, *sym, *nsym), *nsym);
    cr_assert_eq(rz__elf_funcs_fill(img, size, 1, *dyn, *ndyn), *ndyn);
    for (size_t i = 1; i < *nsym; i++)
        cr_assert((*sym)[i - 1].start <= (*sym)[i].start, "sorted");
    return *nsym + *ndyn;
}

Test(symbols, made_up_image_every_address) {
    static const char strs[] = "\0inner\0outer\0zero\0alias\0late\0dynonly\0shadowed\0data";
    enum { STR = 64, SYM = 256, DYN = 512, SH = 768, SIZE = 1024 };
    static unsigned char img[SIZE];
    memset(img, 0, sizeof img);
    Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
    memcpy(eh->e_ident, ELFMAG, SELFMAG);
    eh->e_ident[EI_CLASS] = ELFCLASS64;
    eh->e_type = ET_DYN;
    eh->e_shoff = SH;
    eh->e_shentsize = sizeof(Elf64_Shdr);
    eh->e_shnum = 4;
    memcpy(img + STR, strs, sizeof strs);
    /* File order matters: among functions containing an address, the first listed wins. */
    const Elf64_Sym syms[] = {
        {0},
        {.st_name = 1, .st_info = ELF64_ST_INFO(STB_LOCAL, STT_FUNC), .st_value = 0x1100, .st_size = 0x100},   /* inner */
        {.st_name = 7, .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), .st_value = 0x1000, .st_size = 0x2000},  /* outer */
        {.st_name = 13, .st_info = ELF64_ST_INFO(STB_LOCAL, STT_FUNC), .st_value = 0x2500, .st_size = 0},       /* zero */
        {.st_name = 18, .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), .st_value = 0x1100, .st_size = 0x100},  /* alias */
        {.st_name = 24, .st_info = ELF64_ST_INFO(STB_LOCAL, STT_FUNC), .st_value = 0x2f00, .st_size = 0x400},   /* late */
        {.st_name = 50, .st_info = ELF64_ST_INFO(STB_LOCAL, STT_OBJECT), .st_value = 0x3400, .st_size = 0x100}, /* data */
        {.st_name = 24, .st_info = ELF64_ST_INFO(STB_LOCAL, STT_FUNC), .st_value = 0, .st_size = 0x100},        /* at 0 */
    };
    const Elf64_Sym dsyms[] = {
        {0},
        {.st_name = 29, .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), .st_value = 0x4000, .st_size = 0x10},  /* dynonly */
        {.st_name = 37, .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), .st_value = 0x1100, .st_size = 0x10},  /* shadowed */
    };
    memcpy(img + SYM, syms, sizeof syms);
    memcpy(img + DYN, dsyms, sizeof dsyms);
    Elf64_Shdr *sh = (Elf64_Shdr *)(img + SH);
    sh[1] = (Elf64_Shdr){.sh_type = SHT_SYMTAB, .sh_offset = SYM, .sh_size = sizeof syms, .sh_link = 3};
    sh[2] = (Elf64_Shdr){.sh_type = SHT_DYNSYM, .sh_offset = DYN, .sh_size = sizeof dsyms, .sh_link = 3};
    sh[3] = (Elf64_Shdr){.sh_type = SHT_STRTAB, .sh_offset = STR, .sh_size = sizeof strs};
    rz_elf_func_t *sym, *dyn;
    size_t nsym, ndyn;
    cr_assert_eq(tables(img, SIZE, &sym, &nsym, &dyn, &ndyn), 7, "functions, named, not at 0");
    int found = 0;
    for (uint64_t rel = 0xf00; rel < 0x4100; rel++)
        found += same_answer(img, SIZE, sym, nsym, dyn, ndyn, rel);
    cr_assert_gt(found, 0x2000);
    uint64_t off;
    cr_assert_str_eq(table_lookup(img, sym, nsym, dyn, ndyn, 0x1150, &off), "inner", "the first listed wins");
    cr_assert_eq(off, 0x50);
    cr_assert_str_eq(table_lookup(img, sym, nsym, dyn, ndyn, 0x1250, &off), "outer", "nested: the outer one");
    cr_assert_str_eq(table_lookup(img, sym, nsym, dyn, ndyn, 0x2500, &off), "outer", "outer is listed first");
    cr_assert_str_eq(table_lookup(img, sym, nsym, dyn, ndyn, 0x3200, &off), "late", "past outer's end");
    cr_assert_str_eq(table_lookup(img, sym, nsym, dyn, ndyn, 0x4008, &off), "dynonly", ".dynsym when .symtab has none");
    cr_assert_null(table_lookup(img, sym, nsym, dyn, ndyn, 0x3400, &off), "not a function");
    free(sym);
    free(dyn);
}

/* A real file: around every function's start and end, and in its middle. */
static void real_file(const char *path) {
    int fd = open(path, O_RDONLY);
    cr_assert_geq(fd, 0, "%s", path);
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    const unsigned char *img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    cr_assert_neq(img, MAP_FAILED);
    close(fd);
    rz_elf_func_t *sym, *dyn;
    size_t nsym, ndyn;
    size_t n = tables(img, (size_t)st.st_size, &sym, &nsym, &dyn, &ndyn);
    cr_assert_gt(n, 10, "%s has functions", path);
    int found = 0;
    for (int part = 0; part < 2; part++) {
        const rz_elf_func_t *t = part ? dyn : sym;
        for (size_t i = 0; i < (part ? ndyn : nsym); i++) {
            uint64_t probe[] = {t[i].start - 1, t[i].start, t[i].start + (t[i].end - t[i].start) / 2, t[i].end - 1,
                                t[i].end};
            for (size_t k = 0; k < sizeof probe / sizeof probe[0]; k++)
                found += same_answer(img, (size_t)st.st_size, sym, nsym, dyn, ndyn, probe[k]);
        }
    }
    cr_assert_gt(found, (int)n, "%s: %d addresses named", path, found);
    free(sym);
    free(dyn);
    munmap((void *)img, (size_t)st.st_size);
}

Test(symbols, this_program_and_libc_around_every_function, .timeout = 120) {
    real_file("/proc/self/exe");
    Dl_info info;
    cr_assert(dladdr((void *)printf, &info) && info.dli_fname);
    real_file(info.dli_fname);
}
