/*
 * A small symbolizer for METRALE_REDZONE_TRACE_IDX backtraces. glibc's backtrace_symbols only knows
 * exported symbols, which leaves most frames of an ordinary program (static functions, a hidden main)
 * nameless; here each frame's object file is read from disk and its full ELF symbol table (.symtab, else
 * .dynsym) searched for the function containing the address. No allocation; file names and function names
 * are printed, not lines (that would need DWARF).
 */
#include <dlfcn.h>
#include <execinfo.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rz_internal.h"

/* Find the function containing `rel` in the mapped ELF image; NULL if none. */
static const char *lookup(const unsigned char *img, size_t size, uint64_t rel, uint64_t *offset) {
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

static int first_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    *(uintptr_t *)data = (uintptr_t)info->dlpi_addr;
    return 1; /* the first object is the main program */
}

/* Resolve addr to its object file and, when the symbol table has it, the containing function. */
static int resolve(void *addr, const char **file, char *func, size_t func_size, uint64_t *off) {
    Dl_info info;
    *file = "?";
    func[0] = '\0';
    if (!dladdr(addr, &info) || info.dli_fbase == NULL)
        return 0;
    *file = info.dli_fname && info.dli_fname[0] ? info.dli_fname : "main program";
    /* The main program's name may be relative to a directory the program has left: read /proc/self/exe. */
    char path[RZ_PATH_MAX];
    uintptr_t main_base = 0;
    dl_iterate_phdr(first_object, &main_base);
    int is_main = (uintptr_t)info.dli_fbase == main_base || strchr(*file, '/') == NULL;
    snprintf(path, sizeof path, "%s", is_main ? "/proc/self/exe" : *file);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0) {
        void *img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (img != MAP_FAILED) {
            const Elf64_Ehdr *eh = img;
            uint64_t rel = (uint64_t)(uintptr_t)addr;
            if (eh->e_type == ET_DYN)
                rel -= (uint64_t)(uintptr_t)info.dli_fbase;
            /* Return addresses point after the call: look up the byte before. */
            const char *name = lookup(img, (size_t)st.st_size, rel - 1, off);
            if (name) {
                snprintf(func, func_size, "%s", name);
                *off += 1;
            }
            munmap(img, (size_t)st.st_size);
        }
    }
    if (fd >= 0)
        close(fd);
    return func[0] != '\0';
}

/* The allocation path inside redzone (rz_* functions, and the interposed entry point that called them). */
static int ours(void *addr, const char *func) {
    Dl_info self, info;
    if (strncmp(func, "rz_", 3) == 0 || strncmp(func, "do_alloc", 8) == 0)
        return 1;
    /* Linked as a shared object, every frame in it is ours (its wrappers carry the driver's names). */
    return dladdr((void *)rz__symbolize_frames, &self) && dladdr(addr, &info) && info.dli_fbase == self.dli_fbase &&
           self.dli_fname && strstr(self.dli_fname, "libredzone") != NULL;
}

void rz__symbolize_frames(void *const *frames, int n) {
    int k = 0;
    int skipping = 1;
    for (int i = 0; i < n; i++) {
        const char *file;
        char func[160];
        uint64_t off = 0;
        int named = resolve(frames[i], &file, func, sizeof func, &off);
        if (skipping && i < n - 1 && ours(frames[i], func))
            continue; /* leading frames of redzone's own allocation path */
        skipping = 0;
        if (named)
            rz__log("    #%d %p in %s+0x%llx (%s)", k++, frames[i], func, (unsigned long long)off, file);
        else
            rz__log("    #%d %p (%s)", k++, frames[i], file);
    }
}

/* redzone's own code: [lo, hi) of libredzone's mapping, found once. */
static uintptr_t g_self_lo, g_self_hi;

static int find_self(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    uintptr_t at = (uintptr_t)arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && at >= lo && at < lo + ph->p_memsz) {
            g_self_lo = lo;
            g_self_hi = lo + ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

int rz__capture_stack(void **frames, int max) {
    if (g_self_hi == 0)
        dl_iterate_phdr(find_self, (void *)(uintptr_t)rz__capture_stack);
    void *all[64 + 16];
    int want = max + 16 < (int)(sizeof all / sizeof all[0]) ? max + 16 : (int)(sizeof all / sizeof all[0]);
    int n = backtrace(all, want), i = 0, k = 0;
    while (i < n && (uintptr_t)all[i] >= g_self_lo && (uintptr_t)all[i] < g_self_hi)
        i++; /* redzone's own allocation path */
    while (i < n && k < max)
        frames[k++] = all[i++];
    return k;
}
