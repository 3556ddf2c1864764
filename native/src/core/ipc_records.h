/*
 * IPC memory handles of zones with a front band: what the interposed entry points (hooks_ipc.c) and the records
 * that carry the band to the importing process (ipc_records.c) share, and what alloc.c tells them (a zone freed).
 */
#ifndef REDZONE_IPC_H
#define REDZONE_IPC_H

#include "common.h"
#include "options.h"

/*
 * A handle the driver made for a zone with a front band names the padded block, whose base is the band: a
 * process that opens it must add the band to get the program's pointer. The exporter writes what it needs
 * (the handle bytes, the front band, the user size, its pid) to a record file in a private directory; the
 * importer reads it on open and keeps what it opened, so that the close gets the driver's pointer back.
 */
typedef struct rz_ipc_record {
    unsigned char handle[RZCU_IPC_HANDLE_SIZE]; /* the driver's bytes, as it made them */
    uint64_t front;                             /* bytes from the driver's base to the program's pointer */
    uint64_t user_bytes;                        /* the program's size */
    int64_t pid;                                /* the exporting process */
} rz_ipc_record_t;
/* Where a record went: the directory (empty when none), whether the usual name was refused (another user's,
 * a symlink, a directory others can write), and the errno of the last failure when no file was written. */
typedef struct rz_ipc_place {
    char dir[RZ_PATH_MAX];
    int refused;
    int err;
} rz_ipc_place_t;
/* Exporter: zone (ptr, index) was exported as rec (rec->pid: this process): remembered (this process's own
 * opens find it) and its record file written (the directory made on first use, records of dead exporters
 * swept then), where it went in *place (may be NULL). RZ_OK, or an error (warned once): no file, so another
 * process that opens the handle gets the driver's pointer. */
int rz__ipc_export(const rz_ipc_record_t *rec, uint64_t ptr, uint64_t index, rz_ipc_place_t *place);
/* Exporter: the zone at ptr is gone (freed): its records go. One load while nothing is exported. */
void rz__ipc_zone_gone(uint64_t ptr);
/* Importer: the record for these handle bytes: this process's own export, or the record file of a live
 * exporter. 1 and *out, else 0. */
int rz__ipc_lookup(const unsigned char *handle, rz_ipc_record_t *out);
/* Importer: the program got `user` for a mapping the driver opened at `drv` (one open more). RZ_OK/RZ_ENOMEM. */
int rz__ipc_opened(uint64_t user, uint64_t drv);
/* Importer: the driver's pointer behind the program's opened pointer p: 1 and *drv, else 0 (not one). */
int rz__ipc_driver_ptr(uint64_t p, uint64_t *drv);
/* Importer: the driver closed one open of the program's pointer p. */
void rz__ipc_closed(uint64_t p);
/* The usual record directory (/dev/shm/redzone-ipc-<euid>, or under /tmp without /dev/shm) into out; 0 or
 * -1. Records go there when it is this user's private directory; else to a private
 * redzone-ipc-<euid>-XXXXXX that mkdtemp made beside it (ipc_records.c says why); /tmp when /dev/shm takes none. */
int rz__ipc_dir(char *out, size_t cap);
/* The roots those directories are looked for in, for messages ("/dev/shm or /tmp"). */
void rz__ipc_roots(char *out, size_t cap);
/* Tests: make the directories under root only (NULL: the default again). */
void rz__ipc_set_root(const char *root);
/* One record file, by the handle bytes it is named after (a hash of them): write (atomically, by rename;
 * where it went in *place, which may be NULL), read (1 and *out when one of this user's private directories
 * has one that is well formed and names exactly these bytes; the pid is not judged), remove (wherever it is).
 * Write/remove: RZ_OK or an error. */
int rz__ipc_record_write(const rz_ipc_record_t *rec, rz_ipc_place_t *place);
int rz__ipc_record_read(const unsigned char *handle, rz_ipc_record_t *out);
int rz__ipc_record_remove(const unsigned char *handle);
/* Exports and opens remembered now (tests: bounded, gone with their zones and closes). */
size_t rz__ipc_exports(void);
size_t rz__ipc_opens(void);

#endif /* REDZONE_IPC_H */
