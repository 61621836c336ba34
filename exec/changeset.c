/* SPDX-License-Identifier: MIT */
/* A job's changeset, from init's list and the staged files (exec/changeset.h). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capsule/layer-diff.h"
#include "capsule/protocol.h"
#include "common/fd-util.h"
#include "common/macro.h"
#include "common/path-util.h"
#include "exec/changeset.h"
#include "parser/changes-manifest.h"
#include "parser/request.h"
#include "snapshot/git-object.h"

#define CONTROL_DIR REQUEST_CONTROL_DIR
#define WHY_MAX 160

typedef struct Build {
        int staging_fd, generation_fd;
        const char *const *skip;      /* paths no change may name (artifacts, the cache's) */
        json_t *changes, *seen;
        ChangesetSummary sum;
        uint64_t files;
        Sha256 *h;
        uint8_t buf[64 * 1024];
        char incomplete[512];
        bool ended;
} Build;

static int bad(TfwError *e, unsigned line, const char *what) {
        return tfw_error(e, EBADMSG, "changes_rejected", "the capsule's list of changes, line %u: %s", line, what);
}

/* path below dir_fd, its parents one component at a time, the leaf with O_NOFOLLOW. */
static int open_below(int dir_fd, const char *path, int flags) {
        const char *slash = strrchr(path, '/');
        if (!slash) {
                int fd = openat(dir_fd, path, flags | O_NOFOLLOW | O_CLOEXEC);
                return fd < 0 ? -errno : fd;
        }
        _cleanup_free_ char *parent = strndup(path, (size_t) (slash - path));
        if (!parent)
                return -ENOMEM;
        _cleanup_close_ int d = open_dir_components(dir_fd, parent);
        if (d < 0)
                return d;
        int fd = openat(d, slash + 1, flags | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

static int hash_fd(Build *b, int fd, uint64_t size, char hex[static GIT_OID_HEX_SIZE]) {
        uint8_t oid[GIT_OID_SIZE];
        int r = git_blob_id_fd(b->h, fd, size, b->buf, sizeof(b->buf), oid);
        if (r >= 0)
                sha256_to_hex(oid, hex);
        return r;
}

static const char *git_mode(mode_t m) {
        return S_ISDIR(m) ? "40000" : S_ISLNK(m) ? "120000" : (m & S_IXUSR) ? "100755" : "100644";
}

/* The version of path the job was given: its mode and, for a file, its blob id; 0 when the
 * generation has nothing there (or a directory, for a file). */
static int base_of(Build *b, const char *path, mode_t *ret_mode, char hex[static GIT_OID_HEX_SIZE]) {
        int fd = open_below(b->generation_fd, path, O_RDONLY | O_NONBLOCK | O_PATH);
        struct stat st;
        hex[0] = 0;
        if (fd == -ENOENT || fd == -ENOTDIR || fd == -ELOOP)
                return 0;
        if (fd < 0)
                return fd;
        int r = fstat(fd, &st) < 0 ? -errno : 1;
        close(fd);
        if (r < 0)
                return r;
        *ret_mode = st.st_mode;
        if (!S_ISREG(st.st_mode))
                return 1;
        _cleanup_close_ int rd = open_below(b->generation_fd, path, O_RDONLY | O_NONBLOCK);
        if (rd < 0)
                return rd;
        return (r = hash_fd(b, rd, (uint64_t) st.st_size, hex)) < 0 ? r : 1;
}

/* seen: each path's first kind, or "replaced" once a deletion was followed by a new entry. */
static int add(Build *b, json_t *entry, const char *path) {
        json_t *before = json_object_get(b->seen, path);
        const char *kind = before ? "replaced" : json_string_value(json_object_get(entry, "kind"));
        if (!entry || json_array_append_new(b->changes, entry) < 0 || json_object_set_new(b->seen, path, json_string(kind)) < 0)
                return -ENOMEM;
        return 0;
}

static int change_file(Build *b, const char *mode, const char *size_s, const char *path, unsigned line, TfwError *e) {
        char *end, id[GIT_OID_HEX_SIZE], base[GIT_OID_HEX_SIZE];
        unsigned long long size = strtoull(size_s, &end, 10);
        mode_t bm = 0;
        struct stat st;
        if (*end || !*size_s || (!streq(mode, "644") && !streq(mode, "755")))
                return bad(e, line, "a file's mode or size is malformed");
        _cleanup_close_ int fd = open_below(b->staging_fd, path, O_RDONLY | O_NONBLOCK);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (unsigned long long) st.st_size != size)
                return bad(e, line, "a file it names is not the one the capsule sent");
        int r = hash_fd(b, fd, size, id);
        if (r >= 0)
                r = base_of(b, path, &bm, base);
        if (r < 0)
                return tfw_error(e, -r, "changes_failed", "changes: cannot read '%s': %s", path, strerror(-r));
        const char *gm = streq(mode, "755") ? "100755" : "100644";
        bool had = r > 0 && S_ISREG(bm);
        const char *kind = !had ? "added" : streq(id, base) ? "mode" : "modified";
        if (had && streq(id, base) && streq(gm, git_mode(bm)))
                return bad(e, line, "a file the job did not change");
        b->files++;
        b->sum.bytes += size;
        if (streq(kind, "added"))
                b->sum.added++;
        else
                b->sum.modified++;
        return add(b, json_pack("{s:s, s:s, s:s, s:I, s:s, s:s?, s:s?}", "path", path, "kind", kind, "mode", gm, "size",
                                (json_int_t) size, "id", id, "base", had ? base : NULL, "base_mode", had ? git_mode(bm) : NULL),
                   path);
}

static int change_deleted(Build *b, const char *path, unsigned line, TfwError *e) {
        char base[GIT_OID_HEX_SIZE];
        mode_t bm = 0;
        int r = base_of(b, path, &bm, base);
        if (r < 0)
                return tfw_error(e, -r, "changes_failed", "changes: cannot read '%s': %s", path, strerror(-r));
        if (r == 0)
                return bad(e, line, "it deletes what the job was not given");
        b->sum.deleted++;
        return add(b, json_pack("{s:s, s:s, s:s?, s:s}", "path", path, "kind", "deleted", "base", base[0] ? base : NULL,
                                "base_mode", git_mode(bm)),
                   path);
}

/* One line: its fields split at tabs (at most 4). */
static int line_of(Build *b, char *s, unsigned line, TfwError *e) {
        char *f[5] = {};
        size_t n = 0;
        for (char *p = s; n < ELEMENTSOF(f);) {
                f[n++] = p;
                char *t = strchr(p, '\t');
                if (!t)
                        break;
                *t = 0;
                p = t + 1;
        }
        if (b->ended)
                return bad(e, line, "a line after the end");
        if (streq(f[0], "end")) {
                b->ended = true;
                if (n == 2 && streq(f[1], "complete")) {
                        b->sum.complete = true;
                        return 0;
                }
                if (n == 3 && streq(f[1], "incomplete")) {
                        printable_name(f[2], b->incomplete, sizeof(b->incomplete));
                        return 0;
                }
                return bad(e, line, "a malformed end");
        }
        size_t want = streq(f[0], "file") ? 4 : streq(f[0], "refused") ? 3 : 2;
        if (n != want || (!streq(f[0], "file") && !streq(f[0], "dir") && !streq(f[0], "deleted") && !streq(f[0], "refused")))
                return bad(e, line, "an unknown kind of change, or the wrong number of fields");
        char path[GIT_PATH_MAX + 1], esc[GIT_PATH_MAX + 16];
        const char *raw = f[want == 4 ? 3 : 1];
        int len = path_unescape(raw, strlen(raw), path, sizeof(path));
        if (len < 0)
                return bad(e, line, "a path that is not escaped as it must be");
        if (streq(f[0], "refused") || !layer_name_is_portable(path)) {
                char why[WHY_MAX];
                printable_name(streq(f[0], "refused") ? f[2] : "a name that is not UTF-8 or holds a control character", why,
                               sizeof(why));
                b->sum.refused++;
                printable_name(path, esc, sizeof(esc));
                return json_array_append_new(b->changes, json_pack("{s:s, s:s, s:s}", "path", esc, "kind", "refused", "why", why)) < 0
                               ? -ENOMEM
                               : 0;
        }
        if (!changes_path_is_valid(path)) /* apply's reader holds paths to the same rule */
                return bad(e, line, "a path that leaves the workspace, or names the control directory");
        for (const char *const *k = b->skip; k && *k; k++) {
                size_t kl = strlen(*k);
                if (strncmp(path, *k, kl) == 0 && (path[kl] == 0 || path[kl] == '/'))
                        return bad(e, line, "a path in artifacts/ or a cache path, which a changeset never holds");
        }
        /* A path comes once, or twice when the job replaced it by another type: deleted first
         * (layer_diff says so), then a file or a directory. */
        json_t *before = json_object_get(b->seen, path);
        if (before && !(streq(json_string_value(before), "deleted") && (streq(f[0], "file") || streq(f[0], "dir"))))
                return bad(e, line, "a path named twice");
        if (streq(f[0], "file"))
                return change_file(b, f[1], f[2], path, line, e);
        if (streq(f[0], "deleted"))
                return change_deleted(b, path, line, e);
        b->sum.directories++;
        return add(b, json_pack("{s:s, s:s}", "path", path, "kind", "directory"), path);
}

/* The staged regular files, but the list: each must be one the list named. */
static int count_staged(int dir_fd, unsigned depth, uint64_t *n) {
        if (depth > GIT_PATH_DEPTH_MAX)
                return -ELOOP;
        _cleanup_closedir_ DIR *d = opendir_fd(dir_fd);
        if (!d)
                return -errno;
        struct dirent *de;
        while ((errno = 0, de = readdir(d))) {
                struct stat st;
                if (streq(de->d_name, ".") || streq(de->d_name, "..") || (depth == 0 && streq(de->d_name, CONTROL_DIR)))
                        continue;
                if (fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                if (S_ISREG(st.st_mode))
                        (*n)++;
                else if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int c = openat(dir_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        int r = c < 0 ? -errno : count_staged(c, depth + 1, n);
                        if (r < 0)
                                return r;
                } else
                        return -EBADMSG; /* the importer writes nothing else */
        }
        return errno ? -errno : 0;
}

static int read_list(int staging_fd, char **ret, TfwError *e) {
        _cleanup_close_ int fd = open_below(staging_fd, CAPSULE_CHANGES_LIST, O_RDONLY | O_NONBLOCK);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return tfw_error(e, EBADMSG, "changes_rejected", "the capsule sent no list of its changes");
        if ((uint64_t) st.st_size > CAPSULE_CHANGES_LIST_MAX)
                return tfw_error(e, EBADMSG, "changes_rejected", "the capsule's list of changes is larger than %u bytes",
                                 (unsigned) CAPSULE_CHANGES_LIST_MAX);
        size_t len;
        int r = read_full_fd_bounded(fd, (uint64_t) st.st_size, ret, &len);
        if (r < 0)
                return tfw_error(e, -r, "changes_failed", "changes: cannot read the list: %s", strerror(-r));
        if (memchr(*ret, 0, len))
                return tfw_error(e, EBADMSG, "changes_rejected", "the capsule's list of changes holds a NUL byte");
        return 0;
}

int changeset_build(int staging_fd, int generation_fd, const char *const *skip, uint64_t max_entries, json_t **ret_manifest,
                    ChangesetSummary *ret, TfwError *e) {
        _cleanup_free_ Build *b = calloc(1, sizeof(Build));
        _cleanup_free_ char *list = NULL;
        int r;

        if (!b)
                return tfw_error(e, ENOMEM, "changes_failed", "out of memory");
        *b = (Build) { .staging_fd = staging_fd, .generation_fd = generation_fd, .skip = skip, .changes = json_array(),
                       .seen = json_object() };
        if (!b->changes || !b->seen || sha256_new(&b->h) < 0)
                r = tfw_error(e, ENOMEM, "changes_failed", "out of memory");
        else
                r = read_list(staging_fd, &list, e);
        unsigned line = 0;
        for (char *s = list, *nl; r >= 0 && s && *s; s = nl + 1) {
                nl = strchr(s, '\n');
                if (!nl) {
                        r = bad(e, line + 1, "the list does not end with a newline");
                        break;
                }
                *nl = 0;
                if (line > max_entries) /* the changes, then the end line */
                        r = bad(e, line + 1, "more changes than its bound");
                else
                        r = line_of(b, s, ++line, e);
                if (r == -ENOMEM)
                        r = tfw_error(e, ENOMEM, "changes_failed", "out of memory");
        }
        if (r >= 0 && !b->ended)
                r = bad(e, line, "the list has no end");
        uint64_t staged = 0;
        if (r >= 0 && (r = count_staged(staging_fd, 0, &staged)) < 0)
                r = r == -EBADMSG ? bad(e, line, "the staged files hold something else")
                                  : tfw_error(e, -r, "changes_failed", "changes: cannot list the staged files: %s", strerror(-r));
        if (r >= 0 && staged != b->files)
                r = tfw_error(e, EBADMSG, "changes_rejected", "the capsule sent %llu files, its list names %llu",
                              (unsigned long long) staged, (unsigned long long) b->files);
        /* What stays in staging is the new content of each file, at its path. */
        _cleanup_close_ int ctl = openat(staging_fd, CONTROL_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (ctl >= 0) {
                (void) unlinkat(ctl, strrchr(CAPSULE_CHANGES_LIST, '/') + 1, 0);
                if (unlinkat(staging_fd, CONTROL_DIR, AT_REMOVEDIR) < 0 && r >= 0)
                        r = tfw_error(e, EBADMSG, "changes_rejected", "the capsule sent more than its list in " CONTROL_DIR "/");
        }
        sha256_free(b->h);
        if (r < 0) {
                json_decref(b->changes);
                json_decref(b->seen);
                return r;
        }
        json_decref(b->seen);
        *ret_manifest = json_pack("{s:i, s:b, s:s?, s:o}", "version", 1, "complete", b->sum.complete, "incomplete",
                                  b->incomplete[0] ? b->incomplete : NULL, "changes", b->changes);
        if (!*ret_manifest)
                return tfw_error(e, ENOMEM, "changes_failed", "out of memory");
        *ret = b->sum;
        return 0;
}
