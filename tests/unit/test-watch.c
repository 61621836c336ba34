/* SPDX-License-Identifier: MIT */
/* The workspace's watch (snapshot/dirty-set.h; issue 18's dirty set; threat 17): a walk with a
 * watch reads only the directories whose watch saw a change since the previous generation's
 * walk, and the generation it makes is always exactly a fresh snapshot of the workspace (tree
 * id, bytes, entries, files, modes): after every kind of change, after a write through a
 * mapping, a write through a hard link from outside, a directory renamed or swapped, an event
 * queue that overflowed, and with a watch of another instance or no watch at all.
 *
 * <tmp>/ws is the workspace, <tmp>/gen the generation, <tmp>/fresh/<n> fresh snapshots. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/inotify.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "snapshot/dirty-set.h"
#include "snapshot/gen-index.h"
#include "snapshot/gen-verify.h"
#include "snapshot/snapshot.h"
#include "tests/unit/lib/gen-fixture.h"

typedef GenFixture Fixture;

/* When set, the next directory listing that holds this name holds it twice (getdents64 below):
 * what the kernel may answer for a directory changed while it is read. *dents_doubled (a
 * MAP_SHARED page: the walk may run in a child) counts the names repeated. */
static const char *dents_twice;
static unsigned *dents_doubled;

/* The walk's getdents64 (snapshot.c), this binary's: the system call, and the record named
 * dents_twice repeated once at the end of the listing. */
ssize_t getdents64(int fd, void *buf, size_t size) {
        ssize_t n = syscall(SYS_getdents64, fd, buf, size);
        for (ssize_t off = 0; dents_twice && n > 0 && off < n;) {
                struct dirent64 *d = (struct dirent64 *) ((char *) buf + off);
                if (strcmp(d->d_name, dents_twice) == 0 && (size_t) n + d->d_reclen <= size) {
                        memcpy((char *) buf + n, d, d->d_reclen);
                        n += d->d_reclen;
                        dents_twice = NULL;
                        if (dents_doubled)
                                (*dents_doubled)++;
                        break;
                }
                off += d->d_reclen;
        }
        return n;
}

/* main() moved the binary into a mount namespace of its own (root only): mounts may be made. */
static bool own_mount_ns;

/* The groups run with the file system's mark (snapshot/fan-mark.h) placed by the fixture. */
static bool marked;

static int setup(void **state) {
        if (gfx_setup_watched(state) < 0)
                return -1;
        Fixture *f = *state;
        char why[256];
        _cleanup_close_ int fd = open(f->ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (marked && dirty_set_mark(f->set, fd, why, sizeof(why)) < 0) {
                fprintf(stderr, "the file system's mark: %s\n", why);
                return -1;
        }
        return 0;
}

/* With the mark, the walk runs in a process of its own, as the daemon's walks do: its opens are
 * not stamped (fan_mark_own: registered after the fork and every event before it read,
 * unregistered once it is reaped), and this process plays the controller, whose opens are. */
static void walk_in_child(Fixture *f, DirtySet *set, const SnapshotLimits *l) {
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                GenIndex *next = NULL;
                TfwError e = {};
                SnapshotSummary s;
                int r = snapshot_update(f->ws, f->gen_fd, f->index, GFX_COPY_UID, l, &next, &s, &e);
                if (r < 0)
                        fprintf(stderr, "snapshot_update: %s: %s\n", e.code, e.message);
                if (r >= 0 && (r = gen_index_save(next, f->d->fd, "child-index", &e)) >= 0)
                        r = write_all(p[1], &s, sizeof(s));
                _exit(r < 0 ? 1 : 0);
        }
        safe_close(p[1]);
        assert_true(dirty_set_read(set) >= 0);
        dirty_set_own(set, pid, true);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(dirty_set_read(set) >= 0);
        dirty_set_own(set, pid, false);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        assert_int_equal(read(p[0], &f->s, sizeof(f->s)), (ssize_t) sizeof(f->s));
        safe_close(p[0]);
        GenIndex *next = NULL;
        TfwError e = {};
        assert_int_equal(gen_index_load(f->d->fd, "child-index", 100000, &next, &e), 0);
        gen_index_free(f->index);
        f->index = next;
}

/* The daemon's part (every queued event read, the view made), then the job's (the view read,
 * the walk): watch_fd is the instance the walk adds its watches to. */
static void update_with(Fixture *f, DirtySet *set, int watch_fd) {
        SnapshotLimits l = gfx_limits();
        _cleanup_(dirty_view_freep) DirtyView *v = NULL;
        _cleanup_close_ int view = -EBADF;

        gfx_settle();
        assert_true(dirty_set_read(set) >= 0);
        assert_int_equal(dirty_set_export(set, &view), 0);
        assert_int_equal(dirty_view_load(view, watch_fd, dirty_set_budget(set), &v), 0);
        l.watch = v;
        if (marked)
                walk_in_child(f, set, &l);
        else
                gfx_walk(f, &l);
}

static void update(Fixture *f) {
        update_with(f, f->set, dirty_set_fd(f->set));
}

/* A tree deep and wide enough that most of it is carried when one corner changes. */
static void make_tree(Fixture *f) {
        gfx_sh(f, "mkdir -p a/b/c d e/f/g; printf one >a/one; printf two >a/b/two; printf 'three!' >a/b/c/three;"
              "printf x >d/x; printf '#!/bin/sh\\n' >run.sh; chmod 755 run.sh; seq 1 20000 >big; ln -s a link;"
              "ln -s ../x e/f/l; for i in 1 2 3 4 5 6 7 8; do printf $i >e/f/g/$i; done; mkdir e/empty");
}

/* Walked until the watch vouches for everything: what the tests start from. */
static void converge(Fixture *f) {
        for (unsigned i = 0; i < 3; i++)
                update(f);
        assert_int_equal(f->s.watch, SNAPSHOT_WATCH_DIRTY);
}

/* Nothing changed: nothing is read but the root; the tree is the fresh one's. */
static void test_unchanged_reads_only_the_root(void **state) {
        Fixture *f = *state;
        make_tree(f);
        update(f);
        assert_int_equal(f->s.watch, SNAPSHOT_WATCH_FULL);
        assert_int_equal(f->s.entries_unread, 0);
        gfx_assert_equals_fresh(f);
        converge(f);
        assert_int_equal(f->s.dirs_unwatched, 0);
        /* The root's entries: a, d, e (carried with all below), run.sh, big, link. */
        uint64_t below = f->s.entries - 6;
        assert_int_equal(f->s.entries_unread, below + 3);
        /* And every file below the root asked by stat all the same (the root's are read by the
         * walk): one, two, three, x and e/f/g's eight; with the file system's mark, none of
         * them: it reported nothing. */
        if (marked) {
                assert_int_equal(f->s.mark, SNAPSHOT_MARK_USED);
                assert_int_equal(f->s.files_checked, 0);
                assert_int_equal(f->s.files_trusted, 12);
        } else {
                assert_int_equal(f->s.mark, SNAPSHOT_MARK_NONE);
                assert_int_equal(f->s.files_checked, 12);
        }
        if (gfx_vouches(f))
                assert_int_equal(f->s.files_reused, f->s.files);
        gfx_assert_equals_fresh(f);
}

/* Each kind of change, and the generation equals a fresh snapshot after it, and again after a
 * walk that carries what the change's walk read. */
static void test_every_change(void **state) {
        static const char *const changes[] = {
                "printf changed >a/b/c/three",                   /* content, deep */
                "printf 'longer content' >>d/x",                 /* size */
                "touch -r a/b/two ../ref; printf TWO >a/b/two; touch -r ../ref a/b/two", /* times restored */
                "rm a/b/c/three",                                 /* file gone */
                "rm -r a/b",                                      /* tree gone */
                "mkdir -p n/m; printf new >n/m/f",                /* new tree */
                "mkdir -p e/f/g/h/i; printf deep >e/f/g/h/i/j",   /* new tree, deep */
                "rm d/x; mkdir d/x; printf in >d/x/f",            /* file -> directory */
                "rm -r n; printf now-a-file >n",                  /* directory -> file */
                "rm e/f/g/1; ln -s 2 e/f/g/1",                    /* file -> symlink */
                "rm e/f/l; printf l >e/f/l",                      /* symlink -> file */
                "chmod 644 run.sh",                               /* x bit */
                "chmod 700 e/f/g/h",                              /* directory mode, deep */
                "chmod 755 e/f/g/2",                              /* x bit, deep */
                "mv big big2",                                    /* rename */
                "mv e/f/g/3 a/three",                             /* rename across directories */
                "mv e/f a/f",                                     /* a directory renamed away */
                "mv a tmp; mv d a; mv tmp d",                     /* two directories swapped */
                "mkdir e/empty/deeper",                           /* an empty directory */
                "rmdir e/empty/deeper; printf z >e/empty/z",      /* and it fills */
                "rm -r a d e n run.sh big2 link",                 /* everything */
                "printf back >back",                              /* and something again */
        };
        Fixture *f = *state;
        make_tree(f);
        converge(f);
        for (size_t i = 0; i < ELEMENTSOF(changes); i++) {
                gfx_sh(f, "%s", changes[i]);
                update(f);
                assert_int_equal(f->s.watch, SNAPSHOT_WATCH_DIRTY);
                gfx_assert_equals_fresh(f);
                update(f);
                gfx_assert_equals_fresh(f);
        }
}

/* A write through a shared mapping makes no event at all; it changes the file's times, which
 * every walk asks (gen-verify.h). A mapping that stays while the walk reads it keeps its file
 * read by every walk (the read lease says a writer is there), so a second write through it, to
 * a page already dirty (its times do not change again), is seen too. */
static void test_write_through_mapping(void **state) {
        Fixture *f = *state;
        make_tree(f);
        converge(f);
        _cleanup_close_ int wfd = open(f->ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int fd = openat(wfd, "e/f/g/5", O_RDWR | O_CLOEXEC);
        assert_true(fd >= 0);
        char *m = mmap(NULL, 1, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        assert_true(m != MAP_FAILED);
        fd = safe_close(fd);
        m[0] = 'Z';
        update(f);
        gfx_assert_equals_fresh(f);
        gfx_sh(f, "[ \"$(cat ../gen/e/f/g/5)\" = Z ]");
        update(f);
        m[0] = 'Y'; /* the same page, already dirty: not even the times change */
        update(f);
        gfx_assert_equals_fresh(f);
        gfx_sh(f, "[ \"$(cat ../gen/e/f/g/5)\" = Y ]");
        assert_int_equal(munmap(m, 1), 0);
}

/* A write through a hard link from outside the workspace is reported to the outside directory
 * only; it changes the file's ctime, which every walk asks. */
static void test_write_through_outside_link(void **state) {
        Fixture *f = *state;
        make_tree(f);
        gfx_sh(f, "ln e/f/g/6 ../outside");
        converge(f);
        gfx_sh(f, "printf 'changed from outside' >>../outside");
        update(f);
        gfx_assert_equals_fresh(f);
        gfx_sh(f, "[ \"$(cat ../gen/e/f/g/6)\" = '6changed from outside' ]");
}

/* ---- what a kept file can go through without an event on its directory (issue 33, items 1
 * and 2): each one changes the file's bytes where the directory's watch cannot see it, and the
 * next walk must still have the workspace's bytes, and the walk after it too. */

/* The workspace's root, for the tests that hold descriptors of their own. */
static int ws_fd(const Fixture *f) {
        int fd = open(f->ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        return fd;
}

/* Two walks, each the workspace exactly, and the generation's file holds want. */
static void assert_seen(Fixture *f, const char *path, const char *want) {
        for (unsigned i = 0; i < 2; i++) {
                update(f);
                gfx_assert_equals_fresh(f);
                gfx_sh(f, "[ \"$(cat '../gen/%s')\" = '%s' ]", path, want);
        }
}

/* Finding 1 as reproduced: a link made after the walk in the control directory (excluded,
 * never watched), then a write through it. Making a link changes the file's link count, which
 * the kernel reports to the file alone, not to its directory's watch. */
static void test_link_made_after_the_walk_in_control_dir(void **state) {
        Fixture *f = *state;
        make_tree(f);
        gfx_sh(f, "mkdir -p .tentaflake-worker/x");
        converge(f);
        gfx_sh(f, "ln e/f/g/6 .tentaflake-worker/x/f");
        update(f);
        update(f);
        gfx_sh(f, "printf EVIL-NEW-CONTENT >.tentaflake-worker/x/f");
        assert_seen(f, "e/f/g/6", "EVIL-NEW-CONTENT");
}

/* The same from a directory outside the workspace (any directory of the same mount). */
static void test_link_made_after_the_walk_outside(void **state) {
        Fixture *f = *state;
        make_tree(f);
        converge(f);
        gfx_sh(f, "ln a/b/two ../late");
        update(f);
        gfx_sh(f, "printf ' and more' >>../late");
        assert_seen(f, "a/b/two", "two and more");
}

/* O_PATH raises no open event at all; the link is made from the descriptor later, through
 * /proc/self/fd (no path to the file is named again). */
static void test_link_from_an_o_path_descriptor(void **state) {
        Fixture *f = *state;
        make_tree(f);
        _cleanup_close_ int ws = ws_fd(f);
        _cleanup_close_ int p = openat(ws, "d/x", O_PATH | O_CLOEXEC);
        assert_true(p >= 0);
        converge(f);
        char proc[64];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", p);
        assert_int_equal(linkat(AT_FDCWD, proc, f->d->fd, "via-fd", AT_SYMLINK_FOLLOW), 0);
        update(f);
        gfx_sh(f, "printf through-the-fd >../via-fd");
        assert_seen(f, "d/x", "through-the-fd");
}

/* A file with a link outside, renamed inside the workspace (its new directory sees the rename),
 * then written through the outside name, which was renamed too (outside: no event anywhere). */
static void test_rename_of_a_linked_file(void **state) {
        Fixture *f = *state;
        make_tree(f);
        gfx_sh(f, "ln e/f/g/2 ../outside2");
        converge(f);
        gfx_sh(f, "mv e/f/g/2 a/two-moved; mv ../outside2 ../outside3");
        update(f);
        update(f);
        gfx_sh(f, "printf renamed-then-written >../outside3");
        assert_seen(f, "a/two-moved", "renamed-then-written");
}

/* Bytes changed by fallocate (a hole punched) and by copy_file_range, through a link made
 * after the walk: no write(2) at all. */
static void test_fallocate_and_copy_file_range(void **state) {
        Fixture *f = *state;
        make_tree(f);
        converge(f);
        gfx_sh(f, "ln big ../big-link; ln a/one ../one-link; printf COPIED >../src");
        update(f);
        _cleanup_close_ int big = openat(f->d->fd, "big-link", O_RDWR | O_CLOEXEC);
        assert_true(big >= 0);
        assert_int_equal(fallocate(big, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), 0);
        _cleanup_close_ int src = openat(f->d->fd, "src", O_RDONLY | O_CLOEXEC);
        _cleanup_close_ int one = openat(f->d->fd, "one-link", O_WRONLY | O_TRUNC | O_CLOEXEC);
        assert_true(src >= 0 && one >= 0);
        assert_int_equal(copy_file_range(src, NULL, one, NULL, 6, 0), 6);
        update(f);
        gfx_assert_equals_fresh(f);
        gfx_sh(f, "cmp -s -n 4096 ../gen/big /dev/zero");
        assert_seen(f, "a/one", "COPIED");
}

/* A descriptor opened for writing before the watch began (before the first walk), written
 * through long after. */
static void test_descriptor_opened_before_the_watch(void **state) {
        Fixture *f = *state;
        make_tree(f);
        _cleanup_close_ int ws = ws_fd(f);
        _cleanup_close_ int fd = openat(ws, "e/f/g/7", O_RDWR | O_CLOEXEC);
        assert_true(fd >= 0);
        converge(f);
        update(f);
        assert_int_equal(pwrite(fd, "late", 4, 0), 4);
        assert_seen(f, "e/f/g/7", "late");
}

/* Finding 2 as reproduced: a shared writable mapping whose descriptor is closed at once; the
 * walk after the open keeps the file (nothing was written yet), then the mapping is written:
 * no event at all, but the file's times change. */
static void test_mapping_kept_after_its_descriptor(void **state) {
        Fixture *f = *state;
        make_tree(f);
        converge(f);
        _cleanup_close_ int ws = ws_fd(f);
        _cleanup_close_ int fd = openat(ws, "e/f/g/5", O_RDWR | O_CLOEXEC);
        assert_true(fd >= 0);
        char *m = mmap(NULL, 1, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        assert_true(m != MAP_FAILED);
        fd = safe_close(fd);
        update(f);
        update(f);
        update(f);
        m[0] = 'Q';
        assert_seen(f, "e/f/g/5", "Q");
        assert_int_equal(munmap(m, 1), 0);
}

/* A page dirtied through one mapping, that mapping gone, the file read; then a new mapping
 * writes the same page while it is still dirty (before writeback cleaned it), and stays: the
 * write faults in the new mapping, which stamps the file's times again (page_mkwrite). */
static void test_new_mapping_on_a_dirty_page(void **state) {
        Fixture *f = *state;
        make_tree(f);
        converge(f);
        _cleanup_close_ int ws = ws_fd(f);
        _cleanup_close_ int fd = openat(ws, "e/f/g/8", O_RDWR | O_CLOEXEC);
        assert_true(fd >= 0);
        char *m = mmap(NULL, 1, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        assert_true(m != MAP_FAILED);
        m[0] = 'A';
        assert_int_equal(munmap(m, 1), 0);
        fd = safe_close(fd);
        assert_seen(f, "e/f/g/8", "A");
        fd = openat(ws, "e/f/g/8", O_RDWR | O_CLOEXEC);
        m = mmap(NULL, 1, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        assert_true(m != MAP_FAILED);
        fd = safe_close(fd);
        update(f);
        m[0] = 'B'; /* still mapped: no close, no event; a new mapping's first write faults */
        assert_seen(f, "e/f/g/8", "B");
        assert_int_equal(munmap(m, 1), 0);
}

/* ---- review (issue 33): a directory replaced by another that has its device and inode -------- */

/* Replace the directory at path (relative to the workspace) by a new one with the same inode
 * number: the old one removed, new ones made beside it until the filesystem hands the number
 * out again. Returns false when it did not within the tries (the test is then not run). */
static bool replace_dir_same_inode(Fixture *f, const char *path) {
        _cleanup_close_ int ws = ws_fd(f);
        struct stat st;
        char cand[PATH_MAX];
        assert_int_equal(fstatat(ws, path, &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(unlinkat(ws, path, AT_REMOVEDIR), 0);
        bool found = false;
        unsigned n = 0;
        for (; n < 20000 && !found; n++) {
                struct stat c;
                snprintf(cand, sizeof(cand), "%s.cand-%u", path, n);
                assert_int_equal(mkdirat(ws, cand, 0755), 0);
                assert_int_equal(fstatat(ws, cand, &c, AT_SYMLINK_NOFOLLOW), 0);
                if (c.st_ino == st.st_ino && c.st_dev == st.st_dev) {
                        assert_int_equal(renameat(ws, cand, ws, path), 0);
                        found = true;
                }
        }
        for (unsigned i = 0; i < n; i++) {
                snprintf(cand, sizeof(cand), "%s.cand-%u", path, i);
                (void) unlinkat(ws, cand, AT_REMOVEDIR);
        }
        return found;
}

/* An empty directory removed and made again with the same inode number, a file put in it: its
 * old watch is gone (IN_IGNORED), and the new directory must not be taken as the old one. */
static void test_dir_replaced_same_inode(void **state) {
        Fixture *f = *state;
        make_tree(f);
        converge(f);
        if (!replace_dir_same_inode(f, "e/empty"))
                skip();
        gfx_sh(f, "printf hidden >e/empty/evil");
        assert_seen(f, "e/empty/evil", "hidden");
}

/* The same directory as before, not empty: its one subdirectory moved out and back (its files
 * keep their identity), its file removed; the new directory takes the old one's inode number and
 * gets a new file. */
static void test_dir_with_subdirs_replaced_same_inode(void **state) {
        Fixture *f = *state;
        make_tree(f);
        gfx_sh(f, "rm e/f/l");
        converge(f);
        gfx_sh(f, "mv e/f/g ../g-away");
        if (!replace_dir_same_inode(f, "e/f"))
                skip();
        gfx_sh(f, "mv ../g-away e/f/g; printf hidden >e/f/evil");
        assert_seen(f, "e/f/evil", "hidden");
}

/* A directory the watch vouches for, a bind mount put over it after the walk (no event reaches
 * a watch or the mark: the files under the mount are other inodes, the directory's name another
 * directory): the walk must see what the path now leads to. In the mount namespace main() made
 * the binary's own (the mark watches the mount table of the namespace it was made in), the mount
 * undone before anything is asserted. */
static void test_mount_over_a_carried_dir(void **state) {
        Fixture *f = *state;
        char src[PATH_MAX], dst[PATH_MAX], got[64] = "";
        make_tree(f);
        converge(f);
        if (!own_mount_ns)
                skip();
        gfx_sh(f, "mkdir ../over; printf MOUNTED >../over/1");
        snprintf(src, sizeof(src), "%s/../over", f->ws);
        snprintf(dst, sizeof(dst), "%s/e/f/g", f->ws);
        assert_int_equal(mount(src, dst, NULL, MS_BIND, NULL), 0);
        update(f);
        _cleanup_close_ int gen = openat(f->d->fd, "gen/e/f/g/1", O_RDONLY | O_CLOEXEC);
        ssize_t n = gen >= 0 ? read(gen, got, sizeof(got) - 1) : -1;
        assert_int_equal(umount2(dst, MNT_DETACH), 0);
        assert_true(n >= 0);
        assert_string_equal(got, "MOUNTED");
}

/* A mount elsewhere (a capsule's, the store's, the host's: under runc one a request) hides nothing
 * of the workspace: the mark keeps its word and the next walk asks no file; a mount beneath the
 * workspace is the test above's. */
static void test_mount_elsewhere_keeps_the_mark(void **state) {
        Fixture *f = *state;
        char dst[PATH_MAX];
        make_tree(f);
        converge(f);
        if (!own_mount_ns)
                skip();
        update(f);
        assert_int_equal(f->s.mark, marked ? SNAPSHOT_MARK_USED : SNAPSHOT_MARK_NONE);
        gfx_sh(f, "mkdir -p ../elsewhere");
        snprintf(dst, sizeof(dst), "%s/../elsewhere", f->ws);
        assert_int_equal(mount("tmpfs", dst, "tmpfs", 0, "size=1m"), 0);
        update(f);
        assert_int_equal(umount2(dst, MNT_DETACH), 0);
        /* Without the mark every file is asked whatever the mounts do. */
        assert_int_equal(f->s.mark, marked ? SNAPSHOT_MARK_USED : SNAPSHOT_MARK_NONE);
        assert_int_equal(f->s.files_checked, marked ? 0 : 12);
        gfx_assert_equals_fresh(f);
}

/* The watches the instance behind fd holds, by its fdinfo. */
static unsigned held_by(int fd) {
        char path[64], line[512];
        unsigned n = 0;
        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
        FILE *fp = fopen(path, "re");
        assert_non_null(fp);
        while (fgets(line, sizeof(line), fp))
                n += strncmp(line, "inotify wd:", 11) == 0;
        fclose(fp);
        return n;
}

/* The budget (issue 33 item 3): never more watches than it; a directory past it is read by every
 * walk and counted; a directory that has its watch keeps it while the budget is spent (the walk
 * after is on its word); a watch the kernel drops (its directory deleted) is counted off and
 * goes to another directory. Every generation is the workspace all the same. */
static void test_budget(void **state) {
        Fixture *f = *state;
        _cleanup_(dirty_set_freep) DirtySet *small = NULL;
        assert_int_equal(dirty_set_new(4, &small), 0);
        DirtyBudget *b = dirty_set_budget(small);
        make_tree(f);
        gfx_sh(f, "mkdir -p w/1 w/2 w/3 w/4 w/5");
        for (unsigned i = 0; i < 3; i++) {
                update_with(f, small, dirty_set_fd(small));
                gfx_assert_equals_fresh(f);
                assert_int_equal(f->s.dirs_over_budget, f->s.dirs + 1 - 4);
                assert_int_equal(f->s.dirs_unwatched, 0);
                assert_int_equal(b->held, 4);
                assert_int_equal(held_by(dirty_set_fd(small)), 4);
        }
        /* The root has its watch and keeps it: the walk is on the watch's word. */
        assert_int_equal(f->s.watch, SNAPSHOT_WATCH_DIRTY);
        assert_true(f->s.entries_unread > 0);
        /* Every watched directory but the root deleted: their watches are counted off when the
         * daemon reads IN_IGNORED, and the next walk gives the places to others. */
        gfx_sh(f, "rm -r a d e run.sh big link");
        update_with(f, small, dirty_set_fd(small));
        gfx_assert_equals_fresh(f);
        assert_true(b->held <= 4);
        assert_int_equal(held_by(dirty_set_fd(small)), b->held);
        update_with(f, small, dirty_set_fd(small));
        gfx_assert_equals_fresh(f);
        assert_int_equal(b->held, 4);
        assert_int_equal(held_by(dirty_set_fd(small)), 4);
        assert_int_equal(f->s.dirs_over_budget, f->s.dirs + 1 - 4);
        /* A change in a directory past the budget is read. */
        gfx_sh(f, "printf in-w5 >w/5/f; printf in-w1 >w/1/f");
        update_with(f, small, dirty_set_fd(small));
        gfx_assert_equals_fresh(f);
        /* A recount agrees. */
        b->held = 0;
        assert_int_equal(dirty_set_recount(small), 0);
        assert_int_equal(b->held, 4);
}

/* No budget at all (limits.max_watches 0 clamped down, or given): no watch is ever added. */
static void test_budget_none(void **state) {
        Fixture *f = *state;
        _cleanup_(dirty_set_freep) DirtySet *none = NULL;
        assert_int_equal(dirty_set_new(0, &none), 0);
        make_tree(f);
        for (unsigned i = 0; i < 2; i++) {
                update_with(f, none, dirty_set_fd(none));
                gfx_assert_equals_fresh(f);
                assert_int_equal(f->s.dirs_over_budget, f->s.dirs + 1);
                assert_int_equal(f->s.entries_unread, 0);
        }
        assert_int_equal(held_by(dirty_set_fd(none)), 0);
}

/* Events lost (the queue overflowed): the next walk reads everything, and is right. */
static void test_overflow_full_walk(void **state) {
        Fixture *f = *state;
        make_tree(f);
        converge(f);
        /* inotify merges an event equal to the last one queued: alternate two files, past
         * fs.inotify.max_queued_events (16384 by default; read from /proc). */
        gfx_sh(f, "n=$(cat /proc/sys/fs/inotify/max_queued_events); python3 -c \"import os,sys\n"
              "n=int(sys.argv[1])\nfor i in range(n + 100):\n    os.utime('a/one' if i %% 2 else 'd/x')\" $n;"
              "printf after >e/f/g/7");
        update(f);
        assert_int_equal(f->s.watch, SNAPSHOT_WATCH_FULL);
        assert_int_equal(f->s.entries_unread, 0);
        gfx_assert_equals_fresh(f);
        converge(f);
        gfx_assert_equals_fresh(f);
}

/* An index walked with another instance's watch (a daemon before this one), or a view that is
 * older than the index: nothing of it is trusted. */
static void test_other_instance(void **state) {
        Fixture *f = *state;
        _cleanup_(dirty_set_freep) DirtySet *other = NULL;
        make_tree(f);
        converge(f);
        assert_int_equal(dirty_set_new(1U << 20, &other), 0);
        gfx_sh(f, "printf changed >e/f/g/8");
        update_with(f, other, dirty_set_fd(other));
        assert_int_equal(f->s.watch, SNAPSHOT_WATCH_FULL);
        gfx_assert_equals_fresh(f);
        /* Back to the first one: its index is the other's now. */
        update(f);
        assert_int_equal(f->s.watch, SNAPSHOT_WATCH_FULL);
        gfx_assert_equals_fresh(f);
}

/* A directory that cannot be watched (no watch left: here an fd that is no inotify instance) is
 * read by every walk: nothing is ever taken unread. */
static void test_unwatchable_read_always(void **state) {
        Fixture *f = *state;
        _cleanup_close_ int not_inotify = open("/dev/null", O_RDONLY | O_CLOEXEC);
        make_tree(f);
        for (unsigned i = 0; i < 3; i++) {
                update_with(f, f->set, not_inotify);
                assert_int_equal(f->s.entries_unread, 0);
                assert_int_equal(f->s.dirs_unwatched, f->s.dirs + 1); /* the root too */
        }
        gfx_sh(f, "printf changed >e/f/g/8");
        update_with(f, f->set, not_inotify);
        assert_int_equal(f->s.entries_unread, 0);
        gfx_assert_equals_fresh(f);
}

/* The index keeps the watch: saved and loaded, it vouches as the one in memory did. */
static void test_index_keeps_the_watch(void **state) {
        Fixture *f = *state;
        TfwError e = {};
        make_tree(f);
        converge(f);
        assert_int_equal(gen_index_save(f->index, f->d->fd, "index", &e), 0);
        GenIndex *loaded = NULL;
        assert_int_equal(gen_index_load(f->d->fd, "index", 100000, &loaded, &e), 0);
        assert_int_equal(loaded->watch_instance, f->index->watch_instance);
        assert_int_equal(loaded->watch_seq, f->index->watch_seq);
        gen_index_free(f->index);
        f->index = loaded;
        uint64_t unread = f->s.entries_unread;
        update(f);
        assert_int_equal(f->s.watch, SNAPSHOT_WATCH_DIRTY);
        assert_int_equal(f->s.entries_unread, unread);
        gfx_assert_equals_fresh(f);
}

/* A second lane of the store (its generation at <tmp>/gen-b, its index): swapped with the
 * fixture's, so that the fixture's walks and comparisons (../gen) are the other lane's. */
typedef struct Lane {
        int fd;
        GenIndex *index;
} Lane;

static void swap_lanes(Fixture *f, Lane *b) {
        assert_int_equal(renameat2(f->d->fd, "gen", f->d->fd, "gen-b", RENAME_EXCHANGE), 0);
        int fd = f->gen_fd;
        f->gen_fd = b->fd;
        b->fd = fd;
        GenIndex *i = f->index;
        f->index = b->index;
        b->index = i;
}

/* Lane gen-b walked last before a change only the mark hears of, then the fixture's lane walked
 * three times (more views than the two the mark keeps; no fresh snapshot in between: its reads
 * are this process's opens, stamped after the views, and would make the other lane's walk ask
 * the files anyway), then lane gen-b again, with `stamps` given to dirty_set_keep_views: it has
 * the change, on the mark's word (`mark`) or asking every file. */
static void walk_a_lane_left_behind(Fixture *f, size_t stamps, SnapshotMark mark) {
        Lane b = { .fd = -EBADF };
        make_tree(f);
        gfx_sh(f, "ln e/f/g/6 ../outside");
        dirty_set_keep_views(f->set, 2, stamps);
        converge(f);
        assert_int_equal(mkdirat(f->d->fd, "gen-b", 0700), 0);
        b.fd = openat(f->d->fd, "gen-b", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(b.fd >= 0);
        swap_lanes(f, &b);
        converge(f);
        gfx_sh(f, "printf ' changed from outside' >>../outside");
        gfx_sh(f, "[ \"$(cat ../gen-b/e/f/g/6)\" = 6 ]");
        for (unsigned i = 0; i < 3; i++) {
                update(f);
                assert_int_equal(f->s.mark, marked ? SNAPSHOT_MARK_USED : SNAPSHOT_MARK_NONE);
        }
        swap_lanes(f, &b);
        update(f);
        assert_int_equal(f->s.mark, marked ? mark : SNAPSHOT_MARK_NONE);
        gfx_assert_equals_fresh(f);
        gfx_sh(f, "[ \"$(cat ../gen/e/f/g/6)\" = '6 changed from outside' ]");
        update(f);
        assert_int_equal(f->s.mark, marked ? SNAPSHOT_MARK_USED : SNAPSHOT_MARK_NONE);
        gfx_assert_equals_fresh(f);
        safe_close(b.fd);
        gen_index_free(b.index);
}

/* The mark forgets the stamps no walk from its last views counts (dirty_set_keep_views): a lane
 * whose last walk began before those views is vouched for no more, and sees a change made through
 * another name since (the stamp that said so is gone: without the floor raised with it, the walk
 * keeps the old bytes); a lane walked among them still is. */
static void test_forgotten_stamps_vouch_for_nothing(void **state) {
        walk_a_lane_left_behind(*state, 0, SNAPSHOT_MARK_FLOOR);
}

/* While the mark holds few stamps it forgets none: a lane left behind keeps its word. */
static void test_few_stamps_kept(void **state) {
        walk_a_lane_left_behind(*state, DIRTY_SET_KEEP_STAMPS, SNAPSHOT_MARK_USED);
}

/* A ceiling counts what is carried as if it were read. */
static void test_ceiling_counts_carried(void **state) {
        Fixture *f = *state;
        SnapshotLimits l = gfx_limits();
        _cleanup_(dirty_view_freep) DirtyView *v = NULL;
        _cleanup_close_ int view = -EBADF;
        GenIndex *next = NULL;
        TfwError e = {};
        make_tree(f);
        converge(f);
        assert_true(dirty_set_read(f->set) >= 0);
        assert_int_equal(dirty_set_export(f->set, &view), 0);
        assert_int_equal(dirty_view_load(view, dirty_set_fd(f->set), NULL, &v), 0);
        l.watch = v;
        l.max_entries = f->s.entries - 1;
        assert_int_equal(snapshot_update(f->ws, f->gen_fd, f->index, GFX_COPY_UID, &l, &next, &f->s, &e), -E2BIG);
        assert_string_equal(e.code, "snapshot_too_large");
        assert_null(next);
}

/* A directory carried (moved out of the previous index) that readdir names a second time: the
 * second answer is a name already handled, as for any entry, not the previous index's
 * directory again (it has none left). */
static void test_carried_dir_named_twice(void **state) {
        Fixture *f = *state;
        dents_doubled = mmap(NULL, sizeof(*dents_doubled), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        assert_true(dents_doubled != MAP_FAILED);
        *dents_doubled = 0;
        make_tree(f);
        converge(f);
        uint64_t unread = f->s.entries_unread;
        dents_twice = "a";
        update(f);
        dents_twice = NULL;
        assert_int_equal(*dents_doubled, 1);
        assert_int_equal(f->s.watch, SNAPSHOT_WATCH_DIRTY);
        assert_int_equal(f->s.entries_unread, unread); /* a carried once */
        /* The generation is the workspace's (the second answer is counted as an entry, as
         * for any name readdir gives twice). */
        SnapshotSummary fresh = gfx_fresh(f);
        assert_string_equal(f->s.tree, fresh.tree);
        assert_int_equal(f->s.bytes, fresh.bytes);
        assert_int_equal(f->s.files, fresh.files);
        assert_int_equal(f->s.dirs, fresh.dirs);
        update(f);
        gfx_assert_equals_fresh(f);
        munmap(dents_doubled, sizeof(*dents_doubled));
        dents_doubled = NULL;
}

/* The view: what the daemon stamped, and nothing the walk's own opens of directories say; a
 * view that is not one is refused. */
static void test_view(void **state) {
        Fixture *f = *state;
        _cleanup_(dirty_view_freep) DirtyView *v = NULL, *w = NULL;
        _cleanup_close_ int view = -EBADF, dir = -EBADF, bad = -EBADF;
        gfx_sh(f, "mkdir a b");
        _cleanup_close_ int a = openat(f->d->fd, "ws/a", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int b = openat(f->d->fd, "ws/b", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_int_equal(dirty_set_export(f->set, &view), 0);
        assert_int_equal(dirty_view_load(view, dirty_set_fd(f->set), NULL, &v), 0);
        int32_t wa = dirty_view_watch(v, a), wb = dirty_view_watch(v, b);
        assert_true(wa > 0 && wb > 0 && wa != wb);
        uint64_t since = v->seq;
        /* Opening the directories themselves, and listing them, is no change. */
        dir = openat(f->d->fd, "ws/a", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        gfx_sh(f, "ls a b >/dev/null; printf x >b/x");
        assert_true(dirty_set_read(f->set) > 0);
        view = safe_close(view);
        assert_int_equal(dirty_set_export(f->set, &view), 0);
        assert_int_equal(dirty_view_load(view, dirty_set_fd(f->set), NULL, &w), 0);
        assert_false(dirty_view_changed(w, wa, since));
        assert_true(dirty_view_changed(w, wb, since));
        assert_false(dirty_view_changed(w, wb, w->seq));
        /* Sealed: the job cannot be handed a view that changes under it. */
        assert_true(write(view, "x", 1) < 0);
        /* Not a view. */
        bad = memfd_create("bad", MFD_CLOEXEC);
        assert_int_equal(write(bad, "TFWDIRT1", 8), 8);
        DirtyView *x = NULL;
        assert_int_equal(dirty_view_load(bad, -1, NULL, &x), -EBADMSG);
        assert_null(x);
}

/* A view made by hand: the watch's part with no stamps, then the mark's with one stamp. */
static int hand_view(uint64_t seq, uint64_t stamp_seq, uint64_t closed_seq) {
        uint8_t b[40 + 24 + 24] = { 'T', 'F', 'W', 'D', 'I', 'R', 'T', '2' };
        const uint64_t v[] = { 7, seq, 0, 0, /* the mark: */ 42, 1, 1, /* the stamp: */ 99, stamp_seq, closed_seq };
        for (size_t i = 0; i < ELEMENTSOF(v); i++)
                for (unsigned k = 0; k < 8; k++)
                        b[8 + 8 * i + k] = (uint8_t) (v[i] >> (8 * k));
        int fd = memfd_create("view", MFD_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, b, sizeof(b)), (ssize_t) sizeof(b));
        return fd;
}

/* The mark's section of a view (snapshot/fan-mark.h): a stamp is found after an older sequence
 * only; a stamp from after the view, or a close after writing later than the stamp, makes the
 * view refused. */
static void test_mark_view(void **state) {
        (void) state;
        _cleanup_(dirty_view_freep) DirtyView *v = NULL;
        DirtyView *x = NULL;
        _cleanup_close_ int good = hand_view(10, 5, 4), future = hand_view(10, 11, 0), closed = hand_view(10, 5, 6);
        assert_int_equal(dirty_view_load(good, -1, NULL, &v), 0);
        const FanView *fan = dirty_view_fan(v);
        assert_non_null(fan);
        assert_int_equal(fan->dev, 42);
        assert_non_null(fan_view_after(fan, 99, 4));
        assert_int_equal(fan_view_after(fan, 99, 4)->closed_seq, 4);
        assert_null(fan_view_after(fan, 99, 5));
        assert_null(fan_view_after(fan, 98, 0));
        assert_int_equal(dirty_view_load(future, -1, NULL, &x), -EBADMSG);
        assert_int_equal(dirty_view_load(closed, -1, NULL, &x), -EBADMSG);
        assert_null(x);
}

#define T(t) cmocka_unit_test_setup_teardown(t, setup, gfx_teardown)
int main(void) {
        if (getenv("TFW_TEST_FILTER"))
                cmocka_set_test_filter(getenv("TFW_TEST_FILTER"));
        own_mount_ns = unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
        const struct CMUnitTest tests[] = {
                T(test_unchanged_reads_only_the_root),
                T(test_every_change),
                T(test_write_through_mapping),
                T(test_write_through_outside_link),
                T(test_link_made_after_the_walk_in_control_dir),
                T(test_link_made_after_the_walk_outside),
                T(test_link_from_an_o_path_descriptor),
                T(test_rename_of_a_linked_file),
                T(test_fallocate_and_copy_file_range),
                T(test_descriptor_opened_before_the_watch),
                T(test_mapping_kept_after_its_descriptor),
                T(test_new_mapping_on_a_dirty_page),
                T(test_dir_replaced_same_inode),
                T(test_dir_with_subdirs_replaced_same_inode),
                T(test_mount_over_a_carried_dir),
                T(test_mount_elsewhere_keeps_the_mark),
                T(test_budget),
                T(test_budget_none),
                T(test_overflow_full_walk),
                T(test_other_instance),
                T(test_unwatchable_read_always),
                T(test_index_keeps_the_watch),
                T(test_forgotten_stamps_vouch_for_nothing),
                T(test_few_stamps_kept),
                T(test_ceiling_counts_carried),
                T(test_carried_dir_named_twice),
                T(test_view),
                cmocka_unit_test(test_mark_view),
        };
        int failed = cmocka_run_group_tests_name("watch", tests, NULL, NULL);
        /* Again with the files' question shared between threads from the first file on
         * (gen-verify.c: a real workspace has thousands). */
        gen_verify_test_threaded_min_files = 1;
        failed += cmocka_run_group_tests_name("watch, threaded", tests, NULL, NULL);
        /* Again with the file system's mark, which needs CAP_SYS_ADMIN (a mark on a whole file
         * system) and a workspace on ext2/3/4 or f2fs: only the files it reports are asked. */
        struct statfs sf;
        const char *base = getenv("TFW_TEST_ROOT") && *getenv("TFW_TEST_ROOT") ? getenv("TFW_TEST_ROOT") : "/run/tentaflake-tests";
        if (geteuid() != 0 || statfs(base, &sf) < 0 || (sf.f_type != EXT4_SUPER_MAGIC && sf.f_type != F2FS_SUPER_MAGIC)) {
                fprintf(stderr, "watch, marked: not run (not root, or %s is not on ext2/3/4 or f2fs)\n", base);
                return failed;
        }
        marked = true;
        failed += cmocka_run_group_tests_name("watch, marked, threaded", tests, NULL, NULL);
        gen_verify_test_threaded_min_files = 4096;
        return failed + cmocka_run_group_tests_name("watch, marked", tests, NULL, NULL);
}
