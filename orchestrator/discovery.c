/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/driver.h"
#include "capsule/protocol.h"
#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/resolve.h"
#include "orchestrator/discovery.h"
#include "parser/worker-info.h"

/* n strings as a JSON array; NULL when there are none, or on out of memory (*ret_oom). */
static json_t *strv_json(char *const *v, size_t n, bool *ret_oom) {
        if (!v || n == 0)
                return NULL;
        json_t *a = json_array();
        for (size_t i = 0; a && i < n; i++)
                if (json_array_append_new(a, json_string(v[i])) < 0)
                        a = (json_decref(a), NULL);
        if (!a)
                *ret_oom = true;
        return a;
}

int discovery_publish(Worker *w, const char *config_path, TfwError *e) {
        _cleanup_close_ int ws = -EBADF, ctl = -EBADF;
        _cleanup_free_ char *config_abs = NULL;
        const Config *c = w->config;
        const CapsuleDriverOps *ops = capsule_driver_ops(c->driver);
        bool oom = false;
        /* What a job gets (issue 35): the client's words to a model are built from these. */
        _cleanup_(json_decrefp) json_t *allow = strv_json(c->network.allow, c->network.n_allow, &oom);
        _cleanup_(json_decrefp) json_t *cache = strv_json(c->cache.paths, c->cache.n_paths, &oom);
        if (oom)
                return tfw_error(e, ENOMEM, "internal", "out of memory");

        /* The operator's commands name the config; an absolute path works from any directory. */
        if (config_path)
                config_abs = realpath(config_path, NULL);
        WorkerInfo info = {
                .name = c->name,
                .workspace = c->workspace,
                .results_dir = c->results_dir,
                .config = config_abs,
                .limits = w->policy,
                .job = {
                        .memory_bytes = c->limits.memory,
                        .cpus_milli = c->limits.cpus_milli,
                        .pids = c->limits.pids,
                        .max_log_bytes = c->limits.max_log_bytes,
                        .max_artifact_bytes = c->limits.max_artifact_bytes,
                        .max_artifact_entries = c->limits.max_artifact_entries,
                        .network_allow = allow,
                        .max_upload_bytes = c->network.max_upload_bytes,
                        .max_download_bytes = c->network.max_download_bytes,
                        .max_connections = CAPSULE_EGRESS_STREAMS,
                        .cache_paths = cache,
                        /* Changesets are read from the job's layer of a snapshot generation,
                         * which only a driver that binds generations has (docs/controller.md,
                         * "Changes"). */
                        .changes = ops && ops->binds_generations,
                        /* The engine the operator chose, told to the agent (contract section 6). */
                        .engine = ops ? ops->name : NULL,
                        .kernel = ops ? ops->kernel : NULL,
                },
        };
        _cleanup_(json_decrefp) json_t *j = worker_info_build(&info, now_realtime());
        _cleanup_free_ char *s = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        if (!s)
                return tfw_error(e, ENOMEM, "internal", "out of memory");

        ws = open_dir_path_nofollow(c->workspace, w->use_openat2);
        if (ws < 0)
                return worker_workspace_error(e, "discovery", c->workspace, ws);
        ctl = openat_child(ws, ".tentaflake-worker", O_RDONLY | O_DIRECTORY, w->use_openat2);
        if (ctl < 0)
                return tfw_error(e, ctl, "discovery", "cannot open '%s/.tentaflake-worker': %s", c->workspace,
                                 strerror(-ctl));
        size_t len = strlen(s);
        /* Rewritten at every start: no fsync needed (write_file_replace_at). */
        int r = write_file_replace_at(ctl, WORKER_INFO_FILE, s, len, 0640, 0, c->container_gid);
        if (r < 0)
                return tfw_error(e, r, "discovery", "cannot write '%s/.tentaflake-worker/" WORKER_INFO_FILE "': %s",
                                 c->workspace, strerror(-r));
        return 0;
}
