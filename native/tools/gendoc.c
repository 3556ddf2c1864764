/*
 * rz-gendoc: writes the generated part of the docs (the options table) from the library's one option
 * table, so docs/options.md cannot drift from the code: the docs_current test diffs the two.
 *   rz-gendoc options   -> markdown table on stdout
 */
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "options.h"
#include "state.h"

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "options") == 0) {
        rz__options_markdown(1);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "counters") == 0) {
        printf("| Counter | Kind | Meaning |\n|---|---|---|\n");
#define RZ_DOC_COUNTER(name, kind, desc) printf("| `%s` | %s | %s |\n", #name, #kind, desc);
        RZ_COUNTERS(RZ_DOC_COUNTER)
#undef RZ_DOC_COUNTER
        return 0;
    }
    fprintf(stderr, "usage: rz-gendoc options|counters\n");
    return 2;
}
