/* SPDX-License-Identifier: MIT */
/* A generation's index written on a thread of its own (docs/snapshot.md, "The index written
 * beside the job"). An update's walk leaves the tree a complete generation; its index (9 MB for
 * 86k entries: 13 to 42 ms to write) is only needed by the lane's next user, a seed or a mirror
 * (gen-seed.h, gen-mirror.h) and a restarted worker, so the job need not wait for it: the
 * index is written while its capsule starts and runs.
 *
 * What keeps it safe is the rule the store already has: an index on the disk describes the tree
 * (written whole under a temporary name and renamed, after the walk; gen-store.h). Until the
 * thread is done there is no index, which every reader takes for "no generation here": a
 * seed or a restarted worker makes the lane again, never uses a tree that has none. And the
 * lane's update lock stays held until the index is written (index_saver_hand_lock), so no other
 * lane copies the tree before its index is there: a seed that finds the lock taken tries again.
 *
 * The thread blocks every signal, resolves no path but the lane's own file names, and frees the
 * index it was given. */
#pragma once

#include "common/error.h"
#include "gen-index.h"

typedef struct IndexSaver IndexSaver;

/* Tests only: when not negative, the thread reads a byte from this descriptor before it writes
 * (so that a test sees the time before the index is there). */
extern int index_saver_test_gate_fd;

/* x (taken, freed by the saver) written to dir_fd/name (gen_index_save) on a new thread; when
 * no thread can be started, written now, and its result returned (e set): *ret is NULL then.
 * dir_fd must stay open until index_saver_finish(). */
int index_saver_start(GenIndex *x, int dir_fd, const char *name, IndexSaver **ret, TfwError *e);

/* lock_fd (taken) closed as soon as the index is written, or failed to be: at once when it is
 * already, else by the thread. At most one. */
void index_saver_hand_lock(IndexSaver *s, int lock_fd);

/* Wait for the thread: 0 when the index was written, else a negative errno (e set) and there is
 * no index. Frees s (NULL: 0); a lock handed over is closed by then. */
int index_saver_finish(IndexSaver *s, TfwError *e);
