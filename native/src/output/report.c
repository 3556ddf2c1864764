/*
 * The one output path: every report, warning and summary line is formatted into a fixed stack buffer and
 * written with write(2), so it never allocates and is safe to use with locks held. A thread-local guard
 * drops output produced while output is already being produced (a hook that logs from inside a log call),
 * and warnings are capped so a misbehaving program cannot flood the log. A scan holds its lines back (in
 * memory it maps, not the heap) while it holds the registry lock, and prints them after (band.c).
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
#include "report.h"
#include "fork.h"
#include "format.h"
#include "options.h"
#include "safeopen.h"
#include "state.h"
#include "thread_state.h"

#define RZ_WARNINGS_MAX 100

static _Atomic unsigned g_warnings;
#define t_in_log (rz__thread.in_log) /* in the thread-state record (thread_state.h) */

/*
 * Which process wrote a line. A log file whose name has no %p may be shared: a script runs several programs
 * under one `redzone run --log FILE`, or a program starts others; so every line written to such a file starts
 * with `redzone[<pid>]: `, the line itself unchanged after it. A %p file is one process's (a forked child that
 * inherited its parent's gets its own at the fork), and stderr is the program's own stream: no prefix there.
 */
static _Atomic int g_log_pid_prefix;
static char g_log_template[RZ_PATH_MAX]; /* METRALE_REDZONE_LOG as given, %p unexpanded (per-process files) */

/*
 * The log's descriptor is the program's to close: a daemon or a test harness closes every descriptor after
 * setup and opens a data file, which gets the log's number back; or it dup2()s a file of its own over it. A
 * line must never land in a file the program opened, so before every write the descriptor is checked to be
 * still the log: the same file (device and inode), still close-on-exec and open for appending, as redzone
 * opened it (dup2 clears close-on-exec). Otherwise the log is opened again by its name (made absolute when
 * it was opened, so a chdir since does not matter), and the descriptor the program has now is left alone,
 * never written to nor closed; when that open fails too, lines go to stderr after one warning. Reports are
 * rare, so the three system calls per write cost nothing that matters; all are async-signal-safe (the
 * fatal-signal handler writes through here). Without METRALE_REDZONE_LOG, lines go to descriptor 2 as it is
 * at the time: that is the program's stderr, whatever the program made of it.
 */
static _Atomic int g_log_fd = 2;
static _Atomic int g_log_checked;                 /* 1: g_log_fd is a file redzone opened, checked before writes */
static _Atomic unsigned long long g_log_dev, g_log_ino;
static char g_log_path[RZ_PATH_MAX];              /* the log's absolute name, to open it again */
static _Atomic int g_log_lost_said;

/* Make a relative name absolute (into out); 0 where it does not fit (then it is kept as given). */
static int absolute(const char *path, char *out, size_t cap) {
    size_t len = strlen(path);
    if (path[0] == '/') {
        if (len >= cap)
            return 0;
        memcpy(out, path, len + 1);
        return 1;
    }
    if (getcwd(out, cap) == NULL)
        return 0;
    size_t n = strlen(out);
    if (n + 1 + len >= cap)
        return 0;
    out[n] = '/';
    memcpy(out + n + 1, path, len + 1);
    return 1;
}

static int open_log(const char *path, int *refused) { return rz__open_append(path, refused); }

static void log_identity(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0)
        return;
    atomic_store(&g_log_dev, (unsigned long long)st.st_dev);
    atomic_store(&g_log_ino, (unsigned long long)st.st_ino);
}

/* Whether fd is still the log redzone opened. */
static int log_is_ours(int fd) {
    struct stat st;
    int fdflags = fcntl(fd, F_GETFD);
    int flags = fcntl(fd, F_GETFL);
    return fdflags >= 0 && (fdflags & FD_CLOEXEC) && flags >= 0 && (flags & O_APPEND) &&
           (flags & O_ACCMODE) == O_WRONLY && fstat(fd, &st) == 0 &&
           (unsigned long long)st.st_dev == atomic_load(&g_log_dev) &&
           (unsigned long long)st.st_ino == atomic_load(&g_log_ino);
}

/* Async-signal-safe concatenation for the lines written here (no snprintf). */
static size_t append(char *buf, size_t n, size_t cap, const char *text) {
    for (; *text && n < cap - 1; text++)
        buf[n++] = *text;
    return n;
}

/* The log's descriptor fd is no longer the log: open it again, or fall back to stderr (said once). */
static int log_lost(int fd) {
    int refused = 0;
    int fresh = open_log(g_log_path, &refused);
    if (fresh >= 0) {
        log_identity(fresh);
        int expected = fd;
        if (!atomic_compare_exchange_strong(&g_log_fd, &expected, fresh))
            close(fresh); /* another thread opened it again first: use that one */
        else
            RZ_STATE.log_fd = fresh;
        return atomic_load(&g_log_fd);
    }
    int saved = errno;
    atomic_store(&g_log_checked, 0);
    atomic_store(&g_log_fd, 2);
    atomic_store(&g_log_pid_prefix, 0); /* stderr lines carry no pid */
    RZ_STATE.log_fd = 2;
    if (atomic_exchange(&g_log_lost_said, 1) == 0) {
        char line[RZ_QUOTE_MAX + 256], quoted[RZ_QUOTE_MAX];
        rz__quote(quoted, g_log_path);
        size_t n = append(line, 0, sizeof line, "redzone: warning: the log METRALE_REDZONE_LOG=");
        n = append(line, n, sizeof line, quoted);
        n = append(line, n, sizeof line, " was closed or replaced by the program and cannot be opened again (");
        const char *why = strerrorname_np(saved); /* strerror is not async-signal-safe */
        n = append(line, n, sizeof line, refused ? rz__refusal(refused) : why ? why : "error");
        n = append(line, n, sizeof line, "); using stderr\n");
        rz__write_all(2, line, n);
    }
    return 2;
}

/* The descriptor a line goes to now (see above). */
static int log_fd(void) {
    int fd = atomic_load_explicit(&g_log_fd, memory_order_relaxed);
    if (!atomic_load_explicit(&g_log_checked, memory_order_relaxed) || log_is_ours(fd))
        return fd;
    return log_lost(fd);
}

/* A forked child that inherited a per-process log: its lines go to its own file, opened with its first line
 * (a child that only execs creates none); failing that, to the inherited one, with its pid on every line. */
static _Atomic int g_log_reopen;

static void log_after_fork(void) { atomic_store(&g_log_reopen, 1); }

static void log_reopen(void) {
    if (RZ_LIKELY(!atomic_load_explicit(&g_log_reopen, memory_order_relaxed)) || !atomic_exchange(&g_log_reopen, 0))
        return;
    char path[RZ_PATH_MAX];
    int refused;
    int fd = rz__expand_path(g_log_template, path, sizeof path) == 0 ? open_log(path, &refused) : -1;
    if (fd < 0) {
        atomic_store(&g_log_pid_prefix, 1);
        return;
    }
    memcpy(g_log_path, path, sizeof path);
    int old = atomic_load(&g_log_fd);
    if (log_is_ours(old)) {
        /* In place: a thread writing now writes to one file or the other. */
        dup3(fd, old, O_CLOEXEC);
        close(fd);
        log_identity(old);
    } else {
        /* The child closed or reused the inherited descriptor: it is the child's, left alone. */
        log_identity(fd);
        atomic_store(&g_log_fd, fd);
        RZ_STATE.log_fd = fd;
    }
}

static void log_open(const char *path, const char *template) {
    if (path == NULL)
        return;
    int refused = 0;
    int fd = open_log(path, &refused);
    if (fd < 0) {
        char buf[RZ_QUOTE_MAX + 256], quoted[RZ_QUOTE_MAX];
        rz__quote(quoted, path);
        int n = snprintf(buf, sizeof buf, "redzone: warning: cannot open METRALE_REDZONE_LOG=%s (%s); using stderr\n",
                         quoted, refused ? rz__refusal(refused) : strerror(errno));
        rz__write_all(2, buf, n > 0 ? (size_t)n : 0);
        return;
    }
    if (!absolute(path, g_log_path, sizeof g_log_path))
        memcpy(g_log_path, path, strlen(path) + 1); /* parse_PATH kept it under RZ_PATH_MAX */
    log_identity(fd);
    atomic_store(&g_log_fd, fd);
    RZ_STATE.log_fd = fd;
    atomic_store(&g_log_checked, 1);
    if (template && strstr(template, "%p") && absolute(template, g_log_template, sizeof g_log_template)) {
        rz__fork_register(NULL, NULL, log_after_fork);
    } else {
        atomic_store(&g_log_pid_prefix, 1);
    }
}


static void log_text(const char *text, size_t len);

/* The help table into the log, the pid on each line where log lines carry it. */
static void help_line(int fd, const char *text, size_t len) {
    (void)fd;
    log_text(text, len);
}

/* Once, before the first line (the lines of the once itself go out through log_text, which does not wait for
 * it): open the log the options name, then their warnings and the help. */
static pthread_once_t g_log_once = PTHREAD_ONCE_INIT;
static _Atomic int g_log_started;

static void log_start_once(void) {
    const rz_options_t *o = rz__options();
    log_open(o->log_path[0] ? o->log_path : NULL, rz__options_log_template());
    if (o->warnings[0])
        log_text(o->warnings, strlen(o->warnings));
    if (o->help)
        rz__options_help_to(help_line, 0);
    atomic_store_explicit(&g_log_started, 1, memory_order_release);
}

void rz__log_start(void) {
    if (RZ_LIKELY(atomic_load_explicit(&g_log_started, memory_order_acquire)))
        return;
    pthread_once(&g_log_once, log_start_once);
}

/* The `redzone[<pid>]: ` a line in the log gets (empty where lines carry no pid); its length. out holds 64. */
static size_t pid_prefix(char *out) {
    if (!atomic_load_explicit(&g_log_pid_prefix, memory_order_relaxed))
        return 0;
    char pid[24];
    rz__format_pid(pid);
    size_t n = 0;
    for (const char *parts[] = {"redzone[", pid, "]: "}, **p = parts; p < parts + 3; p++)
        for (const char *c = *p; *c; c++)
            out[n++] = *c;
    out[n] = '\0';
    return n;
}

size_t rz__log_line_start(char *out) {
    log_reopen();
    log_fd(); /* RZ_STATE.log_fd, which the fatal-signal handler writes to, checked */
    return pid_prefix(out);
}

/* Lines this thread holds back (rz__log_hold): a scan's reports, printed after the registry lock. */
static RZ_TLS rz_log_held_t *t_held;

void rz__log_raw(const char *buf, size_t n) {
    if (n == 0)
        return;
    rz_log_sink_fn sink = rz__thread.log_sink;
    if (sink)
        sink(buf, n); /* a debugger's request: gdb prints it, the program's log does not get it */
    else {
        rz__log_start();
        rz__write_all(log_fd(), buf, n);
    }
}

void rz__log_hold(rz_log_held_t *held) { t_held = held; }

void rz__log_set_thread_sink(rz_log_sink_fn sink) { rz__thread.log_sink = sink; }

/* Keep one line back; 0 when it must go out now (no room, or no memory for the buffer). */
static int hold(const char *buf, size_t n) {
    rz_log_held_t *h = t_held;
    if (h->text == NULL) {
        void *p = mmap(NULL, RZ_LOG_HELD_MAX, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return 0;
        h->text = p;
    }
    if (RZ_LOG_HELD_MAX - h->len < n)
        return 0;
    memcpy(h->text + h->len, buf, n);
    h->len += n;
    return 1;
}

void rz__log_held_release(rz_log_held_t *held) {
    if (held->text)
        munmap(held->text, RZ_LOG_HELD_MAX);
    held->text = NULL;
    held->len = 0;
}

/* The text of a finding that is not printed (finding.h), dropped line by line. */
static RZ_TLS int t_muted;

void rz__log_mute(int on) { t_muted = on; }

static void vlog(const char *prefix, const char *fmt, va_list ap) {
    if (t_in_log || t_muted)
        return;
    t_in_log = 1;
    char buf[1024];
    int sunk = rz__thread.log_sink != NULL; /* a debugger's request: gdb prints it, the program's log does not get it */
    if (!sunk) {
        rz__log_start();
        log_reopen();
    }
    size_t pid = sunk ? 0 : pid_prefix(buf);
    size_t n = pid + (size_t)snprintf(buf + pid, sizeof buf - pid, "%s", prefix);
    int m = vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
    if (m > 0)
        n += (size_t)m < sizeof buf - n - 1 ? (size_t)m : sizeof buf - n - 2;
    buf[n++] = '\n';
    if (t_held == NULL || !hold(buf, n))
        rz__log_raw(buf, n);
    t_in_log = 0;
}

void rz__log_text(const char *text, size_t len) {
    rz__log_start();
    log_text(text, len);
}

static void log_text(const char *text, size_t len) {
    char pid[64];
    size_t np = rz__log_line_start(pid);
    int fd = log_fd();
    while (len > 0) {
        const char *nl = memchr(text, '\n', len);
        size_t line = nl ? (size_t)(nl - text) + 1 : len;
        char buf[1024];
        if (np && np + line <= sizeof buf) {
            memcpy(buf, pid, np); /* one write per line, as every other line */
            memcpy(buf + np, text, line);
            rz__write_all(fd, buf, np + line);
        } else {
            rz__write_all(fd, pid, np);
            rz__write_all(fd, text, line);
        }
        text += line;
        len -= line;
    }
}

void rz__log(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vlog("", fmt, ap);
    va_end(ap);
}

void rz__warn(const char *fmt, ...) {
    unsigned k = atomic_fetch_add_explicit(&g_warnings, 1, memory_order_relaxed);
    if (k > RZ_WARNINGS_MAX)
        return;
    if (k == RZ_WARNINGS_MAX) {
        rz__log("redzone: warning: more than %d warnings; further warnings suppressed", RZ_WARNINGS_MAX);
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vlog("redzone: warning: ", fmt, ap);
    va_end(ap);
}

/* The driver's names for results, registered by the device seam when the driver is loaded (output/ is below
 * device/: it never asks the driver itself). */
static rz_error_namer_fn *g_error_namer;

void rz__report_error_namer(rz_error_namer_fn *namer) { __atomic_store_n(&g_error_namer, namer, __ATOMIC_RELEASE); }

const char *rz__cu_name(rzcu_result r) {
    rz_error_namer_fn *namer = __atomic_load_n(&g_error_namer, __ATOMIC_ACQUIRE);
    const char *name = namer ? namer(r) : NULL;
    return name ? name : rz__cu_result_name((int)r);
}

_Noreturn void rz__check_failed(const char *file, int line, const char *what) {
    char buf[512];
    int n = snprintf(buf, sizeof buf, "redzone: internal check failed at %s:%d: %s\n", file, line, what);
    rz__write_all(2, buf, n > 0 ? (size_t)n : 0);
    abort();
}

RZ_EXPORT const char *rz_status_name(int status) {
    switch (status) {
#define RZ_STATUS_NAME(name, value, msg)                                                                     \
    case value:                                                                                              \
        return #name;
        RZ_STATUS_MAP(RZ_STATUS_NAME)
#undef RZ_STATUS_NAME
    default:
        return "RZ_UNKNOWN";
    }
}

RZ_EXPORT const char *rz_strerror(int status) {
    switch (status) {
#define RZ_STATUS_MSG(name, value, msg)                                                                      \
    case value:                                                                                              \
        return msg;
        RZ_STATUS_MAP(RZ_STATUS_MSG)
#undef RZ_STATUS_MSG
    default:
        return "unknown status";
    }
}
