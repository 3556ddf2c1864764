/*
 * The records that carry a zone's front band from the process exporting an IPC handle to the one opening it
 * (ipc_records.c), on the emulated driver: the file's life (written at export, gone with the free and at exit, never
 * another process's), where it lives (a directory only this user can write), and the lookup a second process
 * makes. The emulated driver opens handles only in the process that made them, so the cross-process tests
 * here stop at the library's lookup in a forked child, which has no export of its own and must read the file:
 * they show that the record reaches another process and is judged there, not that a GPU driver opens the
 * handle there (no test does that yet).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "ipc_records.h"
#include "rz_test.h"
#include "options.h"
#include "registry.h"
#include "state.h"

static char root[64], dir[RZ_PATH_MAX];

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void remove_root(void) {
    if (getpid() == atoi(strrchr(root, '-') + 1)) { /* not from a forked child's exit */
        chmod(dir, 0700);
        nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
}

/* Records under a root of this test's own (the tests change the directory's mode; the real one may be in use
 * by other tests running at the same time), with front bands on. */
static void front_band(void) {
    setenv("METRALE_REDZONE", "64", 1);
    setenv("METRALE_REDZONE_FRONT", "256", 1);
    snprintf(root, sizeof root, "/tmp/rz-ipc-test-%ld", (long)getpid());
    cr_assert(mkdir(root, 0700) == 0 || errno == EEXIST);
    rz__ipc_set_root(root);
    cr_assert_eq(rz__ipc_dir(dir, sizeof dir), 0);
    atexit(remove_root);
}

/* The record file for these handle bytes exists (found by content: the name is a hash of the bytes). */
static int record_exists(const rz_ipc_record_t *rec) {
    rz_ipc_record_t got;
    return rz__ipc_record_read(rec->handle, &got);
}

/* Entries of the directory whose name says they are a temporary file of process pid. */
static int temporaries_of(long pid) {
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    char needle[48];
    snprintf(needle, sizeof needle, ".tmp.%ld.", pid);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strstr(e->d_name, needle) != NULL;
    closedir(d);
    return n;
}

/* A zone with a front band, exported through the driver as ipc.c does it: the handle of the padded block. */
static rz_ipc_record_t export_zone(rz_devptr_t *p, uint64_t *index) {
    cr_assert_eq(rz_mem_alloc(p, 1000), RZCUDA_SUCCESS);
    rz__registry_lock();
    const rz_zone_node_t *z = rz__registry_find(*p);
    cr_assert(z && rz__zone_front(z) == 256);
    *index = z->index;
    rz__registry_unlock();
    rzcu_ipc_mem_handle h;
    cr_assert_eq(cuIpcGetMemHandle(&h, *p - 256), RZCUDA_SUCCESS, "the driver's handle of the padded block");
    rz_ipc_record_t rec = {.front = 256, .user_bytes = 1000, .pid = getpid()};
    memcpy(rec.handle, h.reserved, sizeof rec.handle);
    cr_assert_eq(rz__ipc_export(&rec, *p, *index, NULL), RZ_OK);
    return rec;
}

Test(ipc, a_record_round_trips_in_a_directory_only_this_user_can_write, .init = front_band) {
    rz_ipc_record_t rec = {.front = 512, .user_bytes = 12345, .pid = getpid()};
    for (size_t i = 0; i < sizeof rec.handle; i++)
        rec.handle[i] = (unsigned char)(i * 37 + 5);
    cr_assert_eq(rz__ipc_record_write(&rec, NULL), RZ_OK);
    struct stat st;
    cr_assert_eq(lstat(dir, &st), 0, "%s", dir);
    cr_assert(S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 0777) == 0700, "mode %o", st.st_mode);
    rz_ipc_record_t got;
    cr_assert_eq(rz__ipc_record_read(rec.handle, &got), 1);
    cr_assert_eq(memcmp(&got, &rec, sizeof got), 0);
    cr_assert_eq(temporaries_of(getpid()), 0, "written by rename: no temporary file left");
    rz_ipc_record_t other = rec;
    other.handle[63] ^= 1;
    cr_assert_eq(rz__ipc_record_read(other.handle, &got), 0, "another handle has no record");
    cr_assert_eq(rz__ipc_record_remove(rec.handle), RZ_OK);
    cr_assert_eq(rz__ipc_record_read(rec.handle, &got), 0);
}

Test(ipc, a_record_is_not_trusted_from_a_directory_others_can_write, .init = front_band) {
    rz_ipc_record_t rec = {.front = 256, .user_bytes = 1, .pid = getpid()};
    rec.handle[0] = 0x5a;
    cr_assert_eq(rz__ipc_record_write(&rec, NULL), RZ_OK);
    struct stat st;
    cr_assert_eq(stat(dir, &st), 0);
    cr_assert_eq(chmod(dir, 0777), 0);
    rz_ipc_record_t got;
    int read_open = rz__ipc_record_read(rec.handle, &got);
    cr_assert_eq(chmod(dir, st.st_mode & 07777), 0);
    cr_assert_eq(read_open, 0, "a directory anyone can write is not read");
    cr_assert_eq(rz__ipc_record_read(rec.handle, &got), 1);
    rz__ipc_record_remove(rec.handle);
}

/* The private directory the records went to instead of the usual one: redzone-ipc-<euid>-XXXXXX under root,
 * this user's, mode 0700, not a symlink. */
static void expect_spare(const rz_ipc_place_t *place) {
    char prefix[RZ_PATH_MAX + 16];
    snprintf(prefix, sizeof prefix, "%s-", dir);
    cr_assert(strncmp(place->dir, prefix, strlen(prefix)) == 0 && strlen(place->dir) == strlen(prefix) + 6,
              "records in %s, not beside %s", place->dir, dir);
    cr_assert(place->refused, "the usual name was refused");
    struct stat st;
    cr_assert_eq(lstat(place->dir, &st), 0);
    cr_assert(S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 0777) == 0700, "mode %o", st.st_mode);
}

/* A zone exported while the usual directory is unusable: the record is in a private directory beside it, a
 * second process (a forked child: no export of its own) finds it there, this process's own lookup too, and it
 * goes with the free. */
static void export_elsewhere_and_find_it(void) {
    rzt_context(0);
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 1000), RZCUDA_SUCCESS);
    rz__registry_lock();
    uint64_t index = rz__registry_find(p)->index;
    rz__registry_unlock();
    rzcu_ipc_mem_handle h;
    cr_assert_eq(cuIpcGetMemHandle(&h, p - 256), RZCUDA_SUCCESS);
    rz_ipc_record_t rec = {.front = 256, .user_bytes = 1000, .pid = getpid()}, got;
    memcpy(rec.handle, h.reserved, sizeof rec.handle);
    rz_ipc_place_t place;
    cr_assert_eq(rz__ipc_export(&rec, p, index, &place), RZ_OK, "err %d", place.err);
    expect_spare(&place);
    pid_t child = fork();
    cr_assert(child >= 0);
    if (child == 0)
        _exit(rz__ipc_exports() == 0 && rz__ipc_lookup(rec.handle, &got) == 1 && got.front == 256 &&
                      got.pid == getppid()
                  ? 0
                  : 1);
    int status;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "another process did not find the record");
    cr_assert_eq(rz_mem_free(p), RZCUDA_SUCCESS);
    cr_assert_eq(rz__ipc_record_read(rec.handle, &got), 0, "the record went with the free");
}

/* Another user made the usual directory first (as root: a directory of nobody's, mode 0777; as another user
 * a test cannot be, so then a directory of this user's that others can write, which is refused the same). */
Test(ipc, a_squatted_directory_is_passed_over_for_a_private_one, .init = front_band) {
    cr_assert_eq(mkdir(dir, 0777), 0);
    cr_assert_eq(chmod(dir, 0777), 0);
    if (geteuid() == 0)
        cr_assert_eq(chown(dir, 65534, 65534), 0);
    else
        cr_log_warn("not root: the squatted directory is this user's, mode 0777 (another user's needs root)");
    export_elsewhere_and_find_it();
    struct stat st;
    cr_assert_eq(lstat(dir, &st), 0);
    cr_assert((st.st_mode & 0777) == 0777, "the squatter's directory is left as it was");
    if (geteuid() == 0)
        cr_assert_eq(chown(dir, 0, 0), 0);
}

/* A symlink planted at the usual name is never followed, not even to a private directory of this user's. */
Test(ipc, a_symlink_at_the_usual_name_is_not_followed, .init = front_band) {
    char target[RZ_PATH_MAX + 16];
    snprintf(target, sizeof target, "%s/target", root);
    cr_assert_eq(mkdir(target, 0700), 0);
    cr_assert_eq(symlink(target, dir), 0);
    export_elsewhere_and_find_it();
    DIR *d = opendir(target);
    cr_assert(d);
    int entries = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        entries += e->d_name[0] != '.';
    closedir(d);
    cr_assert_eq(entries, 0, "nothing was written through the symlink");
    unlink(dir);
}

/* No file can be written (here: a file size limit of 0, so every write fails): the export is still this
 * process's, whose own opens get the band; the error says why. */
Test(ipc, an_unwritable_record_is_still_this_process_own, .init = front_band) {
    rzt_context(0);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit none = {0, 0};
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &none), 0);
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 1000), RZCUDA_SUCCESS);
    rzcu_ipc_mem_handle h;
    cr_assert_eq(cuIpcGetMemHandle(&h, p - 256), RZCUDA_SUCCESS);
    rz_ipc_record_t rec = {.front = 256, .user_bytes = 1000, .pid = getpid()}, got;
    memcpy(rec.handle, h.reserved, sizeof rec.handle);
    rz_ipc_place_t place;
    cr_assert_eq(rz__ipc_export(&rec, p, 1, &place), RZ_EIO);
    cr_assert_eq(place.err, EFBIG, "errno %d", place.err);
    cr_assert_eq(rz__ipc_exports(), 1, "remembered anyway");
    cr_assert_eq(rz__ipc_lookup(rec.handle, &got), 1, "this process's own lookup finds it");
    cr_assert_eq(got.front, 256);
    cr_assert_eq(rz__ipc_record_read(rec.handle, &got), 0, "no file");
    cr_assert_eq(temporaries_of(getpid()), 0, "the failed temporary file is gone");
    cr_assert_eq(rz_mem_free(p), RZCUDA_SUCCESS);
    cr_assert_eq(rz__ipc_exports(), 0);
}

/* A full file system (as root: a tmpfs of one page, filled, mounted over the root in a mount namespace of a
 * child's own): ENOSPC, the export still this process's. */
Test(ipc, a_full_file_system_leaves_the_export_this_process_own, .init = front_band) {
    if (geteuid() != 0) {
        cr_skip_test("not root: cannot mount a full tmpfs (an_unwritable_record_is_still_this_process_own covers "
                     "the failed write)");
    }
    rzt_context(0);
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", root, "tmpfs", 0, "size=4k,mode=0700") != 0) {
        cr_skip_test("cannot mount a tmpfs in a private mount namespace: %s", strerror(errno));
    }
    char path[RZ_PATH_MAX + 16], block[4096] = {0};
    snprintf(path, sizeof path, "%s/fill", root);
    int fd = open(path, O_WRONLY | O_CREAT, 0600);
    cr_assert(fd >= 0);
    while (write(fd, block, sizeof block) > 0) {
    }
    close(fd);
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 1000), RZCUDA_SUCCESS);
    rzcu_ipc_mem_handle h;
    cr_assert_eq(cuIpcGetMemHandle(&h, p - 256), RZCUDA_SUCCESS);
    rz_ipc_record_t rec = {.front = 256, .user_bytes = 1000, .pid = getpid()}, got;
    memcpy(rec.handle, h.reserved, sizeof rec.handle);
    rz_ipc_place_t place;
    cr_assert_eq(rz__ipc_export(&rec, p, 1, &place), RZ_EIO);
    cr_assert_eq(place.err, ENOSPC, "errno %d", place.err);
    cr_assert_eq(rz__ipc_lookup(rec.handle, &got), 1, "this process's own lookup finds it");
    cr_assert_eq(rz_mem_free(p), RZCUDA_SUCCESS);
    umount(root);
}

Test(ipc, the_record_goes_with_the_free, .init = front_band) {
    rzt_context(0);
    rz_devptr_t p;
    uint64_t index;
    rz_ipc_record_t rec = export_zone(&p, &index);
    cr_assert(record_exists(&rec));
    cr_assert_eq(rz__ipc_exports(), 1);
    cr_assert_eq(rz__ipc_export(&rec, p, index, NULL), RZ_OK, "exported again: the same record");
    cr_assert_eq(rz__ipc_exports(), 1);
    cr_assert_eq(rz_mem_free(p), RZCUDA_SUCCESS);
    cr_assert(!record_exists(&rec), "the directory entry went with the free");
    cr_assert_eq(rz__ipc_exports(), 0);
}

/* The forked child has no export of its own (its table starts empty), so what it finds came from the file. */
Test(ipc, another_process_finds_the_record_in_its_file, .init = front_band) {
    rzt_context(0);
    rz_devptr_t p;
    uint64_t index;
    rz_ipc_record_t rec = export_zone(&p, &index);
    rz_ipc_record_t got;
    cr_assert_eq(rz__ipc_lookup(rec.handle, &got), 1, "the exporter finds its own");
    for (int removed = 0; removed < 2; removed++) {
        if (removed)
            cr_assert_eq(rz__ipc_record_remove(rec.handle), RZ_OK);
        pid_t child = fork();
        cr_assert(child >= 0);
        if (child == 0) {
            int ok = rz__ipc_exports() == 0 && rz__ipc_lookup(rec.handle, &got) == !removed &&
                     (removed || (got.front == 256 && got.user_bytes == 1000 && got.pid == getppid() &&
                                  memcmp(got.handle, rec.handle, sizeof got.handle) == 0));
            _exit(ok ? 0 : 1);
        }
        int status;
        cr_assert_eq(waitpid(child, &status, 0), child);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s",
                  removed ? "without the file the child found a record" : "the child did not find the record");
    }
    cr_assert_eq(rz__ipc_lookup(rec.handle, &got), 1, "the exporter's own table still has it");
}

static pid_t dead_pid(void) {
    pid_t child = fork();
    cr_assert(child >= 0);
    if (child == 0)
        _exit(0);
    cr_assert_eq(waitpid(child, NULL, 0), child);
    return child;
}

Test(ipc, a_dead_exporters_record_is_ignored_and_swept, .init = front_band) {
    rz_ipc_record_t stale = {.front = 256, .user_bytes = 64, .pid = dead_pid()};
    memset(stale.handle, 0xd1, sizeof stale.handle);
    cr_assert_eq(rz__ipc_record_write(&stale, NULL), RZ_OK);
    rz_ipc_record_t got;
    cr_assert_eq(rz__ipc_record_read(stale.handle, &got), 1, "the file is there");
    cr_assert_eq(rz__ipc_lookup(stale.handle, &got), 0, "but its exporter is gone");
    rzt_context(0);
    rz_devptr_t p;
    uint64_t index;
    rz_ipc_record_t rec = export_zone(&p, &index); /* this process's first export sweeps */
    cr_assert_eq(rz__ipc_record_read(stale.handle, &got), 0, "swept");
    cr_assert(record_exists(&rec));
    cr_assert_eq(rz_mem_free(p), RZCUDA_SUCCESS);
}

/* A child's exit removes the child's records, not its parent's (which the child's table never held). */
Test(ipc, exit_removes_this_process_records_only, .init = front_band) {
    rzt_context(0);
    rz_devptr_t p;
    uint64_t index;
    rz_ipc_record_t parents = export_zone(&p, &index);
    rz_ipc_record_t childs = {.front = 256, .user_bytes = 8};
    memset(childs.handle, 0xc4, sizeof childs.handle);
    pid_t child = fork();
    cr_assert(child >= 0);
    if (child == 0) {
        childs.pid = getpid();
        int ok = rz__ipc_export(&childs, 0x1000, 7, NULL) == RZ_OK && rz__ipc_exports() == 1 && record_exists(&childs);
        exit(ok ? 0 : 1); /* atexit handlers run */
    }
    int status;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child could not export");
    cr_assert(!record_exists(&childs), "the child's record went at its exit");
    cr_assert(record_exists(&parents), "the parent's stayed");
    cr_assert_eq(rz_mem_free(p), RZCUDA_SUCCESS);
    cr_assert(!record_exists(&parents));
}

Test(ipc, opens_are_counted_and_forgotten_at_the_last_close, .init = front_band) {
    uint64_t drv = 0;
    cr_assert_eq(rz__ipc_driver_ptr(0x2100, &drv), 0);
    cr_assert_eq(rz__ipc_opened(0x2100, 0x2000), RZ_OK);
    cr_assert_eq(rz__ipc_opened(0x2100, 0x2000), RZ_OK);
    cr_assert_eq(rz__ipc_opens(), 1);
    cr_assert_eq(rz__ipc_driver_ptr(0x2100, &drv), 1);
    cr_assert_eq(drv, 0x2000);
    cr_assert_eq(rz__ipc_driver_ptr(0x2000, &drv), 0, "the driver's own pointer is no opened pointer");
    rz__ipc_closed(0x2100);
    cr_assert_eq(rz__ipc_driver_ptr(0x2100, &drv), 1, "one open left");
    rz__ipc_closed(0x2100);
    cr_assert_eq(rz__ipc_driver_ptr(0x2100, &drv), 0);
    cr_assert_eq(rz__ipc_opens(), 0);
}
