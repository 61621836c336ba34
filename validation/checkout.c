/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "validation/checkout.h"

typedef struct DirCache {
        char path[GIT_PATH_MAX + 1]; /* the directory part of the previous entry */
        int fd;
} DirCache;

/* Open (creating as needed) the directory part of path below root; returns a borrowed fd
 * owned by the cache. */
static int parent_dir(int root, const char *path, gid_t group, DirCache *c, CheckoutSummary *sum, TfwError *e) {
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
                if (fd < 0 && errno == ENOENT) {
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

static int blob_status_error(long status, const char *path, TfwError *e) {
        if (status == 401 || status == 403)
                return tfw_error(e, EACCES, "unauthorized", "the server refused the credential (HTTP %ld) for '%s'",
                                 status, path);
        return tfw_error(e, EIO, "server", "the server answered HTTP %ld for blob of '%s'", status, path);
}

int checkout_materialise(Http *http, const char *repo, const VManifest *m, int dir_fd, gid_t group,
                         uint64_t max_bytes, CheckoutSummary *ret, TfwError *e) {
        CheckoutSummary sum = {};
        DirCache cache = {.fd = -EBADF};
        char **targets = NULL;
        uint64_t budget = max_bytes;
        char url[GIT_PATH_MAX + 512];
        int r = 0;

        targets = calloc(m->n_entries + 1, sizeof(char *));
        if (!targets)
                return tfw_error(e, ENOMEM, "oom", "out of memory");

        for (size_t i = 0; i < m->n_entries; i++) {
                const VManifestEntry *en = &m->entries[i];
                char hex[GIT_OID_HEX_SIZE];
                uint8_t oid[GIT_OID_SIZE];
                uint64_t size = 0;
                long status = 0;

                sha256_to_hex(en->blob, hex);
                snprintf(url, sizeof(url), "/v1/repos/%s/blobs/%s", repo, hex);

                if (en->mode == GIT_MODE_SYMLINK) {
                        char *mem = NULL;
                        size_t ml = 0;
                        r = http_get_blob(http, url, -1, &mem, &ml, &budget, oid, &size, &status, e);
                        if (r < 0)
                                goto out;
                        if (status != 200) {
                                free(mem);
                                r = blob_status_error(status, en->path, e);
                                goto out;
                        }
                        targets[i] = mem;
                        if (memcmp(oid, en->blob, GIT_OID_SIZE) != 0) {
                                r = tfw_error(e, EBADMSG, "blob_mismatch",
                                              "the blob served for symlink '%s' does not hash to %s", en->path, hex);
                                goto out;
                        }
                        if (ml == 0 || ml >= PATH_MAX || memchr(mem, 0, ml)) {
                                r = tfw_error(e, EBADMSG, "bad_symlink",
                                              "symlink '%s' has an empty, overlong or NUL-containing target", en->path);
                                goto out;
                        }
                        sum.bytes += size;
                        continue;
                }

                int pfd = parent_dir(dir_fd, en->path, group, &cache, &sum, e);
                if (pfd < 0) {
                        r = pfd;
                        goto out;
                }
                const char *name = strrchr(en->path, '/');
                name = name ? name + 1 : en->path;
                mode_t mode = en->mode == GIT_MODE_EXECUTABLE ? 0750 : 0640;
                _cleanup_close_ int fd = openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
                if (fd < 0) {
                        r = tfw_error(e, errno, "checkout_io", "cannot create '%s': %m", en->path);
                        goto out;
                }
                if (fchown(fd, 0, group) < 0 || fchmod(fd, mode) < 0) {
                        r = tfw_error(e, errno, "checkout_io", "cannot set the owner of '%s': %m", en->path);
                        goto out;
                }
                r = http_get_blob(http, url, fd, NULL, NULL, &budget, oid, &size, &status, e);
                if (r < 0)
                        goto out;
                if (status != 200) {
                        r = blob_status_error(status, en->path, e);
                        goto out;
                }
                if (memcmp(oid, en->blob, GIT_OID_SIZE) != 0) {
                        r = tfw_error(e, EBADMSG, "blob_mismatch", "the blob served for '%s' does not hash to %s",
                                      en->path, hex);
                        goto out;
                }
                sum.bytes += size;
                sum.files++;
        }

        r = vmanifest_check_symlinks(m, targets, e);
        if (r < 0)
                goto out;
        for (size_t i = 0; i < m->n_entries; i++) {
                const VManifestEntry *en = &m->entries[i];
                if (en->mode != GIT_MODE_SYMLINK)
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
        for (size_t i = 0; i < m->n_entries; i++)
                free(targets[i]);
        free(targets);
        return r;
}
