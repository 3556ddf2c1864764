/*
 * IPC memory handles of zones with a front band: the records that carry the band to the importing process.
 * The driver's handle names the padded block, whose base is the front band, so the importer must add the
 * band to what the driver opens, and the handle's 64 bytes are the driver's to fill: the offset travels
 * beside them. The exporter writes one small file per exported zone in a directory of this user's that no
 * one else can write (where: below), named by a hash of the handle bytes and holding them in full, with the
 * band, the program's size and the exporter's pid; it is written to a temporary name and renamed, so a
 * reader never sees half of one. The zone is remembered in this process even when no file can be written
 * (its own opens still get the program's pointer). The file goes when the zone is freed and at exit; records
 * of exporters that died without exiting are ignored by importers and swept by the next exporter. The
 * importer reads the record on open (opens are rare: a few open() calls each) and keeps the pointers it
 * handed out, so that the close gives the driver its own pointer back. Both tables are this process's, under
 * one mutex, as long as what is exported or open now; a forked child starts with empty ones (its parent's
 * files stay its parent's).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "ipc_records.h"
#include "fork.h"
#include "options.h"
#include "registry.h"
#include "state.h"

#define RECORD_HEAD "redzone-ipc 1"
#define SWEEP_MAX 4096 /* directory entries the first export of a process looks at */

typedef struct export_entry {
    uint64_t ptr, index; /* the zone */
    rz_ipc_record_t rec;
} export_entry_t;

typedef struct open_entry {
    uint64_t user, drv; /* what the program got, what the driver opened */
    uint64_t refs;
} open_entry_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static export_entry_t *g_exports;
static size_t g_nexports, g_cap_exports;
static open_entry_t *g_opens;
static size_t g_nopens, g_cap_opens;
static _Atomic size_t g_exported, g_opened; /* g_nexports, g_nopens, read without the lock */
static int g_swept;                          /* this process looked for dead exporters' records */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* ---- where the records live ----------------------------------------------------------------------------
 * /dev/shm and /tmp are sticky and world-writable: any user can make any name there first, and a name there
 * cannot be taken back from its owner. So a directory is used only when it is this user's own and no one
 * else's to write (opened with O_NOFOLLOW | O_DIRECTORY, then judged by fstat: a symlink is never followed,
 * whoever it points to), and the name is not fixed: the usual one, redzone-ipc-<euid>, when it is such a
 * directory or can be made one; else one made by mkdtemp, redzone-ipc-<euid>-XXXXXX, whose name no one can
 * make first. An importer knows only the handle bytes and its euid: it looks in the usual directory, then in
 * every private redzone-ipc-<euid>-* beside it (another user's entries of that pattern are not this user's and
 * are passed over). /dev/shm first, then /tmp: a full /dev/shm (a container's is 64 MiB) sends the record to
 * /tmp. All file operations are relative to the directory's descriptor, so nothing is resolved twice. */
static char g_root[RZ_PATH_MAX]; /* tests: the one root instead */
static pthread_mutex_t g_dir_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_dir[RZ_PATH_MAX]; /* where this process wrote its last record, under g_dir_mu */

void rz__ipc_set_root(const char *root) {
    snprintf(g_root, sizeof g_root, "%s", root ? root : "");
    pthread_mutex_lock(&g_dir_mu);
    g_dir[0] = '\0';
    pthread_mutex_unlock(&g_dir_mu);
}

/* The roots the directories live in, in order; their number. */
static int roots(const char *out[2]) {
    if (g_root[0]) {
        out[0] = g_root;
        return 1;
    }
    struct stat st;
    int n = 0;
    if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode))
        out[n++] = "/dev/shm";
    out[n++] = "/tmp";
    return n;
}

void rz__ipc_roots(char *out, size_t cap) {
    const char *r[2];
    int n = roots(r);
    snprintf(out, cap, "%s%s%s", r[0], n > 1 ? " or " : "", n > 1 ? r[1] : "");
}

static int usual_dir(const char *root, char *out, size_t cap) {
    int n = snprintf(out, cap, "%s/redzone-ipc-%u", root, (unsigned)geteuid());
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

int rz__ipc_dir(char *out, size_t cap) {
    const char *r[2];
    roots(r);
    return usual_dir(r[0], out, cap);
}

/* The directory at path, opened, when it is a directory (not a symlink to one) of this user's that no one
 * else can write; else -1. */
static int open_private(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        close(fd);
        errno = EACCES;
        return -1;
    }
    return fd;
}

/* Whether an entry's name is one mkdtemp made for this user: redzone-ipc-<euid>-XXXXXX. */
static int spare_name(const char *name) {
    char prefix[48];
    int n = snprintf(prefix, sizeof prefix, "redzone-ipc-%u-", (unsigned)geteuid());
    if (strncmp(name, prefix, (size_t)n) != 0 || strlen(name + n) != 6)
        return 0;
    for (const char *c = name + n; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')))
            return 0;
    return 1;
}

/* Calls fn(fd, path, arg) for each private directory of this user's under root, the usual one first, until
 * fn returns nonzero (that value is returned; 0 when none did). */
typedef int place_fn(int fd, const char *path, void *arg);
static int each_place(const char *root, place_fn *fn, void *arg) {
    char path[RZ_PATH_MAX];
    int rc = 0;
    if (usual_dir(root, path, sizeof path) == 0) {
        int fd = open_private(path);
        if (fd >= 0) {
            rc = fn(fd, path, arg);
            close(fd);
            if (rc)
                return rc;
        }
    }
    DIR *d = opendir(root);
    if (d == NULL)
        return 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;) {
        if (!spare_name(e->d_name) || snprintf(path, sizeof path, "%s/%s", root, e->d_name) >= (int)sizeof path)
            continue;
        int fd = open_private(path);
        if (fd >= 0) {
            rc = fn(fd, path, arg);
            close(fd);
        }
    }
    closedir(d);
    return rc;
}

static int take_first(int fd, const char *path, void *arg) {
    (void)fd;
    snprintf((char *)arg, RZ_PATH_MAX, "%s", path);
    return 1;
}

/* A private directory under root for this process's records: the usual one (made if absent), else one of
 * this user's spare ones, else a new spare one. Its descriptor and path, or -1 (errno set). *refused: the
 * usual name is taken by something that is not this user's private directory (another user's, a symlink). */
static int choose_dir(const char *root, char *path, int *refused) {
    if (usual_dir(root, path, RZ_PATH_MAX) != 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return -1;
    int fd = open_private(path);
    if (fd >= 0)
        return fd;
    *refused = 1;
    char spare[RZ_PATH_MAX];
    if (each_place(root, take_first, spare) && (fd = open_private(spare)) >= 0) {
        snprintf(path, RZ_PATH_MAX, "%s", spare);
        return fd;
    }
    int n = snprintf(spare, sizeof spare, "%s/redzone-ipc-%u-XXXXXX", root, (unsigned)geteuid());
    if (n <= 0 || (size_t)n >= sizeof spare || mkdtemp(spare) == NULL)
        return -1;
    snprintf(path, RZ_PATH_MAX, "%s", spare);
    return open_private(path);
}

/* ---- record files ------------------------------------------------------------------------------------ */
static uint64_t handle_hash(const unsigned char *h) {
    uint64_t x = UINT64_C(0xcbf29ce484222325); /* FNV-1a */
    for (size_t i = 0; i < RZCU_IPC_HANDLE_SIZE; i++)
        x = (x ^ h[i]) * UINT64_C(0x100000001b3);
    return x;
}

static void record_name(const unsigned char *handle, char out[24]) {
    snprintf(out, 24, "%016llx", (unsigned long long)handle_hash(handle));
}

static int pid_alive(int64_t pid) {
    return pid > 0 && pid <= INT32_MAX && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

/* The record written into the directory dfd, by a temporary name and a rename; 0, or -1 with errno. */
static int write_in(int dfd, const rz_ipc_record_t *rec) {
    char name[24], tmp[80], line[256];
    record_name(rec->handle, name);
    static _Atomic unsigned serial;
    snprintf(tmp, sizeof tmp, "%s.tmp.%lld.%u", name, (long long)getpid(),
             atomic_fetch_add_explicit(&serial, 1, memory_order_relaxed));
    int len = snprintf(line, sizeof line, RECORD_HEAD " pid=%lld front=%llu size=%llu handle=", (long long)rec->pid,
                       (unsigned long long)rec->front, (unsigned long long)rec->user_bytes);
    for (size_t i = 0; i < RZCU_IPC_HANDLE_SIZE; i++)
        len += snprintf(line + len, sizeof line - (size_t)len, "%02x", rec->handle[i]);
    len += snprintf(line + len, sizeof line - (size_t)len, "\n");
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, line, (size_t)len);
    int err = n == len ? 0 : n < 0 ? errno : ENOSPC;
    if (close(fd) != 0 && err == 0)
        err = errno;
    if (err == 0 && renameat(dfd, tmp, dfd, name) != 0)
        err = errno;
    if (err) {
        unlinkat(dfd, tmp, 0);
        errno = err;
        return -1;
    }
    return 0;
}

int rz__ipc_record_write(const rz_ipc_record_t *rec, rz_ipc_place_t *place) {
    rz_ipc_place_t scratch;
    if (place == NULL)
        place = &scratch;
    memset(place, 0, sizeof *place);
    int rc = RZ_EIO;
    pthread_mutex_lock(&g_dir_mu);
    /* The directory of the last record first, while it is still private (one open, no scan). */
    if (g_dir[0]) {
        int fd = open_private(g_dir);
        if (fd >= 0) {
            if (write_in(fd, rec) == 0)
                rc = RZ_OK;
            else
                place->err = errno;
            close(fd);
        }
    }
    const char *r[2];
    int nroots = roots(r);
    for (int i = 0; i < nroots && rc != RZ_OK; i++) {
        char path[RZ_PATH_MAX];
        int fd = choose_dir(r[i], path, &place->refused);
        if (fd < 0) {
            place->err = errno;
            continue;
        }
        if (write_in(fd, rec) == 0) {
            rc = RZ_OK;
            snprintf(g_dir, sizeof g_dir, "%s", path);
        } else {
            place->err = errno;
        }
        close(fd);
    }
    if (rc == RZ_OK) {
        snprintf(place->dir, sizeof place->dir, "%s", g_dir);
        place->err = 0;
    }
    pthread_mutex_unlock(&g_dir_mu);
    return rc;
}

static int hex_digit(char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; }

/* Two lowercase hex digits, or -1 (a string's end included: nothing past it is read). */
static int hex_byte(const char *s) {
    int hi = hex_digit(s[0]);
    int lo = hi < 0 ? -1 : hex_digit(s[1]);
    return lo < 0 ? -1 : hi * 16 + lo;
}

/* Parse a record file's text; the handle must be exactly `handle` when it is not NULL. */
static int parse_record(const char *text, const unsigned char *handle, rz_ipc_record_t *out) {
    long long pid;
    unsigned long long front, size;
    int at = 0;
    if (sscanf(text, RECORD_HEAD " pid=%lld front=%llu size=%llu handle=%n", &pid, &front, &size, &at) != 3 || at == 0)
        return 0;
    const char *hex = text + at;
    rz_ipc_record_t r = {.front = front, .user_bytes = size, .pid = pid};
    for (size_t i = 0; i < RZCU_IPC_HANDLE_SIZE; i++) {
        int b = hex_byte(hex + 2 * i);
        if (b < 0)
            return 0;
        r.handle[i] = (unsigned char)b;
    }
    if (hex[2 * RZCU_IPC_HANDLE_SIZE] != '\n' || (handle && memcmp(r.handle, handle, sizeof r.handle) != 0) ||
        front == 0 || front > RZ_FRONT_MAX)
        return 0;
    *out = r;
    return 1;
}

/* The record in file `name` of the directory dfd: this user's own regular file, well formed. */
static int read_file(int dfd, const char *name, rz_ipc_record_t *out, const unsigned char *handle) {
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char text[512];
    struct stat st;
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() ? read(fd, text, sizeof text - 1)
                                                                                        : -1;
    close(fd);
    if (n <= 0)
        return 0;
    text[n] = '\0';
    return parse_record(text, handle, out);
}

struct find {
    const unsigned char *handle;
    rz_ipc_record_t *out;
    int remove;
};

static int find_in(int dfd, const char *path, void *arg) {
    (void)path;
    struct find *f = arg;
    char name[24];
    record_name(f->handle, name);
    rz_ipc_record_t r;
    if (!read_file(dfd, name, &r, f->handle))
        return 0;
    if (f->remove)
        return unlinkat(dfd, name, 0) == 0 || errno == ENOENT ? 1 : 0;
    *f->out = r;
    return 1;
}

int rz__ipc_record_read(const unsigned char *handle, rz_ipc_record_t *out) {
    struct find f = {.handle = handle, .out = out};
    const char *r[2];
    int nroots = roots(r);
    for (int i = 0; i < nroots; i++)
        if (each_place(r[i], find_in, &f))
            return 1;
    return 0;
}

/* In the directory of this process's last record first (almost always where it is), else wherever it is. */
int rz__ipc_record_remove(const unsigned char *handle) {
    struct find f = {.handle = handle, .remove = 1};
    pthread_mutex_lock(&g_dir_mu);
    int fd = g_dir[0] ? open_private(g_dir) : -1;
    pthread_mutex_unlock(&g_dir_mu);
    if (fd >= 0) {
        int done = find_in(fd, NULL, &f);
        close(fd);
        if (done)
            return RZ_OK;
    }
    const char *r[2];
    int nroots = roots(r);
    for (int i = 0; i < nroots; i++)
        each_place(r[i], find_in, &f);
    return RZ_OK;
}

/* Records (and temporary files) of exporters that are gone: they ended without exiting (a crash, a kill). */
static int sweep_in(int dfd, const char *path, void *arg) {
    (void)path;
    (void)arg;
    int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
    DIR *d = dup_fd < 0 ? NULL : fdopendir(dup_fd);
    if (d == NULL) {
        if (dup_fd >= 0)
            close(dup_fd);
        return 0;
    }
    struct dirent *e;
    for (int seen = 0; seen < SWEEP_MAX && (e = readdir(d)) != NULL; seen++) {
        if (e->d_name[0] == '.')
            continue;
        const char *tmp = strstr(e->d_name, ".tmp.");
        rz_ipc_record_t r;
        long long pid = tmp ? strtoll(tmp + 5, NULL, 10) : read_file(dfd, e->d_name, &r, NULL) ? r.pid : 0;
        if (pid > 0 && !pid_alive(pid))
            unlinkat(dfd, e->d_name, 0);
    }
    closedir(d);
    return 0;
}

static void sweep_dead(void) {
    const char *r[2];
    int nroots = roots(r);
    for (int i = 0; i < nroots; i++)
        each_place(r[i], sweep_in, NULL);
}

/* ---- this process's tables ----------------------------------------------------------------------------- */
static void before_fork(void) {
    pthread_mutex_lock(&g_mu);
    pthread_mutex_lock(&g_dir_mu);
}
static void after_fork_parent(void) {
    pthread_mutex_unlock(&g_dir_mu);
    pthread_mutex_unlock(&g_mu);
}
/* The child exported nothing and opened nothing (the driver's mappings are not inherited); its parent's
 * records stay its parent's, removed by the parent. */
static void after_fork_child(void) {
    g_nexports = g_nopens = 0;
    atomic_store_explicit(&g_exported, 0, memory_order_relaxed);
    atomic_store_explicit(&g_opened, 0, memory_order_relaxed);
    g_swept = 0;
    pthread_mutex_init(&g_dir_mu, NULL);
    pthread_mutex_init(&g_mu, NULL);
}

/* A thread that holds the lock while another exits would hang the exit: then the files stay, for the next
 * exporter's sweep (their pid is gone). */
static void at_exit(void) {
    if (pthread_mutex_trylock(&g_mu) != 0)
        return;
    for (size_t i = 0; i < g_nexports; i++)
        rz__ipc_record_remove(g_exports[i].rec.handle);
    g_nexports = 0;
    atomic_store_explicit(&g_exported, 0, memory_order_relaxed);
    pthread_mutex_unlock(&g_mu);
}

static void arm(void) {
    rz__fork_register(before_fork, after_fork_parent, after_fork_child);
    atexit(at_exit);
}

static void drop_export(size_t i) {
    rz__ipc_record_remove(g_exports[i].rec.handle);
    g_exports[i] = g_exports[--g_nexports];
    atomic_store_explicit(&g_exported, g_nexports, memory_order_relaxed);
}

/* Grow a table to hold one more; 0 when out of memory. */
static int reserve(void **table, size_t *cap, size_t n, size_t size) {
    if (n < *cap)
        return 1;
    size_t want = *cap ? *cap * 2 : 16;
    void *p = realloc(*table, want * size);
    if (p == NULL)
        return 0;
    *table = p;
    *cap = want;
    return 1;
}

int rz__ipc_export(const rz_ipc_record_t *rec, uint64_t ptr, uint64_t index, rz_ipc_place_t *place) {
    pthread_once(&g_once, arm);
    pthread_mutex_lock(&g_mu);
    if (!g_swept) {
        g_swept = 1;
        sweep_dead();
    }
    /* Zones that went without a free through redzone (their context ended) leave their records here. */
    for (size_t i = 0; i < g_nexports;) {
        rz__registry_lock();
        const rz_zone_node_t *z = rz__registry_find(g_exports[i].ptr);
        int live = z && z->index == g_exports[i].index;
        rz__registry_unlock();
        if (live)
            i++;
        else
            drop_export(i);
    }
    size_t at = 0;
    while (at < g_nexports && !(g_exports[at].ptr == ptr && g_exports[at].index == index &&
                                memcmp(g_exports[at].rec.handle, rec->handle, sizeof rec->handle) == 0))
        at++;
    /* Remembered even when no file could be written: this process's own opens still find the band. */
    int rc = rz__ipc_record_write(rec, place);
    if (at == g_nexports) {
        if (reserve((void **)&g_exports, &g_cap_exports, g_nexports, sizeof *g_exports)) {
            g_exports[g_nexports++] = (export_entry_t){.ptr = ptr, .index = index, .rec = *rec};
            atomic_store_explicit(&g_exported, g_nexports, memory_order_relaxed);
        } else if (rc == RZ_OK) {
            rz__ipc_record_remove(rec->handle); /* nothing would remove it */
            rc = RZ_ENOMEM;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

void rz__ipc_zone_gone(uint64_t ptr) {
    if (RZ_LIKELY(atomic_load_explicit(&g_exported, memory_order_relaxed) == 0))
        return;
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_nexports;) {
        if (g_exports[i].ptr == ptr)
            drop_export(i);
        else
            i++;
    }
    pthread_mutex_unlock(&g_mu);
}

int rz__ipc_lookup(const unsigned char *handle, rz_ipc_record_t *out) {
    int found = 0;
    if (atomic_load_explicit(&g_exported, memory_order_relaxed)) {
        pthread_mutex_lock(&g_mu);
        for (size_t i = 0; i < g_nexports && !found; i++) {
            if (memcmp(g_exports[i].rec.handle, handle, RZCU_IPC_HANDLE_SIZE) == 0) {
                *out = g_exports[i].rec;
                found = 1;
            }
        }
        pthread_mutex_unlock(&g_mu);
    }
    if (!found && rz__ipc_record_read(handle, out))
        found = pid_alive(out->pid);
    return found;
}

int rz__ipc_opened(uint64_t user, uint64_t drv) {
    pthread_once(&g_once, arm);
    int rc = RZ_OK;
    pthread_mutex_lock(&g_mu);
    size_t at = 0;
    while (at < g_nopens && !(g_opens[at].user == user && g_opens[at].drv == drv))
        at++;
    if (at < g_nopens) {
        g_opens[at].refs++;
    } else if (reserve((void **)&g_opens, &g_cap_opens, g_nopens, sizeof *g_opens)) {
        g_opens[g_nopens++] = (open_entry_t){.user = user, .drv = drv, .refs = 1};
        atomic_store_explicit(&g_opened, g_nopens, memory_order_relaxed);
    } else {
        rc = RZ_ENOMEM;
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

int rz__ipc_driver_ptr(uint64_t p, uint64_t *drv) {
    if (RZ_LIKELY(atomic_load_explicit(&g_opened, memory_order_relaxed) == 0))
        return 0;
    int found = 0;
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_nopens && !found; i++) {
        if (g_opens[i].user == p) {
            *drv = g_opens[i].drv;
            found = 1;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return found;
}

void rz__ipc_closed(uint64_t p) {
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_nopens; i++) {
        if (g_opens[i].user == p) {
            if (--g_opens[i].refs == 0) {
                g_opens[i] = g_opens[--g_nopens];
                atomic_store_explicit(&g_opened, g_nopens, memory_order_relaxed);
            }
            break;
        }
    }
    pthread_mutex_unlock(&g_mu);
}

size_t rz__ipc_exports(void) { return atomic_load_explicit(&g_exported, memory_order_relaxed); }
size_t rz__ipc_opens(void) { return atomic_load_explicit(&g_opened, memory_order_relaxed); }
