/* SPDX-License-Identifier: MIT */
/* A workspace and a generation in a fresh temporary directory, for the tests of generations
 * (test-generation.c) and of the workspace's watch (test-watch.c): <tmp>/ws is the workspace,
 * <tmp>/gen the generation, <tmp>/fresh/<n> fresh snapshots to compare it with. */
#pragma once

#include <stdbool.h>

#include "snapshot/dirty-set.h"
#include "snapshot/gen-index.h"
#include "snapshot/snapshot.h"
#include "tests/unit/lib/tfw-test.h"

#define GFX_COPY_UID ((uid_t) 4343)
#define GFX_COPY_GID ((gid_t) 4242)

typedef struct GenFixture {
        TestDir *d;
        char *ws;
        char *mnt;        /* a filesystem a test mounted: teardown detaches it, however the test ended */
        int gen_fd;
        GenIndex *index;  /* the generation's, after the last walk */
        DirtySet *set;    /* the watch: gfx_setup_watched only, else NULL */
        SnapshotSummary s;
        unsigned fresh;
} GenFixture;

/* cmocka fixtures: *state becomes the GenFixture. The watched one also makes a DirtySet and sets
 * the racy window to 0 (what the watch vouches for is what those tests test); teardown puts the
 * window back. */
int gfx_setup(void **state);
int gfx_setup_watched(void **state);
int gfx_teardown(void **state);

/* Run a shell command in the workspace; the test fails when it does. */
void gfx_sh(const GenFixture *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Does the workspace's filesystem vouch for its files by their times (snapshot.c
 * gen_fs_vouches)? Where it does not, nothing is ever kept, and the tests expect exactly that. */
bool gfx_vouches(const GenFixture *f);

SnapshotLimits gfx_limits(void);

/* Past the racy window of what was just written: the walk starts on the coarse clock, which lags
 * the fine-grained ctimes the filesystem may stamp by up to a tick of a few ms. */
void gfx_settle(void);

/* Update the generation from the workspace with l; the previous index is replaced. */
void gfx_walk(GenFixture *f, const SnapshotLimits *l);

/* A fresh snapshot of the workspace; its summary. */
SnapshotSummary gfx_fresh(GenFixture *f);

/* The generation is exactly what a fresh snapshot of the workspace would be: the same tree id,
 * bytes, entries, and the same files with the same bytes and modes (diff -r compares contents;
 * the mode listing compares the group mirror). */
void gfx_assert_equals_fresh(GenFixture *f);
