/*
 * How redzone opens a file of its own (safeopen.c).
 */
#ifndef REDZONE_SAFEOPEN_H
#define REDZONE_SAFEOPEN_H

#include "common.h"

/* Open one of redzone's own files for appending (safeopen.c): close-on-exec, above descriptor 2, created
 * 0600; in a sticky world-writable directory, a symlink or an existing file another user owns there is
 * refused (*refused RZ_REFUSED_LINK or RZ_REFUSED_FILE, errno EACCES; else 0). The fd, or -1 with errno.
 * Async-signal-safe. rz__refusal: why, in words. */
#define RZ_REFUSED_LINK 1

#define RZ_REFUSED_FILE 2

int rz__open_append(const char *path, int *refused);

const char *rz__refusal(int refused);

/* The rule for such a symlink or file (the kernel's fs.protected_symlinks and fs.protected_regular): 1 when
 * it must not be used. */
int rz__sticky_refused(uid_t owner, uid_t dir_owner, mode_t dir_mode, uid_t euid);

#endif /* REDZONE_SAFEOPEN_H */
