/*
 * A small symbolizer for allocation stacks and METRALE_REDZONE_TRACE_IDX backtraces. glibc's
 * backtrace_symbols only knows exported symbols, which leaves most frames of an ordinary program (static
 * functions, a hidden main) nameless; here each frame's object file is read from disk and its full ELF symbol
 * table (.symtab, else .dynsym) searched for the function containing the address. File names and function
 * names are printed, not lines (that would need DWARF).
 *
 * Caches (issue 20.6: a report of 2000 zones opened, mapped and searched an ELF file linearly per frame):
 * each object seen (at most MAX_OBJECTS) keeps its file mapped and its functions in a table sorted by address,
 * made once, searched by bisection; addresses already resolved are kept in a direct-mapped table. Both are
 * dropped when the loader reports an object unloaded (another may take its addresses). One mutex guards
 * them; the agent thread, which serves the fatal-signal scan while the crashing thread may hold anything,
 * waits for it a bounded time and otherwise resolves each frame without the caches, as before.
 *
 * No heap allocation anywhere here (a report may be made while malloc's lock is held by a thread that
 * crashed): the tables and the files are mmap'd, the caches are static.
 */
#include <dlfcn.h>
#include <execinfo.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "symbolize.h"
#include "elf_symbols.h"
#include "fork.h"
#include "format.h"
#include "options.h"
#include "report.h"

#define MAX_OBJECTS 64
#define ADDR_SLOTS 4096 /* a power of two */
#define AGENT_WAIT_MS 1000

struct loaded {
    uintptr_t main_base; /* the first object's load address: the main program */
    unsigned long long adds, subs;
};

static int first_object(struct dl_phdr_info *info, size_t size, void *data) {
    struct loaded *l = data;
    l->main_base = (uintptr_t)info->dlpi_addr;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        l->adds = info->dlpi_adds;
        l->subs = info->dlpi_subs;
    }
    return 1; /* the first object is the main program */
}

/* The file to read for an object: the main program's name may be relative to a directory the program has
 * left, so /proc/self/exe. */
static const char *object_path(const Dl_info *info, uintptr_t main_base, const char **file) {
    *file = info->dli_fname && info->dli_fname[0] ? info->dli_fname : "main program";
    int is_main = (uintptr_t)info->dli_fbase == main_base || strchr(*file, '/') == NULL;
    return is_main ? "/proc/self/exe" : *file;
}

/* Map a whole file read-only; NULL when it cannot be read. */
static const unsigned char *map_file(const char *path, size_t *size) {
    const unsigned char *img = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            img = p;
            *size = (size_t)st.st_size;
        }
    }
    if (fd >= 0)
        close(fd);
    return img;
}

static int image_is_dyn(const unsigned char *img, size_t size) {
    return size >= sizeof(Elf64_Ehdr) && ((const Elf64_Ehdr *)img)->e_type == ET_DYN;
}

/* Without the caches: map the file, search it linearly, unmap (the agent's fallback, and objects beyond
 * MAX_OBJECTS). */
static int resolve_uncached(void *addr, uintptr_t main_base, const char **file, char *func, size_t func_size,
                            uint64_t *off) {
    Dl_info info;
    *file = "?";
    func[0] = '\0';
    if (!dladdr(addr, &info) || info.dli_fbase == NULL)
        return 0;
    const char *path = object_path(&info, main_base, file);
    size_t size = 0;
    const unsigned char *img = map_file(path, &size);
    if (img) {
        uint64_t rel = (uint64_t)(uintptr_t)addr;
        if (image_is_dyn(img, size))
            rel -= (uint64_t)(uintptr_t)info.dli_fbase;
        /* Return addresses point after the call: look up the byte before. */
        const char *name = rz__elf_lookup(img, size, rel - 1, off);
        if (name) {
            snprintf(func, func_size, "%s", name);
            *off += 1;
        }
        munmap((void *)img, size);
    }
    return func[0] != '\0';
}

/* redzone's own code, for telling its frames from the program's: libredzone's load address, found once. */
static pthread_once_t g_self_once = PTHREAD_ONCE_INIT;
static uintptr_t g_self_base;
static int g_self_is_lib;

static void find_libredzone(void) {
    Dl_info self;
    int ok = dladdr((void *)rz__symbolize_frames, &self);
    g_self_base = ok ? (uintptr_t)self.dli_fbase : 0;
    g_self_is_lib = ok && self.dli_fname && strstr(self.dli_fname, "libredzone") != NULL;
}

static int in_libredzone(void *addr) {
    Dl_info info;
    pthread_once(&g_self_once, find_libredzone);
    /* Linked as a shared object, every frame in it is ours (its wrappers carry the driver's names). */
    return g_self_is_lib && dladdr(addr, &info) && (uintptr_t)info.dli_fbase == g_self_base;
}

/* ---- the caches (g_lock) ------------------------------------------------------------------------------- */
struct object {
    uintptr_t base;
    char file[RZ_PATH_MAX]; /* as printed */
    const unsigned char *img;
    size_t img_size;
    int dyn;
    int ours; /* libredzone itself */
    rz_elf_func_t *funcs; /* .symtab's functions, then .dynsym's, each part sorted (mmap'd) */
    size_t nsym, ndyn, funcs_bytes;
};

struct addr_slot {
    uint64_t addr;    /* 0: empty */
    const char *func; /* in the object's mapped image; NULL: no function known */
    uint64_t off;
    int obj;          /* -1: in no object */
    int ours;         /* in libredzone */
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct object g_objects[MAX_OBJECTS];
static int g_nobjects;
static struct addr_slot g_slots[ADDR_SLOTS];
static struct loaded g_loaded;

static void drop_objects(void) {
    for (int i = 0; i < g_nobjects; i++) {
        if (g_objects[i].img)
            munmap((void *)g_objects[i].img, g_objects[i].img_size);
        if (g_objects[i].funcs)
            munmap(g_objects[i].funcs, g_objects[i].funcs_bytes);
    }
    g_nobjects = 0;
}

/* At the start of each use: objects loaded since make unresolved addresses resolvable, objects unloaded make
 * cached ones wrong. */
static void revalidate(void) {
    struct loaded now = {0};
    dl_iterate_phdr(first_object, &now);
    if (now.subs != g_loaded.subs)
        drop_objects();
    if (now.adds != g_loaded.adds || now.subs != g_loaded.subs)
        memset(g_slots, 0, sizeof g_slots);
    g_loaded = now;
}

/* The sorted function tables of an image, in one mapping; funcs NULL when it has none or no memory. */
static void build_tables(struct object *o) {
    size_t nsym = rz__elf_funcs_fill(o->img, o->img_size, 0, NULL, 0);
    size_t ndyn = rz__elf_funcs_fill(o->img, o->img_size, 1, NULL, 0);
    if (nsym + ndyn == 0)
        return;
    size_t bytes = (nsym + ndyn) * sizeof(rz_elf_func_t);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return;
    o->funcs = p;
    o->funcs_bytes = bytes;
    o->nsym = rz__elf_funcs_fill(o->img, o->img_size, 0, o->funcs, nsym);
    o->ndyn = rz__elf_funcs_fill(o->img, o->img_size, 1, o->funcs + nsym, ndyn);
}

/* The cached object loaded at info's base, made on first sight; -1 when the cache is full. */
static int object_for(const Dl_info *info) {
    for (int i = 0; i < g_nobjects; i++)
        if (g_objects[i].base == (uintptr_t)info->dli_fbase)
            return i;
    if (g_nobjects == MAX_OBJECTS)
        return -1;
    struct object *o = &g_objects[g_nobjects];
    memset(o, 0, sizeof *o);
    o->base = (uintptr_t)info->dli_fbase;
    pthread_once(&g_self_once, find_libredzone);
    o->ours = g_self_is_lib && o->base == g_self_base;
    const char *file;
    const char *path = object_path(info, g_loaded.main_base, &file);
    snprintf(o->file, sizeof o->file, "%s", file);
    o->img = map_file(path, &o->img_size);
    if (o->img) {
        o->dyn = image_is_dyn(o->img, o->img_size);
        build_tables(o);
    }
    return g_nobjects++;
}

static struct addr_slot *slot_of(uint64_t addr) {
    uint64_t h = addr * 0x9E3779B97F4A7C15ull;
    return &g_slots[(h >> 40) & (ADDR_SLOTS - 1)];
}

/* Resolve addr through the caches: 1 done (*slot filled), 0 when the object cache is full (resolve uncached). */
static int resolve_cached(void *addr, struct addr_slot *out) {
    uint64_t a = (uint64_t)(uintptr_t)addr;
    struct addr_slot *s = slot_of(a);
    if (s->addr == a && a != 0) {
        *out = *s;
        return 1;
    }
    Dl_info info;
    struct addr_slot r = {.addr = a, .obj = -1};
    if (dladdr(addr, &info) && info.dli_fbase != NULL) {
        r.obj = object_for(&info);
        if (r.obj < 0)
            return 0;
        const struct object *o = &g_objects[r.obj];
        r.ours = o->ours;
        uint64_t rel = a - (o->dyn ? (uint64_t)o->base : 0) - 1; /* return addresses point after the call */
        if (o->funcs) {
            r.func = rz__elf_funcs_find(o->img, o->funcs, o->nsym, rel, &r.off);
            if (r.func == NULL)
                r.func = rz__elf_funcs_find(o->img, o->funcs + o->nsym, o->ndyn, rel, &r.off);
            r.off += 1;
        }
    }
    *s = r;
    *out = r;
    return 1;
}

/* A child forked while another thread symbolized: the lock is the child's own now. Registered at the first
 * stack captured or symbolized outside the agent (a registration may call pthread_atfork, which may allocate:
 * never on the fatal path, where stacks shown were captured before). */
static void after_fork(void) { pthread_mutex_init(&g_lock, NULL); }
static void register_fork_handler(void) { rz__fork_register(NULL, NULL, after_fork); }
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;

static int lock_for_symbols(void) {
    if (!rz__thread.is_agent) {
        pthread_once(&g_fork_once, register_fork_handler);
        pthread_mutex_lock(&g_lock);
        return 1;
    }
    for (int waited = 0; waited < AGENT_WAIT_MS; waited++) {
        if (pthread_mutex_trylock(&g_lock) == 0)
            return 1;
        struct timespec ms = {.tv_nsec = 1000000};
        nanosleep(&ms, NULL);
    }
    return 0;
}

/* Each frame after redzone's own leading ones, resolved, to fn (k counts the frames given). */
typedef void frame_fn(int k, uint64_t addr, const char *func, uint64_t off, const char *file, void *arg);

static void symbolize_each(void *const *frames, int n, frame_fn *fn, void *arg) {
    int cached = lock_for_symbols();
    if (cached)
        revalidate();
    struct loaded fallback = {0};
    if (!cached)
        dl_iterate_phdr(first_object, &fallback);
    int k = 0;
    int skipping = 1;
    for (int i = 0; i < n; i++) {
        const char *file = "?";
        char func[160];
        uint64_t off = 0;
        struct addr_slot s;
        int named, in_self;
        if (cached && resolve_cached(frames[i], &s)) {
            file = s.obj >= 0 ? g_objects[s.obj].file : "?";
            named = s.func != NULL;
            snprintf(func, sizeof func, "%s", named ? s.func : "");
            off = s.off;
            in_self = s.ours;
        } else {
            named = resolve_uncached(frames[i], cached ? g_loaded.main_base : fallback.main_base, &file, func,
                                     sizeof func, &off);
            in_self = skipping && in_libredzone(frames[i]);
        }
        if (skipping && i < n - 1 && rz__frame_is_ours(func, in_self))
            continue; /* leading frames of redzone's own allocation path */
        skipping = 0;
        fn(k++, (uint64_t)(uintptr_t)frames[i], named ? func : NULL, off, file, arg);
    }
    if (cached)
        pthread_mutex_unlock(&g_lock);
}

static void log_frame(int k, uint64_t addr, const char *func, uint64_t off, const char *file, void *arg) {
    (void)arg;
    char line[RZ_PATH_MAX + 256];
    rz__format_frame(k, addr, func, off, file, line, sizeof line);
    rz__log("%s", line);
}

void rz__symbolize_frames(void *const *frames, int n) { symbolize_each(frames, n, log_frame, NULL); }

struct to_list {
    rz_frame_sym_t *out;
    int max, n;
};

static void list_frame(int k, uint64_t addr, const char *func, uint64_t off, const char *file, void *arg) {
    (void)k;
    struct to_list *l = arg;
    if (l->n == l->max)
        return;
    rz_frame_sym_t *f = &l->out[l->n++];
    f->addr = addr;
    f->off = off;
    f->named = func != NULL;
    snprintf(f->func, sizeof f->func, "%s", func ? func : "");
    snprintf(f->file, sizeof f->file, "%s", file);
}

int rz__symbolize_to(void *const *frames, int n, rz_frame_sym_t *out, int max) {
    struct to_list l = {.out = out, .max = max};
    symbolize_each(frames, n, list_frame, &l);
    return l.n;
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

static pthread_once_t g_own_code_once = PTHREAD_ONCE_INIT;

static void find_self_once(void) { dl_iterate_phdr(find_self, (void *)(uintptr_t)rz__capture_stack); }

/* Found once, by whichever thread asks first (launches and allocations on many threads ask at once). */
int rz__in_redzone(uintptr_t addr) {
    pthread_once(&g_own_code_once, find_self_once);
    return addr >= g_self_lo && addr < g_self_hi;
}

int rz__capture_stack(void **frames, int max) {
    pthread_once(&g_fork_once, register_fork_handler);
    pthread_once(&g_own_code_once, find_self_once);
    void *all[64 + 16];
    int want = max + 16 < (int)(sizeof all / sizeof all[0]) ? max + 16 : (int)(sizeof all / sizeof all[0]);
    int n = backtrace(all, want), i = 0, k = 0;
    /* Past redzone's own frames: the last of the leading run that holds them (a sanitizer's interceptor of
     * backtrace, when there is one, comes before them). */
    for (int j = 0, seen = 0; j < n; j++) {
        int self = (uintptr_t)all[j] >= g_self_lo && (uintptr_t)all[j] < g_self_hi;
        if (self) {
            i = j + 1;
            seen = 1;
        } else if (seen) {
            break;
        }
    }
    while (i < n && k < max)
        frames[k++] = all[i++];
    return k;
}
