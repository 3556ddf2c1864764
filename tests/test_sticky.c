/*
 * A sticky error (issue 27): tests/programs/rzsticky.c meets one (a kernel fault, or a launch failure the
 * driver reports at a synchronisation) and goes on calling the driver, then exits with its own code or
 * aborts; run without redzone and with it, under every scan policy. What the program gets back from every
 * call and how it ends are the same; redzone says once, in one line, what it could not check, and nothing
 * else (no warning per free, no failed scan line); and it hangs nowhere (each run is bounded by the case's
 * timeout, and a hang fails it).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spawn.h"

#define PRELOAD "LD_PRELOAD=" LIBREDZONE
#define EMU "LD_LIBRARY_PATH=" EMU_DIR
#define STICKY_LINE "ends all CUDA work in this process"

static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* The program's own lines (they start with its name). */
static void program_lines(const char *out, char *mine, size_t cap) {
    size_t n = 0;
    for (const char *line = out; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
        if (strncmp(line, "rzsticky", 8) == 0 && n + len < cap) {
            memcpy(mine + n, line, len);
            n += len;
        }
        line += len;
    }
    mine[n] = '\0';
}

struct sticky_case {
    char what[16];   /* fault | launchfail */
    char how[8];     /* exit | abort */
    char scan[48];   /* METRALE_REDZONE_SCAN, "" for the default (free,exit) */
    char error[40];  /* the error the program sees */
    int lines;       /* lines of redzone's that say it */
    char exit_line[160]; /* the exit line's start, "" when none */
};

#define ILLEGAL "CUDA_ERROR_ILLEGAL_ADDRESS"
#define FAILED "CUDA_ERROR_LAUNCH_FAILED"
#define SAID_ABOVE(e) "redzone: exit: not checked (" e ", above); "
#define SAYS(e) "redzone: exit: " e " " STICKY_LINE ": 3 zones could not be checked; "

static struct sticky_case cases[] = {
    {"fault", "exit", "", ILLEGAL, 1, SAID_ABOVE(ILLEGAL)},
    {"fault", "exit", "free", ILLEGAL, 1, ""},
    {"fault", "exit", "exit", ILLEGAL, 1, SAYS(ILLEGAL)},
    {"fault", "exit", "fatal", ILLEGAL, 0, ""},
    {"fault", "exit", "sync", ILLEGAL, 1, ""},
    {"fault", "exit", "launch", ILLEGAL, 1, ""},
    {"fault", "exit", "free,exit,fatal,sync,launch", ILLEGAL, 1, SAID_ABOVE(ILLEGAL)},
    {"fault", "abort", "", ILLEGAL, 1, ""},
    {"fault", "abort", "fatal", ILLEGAL, 1, ""},
    {"fault", "abort", "free,exit,fatal,sync,launch", ILLEGAL, 1, ""},
    {"launchfail", "exit", "", FAILED, 1, SAID_ABOVE(FAILED)},
    {"launchfail", "exit", "exit", FAILED, 1, SAYS(FAILED)},
    {"launchfail", "exit", "sync", FAILED, 1, ""},
    {"launchfail", "exit", "launch", FAILED, 1, ""},
    {"launchfail", "abort", "fatal", FAILED, 1, ""},
};

ParameterizedTestParameters(sticky, program) {
    return cr_make_param_array(struct sticky_case, cases, sizeof cases / sizeof cases[0]);
}

static char out_without[1 << 16], out_with[1 << 16], mine_without[1 << 16], mine_with[1 << 16];

ParameterizedTest(struct sticky_case *c, sticky, program, .timeout = 60) {
    const char *argv[] = {RZSTICKY, c->what, c->how, NULL};
    const char *without[] = {EMU, "CUDA_EMU_STICKY_FAULTS=1", NULL};
    int status_without = spawn_capture(without, argv, out_without, sizeof out_without);
    char scan[80];
    snprintf(scan, sizeof scan, "METRALE_REDZONE_SCAN=%s", c->scan[0] ? c->scan : "free,exit");
    const char *with[] = {PRELOAD, EMU, "CUDA_EMU_STICKY_FAULTS=1", "METRALE_REDZONE=64", scan, NULL};
    int status_with = spawn_capture(with, argv, out_with, sizeof out_with);
    const char *label = c->scan[0] ? c->scan : "default";

    /* The program: its own code (or its abort), and every call's result, the same with redzone. */
    cr_assert_eq(status_without, strcmp(c->how, "abort") == 0 ? 128 + SIGABRT : 3, "%s", out_without);
    cr_assert_eq(status_with, status_without, "%s %s %s: exit status\nwithout:\n%s\nwith:\n%s", c->what, c->how,
                 label, out_without, out_with);
    program_lines(out_without, mine_without, sizeof mine_without);
    program_lines(out_with, mine_with, sizeof mine_with);
    char first[96];
    snprintf(first, sizeof first, "rzsticky: synchronise the context: %u\n",
             strcmp(c->error, ILLEGAL) == 0 ? 700u : 719u);
    cr_assert(strstr(mine_without, first), "the program meets the error: %s", out_without);
    char named[96];
    snprintf(named, sizeof named, "rzsticky: the error: %s\n", c->error);
    cr_assert(strstr(mine_without, named), "%s", out_without);
    cr_assert_str_eq(mine_with, mine_without, "%s %s %s: what the program got\nwithout:\n%s\nwith:\n%s", c->what,
                     c->how, label, out_without, out_with);

    /* redzone: said once, naming the error, and nothing else said about it. */
    cr_assert_eq(count_of(out_with, STICKY_LINE), c->lines, "%s %s %s: %s", c->what, c->how, label, out_with);
    if (c->lines && !c->exit_line[0]) {
        char line[160];
        snprintf(line, sizeof line, "redzone: warning: %s " STICKY_LINE ": 3 zones could not be checked\n", c->error);
        cr_assert(strstr(out_with, line), "%s %s %s: %s", c->what, c->how, label, out_with);
    }
    if (c->exit_line[0])
        cr_assert(strstr(out_with, c->exit_line), "%s %s %s: %s", c->what, c->how, label, out_with);
    else
        cr_assert(!strstr(out_with, "redzone: exit:"), "%s", out_with);
    cr_assert_eq(count_of(out_with, "redzone: warning"), c->lines && !strstr(c->exit_line, STICKY_LINE), "%s %s %s: %s",
                 c->what, c->how, label, out_with);
    cr_assert(!strstr(out_with, "redzone scan: failed"), "%s", out_with);
    cr_assert(!strstr(out_with, "REDZONE VIOLATION"), "nothing invented: %s", out_with);
}
