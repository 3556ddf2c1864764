/* Option parsing: seed semantics for every variable, one warning per rejected value, help and docs. */
#include "rz_test.h"

#include <criterion/parameterized.h> /* after criterion.h, which rz_test.h includes */

/* A fake environment: name=value pairs. */
static const char *fake_names[8];
static const char *fake_values[8];
static int fake_n;
static const char *fake_getenv(const char *name) {
    for (int i = 0; i < fake_n; i++)
        if (strcmp(fake_names[i], name) == 0)
            return fake_values[i];
    return NULL;
}
static void fake_set(const char *name, const char *value) {
    if (strcmp(value, "-") == 0)
        return; /* unset */
    fake_names[fake_n] = name;
    fake_values[fake_n] = value;
    fake_n++;
}

/* Parameters are copied into each test's own process, where addresses differ: strings live inline. */
struct band_case {
    char value[32]; /* "-" means unset */
    uint64_t pad;
    int warns;
};

ParameterizedTestParameters(options, band_size) {
    static struct band_case cases[] = {
        {"-", 0, 0},   {"", 0, 1},     {"0", 0, 0},   {"1", 16, 0},   {"15", 16, 0},
        {"16", 16, 0},  {"17", 32, 0},  {"-5", 0, 1},  {"abc", 0, 1},  {"0x10", 0, 1},
        {" 16", 0, 1},  {"16 ", 0, 1},  {"+16", 16, 0}, {"99999999999999999999999", 0, 1},
        {"18446744073709551615", 0, 1}, {"67108864", 67108864, 0}, {"67108865", 0, 1},
    };
    return cr_make_param_array(struct band_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct band_case *c, options, band_size) {
    fake_n = 0;
    fake_set("METRALE_REDZONE", c->value);
    rz_options_t o;
    rz__options_parse(fake_getenv, &o);
    cr_assert_eq(o.pad_bytes, c->pad, "METRALE_REDZONE=%s: pad %llu, want %llu", c->value,
                 (unsigned long long)o.pad_bytes, (unsigned long long)c->pad);
    cr_assert_eq(rzt_count(o.warnings, "\n"), c->warns, "warnings: [%s]", o.warnings);
    if (c->warns)
        cr_assert(strstr(o.warnings, "METRALE_REDZONE=") && strstr(o.warnings, "using 0"), "%s", o.warnings);
}

struct idx_case {
    char value[32];
    uint64_t min_idx;   /* METRALE_REDZONE_MIN_IDX */
    uint64_t trace_idx; /* METRALE_REDZONE_TRACE_IDX */
    int warns;
};

ParameterizedTestParameters(options, indices) {
    static struct idx_case cases[] = {
        {"-", 0, RZ_INDEX_NONE, 0}, {"", 0, RZ_INDEX_NONE, 2},     {"0", 0, 0, 0},
        {"7", 7, 7, 0},              {"-1", 0, RZ_INDEX_NONE, 2},   {"abc", 0, RZ_INDEX_NONE, 2},
        {"0x10", 0, RZ_INDEX_NONE, 2}, {" 3", 0, RZ_INDEX_NONE, 2}, {"99999999999999999999999", 0, RZ_INDEX_NONE, 2},
        {"18446744073709551614", 18446744073709551614ull, 18446744073709551614ull, 0},
    };
    return cr_make_param_array(struct idx_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct idx_case *c, options, indices) {
    fake_n = 0;
    fake_set("METRALE_REDZONE_MIN_IDX", c->value);
    fake_set("METRALE_REDZONE_TRACE_IDX", c->value);
    rz_options_t o;
    rz__options_parse(fake_getenv, &o);
    cr_assert_eq(o.min_idx, c->min_idx);
    cr_assert_eq(o.trace_idx, c->trace_idx);
    cr_assert_eq(rzt_count(o.warnings, "\n"), c->warns, "[%s]", o.warnings);
    if (c->warns) {
        cr_assert(strstr(o.warnings, "METRALE_REDZONE_MIN_IDX=") && strstr(o.warnings, "using 0"));
        cr_assert(strstr(o.warnings, "METRALE_REDZONE_TRACE_IDX=") && strstr(o.warnings, "using unset"));
    }
}

struct fill_case {
    char value[32];
    unsigned fill;
    int warns;
};

ParameterizedTestParameters(options, fill) {
    static struct fill_case cases[] = {
        {"-", 238, 0}, {"0", 0, 0},    {"1", 1, 0},     {"255", 255, 0}, {"256", 238, 1},  {"-1", 238, 1},
        {"abc", 238, 1}, {"0xEE", 238, 1}, {"", 238, 1}, {" 7", 238, 1},  {"+7", 7, 0},
    };
    return cr_make_param_array(struct fill_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct fill_case *c, options, fill) {
    fake_n = 0;
    fake_set("METRALE_REDZONE_FILL", c->value);
    rz_options_t o;
    rz__options_parse(fake_getenv, &o);
    cr_assert_eq(o.fill, c->fill);
    cr_assert_eq(rzt_count(o.warnings, "\n"), c->warns, "[%s]", o.warnings);
    if (c->warns)
        cr_assert(strstr(o.warnings, "METRALE_REDZONE_FILL=") && strstr(o.warnings, "using 238"));
}

Test(options, log_path_expands_pid) {
    fake_n = 0;
    fake_set("METRALE_REDZONE_LOG", "/tmp/rz-%p.log");
    rz_options_t o;
    rz__options_parse(fake_getenv, &o);
    char want[64];
    snprintf(want, sizeof want, "/tmp/rz-%ld.log", (long)getpid());
    cr_assert_str_eq(o.log_path, want);
    cr_assert_str_empty(o.warnings);
}

/* Issue 31 item 3: %q{ENV} in file names (compute-sanitizer's convention), from the environment parsed. */
Test(options, path_expands_q_env) {
    fake_n = 0;
    fake_set("OMPI_COMM_WORLD_RANK", "7");
    fake_set("METRALE_REDZONE_LOG", "/tmp/rz-%q{OMPI_COMM_WORLD_RANK}-%p-%q{UNSET_31}.log");
    fake_set("METRALE_REDZONE_REPORT", "r%q{OMPI_COMM_WORLD_RANK}.sarif");
    rz_options_t o;
    rz__options_parse(fake_getenv, &o);
    char want[64];
    snprintf(want, sizeof want, "/tmp/rz-7-%ld-.log", (long)getpid());
    cr_assert_str_eq(o.log_path, want);
    cr_assert_str_eq(o.report_path, "r7.sarif");
    cr_assert_str_empty(o.warnings);
    const char *bad[] = {"a%q", "a%qb", "a%q{", "a%q{}", "a%q{A-B}", "a%q{AB"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fake_n = 0;
        fake_set("METRALE_REDZONE_LOG", bad[i]);
        rz__options_parse(fake_getenv, &o);
        cr_assert_str_empty(o.log_path, "%s", bad[i]);
        cr_assert(strstr(o.warnings, "has a %q not followed by {NAME} (letters, digits, _); using stderr"), "%s",
                  o.warnings);
    }
    fake_set("OMPI_COMM_WORLD_RANK", "7");
    char out[8];
    cr_assert_eq(rz__expand_name("%q{OMPI_COMM_WORLD_RANK}1234567", fake_getenv, 1, out, sizeof out), -1);
    cr_assert_eq(rz__expand_name("x%p", fake_getenv, 0, out, sizeof out), 0);
    cr_assert_str_eq(out, "x%p", "a template keeps %p for a forked child");
}

Test(options, suppression_globs) {
    cr_assert(rz__glob_match("scrib*", "scribble"));
    cr_assert(rz__glob_match("*ribb?e", "scribble"));
    cr_assert(rz__glob_match("*", ""));
    cr_assert(rz__glob_match("a*b*c", "axxbyyc"));
    cr_assert(!rz__glob_match("a*b*c", "axxbyy"));
    cr_assert(!rz__glob_match("scrib", "scribble"));
    cr_assert(!rz__glob_match("?", ""));
}

Test(options, empty_log_path_warns_and_keeps_stderr) {
    fake_n = 0;
    fake_set("METRALE_REDZONE_LOG", "");
    rz_options_t o;
    rz__options_parse(fake_getenv, &o);
    cr_assert_str_empty(o.log_path);
    cr_assert(strstr(o.warnings, "METRALE_REDZONE_LOG=\"\" is empty; using stderr"), "%s", o.warnings);
}

Test(options, help_flag) {
    fake_n = 0;
    fake_set("METRALE_REDZONE_HELP", "1");
    rz_options_t o;
    rz__options_parse(fake_getenv, &o);
    cr_assert(o.help);
    fake_n = 0;
    fake_set("METRALE_REDZONE_HELP", "yes");
    rz__options_parse(fake_getenv, &o);
    cr_assert(!o.help);
    cr_assert(strstr(o.warnings, "METRALE_REDZONE_HELP=\"yes\" is not 0 or 1; using 0"));
}

/* METRALE_REDZONE_POISON: the parsed window and its one warning line; the process path below checks that it
 * reaches the state block a debugger reads. */
struct window_case {
    char value[48]; /* "-" means unset */
    int set;
    uint64_t lo, hi;
};

ParameterizedTestParameters(options, poison_window) {
    static struct window_case cases[] = {
        {"-", 0, 0, 0},          {"0:0", 1, 0, 0},      {"3:7", 1, 3, 7},       {"+3:+7", 1, 3, 7},
        {"5:5", 1, 5, 5},        {"0:18446744073709551615", 1, 0, UINT64_MAX},  {"7:3", 0, 0, 0},
        {"3", 0, 0, 0},          {":", 0, 0, 0},        {"3:", 0, 0, 0},        {":7", 0, 0, 0},
        {"a:b", 0, 0, 0},        {" 3:7", 0, 0, 0},     {"3:7 ", 0, 0, 0},      {"3:7:9", 0, 0, 0},
        {"-1:3", 0, 0, 0},       {"0x1:0x2", 0, 0, 0},  {"", 0, 0, 0},
        {"99999999999999999999999:1", 0, 0, 0},          {"1:99999999999999999999999", 0, 0, 0},
        {"0000000000000000000000000000000000000001:2", 0, 0, 0}, /* lo longer than any number */
    };
    return cr_make_param_array(struct window_case, cases, sizeof cases / sizeof cases[0]);
}

static int window_warns(const struct window_case *c) { return !c->set && strcmp(c->value, "-") != 0; }

ParameterizedTest(struct window_case *c, options, poison_window) {
    fake_n = 0;
    fake_set("METRALE_REDZONE_POISON", c->value);
    rz_options_t o;
    rz__options_parse(fake_getenv, &o);
    cr_assert_eq(rzt_count(o.warnings, "\n"), window_warns(c), "METRALE_REDZONE_POISON=%s: [%s]", c->value, o.warnings);
    if (window_warns(c)) {
        char want[256];
        snprintf(want, sizeof want, "redzone: warning: METRALE_REDZONE_POISON=\"%s\" is not a window <lo>:<hi> "
                 "(decimal, lo <= hi); using unset (no window)\n", c->value);
        cr_assert_str_eq(o.warnings, want);
    }
    cr_assert_eq(o.poison.set, c->set, "METRALE_REDZONE_POISON=%s", c->value);
    if (c->set) {
        cr_assert_eq(o.poison.lo, c->lo);
        cr_assert_eq(o.poison.hi, c->hi);
    }
}

ParameterizedTestParameters(options, poison_window_in_state) {
    static struct window_case cases[] = {
        {"-", 0, 0, 0}, {"0:0", 1, 0, 0}, {"3:7", 1, 3, 7}, {"7:3", 0, 0, 0}, {"x", 0, 0, 0},
    };
    return cr_make_param_array(struct window_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct window_case *c, options, poison_window_in_state) {
    const char *log = rzt_log_to_file();
    if (strcmp(c->value, "-") != 0)
        setenv("METRALE_REDZONE_POISON", c->value, 1);
    else
        unsetenv("METRALE_REDZONE_POISON");
    rz__log_start(); /* as start-up: the options, and their warnings in the log */
    cr_assert_eq(RZ_STATE.poison_active, c->set, "METRALE_REDZONE_POISON=%s", c->value);
    if (c->set) {
        cr_assert_eq(RZ_STATE.poison_lo, c->lo);
        cr_assert_eq(RZ_STATE.poison_hi, c->hi);
    }
    char *text = rzt_read_log(log);
    cr_assert_eq(rzt_count(text, "METRALE_REDZONE_POISON="), window_warns(c), "%s", text);
    free(text);
    unlink(log);
}

/* The window applies at fill time from the first allocation on: 0xEE inside [1, 3), 0x00 outside, whatever
 * the fill; a scan right after finds every band as expected. */
struct band_seen {
    uint8_t expected[8];
    int n;
};
static int note_expected(const rz_zone_info_t *zone, void *arg) {
    struct band_seen *seen = arg;
    if (zone->index < 8)
        seen->expected[zone->index] = zone->expected;
    seen->n++;
    return 0;
}

Test(options, poison_window_fills_bands_from_the_first_allocation) {
    const char *log = rzt_log_to_file();
    setenv("METRALE_REDZONE", "16", 1);
    setenv("METRALE_REDZONE_FILL", "7", 1);
    setenv("METRALE_REDZONE_POISON", "1:3", 1);
    rzt_context(0);
    rz_devptr_t p[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(rz_mem_alloc(&p[i], 100), RZCUDA_SUCCESS);
    for (int i = 0; i < 4; i++) {
        uint8_t band[16];
        cr_assert_eq(cuMemcpyDtoH_v2(band, p[i] + 100, sizeof band), RZCUDA_SUCCESS);
        uint8_t want = (i >= 1 && i < 3) ? 0xEE : 0x00;
        for (int j = 0; j < 16; j++)
            cr_assert_eq(band[j], want, "alloc#%d band byte %d is 0x%02x, want 0x%02x", i, j, band[j], want);
    }
    struct band_seen seen = {{0}, 0};
    cr_assert_eq(rz_zone_foreach(note_expected, &seen), 0);
    cr_assert_eq(seen.n, 4);
    cr_assert(seen.expected[0] == 0x00 && seen.expected[1] == 0xEE && seen.expected[2] == 0xEE &&
              seen.expected[3] == 0x00);
    cr_assert_eq(rz_scan(), 0, "bands hold the window's bytes: nothing is violated");
    for (int i = 0; i < 4; i++)
        cr_assert_eq(rz_mem_free(p[i]), RZCUDA_SUCCESS);
    unlink(log);
}

/* The process path: read once, warnings go to the log once (when it opens, at start-up), help prints every
 * variable. */
Test(options, process_options_read_once_with_one_warning_line) {
    const char *log = rzt_log_to_file();
    setenv("METRALE_REDZONE", "abc", 1);
    setenv("METRALE_REDZONE_FILL", "300", 1);
    setenv("METRALE_REDZONE_HELP", "1", 1);
    const rz_options_t *o = rz__options();
    rz__log_start();
    setenv("METRALE_REDZONE", "64", 1); /* too late: options are read once per process */
    cr_assert_eq(rz__options(), o);
    rz__log_start(); /* and said once */
    cr_assert_eq(o->pad_bytes, 0);
    cr_assert_eq(o->fill, 238);
    char *text = rzt_read_log(log);
    cr_assert_eq(rzt_count(text, "redzone: warning: METRALE_REDZONE=\"abc\""), 1, "%s", text);
    cr_assert_eq(rzt_count(text, "redzone: warning: METRALE_REDZONE_FILL=\"300\" is not a byte (decimal 0-255); using 238"), 1);
#define RZ_OPTION(field, var, type, shown, desc) cr_assert(strstr(text, var " "), "help lacks " var);
#include "options.inc"
#undef RZ_OPTION
    free(text);
    unlink(log);
}

Test(options, status_table) {
    cr_assert_str_eq(rz_status_name(RZ_OK), "RZ_OK");
    cr_assert_str_eq(rz_status_name(RZ_EINVAL), "RZ_EINVAL");
    cr_assert_str_eq(rz_status_name(12345), "RZ_UNKNOWN");
    cr_assert_str_eq(rz_strerror(RZ_EBUSY), "busy: a scan or poison is already running on this thread, or the registry is held by a stopped thread");
#define RZ_CHECK_NEGATIVE(name, value, msg) cr_assert(value <= 0 && strcmp(rz_status_name(value), #name) == 0);
    RZ_STATUS_MAP(RZ_CHECK_NEGATIVE)
#undef RZ_CHECK_NEGATIVE
}

static rz_options_t parse_one(const char *var, const char *value) {
    fake_n = 0;
    fake_set(var, value);
    rz_options_t o;
    rz__options_parse(fake_getenv, &o);
    return o;
}

Test(options, scan_list_takes_fatal_and_defaults_to_it) {
    fake_n = 0;
    rz_options_t o;
    rz__options_parse(fake_getenv, &o);
    cr_assert_eq(o.scan, RZ_SCAN_FREE | RZ_SCAN_EXIT | RZ_SCAN_FATAL);
    o = parse_one("METRALE_REDZONE_SCAN", "fatal");
    cr_assert_eq(o.scan, RZ_SCAN_FATAL);
    cr_assert_str_empty(o.warnings);
    o = parse_one("METRALE_REDZONE_SCAN", "fatal,none");
    cr_assert_eq(o.scan, RZ_SCAN_FREE | RZ_SCAN_EXIT | RZ_SCAN_FATAL);
    cr_assert(strstr(o.warnings, "combines none with other scans; using free,exit,fatal"), "%s", o.warnings);
    o = parse_one("METRALE_REDZONE_SCAN", "fatals");
    cr_assert(strstr(o.warnings, "is not a comma list of free, sync, launch, exit, fatal, none"), "%s", o.warnings);
}

Test(options, stack_depth) {
    cr_assert_eq(parse_one("METRALE_REDZONE_STACKS", "0").stacks, 0);
    cr_assert_eq(parse_one("METRALE_REDZONE_STACKS", "32").stacks, 32);
    cr_assert_eq(parse_one("METRALE_REDZONE_STACKS", "+8").stacks, 8);
    const char *bad[] = {"33", "-1", "x", "", "8 ", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rz_options_t o = parse_one("METRALE_REDZONE_STACKS", bad[i]);
        cr_assert_eq(o.stacks, 0, "%s", bad[i]);
        char want[160];
        snprintf(want, sizeof want, "redzone: warning: METRALE_REDZONE_STACKS=\"%s\" is not a frame count 0-32; using 0 (off)\n",
                 bad[i]);
        cr_assert_str_eq(o.warnings, want);
    }
}

Test(options, check_kernel_and_install) {
    cr_assert(parse_one("METRALE_REDZONE_CHECK_KERNEL", "1").check_kernel);
    cr_assert(!parse_one("METRALE_REDZONE_CHECK_KERNEL", "0").check_kernel);
    rz_options_t o = parse_one("METRALE_REDZONE_CHECK_KERNEL", "no");
    cr_assert(!o.check_kernel, "bad value keeps the default (off until measured on a GPU)");
    cr_assert(strstr(o.warnings, "METRALE_REDZONE_CHECK_KERNEL=\"no\" is not 0 or 1; using 0"), "%s", o.warnings);
    cr_assert(!parse_one("METRALE_REDZONE_FILL", "7").check_kernel, "off when unset");
    cr_assert(parse_one("METRALE_REDZONE_INSTALL", "eager").install_eager);
    cr_assert(!parse_one("METRALE_REDZONE_INSTALL", "lazy").install_eager);
}

/* A value with a newline (or other control characters) still makes exactly one warning line. */
Test(options, control_characters_in_a_value_stay_on_one_line) {
    rz_options_t o = parse_one("METRALE_REDZONE", "6\n4\x1b");
    cr_assert_eq(o.pad_bytes, 0);
    cr_assert_str_eq(o.warnings, "redzone: warning: METRALE_REDZONE=\"6\\x0a4\\x1b\" is not a number of bytes; using 0 (red zones off)\n");
}

/* More warnings than the buffer holds: the "more warnings" line is said once, last, and no shorter warning
 * comes after it (issue 18, item 20). Values are cut (issue 27 item 10), so it takes many bad values. */
Test(options, more_warnings_not_shown_is_said_once_and_last) {
    static char value[600];
    memset(value, 0x01, sizeof value - 1); /* each byte shown as \x01: about 450 bytes a line */
    static const char *const names[] = {
#define RZ_OPTION(field, var, type, shown, desc) var,
#include "options.inc"
#undef RZ_OPTION
    };
    fake_n = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && i < 7; i++)
        fake_set(names[i], value); /* each a long warning: together more than the buffer holds */
    fake_set("METRALE_REDZONE_AGENT", "x"); /* would fit after the "more" line */
    rz_options_t o;
    rz__options_parse(fake_getenv, &o);
    const char *more = "redzone: warning: METRALE_REDZONE*: more warnings not shown\n";
    const char *at = strstr(o.warnings, more);
    cr_assert(at != NULL, "%s", o.warnings);
    cr_assert_str_eq(at, more, "the more line is the last line, once: %s", at);
}

/* ---- issue 27 item 10: values in warnings quoted unambiguously ------------------------------------------ */
/* The value a warning line shows after `<var>=`, decoded as its quoting says (\" \\ \xNN), into out; the
 * text after the closing quote in *rest. 0 when the line does not hold a well-formed quoted value. */
static int decode_quoted(const char *line, const char *var, char *out, size_t cap, const char **rest) {
    char key[64];
    snprintf(key, sizeof key, "%s=\"", var);
    const char *p = strstr(line, key);
    if (!p)
        return 0;
    p += strlen(key);
    size_t n = 0;
    for (; *p && *p != '"' && n + 1 < cap; p++) {
        if (*p == '\\' && (p[1] == '"' || p[1] == '\\')) {
            out[n++] = *++p;
        } else if (*p == '\\' && p[1] == 'x') {
            char hex[3] = {p[2], p[3], 0};
            out[n++] = (char)strtol(hex, NULL, 16);
            p += 3;
        } else if (*p == '\\') {
            return 0; /* no other escape exists */
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
    if (*p != '"')
        return 0;
    *rest = p + 1;
    return 1;
}

struct quote_case {
    char var[40];
    char value[80];
    char after[48]; /* what the line says right after the closing quote */
};

ParameterizedTestParameters(options, rejected_values_are_quoted_unambiguously) {
    static struct quote_case cases[] = {
        /* Today's quotes end at the value's first '"': the rest would read as the program's own words. */
        {"METRALE_REDZONE", "1\" ; rm -rf ~ ; echo \"", " is not a number of bytes; using 0"},
        {"METRALE_REDZONE_FILL", "a\\\" x=\\", " is not a byte (decimal 0-255); using 238"},
        {"METRALE_REDZONE_SCAN", "free\",sync", " is not a comma list of free, sync"},
        {"METRALE_REDZONE_AGENT", "\x1b[31mred\x9b\xff\t", " is not 0 or 1; using 1"},
        {"METRALE_REDZONE_LOG", "", " is empty; using stderr"},
    };
    return cr_make_param_array(struct quote_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct quote_case *c, options, rejected_values_are_quoted_unambiguously) {
    rz_options_t o = parse_one(c->var, c->value);
    cr_assert_eq(rzt_count(o.warnings, "\n"), 1, "one line: %s", o.warnings);
    char decoded[256];
    const char *rest = NULL;
    cr_assert(decode_quoted(o.warnings, c->var, decoded, sizeof decoded, &rest), "quoted value: %s", o.warnings);
    cr_assert_str_eq(decoded, c->value, "the quotes hold exactly the value: %s", o.warnings);
    cr_assert(strncmp(rest, c->after, strlen(c->after)) == 0, "after the value: %s", o.warnings);
    for (const char *p = o.warnings; *p; p++)
        cr_assert((*p >= 0x20 && *p < 0x7f) || *p == '\n', "printable ASCII only: %s", o.warnings);
}

/* A value far longer than a line: its warning is still there, the value cut with its length said. */
Test(options, a_long_rejected_value_keeps_its_warning) {
    static char value[5001];
    memset(value, 'x', sizeof value - 1);
    value[3] = '"';
    rz_options_t o = parse_one("METRALE_REDZONE", value);
    cr_assert_eq(o.pad_bytes, 0);
    cr_assert(!strstr(o.warnings, "more warnings not shown"), "%s", o.warnings);
    cr_assert_eq(rzt_count(o.warnings, "\n"), 1, "%s", o.warnings);
    char want[256];
    snprintf(want, sizeof want, "redzone: warning: METRALE_REDZONE=\"xxx\\\"%.*s\"...(5000 bytes) is not a number of "
             "bytes; using 0 (red zones off)\n", RZ_QUOTE_SHOWN - 4, value + 4);
    cr_assert_str_eq(o.warnings, want);
    cr_assert_lt(strlen(o.warnings), (size_t)RZ_QUOTE_MAX + 128);
}

/* Every option's rejected value: its warning names the variable with the value, and the value used. */
struct bad_case {
    char var[40];
    char value[600];
    char used[48];
};

ParameterizedTestParameters(options, every_warning_names_the_variable_and_the_value_used) {
    static struct bad_case cases[] = {
        {"METRALE_REDZONE", "x", "using 0 (red zones off)"},
        {"METRALE_REDZONE_FRONT", "x", "using 0 (no front bands)"},
        {"METRALE_REDZONE_MIN_IDX", "x", "using 0"},
        {"METRALE_REDZONE_TRACE_IDX", "x", "using unset (off)"},
        {"METRALE_REDZONE_FILL", "x", "using 238"},
        {"METRALE_REDZONE_POISON", "x", "using unset (no window)"},
        {"METRALE_REDZONE_SCAN", "x", "using free,exit,fatal"},
        {"METRALE_REDZONE_INSTALL", "x", "using lazy"},
        {"METRALE_REDZONE_CHECK_KERNEL", "x", "using 0"},
        {"METRALE_REDZONE_LAUNCH_KERNEL", "x", "using 1"},
        {"METRALE_REDZONE_GUARD", "x", "using unset (no guard pages)"},
        {"METRALE_REDZONE_STACKS", "x", "using 0 (off)"},
        {"METRALE_REDZONE_LOG", "", "using stderr"},
        {"METRALE_REDZONE_SUMMARY", "", "using unset"},
        {"METRALE_REDZONE_AGENT", "x", "using 1"},
        {"METRALE_REDZONE_HELP", "x", "using 0"},
        {"METRALE_REDZONE_REPORT", "", "using unset"},
        {"METRALE_REDZONE_SUPPRESSIONS", "", "using unset"},
        {"METRALE_REDZONE_PRINT_SUPPRESSIONS", "x", "using 0"},
        {"METRALE_REDZONE_PRINT_LIMIT", "x", "using 0 (no limit)"},
        {"METRALE_REDZONE_HALT_ON_ERROR", "x", "using 0"},
        {"METRALE_REDZONE_FREE_FILL", "x", "using 221"},
        {"METRALE_REDZONE_QUARANTINE", "8X", "using 67108864 (64 MiB)"},
        {"METRALE_REDZONE_LEAK_CHECK", "x", "using 0"},
    };
    /* A path longer than RZ_PATH_MAX: was "using the default", which said neither the value nor the default. */
    for (int i = 11; i <= 12; i++) {
        memset(cases[i].value, 'p', sizeof cases[i].value - 1);
        cases[i].value[sizeof cases[i].value - 1] = '\0';
    }
    return cr_make_param_array(struct bad_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct bad_case *c, options, every_warning_names_the_variable_and_the_value_used) {
    rz_options_t o = parse_one(c->var, c->value);
    char named[64];
    snprintf(named, sizeof named, "redzone: warning: %s=\"", c->var);
    cr_assert(strncmp(o.warnings, named, strlen(named)) == 0, "%s", o.warnings);
    cr_assert_eq(rzt_count(o.warnings, "\n"), 1, "%s", o.warnings);
    cr_assert(strstr(o.warnings, c->used), "says %s: %s", c->used, o.warnings);
    if (strlen(c->value) > RZ_QUOTE_SHOWN)
        cr_assert(strstr(o.warnings, "\"...(599 bytes)"), "%s", o.warnings);
}

/* Every option of the table is in the case list above. */
Test(options, every_option_has_a_bad_value_case) {
    int n = 0;
#define RZ_OPTION(field, var, type, shown, desc) n++;
#include "options.inc"
#undef RZ_OPTION
    cr_assert_eq(n, 24, "a new option needs its case in every_warning_names_the_variable_and_the_value_used");
}

/* ---- issue 32: the quarantine's size (K/M/G suffixes) and the free fill, distinct from the band fill ---- */
Test(options, quarantine_size_takes_suffixes_and_the_free_fill_differs_from_the_band_fill) {
    cr_assert_eq(parse_one("METRALE_REDZONE_QUARANTINE", "8K").quarantine, 8192);
    cr_assert_eq(parse_one("METRALE_REDZONE_QUARANTINE", "3m").quarantine, (uint64_t)3 << 20);
    cr_assert_eq(parse_one("METRALE_REDZONE_QUARANTINE", "1G").quarantine, (uint64_t)1 << 30);
    cr_assert_eq(parse_one("METRALE_REDZONE_QUARANTINE", "0").quarantine, 0);
    cr_assert_eq(parse_one("METRALE_REDZONE_QUARANTINE", "12345").quarantine, 12345);
    cr_assert_eq(parse_one("METRALE_REDZONE_QUARANTINE", "K").quarantine, (uint64_t)64 << 20);
    cr_assert_eq(parse_one("METRALE_REDZONE_QUARANTINE", "99999999999999999999G").quarantine, (uint64_t)64 << 20);
    cr_assert_eq(parse_one("METRALE_REDZONE_QUARANTINE", "").quarantine, (uint64_t)64 << 20);
    cr_assert_eq(parse_one("METRALE_REDZONE_FILL", "1").free_fill, 0xDD);
    cr_assert_eq(parse_one("METRALE_REDZONE_FILL", "221").free_fill, 222, "unset: never the band fill");
    cr_assert_eq(parse_one("METRALE_REDZONE_FREE_FILL", "238").free_fill, 238, "set: as given, even the band fill");
    cr_assert_eq(parse_one("METRALE_REDZONE_LEAK_CHECK", "1").leak_check, 1);
}

/* ---- issue 27 item 8: a set-uid or set-gid process takes no file names from the environment ----------- */
Test(options, secure_execution_ignores_path_variables_with_one_warning) {
    fake_n = 0;
    fake_set("METRALE_REDZONE", "64");
    fake_set("METRALE_REDZONE_LOG", "/etc/rz-chosen.log");
    fake_set("METRALE_REDZONE_SUMMARY", "/etc/rz-chosen.summary");
    rz_options_t o;
    rz__options_parse_env(fake_getenv, 1, &o);
    cr_assert_str_empty(o.report_path);
    cr_assert_str_empty(o.suppressions_path);
    cr_assert_str_empty(o.log_path);
    cr_assert_str_empty(o.summary_path);
    cr_assert_eq(o.pad_bytes, 64, "other options still apply");
    cr_assert_str_eq(o.warnings, "redzone: warning: METRALE_REDZONE_LOG, METRALE_REDZONE_SUMMARY ignored: a set-uid "
                                 "or set-gid program (secure execution) takes no file names from the environment; "
                                 "using stderr, unset\n");
    rz__options_parse_env(fake_getenv, 0, &o);
    cr_assert_str_eq(o.log_path, "/etc/rz-chosen.log", "an ordinary process takes them");
    cr_assert_str_empty(o.warnings);
    fake_n = 0;
    fake_set("METRALE_REDZONE", "64");
    rz__options_parse_env(fake_getenv, 1, &o);
    cr_assert_str_empty(o.warnings, "nothing to say when no path is set");
}

/* ---- issue 27 item 9: the symlink rule (fs.protected_symlinks) --------------------------------------- */
struct link_case {
    unsigned link_owner, dir_owner, dir_mode, euid;
    int refused;
};

ParameterizedTestParameters(options, symlink_rule) {
    static struct link_case cases[] = {
        {1000, 0, 01777, 0, 1},    /* /tmp: a user's link, root runs: refused */
        {1000, 0, 01777, 2000, 1}, /* another user's link */
        {1000, 0, 01777, 1000, 0}, /* one's own link */
        {0, 0, 01777, 1000, 0},    /* the directory owner's link */
        {1000, 1000, 01777, 0, 0}, /* a link in a user's own sticky directory, by that user */
        {1000, 0, 00777, 0, 0},    /* not sticky: the rule does not apply (nor the kernel's) */
        {1000, 0, 01775, 0, 0},    /* sticky, not world-writable */
        {1000, 0, 00755, 0, 0},
    };
    return cr_make_param_array(struct link_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct link_case *c, options, symlink_rule) {
    cr_assert_eq(rz__sticky_refused(c->link_owner, c->dir_owner, c->dir_mode, c->euid), c->refused,
                 "link uid %u, directory uid %u mode %o, euid %u", c->link_owner, c->dir_owner, c->dir_mode, c->euid);
}
