/* SPDX-License-Identifier: MIT */
/* The server's answers, parsed strictly (contract section 8; threats 8 and 11): the claim
 * (a JOB and its lease) and the tree manifest. Both come from the network and are untrusted.
 *
 * Security contract of both parsers: at most their byte ceiling is looked at; refused with
 * EBADMSG and a stable code: anything json_load_object_strict refuses (NUL bytes, invalid
 * UTF-8, duplicate keys, trailing data), unknown keys at any level, wrong types (a real where
 * an integer is expected), values out of range, and strings with control characters. Ids
 * that are put into URLs (job id, repo, blob ids) are restricted to characters that need no
 * escaping, so a server cannot steer the worker's requests elsewhere. Every quantity is
 * capped: argv count and bytes, env entries, manifest entries, path length. On success every
 * field is set. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capsule/env.h"
#include "common/error.h"
#include "common/macro.h"
#include "snapshot/git-object.h"

#define VJOB_CLAIM_MAX_BYTES (1U << 20)
#define VJOB_ID_MAX 128
#define VJOB_REPO_MAX 256
#define VJOB_TEXT_MAX 256
#define VJOB_ARGV_MAX 256
#define VJOB_ARGV_BYTES_MAX (64U * 1024)
#define VJOB_ENV_MAX CAPSULE_EXTRA_ENV_MAX
#define VJOB_ENV_BYTES_MAX CAPSULE_EXTRA_ENV_BYTES
#define VJOB_ATTEMPT_MAX 1000
#define VJOB_DIGEST_PREFIX "sha256:"
#define VMANIFEST_MAX_BYTES (256U << 20)
#define VMANIFEST_ENTRIES_MAX 1000000
/* The longest text of one entry, key or tree value of a manifest, whitespace inside it
 * included. The longest legal entry is a GIT_PATH_MAX path written as \u escapes (6 bytes a
 * byte: 24,576) and 100 bytes more. */
#define VMANIFEST_TOKEN_MAX (64U << 10)
/* The targets of a tree's symlinks are held in memory until every one is known to stay inside
 * the tree (vmanifest_check_symlinks): at most this many bytes of them, whatever the checkout
 * ceiling (issue 33: a million symlinks of 4 KiB targets are 4 GiB the checkout ceiling let
 * through, four times the unit's MemoryMax). */
#define VMANIFEST_SYMLINK_BYTES_MAX (16U << 20)

typedef struct VJobRun {
        char **argv;          /* NULL-terminated */
        size_t n_argv;
        uint64_t timeout_secs; /* 0: the worker's default */
        uint64_t memory_mb;    /* 0: default */
        uint64_t max_pids;     /* 0: default */
        char **env;           /* "NAME=VALUE", NULL-terminated, sorted by name */
        size_t n_env;
        bool network;
        char *image;          /* NULL when none */
        char *environment_digest; /* "sha256:<64 hex>" or NULL */
} VJobRun;

typedef struct VJob {
        char *id;
        char *repo;
        char *proposal;
        char *check;
        char tree[GIT_OID_HEX_SIZE];
        int64_t policy_version;
        int64_t attempt;
        VJobRun run;
        char *lease_id;
        char *lease_expires_at; /* as the server wrote it (RFC 3339) */
        char *refusal;          /* non-NULL: job.run can never be accepted (why); run is not
                                 * filled and the job is to be failed permanently */
} VJob;

/* Parse the body of a 200 answer to POST /v1/jobs/claim: {"job": JOB, "lease": {"id",
 * "expires_at"}}. A job whose envelope parses but whose run section is refused comes back
 * with refusal set (and 0). Error codes: bad_json (and the json-util codes), unknown_field, bad_type,
 * bad_value, out_of_range, missing_field. */
int vjob_parse_claim(const char *buf, size_t len, VJob **ret, TfwError *e);
VJob *vjob_free(VJob *j);
static inline void vjob_freep(VJob **j) {
        vjob_free(*j);
}
#define _cleanup_vjob_ _cleanup_(vjob_freep)

/* Is s usable as one URL path segment: 1..max of [A-Za-z0-9._:-], not "." or ".."? */
bool vjob_url_segment_is_valid(const char *s, size_t max);
/* Is s "owner/name" style: 1..8 such segments joined by '/', at most VJOB_REPO_MAX bytes? */
bool vjob_repo_is_valid(const char *s);

typedef struct VManifestEntry {
        char *path;
        uint32_t mode;                 /* GIT_MODE_FILE, _EXECUTABLE or _SYMLINK */
        uint8_t blob[GIT_OID_SIZE];
} VManifestEntry;

typedef struct VManifest {
        char tree[GIT_OID_HEX_SIZE];
        VManifestEntry *entries;
        size_t n_entries;
} VManifest;

/* Parse the body of GET /v1/repos/{repo}/trees/{tree}: {"tree": hex, "entries": [{"path",
 * "mode", "blob"}]}. mode is the octal string git writes ("100644", "100755", "120000");
 * paths are only checked to be non-empty strings without control characters here:
 * vmanifest_check_paths() applies the path rules. The reader below, given the whole body. */
int vmanifest_parse(const char *buf, size_t len, VManifest **ret, TfwError *e);
VManifest *vmanifest_free(VManifest *m);
static inline void vmanifest_freep(VManifest **m) {
        vmanifest_free(*m);
}
#define _cleanup_vmanifest_ _cleanup_(vmanifest_freep)

/* The manifest read as it arrives (issue 33 finding 7: a whole document parsed by jansson
 * costs about 1 KiB an entry, 1.2 GB for 1,000,000 entries of 218 MB; this keeps what it
 * accepts and little more: one entry's text, and the entries parsed so far).
 *
 * Security contract: the same refusals as the whole-document parser it replaces (a top level
 * that is not an object, unknown or duplicate keys, wrong types, NUL bytes raw or escaped,
 * invalid UTF-8, trailing data, the per-entry checks above), each as soon as the bytes that
 * show it have arrived: more than VMANIFEST_MAX_BYTES in all, more than VMANIFEST_ENTRIES_MAX
 * entries, an entry, key or value longer than VMANIFEST_TOKEN_MAX, and, when want_tree is
 * given, a "tree" other than it (code tree_mismatch). jansson decodes every entry, key and
 * value; the reader itself only steps over whitespace and the six structural characters
 * between them. Memory: the entries accepted so far, their paths, and at most
 * VMANIFEST_TOKEN_MAX + the last chunk of pending text. The verdict does not depend on how
 * the body is cut into chunks (tests/fuzz/fuzz-manifest.c checks it). */
typedef struct VManifestReader VManifestReader;
/* want_tree: the job's tree (64 hex), or NULL to accept any. */
int vmanifest_reader_new(const char *want_tree, VManifestReader **ret);
VManifestReader *vmanifest_reader_free(VManifestReader *rd);
static inline void vmanifest_reader_freep(VManifestReader **rd) {
        vmanifest_reader_free(*rd);
}
/* The next n bytes of the body. A refusal (negative errno, e set) is final: stop reading. */
int vmanifest_reader_feed(VManifestReader *rd, const char *p, size_t n, TfwError *e);
/* The body has ended: the manifest, or why there is none. */
int vmanifest_reader_finish(VManifestReader *rd, VManifest **ret, TfwError *e);

/* Path rules (threat 11): relative, no empty, "." or ".." component, no component longer than
 * GIT_NAME_MAX, at most GIT_PATH_MAX bytes and GIT_PATH_DEPTH_MAX components, no duplicate,
 * no path that is both a file and a directory. -EBADMSG (code invalid_path, naming the path)
 * otherwise: a tree no worker will ever materialise. */
int vmanifest_check_paths(const VManifest *m, TfwError *e);

/* Recompute the tree id from the entries in git's SHA-256 format and compare it with want
 * (64 hex). -EBADMSG with code tree_mismatch when it differs. */
int vmanifest_verify_tree(const VManifest *m, const char *want, TfwError *e);

/* Symlink rule: a symlink target (its blob's bytes, already verified) must resolve, within
 * the tree described by m and following the tree's own symlinks (at most 40 hops), to a path
 * inside the checkout. Absolute targets, targets that climb above the root (directly or
 * through another symlink) and loops are refused with -ELOOP, code symlink_escape. targets[i]
 * is the target of entry i when it is a symlink (NUL-terminated), else ignored. */
int vmanifest_check_symlinks(const VManifest *m, char *const *targets, TfwError *e);
