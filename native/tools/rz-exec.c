/*
 * rz-exec: the gdb plugin's exec-wrapper. gdb runs it in place of the program; it adjusts the environment
 * and execs the program, so the library is preloaded into the program only (not into gdb, not into a shell).
 *   rz-exec [--preload LIB] [--nvtx LIB] [--default VAR=VALUE]... [--path-prefix DIR] -- PROGRAM [ARGS...]
 * --nvtx names LIB as the program's NVTX injection library (NVTX_INJECTION64_PATH, as `redzone run` does: pool
 * regions described through NVTX are watched), unless the environment names one already: that one is kept,
 * and one line says so (pool regions then go to that tool, not to redzone).
 * --default sets VAR only when the environment does not have it already: a variable the user set
 * (`set environment` in gdb, or gdb's own environment) wins. --set sets VAR whatever it was: the plugin folds
 * a user's own `env NAME=VALUE` exec-wrapper into it (gdb runs exactly one wrapper exec, so a second wrapper
 * program cannot follow this one). --preload prepends LIB to LD_PRELOAD;
 * --path-prefix prepends DIR to LD_LIBRARY_PATH (the emulated driver).
 * LD_PRELOAD splits on spaces and colons, LD_LIBRARY_PATH on colons: a library under a folder with a space
 * is preloaded by its name, from its folder put first on LD_LIBRARY_PATH (as `redzone run` does); a ':' in
 * either is refused with a sentence (exit 127), since no spelling would reach ld.so intact.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void prepend(const char *var, const char *value) {
    const char *old = getenv(var);
    if (old == NULL || *old == '\0') {
        setenv(var, value, 1);
        return;
    }
    size_t n = strlen(value) + strlen(old) + 2;
    char *both = malloc(n);
    if (both == NULL)
        return;
    snprintf(both, n, "%s:%s", value, old);
    setenv(var, both, 1);
    free(both);
}

/* LIB as an LD_PRELOAD entry: 0, or -1 after saying why it cannot be one. */
static int preload(const char *lib) {
    if (strchr(lib, ':') != NULL) {
        fprintf(stderr, "rz-exec: %s contains ':', which LD_PRELOAD and LD_LIBRARY_PATH cannot hold, so the "
                        "program would run without red zones: install redzone under a path without ':'\n", lib);
        return -1;
    }
    const char *slash = strrchr(lib, '/');
    if (strpbrk(lib, " \t\n") == NULL || slash == NULL) {
        prepend("LD_PRELOAD", lib);
        return 0;
    }
    if (strpbrk(slash + 1, " \t\n") != NULL) {
        fprintf(stderr, "rz-exec: the file name of %s contains a space, which LD_PRELOAD cannot hold, so the "
                        "program would run without red zones: name it libredzone.so\n", lib);
        return -1;
    }
    size_t n = (size_t)(slash - lib);
    char *dir = malloc(n + 1);
    if (dir == NULL)
        return -1;
    memcpy(dir, lib, n);
    dir[n] = '\0';
    prepend("LD_LIBRARY_PATH", n ? dir : "/");
    free(dir);
    prepend("LD_PRELOAD", slash + 1);
    return 0;
}

int main(int argc, char **argv) {
    int i = 1;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "rz-exec: %s needs a value\n", argv[i]);
            return 127;
        }
        const char *value = argv[++i];
        if (strcmp(argv[i - 1], "--preload") == 0) {
            if (preload(value) != 0)
                return 127;
        } else if (strcmp(argv[i - 1], "--path-prefix") == 0) {
            if (strchr(value, ':') != NULL) {
                fprintf(stderr, "rz-exec: %s contains ':', which LD_LIBRARY_PATH cannot hold: install redzone "
                                "under a path without ':'\n", value);
                return 127;
            }
            prepend("LD_LIBRARY_PATH", value);
        } else if (strcmp(argv[i - 1], "--nvtx") == 0) {
            const char *had = getenv("NVTX_INJECTION64_PATH");
            if (had == NULL || *had == '\0')
                setenv("NVTX_INJECTION64_PATH", value, 1);
            else if (strcmp(had, value) != 0)
                fprintf(stderr, "rz-exec: NVTX_INJECTION64_PATH is set already (%s): kept, so pool regions "
                                "described through NVTX go to that tool and redzone does not watch them\n", had);
        } else if (strcmp(argv[i - 1], "--default") == 0 || strcmp(argv[i - 1], "--set") == 0) {
            const char *eq = strchr(value, '=');
            if (eq == NULL || eq == value) {
                fprintf(stderr, "rz-exec: %s wants VAR=VALUE, not %s\n", argv[i - 1], value);
                return 127;
            }
            char name[128];
            size_t len = (size_t)(eq - value) < sizeof name - 1 ? (size_t)(eq - value) : sizeof name - 1;
            memcpy(name, value, len);
            name[len] = '\0';
            setenv(name, eq + 1, strcmp(argv[i - 1], "--set") == 0);
        } else {
            fprintf(stderr, "rz-exec: unknown option %s\n", argv[i - 1]);
            return 127;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "usage: rz-exec [--preload LIB] [--nvtx LIB] [--default VAR=VALUE]... [--set VAR=VALUE]... [--path-prefix DIR] -- PROGRAM [ARGS...]\n");
        return 127;
    }
    execvp(argv[i], argv + i);
    perror("rz-exec");
    return 127;
}
