/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/shell-word.h"
#include "controller/no-worker.h"
#include "parser/config.h"

bool controller_request_taken(const ControllerSite *s, const char *id, ControllerState st) {
        char name[REQUEST_ID_MAX + sizeof(".json")];
        if (st != CONTROLLER_UNKNOWN)
                return true;
        snprintf(name, sizeof(name), "%s.json", id);
        /* Only a name that is surely gone counts: an error to look is not a worker's act. */
        return faccessat(s->inbox_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT;
}

int controller_inbox_age(const ControllerSite *s, const char *id, usec_t *ret_age) {
        char name[REQUEST_ID_MAX + sizeof(".json")];
        struct stat st;
        snprintf(name, sizeof(name), "%s.json", id);
        if (fstatat(s->inbox_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        usec_t mtime = (usec_t) st.st_mtim.tv_sec * USEC_PER_SEC + (usec_t) st.st_mtim.tv_nsec / 1000, now = now_realtime();
        *ret_age = now > mtime ? now - mtime : 0;
        return 0;
}

/* Is config the file the package's units give the worker name? */
static bool config_is_units(const char *config, const char *name) {
        char conventional[sizeof(WORKER_CONFIG_DIR) + 64 + sizeof(".json")];
        if (!name || snprintf(conventional, sizeof(conventional), WORKER_CONFIG_DIR "/%s.json", name) >=
                             (int) sizeof(conventional))
                return false;
        return !config || streq(config, conventional);
}

/* Who should have taken it, and how an operator looks at it. */
static void say_worker(FILE *f, const ControllerSite *s) {
        const WorkerInfo *w = &s->info;
        if (!s->info_json || !w->name) {
                fprintf(f, "No usable worker.json in '%s/" CONTROL_DIR_NAME "/' names the worker (the worker writes it "
                           "at every start): none has started for this workspace, or it could not write the file. "
                           "Ask the operator to start this workspace's worker (docs/install.md).",
                        s->workspace);
                return;
        }
        fprintf(f, "This workspace's worker is '%s' (as worker.json says", w->name);
        if (w->config)
                fprintf(f, ": config '%s'", w->config);
        if (w->started_at)
                fprintf(f, ", last started %s", w->started_at);
        fputs(")", f);
        if (config_is_units(w->config, w->name)) {
                fprintf(f, "; the systemd unit tentaflake-worker@%s.service runs it (or, with path activation, "
                           "tentaflake-worker-queue@%s.path), and it is stopped, failed or stuck. An operator can "
                           "look with 'systemctl status tentaflake-worker@%s.service tentaflake-worker-queue@%s.path' "
                           "and start it.",
                        w->name, w->name, w->name, w->name);
                return;
        }
        _cleanup_free_ char *cfg = shell_word(w->config);
        fprintf(f, "; no unit of the package runs it (its config is not " WORKER_CONFIG_DIR "/%s.json): it is not "
                   "running, or stuck. Whoever started 'tentaflake-worker --config %s run' (or drain) must start it again.",
                w->name, cfg ? cfg : w->config);
}

char *controller_no_worker_words(const ControllerSite *s, const char *id) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return NULL;
        fprintf(f, "request '%s' is still in the inbox after %d s: no worker has taken it. ", id,
                CONTROLLER_NO_WORKER_SECONDS);
        say_worker(f, s);
        fputs(" The request stays in the inbox and runs when a worker takes it.", f);
        if (fclose(f) != 0) {
                free(text);
                return NULL;
        }
        return text;
}
