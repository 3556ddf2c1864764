/*
 * A CUDA driver-API program that reads one byte past the end of chosen allocations (size + 1 bytes back to the
 * host, as a kernel's loads: device_store.h), for the `redzone bisect` tests. It knows nothing of redzone: what it prints depends on
 * the bytes after those allocations, which is what bisect narrows down.
 *
 *   readpast N [options]    make N allocations of --size bytes (creation indices 0..N-1), read past some
 *     --culprit I           read one byte past allocation #I (repeatable; none: no read past the end)
 *     --size B              bytes per allocation (default 100)
 *     --noise FILE          also print token=<k>, k counted up in FILE on every run (output that varies)
 *     --unstable FILE       first make k extra allocations, k counted up in FILE (indices that vary)
 *     --crash               abort() when a byte read past the end is not 0
 *     --hang PIDFILE        when a byte read past the end is not 0: fork, write "<pid> <child pid>" to
 *                           PIDFILE, and wait forever in both processes
 *     --out PATH            write the result to PATH (stdout gets a constant line)
 *     --exit                exit with the result modulo 256 (stdout gets a constant line)
 *     --stderr              print the result on stderr instead of stdout
 *     --setsid              with --hang: the child starts its own session first (escapes the process group)
 *     --underscore-exit     end with _exit(0) after printing: no exit handlers, so no redzone summary line
 *     --exec PROG [ARGS...] after printing, replace this process with PROG (the rest of the arguments)
 * The result is the sum of every byte copied back: N * size for the copies within bounds, plus the bytes
 * read past the end.
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_emu.h"
#include "device_store.h"

#define CHECK(call)                                                                                          \
    do {                                                                                                     \
        rzcu_result rc_ = (call);                                                                            \
        if (rc_ != 0) {                                                                                      \
            fprintf(stderr, "readpast:%d: %s failed: %u\n", __LINE__, #call, rc_);                           \
            exit(100);                                                                                       \
        }                                                                                                    \
    } while (0)

/* The number kept in `path`, plus one, written back: differs on every run. */
static unsigned long bump(const char *path) {
    unsigned long k = 0;
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%lu", &k) != 1)
            k = 0;
        fclose(f);
    }
    k++;
    f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(101);
    }
    fprintf(f, "%lu\n", k);
    fclose(f);
    return k;
}

static void usage(void) {
    fprintf(stderr, "usage: readpast N [--culprit I]... [--size B] [--noise FILE] [--unstable FILE] [--crash] "
                    "[--hang PIDFILE [--setsid]] [--out PATH] [--exit] [--stderr] [--underscore-exit] [--exec PROG ARGS...]\n");
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 2)
        usage();
    size_t n = strtoul(argv[1], NULL, 10), size = 100;
    char *culprit = calloc(n ? n : 1, 1);
    const char *noise = NULL, *unstable = NULL, *hang = NULL, *out = NULL;
    int crash = 0, as_exit = 0, to_stderr = 0, new_session = 0, underscore_exit = 0;
    char **exec_argv = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--exec") == 0 && v != NULL) {
            exec_argv = argv + i + 1;
            break;
        } else if (strcmp(a, "--setsid") == 0)
            new_session = 1;
        else if (strcmp(a, "--underscore-exit") == 0)
            underscore_exit = 1;
        else if (strcmp(a, "--crash") == 0)
            crash = 1;
        else if (strcmp(a, "--exit") == 0)
            as_exit = 1;
        else if (strcmp(a, "--stderr") == 0)
            to_stderr = 1;
        else if (v == NULL)
            usage();
        else {
            i++;
            if (strcmp(a, "--culprit") == 0) {
                size_t c = strtoul(v, NULL, 10);
                if (c >= n)
                    usage();
                culprit[c] = 1;
            } else if (strcmp(a, "--size") == 0)
                size = strtoul(v, NULL, 10);
            else if (strcmp(a, "--noise") == 0)
                noise = v;
            else if (strcmp(a, "--unstable") == 0)
                unstable = v;
            else if (strcmp(a, "--hang") == 0)
                hang = v;
            else if (strcmp(a, "--out") == 0)
                out = v;
            else
                usage();
        }
    }

    rzcu_context ctx;
    CHECK(cuInit(0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK(cuCtxSetCurrent(ctx));
    if (unstable) {
        unsigned long extra = bump(unstable);
        for (unsigned long i = 0; i < extra; i++) {
            rzcu_deviceptr p;
            CHECK(cuMemAlloc_v2(&p, 16));
            CHECK(cuMemFree_v2(p));
        }
    }
    rzcu_deviceptr *bufs = calloc(n ? n : 1, sizeof *bufs);
    unsigned char *host = malloc(size + 1);
    memset(host, 1, size + 1);
    for (size_t i = 0; i < n; i++) {
        CHECK(cuMemAlloc_v2(&bufs[i], size));
        CHECK(cuMemcpyHtoD_v2(bufs[i], host, size));
    }
    unsigned long long result = 0, past = 0;
    for (size_t i = 0; i < n; i++) {
        size_t copy = size + (culprit[i] ? 1 : 0); /* the bug: one element too many */
        if (culprit[i])
            CHECK(device_load(host, bufs[i], copy));
        else
            CHECK(cuMemcpyDtoH_v2(host, bufs[i], copy));
        for (size_t j = 0; j < copy; j++)
            result += host[j];
        if (culprit[i])
            past += host[size];
    }
    if (crash && past != 0)
        abort();
    if (hang && past != 0) {
        pid_t child = fork();
        if (child == 0) {
            if (new_session)
                setsid();
            for (;;)
                pause();
        }
        FILE *f = fopen(hang, "w");
        if (f) {
            fprintf(f, "%ld %ld\n", (long)getpid(), (long)child);
            fclose(f);
        }
        for (;;)
            pause();
    }
    for (size_t i = 0; i < n; i++)
        CHECK(cuMemFree_v2(bufs[i]));
    if (noise)
        printf("token=%lu\n", bump(noise));
    if (out) {
        FILE *f = fopen(out, "w");
        if (!f) {
            perror(out);
            return 101;
        }
        fprintf(f, "readpast: result = %llu\n", result);
        fclose(f);
        printf("readpast: wrote %s\n", out);
    } else if (as_exit) {
        printf("readpast: done\n");
    } else {
        fprintf(to_stderr ? stderr : stdout, "readpast: result = %llu\n", result);
    }
    fflush(NULL);
    if (exec_argv) {
        execv(exec_argv[0], exec_argv);
        perror(exec_argv[0]);
        return 127;
    }
    if (underscore_exit)
        _exit(0);
    free(bufs);
    free(host);
    free(culprit);
    return as_exit ? (int)(result % 256) : 0;
}
