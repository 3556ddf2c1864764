/*
 * The process's options (options.c, from the one table options.inc).
 */
#ifndef REDZONE_OPTIONS_H
#define REDZONE_OPTIONS_H

#include "common.h"

#define RZ_PAD_MAX ((uint64_t)64 << 20)

#define RZ_FILL_DEFAULT 0xEE

#define RZ_FREE_FILL_DEFAULT 0xDD

#define RZ_QUARANTINE_DEFAULT ((uint64_t)64 << 20)

#define RZ_POISON_IN 0xEE

#define RZ_POISON_OUT 0x00

#define RZ_INDEX_NONE UINT64_MAX

#define RZ_PATH_MAX 512

/* METRALE_REDZONE_SCAN bits */
#define RZ_SCAN_FREE 0x1u

#define RZ_SCAN_SYNC 0x2u

#define RZ_SCAN_EXIT 0x4u

#define RZ_SCAN_FATAL 0x8u

#define RZ_SCAN_LAUNCH 0x10u /* check the launch's context's bands after every kernel launch (launch_check.c) */

/* METRALE_REDZONE_GUARD: every N-th allocation (index % every == 0), or a list of creation indices. */
#define RZ_GUARD_LIST_MAX 32

typedef struct rz_guard_sel {
    uint64_t every; /* 0: not by period */
    uint32_t n;     /* entries in list */
    uint64_t list[RZ_GUARD_LIST_MAX];
} rz_guard_sel_t;

/* Physical plus reserved bytes guard allocations may hold at once; beyond it, ordinary bands. */
#define RZ_GUARD_CAP ((uint64_t)1 << 30)

/* A creation-index window [lo, hi) (METRALE_REDZONE_POISON). */
typedef struct rz_window {
    uint64_t lo, hi;
    bool set;
} rz_window_t;

typedef struct rz_options {
    uint64_t pad_bytes;  /* 0: bands off */
    uint64_t front_bytes; /* METRALE_REDZONE_FRONT, a multiple of RZ_FRONT_UNIT; 0: no front bands */
    unsigned scan;       /* RZ_SCAN_* */
    bool agent;          /* start the debugger agent thread */
    bool install_eager;  /* METRALE_REDZONE_INSTALL=eager: fill each band at its allocation */
    rz_window_t poison;  /* METRALE_REDZONE_POISON: window applied from the first allocation on */
    bool check_kernel;   /* METRALE_REDZONE_CHECK_KERNEL: scans may use the device check kernel */
    bool launch_kernel;  /* METRALE_REDZONE_LAUNCH_KERNEL: launch checks compare bands on the device */
    uint64_t stacks;     /* METRALE_REDZONE_STACKS: frames kept per allocation (0: off) */
    rz_guard_sel_t guard; /* METRALE_REDZONE_GUARD: which allocations get a hardware guard page */
    uint64_t min_idx;
    uint64_t trace_idx;  /* RZ_INDEX_NONE: off */
    uint8_t fill;
    uint8_t free_fill;   /* METRALE_REDZONE_FREE_FILL (quarantine.c) */
    uint64_t quarantine; /* METRALE_REDZONE_QUARANTINE: bytes held at most; 0: off */
    bool leak_check;     /* METRALE_REDZONE_LEAK_CHECK */
    bool help;
    char log_path[RZ_PATH_MAX];     /* empty: stderr */
    char summary_path[RZ_PATH_MAX]; /* empty: no summary file */
    char report_path[RZ_PATH_MAX];  /* METRALE_REDZONE_REPORT; empty: none */
    char suppressions_path[RZ_PATH_MAX]; /* METRALE_REDZONE_SUPPRESSIONS; empty: none */
    bool print_suppressions;        /* METRALE_REDZONE_PRINT_SUPPRESSIONS */
    uint64_t print_limit;           /* METRALE_REDZONE_PRINT_LIMIT; 0: no limit */
    bool halt_on_error;             /* METRALE_REDZONE_HALT_ON_ERROR */
    char warnings[2048]; /* one line per rejected value, '\n'-separated */
} rz_options_t;

typedef const char *(*rz_getenv_fn)(const char *name);

/* Parse every option from getenv_fn into out (pure: no output, no global state). */
void rz__options_parse(rz_getenv_fn getenv_fn, rz_options_t *out);

/* The same for a process that is secure (1: set-uid or set-gid, AT_SECURE) or not: a secure one ignores
 * every PATH option (the log, the summary) with one warning line, so it creates and appends to no file. */
void rz__options_parse_env(rz_getenv_fn getenv_fn, int secure, rz_options_t *out);

/* METRALE_REDZONE_SCAN has launch (1) or not (0), -1 until the options are loaded: read by every interposed
 * launch as one load (its fast path is taken on 0 only). */
extern _Atomic int rz__scan_launch;

#define RZ_SCAN_LAUNCH_OFF() (atomic_load_explicit(&rz__scan_launch, memory_order_relaxed) == 0)

/* The process's options, parsed once on first use (thread-safe). The log opens itself from them (report.c). */
const rz_options_t *rz__options(void);

/* METRALE_REDZONE_LOG as given, %p unexpanded (NULL when unset, or in a secure process, which takes no file
 * names from the environment). Loads the options. */
const char *rz__options_log_template(void);

/* The help table (every option, its type, default and description), line by line to emit(fd, ...). */
void rz__options_help_to(void (*emit)(int fd, const char *text, size_t len), int fd);

/* Option table as a markdown table (docs/options.md body). */
void rz__options_markdown(int fd);

/* METRALE_REDZONE_REPORT as given with %q{ENV} expanded, %p not (NULL: unset, or a secure process). */
const char *rz__options_report_template(void);

/* A path option's value with each %p replaced by the process id: 0, or -1 when it does not fit. */
int rz__expand_path(const char *value, char *out, size_t cap);

/* A file name as an option gives it, expanded (options.c): %q{NAME} becomes the value of the environment
 * variable NAME from env (nothing when unset; NAME of letters, digits and '_'), and, with pid, %p the process
 * id (else %p is kept, for the per-process names made again in a forked child). 0; -1 when the result does not
 * fit in cap; -2 when a %q is not followed by {NAME}. Async-signal-safe when env is. */
int rz__expand_name(const char *value, rz_getenv_fn env, int pid, char *out, size_t cap);

/* value as a warning shows it (options.c): in double quotes, '"' and '\\' escaped with a backslash, other
 * bytes outside printable ASCII as \xNN, cut after RZ_QUOTE_SHOWN bytes with `"...(<n> bytes)`; out holds
 * RZ_QUOTE_MAX bytes. Async-signal-safe; returns the length written. */
#define RZ_QUOTE_SHOWN 96

#define RZ_QUOTE_MAX (RZ_QUOTE_SHOWN * 4 + 48)

size_t rz__quote(char *out, const char *value);

/* The process id in decimal into out (at least 21 bytes), NUL-terminated; async-signal-safe. */
void rz__format_pid(char *out);

#endif /* REDZONE_OPTIONS_H */
