/* SPDX-License-Identifier: MIT */
/* A table of stamps: for each key (a watch descriptor, an inode number), the sequence number of
 * its last event, and of the last of them that was a close after writing. The workspace's watch
 * (snapshot/dirty-set.h) and the file system's mark (snapshot/fan-mark.h) keep their events in
 * one, and a job's view of the mark is read into one.
 *
 * Open addressing with linear probing over a power-of-two number of slots, at most half of them
 * used; a slot whose seq is 0 is free, so every stamp put has a seq of 1 or more.
 *
 * The bound is the caller's safety: a table that holds max keys takes no stamp at all, not even
 * for a key it holds already, and neither does one that cannot grow (no memory). Then
 * stamp_table_put() refuses and changes nothing, and the caller starts again from nothing
 * (stamp_table_clear) and trusts nothing older than that: a table never drops a stamp it was
 * given without saying so. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Stamp {
        uint64_t key;
        uint64_t seq;        /* the key's last event; 0: a free slot */
        uint64_t closed_seq; /* its last close after writing; 0: none */
} Stamp;

typedef struct StampTable {
        Stamp *slots;   /* NULL until the first stamp */
        size_t n_slots; /* 0 or a power of two */
        size_t n_used;
        size_t max;     /* keys held at most */
} StampTable;

/* An empty table holding at most max keys (nothing allocated yet). */
#define STAMP_TABLE_INIT(m) ((StampTable) { .max = (m) })

void stamp_table_done(StampTable *t);
/* Forget every stamp (the slots stay allocated). */
void stamp_table_clear(StampTable *t);
/* Make room for n keys without growing again (a table read whole: a job's view). */
int stamp_table_reserve(StampTable *t, size_t n);
/* Put s (s->seq ≥ 1) under s->key, in place of the key's stamp if it has one. -E2BIG when the
 * table holds max keys, -ENOMEM when it cannot grow, -EINVAL for a seq of 0: the table is then
 * unchanged. */
int stamp_table_put(StampTable *t, const Stamp *s);
/* The key's stamp, or NULL. Valid until the next put, forget or clear. */
const Stamp *stamp_table_get(const StampTable *t, uint64_t key);
/* Forget every stamp whose seq is seq or older; the slots shrink to fit what is left. -ENOMEM:
 * the table is unchanged. */
int stamp_table_forget_upto(StampTable *t, uint64_t seq);
/* Forget the key's stamp, if it has one. */
void stamp_table_forget(StampTable *t, uint64_t key);
