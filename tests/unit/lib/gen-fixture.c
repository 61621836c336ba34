/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/magic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "tests/unit/lib/gen-fixture.h"

static int setup(void **state, bool watched) {
        if (tfw_tmpdir_setup(state) < 0)
                return -1;
        GenFixture *f = calloc(1, sizeof(*f));
        if (!f)
                return -1;
        f->d = *state;
        f->gen_fd = -EBADF;
        *state = f;
        if (mkdirat(f->d->fd, "ws", 0755) < 0 || mkdirat(f->d->fd, "gen", 0700) < 0 ||
            mkdirat(f->d->fd, "fresh", 0700) < 0 || asprintf(&f->ws, "%s/ws", f->d->path) < 0 ||
            (watched && dirty_set_new(1U << 20, &f->set) < 0))
                return -1;
        f->gen_fd = openat(f->d->fd, "gen", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (watched)
                snapshot_test_racy_window_nsec = 0;
        return f->gen_fd >= 0 ? 0 : -1;
}

int gfx_setup(void **state) {
        return setup(state, false);
}

int gfx_setup_watched(void **state) {
        return setup(state, true);
}

int gfx_teardown(void **state) {
        GenFixture *f = *state;
        if (f->mnt)
                (void) umount2(f->mnt, MNT_DETACH);
        free(f->mnt);
        gen_index_free(f->index);
        dirty_set_free(f->set);
        safe_close(f->gen_fd);
        free(f->ws);
        *state = f->d;
        free(f);
        snapshot_test_racy_window_nsec = GEN_RACY_WINDOW_NSEC;
        return tfw_tmpdir_teardown(state);
}

void gfx_sh(const GenFixture *f, const char *fmt, ...) {
        _cleanup_free_ char *body = NULL, *cmd = NULL;
        va_list ap;
        va_start(ap, fmt);
        assert_true(vasprintf(&body, fmt, ap) >= 0);
        va_end(ap);
        assert_true(asprintf(&cmd, "set -e; cd '%s'; %s", f->ws, body) >= 0);
        int st = system(cmd);
        if (st != 0)
                fail_msg("command failed (%d): %s", st, body);
}

bool gfx_vouches(const GenFixture *f) {
        struct statfs sf;
        assert_int_equal(statfs(f->ws, &sf), 0);
        return sf.f_type == EXT4_SUPER_MAGIC || sf.f_type == BTRFS_SUPER_MAGIC ||
               sf.f_type == F2FS_SUPER_MAGIC;
}

SnapshotLimits gfx_limits(void) {
        return (SnapshotLimits) { .max_bytes = 1ULL << 30, .max_entries = 100000, .group = GFX_COPY_GID };
}

void gfx_settle(void) {
        (void) nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000 * 1000 }, NULL);
}

void gfx_walk(GenFixture *f, const SnapshotLimits *l) {
        GenIndex *next = NULL;
        TfwError e = {};
        int r = snapshot_update(f->ws, f->gen_fd, f->index, GFX_COPY_UID, l, &next, &f->s, &e);
        if (r < 0)
                fail_msg("snapshot_update: %d %s: %s", r, e.code, e.message);
        gen_index_free(f->index);
        f->index = next;
}

SnapshotSummary gfx_fresh(GenFixture *f) {
        SnapshotLimits l = gfx_limits();
        SnapshotSummary s;
        TfwError e = {};
        char name[32];
        snprintf(name, sizeof(name), "%u", f->fresh++);
        _cleanup_close_ int out = openat(f->d->fd, "fresh", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int r = snapshot_take(f->ws, out, name, &l, &s, &e);
        if (r < 0)
                fail_msg("snapshot_take: %d %s: %s", r, e.code, e.message);
        return s;
}

void gfx_assert_equals_fresh(GenFixture *f) {
        SnapshotSummary s = gfx_fresh(f);
        assert_string_equal(f->s.tree, s.tree);
        assert_int_equal(f->s.bytes, s.bytes);
        assert_int_equal(f->s.entries, s.entries);
        assert_int_equal(f->s.files, s.files);
        assert_int_equal(f->s.dirs, s.dirs);
        assert_int_equal(f->s.skipped_symlinks, s.skipped_symlinks);
        gfx_sh(f, "diff -r ../gen ../fresh/%u >/dev/null", f->fresh - 1);
        gfx_sh(f, "a=$(cd ../gen && find . -mindepth 1 -printf '%%p %%m %%y\\n' | sort); "
                  "b=$(cd ../fresh/%u && find . -mindepth 1 -printf '%%p %%m %%y\\n' | sort); [ \"$a\" = \"$b\" ]",
               f->fresh - 1);
}
