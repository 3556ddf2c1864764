/*
 * The machine-readable report, METRALE_REDZONE_REPORT=FILE (docs/report-format.md has the schema):
 *   JSON Lines (any name not ending in .sarif): one object per finding, written with one write(2) when the
 *   finding is made, and one summary object at exit; appended to, as the log, so several processes may share
 *   one file (every object carries its pid; a name with %p gives each process its own).
 *   SARIF 2.1.0 (a name ending in .sarif): one document, one result per finding with the program's frames as
 *   locations. It is rewritten whole (truncated, then written) when the file is opened, after each finding and
 *   at exit, so that it is one valid JSON document whenever the program stops between two findings, whether
 *   it exits, calls _exit or dies of a signal. A forked child never writes the document it inherited: at its
 *   first finding it opens its own (its %p name, or NAME.<pid>.sarif where the name has none).
 * Opened as the log is (safeopen.c: 0600, close-on-exec, never through another user's symlink in a sticky
 * directory); no heap: records are formatted in static memory under one lock, and the SARIF results are
 * kept in memory mapped on the first finding (at most RESULTS_MAX bytes: later results are counted, not kept).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "report_file.h"
#include "fork.h"
#include "options.h"
#include "report.h"
#include "safeopen.h"

#define RECORD_MAX (64 << 10)
#define RESULTS_MAX ((size_t)16 << 20)

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int g_fd = -1;  /* read without the lock by rz__report_file_on */
static int g_sarif;
static pid_t g_owner;                /* the process whose file g_fd is (a forked child opens its own) */
static char g_path[RZ_PATH_MAX];     /* the file's name, absolute, to open it again */
static dev_t g_dev;
static ino_t g_ino;
static char g_template[RZ_PATH_MAX]; /* the name, %q{} expanded, %p not: a child's own file */
static char g_record[RECORD_MAX];
static char *g_results;              /* SARIF: the results so far, comma-separated */
static size_t g_results_len;
static uint64_t g_results_dropped;

/* ---- JSON text --------------------------------------------------------------------------------------- */
struct out {
    char *buf;
    size_t n, cap;
};

static void put(struct out *o, const char *s) {
    size_t len = strlen(s);
    if (o->n + len >= o->cap) {
        o->n = o->cap; /* too long: marked, and dropped by the caller */
        return;
    }
    memcpy(o->buf + o->n, s, len);
    o->n += len;
}

static void putf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(struct out *o, const char *fmt, ...) {
    if (o->n >= o->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(o->buf + o->n, o->cap - o->n, fmt, ap);
    va_end(ap);
    o->n = w < 0 || (size_t)w >= o->cap - o->n ? o->cap : o->n + (size_t)w;
}

/* A JSON string (NULL: null); bytes outside printable ASCII as \u00XX, so the text stays ASCII. */
static void put_str(struct out *o, const char *s) {
    if (s == NULL) {
        put(o, "null");
        return;
    }
    put(o, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            putf(o, "\\%c", *c);
        else if (*c < 0x20 || *c >= 0x7f)
            putf(o, "\\u%04x", *c);
        else
            putf(o, "%c", *c);
    }
    put(o, "\"");
}

static void put_num(struct out *o, int64_t v) {
    if (v == RZ_FINDING_NONE)
        put(o, "null");
    else
        putf(o, "%lld", (long long)v);
}

static void put_frames(struct out *o, const rz_frame_sym_t *f, int n) {
    put(o, "[");
    for (int i = 0; i < n; i++) {
        putf(o, "%s{\"address\": \"0x%llx\", \"function\": ", i ? ", " : "", (unsigned long long)f[i].addr);
        put_str(o, f[i].named ? f[i].func : NULL);
        putf(o, ", \"offset\": %llu, \"object\": ", (unsigned long long)f[i].off);
        put_str(o, f[i].file);
        put(o, "}");
    }
    put(o, "]");
}

/* The finding's own fields, shared by the JSON Lines record and the SARIF result's properties. */
static void put_fields(struct out *o, const rz_finding_t *f, uint64_t seq, const rz_frame_sym_t *alloc, int nalloc,
                       const rz_frame_sym_t *call, int ncall) {
    putf(o, "\"pid\": %ld, \"seq\": %llu, \"kind\": ", (long)getpid(), (unsigned long long)seq);
    put_str(o, rz__finding_kind_name(f->kind));
    putf(o, ", \"alloc\": %llu, \"pointer\": \"0x%llx\", \"user_bytes\": %llu, \"pad\": ", (unsigned long long)f->alloc,
         (unsigned long long)f->ptr, (unsigned long long)f->user_bytes);
    put_num(o, f->pad);
    put(o, ", \"first\": ");
    put_num(o, f->first);
    put(o, ", \"last\": ");
    put_num(o, f->last);
    put(o, ", \"changed\": ");
    put_num(o, f->changed);
    put(o, ", \"first_bad\": ");
    put_num(o, f->first_bad);
    put(o, ", \"entry\": ");
    put_str(o, f->entry);
    if (f->entry)
        putf(o, ", \"address\": \"0x%llx\", \"bytes\": %llu", (unsigned long long)f->addr, (unsigned long long)f->bytes);
    else
        put(o, ", \"address\": null, \"bytes\": null");
    put(o, ", \"launch\": ");
    if (f->launch[0]) {
        put(o, "{\"kernel\": ");
        put_str(o, f->launch);
        putf(o, ", \"launch\": %llu}", (unsigned long long)f->launch_seq);
    } else {
        put(o, "null");
    }
    put(o, ", \"kernels\": [");
    for (unsigned i = 0; i < f->nkernels; i++) {
        put(o, i ? ", " : "");
        put_str(o, f->kernels[i]);
    }
    put(o, "], \"alloc_stack\": ");
    put_frames(o, alloc, nalloc);
    put(o, ", \"call_stack\": ");
    put_frames(o, call, ncall);
    put(o, ", \"message\": ");
    put_str(o, f->text);
}

/* ---- SARIF ------------------------------------------------------------------------------------------- */
static void put_uri(struct out *o, const char *file) {
    put(o, "\"file://");
    for (const unsigned char *c = (const unsigned char *)file; *c; c++) {
        int plain = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
                    strchr("/-._~+", *c) != NULL;
        if (plain)
            putf(o, "%c", *c);
        else
            putf(o, "%%%02X", *c);
    }
    put(o, "\"");
}

static void put_location(struct out *o, const rz_frame_sym_t *f) {
    put(o, "{\"physicalLocation\": {");
    if (f->file[0] == '/') {
        put(o, "\"artifactLocation\": {\"uri\": ");
        put_uri(o, f->file);
        put(o, "}, ");
    }
    putf(o, "\"address\": {\"absoluteAddress\": %llu}}", (unsigned long long)f->addr);
    if (f->named) {
        put(o, ", \"logicalLocations\": [{\"name\": ");
        put_str(o, f->func);
        put(o, ", \"kind\": \"function\"}]");
    }
    put(o, "}");
}

static void put_stack(struct out *o, const char *what, const rz_frame_sym_t *f, int n) {
    put(o, "{\"message\": {\"text\": ");
    put_str(o, what);
    put(o, "}, \"frames\": [");
    for (int i = 0; i < n; i++) {
        put(o, i ? ", {\"location\": " : "{\"location\": ");
        put_location(o, &f[i]);
        put(o, "}");
    }
    put(o, "]}");
}

static void put_result(struct out *o, const rz_finding_t *f, uint64_t seq, const rz_frame_sym_t *alloc, int nalloc,
                       const rz_frame_sym_t *call, int ncall) {
    put(o, "{\"ruleId\": ");
    put_str(o, rz__finding_kind_name(f->kind));
    putf(o, ", \"ruleIndex\": %d, \"level\": \"error\", \"message\": {\"text\": ", f->kind);
    put_str(o, f->text);
    put(o, "}, \"locations\": [");
    /* The program's frames: where the refused call was made, else where the buffer was allocated. */
    const rz_frame_sym_t *at = ncall ? call : alloc;
    int nat = ncall ? ncall : nalloc;
    for (int i = 0; i < nat; i++) {
        put(o, i ? ", " : "");
        put_location(o, &at[i]);
    }
    put(o, "], \"stacks\": [");
    if (ncall)
        put_stack(o, "the call", call, ncall);
    if (nalloc) {
        put(o, ncall ? ", " : "");
        put_stack(o, "the allocation", alloc, nalloc);
    }
    put(o, "], \"properties\": {");
    put_fields(o, f, seq, alloc, nalloc, call, ncall);
    put(o, "}}");
}

/* The whole document, written over what the file held. */
static void sarif_write(const rz_finding_totals_t *t, int complete) {
    struct out o = {.buf = g_record, .cap = sizeof g_record};
    put(&o, "{\"$schema\": \"https://json.schemastore.org/sarif-2.1.0.json\", \"version\": \"2.1.0\", \"runs\": "
            "[{\"tool\": {\"driver\": {\"name\": \"redzone\", \"rules\": [");
    for (int k = 0; k < RZ_FINDING_NKINDS; k++) {
        put(&o, k ? ", {\"id\": " : "{\"id\": ");
        put_str(&o, rz__finding_kind_name(k));
        put(&o, ", \"shortDescription\": {\"text\": ");
        put_str(&o, rz__finding_kind_desc(k));
        put(&o, "}}");
    }
    putf(&o, "]}}, \"properties\": {\"pid\": %ld, \"complete\": %s, \"findings\": %llu, \"suppressed\": %llu, "
             "\"unprinted\": %llu, \"not_kept\": %llu, \"halted\": %s}, \"results\": [",
         (long)getpid(), complete ? "true" : "false", (unsigned long long)(t ? t->findings : 0),
         (unsigned long long)(t ? t->suppressed : 0), (unsigned long long)(t ? t->unprinted : 0),
         (unsigned long long)g_results_dropped, t && t->halted ? "true" : "false");
    if (o.n >= o.cap || ftruncate(g_fd, 0) != 0)
        return;
    rz__write_all(g_fd, g_record, o.n);
    if (g_results_len)
        rz__write_all(g_fd, g_results, g_results_len);
    rz__write_all(g_fd, "]}]}\n", 5);
}

/* ---- the file ---------------------------------------------------------------------------------------- */
static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

/* Opened, its identity kept and its name made absolute (a chdir since does not matter). */
static int open_named(const char *path) {
    int refused = 0;
    int fd = rz__open_append(path, &refused);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0) {
        g_dev = st.st_dev;
        g_ino = st.st_ino;
        char cwd[RZ_PATH_MAX];
        if (path[0] == '/' || getcwd(cwd, sizeof cwd) == NULL ||
            snprintf(g_path, sizeof g_path, "%s/%s", cwd, path) >= (int)sizeof g_path)
            snprintf(g_path, sizeof g_path, "%s", path);
    }
    if (fd < 0) {
        char quoted[RZ_QUOTE_MAX];
        rz__quote(quoted, path);
        const char *why = strerrorname_np(errno);
        rz__warn("cannot open METRALE_REDZONE_REPORT=%s (%s); no report file written", quoted,
                 refused ? rz__refusal(refused) : why ? why : "error");
    }
    return fd;
}

/*
 * The descriptor is the program's to close (as the log's, report.c): a program that closes every descriptor
 * and opens a file of its own gets the number back. Before each write it must still be the file opened here:
 * the same device and inode, close-on-exec, open for appending. Otherwise the file is opened again by its
 * name (a SARIF document is rewritten whole anyway) and the program's descriptor left alone.
 */
static int still_ours(void) {
    struct stat st;
    int fd = g_fd, fdflags = fcntl(fd, F_GETFD), flags = fcntl(fd, F_GETFL);
    return fdflags >= 0 && (fdflags & FD_CLOEXEC) && flags >= 0 && (flags & O_APPEND) && fstat(fd, &st) == 0 &&
           st.st_dev == g_dev && st.st_ino == g_ino;
}

static int usable(void) {
    if (g_fd < 0)
        return 0;
    if (still_ours())
        return 1;
    char path[RZ_PATH_MAX];
    snprintf(path, sizeof path, "%s", g_path);
    g_fd = open_named(path);
    return g_fd >= 0;
}

/* A forked child: the inherited file is its parent's; what it finds goes to its own (opened at its first). */
static void after_fork_child(void) {
    pthread_mutex_init(&g_lock, NULL);
    g_results_len = 0;
    g_results_dropped = 0;
}

/* The child's own file, at its first finding (g_lock held): 0 when it has none. */
static int own_file(void) {
    if (g_owner == getpid())
        return usable();
    char path[RZ_PATH_MAX];
    int has_pid = strstr(g_template, "%p") != NULL;
    if (rz__expand_name(g_template, NULL, 1, path, sizeof path) != 0)
        return 0;
    if (g_sarif && !has_pid) {
        char pid[24];
        rz__format_pid(pid);
        size_t base = strlen(path) - strlen(".sarif");
        if (base + 1 + strlen(pid) + strlen(".sarif") >= sizeof path)
            return 0;
        snprintf(path + base, sizeof path - base, ".%s.sarif", pid);
    }
    g_owner = getpid();
    if (!g_sarif && !has_pid)
        return usable(); /* JSON Lines shared by name: appended to, each record with its pid */
    if (g_fd >= 0 && still_ours())
        close(g_fd); /* the child's copy of its parent's descriptor; the parent's file stays open there */
    g_fd = open_named(path);
    if (g_fd >= 0 && g_sarif)
        sarif_write(NULL, 0);
    return g_fd >= 0;
}

int rz__report_file_start(void) {
    const rz_options_t *o = rz__options();
    const char *template = rz__options_report_template();
    if (o->report_path[0] == '\0' || template == NULL)
        return 0;
    snprintf(g_template, sizeof g_template, "%s", template);
    g_sarif = ends_with(o->report_path, ".sarif");
    g_owner = getpid();
    g_fd = open_named(o->report_path);
    if (g_fd < 0)
        return 0;
    rz__fork_register(NULL, NULL, after_fork_child);
    if (g_sarif)
        sarif_write(NULL, 0);
    return 1;
}

int rz__report_file_on(void) { return g_fd >= 0; }

void rz__report_file_finding(const rz_finding_t *f, uint64_t seq, const rz_frame_sym_t *alloc, int nalloc,
                             const rz_frame_sym_t *call, int ncall) {
    pthread_mutex_lock(&g_lock);
    if (!own_file()) {
        pthread_mutex_unlock(&g_lock);
        return;
    }
    struct out o = {.buf = g_record, .cap = sizeof g_record};
    if (!g_sarif) {
        put(&o, "{\"type\": \"finding\", ");
        put_fields(&o, f, seq, alloc, nalloc, call, ncall);
        put(&o, "}\n");
        if (o.n < o.cap)
            rz__write_all(g_fd, g_record, o.n);
        pthread_mutex_unlock(&g_lock);
        return;
    }
    if (g_results_len)
        put(&o, ", ");
    put_result(&o, f, seq, alloc, nalloc, call, ncall);
    if (g_results == NULL) {
        void *p = mmap(NULL, RESULTS_MAX, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        g_results = p == MAP_FAILED ? NULL : p;
    }
    if (o.n < o.cap && g_results && RESULTS_MAX - g_results_len > o.n) {
        memcpy(g_results + g_results_len, g_record, o.n);
        g_results_len += o.n;
    } else {
        g_results_dropped++;
    }
    sarif_write(NULL, 0);
    pthread_mutex_unlock(&g_lock);
}

void rz__report_file_finish(const rz_finding_totals_t *t) {
    pthread_mutex_lock(&g_lock);
    /* A forked child writes a summary only into a file of its own, and only when it found something. */
    if (g_fd < 0 || (g_owner != getpid() && t->findings + t->suppressed == 0) || !own_file()) {
        pthread_mutex_unlock(&g_lock);
        return;
    }
    if (g_sarif) {
        sarif_write(t, 1);
        pthread_mutex_unlock(&g_lock);
        return;
    }
    struct out o = {.buf = g_record, .cap = sizeof g_record};
    putf(&o, "{\"type\": \"summary\", \"pid\": %ld, \"findings\": %llu, \"suppressed\": %llu, \"unprinted\": %llu, "
             "\"halted\": %s, \"kinds\": {",
         (long)getpid(), (unsigned long long)t->findings, (unsigned long long)t->suppressed,
         (unsigned long long)t->unprinted, t->halted ? "true" : "false");
    for (int k = 0; k < RZ_FINDING_NKINDS; k++) {
        put(&o, k ? ", " : "");
        put_str(&o, rz__finding_kind_name(k));
        putf(&o, ": %llu", (unsigned long long)t->by_kind[k]);
    }
    put(&o, "}}\n");
    if (o.n < o.cap)
        rz__write_all(g_fd, g_record, o.n);
    pthread_mutex_unlock(&g_lock);
}
