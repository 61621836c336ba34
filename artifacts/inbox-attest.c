/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/sha256.h"
#include "artifacts/attest.h"
#include "artifacts/inbox-attest.h"
#include "artifacts/signing.h"

#define DEPTH_MAX 256

static int hash_fd(int fd, char hex[static SHA256_HEX_SIZE]) {
        _cleanup_(sha256_freep) Sha256 *h = NULL;
        uint8_t d[SHA256_DIGEST_SIZE];
        char buf[65536];
        ssize_t n;
        int r = sha256_new(&h);
        if (r < 0)
                return r;
        while ((n = read(fd, buf, sizeof(buf))) != 0) {
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                r = sha256_update(h, buf, (size_t) n);
                if (r < 0)
                        return r;
        }
        r = sha256_final(h, d);
        if (r < 0)
                return r;
        sha256_to_hex(d, hex);
        return 0;
}

/* Append {"path","sha256"} for every regular file below dfd (prefix is its relative path). */
static int walk(int dfd, const char *prefix, unsigned depth, json_t *out, TfwError *e) {
        if (depth > DEPTH_MAX)
                return tfw_error(e, E2BIG, "attestation", "artifacts nest deeper than %d levels", DEPTH_MAX);
        _cleanup_closedir_ DIR *d = opendir_fd(dfd);
        if (!d)
                return tfw_error(e, errno, "attestation", "cannot read the artifacts: %m");
        struct dirent *de;
        int r = 0;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                _cleanup_free_ char *rel = NULL;
                if (asprintf(&rel, "%s%s%s", prefix, *prefix ? "/" : "", de->d_name) < 0) {
                        r = tfw_error(e, ENOMEM, "attestation", "out of memory");
                        break;
                }
                _cleanup_close_ int fd = openat(dfd, de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
                struct stat st;
                if (fd < 0 || fstat(fd, &st) < 0)
                        continue; /* a symlink (ELOOP) or something vanished: not an artifact */
                if (S_ISDIR(st.st_mode)) {
                        r = walk(fd, rel, depth + 1, out, e);
                        if (r < 0)
                                break;
                } else if (S_ISREG(st.st_mode)) {
                        char hex[SHA256_HEX_SIZE];
                        if (json_array_size(out) >= INBOX_ATTEST_ARTIFACTS_MAX) {
                                r = tfw_error(e, E2BIG, "attestation", "more than %d artifacts", INBOX_ATTEST_ARTIFACTS_MAX);
                                break;
                        }
                        r = hash_fd(fd, hex);
                        if (r < 0) {
                                r = tfw_error(e, -r, "attestation", "cannot hash artifact '%s'", rel);
                                break;
                        }
                        json_array_append_new(out, json_pack("{s:s, s:s}", "path", rel, "sha256", hex));
                }
        }
        return r;
}

static int path_cmp(const void *a, const void *b) {
        return strcmp(json_string_value(json_object_get(*(json_t *const *) a, "path")),
                      json_string_value(json_object_get(*(json_t *const *) b, "path")));
}

int inbox_attest_result(const Config *c, int result_dir_fd, json_t *result, TfwError *e) {
        _cleanup_signing_key_ SigningKey *k = NULL;
        _cleanup_json_ json_t *arts = json_array(), *st = NULL, *env = NULL;
        const char *tree = NULL, *req_sha = NULL;
        int r;

        if (!c->signing_key)
                return 0;
        if (!arts)
                return tfw_error(e, ENOMEM, "attestation", "out of memory");
        r = signing_key_load(c->signing_key, &k, e);
        if (r < 0)
                return r;

        _cleanup_close_ int afd = open_dir_at(result_dir_fd, "artifacts");
        if (afd >= 0) {
                r = walk(afd, "", 0, arts, e);
                if (r < 0)
                        return r;
        }
        /* A stable order: sorted by path. */
        size_t n = json_array_size(arts);
        _cleanup_free_ json_t **v = calloc(n + 1, sizeof(json_t *));
        if (!v)
                return tfw_error(e, ENOMEM, "attestation", "out of memory");
        for (size_t i = 0; i < n; i++)
                v[i] = json_incref(json_array_get(arts, i));
        qsort(v, n, sizeof(json_t *), path_cmp);
        json_array_clear(arts);
        for (size_t i = 0; i < n; i++)
                json_array_append_new(arts, v[i]);

        json_t *snap = json_object_get(result, "snapshot");
        tree = json_string_value(json_object_get(snap, "tree"));
        req_sha = json_string_value(json_object_get(result, "request_sha256"));
        json_t *subject = tree ? json_pack("[{s:s, s:{s:s}}]", "name", "snapshot", "digest", "gitTree", tree)
                               : json_pack("[{s:s, s:{s:s}}]", "name", "request", "digest", "sha256",
                                           req_sha ? req_sha : "");
        /* The build cache the job started from is one of its inputs (threat 15). */
        json_t *cache = json_object_get(result, "cache");
        _cleanup_json_ json_t *inputs = json_is_object(cache) && json_is_true(json_object_get(cache, "used"))
                                                ? json_pack("{s:{s:O}}", "build_cache", "gitTree", json_object_get(cache, "from"))
                                                : NULL;
        json_t *pred = json_pack("{s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:s, s:s, s:O, s:O*}",
                                 "id", json_object_get(result, "id"), "request_sha256",
                                 json_object_get(result, "request_sha256"), "approval",
                                 json_object_get(result, "approval"), "environment_digest",
                                 json_object_get(result, "environment_digest"), "status",
                                 json_object_get(result, "status"), "exit_code", json_object_get(result, "exit_code"),
                                 "signal", json_object_get(result, "signal"), "finished_at",
                                 json_object_get(result, "finished_at"), "issuer", k->identity, "worker", c->name,
                                 "artifacts", arts, "inputs", inputs);
        if (!subject || !pred) {
                json_decref(subject);
                json_decref(pred);
                return tfw_error(e, ENOMEM, "attestation", "out of memory");
        }
        st = json_pack("{s:s, s:o, s:s, s:o}", "_type", INTOTO_STATEMENT_TYPE, "subject", subject, "predicateType",
                       ATTEST_PREDICATE_INBOX, "predicate", pred);
        if (!st)
                return tfw_error(e, ENOMEM, "attestation", "out of memory");
        r = attest_sign_statement(k, st, &env, e);
        if (r < 0)
                return r;
        _cleanup_free_ char *text = json_dumps(env, JSON_COMPACT);
        if (!text)
                return tfw_error(e, ENOMEM, "attestation", "out of memory");
        r = write_file_atomic_at(result_dir_fd, "attestation.json", text, strlen(text), 0640,
                                 geteuid() == 0 ? 0 : (uid_t) -1, geteuid() == 0 ? c->container_gid : (gid_t) -1);
        if (r < 0)
                return tfw_error(e, -r, "attestation", "cannot write attestation.json: %s", strerror(-r));
        if (json_object_set_new(result, "attestation", json_string("attestation.json")) < 0)
                return tfw_error(e, ENOMEM, "attestation", "out of memory");
        return 0;
}
