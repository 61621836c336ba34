/* SPDX-License-Identifier: MIT */
/* snapshot_update() and the generation index (issue 18; threat 17). test-snapshot runs every
 * walk test through snapshot_update() too; this file proves what is particular to generations:
 * which files are read again, that the changed-in-place generation always equals a fresh
 * snapshot of the same workspace (tree id and bytes), and the index file.
 *
 * <tmp>/ws is the workspace, <tmp>/gen the generation, <tmp>/fresh/<n> fresh snapshots. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "snapshot/gen-index.h"
#include "snapshot/snapshot.h"
#include "tests/unit/lib/gen-fixture.h"

typedef GenFixture Fixture;

#define KEPT(f, n) (gfx_vouches(f) ? (n) : 0)

/* Update the generation from the workspace; the previous index is replaced. */
static void update(Fixture *f) {
        SnapshotLimits l = gfx_limits();
        gfx_walk(f, &l);
}

static void make_tree(Fixture *f) {
        gfx_sh(f, "mkdir -p a/b/c d e; printf one >a/one; printf two >a/b/two; printf 'three!' >a/b/c/three;"
              "printf x >d/x; printf '#!/bin/sh\\n' >run.sh; chmod 755 run.sh; seq 1 20000 >big; ln -s a link");
        gfx_settle();
}

/* Nothing changed: every file is kept, none read; the tree id is the fresh one's. */
static void test_unchanged_reads_nothing(void **state) {
        Fixture *f = *state;
        snapshot_test_racy_window_nsec = 0;
        make_tree(f);
        update(f);
        assert_int_equal(f->s.files_reused, 0);
        gfx_assert_equals_fresh(f);
        gfx_settle();
        update(f);
        assert_int_equal(f->s.files_reused, KEPT(f, f->s.files));
        assert_int_equal(f->s.bytes_reused, KEPT(f, f->s.bytes));
        gfx_assert_equals_fresh(f);
}

/* A change that restores mtime and size is still seen: ctime cannot be set back. */
static void test_restored_mtime_and_size_seen(void **state) {
        Fixture *f = *state;
        snapshot_test_racy_window_nsec = 0;
        make_tree(f);
        update(f);
        gfx_settle();
        gfx_sh(f, "touch -r a/b/two ../ref; printf TWO >a/b/two; touch -r ../ref a/b/two");
        update(f);
        assert_int_equal(f->s.files_reused, KEPT(f, f->s.files - 1));
        gfx_assert_equals_fresh(f);
        gfx_sh(f, "[ \"$(cat ../gen/a/b/two)\" = TWO ]");
}

/* Each kind of change, one update each, and the generation equals a fresh snapshot after
 * every one of them. */
static void test_every_change(void **state) {
        static const char *const changes[] = {
                "printf changed >a/one",                         /* content */
                "printf 'longer content' >>d/x",                 /* size */
                "rm a/b/c/three",                                 /* file gone */
                "rm -r a/b",                                      /* tree gone */
                "mkdir -p n/m; printf new >n/m/f",                /* new tree */
                "rm d/x; mkdir d/x; printf in >d/x/f",            /* file -> directory */
                "rm -r n; printf now-a-file >n",                  /* directory -> file */
                "rm a/one; ln -s run.sh a/one",                   /* file -> symlink */
                "chmod 644 run.sh",                               /* x bit */
                "chmod 700 e",                                    /* directory mode */
                "mv big big2",                                    /* rename */
                "mkdir e/empty",                                  /* an empty directory */
                "rm -r a d e n run.sh big2 link",                 /* everything */
                "printf back >back",                              /* and something again */
        };
        Fixture *f = *state;
        snapshot_test_racy_window_nsec = 0;
        make_tree(f);
        update(f);
        for (size_t i = 0; i < ELEMENTSOF(changes); i++) {
                gfx_settle();
                gfx_sh(f, "%s", changes[i]);
                update(f);
                gfx_assert_equals_fresh(f);
        }
}

/* With the real window, what was written just before the walk is read again by the next
 * one (its ctime is not older than the window), then kept once it is. */
static void test_racy_read_again(void **state) {
        Fixture *f = *state;
        gfx_sh(f, "printf old >old; printf new >new");
        update(f);
        assert_int_equal(f->s.files_reused, 0);
        update(f);
        assert_int_equal(f->s.files_reused, 0);
        /* Read again once more with the window closed (the last walk saw them racy), then kept. */
        snapshot_test_racy_window_nsec = 0;
        gfx_settle();
        update(f);
        assert_int_equal(f->s.files_reused, 0);
        gfx_settle();
        update(f);
        assert_int_equal(f->s.files_reused, KEPT(f, 2));
        gfx_assert_equals_fresh(f);
}

/* The generation's entries belong to the job's uid and group; its root too. */
static void test_owner(void **state) {
        Fixture *f = *state;
        if (geteuid() != 0)
                skip();
        make_tree(f);
        update(f);
        gfx_sh(f, "[ -z \"$(find ../gen \\( ! -uid %u -o ! -gid %u \\) -print)\" ]", (unsigned) GFX_COPY_UID,
           (unsigned) GFX_COPY_GID);
}

/* The index file: saved and loaded, it vouches as the one in memory did; a damaged one is
 * refused, not trusted. An index made for another group vouches for nothing. */
static void test_index_file(void **state) {
        Fixture *f = *state;
        TfwError e = {};
        snapshot_test_racy_window_nsec = 0;
        make_tree(f);
        update(f);
        assert_int_equal(gen_index_save(f->index, f->d->fd, "index", &e), 0);
        GenIndex *loaded = NULL;
        assert_int_equal(gen_index_load(f->d->fd, "index", 100000, &loaded, &e), 0);
        assert_int_equal(loaded->entries, f->index->entries);
        gen_index_free(f->index);
        f->index = loaded;
        gfx_settle();
        update(f);
        assert_int_equal(f->s.files_reused, KEPT(f, f->s.files));
        gfx_assert_equals_fresh(f);

        /* Damaged: cut short, one byte changed in a name, and too many entries for the bound. */
        assert_int_equal(gen_index_save(f->index, f->d->fd, "index", &e), 0);
        gfx_sh(f, "cp ../index ../cut; truncate -s -7 ../cut; cp ../index ../bad;"
              /* The first name's first byte: after the header (44 bytes), the root's own fields
               * (45) and the entry's type, flags and name length (4). */
              "printf '\\000' | dd of=../bad bs=1 seek=93 conv=notrunc status=none");
        GenIndex *x = NULL;
        assert_int_equal(gen_index_load(f->d->fd, "cut", 100000, &x, &e), -EBADMSG);
        assert_int_equal(gen_index_load(f->d->fd, "bad", 100000, &x, &e), -EBADMSG);
        assert_int_equal(gen_index_load(f->d->fd, "index", 3, &x, &e), -EBADMSG);
        assert_int_equal(gen_index_load(f->d->fd, "none", 100000, &x, &e), -ENOENT);
        assert_null(x);

        f->index->copy_gid++;
        update(f);
        assert_int_equal(f->s.files_reused, 0);
        gfx_assert_equals_fresh(f);
}

/* A file open for writing while it is read may hold a write its ctime predates (a writable
 * mapping, a write() stalled after it stamped the times): read again next time, kept once it
 * is closed. */
static void test_open_for_writing_read_again(void **state) {
        Fixture *f = *state;
        snapshot_test_racy_window_nsec = 0;
        make_tree(f);
        _cleanup_close_ int wfd = open(f->ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int writer = openat(wfd, "a/one", O_WRONLY | O_CLOEXEC);
        assert_true(writer >= 0);
        update(f);
        gfx_settle();
        update(f);
        assert_int_equal(f->s.files_reused, KEPT(f, f->s.files - 1));
        writer = safe_close(writer);
        update(f);
        gfx_settle();
        update(f);
        assert_int_equal(f->s.files_reused, KEPT(f, f->s.files));
        gfx_assert_equals_fresh(f);
}

/* On a tmpfs a write through a shared mapping changes no time: nothing there is ever kept. */
static void test_tmpfs_never_kept(void **state) {
        Fixture *f = *state;
        if (geteuid() != 0)
                skip();
        snapshot_test_racy_window_nsec = 0;
        _cleanup_free_ char *mnt = NULL;
        assert_true(asprintf(&mnt, "%s/t", f->ws) >= 0);
        assert_int_equal(mkdir(mnt, 0755), 0);
        assert_int_equal(mount("tfw-test", mnt, "tmpfs", 0, "size=1m"), 0);
        gfx_sh(f, "printf a >t/a; printf b >t/b");
        gfx_settle();
        update(f);
        gfx_settle();
        update(f);
        assert_int_equal(f->s.files, 2);
        assert_int_equal(f->s.files_reused, 0);
        /* Changed through a mapping, the times unchanged: the next walk reads it all the same. */
        gfx_sh(f, "python3 -c \"import mmap; f=open('t/a','r+b'); m=mmap.mmap(f.fileno(), 1); m[0:1]=b'Z'; m.close()\"");
        update(f);
        gfx_assert_equals_fresh(f);
        gfx_sh(f, "[ \"$(cat ../gen/t/a)\" = Z ]");
        assert_int_equal(umount2(mnt, MNT_DETACH), 0);
}

/* XFS_IOC_SWAPEXT as xfsprogs' xfs_fs.h declares it (its header is not needed to build): the
 * target's stat, which the kernel compares with the inode's (inode number, mtime, ctime) before
 * it swaps the two files' extents. */
struct xfs_bstime_tfw {
        int64_t tv_sec;
        int32_t tv_nsec;
};
struct xfs_bstat_tfw {
        uint64_t ino;
        uint16_t mode, nlink;
        uint32_t uid, gid, rdev;
        int32_t blksize;
        int64_t size;
        struct xfs_bstime_tfw atime, mtime, ctime;
        uint8_t rest[48];
};
struct xfs_swapext_tfw {
        int64_t version, fdtarget, fdtmp, offset, length;
        char pad[16];
        struct xfs_bstat_tfw stat;
};
_Static_assert(sizeof(struct xfs_swapext_tfw) == 192 && offsetof(struct xfs_swapext_tfw, stat) == 56 &&
                       offsetof(struct xfs_bstat_tfw, ctime) == 72,
               "struct xfs_swapext");
#define XFS_IOC_SWAPEXT_TFW _IOWR('X', 109, struct xfs_swapext_tfw)

/* Swap the bytes of dir/a and dir/b (the same size) as xfs_fsr does; their times stay. */
static void xfs_swap(int dir, const char *a, const char *b) {
        _cleanup_close_ int x = openat(dir, a, O_RDWR | O_CLOEXEC), y = openat(dir, b, O_RDWR | O_CLOEXEC);
        struct stat st, after;
        assert_true(x >= 0 && y >= 0);
        assert_int_equal(fsync(x), 0);
        assert_int_equal(fsync(y), 0);
        assert_int_equal(fstat(x, &st), 0);
        struct xfs_swapext_tfw sx = {
                .fdtarget = x,
                .fdtmp = y,
                .length = st.st_size,
                .stat = { .ino = st.st_ino,
                          .mtime = { st.st_mtim.tv_sec, (int32_t) st.st_mtim.tv_nsec },
                          .ctime = { st.st_ctim.tv_sec, (int32_t) st.st_ctim.tv_nsec } },
        };
        assert_int_equal(ioctl(x, XFS_IOC_SWAPEXT_TFW, &sx), 0);
        assert_int_equal(fstat(x, &after), 0);
        /* What makes it an attack: every part of the identity stays. */
        assert_true(after.st_ino == st.st_ino && after.st_size == st.st_size &&
                    after.st_mtim.tv_sec == st.st_mtim.tv_sec && after.st_mtim.tv_nsec == st.st_mtim.tv_nsec &&
                    after.st_ctim.tv_sec == st.st_ctim.tv_sec && after.st_ctim.tv_nsec == st.st_ctim.tv_nsec &&
                    after.st_mode == st.st_mode);
}

/* On XFS the owner of two files can swap their bytes (XFS_IOC_SWAPEXT, the defragmenter's ioctl:
 * no privilege, both files open for writing) and the kernel keeps every time: inode, size, mtime,
 * ctime and mode stay, the bytes change. So XFS's times vouch for nothing: nothing there is kept,
 * and the next walk has the swapped bytes. Needs root and mkfs.xfs (xfsprogs). */
static void test_xfs_never_kept(void **state) {
        Fixture *f = *state;
        if (geteuid() != 0 || system("command -v mkfs.xfs >/dev/null 2>&1") != 0)
                skip();
        snapshot_test_racy_window_nsec = 0;
        _cleanup_free_ char *img = NULL;
        assert_true(asprintf(&f->mnt, "%s/x", f->ws) >= 0 && asprintf(&img, "%s/xfs.img", f->d->path) >= 0);
        assert_int_equal(mkdir(f->mnt, 0755), 0);
        gfx_sh(f, "truncate -s 320M '%s' && mkfs.xfs -q '%s' && mount -o loop '%s' x", img, img, img);
        gfx_sh(f, "printf ORIGINAL-CONTENT >x/a; printf EVIL-NEW-BYTES!! >x/b");
        gfx_settle();
        update(f);
        gfx_settle();
        update(f);
        _cleanup_close_ int dir = open(f->mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dir >= 0);
        xfs_swap(dir, "a", "b");
        update(f);
        gfx_assert_equals_fresh(f);
        gfx_sh(f, "[ \"$(cat ../gen/x/a)\" = EVIL-NEW-BYTES!! ] && [ \"$(cat ../gen/x/b)\" = ORIGINAL-CONTENT ]");
        assert_int_equal(f->s.files_reused, KEPT(f, f->s.files - 2));
}

/* A ceiling met in an update fails it like any walk (the store then empties the generation). */
static void test_ceiling(void **state) {
        Fixture *f = *state;
        SnapshotLimits l = gfx_limits();
        GenIndex *next = NULL;
        TfwError e = {};
        snapshot_test_racy_window_nsec = 0;
        make_tree(f);
        update(f);
        gfx_settle();
        l.max_bytes = f->s.bytes - 1;
        assert_int_equal(snapshot_update(f->ws, f->gen_fd, f->index, GFX_COPY_UID, &l, &next, &f->s, &e), -E2BIG);
        assert_string_equal(e.code, "snapshot_too_large");
        assert_null(next);
}

#define T(t) cmocka_unit_test_setup_teardown(t, gfx_setup, gfx_teardown)
int main(void) {
        if (getenv("TFW_TEST_FILTER"))
                cmocka_set_test_filter(getenv("TFW_TEST_FILTER"));
        const struct CMUnitTest tests[] = {
                T(test_unchanged_reads_nothing),
                T(test_restored_mtime_and_size_seen),
                T(test_every_change),
                T(test_racy_read_again),
                T(test_owner),
                T(test_index_file),
                T(test_ceiling),
                T(test_open_for_writing_read_again),
                T(test_tmpfs_never_kept),
                T(test_xfs_never_kept),
        };
        return cmocka_run_group_tests_name("generations", tests, NULL, NULL);
}
