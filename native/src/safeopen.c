/*
 * How redzone opens a file of its own (the log, the summary): for appending, close-on-exec, never on
 * descriptors 0-2, created 0600 (reports hold addresses and call stacks), and never through a symlink that
 * another user planted in a sticky world-writable directory such as /tmp. That is the rule the kernel applies
 * with fs.protected_symlinks=1, checked here too because many systems (containers among them) run with it
 * off, and because a root process would otherwise append to any file a user points a link at: the link is
 * followed only when its owner is this process's effective user or the directory's owner. An existing file
 * is appended to as it is (its mode and owner unchanged).
 *
 * Async-signal-safe (open, openat, fstat, fstatat, fcntl, close): a forked child's per-process log and a log
 * the program closed are reopened from wherever the next line is written, the fatal-signal handler included.
 * No allocation: the directory name is split off into a stack buffer.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rz_internal.h"

int rz__symlink_refused(uid_t link_owner, uid_t dir_owner, mode_t dir_mode, uid_t euid) {
    int sticky_world_writable = (dir_mode & S_ISVTX) && (dir_mode & S_IWOTH);
    return sticky_world_writable && link_owner != euid && link_owner != dir_owner;
}

/* Off descriptors 0-2: a program that closed its standard streams and opens them again must get them. */
static int above_stdio(int fd) {
    if (fd < 0 || fd > 2)
        return fd;
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    int saved = errno;
    close(fd);
    errno = saved;
    return moved;
}

int rz__open_append(const char *path, int *refused) {
    const int flags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY;
    *refused = 0;
    size_t len = strlen(path);
    const char *slash = strrchr(path, '/');
    char dir[RZ_PATH_MAX];
    const char *base = slash ? slash + 1 : path;
    if (len >= sizeof dir || *base == '\0') {
        errno = len >= sizeof dir ? ENAMETOOLONG : EISDIR;
        return -1;
    }
    if (slash == NULL) {
        dir[0] = '.';
        dir[1] = '\0';
    } else if (slash == path) {
        dir[0] = '/';
        dir[1] = '\0';
    } else {
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = '\0';
    }
    int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    int fd = openat(dfd, base, flags | O_NOFOLLOW, 0600);
    if (fd < 0 && (errno == ELOOP || errno == EACCES)) {
        /* The last component is a symlink (or the directory path loops: then fstatat finds no link). Some
         * kernels say EACCES for a link in a sticky directory even with O_NOFOLLOW: the rule is judged here. */
        int err = errno;
        struct stat d, l;
        if (fstat(dfd, &d) == 0 && fstatat(dfd, base, &l, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(l.st_mode)) {
            if (rz__symlink_refused(l.st_uid, d.st_uid, d.st_mode, geteuid())) {
                *refused = 1;
                errno = EACCES;
            } else {
                /* Only its owner (trusted) or the directory's can replace it in the meantime: sticky. */
                fd = openat(dfd, base, flags, 0600);
            }
        } else {
            errno = err;
        }
    }
    int saved = errno;
    close(dfd);
    errno = saved;
    return above_stdio(fd);
}
