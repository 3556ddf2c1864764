/* The option parser's file also loads the process's options and writes them to the log; the fuzzer only
 * parses, so those output calls are stubbed here and must never run. */
#include <stdlib.h>

#include "common.h"
#include "report.h"

void rz__log_open(const char *path, const char *template) {
    (void)path, (void)template;
    abort();
}

void rz__log_text(const char *text, size_t len) {
    (void)text, (void)len;
    abort();
}

void rz__write_all(int fd, const char *buf, size_t len) {
    (void)fd, (void)buf, (void)len;
    abort();
}
