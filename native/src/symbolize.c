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
            const char *name = rz__elf_lookup(img, (size_t)st.st_size, rel - 1, off);
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
    /* Linked as a shared object, every frame in it is ours (its wrappers carry the driver's names). */
    int in_self = dladdr((void *)rz__symbolize_frames, &self) && dladdr(addr, &info) &&
                  info.dli_fbase == self.dli_fbase && self.dli_fname && strstr(self.dli_fname, "libredzone") != NULL;
    return rz__frame_is_ours(func, in_self);
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
        char line[RZ_PATH_MAX + 256];
        rz__format_frame(k++, (uint64_t)(uintptr_t)frames[i], named ? func : NULL, off, file, line, sizeof line);
        rz__log("%s", line);
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

int rz__in_redzone(uintptr_t addr) {
    if (g_self_hi == 0)
        dl_iterate_phdr(find_self, (void *)(uintptr_t)rz__capture_stack);
    return addr >= g_self_lo && addr < g_self_hi;
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
