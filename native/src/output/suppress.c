/*
 * Suppression rules (METRALE_REDZONE_SUPPRESSIONS=FILE), as valgrind's and compute-sanitizer's: one rule a
 * line, `#` starts a comment (to the end of the line), blank lines are skipped. A rule is one or more
 * conditions separated by spaces, all of which must hold:
 *   kernel:GLOB       the kernel a launch check names as the writer, or one of the candidate kernels
 *   alloc-frame:GLOB  a frame of the allocation stack (METRALE_REDZONE_STACKS): its function, or its object
 *                     file (the whole name or the part after the last '/')
 *   kind:NAME         the finding's kind (finding.h: overrun, underrun, copy-refused, bad-free, ...)
 * GLOB takes `*` (any run of characters) and `?` (one character). A finding that matches any rule is neither
 * reported nor counted (finding.c). A line that is no rule gets one warning naming FILE:LINE, and is ignored.
 * The file is read once at start-up into static memory (no heap: findings are judged where malloc's lock may
 * be held), at most MAX_TEXT bytes and MAX_RULES rules (more: one warning).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "suppress.h"
#include "finding.h"
#include "options.h"
#include "report.h"

#define MAX_TEXT (64 << 10)
#define MAX_RULES 256
#define MAX_CONDS 4

enum { COND_KERNEL, COND_FRAME, COND_KIND };

struct cond {
    int what;
    int kind;          /* COND_KIND */
    const char *glob;  /* COND_KERNEL, COND_FRAME: NUL-terminated in g_text */
};

struct rule {
    int n;
    struct cond c[MAX_CONDS];
};

static char g_text[MAX_TEXT + 1];
static struct rule g_rules[MAX_RULES];
static int g_nrules, g_wants_frames;

int rz__glob_match(const char *g, const char *s) {
    const char *star = NULL, *resume = NULL;
    while (*s) {
        if (*g == '*') {
            star = g++;
            resume = s;
        } else if (*g == '?' || *g == *s) {
            g++;
            s++;
        } else if (star) {
            g = star + 1;
            s = ++resume;
        } else {
            return 0;
        }
    }
    while (*g == '*')
        g++;
    return *g == '\0';
}

static int kind_of(const char *name) {
    for (int k = 0; k < RZ_FINDING_NKINDS; k++)
        if (strcmp(name, rz__finding_kind_name(k)) == 0)
            return k;
    return -1;
}

/* One condition from word (NUL-terminated, in g_text); 0 when it is none. */
static int parse_cond(char *word, struct cond *c) {
    static const struct {
        const char *prefix;
        int what;
    } names[] = {{"kernel:", COND_KERNEL}, {"alloc-frame:", COND_FRAME}, {"kind:", COND_KIND}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t len = strlen(names[i].prefix);
        if (strncmp(word, names[i].prefix, len) != 0 || word[len] == '\0')
            continue;
        c->what = names[i].what;
        c->glob = word + len;
        if (c->what == COND_KIND)
            return (c->kind = kind_of(c->glob)) >= 0;
        return 1;
    }
    return 0;
}

static void warn_line(const char *path, unsigned line, const char *text, const char *why) {
    char qpath[RZ_QUOTE_MAX], qtext[RZ_QUOTE_MAX];
    rz__quote(qpath, path);
    rz__quote(qtext, text);
    rz__warn("METRALE_REDZONE_SUPPRESSIONS %s:%u: %s %s; line ignored", qpath, line, qtext, why);
}

static const char k_not_rule[] = "is not a rule (kernel:GLOB, alloc-frame:GLOB, kind:NAME, separated by spaces)";

/* One line (NUL-terminated, in g_text): a rule, nothing (blank, comment), or a warning. */
static void parse_line(const char *path, unsigned lineno, char *line) {
    char *hash = strchr(line, '#');
    if (hash)
        *hash = '\0';
    char shown[512];
    snprintf(shown, sizeof shown, "%s", line);
    struct rule r = {0};
    for (char *p = line;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r')
            p++;
        if (*p == '\0')
            break;
        char *word = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '\r')
            p++;
        if (*p)
            *p++ = '\0';
        if (r.n == MAX_CONDS) {
            warn_line(path, lineno, shown, "has more than 4 conditions");
            return;
        }
        if (!parse_cond(word, &r.c[r.n])) {
            warn_line(path, lineno, shown,
                      strncmp(word, "kind:", 5) == 0 ? "names no kind of finding (see docs/report-format.md)"
                                                     : k_not_rule);
            return;
        }
        r.n++;
    }
    if (r.n == 0)
        return;
    if (g_nrules == MAX_RULES) {
        warn_line(path, lineno, shown, "is past the 256th rule");
        return;
    }
    for (int i = 0; i < r.n; i++)
        g_wants_frames |= r.c[i].what == COND_FRAME;
    g_rules[g_nrules++] = r;
}

void rz__suppress_load(void) {
    const char *path = rz__options()->suppressions_path;
    if (path[0] == '\0')
        return;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    char quoted[RZ_QUOTE_MAX];
    if (fd < 0) {
        rz__quote(quoted, path);
        rz__warn("cannot read METRALE_REDZONE_SUPPRESSIONS=%s (%s); no finding is suppressed", quoted,
                 strerrorname_np(errno) ? strerrorname_np(errno) : "error");
        return;
    }
    size_t n = 0;
    for (;;) {
        ssize_t got = read(fd, g_text + n, MAX_TEXT - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        n += (size_t)got;
        if (n == MAX_TEXT)
            break;
    }
    char probe;
    int longer = n == MAX_TEXT && read(fd, &probe, 1) == 1;
    close(fd);
    g_text[n] = '\0';
    if (longer) {
        rz__quote(quoted, path);
        rz__warn("METRALE_REDZONE_SUPPRESSIONS=%s is longer than %d bytes; the rest is ignored", quoted, MAX_TEXT);
    }
    unsigned lineno = 1;
    for (char *line = g_text; line < g_text + n; lineno++) {
        char *nl = memchr(line, '\n', (size_t)(g_text + n - line));
        if (nl)
            *nl = '\0';
        parse_line(path, lineno, line);
        if (!nl)
            break;
        line = nl + 1;
    }
}

int rz__suppress_wants_frames(void) { return g_wants_frames; }

static const char *base_name(const char *file) {
    const char *slash = strrchr(file, '/');
    return slash ? slash + 1 : file;
}

static int cond_holds(const struct cond *c, const rz_finding_t *f, const rz_frame_sym_t *frames, int nframes) {
    switch (c->what) {
    case COND_KIND:
        return f->kind == c->kind;
    case COND_KERNEL:
        if (f->launch[0] && rz__glob_match(c->glob, f->launch))
            return 1;
        for (unsigned i = 0; i < f->nkernels; i++)
            if (rz__glob_match(c->glob, f->kernels[i]))
                return 1;
        return 0;
    default:
        for (int i = 0; i < nframes; i++) {
            const rz_frame_sym_t *fr = &frames[i];
            if ((fr->named && rz__glob_match(c->glob, fr->func)) || rz__glob_match(c->glob, fr->file) ||
                rz__glob_match(c->glob, base_name(fr->file)))
                return 1;
        }
        return 0;
    }
}

int rz__suppress_match(const rz_finding_t *f, const rz_frame_sym_t *frames, int nframes) {
    for (int i = 0; i < g_nrules; i++) {
        int all = 1;
        for (int k = 0; k < g_rules[i].n && all; k++)
            all = cond_holds(&g_rules[i].c[k], f, frames, nframes);
        if (all)
            return i + 1;
    }
    return 0;
}
