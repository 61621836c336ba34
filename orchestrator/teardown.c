/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>

#include "capsule/driver.h"
#include "orchestrator/job.h"
#include "orchestrator/teardown.h"

int job_teardown(Worker *w, const char *id, unsigned *ret_killed, bool *ret_found, TfwError *e) {
        _cleanup_free_ char *cid = NULL;
        CapsuleTeardown t = {};
        CapsuleDriver d = {};
        int r;

        if (capsule_container_id(w->config->name, id, &cid) < 0)
                return tfw_error(e, EINVAL, "internal", "'%s' cannot name a container", id);
        r = job_driver_open(w, &d, e);
        if (r < 0)
                return r;
        r = d.ops->teardown(&d, cid, 0, &t, e);
        capsule_driver_done(&d);
        if (ret_killed)
                *ret_killed = t.killed;
        if (ret_found)
                *ret_found = t.found;
        return r;
}
