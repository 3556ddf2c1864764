/*
 * The debugger agent thread (agent.c).
 */
#ifndef REDZONE_AGENT_H
#define REDZONE_AGENT_H

#include "common.h"
#include "state.h"

extern rz_agent_t __redzone_agent;

/* Called by the agent after each request; a debugger stops here. */
void __redzone_agent_done(void);

/* Start the agent thread (METRALE_REDZONE_AGENT), once per process: at start-up (interpose/start.c). */
void rz__agent_start(void);

/* 1 when this process's agent thread could not be started (pthread_create failed). */
int rz__agent_failed(void);

/* pthread_create for every thread redzone starts: the new thread has every asynchronous signal blocked. */
int rz__thread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);

int64_t rz__agent_request(uint32_t op, uint64_t arg0, uint64_t arg1);

#endif /* REDZONE_AGENT_H */
