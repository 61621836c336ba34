/* SPDX-License-Identifier: MIT */
/* What a directory's watch cannot see: every file it vouches for, asked by stat. See
 * gen-verify.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fd-util.h"
#include "common/resolve.h"
#include "gen-verify.h"

/* Is the file at dfd/name still the one old describes, on the directory's device, and one the
 * walk may take (snapshot.c hardlink_allowed: another owner's file linked in is refused there)? */
static bool file_unchanged(const GenVerify *v, int dfd, dev_t dir_dev, const GenEntry *old, const char *name) {
        struct stat st;
        GenIdentity id;

        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return false;
        if (!S_ISREG(st.st_mode) || st.st_dev != dir_dev)
                return false;
        if (st.st_nlink > 1 && !(v->owner_uid != 0 && st.st_uid == v->owner_uid) && !(st.st_mode & S_IROTH))
                return false;
        gen_identity_of(&st, &id);
        return gen_identity_equal(&id, &old->id);
}

/* d's subtree_clean from its own mark and its children's. */
static void remark(GenDir *d) {
        bool all = d->clean;
        for (size_t i = 0; all && i < d->n; i++)
                if (d->v[i].is_dir && !d->v[i].dir->subtree_clean)
                        all = false;
        d->subtree_clean = all;
}

static void unmark_all(GenDir *d) {
        d->clean = d->subtree_clean = d->any_clean = false;
        for (size_t i = 0; i < d->n; i++)
                if (d->v[i].is_dir)
                        unmark_all(d->v[i].dir);
}

/* d, open at dfd (device dir_dev), and below. check_files: d is not the root, whose files the
 * walk reads itself. */
static int verify_dir(GenVerify *v, int dfd, dev_t dir_dev, GenDir *d, bool check_files) {
        char name[NAME_MAX + 1];

        v->dirs++;
        if (check_files && d->clean)
                for (size_t i = 0; i < d->n; i++) {
                        const GenEntry *e = &d->v[i];
                        if (e->is_dir)
                                continue;
                        memcpy(name, e->name, e->len);
                        name[e->len] = 0;
                        v->files++;
                        if (!file_unchanged(v, dfd, dir_dev, e, name)) {
                                d->clean = false;
                                v->changed++;
                                break; /* the walk lists d and asks each of its files itself */
                        }
                }
        for (size_t i = 0; i < d->n; i++) {
                GenEntry *e = &d->v[i];
                if (!e->is_dir || !e->dir->any_clean)
                        continue;
                memcpy(name, e->name, e->len);
                name[e->len] = 0;
                _cleanup_close_ int cfd = openat_child(dfd, name, O_PATH | O_DIRECTORY, v->use_openat2);
                struct stat st;
                if (cfd == -ENOMEM || cfd == -EMFILE || cfd == -ENFILE)
                        return cfd;
                if (cfd < 0 || fstat(cfd, &st) < 0 || (uint64_t) st.st_dev != e->id.dev ||
                    (uint64_t) st.st_ino != e->id.ino) {
                        /* Not the directory the index names: the walk reads its parent. */
                        unmark_all(e->dir);
                        if (d->clean)
                                v->changed++;
                        d->clean = false;
                        continue;
                }
                int r = verify_dir(v, cfd, st.st_dev, e->dir, true);
                if (r < 0)
                        return r;
        }
        remark(d);
        return 0;
}

int gen_verify_clean(int root_fd, GenDir *root, GenVerify *v) {
        struct stat st;

        v->files = v->dirs = v->changed = 0;
        if (fstat(root_fd, &st) < 0)
                return -errno;
        return verify_dir(v, root_fd, st.st_dev, root, false);
}
