/* SPDX-License-Identifier: MIT */
/* The workspace snapshot: a descriptor-relative walk of a tree the agent controls, copied into
 * a private directory and hashed as git trees in the same pass. See snapshot.h for the
 * security contract and docs/snapshot.md for the reasoning. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "common/path-util.h"
#include "common/resolve.h"
#include "blob-hasher.h"
#include "copy-pool.h"
#include "dirty-set.h"
#include "gen-index.h"
#include "gen-verify.h"
#include "snapshot.h"
#include "stream.h"

/* One getdents64 buffer per directory level, reused across siblings. */
#define DENTS_BUF_SIZE (32U * 1024U)
/* The copy buffer (the hasher's chunks are as large): almost every file is one read and one
 * write. */
#define COPY_BUF_SIZE BLOB_CHUNK_SIZE
/* Longest relative path the walk can build: every level at NAME_MAX, plus separators. */
#define WALK_PATH_MAX ((SNAPSHOT_DEPTH_MAX + 1) * (NAME_MAX + 1) + 1)

/* The stream's write buffer: many small files per write(2). */
#define OUT_BUF_SIZE (64U * 1024U)

/* How often a name whose entry keeps being renamed away is looked up again. */
#define OPEN_RETRIES 16

#define CHILD_DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
/* O_NONBLOCK: a FIFO swapped in after readdir opens at once instead of waiting for a writer.
 * O_NOCTTY: never acquire a controlling terminal. */
#define CHILD_FILE_FLAGS (O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC)

typedef struct NameSlot {
        uint64_t hash;
        size_t offset;
        uint16_t len; /* 0: free */
} NameSlot;

typedef struct NameSet {
        NameSlot *slots;
        size_t n_slots, n_used;
        char *arena;
        size_t arena_len, arena_size;
} NameSet;

/* The tree object of one directory of the copy. Trees are hashed only after the whole walk
 * (children before parents), so the walk never waits for the hashing thread in between. */
typedef struct Tree {
        GitTreeBuilder b;
        struct Tree *parent; /* NULL for the root */
        size_t parent_index; /* our entry in parent->b */
        struct Tree *next;   /* the completed trees, in the order they completed */
        /* Generation mode: this directory in the previous generation (NULL: it had none) and
         * in the one being made. */
        GenDir *gold, *gnew;
        bool reuse_ok;       /* its filesystem stamps every change (gen_fs_vouches) */
        dev_t dev;
        bool known;          /* the watch vouches that gold's entries are its own: they are
                              * taken from the index, not read (walk_known) */
} Tree;

static Tree *tree_free(Tree *t) {
        if (t) {
                git_tree_builder_done(&t->b);
                free(t);
        }
        return NULL;
}
static void tree_freep(Tree **t) {
        tree_free(*t);
}
static void tree_done(Tree *t) {
        git_tree_builder_done(&t->b);
}

typedef struct Walk {
        const SnapshotLimits *limits;
        TfwError *e;
        bool use_openat2;
        SnapshotCopyMethod copy;
        uid_t owner_uid;    /* owner of the workspace root */
        mode_t umask;       /* the process umask, or (mode_t) -1 when unknown */
        bool group_inherited, group_checked;
        dev_t dst_dev;      /* the copy's root, which must not be found inside the workspace */
        ino_t dst_ino;
        CopyBudget budget;  /* file content bytes: taken by the walk, and by its copiers */
        uint64_t entries, files, dirs, skipped_symlinks;
        uint64_t trashed, trash_bytes; /* copies moved to limits->trash_fd, and their sizes */
        Sha256 *h;          /* for trees and for re-reading a copy, on this thread */
        BlobHasher *hasher; /* blob ids of what is copied, on a second thread */
        CopyPool *pool;     /* a generation's copiers (copy-pool.h), once it has copied enough */
        bool pool_failed;   /* none could be started: the walk copies on its own */
        Tree *done, **done_tail; /* non-empty directories whose walk is complete */
        char *path;         /* relative path of the entry being handled, for messages */
        size_t path_len;
        void *dents[SNAPSHOT_DEPTH_MAX + 1];
        /* Stream mode (snapshot_stream()): records go to out_fd instead of a copy on disk. */
        int out_fd;         /* -EBADF: copy mode */
        uint8_t *obuf;
        size_t olen;
        NameSet names[SNAPSHOT_DEPTH_MAX + 1]; /* the names sent in each open directory */
        /* Generation mode (snapshot_update()): the copy is the previous generation, changed
         * into the new one. */
        GenIndex *gen;      /* the new generation's index, being made */
        bool gen_trust;     /* the previous index may vouch for unchanged files */
        int64_t racy_from;  /* ctime (ns) from which an entry is racy */
        uint64_t files_reused, bytes_reused;
        uint64_t last_copied; /* the bytes copy_file() copied last */
        bool lease_unusable;  /* open_for_writing() could not ask */
        DirtyView *watch;     /* the workspace's watch, or NULL */
        bool watch_trusted;   /* the previous index's clean marks vouch (dirty_view_mark) */
        uint64_t entries_unread, dirs_unwatched;
        uint64_t files_checked;   /* files of directories the watch vouched for, stat'ed */
        uint64_t dirs_over_budget; /* directories past the watch's budget */
        /* The file system's mark (fan-mark.h), or NULL; it vouches for the previous walk
         * (fan_trusted), from whose start (fan_since) its stamps count. */
        const FanView *fan;
        bool fan_trusted;
        uint64_t fan_since;
        uint64_t files_trusted, files_reported, files_probed;
} Walk;

/* The names already sent in one directory: readdir of a directory that changes while it is
 * read may return a name twice, and the stream must not (the copy mode's O_EXCL keeps the
 * first one; so does this). Open addressing over gen_name_hash(), names compared in full. */

static void name_set_reset(NameSet *s) {
        if (s->slots && s->n_used)
                memset(s->slots, 0, s->n_slots * sizeof(*s->slots));
        s->n_used = 0;
        s->arena_len = 0;
}

static void name_set_free(NameSet *s) {
        free(s->slots);
        free(s->arena);
        *s = (NameSet) {};
}

/* 1: added; 0: already there; -ENOMEM. */
static int name_set_add(NameSet *s, const char *name, size_t len) {
        if (2 * (s->n_used + 1) > s->n_slots) {
                size_t n = s->n_slots ? 2 * s->n_slots : 64;
                NameSlot *v = calloc(n, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                for (size_t i = 0; i < s->n_slots; i++) {
                        if (!s->slots[i].len)
                                continue;
                        size_t j = s->slots[i].hash & (n - 1);
                        while (v[j].len)
                                j = (j + 1) & (n - 1);
                        v[j] = s->slots[i];
                }
                free(s->slots);
                s->slots = v;
                s->n_slots = n;
        }
        uint64_t h = gen_name_hash(name, len);
        size_t j = h & (s->n_slots - 1);
        for (; s->slots[j].len; j = (j + 1) & (s->n_slots - 1))
                if (s->slots[j].hash == h && s->slots[j].len == len &&
                    memcmp(s->arena + s->slots[j].offset, name, len) == 0)
                        return 0;
        if (s->arena_len + len > s->arena_size) {
                size_t n = MAX(2 * s->arena_size, s->arena_len + len + 4096);
                char *a = realloc(s->arena, n);
                if (!a)
                        return -ENOMEM;
                s->arena = a;
                s->arena_size = n;
        }
        memcpy(s->arena + s->arena_len, name, len);
        s->slots[j] = (NameSlot) { .hash = h, .offset = s->arena_len, .len = (uint16_t) len };
        s->arena_len += len;
        s->n_used++;
        return 1;
}

static void walk_done(Walk *w) {
        /* First the copiers and the hasher: they may still point into the trees. */
        copy_pool_free(w->pool);
        blob_hasher_free(w->hasher);
        while (w->done) {
                Tree *next = w->done->next;
                tree_free(w->done);
                w->done = next;
        }
        sha256_free(w->h);
        free(w->path);
        for (size_t i = 0; i < ELEMENTSOF(w->dents); i++)
                free(w->dents[i]);
        for (size_t i = 0; i < ELEMENTSOF(w->names); i++)
                name_set_free(&w->names[i]);
        free(w->obuf);
}


bool snapshot_openat2_usable(void) {
        return openat2_usable();
}


#define walk_fail(w, err, code, fmt, ...)                                                        \
        ({                                                                                       \
                char _p[512];                                                                    \
                tfw_error((w)->e, (err), (code), fmt, printable_name((w)->path, _p, sizeof(_p)),      \
                          ##__VA_ARGS__);                                                        \
        })

static int too_large(Walk *w, const char *what) {
        return walk_fail(w, E2BIG, "snapshot_too_large", "workspace is too large at '%s': %s",
                         what);
}

/* n bytes of file content taken from the budget, or the walk fails. */
static int take_bytes(Walk *w, uint64_t n) {
        return copy_budget_take(&w->budget, n) ? 0 : too_large(w, "more file content than max_bytes");
}

static void path_push(Walk *w, const char *name, size_t len, size_t *saved) {
        *saved = w->path_len;
        if (w->path_len > 0)
                w->path[w->path_len++] = '/';
        memcpy(w->path + w->path_len, name, len);
        w->path_len += len;
        w->path[w->path_len] = 0;
}

static void path_pop(Walk *w, size_t saved) {
        w->path_len = saved;
        w->path[saved] = 0;
}

/* Owner rw plus the source owner's x; the source owner's r and x copied onto the group. */
static mode_t copy_mode(mode_t src) {
        return 0600 | (src & 0100) | ((src & 0500) >> 3);
}

static int read_umask(mode_t *ret) {
        _cleanup_close_ int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
        _cleanup_free_ char *s = NULL;
        unsigned m;

        if (fd < 0)
                return -errno;
        int r = read_full_fd_bounded(fd, 64 * 1024, &s, NULL);
        if (r < 0)
                return r;
        const char *p = strstr(s, "\nUmask:");
        if (!p || sscanf(p + 7, "%o", &m) != 1 || m > 0777)
                return -ENODATA;
        *ret = (mode_t) m;
        return 0;
}

/* The group of a file or directory this walk created (fd is ours, not the agent's).
 *
 * The group normally comes for free: every directory of the copy carries the setgid bit while
 * it is being filled, so what is created in it inherits its group, and one fchown per entry is
 * saved. The first entry created is checked; on a filesystem that does not honour the bit,
 * every entry gets an explicit fchown instead. Directories lose the setgid bit when they are
 * finished (finish_dir()). */
static int set_group(Walk *w, int fd) {
        gid_t g = w->limits->group;

        /* A generation's entries belong to the job's uid and group (the sandbox's overlay
         * keeps the lower layer's owners: the job must own /work to write in it). */
        if (w->gen)
                return fchown(fd, w->gen->copy_uid, w->gen->copy_gid) < 0 ? -errno : 0;
        if (g == (gid_t) -1)
                return 0;
        if (!w->group_checked) {
                struct stat st;
                if (fstat(fd, &st) < 0)
                        return -errno;
                w->group_checked = true;
                w->group_inherited = st.st_gid == g;
        }
        if (!w->group_inherited && fchown(fd, (uid_t) -1, g) < 0)
                return -errno;
        return 0;
}

/* The mode of a file this walk created with `mode`: only the umask can have removed bits. */
static int fix_file_mode(Walk *w, int fd, mode_t mode) {
        if ((w->umask == (mode_t) -1 || (mode & w->umask) != 0) && fchmod(fd, mode) < 0)
                return -errno;
        return 0;
}

/* A directory of the copy is complete: its final mode, which also drops the setgid bit. */
static int finish_dir(int fd, mode_t mode) {
        return fchmod(fd, mode) < 0 ? -errno : 0;
}

static int open_child(Walk *w, int dfd, const char *name, int flags) {
        return openat_child(dfd, name, flags, w->use_openat2);
}

/* Open the workspace root. Security contract: only absolute normalised paths; no symlink in
 * any component (the last included); the result is checked to be a directory. */
static int open_root(Walk *w, const char *path) {
        return open_dir_path_nofollow(path, w->use_openat2);
}

static bool is_special(mode_t m) {
        return S_ISFIFO(m) || S_ISSOCK(m) || S_ISCHR(m) || S_ISBLK(m);
}

static const char *special_kind(mode_t m) {
        return S_ISFIFO(m) ? "a FIFO" :
               S_ISSOCK(m) ? "a socket" :
               S_ISCHR(m)  ? "a character device" :
               S_ISBLK(m)  ? "a block device" : "not a regular file or directory";
}

static mode_t dtype_to_mode(unsigned char t) {
        switch (t) {
        case DT_DIR: return S_IFDIR;
        case DT_REG: return S_IFREG;
        case DT_LNK: return S_IFLNK;
        case DT_FIFO: return S_IFIFO;
        case DT_SOCK: return S_IFSOCK;
        case DT_CHR: return S_IFCHR;
        case DT_BLK: return S_IFBLK;
        default: return 0;
        }
}

static int special_file(Walk *w, mode_t m) {
        return walk_fail(w, ENOTSUP, "snapshot_special_file", "workspace entry '%s' is %s",
                         special_kind(m));
}

static int io_error(Walk *w, int r, const char *what) {
        return walk_fail(w, r, "snapshot_io", "workspace entry '%s': %s: %s", what, strerror(-r));
}

/* ---- stream mode: records to out_fd (stream.h) ----------------------------------------- */

static int out_flush(Walk *w) {
        if (w->olen == 0)
                return 0;
        int r = write_all(w->out_fd, w->obuf, w->olen);
        w->olen = 0;
        return r;
}

static int out_put(Walk *w, const void *p, size_t len) {
        if (w->olen + len > OUT_BUF_SIZE) {
                int r = out_flush(w);
                if (r < 0)
                        return r;
                if (len > OUT_BUF_SIZE / 2)
                        return write_all(w->out_fd, p, len);
        }
        memcpy(w->obuf + w->olen, p, len);
        w->olen += len;
        return 0;
}

/* The capsule stopped reading (it ended, or could not write /work): not the workspace's fault. */
static int out_error(Walk *w, int r) {
        return walk_fail(w, r, "snapshot_stream", "cannot send '%s' to the capsule: %s", strerror(-r));
}

/* A 'D' or 'F' record's header (size only for 'F'). */
static int out_entry(Walk *w, uint8_t tag, const char *name, size_t len, mode_t src_mode, uint64_t size) {
        uint8_t h[SNAPSHOT_STREAM_HEADER_MAX];
        size_t n = 0;

        h[n++] = tag;
        snapshot_stream_put_le(h + n, len, 2);
        n += 2;
        memcpy(h + n, name, len);
        n += len;
        h[n++] = (src_mode & S_IXUSR) ? SNAPSHOT_STREAM_EXEC : 0;
        if (tag == SNAPSHOT_STREAM_FILE) {
                snapshot_stream_put_le(h + n, size, 8);
                n += 8;
        }
        int r = out_put(w, h, n);
        return r < 0 ? out_error(w, r) : 0;
}

static int out_tag(Walk *w, uint8_t tag) {
        int r = out_put(w, &tag, 1);
        return r < 0 ? out_error(w, r) : 0;
}

/* Send exactly `expected` bytes of src (the size fstat gave, already announced in the record
 * and in the blob header): a file that grows while it is read is cut there, one that shrinks
 * is padded with zeros. Torn either way, never anything but the file's bytes and zeros, and
 * the blob id names exactly what was sent. Each chunk is read into a hasher buffer, sent from
 * it, then submitted for hashing. */
static int stream_file(Walk *w, int src, uint64_t expected, GitTreeBuilder *tb, size_t index) {
        uint64_t total = 0;
        bool cleared_nonblock = false, first = true, eof = false;
        int r;

        for (;;) {
                size_t cap = (size_t) MIN(expected - total, (uint64_t) COPY_BUF_SIZE), k = 0;
                uint8_t *buf = blob_hasher_buffer(w->hasher);
                if (!buf)
                        return io_error(w, -ENOMEM, "allocate");
                while (k < cap && !eof) {
                        ssize_t n = read(src, buf + k, cap - k);
                        if (n < 0) {
                                if (errno == EINTR)
                                        continue;
                                if (errno == EAGAIN && !cleared_nonblock) {
                                        int fl = fcntl(src, F_GETFL);
                                        if (fl < 0 || fcntl(src, F_SETFL, fl & ~O_NONBLOCK) < 0)
                                                return io_error(w, -errno, "clear O_NONBLOCK");
                                        cleared_nonblock = true;
                                        continue;
                                }
                                return io_error(w, -errno, "read");
                        }
                        if (n == 0)
                                eof = true;
                        k += (size_t) n;
                }
                if (k < cap)
                        memset(buf + k, 0, cap - k);
                total += cap;
                bool last = total == expected;
                r = out_put(w, buf, cap);
                if (r < 0)
                        return out_error(w, r);
                r = blob_hasher_submit(w->hasher, cap, first, expected, last, tb, index);
                if (r < 0)
                        return io_error(w, r, "hash");
                first = false;
                if (last)
                        return 0;
        }
}

/* Read from src until end of file; each chunk is read into a hasher buffer, written to the
 * copy from it, and submitted for hashing, the header having been announced for `expected`
 * bytes. The blob id goes to tb->entries[index] if the file had the expected size; otherwise
 * it is dropped and the caller hashes the copy. Returns the bytes copied in *ret_total. */
static int copy_read_write(Walk *w, int src, int dst, uint64_t expected, uint64_t budget,
                           GitTreeBuilder *tb, size_t index, uint64_t *ret_total) {
        uint64_t total = 0;
        bool cleared_nonblock = false, first = true;
        int r;

        for (;;) {
                uint64_t left = budget - total;
                size_t cap = left >= COPY_BUF_SIZE ? COPY_BUF_SIZE : (size_t) left + 1;
                uint8_t *buf = blob_hasher_buffer(w->hasher);
                if (!buf)
                        return io_error(w, -ENOMEM, "allocate");
                ssize_t k = read(src, buf, cap);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        /* O_NONBLOCK was for FIFOs; a regular file on an odd filesystem may
                         * honour it. Clear it once and retry. */
                        if (errno == EAGAIN && !cleared_nonblock) {
                                int fl = fcntl(src, F_GETFL);
                                if (fl < 0 || fcntl(src, F_SETFL, fl & ~O_NONBLOCK) < 0)
                                        return io_error(w, -errno, "clear O_NONBLOCK");
                                cleared_nonblock = true;
                                continue;
                        }
                        return io_error(w, -errno, "read");
                }
                if (k == 0) {
                        r = blob_hasher_submit(w->hasher, 0, first, expected, true,
                                               total == expected ? tb : NULL, index);
                        if (r < 0)
                                return io_error(w, r, "hash");
                        break;
                }
                total += (uint64_t) k;
                if (total > budget)
                        return too_large(w, "more file content than max_bytes");
                r = write_all(dst, buf, (size_t) k);
                if (r < 0)
                        return io_error(w, r, "write copy");
                /* A short read that ends exactly at the size fstat reported is the end of the
                 * file; anything else reads on until read() says so. */
                bool last = (size_t) k < cap && total == expected;
                r = blob_hasher_submit(w->hasher, (size_t) k, first, expected, last, tb, index);
                if (r < 0)
                        return io_error(w, r, "hash");
                first = false;
                if (last)
                        break;
        }
        *ret_total = total;
        return 0;
}

/* copy_file_range: the kernel copies (or shares extents, where the filesystem can), and the
 * hasher reads the copy afterwards. Returns 1 when this filesystem pair cannot do it and
 * nothing was copied, so the caller falls back to read/write. */
static int copy_range(Walk *w, int src, int dst, uint64_t expected, uint64_t budget,
                      uint64_t *ret_total) {
        uint64_t total = 0;

        for (;;) {
                uint64_t left = budget - total;
                size_t cap = left >= (1U << 30) ? (1U << 30) : (size_t) left + 1;
                ssize_t k = copy_file_range(src, NULL, dst, NULL, cap, 0);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (total == 0 && (errno == EXDEV || errno == EOPNOTSUPP || errno == ENOSYS ||
                                           errno == EINVAL || errno == EAGAIN))
                                return 1;
                        return io_error(w, -errno, "copy_file_range");
                }
                if (k == 0)
                        break;
                total += (uint64_t) k;
                if (total > budget)
                        return too_large(w, "more file content than max_bytes");
                if ((size_t) k < cap && total == expected)
                        break;
        }
        *ret_total = total;
        return 0;
}

/* Copy the regular file open at src (already fstat'ed into st) to dst_dir/name and add it to
 * tb; its blob id arrives in the entry by the next blob_hasher_sync(). Returns 0, 1 when name
 * already exists in the copy (readdir returned it twice while the directory was changing: the
 * first one stays), or a negative errno with w->e set. */
static int copy_file(Walk *w, int src, const struct stat *st, int dst_dir, const char *name,
                     size_t name_len, GitTreeBuilder *tb) {
        static const uint8_t pending[GIT_OID_SIZE] = {};
        mode_t mode = copy_mode(st->st_mode);
        uint64_t used = atomic_load(&w->budget.used), expected = (uint64_t) st->st_size, total = 0;
        uint64_t budget = used > w->limits->max_bytes ? 0 : w->limits->max_bytes - used;
        int r;

        if (st->st_size < 0)
                return io_error(w, -EIO, "negative size");
        /* The file may claim any size; it is never trusted to bound a read, only to decide
         * when a short read is the end. Refuse early what can never fit. */
        if (expected > budget)
                return too_large(w, "more file content than max_bytes");

        if (w->out_fd >= 0) {
                size_t index = git_tree_builder_size(tb);
                r = git_tree_builder_add(tb, name, name_len,
                                         (st->st_mode & S_IXUSR) ? GIT_MODE_EXECUTABLE : GIT_MODE_FILE, pending);
                if (r < 0)
                        return io_error(w, r, "record tree entry");
                r = out_entry(w, SNAPSHOT_STREAM_FILE, name, name_len, st->st_mode, expected);
                if (r >= 0)
                        r = stream_file(w, src, expected, tb, index);
                if (r < 0)
                        return r;
                atomic_fetch_add(&w->budget.used, expected);
                w->files++;
                return 0;
        }

        _cleanup_close_ int dst = openat(dst_dir, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                                         mode);
        if (dst < 0)
                /* In a generation the names were cleared first (gen_clear_slot): an entry already
                 * there means the tree is not what its index says, which fails the walk. */
                return errno == EEXIST && !w->gen ? 1 : io_error(w, -errno, "create copy");
        r = set_group(w, dst);
        if (r >= 0)
                r = fix_file_mode(w, dst, mode);
        if (r < 0)
                return io_error(w, r, "set owner and mode");

        size_t index = git_tree_builder_size(tb);
        r = git_tree_builder_add(tb, name, name_len,
                                 (st->st_mode & S_IXUSR) ? GIT_MODE_EXECUTABLE : GIT_MODE_FILE, pending);
        if (r < 0)
                return io_error(w, r, "record tree entry");

        /* The workspace's times go with the copy: make, ninja and cargo compare them with what a
         * build cache holds (docs/cache.md). Set once the data is complete (a write after would
         * stamp it again). */
        struct timespec times[2] = { st->st_atim, st->st_mtim };
        if (w->gen && copy_pool_test_before_copy)
                copy_pool_test_before_copy(w->path);
        if (w->copy == SNAPSHOT_COPY_FILE_RANGE) {
                r = copy_range(w, src, dst, expected, budget, &total);
                if (r < 0)
                        return r;
                if (r == 0 && futimens(dst, times) < 0)
                        return io_error(w, -errno, "set the copy's times");
                if (r == 0) {
                        /* The kernel copied; the hasher reads the copy, which only we can
                         * write, so its id names exactly what was copied. */
                        r = blob_hasher_submit_fd(w->hasher, TAKE_FD(dst), total, tb, index);
                        if (r < 0)
                                return io_error(w, r, "hash");
                } else
                        w->copy = SNAPSHOT_COPY_READ_WRITE; /* not here: stop trying */
        }
        if (w->copy == SNAPSHOT_COPY_READ_WRITE) {
                r = copy_read_write(w, src, dst, expected, budget, tb, index, &total);
                if (r < 0)
                        return r;
                if (futimens(dst, times) < 0)
                        return io_error(w, -errno, "set the copy's times");
                /* The file changed size while it was read: the header announced the wrong
                 * length and the hasher dropped that id. Hash the copy instead. */
                if (total != expected) {
                        r = blob_hasher_submit_fd(w->hasher, TAKE_FD(dst), total, tb, index);
                        if (r < 0)
                                return io_error(w, r, "hash");
                }
        }
        atomic_fetch_add(&w->budget.used, total);
        w->files++;
        w->last_copied = total;
        return 0;
}

/* May this regular file be read on the agent's behalf? A hard link can make a file owned by
 * someone else appear in the workspace (fs.protected_hardlinks=0, or a link made by another
 * user); copying it would hand its bytes to the capsule. */
static bool hardlink_allowed(const Walk *w, const struct stat *st) {
        if (st->st_nlink <= 1)
                return true;
        if (w->owner_uid != 0 && st->st_uid == w->owner_uid)
                return true;
        return (st->st_mode & S_IROTH) != 0;
}

/* ---- generation mode (snapshot_update()) ----------------------------------------------- */

static bool gen_racy(const Walk *w, const struct stat *st) {
        return (int64_t) st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec >= w->racy_from;
}

/* On the marked file system (fan-mark.h), may a file kept by its identity be kept, for this
 * walk to prove it for the next? When the mark vouches for the previous walk and reported
 * nothing of it, yes; otherwise only if nobody has it open for writing now (fan_probe), and it
 * was not reported closed after writing: read it then. */
static bool gen_mark_proves(Walk *w, int src, const char *name, const struct stat *st) {
        if (!w->fan || (uint64_t) st->st_dev != w->fan->dev)
                return true;
        const Stamp *s = fan_view_after(w->fan, (uint64_t) st->st_ino, w->fan_since);
        if (w->fan_trusted && !s)
                return true;
        if (s && s->closed_seq > w->fan_since)
                return false;
        w->files_probed++;
        return fan_probe(src, name, st) == 0;
}

/* Is name the file the previous generation read, unchanged: a regular file whose identity
 * equals the recorded one and that was not racy? Then its copy and blob id stay, nothing of it
 * is read: 1 (also when the name is gone, or a second readdir answer for a name already
 * handled). 0: the caller reads it as any walk does. */
static int gen_try_reuse(Walk *w, int src, unsigned depth, const char *name, size_t len, mode_t kind, Tree *t) {
        GenEntry *old = w->gen_trust ? gen_dir_find(t->gold, name, len) : NULL;
        struct stat st;
        GenIdentity id;
        int r;

        if (!old || old->is_dir || old->racy || !S_ISREG(kind) || !t->reuse_ok)
                return 0;
        if (fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 1 : io_error(w, -errno, "stat");
        gen_identity_of(&st, &id);
        if (!S_ISREG(st.st_mode) || st.st_dev != t->dev || !gen_identity_equal(&id, &old->id) ||
            !hardlink_allowed(w, &st) || !gen_mark_proves(w, src, name, &st))
                return 0;
        r = name_set_add(&w->names[depth], name, len);
        if (r <= 0)
                return r < 0 ? io_error(w, r, "allocate") : 1;
        r = take_bytes(w, id.size);
        if (r < 0)
                return r;
        r = git_tree_builder_add(&t->b, name, len, (st.st_mode & S_IXUSR) ? GIT_MODE_EXECUTABLE : GIT_MODE_FILE,
                                 old->oid);
        if (r < 0)
                return io_error(w, r, "record tree entry");
        GenEntry *ne = gen_dir_append(w->gen, t->gnew, name, len);
        if (!ne)
                return io_error(w, -ENOMEM, "allocate");
        ne->id = id;
        memcpy(ne->oid, old->oid, GIT_OID_SIZE);
        old->seen = true;
        w->files++;
        w->files_reused++;
        w->bytes_reused += id.size;
        return 1;
}

/* Where does the entry being handled (w->path) stand to the cache's paths: 2 it is one, 1 it
 * is a parent of one, 0 neither. */
static int cache_path_match(const Walk *w) {
        for (char *const *c = w->limits->cache_paths; c && *c; c++) {
                size_t n = strlen(*c);
                if (n == w->path_len && memcmp(*c, w->path, n) == 0)
                        return 2;
                if (n > w->path_len && (*c)[w->path_len] == '/' && memcmp(*c, w->path, w->path_len) == 0)
                        return 1;
        }
        return 0;
}

uint64_t snapshot_test_trash_max_bytes = SNAPSHOT_TRASH_MAX_BYTES;

/* The previous generation's copy of a file, about to be written again, moved out of the tree
 * into the trash (SnapshotLimits.trash) under a name of its own: true when it was. Anything
 * else (no trash, past its bytes, a rename that fails) leaves it for rm_rf_at. Never a
 * directory: its entries would be the trash's to count. */
static bool gen_trash(Walk *w, int dst, const char *name, uint64_t size) {
        char to[32];
        if (!w->limits->trash || w->trash_bytes + size > snapshot_test_trash_max_bytes)
                return false;
        snprintf(to, sizeof(to), "%" PRIx64, w->trashed);
        if (renameat2(dst, name, w->limits->trash_fd, to, RENAME_NOREPLACE) < 0)
                return false;
        w->trashed++;
        w->trash_bytes += size;
        return true;
}

/* The previous generation's entry for a name about to be written again goes first, unless it
 * is a directory that stays one (its entries are then compared one by one). Returns 1 when
 * that directory is kept. A name the index does not know is new, except where the worker made
 * a mount point for the cache (snapshot.h): that goes. */
static int gen_clear_slot(Walk *w, int dst, Tree *t, const char *name, size_t len, bool want_dir) {
        GenEntry *old = gen_dir_find(t->gold, name, len);
        if (!old && w->limits->cache_paths && cache_path_match(w) > 0) {
                int r = rm_rf_at(dst, name);
                return r < 0 ? io_error(w, r, "remove a mount point of the cache") : 0;
        }
        if (!old)
                return 0;
        old->seen = true;
        if (old->is_dir && want_dir)
                return 1;
        if (!old->is_dir && gen_trash(w, dst, name, old->id.size))
                return 0;
        int r = rm_rf_at(dst, name);
        return r < 0 ? io_error(w, r, "remove from the previous generation") : 0;
}

/* Do this filesystem's timestamps vouch for its files' contents? Only local filesystems that
 * stamp mtime and ctime on every change of a file's bytes, a write through a shared mapping
 * included (their page_mkwrite): not tmpfs (a write through a mapping never changes its times),
 * not network or FUSE filesystems (times from elsewhere, or cached), not vfat (2 s timestamps),
 * not xfs (XFS_IOC_SWAPEXT, the defragmenter's ioctl, lets the owner of two files swap their
 * bytes and keeps every time of both). Elsewhere every file is read again by every walk. */
static bool gen_fs_vouches(int dir_fd) {
        struct statfs sf;
        if (fstatfs(dir_fd, &sf) < 0)
                return false;
        switch ((unsigned long) sf.f_type) {
        case EXT4_SUPER_MAGIC: /* ext2, ext3 and ext4 */
        case BTRFS_SUPER_MAGIC:
        case F2FS_SUPER_MAGIC:
                return true;
        default:
                return false;
        }
}

/* Was the file open for writing by anyone (a writable shared mapping included) while it was
 * read? Then its copy may hold a write in progress that its ctime predates: read again next
 * time. A read lease is refused (EAGAIN) exactly then. It is taken and dropped at once; a
 * lease break in between is signalled with SIGURG, which is ignored by default, never with
 * SIGIO, which would end this process. */
static bool open_for_writing(Walk *w, int fd) {
        if (fcntl(fd, F_SETSIG, SIGURG) < 0 || fcntl(fd, F_SETLEASE, F_RDLCK) < 0) {
                /* EAGAIN: a writer. Anything else (no CAP_LEASE for a file of another owner):
                 * the question cannot be asked, which vouches for nothing either. */
                if (errno != EAGAIN)
                        w->lease_unusable = true;
                return true;
        }
        (void) fcntl(fd, F_SETLEASE, F_UNLCK);
        return false;
}

/* A file just copied into the new generation: its identity, and where its blob id will be. */
static int gen_record_file(Walk *w, Tree *t, int src, const char *name, size_t len, const struct stat *st,
                           size_t index) {
        GenEntry *ne = gen_dir_append(w->gen, t->gnew, name, len);
        if (!ne)
                return io_error(w, -ENOMEM, "allocate");
        gen_identity_of(st, &ne->id);
        /* A file that read as another size than it claimed (a /proc file bound in, a file
         * changed while read) says nothing by its identity: read again every time. */
        ne->racy = gen_racy(w, st) || w->last_copied != (uint64_t) st->st_size || !t->reuse_ok || open_for_writing(w, src);
        ne->tb_index = index;
        if (ne->racy)
                t->gnew->always = true;
        return 0;
}

/* The new generation's directory entry (its entries are filled by the walk of child). */
static int gen_record_dir(Walk *w, Tree *t, Tree *child, const char *name, size_t len, const struct stat *st,
                          bool kept) {
        GenEntry *ne = gen_dir_append(w->gen, t->gnew, name, len);
        if (!ne || gen_entry_make_dir(ne) < 0)
                return io_error(w, -ENOMEM, "allocate");
        gen_identity_of(st, &ne->id);
        ne->racy = gen_racy(w, st);
        ne->dir->always = ne->racy;
        child->gnew = ne->dir;
        GenEntry *old = kept ? gen_dir_find(t->gold, name, len) : NULL;
        child->gold = old ? old->dir : NULL;
        /* Its watch saw nothing change in it since the previous walk, and it is the directory
         * that walk read, identity and all (its entries may have changed below it: walk_known
         * goes down). Not only its device and inode: a directory removed and made again can have
         * both, and the old one's watch, dropped with it (IN_IGNORED), leaves no stamp. Its ctime
         * tells: every change of its entries, mode or owner stamps it, and each of those is an
         * event on its watch too, so one the watch vouches for keeps its whole identity. */
        child->known = w->watch_trusted && old && old->dir->clean && gen_identity_equal(&old->id, &ne->id) &&
                       !(w->limits->cache_paths && cache_path_match(w) > 0);
        return 0;
}

/* A directory's walk is complete: what the previous generation had and the source no longer
 * has is removed from the copy. */
static int gen_finish_dir(Walk *w, int dst, Tree *t) {
        for (size_t i = 0; t->gold && i < t->gold->n; i++) {
                GenEntry *old = &t->gold->v[i];
                if (old->seen)
                        continue;
                char nm[NAME_MAX + 1];
                memcpy(nm, old->name, old->len);
                nm[old->len] = 0;
                int r = rm_rf_at(dst, nm);
                if (r < 0)
                        return io_error(w, r, "remove from the previous generation");
        }
        int r = gen_dir_seal(t->gnew);
        return r < 0 ? io_error(w, r, "allocate") : 0;
}

/* After the hashing: the blob ids of the files copied this time into their index entries. */
static void gen_harvest(Tree *t) {
        for (size_t i = 0; t->gnew && i < t->gnew->n; i++) {
                GenEntry *ne = &t->gnew->v[i];
                if (ne->tb_index != SIZE_MAX && ne->tb_index < t->b.n_entries) {
                        memcpy(ne->oid, t->b.entries[ne->tb_index].oid, GIT_OID_SIZE);
                        ne->tb_index = SIZE_MAX;
                }
        }
}

/* ---- a generation's copiers (copy-pool.h) ---------------------------------------------- */

/* Files copied before the copiers start: a walk that copies a few changed files starts no
 * thread. */
uint64_t snapshot_test_copy_pool_min_files = SNAPSHOT_COPY_POOL_MIN_FILES;

/* Are this walk's files copied by the copiers? They start once a generation's walk has copied
 * enough files on its own thread, unless limits->copiers is 1; none started: never. */
static bool walk_pool(Walk *w) {
        if (w->pool)
                return true;
        if (!w->gen || w->pool_failed || w->limits->copiers == 1 ||
            w->files - w->files_reused < snapshot_test_copy_pool_min_files)
                return false;
        /* Copies so far are counted in the budget; the copiers share it from now. */
        w->pool_failed = copy_pool_new(w->limits->copiers, w->copy == SNAPSHOT_COPY_FILE_RANGE, &w->budget,
                                       &w->pool) < 0;
        return !w->pool_failed;
}

/* The regular file open at src (fstat'ed into st; taken) copied into the generation as
 * dst_dir/name by a copier: its size taken from the budget, the copy created here (the names
 * were cleared: one already there fails the walk), its tree and index entries recorded, the
 * rest handed over. What the copier learns (the blob id, a size that changed, a writer) reaches
 * the entries when the pool stores its results (copy-pool.h). */
static int copy_file_pooled(Walk *w, int src, const struct stat *st, int dst_dir, const char *name, size_t len,
                            Tree *t) {
        static const uint8_t pending[GIT_OID_SIZE] = {};
        _cleanup_close_ int fd = src;
        mode_t mode = copy_mode(st->st_mode);
        int r;

        if (st->st_size < 0)
                return io_error(w, -EIO, "negative size");
        r = take_bytes(w, (uint64_t) st->st_size);
        if (r < 0)
                return r;
        _cleanup_close_ int dst = openat(dst_dir, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (dst < 0)
                return io_error(w, -errno, "create copy");
        size_t index = git_tree_builder_size(&t->b);
        r = git_tree_builder_add(&t->b, name, len, (st->st_mode & S_IXUSR) ? GIT_MODE_EXECUTABLE : GIT_MODE_FILE,
                                 pending);
        if (r < 0)
                return io_error(w, r, "record tree entry");
        GenEntry *ne = gen_dir_append(w->gen, t->gnew, name, len);
        if (!ne)
                return io_error(w, -ENOMEM, "allocate");
        gen_identity_of(st, &ne->id);
        ne->racy = gen_racy(w, st) || !t->reuse_ok;
        ne->tb_index = index;
        if (ne->racy)
                t->gnew->always = true;

        CopyJob *j = copy_pool_job(w->pool, &r, w->e);
        if (!j)
                return r;
        if (copy_pool_job_path(j, w->path, w->path_len) < 0)
                return io_error(w, -ENOMEM, "allocate");
        j->src = TAKE_FD(fd);
        j->dst = TAKE_FD(dst);
        j->expected = (uint64_t) st->st_size;
        j->times[0] = st->st_atim;
        j->times[1] = st->st_mtim;
        j->uid = w->gen->copy_uid;
        j->gid = w->gen->copy_gid;
        j->mode = mode;
        j->fix_mode = w->umask == (mode_t) -1 || (mode & w->umask) != 0;
        j->ask_writers = !ne->racy;
        j->tb = &t->b;
        j->tb_index = index;
        j->dir = t->gnew;
        j->entry = t->gnew->n - 1;
        copy_pool_submit(w->pool, j);
        w->files++;
        return 0;
}

/* ---- the watch (dirty-set.h): what the previous generation holds, taken unread ----------- */

/* The directory old of the previous generation, with everything below it, into the new one as
 * it is: the watch vouches that nothing of it changed. Moved, not copied (gen_dir_move: the
 * previous index is spent by this walk). Counted and bounded as if it were read. */
static int gen_carry(Walk *w, Tree *t, GenEntry *old, const char *name, size_t len) {
        GenTotals tot = {};
        GenEntry *ne = gen_dir_append(w->gen, t->gnew, name, len);
        if (!ne || gen_entry_make_dir(ne) < 0)
                return io_error(w, -ENOMEM, "allocate");
        bool has_tree = old->dir->has_tree;
        uint8_t tree[GIT_OID_SIZE];
        memcpy(tree, old->dir->tree, GIT_OID_SIZE);
        gen_dir_move(w->gen, ne->dir, old, &tot);
        ne->id = old->id;
        old->seen = true;
        if (tot.entries > w->limits->max_entries - MIN(w->entries, w->limits->max_entries))
                return too_large(w, "more entries than max_entries");
        int r = take_bytes(w, tot.bytes);
        if (r < 0)
                return r;
        w->entries += tot.entries;
        w->entries_unread += tot.entries + 1;
        w->bytes_reused += tot.bytes;
        w->files += tot.files;
        w->files_reused += tot.files;
        w->dirs += tot.dirs + 1;
        w->skipped_symlinks += tot.symlinks;
        if (!has_tree)
                return 0; /* git records no tree for it */
        r = git_tree_builder_add(&t->b, name, len, GIT_MODE_TREE, tree);
        return r < 0 ? io_error(w, r, "record tree entry") : 0;
}

/* Is name, a directory at readdir time, the previous generation's directory of that name with
 * nothing changed in it or below? Then it is carried over: 1. 0: walk it. */
static int gen_try_carry(Walk *w, int src, unsigned depth, const char *name, size_t len, Tree *t) {
        GenEntry *old = gen_dir_find(t->gold, name, len);
        struct stat st;
        GenIdentity id;

        /* No directory left (old->dir NULL): carried already, its name answered twice by
         * readdir; the walk's name set says so below, as for any entry. */
        if (!old || !old->is_dir || !old->dir || !old->dir->subtree_clean ||
            (w->limits->cache_paths && cache_path_match(w) > 0))
                return 0;
        if (fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 1 : io_error(w, -errno, "stat");
        gen_identity_of(&st, &id);
        if (!S_ISDIR(st.st_mode) || !gen_identity_equal(&id, &old->id))
                return 0;
        if (depth + 1 > SNAPSHOT_DEPTH_MAX)
                return too_large(w, "directories nested too deep");
        int r = name_set_add(&w->names[depth], name, len);
        if (r <= 0)
                return r < 0 ? io_error(w, r, "allocate") : 1;
        r = gen_carry(w, t, old, name, len);
        return r < 0 ? r : 1;
}

/* A file of a directory the watch vouches for, taken from the index without a stat. */
static int gen_carry_file(Walk *w, Tree *t, GenEntry *old) {
        int r = take_bytes(w, old->id.size);
        if (r < 0)
                return r;
        r = git_tree_builder_add(&t->b, old->name, old->len,
                                     (old->id.mode & S_IXUSR) ? GIT_MODE_EXECUTABLE : GIT_MODE_FILE, old->oid);
        if (r < 0)
                return io_error(w, r, "record tree entry");
        GenEntry *ne = gen_dir_append(w->gen, t->gnew, old->name, old->len);
        if (!ne)
                return io_error(w, -ENOMEM, "allocate");
        ne->id = old->id;
        memcpy(ne->oid, old->oid, GIT_OID_SIZE);
        old->seen = true;
        w->bytes_reused += old->id.size;
        w->files++;
        w->files_reused++;
        w->entries_unread++;
        return 0;
}

static int walk_entry(Walk *w, int src, int dst, unsigned depth, const char *name, size_t len,
                      unsigned char dtype, Tree *t);
static int gen_finish_dir(Walk *w, int dst, Tree *t);

/* A directory the watch vouches for (Tree.known): its entries are the previous generation's,
 * taken without listing it. Its files are taken as they were; a directory below it is carried
 * whole when nothing changed under it, or opened and walked as any. */
static int walk_known(Walk *w, int src, int dst, unsigned depth, Tree *t) {
        name_set_reset(&w->names[depth]);
        t->gnew->wd = t->gold->wd;
        t->gnew->symlinks = t->gold->symlinks;
        for (size_t i = 0; i < t->gold->n; i++) {
                GenEntry *old = &t->gold->v[i];
                char name[NAME_MAX + 1];
                size_t saved;
                int r;

                memcpy(name, old->name, old->len);
                name[old->len] = 0;
                path_push(w, name, old->len, &saved);
                if (++w->entries > w->limits->max_entries)
                        return too_large(w, "more entries than max_entries");
                if (!old->is_dir)
                        r = gen_carry_file(w, t, old);
                else
                        r = walk_entry(w, src, dst, depth, name, old->len, DT_DIR, t);
                if (r < 0)
                        return r;
                path_pop(w, saved);
        }
        w->entries += t->gold->symlinks;
        w->entries_unread += t->gold->symlinks;
        w->skipped_symlinks += t->gold->symlinks;
        if (w->entries > w->limits->max_entries)
                return too_large(w, "more entries than max_entries");
        return gen_finish_dir(w, dst, t);
}

static int walk_dir(Walk *w, int src, int dst, unsigned depth, Tree *t);

/* Open the entry src/name as what readdir said it is (kind), never following a symlink; a
 * rename racing the lookup is retried. The descriptor, or a negative errno. */
static int open_entry(Walk *w, int src, const char *name, mode_t kind) {
        int fd;

        for (unsigned attempt = 0;; attempt++) {
                fd = open_child(w, src, name, S_ISDIR(kind) ? CHILD_DIR_FLAGS : CHILD_FILE_FLAGS);
                if (fd == -ENOTDIR && S_ISDIR(kind))
                        /* A directory at readdir time, something else now: open it the
                         * careful way, which cannot fail with ENOTDIR, and let fstat say what
                         * it is. */
                        fd = open_child(w, src, name, CHILD_FILE_FLAGS);
                /* openat2's scoped lookup ends with a check that the result is still beneath
                 * the directory: EXDEV when the entry was renamed away while being opened
                 * (EAGAIN when a rename raced the lookup itself). Look the name up again. */
                if ((fd == -EXDEV || fd == -EAGAIN) && attempt < OPEN_RETRIES)
                        continue;
                break;
        }
        return fd;
}

/* A directory entry opened at fd: its copy (or stream entry), its generation record, the walk
 * of its entries, and its tree added to t's once its id is known. */
static int walk_subdir(Walk *w, int fd, int dst, unsigned depth, const char *name, size_t len,
                       const struct stat *st, Tree *t) {
        bool stream = w->out_fd >= 0;
        int r;

        if (!stream && st->st_dev == w->dst_dev && st->st_ino == w->dst_ino)
                return walk_fail(w, ELOOP, "snapshot_destination",
                                 "the snapshot is being written inside the workspace, at '%s'");
        if (depth + 1 > SNAPSHOT_DEPTH_MAX)
                return too_large(w, "directories nested too deep");
        mode_t mode = copy_mode(st->st_mode);
        _cleanup_close_ int child_dst = -EBADF;
        bool gen_kept = false;
        if (stream) {
                r = out_entry(w, SNAPSHOT_STREAM_DIR, name, len, st->st_mode, 0);
                if (r < 0)
                        return r;
        } else {
                int kept = w->gen ? gen_clear_slot(w, dst, t, name, len, true) : 0;
                if (kept < 0)
                        return kept;
                /* Only root can enter it while it is filled; finish_dir() opens it up. */
                if (!kept && mkdirat(dst, name, 0700) < 0)
                        return errno == EEXIST && !w->gen ? 0 : io_error(w, -errno, "create copy");
                child_dst = openat(dst, name, CHILD_DIR_FLAGS);
                if (child_dst < 0)
                        return io_error(w, -errno, "open copy");
                r = kept ? 0 : set_group(w, child_dst);
                if (r < 0)
                        return io_error(w, r, "set owner and mode");
                gen_kept = kept;
        }
        w->dirs++;
        _cleanup_(tree_freep) Tree *child = calloc(1, sizeof(Tree));
        if (!child)
                return io_error(w, -ENOMEM, "allocate");
        if (w->gen && (r = gen_record_dir(w, t, child, name, len, st, gen_kept)) < 0)
                return r;
        r = walk_dir(w, fd, child_dst, depth + 1, child);
        if (r < 0)
                return r;
        if (stream)
                r = out_tag(w, SNAPSHOT_STREAM_UP);
        else if ((r = finish_dir(child_dst, mode)) < 0)
                return io_error(w, r, "set mode");
        if (r < 0)
                return r;
        /* git never records an empty tree: the directory is copied, not named. */
        if (git_tree_builder_size(&child->b) == 0)
                return 0;
        static const uint8_t pending[GIT_OID_SIZE] = {};
        child->parent = t;
        child->parent_index = git_tree_builder_size(&t->b);
        r = git_tree_builder_add(&t->b, name, len, GIT_MODE_TREE, pending);
        if (r >= 0) {
                *w->done_tail = TAKE_PTR(child);
                w->done_tail = &(*w->done_tail)->next;
        }
        return r < 0 ? io_error(w, r, "record tree entry") : 0;
}

/* Handle one directory entry of src (level depth) named name, whose readdir type is dtype.
 * Adds what it copied to tb. */
static int walk_entry(Walk *w, int src, int dst, unsigned depth, const char *name, size_t len,
                      unsigned char dtype, Tree *t) {
        _cleanup_close_ int fd = -EBADF;
        mode_t kind = dtype_to_mode(dtype);
        struct stat st;
        int r;

        if (kind == 0) {
                /* DT_UNKNOWN: ask without following anything. The answer only chooses how to
                 * open; what is opened is checked again below. */
                if (fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return errno == ENOENT ? 0 : io_error(w, -errno, "stat");
                kind = st.st_mode & S_IFMT;
        }
        if (S_ISLNK(kind)) {
                w->skipped_symlinks++;
                if (w->gen)
                        t->gnew->symlinks++;
                return 0;
        }
        /* Refused by their readdir type, without ever being opened. */
        if (is_special(kind))
                return special_file(w, kind);
        if (w->gen && (r = gen_try_reuse(w, src, depth, name, len, kind, t)) != 0)
                return MIN(r, 0);
        if (w->watch_trusted && S_ISDIR(kind) && (r = gen_try_carry(w, src, depth, name, len, t)) != 0)
                return MIN(r, 0);

        fd = open_entry(w, src, name, kind);
        switch (fd) {
        case -ELOOP: /* a symlink (now): never followed */
                w->skipped_symlinks++;
                if (w->gen)
                        t->gnew->symlinks++;
                return 0;
        case -ENOENT: /* removed since readdir: nothing to copy */
                return 0;
        case -ENXIO: /* a socket opened as a file */
                return special_file(w, S_IFSOCK);
        default:
                if (fd < 0)
                        return io_error(w, fd, "open");
        }

        /* Trust the fd, not the name: whatever was opened is what gets handled. */
        if (fstat(fd, &st) < 0)
                return io_error(w, -errno, "fstat");

        bool stream = w->out_fd >= 0;
        if ((stream || w->gen) && (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) {
                /* A name readdir returned twice: the first one stays, as in the copy. */
                r = name_set_add(&w->names[depth], name, len);
                if (r < 0)
                        return io_error(w, r, "allocate");
                if (r == 0)
                        return 0;
        }

        if (S_ISDIR(st.st_mode))
                return walk_subdir(w, fd, dst, depth, name, len, &st, t);
        else if (S_ISREG(st.st_mode)) {
                if (!hardlink_allowed(w, &st))
                        return walk_fail(w, ENOTSUP, "snapshot_special_file",
                                         "workspace entry '%s' is a hard link to a file owned by uid %u that the workspace owner may not read",
                                         (unsigned) st.st_uid);
                if (w->gen && (r = gen_clear_slot(w, dst, t, name, len, false)) < 0)
                        return r;
                if (walk_pool(w))
                        return copy_file_pooled(w, TAKE_FD(fd), &st, dst, name, len, t);
                size_t index = git_tree_builder_size(&t->b);
                r = copy_file(w, fd, &st, dst, name, len, &t->b);
                if (r == 0 && w->gen)
                        r = gen_record_file(w, t, fd, name, len, &st, index);
                return MIN(r, 0);
        } else
                return special_file(w, st.st_mode);
}

/* Copy the directory open at src into dst, recording its entries in t. */
static int walk_dir(Walk *w, int src, int dst, unsigned depth, Tree *t) {
        int r;

        if (!w->dents[depth]) {
                w->dents[depth] = malloc(DENTS_BUF_SIZE);
                if (!w->dents[depth])
                        return io_error(w, -ENOMEM, "allocate");
        }
        char *buf = w->dents[depth];
        if (w->out_fd >= 0 || w->gen)
                name_set_reset(&w->names[depth]);
        if (w->gen) {
                struct stat ds;
                t->reuse_ok = fstat(src, &ds) >= 0 && gen_fs_vouches(src);
                t->dev = t->reuse_ok ? ds.st_dev : 0;
                if (t->known)
                        return walk_known(w, src, dst, depth, t);
                /* Watched before it is read: a change after the read is an event. */
                int32_t wd = w->watch ? dirty_view_watch(w->watch, src) : 0;
                if (wd == DIRTY_WATCH_OVER_BUDGET)
                        w->dirs_over_budget++;
                else if (w->watch && wd <= 0)
                        w->dirs_unwatched++;
                t->gnew->wd = MAX(wd, 0);
                if (!t->reuse_ok || t->gnew->wd <= 0)
                        t->gnew->always = true;
        }

        for (;;) {
                ssize_t n = getdents64(src, buf, DENTS_BUF_SIZE);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return io_error(w, -errno, "read directory");
                }
                if (n == 0)
                        break;
                for (ssize_t off = 0; off < n;) {
                        const struct dirent64 *d = (const struct dirent64 *) (buf + off);
                        const char *name = d->d_name;
                        size_t len;

                        off += d->d_reclen;
                        if (streq(name, ".") || streq(name, ".."))
                                continue;
                        if (depth == 0 && streq(name, SNAPSHOT_CONTROL_DIR))
                                continue;
                        len = strnlen(name, NAME_MAX + 1);
                        /* The kernel never returns these; a walk that relies on single
                         * components checks anyway. */
                        if (len > NAME_MAX || memchr(name, '/', len))
                                return io_error(w, -ENAMETOOLONG, "invalid name");

                        size_t saved;
                        path_push(w, name, len, &saved);
                        if (w->limits->exclude_cache && cache_path_match(w) == 2) {
                                path_pop(w, saved);
                                continue;
                        }
                        if (++w->entries > w->limits->max_entries)
                                return too_large(w, "more entries than max_entries");
                        r = walk_entry(w, src, dst, depth, name, len, d->d_type, t);
                        if (r < 0)
                                return r;
                        path_pop(w, saved);
                }
        }

        return w->gen ? gen_finish_dir(w, dst, t) : 0;
}

/* After the walk: every blob id into its entry, then every tree, children first (the list is
 * in completion order), each id into its parent's entry; the root's id last. */
static int build_trees(Walk *w, Tree *root, uint8_t ret[static GIT_OID_SIZE]) {
        int r = w->pool ? copy_pool_sync(w->pool, w->e) : 0;
        if (r < 0)
                return r;
        w->lease_unusable |= w->pool && copy_pool_lease_unusable(w->pool);
        r = blob_hasher_sync(w->hasher);
        if (r < 0)
                return io_error(w, r, "hash");
        if (w->gen) {
                for (Tree *t = w->done; t; t = t->next)
                        gen_harvest(t);
                gen_harvest(root);
        }
        for (Tree *t = w->done; t; t = t->next) {
                uint8_t *oid = t->parent->b.entries[t->parent_index].oid;
                r = git_tree_builder_finish(&t->b, w->h, oid);
                if (r < 0)
                        return io_error(w, r, "build tree");
                if (t->gnew) {
                        /* The next walk carries it with its id when nothing changed. */
                        memcpy(t->gnew->tree, oid, GIT_OID_SIZE);
                        t->gnew->has_tree = true;
                }
        }
        r = git_tree_builder_finish(&root->b, w->h, ret);
        if (r >= 0 && root->gnew) {
                memcpy(root->gnew->tree, ret, GIT_OID_SIZE);
                root->gnew->has_tree = true;
        }
        return r < 0 ? io_error(w, r, "build tree") : 0;
}

/* What a finished walk read, for the caller. */
static void summary_of(const Walk *w, usec_t start, const uint8_t tree[static GIT_OID_SIZE], SnapshotSummary *ret) {
        *ret = (SnapshotSummary) {
                .bytes = atomic_load(&w->budget.used),
                .entries = w->entries,
                .files = w->files,
                .dirs = w->dirs,
                .skipped_symlinks = w->skipped_symlinks,
                .files_reused = w->files_reused,
                .bytes_reused = w->bytes_reused,
                .entries_unread = w->entries_unread,
                .dirs_unwatched = w->dirs_unwatched,
                .files_checked = w->files_checked,
                .files_trusted = w->files_trusted,
                .files_reported = w->files_reported,
                .files_probed = w->files_probed,
                .mark = !w->fan ? SNAPSHOT_MARK_NONE : w->fan_trusted ? SNAPSHOT_MARK_USED : SNAPSHOT_MARK_FLOOR,
                .dirs_over_budget = w->dirs_over_budget,
                .watch = !w->watch ? SNAPSHOT_WATCH_NONE : w->watch_trusted ? SNAPSHOT_WATCH_DIRTY : SNAPSHOT_WATCH_FULL,
                .lease_unusable = w->lease_unusable,
                .duration = now_monotonic() - start,
                .resolver = w->use_openat2 ? SNAPSHOT_RESOLVER_OPENAT2 : SNAPSHOT_RESOLVER_OPENAT_FALLBACK,
        };
        sha256_to_hex(tree, ret->tree);
}

/* Remove ACLs our new root directory may have inherited from dest_parent's default ACL, so
 * that nothing below it inherits extra grants and the mode bits say everything. */
static int drop_acls(int fd) {
        if (fremovexattr(fd, "system.posix_acl_default") < 0 && errno != ENODATA &&
            errno != EOPNOTSUPP)
                return -errno;
        if (fremovexattr(fd, "system.posix_acl_access") < 0 && errno != ENODATA &&
            errno != EOPNOTSUPP)
                return -errno;
        return 0;
}

/* The start of every walk: the path buffer, the umask a copy's modes are checked against, the
 * hashers, the resolver, the workspace's root opened safely as a directory (its owner is the
 * one whose bits are mirrored). Returns the root's fd. */
static int walk_begin(Walk *w, const char *workspace_path, struct stat *ret_st, TfwError *e) {
        w->budget.max = w->limits->max_bytes;
        w->path = malloc(WALK_PATH_MAX);
        if (!w->path)
                return tfw_error(e, ENOMEM, "snapshot_io", "out of memory");
        w->path[0] = 0;
        if (w->out_fd < 0 && read_umask(&w->umask) < 0)
                w->umask = (mode_t) -1; /* unknown: set every mode explicitly */

        int r = sha256_new(&w->h);
        if (r >= 0)
                r = blob_hasher_new(true, &w->hasher);
        if (r < 0)
                return tfw_error(e, r, "snapshot_io", "cannot set up SHA-256");

        w->use_openat2 = snapshot_openat2_usable();
        int root = open_root(w, workspace_path);
        if (root < 0) {
                char p[512];
                return tfw_error(e, root, "snapshot_workspace", "cannot open workspace '%s' safely: %s",
                                 printable_name(workspace_path, p, sizeof(p)), strerror(-root));
        }
        if (fstat(root, ret_st) < 0 || !S_ISDIR(ret_st->st_mode)) {
                safe_close(root);
                return tfw_error(e, ENOTDIR, "snapshot_workspace", "workspace is not a directory");
        }
        w->owner_uid = ret_st->st_uid;
        return root;
}

int snapshot_take(const char *workspace_path, int dest_parent_fd, const char *dest_name,
                  const SnapshotLimits *limits, SnapshotSummary *ret, TfwError *e) {
        _cleanup_close_ int root = -EBADF, dst = -EBADF;
        /* Declared before w: its cleanup runs after walk_done() stopped the hasher. */
        _cleanup_(tree_done) Tree root_tree = {};
        Walk w = {
                .limits = limits,
                .e = e,
                .copy = limits->copy == SNAPSHOT_COPY_READ_WRITE ? SNAPSHOT_COPY_READ_WRITE
                                                                 : SNAPSHOT_COPY_FILE_RANGE,
                .umask = (mode_t) -1,
                .out_fd = -EBADF,
        };
        w.done_tail = &w.done;
        usec_t start = now_monotonic();
        bool created = false;
        struct stat st;
        uint8_t tree[GIT_OID_SIZE];
        int r;

        tfw_error_clear(e);
        if (!filename_is_valid(dest_name))
                return tfw_error(e, EINVAL, "snapshot_destination", "invalid snapshot name");

        r = walk_begin(&w, workspace_path, &st, e);
        if (r < 0)
                goto out;
        root = r;

        if (mkdirat(dest_parent_fd, dest_name, 0700) < 0) {
                r = tfw_error(e, errno, "snapshot_destination", "cannot create snapshot '%s': %s",
                              dest_name, strerror(errno));
                goto out;
        }
        created = true;
        dst = openat(dest_parent_fd, dest_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dst < 0) {
                r = tfw_error(e, errno, "snapshot_destination", "cannot open snapshot '%s': %s",
                              dest_name, strerror(errno));
                goto out;
        }
        struct stat dst_st;
        if (fstat(dst, &dst_st) < 0) {
                r = tfw_error(e, errno, "snapshot_destination", "cannot stat snapshot '%s': %s",
                              dest_name, strerror(errno));
                goto out;
        }
        w.dst_dev = dst_st.st_dev;
        w.dst_ino = dst_st.st_ino;
        r = drop_acls(dst);
        if (r < 0) {
                r = tfw_error(e, r, "snapshot_destination", "cannot drop inherited ACLs: %s",
                              strerror(-r));
                goto out;
        }
        if (limits->group != (gid_t) -1) {
                /* The group and the setgid bit that hand it down (see set_group()). Where a
                 * set-id chmod is refused (systemd's RestrictSUIDSGID=), every entry gets its
                 * group by fchown instead. */
                if (fchown(dst, (uid_t) -1, limits->group) < 0) {
                        r = tfw_error(e, errno, "snapshot_destination", "cannot set the snapshot's group: %s",
                                      strerror(errno));
                        goto out;
                }
                if (fchmod(dst, 0700 | S_ISGID) >= 0)
                        w.group_inherited = true;
                else if (errno == EPERM)
                        w.group_checked = true; /* and w.group_inherited stays false */
                else {
                        r = tfw_error(e, errno, "snapshot_destination", "cannot set the snapshot's group: %s",
                                      strerror(errno));
                        goto out;
                }
        }

        r = walk_dir(&w, root, dst, 0, &root_tree);
        if (r >= 0)
                r = build_trees(&w, &root_tree, tree);
        if (r < 0)
                goto out;

        /* The root last: until now only root could enter the half-made copy. */
        r = finish_dir(dst, copy_mode(st.st_mode));
        if (r < 0) {
                r = tfw_error(e, r, "snapshot_io", "cannot set owner and mode of the snapshot: %s",
                              strerror(-r));
                goto out;
        }

        summary_of(&w, start, tree, ret);
        r = 0;
out:
        if (r < 0 && created) {
                dst = safe_close(dst);
                (void) rm_rf_at(dest_parent_fd, dest_name);
        }
        walk_done(&w);
        return r;
}

/* The walk's start on the realtime clock the filesystems stamp ctimes with, less the racy
 * window: an entry whose ctime is later is read again next time. */
int64_t snapshot_test_racy_window_nsec = GEN_RACY_WINDOW_NSEC;

static int64_t racy_threshold(void) {
        struct timespec ts;
        if (clock_gettime(CLOCK_REALTIME_COARSE, &ts) < 0 && clock_gettime(CLOCK_REALTIME, &ts) < 0)
                return INT64_MIN; /* no clock: every entry is racy */
        return (int64_t) ts.tv_sec * 1000000000LL + ts.tv_nsec - snapshot_test_racy_window_nsec;
}

int snapshot_update(const char *workspace_path, int tree_fd, GenIndex *prev, uint32_t copy_uid,
                    const SnapshotLimits *limits, GenIndex **ret_next, SnapshotSummary *ret, TfwError *e) {
        _cleanup_close_ int root = -EBADF;
        _cleanup_(gen_index_freep) GenIndex *next = NULL;
        _cleanup_(tree_done) Tree root_tree = {};
        Walk w = {
                .limits = limits,
                .e = e,
                .copy = limits->copy == SNAPSHOT_COPY_READ_WRITE ? SNAPSHOT_COPY_READ_WRITE
                                                                 : SNAPSHOT_COPY_FILE_RANGE,
                .umask = (mode_t) -1,
                .out_fd = -EBADF,
                .racy_from = racy_threshold(),
        };
        w.done_tail = &w.done;
        usec_t start = now_monotonic();
        struct stat st, dst_st;
        uint8_t tree[GIT_OID_SIZE];
        int r;

        tfw_error_clear(e);
        if (limits->group == (gid_t) -1 || copy_uid == (uint32_t) -1)
                return tfw_error(e, EINVAL, "snapshot_destination", "a generation needs an owner and a group");
        r = walk_begin(&w, workspace_path, &st, e);
        if (r < 0)
                goto out;
        root = r;
        if (fstat(tree_fd, &dst_st) < 0 || !S_ISDIR(dst_st.st_mode)) {
                r = tfw_error(e, errno ? errno : ENOTDIR, "snapshot_destination", "the generation is not a directory");
                goto out;
        }
        w.dst_dev = dst_st.st_dev;
        w.dst_ino = dst_st.st_ino;
        r = gen_index_new((uint32_t) st.st_uid, copy_uid, (uint32_t) limits->group, &next);
        if (r < 0) {
                r = tfw_error(e, -r, "snapshot_io", "out of memory");
                goto out;
        }
        w.gen = next;
        /* An index made for another owner or group vouches for nothing: its entries are still
         * compared name by name, and removed, but every file is read again. */
        w.gen_trust = prev && prev->owner_uid == next->owner_uid && prev->copy_uid == copy_uid &&
                      prev->copy_gid == next->copy_gid;
        root_tree.gold = prev ? &prev->root : NULL;
        root_tree.gnew = &next->root;
        /* The watch: this walk's sequence into the new index; the previous one's clean marks
         * (the root is always read: the control directory and the cache's paths are there). */
        w.watch = limits->watch;
        if (w.watch) {
                next->watch_instance = w.watch->instance;
                next->watch_seq = w.watch->seq;
                w.watch_trusted = w.gen_trust && dirty_view_mark(w.watch, prev);
                /* The file system's mark vouches for the previous walk when it was placed, and
                 * last overflowed, before that walk began (its floor), by the same daemon. */
                w.fan = dirty_view_fan(w.watch);
                w.fan_since = prev ? prev->watch_seq : 0;
                w.fan_trusted = w.fan && w.watch_trusted && prev->watch_seq >= w.fan->floor;
        }
        /* What the watch cannot see: each file of a directory it vouches for, asked by stat
         * (gen-verify.h). A directory with one changed is read as any. */
        if (w.watch_trusted) {
                GenVerify gv = { .use_openat2 = w.use_openat2, .owner_uid = (uint32_t) st.st_uid, .fan = w.fan,
                                 .fan_trusted = w.fan_trusted, .since = w.fan_since };
                r = gen_verify_clean(root, &prev->root, &gv);
                if (r < 0) {
                        r = tfw_error(e, -r, "snapshot_io", "cannot check the workspace's files: %s", strerror(-r));
                        goto out;
                }
                w.files_checked = gv.files;
                w.files_trusted = gv.trusted;
                w.files_reported = gv.reported;
                w.files_probed = gv.probed;
        }
        /* The root keeps one owner and mode whatever the workspace's (/work as the tmpfs of a
         * streamed job has it): a capsule started ahead of its job looked at it when it booted
         * and need not see it change. */
        if (fchown(tree_fd, copy_uid, limits->group) < 0 || fchmod(tree_fd, SNAPSHOT_GENERATION_ROOT_MODE) < 0) {
                r = tfw_error(e, errno, "snapshot_destination", "cannot set the generation's owner: %m");
                goto out;
        }

        r = walk_dir(&w, root, tree_fd, 0, &root_tree);
        if (r >= 0)
                r = build_trees(&w, &root_tree, tree);
        if (r < 0)
                goto out;
        summary_of(&w, start, tree, ret);
        if (prev)
                gen_index_take_names(next, prev); /* the directories carried keep theirs */
        *ret_next = TAKE_PTR(next);
        r = 0;
out:
        walk_done(&w);
        return r;
}

int snapshot_stream(const char *workspace_path, int out_fd, const SnapshotLimits *limits,
                    SnapshotSummary *ret, TfwError *e) {
        _cleanup_close_ int root = -EBADF;
        _cleanup_(tree_done) Tree root_tree = {};
        Walk w = {
                .limits = limits,
                .e = e,
                .copy = SNAPSHOT_COPY_READ_WRITE,
                .umask = (mode_t) -1,
                .out_fd = out_fd,
        };
        w.done_tail = &w.done;
        usec_t start = now_monotonic();
        struct stat st;
        uint8_t tree[GIT_OID_SIZE];
        int r;

        tfw_error_clear(e);
        if (out_fd < 0)
                return tfw_error(e, EBADF, "snapshot_stream", "no stream to write to");
        w.obuf = malloc(OUT_BUF_SIZE);
        if (!w.obuf) {
                r = tfw_error(e, ENOMEM, "snapshot_io", "out of memory");
                goto out;
        }
        r = walk_begin(&w, workspace_path, &st, e);
        if (r < 0)
                goto out;
        root = r;

        r = walk_dir(&w, root, -EBADF, 0, &root_tree);
        if (r >= 0)
                r = build_trees(&w, &root_tree, tree);
        if (r < 0)
                goto out;
        /* The end mark only once the tree id is known: a capsule never runs a job on a stream
         * whose snapshot failed. */
        r = out_tag(&w, SNAPSHOT_STREAM_END);
        if (r >= 0 && (r = out_flush(&w)) < 0)
                r = out_error(&w, r);
        if (r < 0)
                goto out;

        summary_of(&w, start, tree, ret);
        r = 0;
out:
        if (r < 0 && w.obuf) {
                /* Whatever was buffered, then the abort mark: the capsule runs nothing. A
                 * capsule that stopped reading makes this fail, which changes nothing. */
                uint8_t a = SNAPSHOT_STREAM_ABORT;
                if (out_flush(&w) >= 0)
                        (void) write_all(out_fd, &a, 1);
        }
        walk_done(&w);
        return r;
}
