/* SPDX-License-Identifier: MIT */
/* libFuzzer target for parser/config.c. Beyond "no crash, no leak", it checks the parser's
 * guarantees on every input it accepts (defaults filled in, every rule of docs/config.md
 * holds) and that every refusal carries a code and a one-line message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "common/path-util.h"
#include "parser/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                 \
        do {                                                                                     \
                if (!(x)) {                                                                      \
                        fprintf(stderr, "fuzz-config: guarantee broken: %s\n", #x);              \
                        abort();                                                                 \
                }                                                                                \
        } while (0)

static bool overlaps(const char *a, const char *b) {
        return path_is_below_or_equal(a, b) || path_is_below_or_equal(b, a);
}

static void check_config(const Config *c) {
        const ConfigLimits *l = &c->limits;
        RequestPolicy p;

        CHECK(c->version == 1);
        CHECK(config_name_is_valid(c->name));
        CHECK(path_is_absolute_normalized(c->workspace) && !streq(c->workspace, "/"));
        CHECK(path_is_absolute_normalized(c->state_dir) && !streq(c->state_dir, "/"));
        CHECK(path_is_absolute_normalized(c->results_dir) && !streq(c->results_dir, "/"));
        CHECK(!overlaps(c->state_dir, c->workspace));
        CHECK(!overlaps(c->results_dir, c->workspace));
        CHECK(!overlaps(c->results_dir, c->state_dir));
        CHECK(c->container_uid >= 1 && c->container_uid <= 4294967294U);
        CHECK(c->container_gid >= 1 && c->container_gid <= 4294967294U);
        CHECK(c->concurrency >= 1 && c->concurrency <= 64);
        CHECK(c->retention_days >= 1 && c->audit_generations >= 1 && c->pending_ttl_hours >= 1);

        CHECK(driver_to_string(c->driver));
        CHECK(c->platform);
        if (c->driver == DRIVER_RUNSC) {
                CHECK(!c->image);
                CHECK(!(c->rootfs && c->n_system_mounts > 0));
        } else {
                CHECK(c->image && !c->rootfs && !c->runsc && c->n_system_mounts == 0);
        }
        CHECK(c->n_system_mounts <= CONFIG_MAX_SYSTEM_MOUNTS);
        for (size_t i = 0; i < c->n_system_mounts; i++) {
                const SystemMount *m = &c->system_mounts[i];
                CHECK(path_is_absolute_normalized(m->host) && !streq(m->host, "/"));
                CHECK(path_is_absolute_normalized(m->sandbox) && !streq(m->sandbox, "/"));
                CHECK(!strchr(m->host, ':') && !strchr(m->host, '='));
                CHECK(!m->identity || (*m->identity && strlen(m->identity) <= CONFIG_IDENTITY_MAX));
                CHECK(!overlaps(m->host, c->workspace) && !overlaps(m->host, c->state_dir) &&
                      !overlaps(m->host, c->results_dir));
                for (size_t j = 0; j < i; j++)
                        CHECK(!streq(m->sandbox, c->system_mounts[j].sandbox));
        }
        if (c->rootfs)
                CHECK(!overlaps(c->rootfs, c->workspace) && !overlaps(c->rootfs, c->state_dir));
        CHECK(!!c->signing_key == !!c->signing_identity);
        if (c->signing_key)
                CHECK(!path_is_below_or_equal(c->signing_key, c->workspace) &&
                      !path_is_below_or_equal(c->signing_key, c->results_dir));

        CHECK(l->max_request_bytes >= 1024 && l->max_request_bytes <= (1U << 20));
        CHECK(l->max_argv >= 1 && l->max_argv <= 4096);
        CHECK(l->max_argv_bytes >= 1 && l->max_argv_bytes <= (1U << 20));
        CHECK(l->default_timeout_seconds >= 1);
        CHECK(l->default_timeout_seconds <= l->max_timeout_seconds);
        CHECK(l->max_timeout_seconds <= 604800);
        CHECK(l->memory >= (16U << 20) && l->memory_swap >= l->memory);
        CHECK(l->max_snapshot_bytes >= 1 && l->max_snapshot_bytes <= l->workspace_tmpfs);
        CHECK(l->cpus_milli >= 10 && l->cpus_milli <= 1024000);
        CHECK(strnlen(l->cpus, sizeof(l->cpus)) < sizeof(l->cpus) && l->cpus[0]);
        CHECK(l->pids >= 8 && l->tmp_tmpfs >= 1 && l->max_log_bytes >= 4096);
        CHECK(l->max_artifact_bytes >= 1 && l->max_artifact_entries >= 1);
        CHECK(l->max_snapshot_entries >= 1);

        const ConfigCache *cc = &c->cache;
        if (!cc->paths) {
                CHECK(cc->n_paths == 0 && config_store_cache_inodes(c) == 0);
                CHECK(config_store_tmpfs_bytes(c) == l->max_store_bytes);
        } else {
                CHECK(c->driver == DRIVER_RUNSC);
                CHECK(cc->n_paths >= 1 && cc->n_paths <= CONFIG_CACHE_PATHS_MAX && !cc->paths[cc->n_paths]);
                CHECK(cc->max_bytes >= 1 && cc->max_bytes <= (UINT64_C(2) << 40));
                CHECK(cc->max_entries >= 1 && cc->max_entries <= 10000000);
                /* (2 x concurrency + 1) caches; the bounds keep it from overflowing */
                uint64_t caches = 2 * (uint64_t) (c->concurrency ? c->concurrency : 1) + 1;
                CHECK(config_store_tmpfs_bytes(c) == l->max_store_bytes + caches * cc->max_bytes);
                uint64_t dirs = 0; /* the mount points: a directory per component */
                for (size_t i = 0; i < cc->n_paths; i++)
                        for (const char *q = cc->paths[i]; *q; q++)
                                dirs += q == cc->paths[i] || *q == '/';
                CHECK(config_store_cache_inodes(c) ==
                      caches * (cc->max_entries + cc->n_paths + CONFIG_STORE_CACHE_OWN_INODES) + 64 + (caches + 1) / 2 * dirs);
                for (size_t i = 0; i < cc->n_paths; i++) {
                        const char *q = cc->paths[i];
                        size_t n = strlen(q);
                        CHECK(n >= 1 && n <= CONFIG_CACHE_PATH_MAX && q[0] != '/' && q[n - 1] != '/');
                        CHECK(!strstr(q, "//") && !overlaps(q, ".tentaflake-worker") && !overlaps(q, "artifacts"));
                        for (size_t j = 0; j < i; j++)
                                CHECK(!overlaps(q, cc->paths[j]));
                }
        }

        config_request_policy(c, &p);
        CHECK(p.max_timeout_seconds == l->max_timeout_seconds);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Config *c = NULL;
        TfwError e = {};
        int r;

        r = config_parse_buffer((const char *) data, size, &c, &e);
        if (r < 0) {
                CHECK(!c);
                CHECK(e.code && e.error > 0);
                CHECK(e.message[0] && !strchr(e.message, '\n'));
                return 0;
        }
        CHECK(c);
        check_config(c);
        config_free(c);
        return 0;
}
