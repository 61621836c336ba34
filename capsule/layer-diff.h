/* SPDX-License-Identifier: MIT */
/* What a job changed under /work, read from its layer (docs/capsule.md, "The job's writes as a
 * layer"): the overlay's upper directory, the lower one the job was given, and the merged view,
 * each an open directory. Only what the upper directory holds is visited, and only the lower
 * directories the upper one touched are listed: the cost follows what the job changed, never
 * what it did not. In libtfw so that tests/unit/test-layer-diff.c proves it on the host against
 * the kernel's own overlayfs, which records a job's writes the way gVisor's does (whiteouts are
 * character devices 0:0; a directory made again over a deleted one hides the lower one).
 *
 * Events, each with its path relative to the root ('/'-separated, the names as they are):
 *   LAYER_FILE     a regular file the job wrote, made or changed the mode of, whose content or
 *                  owner-execute bit differs from the lower file of that name (a file only
 *                  copied up, by a touch or a chmod that changed no x bit, is no change);
 *                  dir_fd/name open it, st is its fstatat;
 *   LAYER_DIR      a directory the job made where the lower one had none (empty or not: its
 *                  contents come as events of their own);
 *   LAYER_DELETED  a lower entry the job removed or replaced by another type: every entry of
 *                  a removed directory, the directory itself after its contents; st is the
 *                  lower entry's;
 *   LAYER_LINK     (LAYER_DIFF_CACHE only) a symbolic link the job made; dir_fd/name read it;
 *   LAYER_REFUSED  what the job left that a changeset does not carry: a symbolic link, a FIFO,
 *                  a socket or device, a name that is not UTF-8 or holds a control character,
 *                  a tree deeper than LAYER_DIFF_MAX_DEPTH; why says which.
 * With LAYER_DIFF_CACHE (the build cache's layer, docs/cache.md): every copy the upper directory
 * holds is an event, for its times and mode count there (LAYER_FILE for every regular file,
 * LAYER_DIR for every directory, new or not), symbolic links are LAYER_LINK, names are not
 * judged (the host's importer does), and a removed directory is one LAYER_DELETED, its contents
 * not listed (the cache drops what is below it).
 * Paths in skip (relative, normalised: the control directory, artifacts/, the cache's paths)
 * are passed over with everything below them, in both layers. Nothing is followed: every name
 * is opened relative to its directory with O_NOFOLLOW. Returns 0, the callback's negative
 * value (the walk stops there), or a negative errno when a directory could not be read. */
#pragma once

#include <stdbool.h>
#include <sys/stat.h>

#define LAYER_DIFF_MAX_DEPTH 128

typedef enum LayerChange {
        LAYER_FILE,
        LAYER_DIR,
        LAYER_DELETED,
        LAYER_REFUSED,
        LAYER_LINK,
} LayerChange;

#define LAYER_DIFF_CACHE 1u

typedef struct LayerEvent {
        LayerChange change;
        const char *path;
        int dir_fd;             /* LAYER_FILE, _DIR, _LINK: the upper directory holding it */
        const char *name;       /* ... and its name there */
        const struct stat *st;  /* the upper entry's; LAYER_DELETED: the lower entry's */
        const char *why;        /* LAYER_REFUSED */
} LayerEvent;

typedef int (*LayerEventFn)(const LayerEvent *ev, void *userdata);

int layer_diff(int upper_fd, int lower_fd, int merged_fd, const char *const *skip, unsigned flags, LayerEventFn fn,
               void *userdata);

/* Whether a name can travel in a changeset: UTF-8 without a control character (C0, DEL, C1)
 * or a bidirectional control (common/term-escape.h: what would act on, or reorder, the
 * terminal of whoever reviews the changeset). */
bool layer_name_is_portable(const char *name);
