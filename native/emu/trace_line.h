/*
 * The trace file shared by the emulated driver's `dev` lines and the call-trace shim's `call` lines
 * (CUDA_EMU_TRACE): opened for appending, each line written with one write(2), so lines of both (and of
 * several threads or a forked child) interleave whole and in the order they were written.
 */
#ifndef REDZONE_EMU_TRACE_LINE_H
#define REDZONE_EMU_TRACE_LINE_H

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Open `path` for appending, %p replaced by the process id; -1 on failure (a warning on stderr). */
static inline int emu_trace_open(const char *path)
{
    char name[1024];
    size_t n = 0;
    for (const char *c = path; *c && n + 24 < sizeof name; c++) {
        if (c[0] == '%' && c[1] == 'p') {
            n += (size_t)snprintf(name + n, sizeof name - n, "%ld", (long)getpid());
            c++;
        } else {
            name[n++] = *c;
        }
    }
    name[n] = '\0';
    int fd = open(name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        fprintf(stderr, "cuda-emu: warning: cannot open CUDA_EMU_TRACE=\"%s\"; no trace\n", path);
    return fd;
}

/* Append one line (len bytes, ending in '\n'). */
static inline void emu_trace_write_line(int fd, const char *line, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, line, len);
        if (w <= 0)
            return;
        line += w;
        len -= (size_t)w;
    }
}

#endif /* REDZONE_EMU_TRACE_LINE_H */
