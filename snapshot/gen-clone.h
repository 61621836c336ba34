/* SPDX-License-Identifier: MIT */
/* A generation's tree cloned into an empty one (gen-seed.h): its directories made again with
 * their owner, mode and times, its files hard-linked. A generation holds files and directories
 * only: anything else fails the clone (-EBADMSG). The upper directories are cloned first, in
 * breadth, by the caller's thread; the subtrees below them are shared out to up to
 * GEN_CLONE_THREADS_MAX threads (one per online CPU, every signal blocked, joined before it
 * returns): on tmpfs the clone is bound by its system calls, a mkdir and a few more per
 * directory and a link per file, and two threads on two CPUs took half the time of one
 * (docs/snapshot.md, "A lane's first generation"). */
#pragma once

#define GEN_CLONE_THREADS_MAX 4

/* src_tree's entries into dst_tree (empty; its own owner, mode and times are left). 0, or a
 * negative errno: dst_tree then holds a part, for the caller to empty. */
int gen_clone_tree(int src_tree, int dst_tree);
