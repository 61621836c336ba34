/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "worker-fixture.h"

int worker_fixture_setup(void **state) {
        Fixture *f;
        void *d = NULL;
        TfwError e = {0};

        *state = NULL;
        if (geteuid() != 0)
                return 0;
        f = calloc(1, sizeof(*f));
        if (!f || tfw_tmpdir_setup(&d) < 0) {
                free(f);
                return -1;
        }
        f->dir = d;
        snprintf(f->ws, sizeof(f->ws), "%s/ws", f->dir->path);
        snprintf(f->state, sizeof(f->state), "%s/state", f->dir->path);
        snprintf(f->results, sizeof(f->results), "%s/results", f->dir->path);
        if (mkdir(f->ws, 0755) < 0 || chown(f->ws, FIXTURE_UID, FIXTURE_GID) < 0)
                return -1;
        f->config.name = (char *) "demo";
        f->config.workspace = f->ws;
        f->config.state_dir = f->state;
        f->config.results_dir = f->results;
        f->config.container_uid = FIXTURE_UID;
        f->config.container_gid = FIXTURE_GID;
        f->config.audit_generations = 14;
        f->config.pending_ttl_hours = 72;
        f->config.limits.max_request_bytes = 64 * 1024;
        f->config.limits.max_argv = 256;
        f->config.limits.max_argv_bytes = 64 * 1024;
        f->config.limits.default_timeout_seconds = 300;
        f->config.limits.max_timeout_seconds = 900;
        f->config.limits.memory = 2ULL << 30;
        f->config.limits.pids = 512;
        strcpy(f->config.limits.cpus, "2.0");
        if (worker_open(&f->w, &f->config, &e) < 0 || inbox_open(&f->w, &e) < 0) {
                fprintf(stderr, "setup: %s\n", e.message);
                return -1;
        }
        *state = f;
        return 0;
}

int worker_fixture_teardown(void **state) {
        Fixture *f = *state;
        if (!f)
                return 0;
        void *d = f->dir;
        worker_close(&f->w);
        tfw_tmpdir_teardown(&d);
        free(f);
        return 0;
}

Fixture *worker_fixture(void **state) {
        if (!*state)
                tfw_skip("needs root: the worker's directories are root-owned");
        return *state;
}

void fixture_submit(Fixture *f, const char *id, const char *cls) {
        char name[80], body[256];
        CaptureOutcome o;
        TfwError e = {0};
        snprintf(name, sizeof(name), "%s.json", id);
        snprintf(body, sizeof(body), "{\"version\":1,\"id\":\"%s\",\"action_class\":\"%s\",\"argv\":[\"true\"]}",
                 id, cls);
        tfw_write_file(f->w.inbox_fd, name, body, (size_t) -1);
        assert_int_equal(inbox_capture(&f->w, name, &o, &e), 0);
}

RequestRecord fixture_load(Fixture *f, const char *id) {
        RequestRecord r;
        TfwError e = {0};
        assert_int_equal(store_load(f->w.dirs.requests_fd, id, &r, &e), 0);
        return r;
}
