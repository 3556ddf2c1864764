/*
 * redzone's own files never become the program's problem, nor another user's tool (issue 27 items 2, 8, 9):
 * an unmodified program (tests/programs/rzfiles.c) that closes or dup2()s over descriptors gets no report in
 * its data file; the log and summary are created 0600, never through a symlink another user planted in a
 * sticky world-writable directory nor into a file another user created there first; a set-uid program
 * ignores METRALE_REDZONE_LOG and _SUMMARY. The cases that need another user run only as root (which CI is)
 * and say why they are skipped otherwise.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spawn.h"

#define PRELOAD "LD_PRELOAD=" LIBREDZONE
#define EMU "LD_LIBRARY_PATH=" EMU_DIR
#define BANDS "METRALE_REDZONE=64"
#define NOBODY 65534

static const char k_report[] = "REDZONE VIOLATION alloc#0 user_bytes=100 pad=64 : bytes [0..=0] past the end were "
                               "written (1 of 64 pad bytes changed), first bad value 0x11\n";
static const char k_data[] = "rzfiles data 1\nrzfiles data 2\n";

static char g_out[1 << 16];

static char *slurp(const char *path) {
    static char text[1 << 14];
    text[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f) {
        text[fread(text, 1, sizeof text - 1, f)] = '\0';
        fclose(f);
    }
    return text;
}

/* A fresh directory of this test's own (mode 0755), removed with what is in it by rm_tree. */
static void fresh_dir(char *out, size_t cap, const char *what) {
    snprintf(out, cap, "/tmp/rz-files-%s-XXXXXX", what);
    cr_assert(mkdtemp(out), "mkdtemp: %s", strerror(errno));
    cr_assert_eq(chmod(out, 0755), 0);
}

static void rm_tree(const char *dir) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* Both descriptor numbers the program printed: the log's, and the one its data file got. */
static void expect_same_number(const char *out) {
    int log = -1, data = -2;
    const char *line = strstr(out, "rzfiles: the log was descriptor ");
    cr_assert(line && sscanf(line, "rzfiles: the log was descriptor %d; the data file got %d", &log, &data) == 2,
              "%s", out);
    cr_assert_eq(log, data, "the program's data file has the log's old number: %s", out);
}

static void run_with_log(const char *mode, const char *log, const char *data) {
    char logenv[300];
    snprintf(logenv, sizeof logenv, "METRALE_REDZONE_LOG=%s", log);
    const char *env[] = {PRELOAD, EMU, BANDS, logenv, NULL};
    const char *argv[] = {RZFILES, mode, log, data, NULL};
    int status = spawn_capture(env, argv, g_out, sizeof g_out);
    cr_assert_eq(status, 0, "%s", g_out);
    expect_same_number(g_out);
}

/* ---- item 2: the log's descriptor is the program's to close ------------------------------------------- */
/* A daemon closes every descriptor after setup and opens its data file, which gets the log's number: the
 * report goes to the log (opened again), the data file holds only the program's bytes. */
Test(files, report_never_lands_in_a_data_file_that_reused_the_logs_descriptor, .timeout = 30) {
    char dir[64], log[128], data[128];
    fresh_dir(dir, sizeof dir, "reuse");
    snprintf(log, sizeof log, "%s/rz.log", dir);
    snprintf(data, sizeof data, "%s/data", dir);
    run_with_log("reuse", log, data);
    cr_assert_str_eq(slurp(data), k_data, "the data file is the program's alone");
    const char *text = slurp(log);
    cr_assert_eq(count(text, k_report), 1, "the report is in the log: %s", text);
    cr_assert_eq(count(text, "redzone: exit: 0 violated at exit; 1 violations in 1 scans"), 1, "%s", text);
    cr_assert(!strstr(g_out, "REDZONE") && !strstr(g_out, "warning"), "nothing on stderr: %s", g_out);
    rm_tree(dir);
}

/* A harness dup2()s a file of its own over the log's descriptor: the same. */
Test(files, report_never_lands_in_a_file_dup2ed_over_the_log, .timeout = 30) {
    char dir[64], log[128], data[128];
    fresh_dir(dir, sizeof dir, "dup2");
    snprintf(log, sizeof log, "%s/rz.log", dir);
    snprintf(data, sizeof data, "%s/data", dir);
    run_with_log("dup2", log, data);
    cr_assert_str_eq(slurp(data), k_data, "the data file is the program's alone");
    const char *text = slurp(log);
    cr_assert_eq(count(text, k_report), 1, "the report is in the log: %s", text);
    rm_tree(dir);
}

/* The log cannot be opened again (its directory is gone): one warning, and the lines go to stderr. */
Test(files, log_that_cannot_be_opened_again_falls_back_to_stderr_with_one_warning, .timeout = 30) {
    char dir[64], logdir[128], log[160], data[128];
    fresh_dir(dir, sizeof dir, "gone");
    snprintf(logdir, sizeof logdir, "%s/logs", dir);
    cr_assert_eq(mkdir(logdir, 0755), 0);
    snprintf(log, sizeof log, "%s/rz.log", logdir);
    snprintf(data, sizeof data, "%s/data", dir);
    run_with_log("gone", log, data);
    cr_assert_str_eq(slurp(data), k_data, "the data file is the program's alone");
    char warning[512];
    snprintf(warning, sizeof warning, "redzone: warning: the log METRALE_REDZONE_LOG=\"%s\" was closed or replaced by "
             "the program and cannot be opened again (ENOENT); using stderr\n", log);
    cr_assert_eq(count(g_out, warning), 1, "%s", g_out);
    cr_assert_eq(count(g_out, "warning"), 1, "said once: %s", g_out);
    cr_assert_eq(count(g_out, k_report), 1, "the report on stderr: %s", g_out);
    rm_tree(dir);
}

/* ---- item 9: files created 0600 ------------------------------------------------------------------------ */
/* Reports hold addresses and call stacks: a new log or summary is the user's alone, whatever the umask. */
Test(files, new_log_and_summary_are_created_0600, .timeout = 30) {
    char dir[64], log[128], sum[128], logenv[160], sumenv[160];
    fresh_dir(dir, sizeof dir, "mode");
    snprintf(log, sizeof log, "%s/rz.log", dir);
    snprintf(sum, sizeof sum, "%s/rz.summary", dir);
    snprintf(logenv, sizeof logenv, "METRALE_REDZONE_LOG=%s", log);
    snprintf(sumenv, sizeof sumenv, "METRALE_REDZONE_SUMMARY=%s", sum);
    umask(0); /* so the mode is the library's own, not the umask's */
    const char *env[] = {PRELOAD, EMU, BANDS, logenv, sumenv, NULL};
    const char *argv[] = {RZFILES, "plain", NULL};
    cr_assert_eq(spawn_capture(env, argv, g_out, sizeof g_out), 0, "%s", g_out);
    struct stat st;
    cr_assert_eq(stat(log, &st), 0, "the log was created: %s", g_out);
    cr_assert_eq(st.st_mode & 07777, 0600, "log mode %o", st.st_mode & 07777);
    cr_assert_eq(stat(sum, &st), 0, "the summary was created: %s", g_out);
    cr_assert_eq(st.st_mode & 07777, 0600, "summary mode %o", st.st_mode & 07777);
    cr_assert_eq(count(slurp(log), k_report), 1);
    rm_tree(dir);
}

/* ---- item 9: no symlink another user planted in /tmp ---------------------------------------------------- */
static int skip_unless_root(const char *why) {
    if (geteuid() == 0)
        return 0;
    fprintf(stderr, "test_files: skipped: %s needs root (to act as another user); running as uid %ld\n", why,
            (long)geteuid());
    return 1;
}

/* In a sticky world-writable directory (as /tmp), a user plants links named as a root process's log and
 * summary, pointing at a root-owned file: redzone refuses them (warning, stderr, no summary), the root file
 * is untouched. A link of the process's own user there is followed: the rule is the kernel's
 * fs.protected_symlinks, not "no links". */
Test(files, symlink_another_user_planted_in_a_sticky_directory_is_not_followed, .timeout = 30) {
    if (skip_unless_root("the planted-symlink case"))
        cr_skip_test("needs root");
    char dir[64], victim[128], log[128], sum[128], logenv[160], sumenv[160];
    fresh_dir(dir, sizeof dir, "sticky");
    cr_assert_eq(chmod(dir, 01777), 0);
    snprintf(victim, sizeof victim, "%s.victim", dir);
    FILE *f = fopen(victim, "w");
    cr_assert(f);
    fputs("root's own file\n", f);
    fclose(f);
    snprintf(log, sizeof log, "%s/rz-1234.log", dir);
    snprintf(sum, sizeof sum, "%s/rz-1234.summary", dir);
    cr_assert_eq(symlink(victim, log), 0);
    cr_assert_eq(symlink(victim, sum), 0);
    cr_assert_eq(lchown(log, NOBODY, NOBODY), 0, "the links are another user's");
    cr_assert_eq(lchown(sum, NOBODY, NOBODY), 0);
    snprintf(logenv, sizeof logenv, "METRALE_REDZONE_LOG=%s", log);
    snprintf(sumenv, sizeof sumenv, "METRALE_REDZONE_SUMMARY=%s", sum);
    const char *env[] = {PRELOAD, EMU, BANDS, logenv, sumenv, NULL};
    const char *argv[] = {RZFILES, "plain", NULL};
    cr_assert_eq(spawn_capture(env, argv, g_out, sizeof g_out), 0, "%s", g_out);
    cr_assert_str_eq(slurp(victim), "root's own file\n", "the link's target is untouched");
    char warning[512];
    snprintf(warning, sizeof warning, "redzone: warning: cannot open METRALE_REDZONE_LOG=\"%s\" (a symlink another "
             "user owns in a sticky world-writable directory, not followed); using stderr\n", log);
    cr_assert_eq(count(g_out, warning), 1, "%s", g_out);
    snprintf(warning, sizeof warning, "redzone: warning: cannot open METRALE_REDZONE_SUMMARY=\"%s\" (a symlink "
             "another user owns in a sticky world-writable directory, not followed); no summary line written\n", sum);
    cr_assert_eq(count(g_out, warning), 1, "%s", g_out);
    cr_assert_eq(count(g_out, k_report), 1, "the report on stderr: %s", g_out);

    /* A directory link of the other user's on the way: not followed either, nothing created behind it. */
    char target[128], dirlink[128], through[160];
    snprintf(target, sizeof target, "%s.rootdir", dir);
    cr_assert_eq(mkdir(target, 0700), 0);
    snprintf(dirlink, sizeof dirlink, "%s/logs", dir);
    cr_assert_eq(symlink(target, dirlink), 0);
    cr_assert_eq(lchown(dirlink, NOBODY, NOBODY), 0);
    snprintf(through, sizeof through, "%s/rz.log", dirlink);
    char throughenv[200];
    snprintf(throughenv, sizeof throughenv, "METRALE_REDZONE_LOG=%s", through);
    const char *env2[] = {PRELOAD, EMU, BANDS, throughenv, NULL};
    cr_assert_eq(spawn_capture(env2, argv, g_out, sizeof g_out), 0, "%s", g_out);
    char made[200];
    snprintf(made, sizeof made, "%s/rz.log", target);
    struct stat st;
    cr_assert_neq(stat(made, &st), 0, "nothing created through the link: %s", g_out);
    snprintf(warning, sizeof warning, "redzone: warning: cannot open METRALE_REDZONE_LOG=\"%s\" (a symlink another "
             "user owns in a sticky world-writable directory, not followed); using stderr\n", through);
    cr_assert_eq(count(g_out, warning), 1, "%s", g_out);
    rmdir(target);

    /* The same link, the process's own: followed. */
    cr_assert_eq(lchown(log, 0, 0), 0);
    cr_assert_eq(spawn_capture(env, argv, g_out, sizeof g_out), 0, "%s", g_out);
    cr_assert_eq(count(slurp(victim), k_report), 1, "one's own link is followed: %s", g_out);
    unlink(victim);
    rm_tree(dir);
}

/* A user creates the file a root process will log to first (a guessable name in /tmp), world-writable, to
 * read the reports from: redzone does not write to it (the kernel's fs.protected_regular rule). */
Test(files, file_another_user_created_in_a_sticky_directory_is_not_written, .timeout = 30) {
    if (skip_unless_root("the pre-created-file case"))
        cr_skip_test("needs root");
    char dir[64], log[128], logenv[160];
    fresh_dir(dir, sizeof dir, "trap");
    cr_assert_eq(chmod(dir, 01777), 0);
    snprintf(log, sizeof log, "%s/rz-1234.log", dir);
    int fd = open(log, O_WRONLY | O_CREAT | O_EXCL, 0666);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_eq(chown(log, NOBODY, NOBODY), 0);
    cr_assert_eq(chmod(log, 0666), 0);
    snprintf(logenv, sizeof logenv, "METRALE_REDZONE_LOG=%s", log);
    const char *env[] = {PRELOAD, EMU, BANDS, logenv, NULL};
    const char *argv[] = {RZFILES, "plain", NULL};
    cr_assert_eq(spawn_capture(env, argv, g_out, sizeof g_out), 0, "%s", g_out);
    cr_assert_str_empty(slurp(log), "nothing for the other user to read");
    char warning[512];
    snprintf(warning, sizeof warning, "redzone: warning: cannot open METRALE_REDZONE_LOG=\"%s\" (a file another "
             "user owns in a sticky world-writable directory, not opened); using stderr\n", log);
    cr_assert_eq(count(g_out, warning), 1, "%s", g_out);
    cr_assert_eq(count(g_out, k_report), 1, "the report on stderr: %s", g_out);

    /* The process's own existing file there: appended to. */
    cr_assert_eq(chown(log, 0, 0), 0);
    cr_assert_eq(spawn_capture(env, argv, g_out, sizeof g_out), 0, "%s", g_out);
    cr_assert_eq(count(slurp(log), k_report), 1, "one's own file is appended to: %s", g_out);
    rm_tree(dir);
}

/* ---- item 8: a set-uid program takes no file names from the environment ------------------------------- */
/* Runs argv as user `uid` (group too, no supplementary groups) with exactly the environment env. */
static uid_t g_spawn_uid;
static int become_spawn_uid(void) {
    return setgroups(0, NULL) != 0 || setgid(g_spawn_uid) != 0 || setuid(g_spawn_uid) != 0;
}
static int spawn_as(uid_t uid, const char *const *env, const char *const *argv, char *out, size_t cap) {
    g_spawn_uid = uid;
    return spawn_envp((char *const *)env, argv, become_spawn_uid, out, cap);
}

/* A set-uid-root program linked with -lredzone, run by an ordinary user who names root-only paths for the
 * log and summary: no file is created there, one warning says why, the report goes to stderr. */
Test(files, setuid_program_ignores_log_and_summary_paths, .timeout = 30) {
    if (skip_unless_root("the set-uid case"))
        cr_skip_test("needs root");
    char bindir[64], prog[128], secret[64], log[128], sum[128], logenv[160], sumenv[160];
    fresh_dir(bindir, sizeof bindir, "setuid");
    fresh_dir(secret, sizeof secret, "rootonly");
    cr_assert_eq(chmod(secret, 0700), 0, "only root may create files here");
    snprintf(prog, sizeof prog, "%s/rzfiles_linked", bindir);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", RZFILES_LINKED, prog);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(chown(prog, 0, 0), 0);
    cr_assert_eq(chmod(prog, 04755), 0);
    snprintf(log, sizeof log, "%s/chosen.log", secret);
    snprintf(sum, sizeof sum, "%s/chosen.summary", secret);
    snprintf(logenv, sizeof logenv, "METRALE_REDZONE_LOG=%s", log);
    snprintf(sumenv, sizeof sumenv, "METRALE_REDZONE_SUMMARY=%s", sum);
    const char *env[] = {BANDS, logenv, sumenv, "PATH=/usr/bin:/bin", NULL};
    const char *argv[] = {prog, "plain", NULL};
    int status = spawn_as(NOBODY, env, argv, g_out, sizeof g_out);
    if (!strstr(g_out, "rzfiles: ruid=65534 euid=0\n")) {
        /* e.g. a file system mounted nosuid: nothing here would be set-uid */
        fprintf(stderr, "test_files: skipped: the set-uid bit was not honoured here (status %d):\n%s", status, g_out);
        rm_tree(bindir);
        rm_tree(secret);
        cr_skip_test("set-uid not honoured");
    }
    cr_assert_eq(status, 0, "%s", g_out);
    struct stat st;
    cr_assert_neq(stat(log, &st), 0, "no log created at the user's chosen path: %s", g_out);
    cr_assert_neq(stat(sum, &st), 0, "no summary created at the user's chosen path: %s", g_out);
    cr_assert_eq(count(g_out, "redzone: warning: METRALE_REDZONE_LOG, METRALE_REDZONE_SUMMARY ignored: a set-uid "
                              "or set-gid program (secure execution) takes no file names from the environment; "
                              "using stderr, unset\n"), 1, "%s", g_out);
    cr_assert_eq(count(g_out, k_report), 1, "redzone works, its report on stderr: %s", g_out);
    rm_tree(bindir);
    rm_tree(secret);
}
