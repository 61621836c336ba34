/* SPDX-License-Identifier: MIT */
/* A table of stamps by key, open addressing. See stamp-table.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stamp-table.h"

/* The key's slot, or the free slot where it would go (there is always one: at most half are
 * used). */
static size_t slot_of(const Stamp *slots, size_t n_slots, uint64_t key) {
        size_t j = (size_t) ((key * 0x9E3779B97F4A7C15ULL) >> 20) & (n_slots - 1);
        while (slots[j].seq && slots[j].key != key)
                j = (j + 1) & (n_slots - 1);
        return j;
}

/* The stamps whose seq is above keep_above (all: 0) moved into n_slots new slots. */
static int rehash(StampTable *t, size_t n_slots, uint64_t keep_above) {
        Stamp *v = calloc(n_slots, sizeof(*v));
        if (!v)
                return -ENOMEM;
        size_t n = 0;
        for (size_t i = 0; i < t->n_slots; i++)
                if (t->slots[i].seq > keep_above) {
                        v[slot_of(v, n_slots, t->slots[i].key)] = t->slots[i];
                        n++;
                }
        free(t->slots);
        t->slots = v;
        t->n_slots = n_slots;
        t->n_used = n;
        return 0;
}

static int resize(StampTable *t, size_t n_slots) {
        return rehash(t, n_slots, 0);
}

void stamp_table_done(StampTable *t) {
        free(t->slots);
        *t = STAMP_TABLE_INIT(t->max);
}

void stamp_table_clear(StampTable *t) {
        if (t->slots)
                memset(t->slots, 0, t->n_slots * sizeof(*t->slots));
        t->n_used = 0;
}

int stamp_table_reserve(StampTable *t, size_t n) {
        if (n > t->max || n > SIZE_MAX / 4 / sizeof(Stamp))
                return -E2BIG;
        size_t n_slots = 16;
        while (n_slots < 2 * n)
                n_slots *= 2;
        return n_slots > t->n_slots ? resize(t, n_slots) : 0;
}

int stamp_table_put(StampTable *t, const Stamp *s) {
        if (s->seq == 0)
                return -EINVAL;
        /* Full before the key is looked for: a key held already gets no stamp either. */
        if (t->n_used >= t->max)
                return -E2BIG;
        if (2 * (t->n_used + 1) > t->n_slots) {
                int r = resize(t, t->n_slots ? 2 * t->n_slots : 1024);
                if (r < 0)
                        return r;
        }
        size_t j = slot_of(t->slots, t->n_slots, s->key);
        if (!t->slots[j].seq)
                t->n_used++;
        t->slots[j] = *s;
        return 0;
}

const Stamp *stamp_table_get(const StampTable *t, uint64_t key) {
        if (!t->slots)
                return NULL;
        const Stamp *s = &t->slots[slot_of(t->slots, t->n_slots, key)];
        return s->seq ? s : NULL;
}

int stamp_table_forget_upto(StampTable *t, uint64_t seq) {
        size_t n = 0;
        for (size_t i = 0; i < t->n_slots; i++)
                n += t->slots[i].seq > seq;
        if (n == t->n_used)
                return 0;
        if (n == 0) {
                stamp_table_done(t);
                return 0;
        }
        /* Sized for what is left, as stamp_table_reserve would: the view and the walks' lookups
         * go over the slots. */
        size_t n_slots = 16;
        while (n_slots < 2 * n)
                n_slots *= 2;
        return rehash(t, n_slots, seq);
}

void stamp_table_forget(StampTable *t, uint64_t key) {
        if (!t->slots)
                return;
        size_t mask = t->n_slots - 1, j = slot_of(t->slots, t->n_slots, key);
        if (!t->slots[j].seq)
                return;
        /* Backward-shift deletion keeps every other key reachable from its home slot. */
        t->slots[j].seq = 0;
        t->n_used--;
        for (size_t k = (j + 1) & mask; t->slots[k].seq; k = (k + 1) & mask) {
                Stamp moved = t->slots[k];
                t->slots[k].seq = 0;
                t->slots[slot_of(t->slots, t->n_slots, moved.key)] = moved;
        }
}
