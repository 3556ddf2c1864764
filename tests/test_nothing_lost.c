/*
 * Nothing lost: every example and test program runs twice on the emulated driver, without redzone and with
 * it, under the call-trace shim (libcudatrace.so, CUDA_EMU_TRACE; see docs/emulated-driver.md), and the two
 * traces are compared:
 *   - the program's calls, in order, with their arguments (allocations and pointers by number, data by
 *     checksum) and the result codes the program got back, and the checksum of every allocation's bytes when
 *     it is freed and at exit: identical. Copies and memsets past the end of an allocation included: the
 *     driver refuses them without a band, and redzone refuses them too, where a band would have let them
 *     through (issue 18 item 3; each test says how many such calls its program makes). A program that
 *     writes or reads past the end as a kernel does (tests/programs/device_store.h) stops there without a
 *     band, where the emulated driver refuses the store: its trace without redzone is then a prefix;
 *   - what the program prints, where it does not depend on the bands;
 *   - every device write the library makes on its own (the driver's `dev write` lines whose caller is
 *     libredzone but not its wrapper of the entry point written with) lies inside a band: at or after the
 *     allocation's requested size and before its padded end, or is the quarantine's fill of a whole block the
 *     program freed. At least one such write is checked per run.
 */
#define _GNU_SOURCE /* memmem */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cu.h"
#include "spawn.h"

#define MAXLINES 8192

struct run {
    int status;
    char out[1 << 16];
    char *trace;                 /* the whole trace file */
    const char *calls[MAXLINES]; /* `call` and `end` lines, in order, addresses (@0x...) cut off */
    size_t ncalls;
    const char *devs[MAXLINES]; /* `dev` lines */
    size_t ndevs;
};

static void run(struct run *r, const char *const *env, const char *const *argv) {
    static int serial;
    char trace_path[96], trace_env[128];
    snprintf(trace_path, sizeof trace_path, "/tmp/rz-nothing-lost-%ld-%d.trace", (long)getpid(), serial++);
    unlink(trace_path);
    snprintf(trace_env, sizeof trace_env, "CUDA_EMU_TRACE=%s", trace_path);
    const char *envp[64];
    int n = 0;
    for (; env && *env && n < 62; env++)
        envp[n++] = *env;
    envp[n++] = trace_env;
    envp[n] = NULL;
    r->status = spawn_capture(envp, argv, r->out, sizeof r->out);

    FILE *f = fopen(trace_path, "r");
    cr_assert(f, "no trace written at %s:\n%s", trace_path, r->out);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    r->trace = malloc((size_t)size + 1);
    cr_assert(r->trace);
    cr_assert_eq(fread(r->trace, 1, (size_t)size, f), (size_t)size);
    r->trace[size] = '\0';
    fclose(f);
    unlink(trace_path);
    r->ncalls = r->ndevs = 0;
    for (char *line = r->trace; *line;) {
        char *end = strchr(line, '\n');
        cr_assert(end, "unterminated trace line: %s", line);
        *end = '\0';
        char *at = strstr(line, " @0x");
        if (at) { /* cut the address token out */
            char *rest = at + 4;
            while (*rest && *rest != ' ')
                rest++;
            memmove(at, rest, strlen(rest) + 1);
        }
        if (strncmp(line, "dev ", 4) == 0) {
            cr_assert_lt(r->ndevs, MAXLINES);
            r->devs[r->ndevs++] = line;
        } else {
            cr_assert(strncmp(line, "call ", 5) == 0 || strncmp(line, "end ", 4) == 0, "trace line: %s", line);
            cr_assert_lt(r->ncalls, MAXLINES);
            r->calls[r->ncalls++] = line;
        }
        line = end + 1;
    }
}

/* The value after `key` (e.g. "bytes=") in a line, or -1. */
static long long field(const char *line, const char *key) {
    const char *p = strstr(line, key);
    return p ? strtoll(p + strlen(key), NULL, 10) : -1;
}

/* Allocation k's requested size, as the program asked (from its successful allocation's call line). */
static long long user_size_from_calls(const struct run *r, long long k) {
    char tag[40];
    snprintf(tag, sizeof tag, " a%lld", k);
    for (size_t i = 0; i < r->ncalls; i++) {
        const char *ok = strstr(r->calls[i], " = CUDA_SUCCESS");
        if (strncmp(r->calls[i], "call cuMemAlloc", 15) != 0 || !ok)
            continue;
        const char *t = strstr(ok, tag);
        if (!t || (t[strlen(tag)] != '\0' && t[strlen(tag)] != ' '))
            continue;
        if (strncmp(r->calls[i], "call cuMemAllocPitch_v2", 23) == 0)
            return field(r->calls[i], "pitch=") * field(r->calls[i], "height=");
        return field(r->calls[i], "bytes=");
    }
    return -1;
}

/* Allocation k's size as the driver made it. */
static long long driver_size(const struct run *r, long long k) {
    char tag[40];
    snprintf(tag, sizeof tag, "dev alloc a%lld size=", k);
    for (size_t i = 0; i < r->ndevs; i++)
        if (strncmp(r->devs[i], tag, strlen(tag)) == 0)
            return strtoll(r->devs[i] + strlen(tag), NULL, 10);
    return -1;
}

/* Whether allocation k is redzone's own (its launch checks' band table and result areas, check_changed.c):
 * made by the library for itself (by=libredzone...:?), not a program's allocation forwarded by an entry point. */
static int own_alloc(const struct run *r, long long k) {
    char tag[40];
    snprintf(tag, sizeof tag, "dev alloc a%lld size=", k);
    for (size_t i = 0; i < r->ndevs; i++) {
        const char *line = r->devs[i];
        if (strncmp(line, tag, strlen(tag)) != 0)
            continue;
        const char *by = strstr(line, " by=");
        const char *colon = by ? strchr(by, ':') : NULL;
        /* Made inside the library (a hidden function: no symbol), not by one of its entry points. */
        return colon && memmem(by + 4, (size_t)(colon - by - 4), "libredzone", 10) && strcmp(colon + 1, "?") == 0;
    }
    return 0;
}

/* Allocation k's requested size: from the program's call, else (allocations made through the library's
 * API, which the shim does not see) the driver's size in the run without bands. */
static long long user_size(const struct run *with, const struct run *without, long long k) {
    long long n = user_size_from_calls(with, k);
    return n >= 0 ? n : driver_size(without, k);
}

/* Whether a call accesses memory past the end of its allocation (dst= or src= a<k>+<off> with n=). */
static int past_the_end(const struct run *r, const struct run *without, const char *line) {
    const char *keys[] = {" dst=a", " src=a"};
    long long n = field(line, " n=");
    for (int i = 0; i < 2; i++) {
        const char *p = strstr(line, keys[i]);
        if (!p || n < 0)
            continue;
        char *end;
        long long k = strtoll(p + strlen(keys[i]), &end, 10);
        long long off = *end == '+' ? strtoll(end + 1, NULL, 10) : 0;
        long long user = user_size(r, without, k);
        if (user >= 0 && off + n > user)
            return 1;
    }
    return 0;
}

/* A call past the end that the program got CUDA_ERROR_INVALID_VALUE for. */
static int refused_past_the_end(const struct run *with, const struct run *without, const char *line) {
    const char *r = strstr(line, " = ");
    return r && strcmp(r, " = CUDA_ERROR_INVALID_VALUE") == 0 && past_the_end(with, without, line);
}

/* The program's output without redzone's own lines. */
static void program_lines(const char *out, char *mine, size_t cap) {
    size_t n = 0;
    for (const char *line = out; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
        if (strncmp(line, "redzone", 7) != 0 && strncmp(line, "REDZONE", 7) != 0 && strncmp(line, "  kernels", 9) != 0 &&
            n + len < cap) {
            memcpy(mine + n, line, len);
            n += len;
        }
        line += len;
    }
    mine[n] = '\0';
}

/* Strings in place, not pointers: Criterion's workers may not share the parent's addresses. */
struct program {
    char name[40];
    char argv[5][256];
    char env[2][64];      /* for both runs */
    char env_with[2][64]; /* extra, with redzone */
    int links_redzone;       /* links libredzone itself: "without" is the same program with bands off */
    int refused;             /* copies and memsets past the end, refused with and without redzone */
    int stops;               /* without a band, the program stops at its store or load past the end */
    int same_output;         /* what it prints does not depend on the bands */
};

#define EX(n) EXAMPLES "/" n
static struct program programs[] = {
    {"copy_overrun", {EX("copy_overrun")}, {""}, {""}, 0, 1, 0, 1},
    {"kernel_overrun", {EX("kernel_overrun")}, {""}, {""}, 0, 0, 0, 1},
    {"read_overrun", {EX("read_overrun")}, {""}, {"METRALE_REDZONE_FILL=0"}, 0, 0, 0, 1},
    {"runtime_overrun", {EX("runtime_overrun")}, {""}, {""}, 1, 0, 0, 0},
    {"rzprog_data", {RZPROG, "data"}, {""}, {""}, 0, 1, 0, 1},
    {"rzprog_paths_direct", {RZPROG, "paths", "direct"}, {""}, {""}, 0, 0, 0, 0},
    {"rzprog_paths_dlsym", {RZPROG, "paths", "dlsym"}, {""}, {""}, 0, 0, 0, 0},
    {"rzprog_paths_procaddr", {RZPROG, "paths", "procaddr"}, {""}, {""}, 0, 0, 0, 0},
    {"rzprog_kernels", {RZPROG, "kernels"}, {""}, {""}, 0, 0, 0, 1},
    {"rzprog_nofree", {RZPROG, "nofree"}, {""}, {""}, 0, 0, 0, 0},
    {"rzprog_sync", {RZPROG, "sync"}, {""}, {"METRALE_REDZONE_SCAN=sync,free,exit"}, 0, 0, 0, 0},
    {"rzprog_three", {RZPROG, "three"}, {""}, {""}, 0, 0, 0, 0},
    {"rzprog_multictx", {RZPROG, "multictx"}, {"CUDA_EMU_DEVICES=2"}, {""}, 0, 0, 0, 0},
    {"rzprog_exit", {RZPROG, "exit", "3", "1"}, {""}, {""}, 0, 0, 0, 0},
    {"rzprog_fork", {RZPROG, "fork"}, {""}, {""}, 0, 0, 0, 0},
    /* Its trace's end line reads the bytes where the dead context's allocation was, freed memory the
     * quarantine fills: compared without it. */
    {"rzprog_ctxgone", {RZPROG, "ctxgone"}, {""}, {"METRALE_REDZONE_QUARANTINE=0"}, 0, 0, 0, 1},
    {"rzprog_lazy", {RZPROG, "lazy"}, {""}, {""}, 0, 0, 0, 0}, /* it prints band bytes it reads itself */
    {"rzfault_every", {RZFAULT, "every"}, {""}, {""}, 0, 3, 0, 1},
    {"rzfault_poison", {RZFAULT, "poison"}, {""}, {""}, 0, 0, 0, 1},
    {"rztransp_pastend", {RZTRANSP, "pastend"}, {""}, {""}, 0, 10, 0, 1},
    {"readpast", {READPAST, "4"}, {""}, {""}, 0, 0, 0, 1},
    {"readpast_culprit", {READPAST, "4", "--culprit", "1"}, {""}, {""}, 0, 0, 1, 0},
    {"gdbprog", {GDBPROG, "overrun"}, {""}, {""}, 0, 0, 1, 0},
    /* A sticky error (issue 27): every later call's result the same, under each policy. */
    {"rzsticky_fault", {RZSTICKY, "fault", "exit"}, {"CUDA_EMU_STICKY_FAULTS=1"}, {""}, 0, 0, 0, 1},
    {"rzsticky_fault_every_policy", {RZSTICKY, "fault", "exit"}, {"CUDA_EMU_STICKY_FAULTS=1"},
     {"METRALE_REDZONE_SCAN=free,exit,fatal,sync,launch"}, 0, 0, 0, 1},
    {"rzsticky_launchfail_every_policy", {RZSTICKY, "launchfail", "exit"}, {""},
     {"METRALE_REDZONE_SCAN=free,exit,fatal,sync,launch"}, 0, 0, 0, 1},
};

ParameterizedTestParameters(nothing_lost, program) {
    return cr_make_param_array(struct program, programs, sizeof programs / sizeof programs[0]);
}

static void add_env(const char **env, size_t *n, const char (*more)[64]) {
    for (size_t i = 0; i < 2 && more[i][0]; i++)
        env[(*n)++] = more[i];
}

ParameterizedTest(struct program *p, nothing_lost, program, .timeout = 60) {
    static struct run without, with;
    const char *shim_only = "LD_PRELOAD=" TRACE_SHIM, *shim_and_redzone = "LD_PRELOAD=" TRACE_SHIM " " LIBREDZONE;
    const char *argv[6] = {0};
    for (size_t a = 0; a < 5 && p->argv[a][0]; a++)
        argv[a] = p->argv[a];
    const char *env[16];
    size_t n = 0;
    env[n++] = shim_only;
    env[n++] = "LD_LIBRARY_PATH=" EMU_DIR ":" EMU_DIR "/../native";
    add_env(env, &n, p->env);
    env[n] = NULL;
    run(&without, env, argv);

    n = 0;
    env[n++] = p->links_redzone ? shim_only : shim_and_redzone;
    env[n++] = "LD_LIBRARY_PATH=" EMU_DIR ":" EMU_DIR "/../native";
    env[n++] = "METRALE_REDZONE=64";
    add_env(env, &n, p->env);
    add_env(env, &n, p->env_with);
    env[n] = NULL;
    run(&with, env, argv);

    cr_assert_gt(without.ncalls, 0, "%s: no calls traced:\n%s", p->name, without.out);
    size_t compared = without.ncalls;
    if (p->stops) {
        /* Without a band the program stopped at its store past the end: its calls are a prefix of the run with
         * redzone (the `end` lines after them differ: it left its buffers allocated). */
        cr_assert_neq(without.status, 0, "%s: without a band the store past the end fails\n%s", p->name, without.out);
        cr_assert_eq(with.status, 0, "%s:\n%s", p->name, with.out);
        compared = 0;
        while (compared < without.ncalls && strncmp(without.calls[compared], "call ", 5) == 0)
            compared++;
        cr_assert_lt(compared, with.ncalls, "%s", p->name);
        cr_assert_eq(strncmp(with.calls[compared], "call ", 5), 0, "%s: the run with redzone goes on: %s", p->name,
                     with.calls[compared]);
    } else {
        cr_assert_eq(with.status, without.status, "%s: exit status\nwithout:\n%s\nwith:\n%s", p->name, without.out,
                     with.out);
        cr_assert_eq(with.ncalls, without.ncalls, "%s: one trace is longer (%zu, %zu)", p->name, without.ncalls,
                     with.ncalls);
    }

    /* The program's calls, results and bytes. */
    int refused = 0;
    for (size_t i = 0; i < compared; i++) {
        const char *w = without.calls[i], *o = with.calls[i];
        cr_assert_str_eq(o, w, "%s: call %zu differs\nwithout: %s\n   with: %s", p->name, i, w, o);
        refused += strncmp(w, "call ", 5) == 0 && refused_past_the_end(&with, &without, w);
    }
    cr_assert_eq(refused, p->refused, "%s: %d calls past the end, refused with and without redzone", p->name, refused);
    if (p->same_output) {
        static char mine[1 << 16];
        program_lines(with.out, mine, sizeof mine);
        cr_assert_str_eq(mine, without.out, "%s: what the program prints", p->name);
    }

    /* redzone's own writes: inside bands. */
    int checked = 0;
    for (size_t d = 0; d < with.ndevs; d++) {
        const char *line = with.devs[d];
        if (strncmp(line, "dev write ", 10) != 0)
            continue;
        const char *via = strstr(line, " via="), *by = strstr(line, " by=");
        cr_assert(via && by, "%s", line);
        const char *colon = strchr(by, ':');
        cr_assert(colon, "%s", line);
        size_t vlen = (size_t)(by - via) - 5;
        int from_redzone = memmem(by + 4, (size_t)(colon - by - 4), "libredzone", 10) != NULL;
        int forwarded = strlen(colon + 1) == vlen && strncmp(colon + 1, via + 5, vlen) == 0;
        if (!from_redzone || forwarded)
            continue;
        cr_assert(strncmp(line, "dev write a", 11) == 0, "%s: a write outside every allocation: %s", p->name, line);
        char *end;
        long long k = strtoll(line + 11, &end, 10);
        long long off = strtoll(end + 1, NULL, 10), bytes = field(line, " n=");
        long long user = user_size(&with, &without, k);
        if (user < 0 && own_alloc(&with, k))
            continue; /* redzone's own memory, not the program's */
        long long padded = driver_size(&with, k);
        cr_assert(user >= 0 && padded > user, "%s: allocation a%lld unknown or unpadded (%lld, %lld): %s", p->name, k,
                  user, padded, line);
        /* The quarantine's free fill (issue 32): the whole block of an allocation the program freed. */
        char freed[64], freed_async[64];
        snprintf(freed, sizeof freed, " a%lld+0 sum=", k);
        snprintf(freed_async, sizeof freed_async, " a%lld+0 stream=", k);
        /* A program that links redzone frees through rz_mem_free, which the trace does not show as its call. */
        int fill_of_freed = p->links_redzone && off == 0 && bytes == padded;
        for (size_t c = 0; c < with.ncalls && off == 0 && bytes == padded && !fill_of_freed; c++)
            fill_of_freed = strncmp(with.calls[c], "call cuMemFree", 14) == 0 && strstr(with.calls[c], "CUDA_SUCCESS") &&
                            (strstr(with.calls[c], freed) || strstr(with.calls[c], freed_async));
        cr_assert(fill_of_freed || (off >= user && off + bytes <= padded),
                  "%s: redzone wrote outside the band [%lld, %lld) of a%lld: %s", p->name, user, padded, k, line);
        checked++;
    }
    cr_assert_gt(checked, 0, "%s: no band write seen (the check would be vacuous)\n%s", p->name, with.trace);
    free(without.trace);
    free(with.trace);
}

/* The shim defines every entry point of cu.h (a missing one would go untraced: the program's calls of it
 * would bypass the comparison). */
Test(nothing_lost, the_trace_covers_every_entry_point, .timeout = 30) {
    void *shim = dlopen(TRACE_SHIM, RTLD_NOW | RTLD_LOCAL);
    cr_assert(shim, "%s", dlerror());
    const char *names[] = {
#define NAME(name, ...) #name,
#define VARIANT(variant, base) #variant,
#define WRITER(exported, ...) #exported,
        RZCU_ENTRY_POINTS(NAME) RZCU_PER_THREAD_VARIANTS(VARIANT) RZCU_LEGACY_ENTRY_POINTS(VARIANT)
            RZCU_DEVICE_WRITERS(WRITER)
#undef NAME
#undef VARIANT
#undef WRITER
        "cuGetProcAddress", "cuCtxGetDevice_v2", "cuMemcpyBatchAsync", "cuMemcpyBatchAsync_ptsz"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *p = dlsym(shim, names[i]);
        Dl_info info;
        cr_assert(p && dladdr(p, &info) && strstr(info.dli_fname, "libcudatrace"), "the shim lacks %s", names[i]);
    }
    dlclose(shim);
}

/* The shim itself: what it records is what the program got (the program prints the same checksums and
 * codes it traced). */
Test(nothing_lost, the_trace_records_what_the_program_sees, .timeout = 60) {
    static struct run r;
    const char *env[] = {"LD_PRELOAD=" TRACE_SHIM " " LIBREDZONE, "LD_LIBRARY_PATH=" EMU_DIR, "METRALE_REDZONE=64", NULL};
    const char *argv[] = {RZFAULT, "every", NULL};
    run(&r, env, argv);
    cr_assert_eq(r.status, 0, "%s", r.out);
    const char *pairs[][2] = {
        {"alloc 1000 -> 0\n", "call cuMemAlloc_v2 bytes=1000 = CUDA_SUCCESS a0"},
        {"alloc pitch 100x3 -> 0\n", "call cuMemAllocPitch_v2 width=100 height=3 element=4 = CUDA_SUCCESS pitch=512 a3"},
        {"alloc SIZE_MAX -> 2\n", "call cuMemAlloc_v2 bytes=18446744073709551615 = CUDA_ERROR_OUT_OF_MEMORY"},
        {"free interior -> 1\n", "call cuMemFree_v2 a0+16 = CUDA_ERROR_INVALID_VALUE"},
        {"free small constant -> 1\n", "call cuMemFree_v2 0x10 = CUDA_ERROR_INVALID_VALUE"},
        {"range unknown -> 500\n", "call cuMemGetAddressRange_v2 ptr=0x10 = CUDA_ERROR_NOT_FOUND"},
        {"range interior -> 0\n", "call cuMemGetAddressRange_v2 ptr=a0+10 = CUDA_SUCCESS base=a0+0 size=1000"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        cr_assert(strstr(r.out, pairs[i][0]), "program: %s\n%s", pairs[i][0], r.out);
        int found = 0;
        for (size_t k = 0; k < r.ncalls && !found; k++)
            found = strcmp(r.calls[k], pairs[i][1]) == 0;
        cr_assert(found, "trace lacks: %s\n%s", pairs[i][1], r.trace);
    }
    /* The checksum the program computed over b's bytes is the one traced for that copy. */
    const char *sum = strstr(r.out, "checksum b ");
    cr_assert(sum);
    char want[80];
    snprintf(want, sizeof want, "call cuMemcpyDtoH_v2 src=a1+0 n=4096 = CUDA_SUCCESS dst.sum=0x%.16s", sum + 11);
    int found = 0;
    for (size_t k = 0; k < r.ncalls && !found; k++)
        found = strcmp(r.calls[k], want) == 0;
    cr_assert(found, "trace lacks: %s\n%s", want, r.trace);
    free(r.trace);
}
