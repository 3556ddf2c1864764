/*
 * libFuzzer target for the option parser (rz__options_parse): the input is split at NUL bytes into one value
 * per METRALE_REDZONE* variable of the option table (a missing piece leaves that variable unset). Whatever
 * the values, parsing must not crash or read out of bounds (ASan, UBSan), and the result must hold the
 * documented invariants; a broken one aborts with the reason.
 *   fuzz/run [--ci]   builds this with clang and runs it (see docs/testing.md)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "options.h"
#include "state.h"

static const char *const k_names[] = {
#define RZ_OPTION(field, var, type, shown, desc) var,
#include "options.inc"
#undef RZ_OPTION
};
#define NOPTS (sizeof k_names / sizeof k_names[0])

static char g_values[NOPTS][4096];
static int g_set[NOPTS];

static const char *fake_getenv(const char *name) {
    for (size_t i = 0; i < NOPTS; i++)
        if (strcmp(name, k_names[i]) == 0)
            return g_set[i] ? g_values[i] : NULL;
    return NULL;
}

static void require(int cond, const char *what) {
    if (!cond) {
        fprintf(stderr, "options_fuzz: invariant broken: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    memset(g_set, 0, sizeof g_set);
    size_t opt = 0, start = 0;
    for (size_t i = 0; i <= size && opt < NOPTS; i++) {
        if (i == size || data[i] == 0) {
            size_t len = i - start;
            if (len >= sizeof g_values[0])
                len = sizeof g_values[0] - 1;
            memcpy(g_values[opt], data + start, len);
            g_values[opt][len] = '\0';
            g_set[opt] = 1;
            opt++;
            start = i + 1;
        }
    }
    rz_options_t o;
    rz__options_parse(fake_getenv, &o);
    require(o.pad_bytes % 16 == 0 && o.pad_bytes <= RZ_PAD_MAX, "band size a multiple of 16, at most 64 MiB");
    require(o.front_bytes % RZ_FRONT_UNIT == 0 && o.front_bytes <= RZ_FRONT_MAX, "front band in 256-byte units");
    require(o.stacks <= 32, "at most 32 stack frames");
    require(!o.poison.set || o.poison.lo <= o.poison.hi, "poison window lo <= hi");
    require((o.scan & ~(unsigned)(RZ_SCAN_FREE | RZ_SCAN_SYNC | RZ_SCAN_EXIT | RZ_SCAN_FATAL | RZ_SCAN_LAUNCH)) == 0,
            "scan bits");
    require(o.guard.n <= RZ_GUARD_LIST_MAX && !(o.guard.every && o.guard.n), "guard selection");
    require(memchr(o.warnings, 0, sizeof o.warnings) != NULL, "warnings terminated");
    require(memchr(o.log_path, 0, sizeof o.log_path) != NULL, "log path terminated");
    /* Values are quoted (rz__quote): nothing but printable ASCII and the newlines between lines. */
    for (const char *c = o.warnings; *c; c++)
        require((*c >= 0x20 && *c < 0x7f) || *c == '\n', "warnings are printable ASCII");
    /* Every warning is one line naming a variable. */
    for (const char *line = o.warnings; *line;) {
        require(strncmp(line, "redzone: warning: METRALE_REDZONE", 33) == 0, "a warning line names its variable");
        const char *nl = strchr(line, '\n');
        require(nl != NULL, "a warning line ends with a newline");
        line = nl + 1;
    }
    return 0;
}
