/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "validation/checkout-index.h"
#include "validation/checkout.h"

typedef struct DirCache {
        char path[GIT_PATH_MAX + 1]; /* the directory part of the previous entry */
        int fd;
} DirCache;

/* Open (creating as needed) the directory part of path below root; returns a borrowed fd
 * owned by the cache. */
static int parent_dir_at(int root, const char *path, gid_t group, bool create, DirCache *c, CheckoutSummary *sum,
                         TfwError *e) {
        const char *last = strrchr(path, '/');
        size_t dl = last ? (size_t) (last - path) : 0;

        if (dl == 0)
                return root;
        if (c->fd >= 0 && strlen(c->path) == dl && memcmp(c->path, path, dl) == 0)
                return c->fd;
        c->fd = safe_close(c->fd);
        c->path[0] = 0;

        _cleanup_close_ int cur = fcntl(root, F_DUPFD_CLOEXEC, 3);
        if (cur < 0)
                return tfw_error(e, errno, "checkout_io", "cannot duplicate a directory fd: %m");
        for (const char *p = path; p < path + dl;) {
                const char *slash = memchr(p, '/', (size_t) (path + dl - p));
                size_t l = slash ? (size_t) (slash - p) : (size_t) (path + dl - p);
                char name[GIT_NAME_MAX + 1];
                memcpy(name, p, l);
                name[l] = 0;
                int fd = openat(cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 && errno == ENOENT && create) {
                        if (mkdirat(cur, name, 0750) < 0)
                                return tfw_error(e, errno, "checkout_io", "cannot create directory '%.*s': %m",
                                                 (int) (p + l - path), path);
                        fd = openat(cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (fd >= 0 && (fchown(fd, 0, group) < 0 || fchmod(fd, 0750) < 0)) {
                                safe_close(fd);
                                return tfw_error(e, errno, "checkout_io", "cannot set up directory '%.*s': %m",
                                                 (int) (p + l - path), path);
                        }
                        sum->dirs++;
                }
                if (fd < 0)
                        return tfw_error(e, errno, "checkout_io", "cannot open directory '%.*s': %m",
                                         (int) (p + l - path), path);
                safe_close(cur);
                cur = fd;
                p += l + 1;
        }
        memcpy(c->path, path, dl);
        c->path[dl] = 0;
        c->fd = TAKE_FD(cur);
        return c->fd;
}

static int parent_dir(int root, const char *path, gid_t group, DirCache *c, CheckoutSummary *sum, TfwError *e) {
        return parent_dir_at(root, path, group, true, c, sum, e);
}

static int blob_status_error(long status, const char *path, TfwError *e) {
        if (status == 401 || status == 403)
                return tfw_error(e, EACCES, "unauthorized", "the server refused the credential (HTTP %ld) for '%s'",
                                 status, path);
        return tfw_error(e, EIO, "server", "the server answered HTTP %ld for blob of '%s'", status, path);
}

/* A symlink's target downloaded into memory (*target, checked once every target is known),
 * bounded in total (*held) and hash-checked. */
static int fetch_symlink(Http *http, const char *url, const VManifestEntry *en, const char *hex, uint64_t *budget,
                         uint64_t *held, char **target, CheckoutSummary *sum, TfwError *e) {
        uint8_t oid[GIT_OID_SIZE];
        uint64_t size = 0;
        long status = 0;
        char *mem = NULL;
        size_t ml = 0;

        int r = http_get_blob(http, url, -1, &mem, &ml, budget, oid, &size, &status, e);
        if (r < 0)
                return r;
        if (status != 200) {
                free(mem);
                return blob_status_error(status, en->path, e);
        }
        *target = mem;
        *held += ml;
        if (*held > VMANIFEST_SYMLINK_BYTES_MAX)
                return tfw_error(e, E2BIG, "too_large",
                                 "symlink '%s': the tree's symlink targets pass %u MiB, the most held "
                                 "while they are checked", en->path, VMANIFEST_SYMLINK_BYTES_MAX >> 20);
        if (memcmp(oid, en->blob, GIT_OID_SIZE) != 0)
                return tfw_error(e, EBADMSG, "blob_mismatch",
                                 "the blob served for symlink '%s' does not hash to %s", en->path, hex);
        if (ml == 0 || ml >= PATH_MAX || memchr(mem, 0, ml))
                return tfw_error(e, EBADMSG, "bad_symlink",
                                 "symlink '%s' has an empty, overlong or NUL-containing target", en->path);
        sum->bytes += size;
        sum->download_bytes += size;
        sum->downloaded++;
        return 0;
}

/* A file created below pfd (root's, the group's, its mode) and its blob downloaded into it,
 * hash-checked on the way. */
static int fetch_file(Http *http, const char *url, const VManifestEntry *en, const char *hex, int pfd, gid_t group,
                      uint64_t *budget, CheckoutSummary *sum, TfwError *e) {
        uint8_t oid[GIT_OID_SIZE];
        uint64_t size = 0;
        long status = 0;

        const char *name = strrchr(en->path, '/');
        name = name ? name + 1 : en->path;
        mode_t mode = en->mode == GIT_MODE_EXECUTABLE ? 0750 : 0640;
        _cleanup_close_ int fd = openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0)
                return tfw_error(e, errno, "checkout_io", "cannot create '%s': %m", en->path);
        if (fchown(fd, 0, group) < 0 || fchmod(fd, mode) < 0)
                return tfw_error(e, errno, "checkout_io", "cannot set the owner of '%s': %m", en->path);
        int r = http_get_blob(http, url, fd, NULL, NULL, budget, oid, &size, &status, e);
        if (r < 0)
                return r;
        if (status != 200)
                return blob_status_error(status, en->path, e);
        if (memcmp(oid, en->blob, GIT_OID_SIZE) != 0)
                return tfw_error(e, EBADMSG, "blob_mismatch", "the blob served for '%s' does not hash to %s",
                                 en->path, hex);
        sum->bytes += size;
        sum->download_bytes += size;
        sum->files++;
        sum->downloaded++;
        return 0;
}

/* Download, verify and write every entry of m that keep does not mark (NULL: every one) below
 * dir_fd; a kept symlink's target is already in targets[i]. Then the symlinks, once every
 * target is known to stay inside. */
static int materialise(Http *http, const char *repo, const VManifest *m, int dir_fd, gid_t group, uint64_t max_bytes,
                       const bool *keep, char **targets, CheckoutSummary *ret, TfwError *e) {
        CheckoutSummary sum = *ret;
        DirCache cache = {.fd = -EBADF};
        uint64_t budget = max_bytes, held = 0;
        char url[GIT_PATH_MAX + 512];
        int r = 0;

        for (size_t i = 0; i < m->n_entries; i++)
                if (targets[i])
                        held += strlen(targets[i]);

        for (size_t i = 0; i < m->n_entries; i++) {
                const VManifestEntry *en = &m->entries[i];
                char hex[GIT_OID_HEX_SIZE];

                if (keep && keep[i])
                        continue;
                sha256_to_hex(en->blob, hex);
                snprintf(url, sizeof(url), "/v1/repos/%s/blobs/%s", repo, hex);

                if (en->mode == GIT_MODE_SYMLINK) {
                        r = fetch_symlink(http, url, en, hex, &budget, &held, &targets[i], &sum, e);
                        if (r < 0)
                                goto out;
                        continue;
                }

                int pfd = parent_dir(dir_fd, en->path, group, &cache, &sum, e);
                if (pfd < 0) {
                        r = pfd;
                        goto out;
                }
                r = fetch_file(http, url, en, hex, pfd, group, &budget, &sum, e);
                if (r < 0)
                        goto out;
        }

        r = vmanifest_check_symlinks(m, targets, e);
        if (r < 0)
                goto out;
        for (size_t i = 0; i < m->n_entries; i++) {
                const VManifestEntry *en = &m->entries[i];
                if (en->mode != GIT_MODE_SYMLINK || (keep && keep[i]))
                        continue;
                int pfd = parent_dir(dir_fd, en->path, group, &cache, &sum, e);
                if (pfd < 0) {
                        r = pfd;
                        goto out;
                }
                const char *name = strrchr(en->path, '/');
                name = name ? name + 1 : en->path;
                if (symlinkat(targets[i], pfd, name) < 0) {
                        r = tfw_error(e, errno, "checkout_io", "cannot create symlink '%s': %m", en->path);
                        goto out;
                }
                if (fchownat(pfd, name, 0, group, AT_SYMLINK_NOFOLLOW) < 0) {
                        r = tfw_error(e, errno, "checkout_io", "cannot set the owner of '%s': %m", en->path);
                        goto out;
                }
                sum.symlinks++;
        }
        *ret = sum;
        r = 0;
out:
        safe_close(cache.fd);
        return r;
}

static void targets_free(char **targets, size_t n) {
        for (size_t i = 0; targets && i < n; i++)
                free(targets[i]);
        free(targets);
}

int checkout_materialise(Http *http, const char *repo, const VManifest *m, int dir_fd, gid_t group,
                         uint64_t max_bytes, CheckoutSummary *ret, TfwError *e) {
        char **targets = calloc(m->n_entries + 1, sizeof(char *));
        if (!targets)
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        *ret = (CheckoutSummary) {};
        int r = materialise(http, repo, m, dir_fd, group, max_bytes, NULL, targets, ret, e);
        targets_free(targets, m->n_entries);
        return r;
}

/* ---- a checkout kept between jobs (issue 18 item 3; docs/validation.md) -------------------- */

#define INDEX_NAME "checkout.index"
#define CHECKOUT_NAME "checkout"

/* The file an entry names, not followed. */
static int stat_path(int co_fd, const char *path, DirCache *c, struct stat *st) {
        CheckoutSummary ignored = {};
        TfwError e = {0};
        int pfd = parent_dir_at(co_fd, path, 0, false, c, &ignored, &e);
        const char *name = strrchr(path, '/');
        if (pfd < 0)
                return pfd;
        return fstatat(pfd, name ? name + 1 : path, st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

typedef struct StatCtx {
        int co_fd;
        const VManifest *m;
        DirCache cache;
} StatCtx;

static int stat_entry(size_t i, struct stat *st, void *userdata) {
        StatCtx *c = userdata;
        return stat_path(c->co_fd, c->m->entries[i].path, &c->cache, st);
}

static int save_index(int lane_fd, int co_fd, const char *repo, const VManifest *m, TfwError *e) {
        StatCtx c = {.co_fd = co_fd, .m = m, .cache = {.fd = -EBADF}};
        int r = checkout_index_save(lane_fd, INDEX_NAME, repo, m, stat_entry, &c);
        safe_close(c.cache.fd);
        return r < 0 ? tfw_error(e, -r, "checkout_io", "cannot write the checkout's index: %s", strerror(-r)) : 0;
}

/* Whatever is at path (a file, a symlink or a whole directory); a path whose parent is gone is
 * gone too. */
static int remove_path(int co_fd, const char *path, DirCache *c) {
        CheckoutSummary ignored = {};
        TfwError e = {0};
        int pfd = parent_dir_at(co_fd, path, 0, false, c, &ignored, &e);
        const char *name = strrchr(path, '/');
        if (pfd < 0)
                return e.error == ENOENT || e.error == ENOTDIR ? 0 : -e.error;
        return rm_rf_at(pfd, name ? name + 1 : path);
}

static int entry_ptr_cmp(const void *a, const void *b) {
        return strcmp((*(const VManifestEntry *const *) a)->path, (*(const VManifestEntry *const *) b)->path);
}

/* path against dir[0..dl) + "/": below 0 when path sorts before it, 0 when it starts with it. */
static int cmp_dir_prefix(const char *path, const char *dir, size_t dl) {
        for (size_t i = 0; i <= dl; i++) {
                unsigned char k = i < dl ? (unsigned char) dir[i] : '/', p = (unsigned char) path[i];
                if (p != k)
                        return p < k ? -1 : 1; /* a shorter path ends in NUL: before */
        }
        return 0;
}

/* Does a path of m (sorted) lie below the directory dir[0..dl)? The paths that start with
 * "dir/" are next to each other in sorted order: the first path not before it tells. */
static bool needs_dir(VManifestEntry *const *sorted, size_t n, const char *dir, size_t dl) {
        size_t lo = 0, hi = n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (cmp_dir_prefix(sorted[mid]->path, dir, dl) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo < n && cmp_dir_prefix(sorted[lo]->path, dir, dl) == 0;
}

/* The directories the last checkout had and m does not need go. Each directory is looked at
 * once: the records are sorted, so a record's directories that the one before it shared were
 * looked at then, and everything below a directory that goes is skipped. Nothing is
 * allocated for the directories. */
static int remove_stale_dirs(int co_fd, const VManifest *m, const CheckoutIndex *old, DirCache *cache) {
        _cleanup_free_ VManifestEntry **sorted = calloc(m->n_entries + 1, sizeof(*sorted));
        const char *prev = "", *gone = NULL;
        size_t gone_len = 0;

        if (!sorted)
                return -ENOMEM;
        for (size_t i = 0; i < m->n_entries; i++)
                sorted[i] = &m->entries[i];
        qsort(sorted, m->n_entries, sizeof(*sorted), entry_ptr_cmp);
        for (size_t i = 0; i < old->n; i++) {
                const char *p = old->records[i].path;
                size_t common = 0;
                if (gone && cmp_dir_prefix(p, gone, gone_len) == 0)
                        continue;
                while (prev[common] && prev[common] == p[common])
                        common++;
                prev = p;
                for (const char *slash = strchr(p + common, '/'); slash; slash = strchr(slash + 1, '/')) {
                        size_t dl = (size_t) (slash - p);
                        if (needs_dir(sorted, m->n_entries, p, dl))
                                continue;
                        char dir[GIT_PATH_MAX + 1];
                        memcpy(dir, p, dl);
                        dir[dl] = 0;
                        int r = remove_path(co_fd, dir, cache);
                        if (r < 0)
                                return r;
                        gone = p;
                        gone_len = dl;
                        break;
                }
        }
        return 0;
}

/* What the last checkout has and m does not, or has otherwise, goes; keep[i] says which entries
 * of m stay as they are (a kept symlink's target read back into targets[i], its blob id checked). */
static int remove_stale(int co_fd, const VManifest *m, CheckoutIndex *old, bool *keep, char **targets, CheckoutSummary *sum) {
        DirCache cache = {.fd = -EBADF};
        int r = 0;

        for (size_t i = 0; i < m->n_entries; i++) {
                const VManifestEntry *en = &m->entries[i];
                CheckoutRecord *rec = checkout_index_find(old, en->path);
                struct stat st;
                if (!rec || stat_path(co_fd, en->path, &cache, &st) < 0 || !checkout_record_matches(rec, en, &st))
                        continue;
                if (en->mode == GIT_MODE_SYMLINK) {
                        CheckoutSummary ignored = {};
                        TfwError e = {0};
                        char t[PATH_MAX];
                        uint8_t oid[GIT_OID_SIZE];
                        const char *name = strrchr(en->path, '/');
                        int pfd = parent_dir_at(co_fd, en->path, 0, false, &cache, &ignored, &e);
                        ssize_t n = pfd >= 0 ? readlinkat(pfd, name ? name + 1 : en->path, t, sizeof(t)) : -1;
                        if (n <= 0 || (size_t) n >= sizeof(t) || git_blob_id(t, (size_t) n, oid) < 0 ||
                            memcmp(oid, en->blob, GIT_OID_SIZE) != 0 || !(targets[i] = strndup(t, (size_t) n)))
                                continue;
                }
                keep[i] = true;
                rec->wanted = true;
                sum->kept++;
                sum->bytes += rec->size;
                if (en->mode == GIT_MODE_SYMLINK)
                        sum->symlinks++;
                else
                        sum->files++;
        }
        /* Files and symlinks that are not kept, then directories m does not need (the cached
         * directory may be one of them: opened afresh). */
        for (size_t i = 0; r >= 0 && i < old->n; i++)
                if (!old->records[i].wanted)
                        r = remove_path(co_fd, old->records[i].path, &cache);
        cache.fd = safe_close(cache.fd);
        cache.path[0] = 0;
        if (r >= 0)
                r = remove_stale_dirs(co_fd, m, old, &cache);
        safe_close(cache.fd);
        return r;
}

int checkout_update(Http *http, const char *repo, const VManifest *m, int lane_fd, gid_t group, uint64_t max_bytes,
                    CheckoutSummary *ret, TfwError *e) {
        _cleanup_(checkout_index_freep) CheckoutIndex *old = NULL;
        _cleanup_free_ bool *keep = calloc(m->n_entries + 1, sizeof(bool));
        char **targets = calloc(m->n_entries + 1, sizeof(char *));
        _cleanup_close_ int co = -EBADF;
        int r;

        *ret = (CheckoutSummary) {};
        if (!keep || !targets || checkout_index_load(lane_fd, INDEX_NAME, repo, m->n_entries + 65536, &old) < 0) {
                free(targets);
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        }
        /* From here until the index is written again the checkout is not a complete one. */
        if (unlinkat(lane_fd, INDEX_NAME, 0) < 0 && errno != ENOENT) {
                r = tfw_error(e, errno, "checkout_io", "cannot remove the checkout's index: %m");
                goto out;
        }
        if (mkdirat(lane_fd, CHECKOUT_NAME, 0750) < 0 && errno != EEXIST) {
                r = tfw_error(e, errno, "checkout_io", "cannot make the checkout: %m");
                goto out;
        }
        co = open_dir_at(lane_fd, CHECKOUT_NAME);
        r = co < 0 ? co : ensure_owner_mode(co, 0, group, 0750);
        if (r < 0) {
                r = tfw_error(e, -r, "checkout_io", "cannot open the checkout: %s", strerror(-r));
                goto out;
        }
        r = old ? remove_stale(co, m, old, keep, targets, ret) : rm_rf_children(co);
        if (r < 0) {
                r = tfw_error(e, -r, "checkout_io", "cannot remove what the last checkout had: %s", strerror(-r));
                goto out;
        }
        r = materialise(http, repo, m, co, group, max_bytes, keep, targets, ret, e);
        if (r >= 0)
                r = save_index(lane_fd, co, repo, m, e);
out:
        if (r < 0 && co >= 0)
                (void) rm_rf_children(co);
        targets_free(targets, m->n_entries);
        return r;
}
