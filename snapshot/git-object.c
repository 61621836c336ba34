/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/macro.h"
#include "git-object.h"

size_t git_object_header(const char *type, uint64_t len, char buf[static GIT_OBJECT_HEADER_MAX]) {
        int n = snprintf(buf, GIT_OBJECT_HEADER_MAX, "%s %" PRIu64, type, len);
        /* The types are the program's own constants ("blob", "tree"): n always fits. */
        return (size_t) n + 1;
}

int git_blob_hash_start(Sha256 *h, uint64_t len) {
        char hdr[GIT_OBJECT_HEADER_MAX];
        size_t n = git_object_header("blob", len, hdr);
        return sha256_update(h, hdr, n);
}

int git_blob_id(const void *data, size_t len, uint8_t ret[static GIT_OID_SIZE]) {
        _cleanup_(sha256_freep) Sha256 *h = NULL;
        int r;

        r = sha256_new(&h);
        if (r < 0)
                return r;
        r = git_blob_hash_start(h, len);
        if (r < 0)
                return r;
        r = sha256_update(h, data, len);
        if (r < 0)
                return r;
        return sha256_final(h, ret);
}

bool git_entry_name_is_valid(const char *name, size_t len) {
        if (len == 0 || len > GIT_NAME_MAX)
                return false;
        if (memchr(name, '/', len) || memchr(name, 0, len))
                return false;
        if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
                return false;
        return true;
}

bool git_mode_is_valid(uint32_t mode) {
        return mode == GIT_MODE_FILE || mode == GIT_MODE_EXECUTABLE || mode == GIT_MODE_SYMLINK ||
               mode == GIT_MODE_TREE;
}

int git_tree_builder_add(GitTreeBuilder *b, const char *name, size_t name_len, uint32_t mode,
                         const uint8_t oid[static GIT_OID_SIZE]) {
        if (!git_entry_name_is_valid(name, name_len) || !git_mode_is_valid(mode))
                return -EINVAL;

        if (b->n_entries == b->n_allocated) {
                size_t want = MAX(b->n_allocated * 2, (size_t) 16);
                GitTreeEntry *e = reallocarray(b->entries, want, sizeof(*e));
                if (!e)
                        return -ENOMEM;
                b->entries = e;
                b->n_allocated = want;
        }
        if (b->names_allocated - b->names_size < name_len) {
                size_t want = MAX(b->names_allocated * 2, (size_t) 1024);
                while (want - b->names_size < name_len)
                        want *= 2;
                char *p = realloc(b->names, want);
                if (!p)
                        return -ENOMEM;
                b->names = p;
                b->names_allocated = want;
        }

        GitTreeEntry *e = &b->entries[b->n_entries++];
        e->name_offset = b->names_size;
        e->name_len = (uint16_t) name_len;
        e->mode = mode;
        memcpy(e->oid, oid, GIT_OID_SIZE);
        memcpy(b->names + b->names_size, name, name_len);
        b->names_size += name_len;
        return 0;
}

/* Plain byte order of the names alone: equal names end up adjacent whatever their types. */
static int cmp_plain(const void *x, const void *y, void *userdata) {
        const GitTreeEntry *a = x, *b = y;
        const char *names = userdata;
        int c = memcmp(names + a->name_offset, names + b->name_offset, MIN(a->name_len, b->name_len));
        if (c != 0)
                return c;
        return a->name_len < b->name_len ? -1 : a->name_len > b->name_len;
}

/* Git's order (base_name_compare): a tree's name compares as if followed by '/'. */
static int cmp_git(const void *x, const void *y, void *userdata) {
        const GitTreeEntry *a = x, *b = y;
        const char *names = userdata;
        size_t n = MIN(a->name_len, b->name_len);
        int c = memcmp(names + a->name_offset, names + b->name_offset, n);
        if (c != 0)
                return c;
        unsigned ca = a->name_len > n ? (unsigned char) names[a->name_offset + n]
                                      : (a->mode == GIT_MODE_TREE ? '/' : 0);
        unsigned cb = b->name_len > n ? (unsigned char) names[b->name_offset + n]
                                      : (b->mode == GIT_MODE_TREE ? '/' : 0);
        return ca < cb ? -1 : ca > cb;
}

static const char *mode_string(uint32_t mode) {
        switch (mode) {
        case GIT_MODE_FILE:
                return "100644";
        case GIT_MODE_EXECUTABLE:
                return "100755";
        case GIT_MODE_SYMLINK:
                return "120000";
        default:
                return "40000";
        }
}

static void builder_reset(GitTreeBuilder *b) {
        b->n_entries = 0;
        b->names_size = 0;
}

int git_tree_builder_finish(GitTreeBuilder *b, Sha256 *h, uint8_t ret[static GIT_OID_SIZE]) {
        _cleanup_(sha256_freep) Sha256 *own = NULL;
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, off = 0;
        int r;

        if (!h) {
                r = sha256_new(&own);
                if (r < 0)
                        goto out;
                h = own;
        }

        if (b->n_entries > 1) {
                qsort_r(b->entries, b->n_entries, sizeof(GitTreeEntry), cmp_plain, b->names);
                for (size_t i = 1; i < b->n_entries; i++)
                        if (cmp_plain(&b->entries[i - 1], &b->entries[i], b->names) == 0) {
                                r = -EBADMSG;
                                goto out;
                        }
                qsort_r(b->entries, b->n_entries, sizeof(GitTreeEntry), cmp_git, b->names);
        }

        /* Sizes are bounded by the entry count and GIT_NAME_MAX; no overflow on 64-bit. */
        for (size_t i = 0; i < b->n_entries; i++)
                size += strlen(mode_string(b->entries[i].mode)) + 1 + b->entries[i].name_len + 1 +
                        GIT_OID_SIZE;
        buf = malloc(MAX(size, (size_t) 1));
        if (!buf) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t i = 0; i < b->n_entries; i++) {
                const GitTreeEntry *e = &b->entries[i];
                const char *m = mode_string(e->mode);
                size_t ml = strlen(m);
                memcpy(buf + off, m, ml);
                off += ml;
                buf[off++] = ' ';
                memcpy(buf + off, b->names + e->name_offset, e->name_len);
                off += e->name_len;
                buf[off++] = 0;
                memcpy(buf + off, e->oid, GIT_OID_SIZE);
                off += GIT_OID_SIZE;
        }

        char hdr[GIT_OBJECT_HEADER_MAX];
        size_t hl = git_object_header("tree", size, hdr);
        r = sha256_update(h, hdr, hl);
        if (r >= 0)
                r = sha256_update(h, buf, size);
        if (r >= 0)
                r = sha256_final(h, ret);
out:
        builder_reset(b);
        return r;
}

void git_tree_builder_done(GitTreeBuilder *b) {
        free(b->entries);
        free(b->names);
        *b = GIT_TREE_BUILDER_INIT;
}

static int cmp_path_ptr(const void *x, const void *y) {
        const GitPathEntry *const *a = x, *const *b = y;
        return strcmp((*a)->path, (*b)->path);
}

static bool manifest_path_is_valid(const char *p) {
        size_t len = strnlen(p, GIT_PATH_MAX + 1), depth = 0;

        if (len == 0 || len > GIT_PATH_MAX)
                return false;
        for (const char *s = p;;) {
                const char *slash = strchr(s, '/');
                size_t n = slash ? (size_t) (slash - s) : strlen(s);
                if (!git_entry_name_is_valid(s, n))
                        return false;
                if (++depth > GIT_PATH_DEPTH_MAX)
                        return false;
                if (!slash)
                        return true;
                s = slash + 1;
        }
}

/* Build the tree of v[0..n), all of whose paths share a prefix of prefix_len bytes (the
 * parent directories and their slashes). The recursion depth is bounded by the validated
 * path depth. */
static int build_subtree(const GitPathEntry *const *v, size_t n, size_t prefix_len, Sha256 *h,
                         uint8_t ret[static GIT_OID_SIZE]) {
        _cleanup_(git_tree_builder_done) GitTreeBuilder b = GIT_TREE_BUILDER_INIT;
        int r;

        for (size_t i = 0; i < n;) {
                const char *rest = v[i]->path + prefix_len;
                const char *slash = strchr(rest, '/');

                if (!slash) {
                        r = git_tree_builder_add(&b, rest, strlen(rest), v[i]->mode, v[i]->oid);
                        if (r < 0)
                                return r == -EINVAL ? -EBADMSG : r;
                        i++;
                        continue;
                }

                /* Everything below "rest/" is contiguous in byte order. */
                size_t cl = (size_t) (slash - rest), j = i + 1;
                while (j < n && strncmp(v[j]->path + prefix_len, rest, cl + 1) == 0)
                        j++;
                uint8_t sub[GIT_OID_SIZE];
                r = build_subtree(v + i, j - i, prefix_len + cl + 1, h, sub);
                if (r < 0)
                        return r;
                r = git_tree_builder_add(&b, rest, cl, GIT_MODE_TREE, sub);
                if (r < 0)
                        return r == -EINVAL ? -EBADMSG : r;
                i = j;
        }
        return git_tree_builder_finish(&b, h, ret);
}

int git_tree_id_from_paths(const GitPathEntry *entries, size_t n,
                           uint8_t ret[static GIT_OID_SIZE]) {
        _cleanup_(sha256_freep) Sha256 *h = NULL;
        _cleanup_free_ const GitPathEntry **v = NULL;
        int r;

        for (size_t i = 0; i < n; i++) {
                if (!entries[i].path || !manifest_path_is_valid(entries[i].path))
                        return -EBADMSG;
                if (entries[i].mode != GIT_MODE_FILE && entries[i].mode != GIT_MODE_EXECUTABLE &&
                    entries[i].mode != GIT_MODE_SYMLINK)
                        return -EBADMSG;
        }

        r = sha256_new(&h);
        if (r < 0)
                return r;
        v = calloc(MAX(n, (size_t) 1), sizeof(*v));
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                v[i] = &entries[i];
        qsort(v, n, sizeof(*v), cmp_path_ptr);
        /* Exact duplicates are adjacent; "a" next to "a/b" is caught by the builder as two
         * entries named "a". */
        for (size_t i = 1; i < n; i++)
                if (streq(v[i - 1]->path, v[i]->path))
                        return -EBADMSG;
        return build_subtree(v, n, 0, h, ret);
}

int git_blob_id_fd(Sha256 *h, int fd, uint64_t size, uint8_t *buf, size_t buf_size, uint8_t ret[static GIT_OID_SIZE]) {
        int r = git_blob_hash_start(h, size);
        for (uint64_t left = size; r >= 0 && left > 0;) {
                ssize_t k = read(fd, buf, (size_t) MIN((uint64_t) buf_size, left));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? -errno : -EIO;
                r = sha256_update(h, buf, (size_t) k);
                left -= (uint64_t) k;
        }
        return r < 0 ? r : sha256_final(h, ret);
}
