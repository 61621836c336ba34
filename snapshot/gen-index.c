/* SPDX-License-Identifier: MIT */
/* The index of a snapshot generation: entries, lookup, and its file. See gen-index.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "gen-index.h"
#include "snapshot.h"
#include "stream.h"

/* "TFWGIDX" and a format version. */
static const uint8_t index_magic[8] = { 'T', 'F', 'W', 'G', 'I', 'D', 'X', '2' };
/* magic, owner, copy uid, copy gid, entries, watch instance, watch sequence */
#define HEADER_SIZE (8 + 4 + 4 + 4 + 8 + 8 + 8)
/* Each directory: entries, wd, flags, skipped symlinks, tree id */
#define DIR_FIXED (4 + 4 + 1 + 4 + GIT_OID_SIZE)
#define DIR_ALWAYS 0x01
#define DIR_HAS_TREE 0x02
/* type, flags, name length, mode, dev, ino, size, mtime, mtime ns, ctime, ctime ns */
#define ENTRY_FIXED (1 + 1 + 2 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4)
#define ENTRY_MAX (ENTRY_FIXED + SNAPSHOT_STREAM_NAME_MAX + GIT_OID_SIZE + DIR_FIXED)
#define FLAG_RACY 0x01
/* The largest index file copied (gen_index_copy): its reader bounds it again by its entries. */
#define INDEX_FILE_MAX (1U << 30)
#define NAME_CHUNK_SIZE (256U * 1024U)

struct GenNameChunk {
        GenNameChunk *next;
        size_t used;
        char data[NAME_CHUNK_SIZE];
};

int gen_index_new(uint32_t owner_uid, uint32_t copy_uid, uint32_t copy_gid, GenIndex **ret) {
        GenIndex *x = calloc(1, sizeof(*x));
        if (!x)
                return -ENOMEM;
        x->owner_uid = owner_uid;
        x->copy_uid = copy_uid;
        x->copy_gid = copy_gid;
        *ret = x;
        return 0;
}

static void dir_free(GenDir *d) {
        for (size_t i = 0; i < d->n; i++)
                if (d->v[i].dir) {
                        dir_free(d->v[i].dir);
                        free(d->v[i].dir);
                }
        free(d->v);
        free(d->slots);
        *d = (GenDir) {};
}

GenIndex *gen_index_free(GenIndex *x) {
        if (!x)
                return NULL;
        dir_free(&x->root);
        while (x->chunks) {
                GenNameChunk *n = x->chunks->next;
                free(x->chunks);
                x->chunks = n;
        }
        free(x);
        return NULL;
}

static const char *name_copy(GenIndex *x, const char *name, size_t len) {
        if (!x->chunks || x->chunks->used + len > NAME_CHUNK_SIZE) {
                GenNameChunk *c = malloc(sizeof(*c));
                if (!c)
                        return NULL;
                c->next = x->chunks;
                c->used = 0;
                x->chunks = c;
        }
        char *p = x->chunks->data + x->chunks->used;
        memcpy(p, name, len);
        x->chunks->used += len;
        return p;
}

GenEntry *gen_dir_append(GenIndex *x, GenDir *d, const char *name, size_t len) {
        if (len == 0 || len > SNAPSHOT_STREAM_NAME_MAX)
                return NULL;
        if (d->n == d->allocated) {
                size_t n = d->allocated ? 2 * d->allocated : 8;
                GenEntry *v = realloc(d->v, n * sizeof(*v));
                if (!v)
                        return NULL;
                d->v = v;
                d->allocated = n;
        }
        const char *p = name_copy(x, name, len);
        if (!p)
                return NULL;
        GenEntry *e = &d->v[d->n++];
        *e = (GenEntry) { .name = p, .len = (uint16_t) len, .tb_index = SIZE_MAX };
        x->entries++;
        return e;
}

int gen_entry_make_dir(GenEntry *e) {
        e->dir = calloc(1, sizeof(GenDir));
        if (!e->dir)
                return -ENOMEM;
        e->is_dir = true;
        return 0;
}

int gen_dir_seal(GenDir *d) {
        size_t n = 16;
        while (n < 2 * d->n)
                n *= 2;
        free(d->slots);
        d->slots = calloc(n, sizeof(*d->slots));
        if (!d->slots)
                return -ENOMEM;
        d->n_slots = n;
        for (size_t i = 0; i < d->n; i++) {
                size_t j = gen_name_hash(d->v[i].name, d->v[i].len) & (n - 1);
                while (d->slots[j])
                        j = (j + 1) & (n - 1);
                d->slots[j] = (uint32_t) (i + 1);
        }
        return 0;
}

GenEntry *gen_dir_find(const GenDir *d, const char *name, size_t len) {
        if (!d || !d->slots)
                return NULL;
        for (size_t j = gen_name_hash(name, len) & (d->n_slots - 1); d->slots[j]; j = (j + 1) & (d->n_slots - 1)) {
                GenEntry *e = &d->v[d->slots[j] - 1];
                if (e->len == len && memcmp(e->name, name, len) == 0)
                        return e;
        }
        return NULL;
}

void gen_dir_totals(const GenDir *d, GenTotals *totals) {
        totals->symlinks += d->symlinks;
        totals->entries += d->symlinks + d->n;
        for (size_t i = 0; i < d->n; i++) {
                const GenEntry *f = &d->v[i];
                if (!f->is_dir) {
                        totals->files++;
                        totals->bytes += f->id.size;
                        continue;
                }
                totals->dirs++;
                gen_dir_totals(f->dir, totals);
        }
}

void gen_dir_move(GenIndex *x, GenDir *to, GenEntry *e, GenTotals *totals) {
        GenTotals below = {};
        gen_dir_totals(e->dir, &below);
        x->entries += below.files + below.dirs;
        totals->entries += below.entries;
        totals->files += below.files;
        totals->dirs += below.dirs;
        totals->symlinks += below.symlinks;
        totals->bytes += below.bytes;
        *to = *e->dir;
        *e->dir = (GenDir) {};
        free(e->dir);
        e->dir = NULL;
}

void gen_index_take_names(GenIndex *x, GenIndex *from) {
        GenNameChunk **tail = &x->chunks;
        /* Appended after x's own: x's newest chunk stays first, where names are added. */
        while (*tail)
                tail = &(*tail)->next;
        *tail = from->chunks;
        from->chunks = NULL;
}

void gen_identity_of(const struct stat *st, GenIdentity *ret) {
        *ret = (GenIdentity) {
                .dev = (uint64_t) st->st_dev,
                .ino = (uint64_t) st->st_ino,
                .size = (uint64_t) st->st_size,
                .mtime_sec = (int64_t) st->st_mtim.tv_sec,
                .mtime_nsec = (uint32_t) st->st_mtim.tv_nsec,
                .ctime_sec = (int64_t) st->st_ctim.tv_sec,
                .ctime_nsec = (uint32_t) st->st_ctim.tv_nsec,
                .mode = (uint32_t) st->st_mode,
        };
}

bool gen_identity_equal(const GenIdentity *a, const GenIdentity *b) {
        return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
               a->mtime_sec == b->mtime_sec && a->mtime_nsec == b->mtime_nsec &&
               a->ctime_sec == b->ctime_sec && a->ctime_nsec == b->ctime_nsec && a->mode == b->mode;
}

/* ---- the file ---------------------------------------------------------------------------- */

/* The file's bytes, gathered in a buffer of OUT_CHUNK written out whenever the next piece would
 * not fit (a piece is at most ENTRY_MAX): the 9 MB of an index of 86k entries never sit in
 * memory at once. */
#define OUT_CHUNK (256U * 1024U)
_Static_assert(ENTRY_MAX <= OUT_CHUNK && HEADER_SIZE <= OUT_CHUNK, "a piece of the index fits a chunk");
typedef struct Buf {
        uint8_t *p;    /* OUT_CHUNK bytes */
        size_t len;
        int fd;        /* written out to it */
        int r;         /* the first write error */
} Buf;

/* Room for the next n bytes (n at most ENTRY_MAX), what is gathered written out first when they
 * would not fit; NULL (b->r set) when that write fails. */
static uint8_t *buf_grow(Buf *b, size_t n) {
        if (b->len + n > OUT_CHUNK) {
                int r = write_all(b->fd, b->p, b->len);
                b->len = 0;
                if (r < 0) {
                        b->r = r;
                        return NULL;
                }
        }
        uint8_t *q = b->p + b->len;
        b->len += n;
        return q;
}

static int put_dir(Buf *b, const GenDir *d) {
        uint8_t *q = buf_grow(b, DIR_FIXED);
        if (!q)
                return -ENOMEM;
        snapshot_stream_put_le(q, d->n, 4);
        snapshot_stream_put_le(q + 4, (uint32_t) MAX(d->wd, 0), 4);
        q[8] = (d->always ? DIR_ALWAYS : 0) | (d->has_tree ? DIR_HAS_TREE : 0);
        snapshot_stream_put_le(q + 9, d->symlinks, 4);
        memcpy(q + 13, d->tree, GIT_OID_SIZE);
        for (size_t i = 0; i < d->n; i++) {
                const GenEntry *e = &d->v[i];
                q = buf_grow(b, ENTRY_FIXED + e->len + (e->is_dir ? 0 : GIT_OID_SIZE));
                if (!q)
                        return -ENOMEM;
                *q++ = e->is_dir ? 'D' : 'F';
                *q++ = e->racy ? FLAG_RACY : 0;
                snapshot_stream_put_le(q, e->len, 2), q += 2;
                memcpy(q, e->name, e->len), q += e->len;
                snapshot_stream_put_le(q, e->id.mode, 4), q += 4;
                snapshot_stream_put_le(q, e->id.dev, 8), q += 8;
                snapshot_stream_put_le(q, e->id.ino, 8), q += 8;
                snapshot_stream_put_le(q, e->id.size, 8), q += 8;
                snapshot_stream_put_le(q, (uint64_t) e->id.mtime_sec, 8), q += 8;
                snapshot_stream_put_le(q, e->id.mtime_nsec, 4), q += 4;
                snapshot_stream_put_le(q, (uint64_t) e->id.ctime_sec, 8), q += 8;
                snapshot_stream_put_le(q, e->id.ctime_nsec, 4), q += 4;
                if (!e->is_dir)
                        memcpy(q, e->oid, GIT_OID_SIZE);
                else {
                        int r = put_dir(b, e->dir);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

void (*gen_index_test_saving)(void);

/* The file the index is written to: an unnamed one (O_TMPFILE) where the file system has them,
 * so that a process killed while it writes (the saver runs beside the job, index-saver.h)
 * leaves nothing in the store; else a hidden temporary name (*unnamed false). */
static int index_file_open(int dir_fd, const char *name, char *tmp, bool *unnamed) {
        int fd = openat(dir_fd, ".", O_WRONLY | O_TMPFILE | O_CLOEXEC, 0600);
        *unnamed = fd >= 0;
        return fd >= 0 ? fd : tmp_file_open_at(dir_fd, name, tmp);
}

/* An unnamed file, whole, given its temporary name for the rename: linked by descriptor (root
 * can), else through /proc. */
static int index_file_name(int dir_fd, int fd, const char *name, char *tmp) {
        int r = tmp_file_name(name, tmp);
        if (r < 0)
                return r;
        if (linkat(fd, "", dir_fd, tmp, AT_EMPTY_PATH) == 0)
                return 0;
        char proc[64];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        return linkat(AT_FDCWD, proc, dir_fd, tmp, AT_SYMLINK_FOLLOW) == 0 ? 0 : -errno;
}

int gen_index_save(const GenIndex *x, int dir_fd, const char *name, TfwError *e) {
        char tmp[NAME_MAX + 1];
        bool unnamed;
        _cleanup_close_ int fd = index_file_open(dir_fd, name, tmp, &unnamed);
        if (fd < 0)
                return tfw_error(e, -fd, "generation_store", "cannot write the generation's index '%s': %s", name,
                                 strerror(-fd));
        Buf b = { .p = malloc(OUT_CHUNK), .fd = fd };
        uint8_t *q = b.p ? buf_grow(&b, HEADER_SIZE) : NULL;
        int r = q ? 0 : -ENOMEM;

        if (q) {
                memcpy(q, index_magic, 8);
                snapshot_stream_put_le(q + 8, x->owner_uid, 4);
                snapshot_stream_put_le(q + 12, x->copy_uid, 4);
                snapshot_stream_put_le(q + 16, x->copy_gid, 4);
                snapshot_stream_put_le(q + 20, x->entries, 8);
                snapshot_stream_put_le(q + 28, x->watch_instance, 8);
                snapshot_stream_put_le(q + 36, x->watch_seq, 8);
                r = put_dir(&b, &x->root);
        }
        if (r >= 0)
                r = write_all(fd, b.p, b.len);
        if (gen_index_test_saving)
                gen_index_test_saving();
        if (b.r < 0)
                r = b.r;
        /* An unnamed file whole gets its temporary name; one that failed is let go as it is. */
        if (r >= 0 && unnamed)
                r = index_file_name(dir_fd, fd, name, tmp);
        if (r >= 0 || !unnamed)
                r = tmp_file_commit_at(dir_fd, tmp, name, r);
        free(b.p);
        return r < 0 ? tfw_error(e, -r, "generation_store", "cannot write the generation's index '%s': %s",
                                 name, strerror(-r)) : 0;
}

int gen_index_copy(int from_dir, int to_dir, const char *name) {
        _cleanup_close_ int fd = openat(from_dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        if (fd < 0)
                return -errno;
        int r = read_full_fd_bounded(fd, INDEX_FILE_MAX, &buf, &len);
        return r < 0 ? r : write_file_replace_at(to_dir, name, buf, len, 0600, 0, 0);
}

typedef struct Reader {
        const uint8_t *p, *end;
        GenIndex *x;
        uint64_t left; /* entries still allowed */
} Reader;

static const uint8_t *take(Reader *rd, size_t n) {
        if ((size_t) (rd->end - rd->p) < n)
                return NULL;
        const uint8_t *q = rd->p;
        rd->p += n;
        return q;
}

static int get_dir(Reader *rd, GenDir *d, unsigned depth) {
        const uint8_t *q = take(rd, DIR_FIXED);
        if (!q || depth > SNAPSHOT_DEPTH_MAX)
                return -EBADMSG;
        uint64_t n = snapshot_stream_get_le(q, 4);
        uint64_t wd = snapshot_stream_get_le(q + 4, 4);
        if (n > rd->left || wd > INT32_MAX || (q[8] & ~(DIR_ALWAYS | DIR_HAS_TREE)))
                return -EBADMSG;
        d->wd = (int32_t) wd;
        d->always = q[8] & DIR_ALWAYS;
        d->has_tree = q[8] & DIR_HAS_TREE;
        d->symlinks = (uint32_t) snapshot_stream_get_le(q + 9, 4);
        memcpy(d->tree, q + 13, GIT_OID_SIZE);
        for (uint64_t i = 0; i < n; i++) {
                const uint8_t *h = take(rd, 4);
                if (!h || (h[0] != 'D' && h[0] != 'F') || (h[1] & ~FLAG_RACY))
                        return -EBADMSG;
                size_t len = (size_t) snapshot_stream_get_le(h + 2, 2);
                const uint8_t *nm = take(rd, len);
                if (!nm || !git_entry_name_is_valid((const char *) nm, len))
                        return -EBADMSG;
                const uint8_t *f = take(rd, ENTRY_FIXED - 4);
                if (!f || !rd->left)
                        return -EBADMSG;
                rd->left--;
                GenEntry *e = gen_dir_append(rd->x, d, (const char *) nm, len);
                if (!e)
                        return -ENOMEM;
                e->racy = h[1] & FLAG_RACY;
                e->id.mode = (uint32_t) snapshot_stream_get_le(f, 4);
                e->id.dev = snapshot_stream_get_le(f + 4, 8);
                e->id.ino = snapshot_stream_get_le(f + 12, 8);
                e->id.size = snapshot_stream_get_le(f + 20, 8);
                e->id.mtime_sec = (int64_t) snapshot_stream_get_le(f + 28, 8);
                e->id.mtime_nsec = (uint32_t) snapshot_stream_get_le(f + 36, 4);
                e->id.ctime_sec = (int64_t) snapshot_stream_get_le(f + 40, 8);
                e->id.ctime_nsec = (uint32_t) snapshot_stream_get_le(f + 48, 4);
                if (h[0] == 'F') {
                        const uint8_t *o = take(rd, GIT_OID_SIZE);
                        if (!o || !S_ISREG(e->id.mode))
                                return -EBADMSG;
                        memcpy(e->oid, o, GIT_OID_SIZE);
                        continue;
                }
                if (!S_ISDIR(e->id.mode))
                        return -EBADMSG;
                int r = gen_entry_make_dir(e);
                if (r < 0)
                        return r;
                /* d->v may move while this directory fills its own: e is not used after. */
                GenDir *child = e->dir;
                r = get_dir(rd, child, depth + 1);
                if (r < 0)
                        return r;
        }
        return gen_dir_seal(d);
}

int gen_index_load(int dir_fd, const char *name, uint64_t max_entries, GenIndex **ret, TfwError *e) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_free_ char *data = NULL;
        _cleanup_(gen_index_freep) GenIndex *x = NULL;
        size_t size = 0;
        int r;

        if (fd < 0)
                return errno == ENOENT ? -ENOENT
                                       : tfw_error(e, errno, "generation_store", "cannot open the generation's index '%s': %m", name);
        size_t bound = HEADER_SIZE + DIR_FIXED + (size_t) MIN(max_entries, (uint64_t) 1 << 24) * (ENTRY_MAX + 4);
        r = read_full_fd_bounded(fd, bound, &data, &size);
        if (r < 0)
                return tfw_error(e, -r, "generation_store", "cannot read the generation's index '%s': %s", name, strerror(-r));
        const uint8_t *p = (const uint8_t *) data;
        if (size < HEADER_SIZE || memcmp(p, index_magic, 8) != 0)
                return tfw_error(e, EBADMSG, "generation_store", "the generation's index '%s' is not one", name);
        r = gen_index_new((uint32_t) snapshot_stream_get_le(p + 8, 4), (uint32_t) snapshot_stream_get_le(p + 12, 4),
                          (uint32_t) snapshot_stream_get_le(p + 16, 4), &x);
        if (r < 0)
                return tfw_error(e, -r, "generation_store", "out of memory");
        uint64_t total = snapshot_stream_get_le(p + 20, 8);
        x->watch_instance = snapshot_stream_get_le(p + 28, 8);
        x->watch_seq = snapshot_stream_get_le(p + 36, 8);
        Reader rd = { .p = p + HEADER_SIZE, .end = p + size, .x = x, .left = MIN(total, max_entries) };
        r = get_dir(&rd, &x->root, 0);
        if (r >= 0 && (rd.p != rd.end || x->entries != total))
                r = -EBADMSG;
        if (r < 0)
                return tfw_error(e, -r, "generation_store", "the generation's index '%s' is damaged: %s", name, strerror(-r));
        *ret = TAKE_PTR(x);
        return 0;
}
