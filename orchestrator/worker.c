/* SPDX-License-Identifier: MIT */
#include <errno.h>

#include "common/fd-util.h"
#include "common/log.h"
#include "common/resolve.h"
#include "orchestrator/worker.h"

int worker_open(Worker *w, const Config *c, TfwError *e) {
        int r;

        *w = (Worker){.config = c, .dirs = WORKER_DIRS_NULL, .inbox_fd = -EBADF};
        config_request_policy(c, &w->policy);
        w->use_openat2 = openat2_usable();
        r = worker_dirs_open(c, &w->dirs, e);
        if (r < 0)
                return r;
        r = audit_open(w->dirs.state_fd, c->audit_generations, &w->audit, e);
        if (r < 0) {
                worker_dirs_close(&w->dirs);
                return r;
        }
        return 0;
}

void worker_close(Worker *w) {
        audit_close(w->audit);
        w->audit = NULL;
        worker_dirs_close(&w->dirs);
        w->inbox_fd = safe_close(w->inbox_fd);
}

int worker_audit(Worker *w, const char *event, json_t *fields, TfwError *e) {
        TfwError local = {0};
        int r = audit_append(w->audit, event, fields, e ? e : &local);
        /* Callers go on after a failed append (the job's result is more important than its
         * audit line), so the failure is never silent: it reaches the journal here. */
        if (r < 0)
                log_error("audit: cannot record '%s': %s", event, (e ? e : &local)->message);
        return r;
}
