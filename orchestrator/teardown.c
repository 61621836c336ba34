/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>

#include "capsule/runsc.h"
#include "capsule/teardown.h"
#include "common/macro.h"
#include "common/path-util.h"
#include "orchestrator/teardown.h"

int job_teardown(Worker *w, const char *id, unsigned *ret_killed, TfwError *e) {
        _cleanup_free_ char *cid = NULL;
        char root[PATH_MAX];
        CapsuleTeardown t = {};
        Runsc rt = {};
        Engine en = {};
        bool engine = w->config->driver != DRIVER_RUNSC;
        int r;

        if (capsule_container_id(w->config->name, id, &cid) < 0)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        /* The runsc root of job.c's jobs: <state_dir>/runsc. */
        if (!engine && path_join_buf(root, sizeof(root), w->config->state_dir, "runsc") < 0)
                return tfw_error(e, ENAMETOOLONG, "internal", "the runsc root is too long");
        r = engine ? engine_init(&en, w->config, NULL, e) : runsc_init(&rt, w->config, root, e);
        if (r < 0)
                return r;
        r = capsule_teardown(engine ? NULL : &rt, engine ? &en : NULL, cid, 0, &t, e);
        runsc_done(&rt);
        engine_done(&en);
        if (ret_killed)
                *ret_killed = t.killed;
        return r;
}
