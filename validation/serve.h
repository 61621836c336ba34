/* SPDX-License-Identifier: MIT */
/* `tentaflake-worker serve`: the validation plane's worker loop (contract section 8). Its
 * command line (flags, usage, exit codes, reading the token) is cli/serve.c's; this runs a
 * worker from options already checked there. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <limits.h>

#include "artifacts/signing.h"
#include "common/error.h"
#include "parser/config.h"

#define SERVE_MAX_MOUNTS 32
#define SERVE_MAX_ALLOW_HOSTS CONFIG_NETWORK_ALLOW_MAX
#define SERVE_TOKEN_MAX 4096

/* One line of what the worker does (a job's outcome, a lane's trouble, a signal taken), at a
 * syslog level: the caller logs it. */
typedef void (*ServeReport)(void *userdata, int level, const char *line);

typedef struct ServeOptions {
        const char *server, *key, *token_file, *label, *sandbox, *state_dir, *runsc, *platform;
        const char *image, *engine_runtime; /* --sandbox docker|podman */
        const char *server_socket;          /* --server-socket: reach the server through a local proxy */
        const char *mounts[SERVE_MAX_MOUNTS];
        size_t n_mounts;
        bool no_system_mounts, allow_network;
        /* --allow-host: the egress allowlist (parser/egress-allow.h) of a policy with network: true;
         * with --allow-network only. None: no policy gets network. */
        const char *allow_hosts[SERVE_MAX_ALLOW_HOSTS];
        size_t n_allow_hosts;
        const char *system_mounts_identity;
        long concurrency;
        long max_timeout_secs, max_memory_mb, max_cpu_secs, max_pids;
        long default_timeout_secs, default_memory_mb, default_pids, default_cpu_secs;
        long output_mb, tmp_mb, lease_secs, wait_secs, retry_after_secs, backoff_max_secs, client_timeout_secs;
        long max_checkout_mb, shutdown_grace_secs;
        long sandbox_uid, sandbox_gid;
        long result_tail_kb, open_files, file_size_mb, engine_timeout_secs;
        ServeReport report;                 /* NULL: the events are dropped */
        void *report_userdata;
        long warm_secs; /* a lane keeps one capsule started ahead this long after a job; 0: off */
} ServeOptions;

/* The key and the walls a worker's flags make. */
typedef struct ServeWalls {
        SigningKey *key;
        char *key_path;                      /* the key's absolute path */
        Config *config;                      /* the walls as a worker config (parser/config.h) */
        char name[CONFIG_NAME_MAX + 1];      /* "serve-<label folded>" */
        char state_dir[PATH_MAX];            /* the default --state-dir, when none was given */
} ServeWalls;

/* Load the key and build the walls from o (o's key, label and state_dir are completed: they
 * may point into w afterwards). Error code "usage" for walls the config parser refuses. */
int serve_walls_load(ServeOptions *o, ServeWalls *w, TfwError *e);
void serve_walls_done(ServeWalls *w);

/* The defaults of the CI worker page (shared/seeds). */
void serve_options_default(ServeOptions *o);

/* Run until stopped (SIGTERM/SIGINT: finish the running checks; a second one: stop them and
 * hand their jobs back). token is the bearer credential (the caller wipes it afterwards).
 * Returns 0 after a clean shutdown, or a negative errno with *e saying why: code "usage" for
 * options that cannot make a worker (a bad label, walls the config parser refuses), anything
 * else for a worker that could not start or stopped on an error (401/403, bad key, no
 * sandbox, lanes that did not stop within --shutdown-grace-secs). Never exits. */
int serve_run(ServeOptions *o, const char *token, TfwError *e);
