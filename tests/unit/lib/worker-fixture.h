/* SPDX-License-Identifier: MIT */
/* A worker in a fresh temporary directory, for tests of the orchestrator's pieces: a
 * workspace owned by the controller (10000:10000), state and results directories, the
 * contract's default limits, the worker's directories, audit log and inbox opened. Root only:
 * without it setup leaves *state NULL and worker_fixture() skips with the reason. */
#pragma once

#include "orchestrator/inbox.h"
#include "orchestrator/store.h"
#include "tests/unit/lib/tfw-test.h"

#define FIXTURE_UID 10000
#define FIXTURE_GID 10000

typedef struct Fixture {
        TestDir *dir;
        Config config;
        char ws[512], state[512], results[512];
        Worker w;
} Fixture;

int worker_fixture_setup(void **state);
int worker_fixture_teardown(void **state);
Fixture *worker_fixture(void **state);

/* A request of class cls with argv ["true"], written into the inbox and captured. */
void fixture_submit(Fixture *f, const char *id, const char *cls);
/* The store's record of id (it must exist). */
RequestRecord fixture_load(Fixture *f, const char *id);
