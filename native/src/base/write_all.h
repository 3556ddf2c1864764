/*
 * Writing a whole buffer to a descriptor (write_all.c).
 */
#ifndef REDZONE_WRITE_ALL_H
#define REDZONE_WRITE_ALL_H

#include "common.h"

/* All of buf to fd, again after EINTR and short writes; gives up silently on an error. Async-signal-safe. */
void rz__write_all(int fd, const char *buf, size_t len);

#endif /* REDZONE_WRITE_ALL_H */
