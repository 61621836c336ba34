/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json-util.h"
#include "common/sha256.h"
#include "common/time-util.h"
#include "capsule/env.h"
#include "validation/job.h"
#include "validation/text.h"

static bool is_seg_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
               c == '-' || c == ':';
}

bool vjob_url_segment_is_valid(const char *s, size_t max) {
        size_t n = strlen(s);
        if (n == 0 || n > max || streq(s, ".") || streq(s, ".."))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_seg_char(s[i]))
                        return false;
        return true;
}

bool vjob_repo_is_valid(const char *s) {
        size_t n = strlen(s), segs = 0;
        if (n == 0 || n > VJOB_REPO_MAX)
                return false;
        const char *p = s;
        for (;;) {
                const char *slash = strchr(p, '/');
                size_t l = slash ? (size_t) (slash - p) : strlen(p);
                char seg[VJOB_REPO_MAX + 1];
                memcpy(seg, p, l);
                seg[l] = 0;
                if (!vjob_url_segment_is_valid(seg, VJOB_REPO_MAX) || ++segs > 8)
                        return false;
                if (!slash)
                        return true;
                p = slash + 1;
        }
}

static int get_text(json_t *o, const char *key, const char *field, size_t max, char **ret, TfwError *e) {
        const char *s;
        char shown[SHOW_MAX];
        int r = json_get_string(o, key, field, true, false, &s, e);
        if (r < 0)
                return r;
        if (strlen(s) == 0 || strlen(s) > max || has_control(s))
                return tfw_error(e, EBADMSG, "bad_value", "%s '%s': must be 1..%zu characters without control characters",
                                 field, text_show(s, shown), max);
        *ret = strdup(s);
        return *ret ? 0 : tfw_error(e, ENOMEM, "oom", "out of memory");
}

static int get_uint(json_t *o, const char *key, const char *field, bool required, int64_t min, int64_t max,
                    uint64_t *ret, TfwError *e) {
        int64_t v = 0;
        int r = json_get_int_range(o, key, field, required, min, max, &v, e);
        if (r == -ENOENT) {
                *ret = 0;
                return 0;
        }
        if (r < 0)
                return r;
        *ret = (uint64_t) v;
        return 0;
}

static int env_cmp(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static int parse_run(json_t *run, VJobRun *out, TfwError *e) {
        static const char *const keys[] = {"argv", "timeout_secs", "memory_mb", "max_pids", "env", "network",
                                           "image", "environment_digest", NULL};
        char shown[SHOW_MAX];
        json_t *argv, *env, *v;
        size_t i, bytes = 0;
        int r;

        if (!json_is_object(run))
                return tfw_error(e, EBADMSG, "bad_type", "job.run must be an object");
        r = json_check_keys(run, keys, "job.run.", e);
        if (r < 0)
                return r;

        argv = json_object_get(run, "argv");
        if (!argv)
                return tfw_error(e, EBADMSG, "missing_field", "job.run.argv is required");
        if (!json_is_array(argv) || json_array_size(argv) == 0 || json_array_size(argv) > VJOB_ARGV_MAX)
                return tfw_error(e, EBADMSG, "bad_value", "job.run.argv must be a list of 1..%d strings", VJOB_ARGV_MAX);
        out->argv = calloc(json_array_size(argv) + 1, sizeof(char *));
        if (!out->argv)
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        json_array_foreach(argv, i, v) {
                if (!json_is_string(v))
                        return tfw_error(e, EBADMSG, "bad_type", "job.run.argv[%zu] must be a string", i);
                bytes += json_string_length(v) + 1;
                if (bytes > VJOB_ARGV_BYTES_MAX)
                        return tfw_error(e, E2BIG, "out_of_range", "job.run.argv is longer than %u bytes",
                                         VJOB_ARGV_BYTES_MAX);
                if (i == 0 && json_string_length(v) == 0)
                        return tfw_error(e, EBADMSG, "bad_value", "job.run.argv[0] is empty");
                out->argv[i] = strdup(json_string_value(v));
                if (!out->argv[i])
                        return tfw_error(e, ENOMEM, "oom", "out of memory");
                out->n_argv++;
        }

        r = get_uint(run, "timeout_secs", "job.run.timeout_secs", false, 0, 604800, &out->timeout_secs, e);
        if (r >= 0)
                r = get_uint(run, "memory_mb", "job.run.memory_mb", false, 0, 1 << 24, &out->memory_mb, e);
        if (r >= 0)
                r = get_uint(run, "max_pids", "job.run.max_pids", false, 0, 4194304, &out->max_pids, e);
        if (r < 0)
                return r;

        env = json_object_get(run, "env");
        if (env && !json_is_null(env)) {
                const char *k;
                size_t ebytes = 0;
                if (!json_is_object(env) || json_object_size(env) > VJOB_ENV_MAX)
                        return tfw_error(e, EBADMSG, "bad_value", "job.run.env must be an object of at most %d strings",
                                         VJOB_ENV_MAX);
                out->env = calloc(json_object_size(env) + 1, sizeof(char *));
                if (!out->env)
                        return tfw_error(e, ENOMEM, "oom", "out of memory");
                json_object_foreach(env, k, v) {
                        if (!capsule_env_name_is_valid(k, strlen(k)))
                                return tfw_error(e, EBADMSG, "bad_value", "job.run.env: '%s' is not a variable name",
                                                 text_show(k, shown));
                        if (capsule_env_name_is_reserved(k, strlen(k)))
                                return tfw_error(e, EBADMSG, "bad_value",
                                                 "job.run.env: '%s' is set by the worker and cannot be replaced", k);
                        if (!json_is_string(v))
                                return tfw_error(e, EBADMSG, "bad_type", "job.run.env.%s must be a string", k);
                        ebytes += strlen(k) + json_string_length(v) + 2;
                        if (ebytes > VJOB_ENV_BYTES_MAX)
                                return tfw_error(e, E2BIG, "out_of_range", "job.run.env is longer than %u bytes",
                                                 VJOB_ENV_BYTES_MAX);
                        if (asprintf(&out->env[out->n_env], "%s=%s", k, json_string_value(v)) < 0) {
                                out->env[out->n_env] = NULL;
                                return tfw_error(e, ENOMEM, "oom", "out of memory");
                        }
                        out->n_env++;
                }
                qsort(out->env, out->n_env, sizeof(char *), env_cmp);
        }

        v = json_object_get(run, "network");
        if (v && !json_is_null(v)) {
                if (!json_is_boolean(v))
                        return tfw_error(e, EBADMSG, "bad_type", "job.run.network must be a boolean");
                out->network = json_is_true(v);
        }

        const char *s;
        r = json_get_string(run, "image", "job.run.image", false, true, &s, e);
        if (r >= 0) {
                if (strlen(s) == 0 || strlen(s) > 512 || has_control(s) || strchr(s, ' '))
                        return tfw_error(e, EBADMSG, "bad_value", "job.run.image '%s' is not an image reference",
                                         text_show(s, shown));
                out->image = strdup(s);
                if (!out->image)
                        return tfw_error(e, ENOMEM, "oom", "out of memory");
        } else if (r != -ENOENT)
                return r;

        r = json_get_string(run, "environment_digest", "job.run.environment_digest", false, true, &s, e);
        if (r >= 0) {
                if (strncmp(s, VJOB_DIGEST_PREFIX, strlen(VJOB_DIGEST_PREFIX)) != 0 ||
                    !is_lower_hex64(s + strlen(VJOB_DIGEST_PREFIX)))
                        return tfw_error(e, EBADMSG, "bad_value",
                                         "job.run.environment_digest '%s' is not sha256:<64 lowercase hex>",
                                         text_show(s, shown));
                out->environment_digest = strdup(s);
                if (!out->environment_digest)
                        return tfw_error(e, ENOMEM, "oom", "out of memory");
        } else if (r != -ENOENT)
                return r;
        return 0;
}

VJob *vjob_free(VJob *j) {
        if (!j)
                return NULL;
        free(j->id);
        free(j->repo);
        free(j->proposal);
        free(j->check);
        strv_free(j->run.argv);
        strv_free(j->run.env);
        free(j->run.image);
        free(j->run.environment_digest);
        free(j->lease_id);
        free(j->lease_expires_at);
        free(j->refusal);
        free(j);
        return NULL;
}

int vjob_parse_claim(const char *buf, size_t len, VJob **ret, TfwError *e) {
        static const char *const top_keys[] = {"job", "lease", NULL};
        static const char *const job_keys[] = {"id", "repo", "proposal", "check", "tree", "policy_version",
                                               "attempt", "run", NULL};
        static const char *const lease_keys[] = {"id", "expires_at", NULL};
        _cleanup_json_ json_t *root = NULL;
        _cleanup_vjob_ VJob *j = NULL;
        char shown[SHOW_MAX];
        json_t *job, *lease;
        const char *s;
        int64_t v;
        usec_t t;
        int r;

        if (len > VJOB_CLAIM_MAX_BYTES)
                return tfw_error(e, E2BIG, "too_large", "the claim answer is larger than %u bytes", VJOB_CLAIM_MAX_BYTES);
        r = json_load_object_strict(buf, len, "claim", &root, e);
        if (r < 0)
                return r;
        r = json_check_keys(root, top_keys, "", e);
        if (r < 0)
                return r;
        job = json_object_get(root, "job");
        lease = json_object_get(root, "lease");
        if (!json_is_object(job) || !json_is_object(lease))
                return tfw_error(e, EBADMSG, "bad_type", "the claim needs the objects 'job' and 'lease'");
        r = json_check_keys(job, job_keys, "job.", e);
        if (r < 0)
                return r;
        r = json_check_keys(lease, lease_keys, "lease.", e);
        if (r < 0)
                return r;

        j = calloc(1, sizeof(*j));
        if (!j)
                return tfw_error(e, ENOMEM, "oom", "out of memory");

        r = json_get_string(job, "id", "job.id", true, false, &s, e);
        if (r < 0)
                return r;
        if (!vjob_url_segment_is_valid(s, VJOB_ID_MAX))
                return tfw_error(e, EBADMSG, "bad_value", "job.id '%s' must be 1..%d of [A-Za-z0-9._:-]", text_show(s, shown),
                                 VJOB_ID_MAX);
        j->id = strdup(s);
        r = json_get_string(job, "repo", "job.repo", true, false, &s, e);
        if (r < 0)
                return r;
        if (!vjob_repo_is_valid(s))
                return tfw_error(e, EBADMSG, "bad_value", "job.repo '%s' is not owner/name of [A-Za-z0-9._:-]",
                                 text_show(s, shown));
        j->repo = strdup(s);
        if (!j->id || !j->repo)
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        r = get_text(job, "proposal", "job.proposal", VJOB_TEXT_MAX, &j->proposal, e);
        if (r >= 0)
                r = get_text(job, "check", "job.check", VJOB_TEXT_MAX, &j->check, e);
        if (r < 0)
                return r;
        r = json_get_string(job, "tree", "job.tree", true, false, &s, e);
        if (r < 0)
                return r;
        if (!is_lower_hex64(s))
                return tfw_error(e, EBADMSG, "bad_value", "job.tree '%s' is not 64 lowercase hex digits", text_show(s, shown));
        memcpy(j->tree, s, GIT_OID_HEX_SIZE);
        r = json_get_int_range(job, "policy_version", "job.policy_version", true, 0, INT64_C(1) << 53, &v, e);
        if (r < 0)
                return r;
        j->policy_version = v;
        r = json_get_int_range(job, "attempt", "job.attempt", true, 1, VJOB_ATTEMPT_MAX, &v, e);
        if (r < 0)
                return r;
        j->attempt = v;
        r = get_text(lease, "id", "lease.id", VJOB_TEXT_MAX, &j->lease_id, e);
        if (r < 0)
                return r;
        r = json_get_string(lease, "expires_at", "lease.expires_at", true, false, &s, e);
        if (r < 0)
                return r;
        if (parse_rfc3339(s, &t) < 0)
                return tfw_error(e, EBADMSG, "bad_value", "lease.expires_at '%s' is not an RFC 3339 UTC time",
                                 text_show(s, shown));
        j->lease_expires_at = strdup(s);
        if (!j->lease_expires_at)
                return tfw_error(e, ENOMEM, "oom", "out of memory");

        /* The job and its lease are known from here on: a run section that no worker can ever
         * accept (a reserved variable in env, a wrong type, a value out of range) is the job's
         * permanent refusal, reported with `fail`, never a claim the worker drops and the
         * server hands out again until its attempts run out. */
        if (!json_object_get(job, "run"))
                r = tfw_error(e, EBADMSG, "missing_field", "job.run is required");
        else
                r = parse_run(json_object_get(job, "run"), &j->run, e);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                j->refusal = strdup(e->message);
                if (!j->refusal)
                        return tfw_error(e, ENOMEM, "oom", "out of memory");
        }
        *ret = TAKE_PTR(j);
        return 0;
}

static int path_cmp(const void *a, const void *b) {
        return strcmp((*(VManifestEntry *const *) a)->path, (*(VManifestEntry *const *) b)->path);
}

int vmanifest_check_paths(const VManifest *m, TfwError *e) {
        _cleanup_free_ VManifestEntry **v = NULL;
        char shown[SHOW_MAX];

        for (size_t i = 0; i < m->n_entries; i++) {
                const char *p = m->entries[i].path;
                size_t depth = 0, n = strlen(p);
                if (n == 0 || n > GIT_PATH_MAX)
                        return tfw_error(e, EBADMSG, "invalid_path", "path '%s' is empty or too long", text_show(p, shown));
                for (const char *c = p;;) {
                        const char *slash = strchr(c, '/');
                        size_t l = slash ? (size_t) (slash - c) : strlen(c);
                        if (!git_entry_name_is_valid(c, l))
                                return tfw_error(e, EBADMSG, "invalid_path",
                                                 "path '%s' has an empty, '.', '..' or overlong component",
                                                 text_show(p, shown));
                        if (++depth > GIT_PATH_DEPTH_MAX)
                                return tfw_error(e, EBADMSG, "invalid_path", "path '%s' is deeper than %d",
                                                 text_show(p, shown), GIT_PATH_DEPTH_MAX);
                        if (!slash)
                                break;
                        c = slash + 1;
                }
        }
        /* Duplicates and file/directory conflicts: after sorting, a conflict "a" vs "a/b"
         * may be separated by "a-x" or "a.c" ('-' and '.' sort before '/'), so each path is
         * looked up as a prefix with bsearch instead of only compared with its neighbour. */
        v = calloc(m->n_entries + 1, sizeof(*v));
        if (!v)
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        for (size_t i = 0; i < m->n_entries; i++)
                v[i] = &m->entries[i];
        qsort(v, m->n_entries, sizeof(*v), path_cmp);
        for (size_t i = 0; i + 1 < m->n_entries; i++)
                if (streq(v[i]->path, v[i + 1]->path))
                        return tfw_error(e, EBADMSG, "invalid_path", "path '%s' appears twice", text_show(v[i]->path, shown));
        for (size_t i = 0; i < m->n_entries; i++) {
                char buf[GIT_PATH_MAX + 1];
                const char *p = v[i]->path;
                for (const char *slash = strchr(p, '/'); slash; slash = strchr(slash + 1, '/')) {
                        size_t l = (size_t) (slash - p);
                        memcpy(buf, p, l);
                        buf[l] = 0;
                        VManifestEntry key = {.path = buf}, *kp = &key;
                        if (bsearch(&kp, v, m->n_entries, sizeof(*v), path_cmp))
                                return tfw_error(e, EBADMSG, "invalid_path",
                                                 "'%s' is both a file and the directory of '%s'", text_show(buf, shown), p);
                }
        }
        return 0;
}

int vmanifest_verify_tree(const VManifest *m, const char *want, TfwError *e) {
        _cleanup_free_ GitPathEntry *pe = calloc(m->n_entries + 1, sizeof(GitPathEntry));
        uint8_t oid[GIT_OID_SIZE];
        char hex[GIT_OID_HEX_SIZE];
        int r;

        if (!pe)
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        for (size_t i = 0; i < m->n_entries; i++) {
                pe[i].path = m->entries[i].path;
                pe[i].mode = m->entries[i].mode;
                memcpy(pe[i].oid, m->entries[i].blob, GIT_OID_SIZE);
        }
        r = git_tree_id_from_paths(pe, m->n_entries, oid);
        if (r == -EBADMSG)
                return tfw_error(e, EBADMSG, "invalid_path", "the manifest's paths do not form a tree");
        if (r < 0)
                return tfw_error(e, -r, "oom", "cannot compute the tree id: %s", strerror(-r));
        sha256_to_hex(oid, hex);
        if (!streq(hex, want))
                return tfw_error(e, EBADMSG, "tree_mismatch",
                                 "the manifest's entries give tree %s, not the job's tree %s", hex, want);
        return 0;
}

/* ---- symlinks ------------------------------------------------------------------------- */

typedef struct Resolver {
        const VManifest *m;
        char *const *targets;
        VManifestEntry **sorted;
        unsigned hops;
} Resolver;

static const VManifestEntry *lookup(const Resolver *rs, const char *path) {
        VManifestEntry key = {.path = (char *) path}, *kp = &key;
        VManifestEntry **f = bsearch(&kp, rs->sorted, rs->m->n_entries, sizeof(VManifestEntry *), path_cmp);
        return f ? *f : NULL;
}

#define RESOLVE_HOPS_MAX 40

/* Resolve target (relative to directory dir, a path of depth components in stack) inside the
 * tree. stack holds the current absolute-within-root path as a '/'-joined string. Returns 0
 * when it stays inside, -ELOOP when it leaves or loops. */
static int resolve_in(Resolver *rs, char *cur, size_t *cur_len, const char *target) {
        if (target[0] == '/')
                return -ELOOP;
        const char *c = target;
        while (*c) {
                const char *slash = strchr(c, '/');
                size_t l = slash ? (size_t) (slash - c) : strlen(c);
                if (l == 0 || (l == 1 && c[0] == '.')) {
                        /* nothing */
                } else if (l == 2 && c[0] == '.' && c[1] == '.') {
                        if (*cur_len == 0)
                                return -ELOOP; /* above the root */
                        char *last = memrchr(cur, '/', *cur_len);
                        *cur_len = last ? (size_t) (last - cur) : 0;
                        cur[*cur_len] = 0;
                } else {
                        if (*cur_len + 1 + l > GIT_PATH_MAX)
                                return -ELOOP;
                        if (*cur_len)
                                cur[(*cur_len)++] = '/';
                        memcpy(cur + *cur_len, c, l);
                        *cur_len += l;
                        cur[*cur_len] = 0;
                        const VManifestEntry *en = lookup(rs, cur);
                        if (en && en->mode == GIT_MODE_SYMLINK) {
                                if (++rs->hops > RESOLVE_HOPS_MAX)
                                        return -ELOOP;
                                /* Replace the link by its target, from the link's directory. */
                                char *last = memrchr(cur, '/', *cur_len);
                                *cur_len = last ? (size_t) (last - cur) : 0;
                                cur[*cur_len] = 0;
                                int r = resolve_in(rs, cur, cur_len, rs->targets[en - rs->m->entries]);
                                if (r < 0)
                                        return r;
                        }
                }
                if (!slash)
                        break;
                c = slash + 1;
        }
        return 0;
}

int vmanifest_check_symlinks(const VManifest *m, char *const *targets, TfwError *e) {
        _cleanup_free_ VManifestEntry **v = calloc(m->n_entries + 1, sizeof(*v));
        char shown[SHOW_MAX], cur[GIT_PATH_MAX + 2];

        if (!v)
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        for (size_t i = 0; i < m->n_entries; i++)
                v[i] = &m->entries[i];
        qsort(v, m->n_entries, sizeof(*v), path_cmp);
        Resolver rs = {.m = m, .targets = targets, .sorted = v};
        for (size_t i = 0; i < m->n_entries; i++) {
                if (m->entries[i].mode != GIT_MODE_SYMLINK)
                        continue;
                const char *p = m->entries[i].path;
                const char *last = strrchr(p, '/');
                size_t cl = last ? (size_t) (last - p) : 0;
                memcpy(cur, p, cl);
                cur[cl] = 0;
                rs.hops = 0;
                if (!targets[i] || resolve_in(&rs, cur, &cl, targets[i]) < 0)
                        return tfw_error(e, ELOOP, "symlink_escape", "symlink '%s' points outside the checkout",
                                         text_show(p, shown));
        }
        return 0;
}
