/*
 * A driver-API program on a machine whose CUDA driver cannot start, as a user writes it: it asks the
 * driver's version, looks entry points up (cuGetProcAddress_v2, and dlsym on the driver it is linked to), asks
 * the export table of an unknown id (where the driver exports cuGetExportTable: the emulated one does
 * not), calls cuInit and gives up with exit status 2 when it fails. Run bare,
 * under `redzone run` and with libredzone.so preloaded (tests/driver_start.py): stdout and the exit status
 * must be the same every time. Linked against libcuda.so.1 without an rpath: the library path picks the
 * driver (the NVIDIA driver unpacked from Debian's libcuda1, or the emulated one with CUDA_EMU_DEVICES=0).
 *   rzstart                   the above
 *   rzstart --like-runtime V  what the CUDA runtime does with a driver older than it: looks entry points up
 *                             for CUDA version V, compares the driver's version and gives up (exit status 35,
 *                             cudaErrorInsufficientDriver's number) without calling cuInit
 * RZSTART_OWNERS=FILE: each looked-up entry point's object (basename of dladdr) is written there, not to
 * stdout, which stays comparable: libredzone.so's for the names redzone wraps, the driver's for the others.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libgen.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The driver's entry points this program calls, as cuda.h declares them (plain C types). */
int cuInit(unsigned int flags);
int cuDriverGetVersion(int *version);
int cuGetErrorName(int error, const char **name);
int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status);

static const char *name_of(int r) {
    const char *n = NULL;
    return cuGetErrorName(r, &n) == 0 && n ? n : "(no name)";
}

static FILE *g_owners;

/* One lookup: its answer on stdout, its object in RZSTART_OWNERS. */
static void *lookup(const char *symbol, int version) {
    void *p = NULL;
    int status = -1;
    int r = cuGetProcAddress_v2(symbol, &p, version, 0, &status);
    printf("rzstart: cuGetProcAddress_v2(%s, %d): %s, status %d, %s\n", symbol, version, name_of(r), status,
           p ? "an entry point" : "NULL");
    Dl_info info;
    if (g_owners && p && dladdr(p, &info) && info.dli_fname) {
        char path[4096];
        snprintf(path, sizeof path, "%s", info.dli_fname);
        fprintf(g_owners, "%s %s\n", symbol, basename(path));
    }
    return p;
}

int main(int argc, char **argv) {
    const char *owners = getenv("RZSTART_OWNERS");
    g_owners = owners && *owners ? fopen(owners, "w") : NULL;
    /* Which libcuda.so.1 the loader gave this program (the test checks it is the one it meant). */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    struct link_map *map = NULL;
    if (h == NULL || dlinfo(h, RTLD_DI_LINKMAP, &map) != 0 || map == NULL) {
        fprintf(stderr, "rzstart: libcuda.so.1 is not loaded\n");
        return 1;
    }
    char *real = realpath(map->l_name, NULL);
    printf("rzstart: driver %s\n", real ? real : map->l_name);
    free(real);
    /* Every libcuda file mapped into the process: only that one (the emulated driver never found). */
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[4608], last[4096] = "";
    while (maps && fgets(line, sizeof line, maps)) {
        char *path = strchr(line, '/');
        if (path == NULL || strstr(path, "libcuda") == NULL)
            continue;
        path[strcspn(path, "\n")] = '\0';
        if (strcmp(path, last) != 0)
            printf("rzstart: mapped %s\n", path);
        snprintf(last, sizeof last, "%s", path);
    }
    if (maps)
        fclose(maps);

    int version = 0;
    int r = cuDriverGetVersion(&version);
    printf("rzstart: cuDriverGetVersion: %s, %d\n", name_of(r), version);

    if (argc == 3 && strcmp(argv[1], "--like-runtime") == 0) {
        int wanted = atoi(argv[2]);
        lookup("cuInit", wanted);
        lookup("cuMemAlloc", wanted);
        if (version < wanted) {
            printf("rzstart: the driver (%d) is older than CUDA %d: insufficient driver\n", version, wanted);
            return 35;
        }
        return 0;
    }

    /* Wrapped names (redzone hands out its wrappers), then names it does not wrap, then one no driver has. */
    static const char *const wrapped[] = {"cuInit", "cuMemAlloc", "cuMemFree", "cuLaunchKernel", "cuGetProcAddress",
                                          "cuCtxCreate"};
    static const char *const plain[] = {"cuDeviceGetCount", "cuModuleLoadData", "cuGetErrorName", "cuGetExportTable"};
    for (size_t i = 0; i < sizeof wrapped / sizeof wrapped[0]; i++)
        lookup(wrapped[i], 12000);
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        lookup(plain[i], 12000);
    lookup("cuNoSuchEntryPoint", 12000);
    printf("rzstart: dlsym(cuNoSuchEntryPoint): %s\n", dlsym(h, "cuNoSuchEntryPoint") ? "found" : "NULL");

    /* The export table of an id no driver knows, through dlsym and through cuGetProcAddress. */
    static const unsigned char unknown[16] = {0x52, 0x5a, 0x53, 0x54, 0x41, 0x52, 0x54};
    const void *table = &table;
    int (*exported)(const void **, const void *) = (int (*)(const void **, const void *))dlsym(h, "cuGetExportTable");
    if (exported) {
        r = exported(&table, unknown);
        printf("rzstart: cuGetExportTable(unknown id): %s, %s\n", name_of(r),
               table == NULL ? "NULL" : table == (const void *)&table ? "untouched" : "a table");
    } else {
        printf("rzstart: dlsym(cuGetExportTable): NULL\n");
    }
    int (*get)(const void **, const void *) = (int (*)(const void **, const void *))lookup("cuGetExportTable", 3000);
    if (get) {
        table = &table;
        r = get(&table, unknown);
        printf("rzstart: looked-up cuGetExportTable(unknown id): %s, %s\n", name_of(r),
               table == NULL ? "NULL" : table == (const void *)&table ? "untouched" : "a table");
    }

    r = cuInit(0);
    printf("rzstart: cuInit: %s\n", name_of(r));
    if (g_owners)
        fclose(g_owners);
    if (r != 0) {
        fprintf(stderr, "rzstart: the CUDA driver did not start (%s)\n", name_of(r));
        return 2;
    }
    return 0;
}
