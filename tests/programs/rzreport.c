/*
 * A CUDA driver-API program with faults to report, run by tests/report/test_report.py with libredzone.so
 * preloaded on the emulated driver (docs/report-format.md, issue 31). It knows nothing of redzone.
 *   rzreport faults    alloc#0 (100 bytes) overrun by 4 bytes by kernel `write_past`, alloc#1 (200 bytes)
 *                      overrun by 2 bytes by kernel `scribble`, both made by make_buffer(); then a copy of 8
 *                      bytes to alloc#0 + 96 (4 bytes past its end: refused by redzone); then both freed
 *   rzreport fork      alloc#0 overrun by `write_past` and freed; alloc#1 overrun by `scribble`; a forked child
 *                      exits at once (exit, so its exit handlers run); the parent waits, then frees alloc#1
 *   rzreport reuse     alloc#0 overrun and freed; then every descriptor from 3 up is closed and data.txt opened
 *                      for appending (it gets the lowest number, the one redzone's files had) and written; alloc#1
 *                      overrun and freed; data.txt written again and closed
 * Prints "rzreport: <mode> done" and exits 0 (a failed driver call: 100).
 */
#define _GNU_SOURCE /* O_CLOEXEC */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_emu.h"

#define PROG "rzreport"
#include "prog.h"

CUDA_EMU_KERNEL(write_past, sizeof(rzcu_deviceptr), sizeof(unsigned long long), sizeof(unsigned long long)) {
    unsigned char *buf = (unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    unsigned long long from = CUDA_EMU_PARAM(unsigned long long, 1), to = CUDA_EMU_PARAM(unsigned long long, 2);
    for (unsigned long long i = from; i < to; i++)
        buf[i] = 0xab;
}

CUDA_EMU_KERNEL(scribble, sizeof(rzcu_deviceptr), sizeof(unsigned long long), sizeof(unsigned long long)) {
    unsigned char *buf = (unsigned char *)(uintptr_t)CUDA_EMU_PARAM(rzcu_deviceptr, 0);
    unsigned long long from = CUDA_EMU_PARAM(unsigned long long, 1), to = CUDA_EMU_PARAM(unsigned long long, 2);
    for (unsigned long long i = from; i < to; i++)
        buf[i] = 0xcd;
}

static rzcu_module g_mod;

static void launch(const char *name, rzcu_deviceptr buf, unsigned long long from, unsigned long long to) {
    rzcu_function f;
    if (g_mod == NULL)
        CHECK(cuModuleLoadData(&g_mod, "emulated module"));
    CHECK(cuModuleGetFunction(&f, g_mod, name));
    void *params[] = {&buf, &from, &to};
    CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    CHECK(cuCtxSynchronize());
}

__attribute__((noinline)) static rzcu_deviceptr make_buffer(size_t n) {
    rzcu_deviceptr p;
    CHECK(cuMemAlloc_v2(&p, n));
    return p;
}

static void faults(void) {
    rzcu_deviceptr a = make_buffer(100), b = make_buffer(200);
    launch("write_past", a, 96, 104);
    launch("scribble", b, 0, 202);
    char host[8];
    memset(host, 1, sizeof host);
    rzcu_result r = cuMemcpyHtoD_v2(a + 96, host, sizeof host);
    printf("rzreport: copy past the end returned %d\n", (int)r);
    CHECK(cuMemFree_v2(a));
    CHECK(cuMemFree_v2(b));
}

static void forked(void) {
    rzcu_deviceptr x = make_buffer(100);
    launch("write_past", x, 96, 104);
    CHECK(cuMemFree_v2(x));
    rzcu_deviceptr a = make_buffer(200);
    launch("scribble", a, 0, 202);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        exit(0); /* a child that never touches the device (a real driver's contexts do not survive a fork) */
    int status = 0;
    waitpid(pid, &status, 0);
    printf("rzreport: child exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    CHECK(cuMemFree_v2(a));
}

static void reuse(void) {
    rzcu_deviceptr x = make_buffer(100);
    launch("write_past", x, 96, 104);
    CHECK(cuMemFree_v2(x));
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    int data = open("data.txt", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (data < 0 || write(data, "program data\n", 13) != 13)
        exit(101);
    rzcu_deviceptr a = make_buffer(200);
    launch("scribble", a, 0, 202);
    CHECK(cuMemFree_v2(a));
    if (write(data, "more data\n", 10) != 10)
        exit(101);
    close(data);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    setup();
    if (strcmp(mode, "faults") == 0)
        faults();
    else if (strcmp(mode, "fork") == 0)
        forked();
    else if (strcmp(mode, "reuse") == 0)
        reuse();
    else {
        fprintf(stderr, "usage: rzreport faults|fork|reuse\n");
        return 2;
    }
    printf("rzreport: %s done\n", mode);
    return 0;
}
