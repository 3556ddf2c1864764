/*
 * IPC memory handles of zones with a front band: the records that carry the band to the importing process.
 * The driver's handle names the padded block, whose base is the front band, so the importer must add the
 * band to what the driver opens, and the handle's 64 bytes are the driver's to fill: the offset travels
 * beside them. The exporter writes one small file per exported zone in a per-user directory
 * (/dev/shm/redzone-ipc-<euid>, 0700; /tmp/... where there is no /dev/shm), named by a hash of the handle
 * bytes and holding them in full, with the band, the program's size and the exporter's pid; it is written to
 * a temporary name and renamed, so a reader never sees half of one. The file goes when the zone is freed and
 * at exit; records of exporters that died without exiting are ignored by importers and swept by the next
 * exporter. The importer reads the record on open (opens are rare: one open() each) and keeps the pointers it
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

#include "rz_ipc.h"

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

/* ---- record files ------------------------------------------------------------------------------------ */
static char g_root[RZ_PATH_MAX]; /* tests: where the directory is made instead */

void rz__ipc_set_root(const char *root) { snprintf(g_root, sizeof g_root, "%s", root ? root : ""); }

int rz__ipc_dir(char *out, size_t cap) {
    struct stat st;
    const char *root = g_root[0] ? g_root : stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
    int n = snprintf(out, cap, "%s/redzone-ipc-%u", root, (unsigned)geteuid());
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* The directory, when it is this user's own and no one else's to write: a record is trusted only from there. */
static int dir_trusted(const char *dir) {
    struct stat st;
    return lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 077) == 0;
}

static uint64_t handle_hash(const unsigned char *h) {
    uint64_t x = UINT64_C(0xcbf29ce484222325); /* FNV-1a */
    for (size_t i = 0; i < RZCU_IPC_HANDLE_SIZE; i++)
        x = (x ^ h[i]) * UINT64_C(0x100000001b3);
    return x;
}

static int record_path(const unsigned char *handle, char *out, size_t cap) {
    char dir[RZ_PATH_MAX];
    if (rz__ipc_dir(dir, sizeof dir) != 0)
        return -1;
    int n = snprintf(out, cap, "%s/%016llx", dir, (unsigned long long)handle_hash(handle));
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

static int pid_alive(int64_t pid) {
    return pid > 0 && pid <= INT32_MAX && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

int rz__ipc_record_write(const rz_ipc_record_t *rec) {
    char dir[RZ_PATH_MAX], path[RZ_PATH_MAX + 32], tmp[RZ_PATH_MAX + 64];
    if (rz__ipc_dir(dir, sizeof dir) != 0 || record_path(rec->handle, path, sizeof path) != 0)
        return RZ_EIO;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return RZ_EIO;
    if (!dir_trusted(dir))
        return RZ_EIO;
    static _Atomic unsigned serial;
    snprintf(tmp, sizeof tmp, "%s.tmp.%lld.%u", path, (long long)getpid(),
             atomic_fetch_add_explicit(&serial, 1, memory_order_relaxed));
    char line[256];
    int len = snprintf(line, sizeof line, RECORD_HEAD " pid=%lld front=%llu size=%llu handle=", (long long)rec->pid,
                       (unsigned long long)rec->front, (unsigned long long)rec->user_bytes);
    for (size_t i = 0; i < RZCU_IPC_HANDLE_SIZE; i++)
        len += snprintf(line + len, sizeof line - (size_t)len, "%02x", rec->handle[i]);
    len += snprintf(line + len, sizeof line - (size_t)len, "\n");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return RZ_EIO;
    int ok = write(fd, line, (size_t)len) == len;
    ok &= close(fd) == 0;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return RZ_EIO;
    }
    return RZ_OK;
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

static int read_file(const char *path, rz_ipc_record_t *out, const unsigned char *handle) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
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

int rz__ipc_record_read(const unsigned char *handle, rz_ipc_record_t *out) {
    char dir[RZ_PATH_MAX], path[RZ_PATH_MAX + 32];
    if (rz__ipc_dir(dir, sizeof dir) != 0 || !dir_trusted(dir) || record_path(handle, path, sizeof path) != 0)
        return 0;
    return read_file(path, out, handle);
}

int rz__ipc_record_remove(const unsigned char *handle) {
    char path[RZ_PATH_MAX + 32];
    if (record_path(handle, path, sizeof path) != 0)
        return RZ_EIO;
    return unlink(path) == 0 || errno == ENOENT ? RZ_OK : RZ_EIO;
}

/* Records (and temporary files) of exporters that are gone: they ended without exiting (a crash, a kill). */
static void sweep_dead(void) {
    char dir[RZ_PATH_MAX], path[RZ_PATH_MAX + 300];
    if (rz__ipc_dir(dir, sizeof dir) != 0 || !dir_trusted(dir))
        return;
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    for (int seen = 0; seen < SWEEP_MAX && (e = readdir(d)) != NULL; seen++) {
        if (e->d_name[0] == '.' || snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
            continue;
        const char *tmp = strstr(e->d_name, ".tmp.");
        rz_ipc_record_t r;
        long long pid = tmp ? strtoll(tmp + 5, NULL, 10) : read_file(path, &r, NULL) ? r.pid : 0;
        if (pid > 0 && !pid_alive(pid))
            unlink(path);
    }
    closedir(d);
}

/* ---- this process's tables ----------------------------------------------------------------------------- */
static void before_fork(void) { pthread_mutex_lock(&g_mu); }
static void after_fork_parent(void) { pthread_mutex_unlock(&g_mu); }
/* The child exported nothing and opened nothing (the driver's mappings are not inherited); its parent's
 * records stay its parent's, removed by the parent. */
static void after_fork_child(void) {
    g_nexports = g_nopens = 0;
    atomic_store_explicit(&g_exported, 0, memory_order_relaxed);
    atomic_store_explicit(&g_opened, 0, memory_order_relaxed);
    g_swept = 0;
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
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
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

int rz__ipc_export(const rz_ipc_record_t *rec, uint64_t ptr, uint64_t index) {
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
    int rc = RZ_OK;
    if (at == g_nexports &&
        !reserve((void **)&g_exports, &g_cap_exports, g_nexports, sizeof *g_exports))
        rc = RZ_ENOMEM;
    else if ((rc = rz__ipc_record_write(rec)) == RZ_OK && at == g_nexports) {
        g_exports[g_nexports++] = (export_entry_t){.ptr = ptr, .index = index, .rec = *rec};
        atomic_store_explicit(&g_exported, g_nexports, memory_order_relaxed);
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
