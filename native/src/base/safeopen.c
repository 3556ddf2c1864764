/*
 * How redzone opens a file of its own (the log, the summary): for appending, close-on-exec, never on
 * descriptors 0-2, created 0600 (reports hold addresses and call stacks), and never through a symlink that
 * another user planted in a sticky world-writable directory such as /tmp, nor into a file another user
 * created there first. Those are the rules the kernel applies with fs.protected_symlinks=1 and
 * fs.protected_regular=1, checked here too because many systems (containers among them) run with them off,
 * and because a root process would otherwise append to any file a user points a link at, or hand its reports
 * to a user who guessed the name: a link, or an existing file, there is used only when its owner is this
 * process's effective user or the directory's owner. Elsewhere an existing file is appended to as it is (its
 * mode and owner unchanged). Every symlink met along the name as given is judged, the directories' too.
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

#include "common.h"
#include "safeopen.h"
#include "options.h"

int rz__sticky_refused(uid_t owner, uid_t dir_owner, mode_t dir_mode, uid_t euid) {
    int sticky_world_writable = (dir_mode & S_ISVTX) && (dir_mode & S_IWOTH);
    return sticky_world_writable && owner != euid && owner != dir_owner;
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

const char *rz__refusal(int refused) {
    return refused == RZ_REFUSED_FILE ? "a file another user owns in a sticky world-writable directory, not opened"
                                      : "a symlink another user owns in a sticky world-writable directory, not followed";
}

/* The directory a name lies in, walked one component at a time so that every symlink met along the name as
 * given is judged by the same rule (one that is followed resolves as the kernel does). A real directory is
 * opened without following anything (O_NOFOLLOW), so no one can swap a link in between the look and the
 * open; a link is followed only once the rule allows it, and then only its owner or the directory's (both
 * trusted) can replace it. */
static int open_dir(const char *dir, int *refused) {
    int cur = open(dir[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    char comp[RZ_PATH_MAX];
    for (const char *p = dir; cur >= 0;) {
        while (*p == '/')
            p++;
        size_t n = strcspn(p, "/");
        if (n == 0)
            break;
        memcpy(comp, p, n);
        comp[n] = '\0';
        p += n;
        int next = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0 && (errno == ENOTDIR || errno == ELOOP)) {
            int err = errno;
            struct stat d, l;
            if (fstat(cur, &d) == 0 && fstatat(cur, comp, &l, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(l.st_mode)) {
                if (rz__sticky_refused(l.st_uid, d.st_uid, d.st_mode, geteuid())) {
                    *refused = RZ_REFUSED_LINK;
                    close(cur);
                    errno = EACCES;
                    return -1;
                }
                next = openat(cur, comp, O_PATH | O_DIRECTORY | O_CLOEXEC);
            } else {
                errno = err;
            }
        }
        int saved = errno;
        close(cur);
        errno = saved;
        cur = next;
    }
    return cur;
}

int rz__open_append(const char *path, int *refused) {
    const int flags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW;
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
    int dfd = open_dir(dir, refused);
    if (dfd < 0)
        return -1;
    struct stat d, f;
    int fd = -1;
    if (fstat(dfd, &d) != 0)
        goto out;
    /* A new file is ours (0600). An existing one is appended to as it is, unless another user put it in a
     * sticky world-writable directory before us (fs.protected_regular): a guessable name there may be
     * someone's trap to read reports from. */
    fd = openat(dfd, base, flags | O_CREAT | O_EXCL, 0600);
    if (fd < 0 && errno == EEXIST) {
        fd = openat(dfd, base, flags);
        if (fd >= 0 && fstat(fd, &f) == 0 && S_ISREG(f.st_mode) &&
            rz__sticky_refused(f.st_uid, d.st_uid, d.st_mode, geteuid())) {
            close(fd);
            fd = -1;
            *refused = RZ_REFUSED_FILE;
            errno = EACCES;
            goto out;
        }
    }
    if (fd < 0 && (errno == ELOOP || errno == EACCES || errno == EEXIST)) {
        /* The last component is a symlink (or the directory path loops: then fstatat finds no link). Some
         * kernels say EACCES for a link in a sticky directory even with O_NOFOLLOW: the rule is judged here. */
        int err = errno;
        struct stat l;
        if (fstatat(dfd, base, &l, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(l.st_mode)) {
            if (rz__sticky_refused(l.st_uid, d.st_uid, d.st_mode, geteuid())) {
                *refused = RZ_REFUSED_LINK;
                errno = EACCES;
            } else {
                /* Only its owner (trusted) or the directory's can replace it in the meantime: sticky. */
                fd = openat(dfd, base, (flags & ~O_NOFOLLOW) | O_CREAT, 0600);
            }
        } else {
            errno = err;
        }
    }
out:;
    int saved = errno;
    close(dfd);
    errno = saved;
    return above_stdio(fd);
}
