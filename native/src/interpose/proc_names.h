/*
 * The interposed entry points' names by version (proc_names.c).
 */
#ifndef REDZONE_PROC_NAMES_H
#define REDZONE_PROC_NAMES_H

#include "common.h"

/* Exported name of the interposed entry point cuGetProcAddress returns for `symbol` at `version` with
 * `flags`, or NULL when redzone does not wrap that symbol at that version (proc_names.c). */
const char *rz__proc_exported_name(const char *symbol, int version, rzcu_uint64 flags);

#endif /* REDZONE_PROC_NAMES_H */
