/*
 * Running a program from a Criterion test the way a user would (tests/test_preload.c, test_reliability.c,
 * test_nothing_lost.c): with an environment of the test's choosing over a clean copy of ours, its stdout
 * and stderr captured together. Include after <criterion/criterion.h>.
 */
#ifndef REDZONE_TESTS_SPAWN_H
#define REDZONE_TESTS_SPAWN_H

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* How often needle occurs in hay (overlaps counted). */
static inline int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/*
 * Runs argv with exactly the environment envp, after in_child (may be NULL; run in the child before the
 * exec, e.g. to become another user: nonzero is exit code 126). Output (stdout and stderr, interleaved as
 * written) goes to out, NUL-terminated, cut at cap - 1 bytes. Returns the exit code, or 128 + the signal
 * that ended it. The program is killed with the test, so one that hangs cannot outlive a test that timed out;
 * nothing here waits on time.
 */
static inline int spawn_envp(char *const *envp, const char *const *argv, int (*in_child)(void), char *out,
                             size_t cap) {
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        if (in_child && in_child() != 0)
            _exit(126);
        execve(argv[0], (char *const *)argv, envp);
        _exit(127);
    }
    close(fds[1]);
    size_t used = 0;
    ssize_t got;
    while ((got = read(fds[0], out + used, cap - 1 - used)) > 0)
        used += (size_t)got;
    out[used] = '\0';
    close(fds[0]);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * Runs argv with `env` (a NULL-terminated "K=V" list, may be NULL) added to a copy of our environment
 * without the variables that would change what is tested (METRALE_REDZONE*, LD_PRELOAD, CUDA_EMU_*,
 * LD_LIBRARY_PATH), as spawn_envp does.
 */
static inline int spawn_capture(const char *const *env, const char *const *argv, char *out, size_t cap) {
    char *envp[64];
    int n = 0;
    for (char **e = environ; *e && n < 40; e++)
        if (strncmp(*e, "METRALE_REDZONE", 15) != 0 && strncmp(*e, "LD_PRELOAD=", 11) != 0 &&
            strncmp(*e, "CUDA_EMU_", 9) != 0 && strncmp(*e, "LD_LIBRARY_PATH=", 16) != 0)
            envp[n++] = *e;
    for (; env && *env; env++) {
        cr_assert_lt(n, 63, "too many environment variables for %s", argv[0]);
        envp[n++] = (char *)*env;
    }
    envp[n] = NULL;
    return spawn_envp(envp, argv, NULL, out, cap);
}

/* The lines of `text` that start with `prefix` (a test program's own lines), in order, into dst (cap bytes). */
static inline void spawn_lines_with_prefix(const char *prefix, const char *text, char *dst, size_t cap) {
    size_t n = 0, np = strlen(prefix);
    dst[0] = '\0';
    for (const char *l = text; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l + 1) : strlen(l);
        if (strncmp(l, prefix, np) == 0 && n + len < cap) {
            memcpy(dst + n, l, len);
            n += len;
            dst[n] = '\0';
        }
        l += len;
    }
}

#endif /* REDZONE_TESTS_SPAWN_H */
