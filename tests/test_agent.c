/* The debugger agent, driven in-process the way gdb drives it (write the request, wake, wait for the
 * answer): scans and poisons with their report lines captured, a registry held by another thread, naming. */
#include <dirent.h>
#include <pthread.h>
#include <sys/wait.h>

#include "rz_test.h"

static void setup(void) {
    setenv("METRALE_REDZONE", "32", 1);
    rzt_log_to_file();
    rzt_context(0);
}

TestSuite(agent, .init = setup, .timeout = 60);

/* The agent's start (agent.c, start()) waits until the thread has published its id and set alive before the
 * first allocation returns: once rz_mem_alloc has returned, alive is a condition, not a race to wait out. */
static void wait_alive(void) {
    cr_assert(atomic_load(&__redzone_agent.alive), "the agent started at the first allocation, before it returned");
    cr_assert_neq(__redzone_agent.tid, 0, "and published its thread id");
}

/* Threads of this process, from /proc/self/task. */
static int task_count(void) {
    DIR *d = opendir("/proc/self/task");
    cr_assert_not_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

Test(agent, scan_request_captures_the_library_lines) {
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 100), RZCUDA_SUCCESS);
    wait_alive();
    uint8_t bad = 0x42;
    cr_assert_eq(cuMemcpyHtoD_v2(p + 100, &bad, 1), RZCUDA_SUCCESS);
    cr_assert_eq(rz__agent_request(RZ_AGENT_SCAN, 0, 0), 1);
    cr_assert_str_eq(__redzone_agent.out,
                     "REDZONE VIOLATION alloc#0 user_bytes=100 pad=32 : bytes [0..=0] past the end were written "
                     "(1 of 32 pad bytes changed), first bad value 0x42\n"
                     "redzone scan: 1 zones checked, 1 violated\n");
    cr_assert_eq(__redzone_agent.serving, 0);
    cr_assert_eq(rz__agent_request(RZ_AGENT_SCAN, 0, 0), 0, "re-filled");
    cr_assert_str_eq(__redzone_agent.out, "redzone scan: 1 zones checked, 0 violated\n");
}

Test(agent, poison_and_unpoison_requests) {
    rz_devptr_t p[3];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(rz_mem_alloc(&p[i], 64), RZCUDA_SUCCESS);
    wait_alive();
    cr_assert_eq(rz__agent_request(RZ_AGENT_POISON, 1, 2), RZ_OK);
    uint8_t b;
    cr_assert_eq(cuMemcpyDtoH_v2(&b, p[0] + 64, 1), RZCUDA_SUCCESS);
    cr_assert_eq(b, 0x00);
    cr_assert_eq(cuMemcpyDtoH_v2(&b, p[1] + 64, 1), RZCUDA_SUCCESS);
    cr_assert_eq(b, 0xEE);
    cr_assert_eq(rz__agent_request(RZ_AGENT_SCAN, 0, 0), 0);
    cr_assert_eq(rz__agent_request(RZ_AGENT_POISON, 5, 4), RZ_EINVAL);
    cr_assert_eq(rz__agent_request(RZ_AGENT_UNPOISON, 0, 0), RZ_OK);
    cr_assert_eq(cuMemcpyDtoH_v2(&b, p[0] + 64, 1), RZCUDA_SUCCESS);
    cr_assert_eq(b, 0xEE);
    cr_assert_eq(rz__agent_request(99, 0, 0), RZ_EINVAL, "unknown operation");
}

Test(agent, registry_held_elsewhere_answers_busy_instead_of_hanging) {
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 64), RZCUDA_SUCCESS);
    wait_alive();
    rz__registry_lock(); /* as a user thread stopped inside the registry would */
    /* The request returns at all while the lock is held (a hang would be the suite's 60 s timeout, reported
     * as such), with the agent's answer for a held registry; no wall time is asserted. */
    int64_t r = rz__agent_request(RZ_AGENT_SCAN, 0, 0);
    rz__registry_unlock();
    cr_assert_eq(r, RZ_EBUSY);
    cr_assert(strstr(__redzone_agent.out, "the zone registry is held by a stopped thread"), "%s", __redzone_agent.out);
    cr_assert_eq(rz__agent_request(RZ_AGENT_SCAN, 0, 0), 0, "works again once the lock is free");
}

Test(agent, thread_is_named_and_known_by_lwp) {
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 64), RZCUDA_SUCCESS);
    wait_alive();
    char path[64], name[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%llu/comm", (unsigned long long)__redzone_agent.tid);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    cr_assert_not_null(fgets(name, sizeof name, f));
    fclose(f);
    cr_assert_str_eq(name, "redzone-agent\n");
    cr_assert_eq(__redzone_agent.magic, RZ_AGENT_MAGIC);
}

Test(agent_off, disabled_by_option) {
    setenv("METRALE_REDZONE", "32", 1);
    setenv("METRALE_REDZONE_AGENT", "0", 1);
    rzt_context(0);
    int before = task_count();
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 64), RZCUDA_SUCCESS);
    /* Started, it would be alive by now (the start waits for it: wait_alive); so no waiting here. */
    cr_assert_eq(atomic_load(&__redzone_agent.alive), 0);
    cr_assert_eq(__redzone_agent.tid, 0, "no agent thread published an id");
    cr_assert_eq(task_count(), before, "no thread was started");
}

/* The same count with the agent on (setup's rzt_context goes to the driver directly: the library starts at
 * the first allocation): the count above does see a started agent. */
Test(agent, first_allocation_starts_one_thread) {
    int before = task_count();
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 64), RZCUDA_SUCCESS);
    wait_alive();
    cr_assert_eq(task_count(), before + 1, "the agent, started at the first allocation");
    cr_assert_eq(rz_mem_alloc(&p, 64), RZCUDA_SUCCESS);
    cr_assert_eq(task_count(), before + 1, "one agent, started once");
}

/* A forked child has no agent thread: its first allocation runs the start-up again (interpose/start.c), which
 * starts one of its own, and a debugger's request to the child is served there. */
Test(agent, a_forked_child_starts_its_own_agent_at_its_first_allocation) {
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 100), RZCUDA_SUCCESS);
    wait_alive();
    uint64_t parent_agent = __redzone_agent.tid;
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        if (atomic_load(&__redzone_agent.alive))
            _exit(2); /* the parent's agent thread is not in the child */
        rz_devptr_t q;
        if (rz_mem_alloc(&q, 100) != RZCUDA_SUCCESS)
            _exit(3);
        if (!atomic_load(&__redzone_agent.alive) || __redzone_agent.tid == parent_agent)
            _exit(4); /* started (and waited for) by the child's first allocation */
        uint8_t bad = 0x42;
        if (cuMemcpyHtoD_v2(q + 100, &bad, 1) != RZCUDA_SUCCESS || rz__agent_request(RZ_AGENT_SCAN, 0, 0) != 1)
            _exit(5);
        _exit(strstr(__redzone_agent.out, "REDZONE VIOLATION alloc#1 ") == __redzone_agent.out ? 0 : 6);
    }
    int status = 0;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's check %d failed", WEXITSTATUS(status));
    cr_assert_eq(__redzone_agent.tid, parent_agent, "the parent keeps its agent");
}

/* With the agent off a forked child keeps its parent's start-up: no agent thread appears in it. */
Test(agent_off, a_forked_child_starts_no_agent) {
    setenv("METRALE_REDZONE", "32", 1);
    setenv("METRALE_REDZONE_AGENT", "0", 1);
    rzt_context(0);
    rz_devptr_t p;
    cr_assert_eq(rz_mem_alloc(&p, 64), RZCUDA_SUCCESS);
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        rz_devptr_t q;
        _exit(rz_mem_alloc(&q, 64) == RZCUDA_SUCCESS && !atomic_load(&__redzone_agent.alive) ? 0 : 1);
    }
    int status = 0;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
