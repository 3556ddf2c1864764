/*
 * Options: one table (options.inc) expanded into parsing, the help text and the docs table. Parsing is a
 * pure function of a getenv-like callback so tests can drive it; the process's options are parsed lazily,
 * once, on the first call that needs them (never from a constructor), and each rejected value leaves one
 * warning line naming the variable and the value kept.
 * Loading METRALE_REDZONE_POISON sets the poison window in the state block (poison_lo/hi/active), so every
 * band is filled with its window byte from the first allocation on.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "common.h"
#include "options.h"
#include "rz_annotate.h"
#include "state.h"
#include "write_all.h"

/* Rust's usize::from_str, which the seed uses: optional '+', then decimal digits only, no overflow. */
static int parse_u64(const char *s, uint64_t *out) {
    if (*s == '+')
        s++;
    if (*s == '\0')
        return -1;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -2; /* out of range */
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

size_t rz__quote(char *out, const char *value) {
    static const char hex[] = "0123456789abcdef";
    size_t n = 0, len = strlen(value);
    out[n++] = '"';
    for (size_t i = 0; i < len && i < RZ_QUOTE_SHOWN; i++) {
        unsigned char c = (unsigned char)value[i];
        if (c == '"' || c == '\\') {
            out[n++] = '\\';
            out[n++] = (char)c;
        } else if (c < 0x20 || c >= 0x7f) {
            out[n++] = '\\';
            out[n++] = 'x';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        } else {
            out[n++] = (char)c;
        }
    }
    out[n++] = '"';
    if (len > RZ_QUOTE_SHOWN) {
        /* Cut: the quotes close what is shown, so nothing after them can be read as part of the value. */
        char digits[24];
        size_t d = 0;
        for (size_t v = len; d == 0 || v; v /= 10)
            digits[d++] = (char)('0' + v % 10);
        for (const char *t = "...("; *t; t++)
            out[n++] = *t;
        while (d)
            out[n++] = digits[--d];
        for (const char *t = " bytes)"; *t; t++)
            out[n++] = *t;
    }
    out[n] = '\0';
    return n;
}

/* A rejected value as its warning shows it (rz__quote), in a buffer that lives as long as the call's block. */
static const char *quoted(char *buf, const char *value) {
    rz__quote(buf, value);
    return buf;
}
#define QUOTED(value) quoted((char[RZ_QUOTE_MAX]){0}, (value))

static void warn_line(rz_options_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn_line(rz_options_t *o, const char *fmt, ...) {
    static const char more[] = "redzone: warning: METRALE_REDZONE*: more warnings not shown\n";
    size_t used = strlen(o->warnings), room = sizeof o->warnings - used;
    if (room <= sizeof more || strstr(o->warnings, more) != NULL)
        return; /* the "more" line is already there: it stays the last line, said once */
    char line[sizeof o->warnings];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    /* Values come quoted (rz__quote: no control character left), so this only keeps a line one line. */
    for (char *c = line; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    size_t len = strlen(line);
    if (len + 1 + sizeof more > room) {
        /* A line that does not fit whole is not cut: one line says some were left out. */
        memcpy(o->warnings + used, more, sizeof more);
        return;
    }
    memcpy(o->warnings + used, line, len);
    o->warnings[used + len] = '\n';
    o->warnings[used + len + 1] = '\0';
}

/* Each parse_<TYPE> sets the field from a set variable (value != NULL) or leaves the default. */
static void parse_BAND(rz_options_t *o, const char *name, const char *value, uint64_t *field) {
    uint64_t v;
    int rc = parse_u64(value, &v);
    if (rc == -1) {
        warn_line(o, "redzone: warning: %s=%s is not a number of bytes; using 0 (red zones off)", name, QUOTED(value));
        return;
    }
    if (rc == -2 || v > RZ_PAD_MAX) {
        warn_line(o, "redzone: warning: %s=%s is larger than %llu; using 0 (red zones off)", name, QUOTED(value),
                  (unsigned long long)RZ_PAD_MAX);
        return;
    }
    *field = (v + 15) & ~(uint64_t)15;
}

static void parse_FRONT(rz_options_t *o, const char *name, const char *value, uint64_t *field) {
    uint64_t v;
    int rc = parse_u64(value, &v);
    if (rc != 0 || v > RZ_FRONT_MAX) {
        warn_line(o, "redzone: warning: %s=%s is not a number of bytes up to %llu; using 0 (no front bands)",
                  name, QUOTED(value), (unsigned long long)RZ_FRONT_MAX);
        return;
    }
    *field = (v + RZ_FRONT_UNIT - 1) / RZ_FRONT_UNIT * RZ_FRONT_UNIT;
}

static void parse_INDEX(rz_options_t *o, const char *name, const char *value, uint64_t *field) {
    uint64_t v;
    if (parse_u64(value, &v) != 0) {
        warn_line(o, "redzone: warning: %s=%s is not a creation index; using 0", name, QUOTED(value));
        return;
    }
    *field = v;
}

static void parse_OPTINDEX(rz_options_t *o, const char *name, const char *value, uint64_t *field) {
    uint64_t v;
    if (parse_u64(value, &v) != 0 || v == RZ_INDEX_NONE) {
        warn_line(o, "redzone: warning: %s=%s is not a creation index; using unset (off)", name, QUOTED(value));
        return;
    }
    *field = v;
}

static void parse_BYTE(rz_options_t *o, const char *name, const char *value, uint8_t *field) {
    uint64_t v;
    if (parse_u64(value, &v) != 0 || v > 255) {
        warn_line(o, "redzone: warning: %s=%s is not a byte (decimal 0-255); using %u", name, QUOTED(value),
                  (unsigned)*field);
        return;
    }
    *field = (uint8_t)v;
}

void rz__format_pid(char *out) {
    char rev[24];
    size_t n = 0;
    for (unsigned long v = (unsigned long)getpid(); n == 0 || v; v /= 10)
        rev[n++] = (char)('0' + v % 10);
    for (size_t i = 0; i < n; i++)
        out[i] = rev[n - 1 - i];
    out[n] = '\0';
}

/* Async-signal-safe (a forked child's log is opened from the fatal-signal handler too): no stdio. */
int rz__expand_path(const char *value, char *out, size_t cap) {
    size_t n = 0;
    for (const char *s = value; *s; s++) {
        char piece[32];
        if (s[0] == '%' && s[1] == 'p') {
            rz__format_pid(piece);
            s++;
        } else {
            piece[0] = *s;
            piece[1] = '\0';
        }
        size_t len = strlen(piece);
        if (n + len >= cap)
            return -1;
        memcpy(out + n, piece, len);
        n += len;
    }
    out[n] = '\0';
    return 0;
}

/* %q{NAME}: the convention of compute-sanitizer's --log-file (an MPI rank: %q{OMPI_COMM_WORLD_RANK}). */
int rz__expand_name(const char *value, rz_getenv_fn env, int pid, char *out, size_t cap) {
    size_t n = 0;
    for (const char *s = value; *s; s++) {
        char piece[32], name[128];
        const char *add = piece;
        if (s[0] == '%' && s[1] == 'p' && pid) {
            rz__format_pid(piece);
            s++;
        } else if (s[0] == '%' && s[1] == 'q') {
            size_t len = 0;
            if (s[2] != '{')
                return -2;
            for (s += 3; *s && *s != '}'; s++) {
                int ok = (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_';
                if (!ok || len + 1 >= sizeof name)
                    return -2;
                name[len++] = *s;
            }
            if (*s != '}' || len == 0)
                return -2;
            name[len] = '\0';
            add = env ? env(name) : NULL;
            if (add == NULL)
                add = "";
        } else {
            piece[0] = *s;
            piece[1] = '\0';
        }
        size_t len = strlen(add);
        if (n + len >= cap)
            return -1;
        memcpy(out + n, add, len);
        n += len;
    }
    out[n] = '\0';
    return 0;
}

/* The default an option's table row shows (options.inc), for the warnings that fall back to it. */
static const char *shown_default(const char *name) {
#define RZ_OPTION(field, var, type, shown, desc)                                                             \
    if (strcmp(name, var) == 0)                                                                              \
        return shown;
#include "options.inc"
#undef RZ_OPTION
    return "the default";
}

/* The environment %q{ENV} reads while rz__options_parse_env runs on this thread. */
static RZ_TLS rz_getenv_fn t_parse_env;

static void parse_PATH(rz_options_t *o, const char *name, const char *value, char (*field)[RZ_PATH_MAX]) {
    char out[RZ_PATH_MAX];
    int rc = rz__expand_name(value, t_parse_env, 1, out, sizeof out);
    if (rc == -2) {
        warn_line(o, "redzone: warning: %s=%s has a %%q not followed by {NAME} (letters, digits, _); using %s", name,
                  QUOTED(value), shown_default(name));
        return;
    }
    if (rc != 0) {
        warn_line(o, "redzone: warning: %s=%s is longer than %zu bytes (with %%p and %%q{} expanded); using %s", name,
                  QUOTED(value), sizeof out - 1, shown_default(name));
        return;
    }
    size_t n = strlen(out);
    if (n == 0) {
        warn_line(o, "redzone: warning: %s=\"\" is empty; using %s", name, shown_default(name));
        return;
    }
    out[n] = '\0';
    memcpy(*field, out, n + 1);
}

/* "a, b" lists of the path variables a secure-execution process ignores, and of the defaults used instead. */
static void list_add(char *list, size_t cap, const char *item) {
    size_t n = strlen(list), len = strlen(item);
    if (n + 2 + len >= cap)
        return;
    if (n) {
        memcpy(list + n, ", ", 2);
        n += 2;
    }
    memcpy(list + n, item, len + 1);
}

static void parse_SCANLIST(rz_options_t *o, const char *name, const char *value, unsigned *field) {
    unsigned bits = 0;
    int none = 0;
    const char *s = value;
    do {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len == 4 && strncmp(s, "free", 4) == 0)
            bits |= RZ_SCAN_FREE;
        else if (len == 4 && strncmp(s, "sync", 4) == 0)
            bits |= RZ_SCAN_SYNC;
        else if (len == 6 && strncmp(s, "launch", 6) == 0)
            bits |= RZ_SCAN_LAUNCH;
        else if (len == 4 && strncmp(s, "exit", 4) == 0)
            bits |= RZ_SCAN_EXIT;
        else if (len == 5 && strncmp(s, "fatal", 5) == 0)
            bits |= RZ_SCAN_FATAL;
        else if (len == 4 && strncmp(s, "none", 4) == 0)
            none = 1;
        else {
            warn_line(o, "redzone: warning: %s=%s is not a comma list of free, sync, launch, exit, fatal, none; using free,exit,fatal",
                      name, QUOTED(value));
            return;
        }
        s = end ? end + 1 : NULL;
    } while (s);
    if (none && bits) {
        warn_line(o, "redzone: warning: %s=%s combines none with other scans; using free,exit,fatal", name, QUOTED(value));
        return;
    }
    *field = bits;
}

static void parse_INSTALL(rz_options_t *o, const char *name, const char *value, bool *field) {
    if (strcmp(value, "lazy") == 0 || strcmp(value, "eager") == 0) {
        *field = value[0] == 'e';
        return;
    }
    warn_line(o, "redzone: warning: %s=%s is not lazy or eager; using lazy", name, QUOTED(value));
    *field = false;
}

/* A creation-index window [lo, hi): "<lo>:<hi>", each a number as parse_u64 takes it, lo <= hi. */
static void parse_WINDOW(rz_options_t *o, const char *name, const char *value, rz_window_t *field) {
    const char *colon = strchr(value, ':');
    char lo_text[32];
    uint64_t lo, hi;
    size_t lo_len = colon ? (size_t)(colon - value) : 0;
    int ok = colon != NULL && lo_len < sizeof lo_text;
    if (ok) {
        memcpy(lo_text, value, lo_len);
        lo_text[lo_len] = '\0';
        ok = parse_u64(lo_text, &lo) == 0 && parse_u64(colon + 1, &hi) == 0 && lo <= hi;
    }
    if (!ok) {
        warn_line(o, "redzone: warning: %s=%s is not a window <lo>:<hi> (decimal, lo <= hi); using unset "
                  "(no window)", name, QUOTED(value));
        return;
    }
    field->lo = lo;
    field->hi = hi;
    field->set = true;
}

static void parse_GUARD(rz_options_t *o, const char *name, const char *value, rz_guard_sel_t *field) {
    rz_guard_sel_t g = {0};
    int ok = 1;
    if (strncmp(value, "idx:", 4) == 0) {
        const char *s = value + 4;
        do {
            const char *end = strchr(s, ',');
            size_t len = end ? (size_t)(end - s) : strlen(s);
            char num[32];
            uint64_t v;
            if (len == 0 || len >= sizeof num || g.n == RZ_GUARD_LIST_MAX) {
                ok = 0;
                break;
            }
            memcpy(num, s, len);
            num[len] = '\0';
            if (parse_u64(num, &v) != 0) {
                ok = 0;
                break;
            }
            g.list[g.n++] = v;
            s = end ? end + 1 : NULL;
        } while (s);
    } else {
        ok = parse_u64(value, &g.every) == 0 && g.every > 0;
    }
    if (!ok) {
        warn_line(o, "redzone: warning: %s=%s is not N (every N-th allocation, N >= 1) or idx:I,J,... (at most "
                  "%d indices); using unset (no guard pages)", name, QUOTED(value), RZ_GUARD_LIST_MAX);
        return;
    }
    *field = g;
}

#define RZ_STACKS_MAX 32

static void parse_DEPTH(rz_options_t *o, const char *name, const char *value, uint64_t *field) {
    uint64_t v;
    if (parse_u64(value, &v) != 0 || v > RZ_STACKS_MAX) {
        warn_line(o, "redzone: warning: %s=%s is not a frame count 0-%d; using 0 (off)", name, QUOTED(value),
                  RZ_STACKS_MAX);
        return;
    }
    *field = v;
}

static void parse_COUNT(rz_options_t *o, const char *name, const char *value, uint64_t *field) {
    uint64_t v;
    if (parse_u64(value, &v) != 0) {
        warn_line(o, "redzone: warning: %s=%s is not a number; using %s", name, QUOTED(value), shown_default(name));
        return;
    }
    *field = v;
}

/* Bytes, decimal, with an optional K, M or G suffix (powers of 1024). */
static void parse_SIZE(rz_options_t *o, const char *name, const char *value, uint64_t *field) {
    char digits[32];
    size_t n = strlen(value);
    unsigned shift = 0;
    if (n > 0 && n < sizeof digits) {
        char last = value[n - 1];
        shift = last == 'K' || last == 'k' ? 10 : last == 'M' || last == 'm' ? 20 : last == 'G' || last == 'g' ? 30 : 0;
    }
    uint64_t v;
    if (n == 0 || n >= sizeof digits) {
        v = UINT64_MAX;
    } else {
        memcpy(digits, value, n + 1);
        if (shift)
            digits[n - 1] = '\0';
        if (parse_u64(digits, &v) != 0 || (shift && v > (UINT64_MAX >> shift)))
            v = UINT64_MAX;
        else
            v <<= shift;
    }
    if (v == UINT64_MAX) {
        warn_line(o, "redzone: warning: %s=%s is not a byte count (decimal, K/M/G suffix); using %s", name,
                  QUOTED(value), shown_default(name));
        return;
    }
    *field = v;
}

static void parse_BOOL(rz_options_t *o, const char *name, const char *value, bool *field) {
    if (strcmp(value, "0") == 0 || strcmp(value, "1") == 0) {
        *field = value[0] == '1';
        return;
    }
    warn_line(o, "redzone: warning: %s=%s is not 0 or 1; using %d", name, QUOTED(value), (int)*field);
}

void rz__options_parse_env(rz_getenv_fn getenv_fn, int secure, rz_options_t *out) {
    memset(out, 0, sizeof *out);
    out->pad_bytes = 0;
    out->min_idx = 0;
    out->trace_idx = RZ_INDEX_NONE;
    out->fill = RZ_FILL_DEFAULT;
    out->free_fill = RZ_FREE_FILL_DEFAULT;
    out->quarantine = RZ_QUARANTINE_DEFAULT;
    out->scan = RZ_SCAN_FREE | RZ_SCAN_EXIT | RZ_SCAN_FATAL;
    out->agent = true;
    out->check_kernel = false;
    out->launch_kernel = true;
    out->help = false;
    char ignored[512] = "", defaults[256] = "";
    t_parse_env = getenv_fn;
    /* A set-uid or set-gid program runs for a user who did not write its environment: a file name from it
     * would let that user pick a file for the program's owner to create or append to. */
#define RZ_OPTION(field, var, type, shown, desc)                                                             \
    {                                                                                                        \
        const char *value = getenv_fn(var);                                                                  \
        if (value != NULL && secure && strcmp(#type, "PATH") == 0) {                                         \
            list_add(ignored, sizeof ignored, var);                                                          \
            list_add(defaults, sizeof defaults, shown);                                                      \
        } else if (value != NULL) {                                                                          \
            parse_##type(out, var, value, &out->field);                                                      \
        }                                                                                                    \
    }
#include "options.inc"
#undef RZ_OPTION
    if (getenv_fn("METRALE_REDZONE_FREE_FILL") == NULL && out->free_fill == out->fill)
        out->free_fill = (uint8_t)(out->fill + 1); /* distinct from the band fill unless both are set */
    if (ignored[0])
        warn_line(out, "redzone: warning: %s ignored: a set-uid or set-gid program (secure execution) takes no "
                  "file names from the environment; using %s", ignored, defaults);
}

void rz__options_parse(rz_getenv_fn getenv_fn, rz_options_t *out) { rz__options_parse_env(getenv_fn, 0, out); }

static rz_options_t g_options;
static pthread_once_t g_options_once = PTHREAD_ONCE_INIT;

static const char *g_log_template; /* METRALE_REDZONE_LOG as given (NULL: unset, or a secure process) */
static const char *g_report_template; /* METRALE_REDZONE_REPORT the same */
static char g_log_template_text[RZ_PATH_MAX], g_report_template_text[RZ_PATH_MAX];

/*
 * The process's options, from its environment read once: the table's 27 names were 27 getenv calls, each a
 * walk of the whole environment (about 8k instructions of every start-up). options_load collects the
 * environment's METRALE_REDZONE entries in one pass, in the environment's order (getenv's answer is the
 * first entry of a name), and the table's names are looked up among those; any other name (a %q{NAME}) and
 * an environment with more such entries than fit are asked of getenv.
 */
#define OWN_PREFIX "METRALE_REDZONE"
#define OWN_ENV_MAX 64
extern char **environ;
static const char *g_own_env[OWN_ENV_MAX];
static int g_own_env_n = -1; /* -1: not collected, or too many: getenv */

static int has_prefix(const char *s, const char *prefix) {
    while (*prefix && *s == *prefix)
        s++, prefix++;
    return *prefix == '\0';
}

static void own_env_collect(void) {
    int n = 0;
    for (char **e = environ; e && *e && n >= 0; e++)
        if (has_prefix(*e, OWN_PREFIX))
            n = n < OWN_ENV_MAX ? (g_own_env[n] = *e, n + 1) : -1;
    g_own_env_n = n;
}

static const char *process_getenv(const char *name) {
    if (g_own_env_n < 0 || !has_prefix(name, OWN_PREFIX))
        return getenv(name);
    for (int i = 0; i < g_own_env_n; i++) {
        const char *e = g_own_env[i] + sizeof OWN_PREFIX - 1, *c = name + sizeof OWN_PREFIX - 1; /* both have it */
        while (*c && *e == *c)
            e++, c++;
        if (*c == '\0' && *e == '=')
            return e + 1;
    }
    return NULL;
}

/* A path option's value with %q{ENV} expanded and %p kept (NULL: unset, secure, or too long). */
static const char *name_template(int secure, const char *var, char *out) {
    const char *value = secure ? NULL : process_getenv(var);
    if (value == NULL || rz__expand_name(value, process_getenv, 0, out, RZ_PATH_MAX) != 0)
        return NULL;
    return out;
}


_Atomic int rz__scan_launch = -1;

static void options_load(void) {
    int secure = getauxval(AT_SECURE) != 0; /* set-uid, set-gid or file capabilities: ld.so's own test */
    own_env_collect();
    rz__options_parse_env(process_getenv, secure, &g_options);
    g_log_template = name_template(secure, "METRALE_REDZONE_LOG", g_log_template_text);
    g_report_template = name_template(secure, "METRALE_REDZONE_REPORT", g_report_template_text);
    g_own_env_n = -1; /* the entries are the environment's: not kept past this read of it */
    RZ_STATE.pad_bytes = g_options.pad_bytes;
    RZ_STATE.min_idx = g_options.min_idx;
    RZ_STATE.trace_idx = g_options.trace_idx;
    RZ_STATE.fill = g_options.fill;
    RZ_STATE.stack_depth = (uint32_t)g_options.stacks;
    RZ_STATE.guard_cap = RZ_GUARD_CAP;
    if (g_options.poison.set) {
        /* Before options_loaded is published and before the first allocation takes its index. */
        RZ_STATE.poison_lo = g_options.poison.lo;
        RZ_STATE.poison_hi = g_options.poison.hi;
        RZ_STATE.poison_active = 1;
    }
    RZ_ANNOTATE_ATOMIC(&rz__scan_launch, sizeof rz__scan_launch); /* helgrind: read without a lock */
    atomic_store_explicit(&rz__scan_launch, (g_options.scan & RZ_SCAN_LAUNCH) != 0, memory_order_relaxed);
    __atomic_store_n(&RZ_STATE.options_loaded, 1, __ATOMIC_RELEASE);
}

const rz_options_t *rz__options(void) {
    if (RZ_LIKELY(__atomic_load_n(&RZ_STATE.options_loaded, __ATOMIC_ACQUIRE)))
        return &g_options;
    pthread_once(&g_options_once, options_load);
    return &g_options;
}

static const char *type_name(const char *t) {
    if (strcmp(t, "BAND") == 0 || strcmp(t, "FRONT") == 0)
        return "bytes";
    if (strcmp(t, "INDEX") == 0 || strcmp(t, "OPTINDEX") == 0)
        return "index";
    if (strcmp(t, "BYTE") == 0)
        return "byte";
    if (strcmp(t, "PATH") == 0)
        return "path";
    if (strcmp(t, "SCANLIST") == 0)
        return "list";
    if (strcmp(t, "WINDOW") == 0)
        return "window";
    if (strcmp(t, "DEPTH") == 0)
        return "frames";
    if (strcmp(t, "GUARD") == 0)
        return "N/idx:list";
    if (strcmp(t, "INSTALL") == 0)
        return "lazy/eager";
    if (strcmp(t, "COUNT") == 0)
        return "count";
    if (strcmp(t, "SIZE") == 0)
        return "bytes";
    return "0|1";
}

const char *rz__options_log_template(void) {
    (void)rz__options();
    return g_log_template;
}

const char *rz__options_report_template(void) {
    (void)rz__options();
    return g_report_template;
}

void rz__options_help_to(void (*emit)(int fd, const char *text, size_t len), int fd) {
    char line[1024];
    int n = snprintf(line, sizeof line, "redzone options (environment variables):\n");
    emit(fd, line, (size_t)n);
#define RZ_OPTION(field, var, type, shown, desc)                                                             \
    n = snprintf(line, sizeof line, "  %-26s %-6s default %s\n      %s\n", var, type_name(#type), shown, desc); \
    if (n > 0)                                                                                               \
        emit(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
#include "options.inc"
#undef RZ_OPTION
}

RZ_EXPORT void rz_options_help(int fd) { rz__options_help_to(rz__write_all, fd); }

void rz__options_markdown(int fd) {
    char line[1024];
    int n = snprintf(line, sizeof line, "| Variable | Type | Default | Description |\n|---|---|---|---|\n");
    rz__write_all(fd, line, (size_t)n);
#define RZ_OPTION(field, var, type, shown, desc)                                                             \
    n = snprintf(line, sizeof line, "| `%s` | %s | %s | %s |\n", var, type_name(#type), shown, desc);        \
    if (n > 0)                                                                                               \
        rz__write_all(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
#include "options.inc"
#undef RZ_OPTION
}
