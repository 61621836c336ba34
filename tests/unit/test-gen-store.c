/* SPDX-License-Identifier: MIT */
/* The generation store's lanes across lanes and restarts (issue 36 item 2; threats 17 and 21):
 *   - a lane's first generation is made from another lane's (gen-seed.h): its files are hard
 *     links to the other lane's, its walk keeps them all; a lane a waiting capsule holds is a
 *     source, one being updated never;
 *   - then an update of that lane that changes a file's bytes, mode and times, removes one and
 *     adds one leaves every inode the other lane names exactly as it was (content, mode, times,
 *     owner, link count aside): the update replaces, it never writes in place;
 *   - a lane whose update made a generation copies it for a lane that waits for its first
 *     (gen-mirror.h), which takes the copy; a copy is never older than its lane's last
 *     generation, and none is kept across a restart;
 *   - the lane a start walks ahead, handed to a capsule started before the walk (a child that
 *     inherits it): the child finds its update lock held and waits for the walk; the daemon lets
 *     it go unsealed, the child seals it when it releases it;
 *   - the index is written on a thread beside the job (index-saver.h): until it is there the
 *     lane has none, and the lane's update lock stays held, past the mirror step, until it is;
 *     a lane another waits for writes it before its mirror;
 *   - a store whose lanes share files passes the check at start (gen_store_check) whatever order
 *     the lanes were sealed in; a shared file written after the seals fails both lanes that name
 *     it, and both are emptied.
 * Root: the lanes' read-only mounts, made in a mount namespace of the test's own. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "snapshot/gen-check.h"
#include "snapshot/gen-mirror.h"
#include "snapshot/gen-store.h"
#include "snapshot/index-saver.h"
#include "tests/unit/lib/gen-fixture.h"

typedef struct Store {
        GenFixture *f;
        char *path;
        int fd;
} Store;

static int setup(void **state) {
        if (geteuid() != 0)
                return 0; /* each test skips */
        int r = gfx_setup(state);
        if (r != 0)
                return r;
        GenFixture *f = *state;
        Store *s = calloc(1, sizeof(*s));
        assert_non_null(s);
        s->f = f;
        assert_true(asprintf(&s->path, "%s/store", f->d->path) > 0);
        assert_int_equal(mkdir(s->path, 0700), 0);
        s->fd = open(s->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(s->fd >= 0);
        *state = s;
        return 0;
}

/* test_index_written_beside_the_job's gate (index-saver.h): closed by the teardown too, so that
 * a failed assertion does not leave the saver waiting on it. */
static int gate[2] = { -EBADF, -EBADF };

static int teardown(void **state) {
        Store *s = *state;
        if (!s)
                return 0;
        gate[1] = safe_close(gate[1]);
        /* The lanes' ro mounts, then everything. */
        for (unsigned k = 0; k < 3; k++) {
                char ro[4096];
                snprintf(ro, sizeof(ro), "%s/lane-%u/ro", s->path, k);
                (void) umount2(ro, MNT_DETACH);
        }
        safe_close(s->fd);
        free(s->path);
        *state = s->f;
        free(s);
        return gfx_teardown(state);
}

static GenLane *acquire(Store *s) {
        GenLane *l = NULL;
        TfwError e = {};
        assert_int_equal(gen_lane_acquire(s->fd, s->path, 2, GFX_COPY_UID, GFX_COPY_GID, &l, &e), 0);
        return l;
}

static void update(Store *s, GenLane *l, SnapshotSummary *sum) {
        SnapshotLimits lim = gfx_limits();
        TfwError e = {};
        if (gen_lane_update(l, s->fd, 2, s->f->ws, GFX_COPY_UID, &lim, sum, &e) < 0)
                fail_msg("update of lane %u: %s", l->number, e.message);
        /* As exec_run does once the generation is ready to bind; the index is written by the
         * time the job has run. */
        gen_lane_mirror(l, s->fd, 2);
        if (gen_lane_index_wait(l, &e) < 0)
                fail_msg("index of lane %u: %s", l->number, e.message);
}

static void stat_at(const Store *s, unsigned lane, const char *name, struct stat *st) {
        char p[4096];
        snprintf(p, sizeof(p), "%s/lane-%u/tree/%s", s->path, lane, name);
        if (lstat(p, st) < 0)
                fail_msg("stat %s: %m", p);
}

/* name is one file in lanes 0 and 1 (a link: the same inode). */
static void assert_shared(const Store *s, const char *name) {
        struct stat a, b;
        stat_at(s, 0, name, &a);
        stat_at(s, 1, name, &b);
        assert_int_equal(a.st_ino, b.st_ino);
}

static void assert_same(const struct stat *a, const struct stat *b) {
        assert_int_equal(a->st_ino, b->st_ino);
        assert_int_equal(a->st_mode, b->st_mode);
        assert_int_equal(a->st_uid, b->st_uid);
        assert_int_equal(a->st_gid, b->st_gid);
        assert_int_equal(a->st_size, b->st_size);
        assert_int_equal(a->st_mtim.tv_sec, b->st_mtim.tv_sec);
        assert_int_equal(a->st_mtim.tv_nsec, b->st_mtim.tv_nsec);
}

/* Lane 0 made from the workspace; lane 1 seeded from it. Returns lane 1, held. */
static GenLane *two_lanes(Store *s, SnapshotSummary *sum1) {
        SnapshotSummary sum0;
        gfx_sh(s->f, "mkdir -p a/b; printf one >a/one; printf two >a/b/two; printf keep >keep; printf gone >gone;"
                     "chmod 644 a/one keep");
        snapshot_test_racy_window_nsec = 0;
        gfx_settle();
        _cleanup_(gen_lane_releasep) GenLane *l0 = acquire(s);
        assert_int_equal(l0->number, 0);
        update(s, l0, &sum0);
        assert_int_equal(sum0.files, 4);
        assert_int_equal(l0->seeded_from, -1);
        GenLane *l1 = acquire(s); /* lane 0 is held: lane 1 */
        assert_int_equal(l1->number, 1);
        gen_lane_release(TAKE_PTR(l0)); /* sealed; free to be a seed */
        update(s, l1, sum1);
        return l1;
}

static void test_first_generation_from_another_lane(void **state) {
        Store *s = *state;
        if (!s)
                skip();
        SnapshotSummary sum1;
        _cleanup_(gen_lane_releasep) GenLane *l1 = two_lanes(s, &sum1);
        assert_int_equal(l1->seeded_from, 0);
        if (gfx_vouches(s->f))
                assert_int_equal(sum1.files_reused, 4); /* a walk, not a copy */
        struct stat a, b;
        assert_shared(s, "a/b/two");
        stat_at(s, 1, "a/b/two", &b);
        assert_int_equal(b.st_nlink, 2);
        stat_at(s, 1, "a/b", &b);
        stat_at(s, 0, "a/b", &a);
        assert_int_not_equal(a.st_ino, b.st_ino); /* directories are the lane's own */
}

static void test_update_never_leaks_into_the_other_lane(void **state) {
        Store *s = *state;
        if (!s)
                skip();
        SnapshotSummary sum1;
        struct stat one, keep, gone, now;
        _cleanup_(gen_lane_releasep) GenLane *l1 = two_lanes(s, &sum1);
        assert_int_equal(l1->seeded_from, 0);
        stat_at(s, 0, "a/one", &one);
        stat_at(s, 0, "keep", &keep);
        stat_at(s, 0, "gone", &gone);
        /* Bytes (same size), mode and times of shared files; one removed, one added. */
        gfx_sh(s->f, "printf ONE >a/one; chmod 755 keep; touch -d '2001-01-01 00:00:00' keep; rm gone; printf new >new");
        gfx_settle();
        update(s, l1, &sum1);
        stat_at(s, 0, "a/one", &now);
        assert_same(&one, &now);
        stat_at(s, 0, "keep", &now);
        assert_same(&keep, &now);
        stat_at(s, 0, "gone", &now);
        assert_same(&gone, &now);
        gfx_sh(s->f, "[ \"$(cat ../store/lane-0/tree/a/one)\" = one ] && [ \"$(cat ../store/lane-1/tree/a/one)\" = ONE ]"
                     " && [ ! -e ../store/lane-0/tree/new ] && [ -e ../store/lane-0/tree/gone ] && [ ! -e ../store/lane-1/tree/gone ]"
                     " && [ \"$(stat -c %%a ../store/lane-1/tree/keep)\" = 750 ]");
        stat_at(s, 1, "a/one", &now);
        assert_int_not_equal(now.st_ino, one.st_ino);
}

/* A copy an update replaces leaves the tree by a rename into the lane's trash (up to its bytes;
 * past them it is removed), where the other lane's name for it is left alone; what a release
 * that never came left there is emptied by the next update first; the release empties it. */
static void test_replaced_copies_trashed_then_emptied(void **state) {
        Store *s = *state;
        if (!s)
                skip();
        SnapshotSummary sum1;
        struct stat one, now;
        _cleanup_(gen_lane_releasep) GenLane *l1 = two_lanes(s, &sum1);
        stat_at(s, 0, "a/one", &one);
        assert_int_equal(one.st_nlink, 2);
        /* Left by a job killed before its release. */
        gfx_sh(s->f, "mkdir -p ../store/lane-1/trash && printf left >../store/lane-1/trash/0");
        /* a/one (3 bytes) fits the trash, keep (4 more) does not: one of them goes there. */
        gfx_sh(s->f, "printf ONE >a/one; printf KEEP >keep");
        gfx_settle();
        snapshot_test_trash_max_bytes = 3;
        update(s, l1, &sum1);
        snapshot_test_trash_max_bytes = SNAPSHOT_TRASH_MAX_BYTES;
        gfx_sh(s->f, "[ \"$(ls ../store/lane-1/trash)\" = 0 ] && [ \"$(cat ../store/lane-1/trash/0)\" = one ]"
                     " && [ \"$(cat ../store/lane-1/tree/a/one)\" = ONE ] && [ \"$(cat ../store/lane-1/tree/keep)\" = KEEP ]"
                     " && [ \"$(cat ../store/lane-0/tree/a/one)\" = one ] && [ \"$(cat ../store/lane-0/tree/keep)\" = keep ]");
        stat_at(s, 0, "a/one", &now);
        assert_same(&one, &now);
        assert_int_equal(now.st_nlink, 2); /* lane 0's name and the trash's */
        gen_lane_release(TAKE_PTR(l1));
        gfx_sh(s->f, "[ ! -e ../store/lane-1/trash ]");
        stat_at(s, 0, "a/one", &now);
        assert_int_equal(now.st_nlink, 1);
        gfx_sh(s->f, "[ \"$(cat ../store/lane-0/tree/a/one)\" = one ]");
}

/* The workspace of the seed tests: a directory and two files, past the racy window. */
static void two_files(Store *s) {
        gfx_sh(s->f, "mkdir -p a; printf one >a/one; printf two >two");
        snapshot_test_racy_window_nsec = 0;
        gfx_settle();
}

/* Lane k's update lock, held as its update holds it: the descriptor to close. */
static int hold_update(Store *s, unsigned k) {
        char p[4096];
        snprintf(p, sizeof(p), "%s/lane-%u/update.lock", s->path, k);
        int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(flock(fd, LOCK_EX), 0);
        return fd;
}

/* A lane held by a capsule started ahead, waiting: a source all the same, through its update
 * lock taken shared; one being updated (its update lock held): never. */
static void test_seed_from_a_held_lane(void **state) {
        Store *s = *state;
        if (!s)
                skip();
        SnapshotSummary sum;
        two_files(s);
        _cleanup_(gen_lane_releasep) GenLane *l0 = acquire(s);
        update(s, l0, &sum);
        {
                _cleanup_(gen_lane_releasep) GenLane *l1 = acquire(s);
                assert_int_equal(l1->number, 1);
                update(s, l1, &sum);
                assert_int_equal(l1->seeded_from, 0); /* lane 0 held, not being changed */
                if (gfx_vouches(s->f))
                        assert_int_equal(sum.files_reused, 2);
        }
        /* Lane 1 emptied; lane 0's update lock held as its update would hold it. */
        char p[4096];
        snprintf(p, sizeof(p), "%s/lane-1/index", s->path);
        assert_int_equal(unlink(p), 0);
        _cleanup_close_ int ul = hold_update(s, 0);
        _cleanup_(gen_lane_releasep) GenLane *l1 = acquire(s);
        update(s, l1, &sum);
        assert_int_equal(l1->seeded_from, -1);
        assert_int_equal(sum.files_reused, 0);
}

/* A capsule started ahead seeds its lane while it waits (gen_lane_seed_ahead): nothing to seed
 * from (no other lane), then busy while lane 0's generation is being made (its update lock
 * held), seeded once it is made, and nothing more to do once seeded; the update after the seed
 * is a walk that keeps every file. */
static void test_seed_ahead(void **state) {
        Store *s = *state;
        if (!s)
                skip();
        SnapshotSummary sum;
        TfwError e = {};
        bool busy = true;
        two_files(s);
        _cleanup_(gen_lane_releasep) GenLane *l0 = acquire(s);
        _cleanup_(gen_lane_releasep) GenLane *l1 = acquire(s);
        assert_int_equal(l1->number, 1);
        /* Lane 0 taken, no generation, its update not begun: busy (its holder makes one). */
        assert_int_equal(gen_lane_seed_ahead(l1, s->fd, 2, &busy, &e), 0);
        assert_true(busy);
        {
                update(s, l0, &sum);
                _cleanup_close_ int ul = hold_update(s, 0); /* as lane 0's next update holds it */
                assert_int_equal(gen_lane_seed_ahead(l1, s->fd, 2, &busy, &e), 0);
                assert_true(busy);
                assert_int_equal(l1->seeded_from, -1);
        }
        assert_int_equal(gen_lane_seed_ahead(l1, s->fd, 2, &busy, &e), 1);
        assert_int_equal(l1->seeded_from, 0);
        assert_shared(s, "a/one");
        l1->seeded_from = -1;
        assert_int_equal(gen_lane_seed_ahead(l1, s->fd, 2, &busy, &e), 1); /* it has one */
        assert_int_equal(l1->seeded_from, -1); /* not seeded again */
        update(s, l1, &sum);
        if (gfx_vouches(s->f))
                assert_int_equal(sum.files_reused, 2);
}

/* The index loaded ahead is the one the next update uses: with the file made garbage after the
 * load and no lane to seed from again (lane 0 being changed), the update still keeps every
 * file; without the load it must copy them. */
static void test_load_ahead(void **state) {
        Store *s = *state;
        if (!s)
                skip();
        SnapshotSummary sum;
        TfwError e = {};
        two_files(s);
        _cleanup_(gen_lane_releasep) GenLane *l0 = acquire(s);
        update(s, l0, &sum);
        _cleanup_(gen_lane_releasep) GenLane *l1 = acquire(s);
        update(s, l1, &sum); /* seeded from lane 0 */
        char p[4096];
        _cleanup_close_ int ul = hold_update(s, 0);
        snprintf(p, sizeof(p), "%s/lane-1/index", s->path);
        for (int ahead = 1; ahead >= 0; ahead--) {
                if (ahead)
                        assert_int_equal(gen_lane_load_ahead(l1, 100000, &e), 1);
                assert_int_equal(truncate(p, 7), 0);
                update(s, l1, &sum);
                if (gfx_vouches(s->f) || !ahead)
                        assert_int_equal(sum.files_reused, ahead ? 2 : 0);
                assert_null(l1->index);
        }
}

/* With no other lane at all there is nothing to wait for. */
static void test_seed_ahead_alone(void **state) {
        Store *s = *state;
        if (!s)
                skip();
        TfwError e = {};
        bool busy = true;
        _cleanup_(gen_lane_releasep) GenLane *l0 = acquire(s);
        assert_int_equal(gen_lane_seed_ahead(l0, s->fd, 2, &busy, &e), 0);
        assert_false(busy);
}

static bool exists_at(const Store *s, const char *name) {
        return faccessat(s->fd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

static void stat_store(const Store *s, const char *name, struct stat *st) {
        if (fstatat(s->fd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
                fail_msg("stat %s: %m", name);
}

/* Lane 0's generation made while lane 1 is held without one: returns lane 0 (its mirror made
 * for lane 1), *ret_l1 lane 1, both held. */
static GenLane *mirror_for_lane_1(Store *s, GenLane **ret_l1) {
        SnapshotSummary sum;
        two_files(s);
        TfwError e = {};
        bool busy = false;
        GenLane *l0 = acquire(s);
        *ret_l1 = acquire(s);
        assert_int_equal((*ret_l1)->number, 1);
        {
                /* Lane 1 asks for a source: none to take (lane 0 is being made or changed). */
                _cleanup_close_ int ul = hold_update(s, 0);
                assert_int_equal(gen_lane_seed_ahead(*ret_l1, s->fd, 2, &busy, &e), 0);
                assert_true(busy);
        }
        update(s, l0, &sum);
        assert_int_equal(l0->mirrored_for, 1);
        assert_int_equal(l0->mirror_error, 0);
        return l0;
}

/* The lane that waits takes the mirror: the same inodes as lane 0's, lane 0's index byte for
 * byte, nothing of the mirror left; its walk then keeps every file. */
static void test_mirror_taken_by_the_waiting_lane(void **state) {
        Store *s = *state;
        if (!s)
                skip();
        SnapshotSummary sum;
        TfwError e = {};
        bool busy = true;
        struct stat a, b;
        GenLane *l1 = NULL;
        _cleanup_(gen_lane_releasep) GenLane *l0 = mirror_for_lane_1(s, &l1);
        _cleanup_(gen_lane_releasep) GenLane *hold1 = l1;
        stat_at(s, 0, "a/one", &a);
        stat_store(s, "lane-0/mirror/tree/a/one", &b);
        assert_int_equal(a.st_ino, b.st_ino);
        assert_true(exists_at(s, "lane-0/mirror/index"));
        assert_int_equal(gen_lane_seed_ahead(l1, s->fd, 2, &busy, &e), 1);
        assert_int_equal(l1->seeded_from, 0);
        assert_true(l1->seeded_mirror);
        assert_false(exists_at(s, "lane-0/mirror"));
        assert_false(exists_at(s, "lane-1/adopted"));
        stat_at(s, 1, "a/one", &b);
        assert_int_equal(a.st_ino, b.st_ino);
        assert_shared(s, "two");
        gfx_sh(s->f, "cmp ../store/lane-0/index ../store/lane-1/index");
        update(s, l1, &sum);
        assert_int_equal(l1->mirrored_for, -1); /* lane 0 has a generation */
        if (gfx_vouches(s->f))
                assert_int_equal(sum.files_reused, 2);
}

/* No mirror when no lane waits: lane 1 not held; held without a generation but not asking for a
 * source (a streamed job's lane); asking, then seeded (its `wants` let go). */
static void test_mirror_only_for_a_waiting_lane(void **state) {
        Store *s = *state;
        if (!s)
                skip();
        SnapshotSummary sum;
        TfwError e = {};
        bool busy;
        two_files(s);
        _cleanup_(gen_lane_releasep) GenLane *l0 = acquire(s);
        update(s, l0, &sum);
        assert_int_equal(l0->mirrored_for, -1);
        _cleanup_(gen_lane_releasep) GenLane *l1 = acquire(s);
        update(s, l0, &sum);
        assert_int_equal(l0->mirrored_for, -1);
        assert_false(exists_at(s, "lane-0/mirror"));
        {
                _cleanup_close_ int ul = hold_update(s, 0); /* lane 0 being changed: lane 1 asks */
                assert_int_equal(gen_lane_seed_ahead(l1, s->fd, 2, &busy, &e), 0);
                assert_true(busy);
        }
        assert_int_equal(gen_lane_seed_ahead(l1, s->fd, 2, &busy, &e), 1); /* seeded: asks no more */
        update(s, l0, &sum);
        assert_int_equal(l0->mirrored_for, -1);
        assert_false(exists_at(s, "lane-0/mirror"));
}

/* The update lock is kept from the update to the mirror: a seed in between finds lane 0 busy,
 * and takes the mirror after. */
static void test_mirror_update_lock_kept(void **state) {
        Store *s = *state;
        if (!s)
                skip();
        SnapshotSummary sum;
        TfwError e = {};
        bool busy = false;
        SnapshotLimits lim = gfx_limits();
        two_files(s);
        _cleanup_(gen_lane_releasep) GenLane *l0 = acquire(s);
        _cleanup_(gen_lane_releasep) GenLane *l1 = acquire(s);
        assert_int_equal(gen_lane_update(l0, s->fd, 2, s->f->ws, GFX_COPY_UID, &lim, &sum, &e), 0);
        assert_int_equal(gen_lane_seed_ahead(l1, s->fd, 2, &busy, &e), 0);
        assert_true(busy);
        gen_lane_mirror(l0, s->fd, 2);
        assert_int_equal(l0->mirrored_for, 1);
        assert_int_equal(gen_lane_seed_ahead(l1, s->fd, 2, &busy, &e), 1);
        assert_true(l1->seeded_mirror);
}

/* Lane 0's mirror for lane 1 broken by the shell command break_it: lane 1's seed empties out
 * what a take moved in and clones lane 0 instead (the same inodes, the same index). */
static void assert_broken_mirror_cloned(Store *s, const char *break_it) {
        TfwError e = {};
        bool busy = true;
        GenLane *l1 = NULL;
        _cleanup_(gen_lane_releasep) GenLane *l0 = mirror_for_lane_1(s, &l1);
        _cleanup_(gen_lane_releasep) GenLane *hold1 = l1;
        gfx_sh(s->f, "%s", break_it);
        assert_int_equal(gen_lane_seed_ahead(l1, s->fd, 2, &busy, &e), 1);
        assert_int_equal(l1->seeded_from, 0);
        assert_false(l1->seeded_mirror);
        assert_shared(s, "a/one");
        gfx_sh(s->f, "cmp ../store/lane-0/index ../store/lane-1/index");
        assert_false(exists_at(s, "lane-1/adopted"));
}

/* A take cut short after its entries moved in (the mirror's index missing). */
static void test_mirror_partial_take_emptied(void **state) {
        Store *s = *state;
        if (!s)
                skip();
        assert_broken_mirror_cloned(s, "rm ../store/lane-0/mirror/index");
}

/* A take never replaces an entry of the lane's tree, and puts no index in before every entry
 * is in: with a name taken in lane 1's tree, it fails, lane 1 has no index, the entry is as it
 * was. */
static void test_mirror_take_never_replaces(void **state) {
        Store *s = *state;
        if (!s)
                skip();
        GenLane *l1 = NULL;
        _cleanup_(gen_lane_releasep) GenLane *l0 = mirror_for_lane_1(s, &l1);
        _cleanup_(gen_lane_releasep) GenLane *hold1 = l1;
        gfx_sh(s->f, "printf mine >../store/lane-1/tree/two");
        assert_true(gen_mirror_take(l0->lane_fd, l1) < 0);
        assert_false(exists_at(s, "lane-1/index"));
        gfx_sh(s->f, "[ \"$(cat ../store/lane-1/tree/two)\" = mine ]");
}

/* A mirror is never older than its lane's last generation: the lane's next update drops it
 * (here with no lane waiting any more, so none is made again). */
static void test_mirror_dropped_by_the_next_update(void **state) {
        Store *s = *state;
        if (!s)
                skip();
        SnapshotSummary sum;
        GenLane *l1 = NULL;
        _cleanup_(gen_lane_releasep) GenLane *l0 = mirror_for_lane_1(s, &l1);
        gen_lane_release(l1);
        assert_true(exists_at(s, "lane-0/mirror"));
        gfx_sh(s->f, "printf ONE >a/one");
        gfx_settle();
        update(s, l0, &sum);
        assert_int_equal(l0->mirrored_for, -1);
        assert_false(exists_at(s, "lane-0/mirror"));
}

/* A mirror that cannot be taken at all (no tree in it). */
static void test_mirror_broken_falls_back_to_a_clone(void **state) {
        Store *s = *state;
        if (!s)
                skip();
        assert_broken_mirror_cloned(s, "rm -r ../store/lane-0/mirror/tree");
}

/* The child's side of test_start_lane_handed_to_a_child: 0 when every step holds. */
static int child_of_the_start(Store *s, GenLane *l, int checked, int go) {
        char p[4096], buf[8] = "";
        bool busy;
        TfwError e = {};
        l->update_fd = safe_close(l->update_fd); /* its copy: the lock stays the parent's */
        snprintf(p, sizeof(p), "%s/lane-0/update.lock", s->path);
        int fd = open(p, O_RDWR | O_CLOEXEC);
        if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) == 0)
                return 2; /* the walk would not have been waited for */
        close(fd);
        if (write(checked, "c", 1) != 1)
                return 6;
        if (gen_lane_seed_ahead(l, s->fd, 2, &busy, &e) != 1 || gen_lane_load_ahead(l, 100000, &e) != 1)
                return 3;
        snprintf(p, sizeof(p), "%s/lane-0/tree/a/one", s->path);
        fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || read(fd, buf, sizeof(buf) - 1) != 3 || strcmp(buf, "ONE") != 0)
                return 4; /* the walk's generation, not the one before it */
        close(fd);
        if (read(go, buf, 1) != 1)
                return 5;
        gen_lane_release(l);
        return 0;
}

/* A restart's lane walked ahead while the capsule started on it boots (orchestrator/daemon.c,
 * start_walk_ahead): the update lock taken before the fork, the walk under it, the lane let go
 * by the walker without a seal and sealed by the child. */
static void test_start_lane_handed_to_a_child(void **state) {
        Store *s = *state;
        if (!s)
                skip();
        SnapshotSummary sum;
        TfwError e = {};
        int go[2], checked[2];
        char c;
        two_files(s);
        GenLane *l = acquire(s);
        update(s, l, &sum);
        gen_lane_release(l);
        gfx_sh(s->f, "printf ONE >a/one");
        gfx_settle();
        l = acquire(s);
        assert_int_equal(l->number, 0);
        assert_int_equal(gen_lane_lock_update(l, &e), 0);
        assert_int_equal(pipe2(go, O_CLOEXEC), 0);
        assert_int_equal(pipe2(checked, O_CLOEXEC), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                _exit(child_of_the_start(s, l, checked[1], go[0]));
        /* Once the child found the lock held: the walk under it, then the lock let go. */
        assert_int_equal(read(checked[0], &c, 1), 1);
        update(s, l, &sum);
        gen_lane_let_go(l);
        assert_false(exists_at(s, "lane-0/seal")); /* the child holds it */
        assert_int_equal(write(go[1], "g", 1), 1);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_true(exists_at(s, "lane-0/seal"));
        close(go[0]);
        close(go[1]);
        close(checked[0]);
        close(checked[1]);
}

static unsigned drops;
static void count(void *userdata, const char *what, const char *why) {
        (void) userdata;
        fprintf(stderr, "# drop %s: %s\n", what, why);
        drops++;
}

static void test_shared_lanes_checked_at_start(void **state) {
        Store *s = *state;
        if (!s)
                skip();
        SnapshotSummary sum1;
        GenLane *l1 = two_lanes(s, &sum1);
        /* Lane 1 removes a shared file's link (its ctime moves, after lane 0's seal), then is
         * sealed itself: the store's newest seal covers it. */
        gfx_sh(s->f, "rm gone");
        gfx_settle();
        update(s, l1, &sum1);
        gen_lane_release(l1);
        drops = 0;
        assert_int_equal(gen_store_check(s->fd, 2, 100000, count, NULL), 0);
        assert_int_equal(drops, 0);
        /* A shared file written after the seals: both lanes naming it are emptied. */
        gfx_sh(s->f, "printf xyz >>../store/lane-0/tree/keep");
        assert_int_equal(gen_store_check(s->fd, 2, 100000, count, NULL), 0);
        assert_int_equal(drops, 2);
        gfx_sh(s->f, "[ ! -e ../store/lane-0/index ] && [ ! -e ../store/lane-1/index ] && [ -z \"$(ls -A ../store/lane-1/tree)\" ]");
}

/* A mirror found at start is removed; the lanes kept are sealed again, so that the ctimes its
 * links' removal moved do not fail the next start's check. A lane that fails goes with its
 * mirror. */
static void test_mirror_removed_at_start(void **state) {
        Store *s = *state;
        if (!s)
                skip();
        GenLane *l1 = NULL;
        GenLane *l0 = mirror_for_lane_1(s, &l1);
        gen_lane_release(l1);
        gen_lane_release(l0);
        drops = 0;
        assert_int_equal(gen_store_check(s->fd, 2, 100000, count, NULL), 0);
        assert_int_equal(drops, 1); /* the mirror */
        assert_false(exists_at(s, "lane-0/mirror"));
        assert_true(exists_at(s, "lane-0/index"));
        drops = 0;
        assert_int_equal(gen_store_check(s->fd, 2, 100000, count, NULL), 0);
        assert_int_equal(drops, 0);
        /* What a make, a drop or a take cut short left: removed too. */
        gfx_sh(s->f, "mkdir -p ../store/lane-0/mirror.new/tree/a ../store/lane-0/mirror.drop ../store/lane-1/adopted/tree");
        drops = 0;
        assert_int_equal(gen_store_check(s->fd, 2, 100000, count, NULL), 0);
        assert_int_equal(drops, 2);
        assert_false(exists_at(s, "lane-0/mirror.new"));
        assert_false(exists_at(s, "lane-0/mirror.drop"));
        assert_false(exists_at(s, "lane-1/adopted"));
        assert_true(exists_at(s, "lane-0/index"));
        /* A mirror again, then lane 0's tree changed behind its seal: both go. */
        l0 = mirror_for_lane_1(s, &l1);
        gen_lane_release(l1);
        gen_lane_release(l0);
        gfx_sh(s->f, "printf xyz >>../store/lane-0/tree/two");
        drops = 0;
        assert_int_equal(gen_store_check(s->fd, 2, 100000, count, NULL), 0);
        assert_false(exists_at(s, "lane-0/mirror"));
        assert_false(exists_at(s, "lane-0/index"));
}

/* Can the update lock of lane k be had shared now (a seed's test)? */
static bool update_lock_free(Store *s, unsigned k) {
        char p[4096];
        snprintf(p, sizeof(p), "%s/lane-%u/update.lock", s->path, k);
        _cleanup_close_ int fd = open(p, O_RDWR | O_CLOEXEC);
        assert_true(fd >= 0);
        return flock(fd, LOCK_SH | LOCK_NB) == 0;
}

/* The index is written beside the job (index-saver.h): held back by the test's gate, the lane
 * has no index and its update lock stays held past the mirror step, so no seed copies a tree
 * without its index; once written, the index is the walk's and the lock is let go by the thread
 * itself. */
static void test_index_written_beside_the_job(void **state) {
        Store *s = *state;
        if (!s)
                skip();
        SnapshotSummary sum;
        SnapshotLimits lim = gfx_limits();
        TfwError e = {};
        two_files(s);
        assert_int_equal(pipe2(gate, O_CLOEXEC), 0);
        index_saver_test_gate_fd = gate[0];
        _cleanup_(gen_lane_releasep) GenLane *l0 = acquire(s);
        assert_int_equal(gen_lane_update(l0, s->fd, 2, s->f->ws, GFX_COPY_UID, &lim, &sum, &e), 0);
        gen_lane_mirror(l0, s->fd, 2); /* no lane waits: no copy */
        assert_int_equal(l0->mirrored_for, -1);
        assert_false(exists_at(s, "lane-0/index"));
        assert_false(update_lock_free(s, 0));
        /* A lane made now is not seeded from lane 0's tree, which has no index yet. */
        {
                _cleanup_(gen_lane_releasep) GenLane *l1 = acquire(s);
                bool busy = false;
                assert_int_equal(gen_lane_seed_ahead(l1, s->fd, 2, &busy, &e), 0);
                assert_true(busy);
        }
        assert_int_equal(write(gate[1], "x", 1), 1);
        assert_int_equal(gen_lane_index_wait(l0, &e), 0);
        index_saver_test_gate_fd = -1;
        gate[0] = safe_close(gate[0]);
        gate[1] = safe_close(gate[1]);
        assert_true(exists_at(s, "lane-0/index"));
        assert_true(update_lock_free(s, 0));
        GenIndex *x = NULL;
        char lane[4096];
        snprintf(lane, sizeof(lane), "%s/lane-0", s->path);
        _cleanup_close_ int lfd = open(lane, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_int_equal(gen_index_load(lfd, GEN_LANE_INDEX, 100000, &x, &e), 0);
        assert_int_equal(x->entries, sum.entries);
        gen_index_free(x);
}

#define T(t) cmocka_unit_test_setup_teardown(t, setup, teardown)
int main(void) {
        if (getenv("TFW_TEST_FILTER"))
                cmocka_set_test_filter(getenv("TFW_TEST_FILTER"));
        /* The lanes' mounts in a namespace of this process's own, gone with it. */
        if (geteuid() == 0 && (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)) {
                perror("unshare");
                return 1;
        }
        const struct CMUnitTest tests[] = {
                T(test_first_generation_from_another_lane),
                T(test_update_never_leaks_into_the_other_lane),
                T(test_replaced_copies_trashed_then_emptied),
                T(test_seed_from_a_held_lane),
                T(test_seed_ahead),
                T(test_seed_ahead_alone),
                T(test_load_ahead),
                T(test_index_written_beside_the_job),
                T(test_shared_lanes_checked_at_start),
                T(test_mirror_taken_by_the_waiting_lane),
                T(test_mirror_only_for_a_waiting_lane),
                T(test_mirror_update_lock_kept),
                T(test_mirror_partial_take_emptied),
                T(test_mirror_take_never_replaces),
                T(test_mirror_dropped_by_the_next_update),
                T(test_mirror_broken_falls_back_to_a_clone),
                T(test_mirror_removed_at_start),
                T(test_start_lane_handed_to_a_child),
        };
        return cmocka_run_group_tests_name("gen-store", tests, NULL, NULL);
}
