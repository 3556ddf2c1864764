/*
 * Findings (finding.c): what every report of a fault in the program goes through before its text is printed,
 * so that the suppression rules (suppress.c), the print limit, the report file (report_file.c: JSON Lines or
 * SARIF) and halting on the first finding apply to every kind the same way.
 */
#ifndef REDZONE_FINDING_H
#define REDZONE_FINDING_H

#include "common.h"

/*
 * The kinds, X(ID, name, description): the name is the record's `kind` and what a `kind:NAME` suppression rule
 * names; the description is the SARIF rule's. A new kind is one line here (its report site builds an
 * rz_finding_t with it and calls rz__finding_admit, see below).
 */
#define RZ_FINDING_KINDS(X)                                                                                  \
    X(OVERRUN, "overrun", "bytes past the end of a device allocation were written")                         \
    X(UNDERRUN, "underrun", "bytes before the start of a device allocation were written")                   \
    X(COPY_REFUSED, "copy-refused", "a copy or memset reaching outside its device buffer was refused")      \
    X(BAD_FREE, "bad-free", "a free of a pointer that is not the start of a device allocation")             \
    X(WRITE_AFTER_FREE, "write-after-free", "bytes of a freed device allocation were written after its free") \
    X(LEAK, "leak", "device allocations still live at exit (METRALE_REDZONE_LEAK_CHECK)")                    \
    X(REGION_OVERRUN, "region-overrun", "bytes past the end of a pool region registered through NVTX were written") \
    X(REGION_AFTER_FREE, "region-write-after-free", "bytes of a pool region were written after NVTX unregistered it")

enum {
#define RZ_FINDING_ENUM(id, name, desc) RZ_FINDING_##id,
    RZ_FINDING_KINDS(RZ_FINDING_ENUM)
#undef RZ_FINDING_ENUM
    RZ_FINDING_NKINDS
};

static inline const char *rz__finding_kind_name(int kind) {
    switch (kind) {
#define RZ_FINDING_NAME_CASE(id, name, desc)                                                                 \
    case RZ_FINDING_##id:                                                                                    \
        return name;
        RZ_FINDING_KINDS(RZ_FINDING_NAME_CASE)
#undef RZ_FINDING_NAME_CASE
    default:
        return "unknown";
    }
}

static inline const char *rz__finding_kind_desc(int kind) {
    switch (kind) {
#define RZ_FINDING_DESC_CASE(id, name, desc)                                                                 \
    case RZ_FINDING_##id:                                                                                    \
        return desc;
        RZ_FINDING_KINDS(RZ_FINDING_DESC_CASE)
#undef RZ_FINDING_DESC_CASE
    default:
        return "unknown";
    }
}

#define RZ_FINDING_KERNELS 8 /* candidate kernels kept in a finding (the text line's NAMES_SHOWN) */

#define RZ_FINDING_NAME 64

/* One finding, as its report site knows it. Fields that do not apply: RZ_FINDING_NONE (numbers), NULL, 0. */
#define RZ_FINDING_NONE INT64_MIN

typedef struct rz_finding {
    int kind;                       /* RZ_FINDING_* */
    uint64_t alloc;                 /* creation index */
    uint64_t ptr;                   /* the program's pointer of the allocation */
    uint64_t user_bytes;
    int64_t pad;                    /* band bytes judged (RZ_FINDING_NONE: not a band finding) */
    int64_t first, last;            /* the bytes, as the text line gives them */
    int64_t changed, first_bad;     /* band findings; RZ_FINDING_NONE otherwise */
    uint64_t addr, bytes;           /* a copy's or free's address and byte count (0: none) */
    const char *entry;              /* the driver entry point (copies, frees), NULL */
    const char *text;               /* the report's first line */
    char launch[RZ_FINDING_NAME];   /* the kernel a launch check names as the writer ("" none) */
    uint64_t launch_seq;            /* its launch number (0: none) */
    char kernels[RZ_FINDING_KERNELS][RZ_FINDING_NAME]; /* the candidate kernels, most recent first */
    unsigned nkernels;
    const uint64_t *alloc_frames;   /* the allocation stack (METRALE_REDZONE_STACKS), return addresses */
    uint32_t nalloc;
    void *const *call_frames;       /* where the refused call was made, NULL */
    uint32_t ncall;
} rz_finding_t;

/* A finding's fate (rz__finding_admit): */
enum {
    RZ_FINDING_SUPPRESSED = 0, /* matched a suppression rule: no text, not counted as a violation, no hook */
    RZ_FINDING_REPORT = 1,     /* the text is printed, counted, the hook called */
    RZ_FINDING_UNPRINTED = 2,  /* over METRALE_REDZONE_PRINT_LIMIT: counted and recorded, no text */
};

/*
 * A report site, for any kind (copy_check.c's report() is the model):
 *     rz_finding_t f = {.kind = RZ_FINDING_<ID>, .alloc = ..., .text = line, ...};
 *     int fate = rz__finding_admit(&f);
 *     if (fate == RZ_FINDING_SUPPRESSED) return;        // no lines, no count, no hook
 *     rz__log_mute(fate != RZ_FINDING_REPORT);           // past the print limit: its lines dropped
 *     rz__log("%s", line); ... its other lines ...
 *     rz__log_mute(0);
 *     rz__count(RZ_C_violations, 1); <its hook>;
 *     rz__finding_done(fate);                            // may halt here
 * Called by every report site before its first line: decides the finding's fate, counts it, prints the
 * suppression rule for it (METRALE_REDZONE_PRINT_SUPPRESSIONS) and writes its record to the report file
 * (METRALE_REDZONE_REPORT) unless suppressed. May symbolize the allocation stack (alloc-frame rules, a report
 * file); never allocates from the heap.
 */
int rz__finding_admit(const rz_finding_t *f);

/* Called by the report site after its last line and its hook, with the fate admit gave: with
 * METRALE_REDZONE_HALT_ON_ERROR, the first finding reported or unprinted ends the process here (RZ_HALT_STATUS,
 * after the report file's summary and the one line that says so). */
void rz__finding_done(int fate);

#define RZ_HALT_STATUS 86

/* Called once by the exit path before the halt, to write what it writes at exit (the summary file). */
typedef void rz_halt_fn(void);

void rz__finding_on_halt(rz_halt_fn *fn);

/* The counts the exit line shows: findings suppressed and findings whose text the print limit held back. */
void rz__finding_counts(uint64_t *suppressed, uint64_t *unprinted);

/* The exit line's tail for them: "" when both are 0, else "; N suppressed, M not printed (...)" into out. */
size_t rz__finding_exit_tail(char *out, size_t cap);

/* Once, after the log is open (start.c, else the first finding): the suppression rules read, the report
 * file opened. */
void rz__findings_start(void);

#endif /* REDZONE_FINDING_H */
