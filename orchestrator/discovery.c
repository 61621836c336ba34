/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/resolve.h"
#include "orchestrator/discovery.h"
#include "parser/worker-info.h"

int discovery_publish(Worker *w, const char *config_path, TfwError *e) {
        _cleanup_close_ int ws = -EBADF, ctl = -EBADF;
        _cleanup_free_ char *config_abs = NULL;
        const Config *c = w->config;

        /* The operator's commands name the config; an absolute path works from any directory. */
        if (config_path)
                config_abs = realpath(config_path, NULL);
        WorkerInfo info = {
                .name = c->name,
                .workspace = c->workspace,
                .results_dir = c->results_dir,
                .config = config_abs,
                .limits = w->policy,
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
