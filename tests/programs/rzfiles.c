/*
 * A CUDA driver-API program that handles its own files as daemons and test harnesses do, for
 * tests/test_files.c (issue 27 items 2, 8, 9): run with libredzone.so preloaded (rzfiles) or linked in
 * (rzfiles_linked, the README's pattern for runtimes, which a set-uid program needs: ld.so ignores
 * LD_PRELOAD there). Each mode allocates 100 bytes (the library opens its log with the first allocation),
 * writes one byte past the end as a kernel does (device_store.h) and frees the buffer, which makes redzone
 * report; the program's own data file must hold only the program's bytes.
 *   rzfiles plain                 just that; prints the real and effective user ids first
 *   rzfiles reuse LOG DATA        after the allocation, closes every descriptor above 2 (as a daemon does
 *                                 after setup), opens its first files (/dev/null here) on the numbers
 *                                 below the log's old one, then DATA, which gets the log's old number
 *   rzfiles dup2 LOG DATA         opens DATA and dup2()s it over the log's descriptor (found in
 *                                 /proc/self/fd as the one open on LOG), as a harness arranging its fds does
 *   rzfiles gone LOG DATA         as reuse, and removes LOG and its directory first: the log cannot be
 *                                 opened again
 * The data file gets "rzfiles data 1" before the overrun and "rzfiles data 2" after the free.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_emu.h"
#include "device_store.h"

#define PROG "rzfiles"
#include "prog.h"

/* The descriptor open on path (by /proc/self/fd), or -1. */
static int fd_of(const char *path) {
    char want[PATH_MAX];
    if (realpath(path, want) == NULL)
        return -1;
    DIR *d = opendir("/proc/self/fd");
    int found = -1;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        char link[300], target[PATH_MAX];
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n > 0) {
            target[n] = '\0';
            if (strcmp(target, want) == 0 && atoi(e->d_name) != dirfd(d))
                found = atoi(e->d_name);
        }
    }
    if (d)
        closedir(d);
    return found;
}

static void close_above_stdio(void) {
    int fds[1024], n = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.' && atoi(e->d_name) > 2 && atoi(e->d_name) != dirfd(d) && n < 1024)
            fds[n++] = atoi(e->d_name);
    if (d)
        closedir(d);
    for (int i = 0; i < n; i++)
        close(fds[i]);
}

static void say(int fd, const char *text) {
    if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        exit(101);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "plain";
    if (strcmp(mode, "plain") != 0 && argc < 4) {
        fprintf(stderr, "usage: rzfiles plain | reuse|dup2|gone LOG DATA\n");
        return 2;
    }
    printf("rzfiles: ruid=%ld euid=%ld\n", (long)getuid(), (long)geteuid());
    fflush(stdout);
    setup();
    rzcu_deviceptr p;
    CHECK(cuMemAlloc_v2(&p, 100));
    int data = -1;
    if (strcmp(mode, "reuse") == 0 || strcmp(mode, "gone") == 0) {
        int log = fd_of(argv[2]);
        close_above_stdio();
        if (strcmp(mode, "gone") == 0) {
            char dir[PATH_MAX];
            snprintf(dir, sizeof dir, "%s", argv[2]);
            if (unlink(argv[2]) != 0 || rmdir(dirname(dir)) != 0) {
                perror("rzfiles: removing the log");
                return 3;
            }
        }
        int fd;
        while ((fd = open("/dev/null", O_RDONLY)) >= 0 && fd < log)
            ; /* its own first files */
        if (fd >= 0)
            close(fd); /* the log's old number, free again */
        data = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        printf("rzfiles: the log was descriptor %d; the data file got %d\n", log, data);
    } else if (strcmp(mode, "dup2") == 0) {
        int log = fd_of(argv[2]);
        int mine = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (log < 0 || mine < 0 || dup2(mine, log) != log) {
            perror("rzfiles: dup2");
            return 3;
        }
        close(mine);
        data = log;
        printf("rzfiles: the log was descriptor %d; the data file got %d\n", log, data);
    }
    fflush(stdout);
    if (data >= 0)
        say(data, "rzfiles data 1\n");
    rzcu_result r = device_fill(p + 100, 0x11, 1); /* the kernel's bug: one byte past the end */
    if (r != 0)
        printf("rzfiles: overrun refused by the driver: %u\n", r);
    CHECK(cuMemFree_v2(p));
    if (data >= 0) {
        say(data, "rzfiles data 2\n");
        close(data);
    }
    printf("rzfiles: done\n");
    return 0;
}
