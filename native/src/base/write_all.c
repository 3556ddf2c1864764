/*
 * Writing a whole buffer to a descriptor: what the log, the help text and the summary file all need, below
 * every one of them.
 */
#include <errno.h>
#include <unistd.h>

#include "write_all.h"

void rz__write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        buf += w;
        len -= (size_t)w;
    }
}
