/*
 * rz-options: the launcher's check of METRALE_REDZONE* values, by the library's own parser (options.inc
 * through rz__options_parse), so `redzone run` and `redzone bisect` accept exactly what the library accepts
 * and never a value the library would warn about and replace. The launcher runs it with the environment the
 * program would get.
 *   rz-options check   -> the library's warning lines on stderr, exit 1 if there are any; on stdout the
 *                         values the launcher needs: pad_bytes=<n> min_idx=<n> scan=<bits>
 *   rz-options list    -> the option table, one option a line: VARIABLE<TAB>TYPE<TAB>DEFAULT<TAB>DESCRIPTION,
 *                         from which `redzone run` makes its flags, --help, the man page and the completion
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "options.h"

static const char *env_lookup(const char *name) { return getenv(name); }

static int list(void) {
#define RZ_OPTION(field, var, type, shown, desc) printf("%s\t%s\t%s\t%s\n", var, #type, shown, desc);
#include "options.inc"
#undef RZ_OPTION
    return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "list") == 0)
        return list();
    if (argc != 2 || strcmp(argv[1], "check") != 0) {
        fprintf(stderr, "usage: rz-options check|list\n");
        return 2;
    }
    static rz_options_t o;
    rz__options_parse(env_lookup, &o);
    printf("pad_bytes=%llu min_idx=%llu scan=%u\n", (unsigned long long)o.pad_bytes,
           (unsigned long long)o.min_idx, o.scan);
    if (o.warnings[0]) {
        fputs(o.warnings, stderr);
        return 1;
    }
    return 0;
}
