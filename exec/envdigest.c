/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "capsule/oci-spec.h"
#include "common/json-util.h"
#include "common/sha256.h"
#include "exec/envdigest.h"

/* "none", or the egress the job has (docs/egress.md): the allowlist as written, in its order, and
 * the bounds. */
static json_t *network_description(const Config *cfg) {
        if (!capsule_config_egress(cfg))
                return json_string("none");
        json_t *allow = json_array();
        for (size_t i = 0; allow && i < cfg->network.n_allow; i++)
                if (json_array_append_new(allow, json_string(cfg->network.allow[i])) < 0) {
                        json_decref(allow);
                        return NULL;
                }
        if (!allow)
                return NULL;
        return json_pack("{s:s, s:o, s:I, s:I, s:I}", "egress", "proxy", "allow", allow, "max_upload_bytes",
                         (json_int_t) cfg->network.max_upload_bytes, "max_download_bytes",
                         (json_int_t) cfg->network.max_download_bytes, "max_connections",
                         (json_int_t) CAPSULE_EGRESS_STREAMS);
}

json_t *env_description(const Config *cfg, uint64_t timeout_secs, uint64_t output_bytes, uint64_t cpu_secs,
                        char *const *env, const char *runtime_version, const char *cgroup_description) {
        char user[64];
        json_t *mounts = json_array(), *vars = json_array(), *network = NULL;

        snprintf(user, sizeof(user), "%u:%u", (unsigned) cfg->container_uid, (unsigned) cfg->container_gid);
        if (!mounts || !vars)
                goto fail;
        for (size_t i = 0; i < cfg->n_system_mounts; i++) {
                const SystemMount *m = &cfg->system_mounts[i];
                json_t *o = m->identity ? json_pack("{s:s, s:s}", "sandbox", m->sandbox, "identity", m->identity)
                                        : json_pack("{s:s, s:s}", "sandbox", m->sandbox, "host", m->host);
                if (json_array_append_new(mounts, o) < 0)
                        goto fail;
        }
        /* The constant environment of capsule/oci-spec.h; TENTAFLAKE_JOB's value differs per
         * job, so only its presence is recorded. */
        const char *constant[] = {CAPSULE_ENV_PATH, CAPSULE_ENV_HOME, CAPSULE_ENV_TMPDIR, CAPSULE_ENV_LANG,
                                  "TENTAFLAKE_JOB=<job>", NULL};
        for (const char *const *c = constant; *c; c++)
                if (json_array_append_new(vars, json_string(*c)) < 0)
                        goto fail;
        for (const char *const *v = capsule_egress_env; capsule_config_egress(cfg) && *v; v++)
                if (json_array_append_new(vars, json_string(*v)) < 0)
                        goto fail;
        for (char *const *v = env; v && *v; v++)
                if (json_array_append_new(vars, json_string(*v)) < 0)
                        goto fail;
        network = network_description(cfg);
        if (!network)
                goto fail;

        json_t *d = json_pack(
                "{s:s, s:{s:s, s:s?}, s:{s:o, s:s, s:[], s:b, s:b, s:s, s:s?, s:s*, s:s}, "
                "s:{s:I, s:I, s:I, s:I, s:s, s:I, s:I, s:I, s:o}, s:o, s:o}",
                "driver", driver_to_string(cfg->driver),
                "runtime", "version", runtime_version ? runtime_version : "unknown", "platform", cfg->platform,
                "isolation", "network", network, "user", user, "capabilities", "no_new_privileges", 1, "readonly_root", 1,
                "snapshot", "read-only bind, copied into a tmpfs /work", "rootfs", cfg->rootfs, "image",
                cfg->image, "cgroup", cgroup_description,
                "limits", "timeout_secs", (json_int_t) timeout_secs, "memory", (json_int_t) cfg->limits.memory,
                "memory_swap", (json_int_t) cfg->limits.memory_swap, "pids", (json_int_t) cfg->limits.pids, "cpus",
                cfg->limits.cpus, "work_tmpfs", (json_int_t) cfg->limits.workspace_tmpfs, "tmp_tmpfs",
                (json_int_t) cfg->limits.tmp_tmpfs, "output_bytes", (json_int_t) output_bytes, "cpu_secs",
                cpu_secs ? json_integer((json_int_t) cpu_secs) : json_null(), "mounts", mounts, "env", vars);
        return d;
fail:
        json_decref(mounts);
        json_decref(vars);
        json_decref(network);
        return NULL;
}

int env_digest(const json_t *desc, char out[static ENV_DIGEST_SIZE]) {
        _cleanup_free_ char *c = json_dumps_canonical(desc);
        char hex[SHA256_HEX_SIZE];
        if (!c)
                return -ENOMEM;
        int r = sha256_buffer_hex(c, strlen(c), hex);
        if (r < 0)
                return r;
        snprintf(out, ENV_DIGEST_SIZE, "sha256:%s", hex);
        return 0;
}
