/* SPDX-License-Identifier: MIT */
/* Step 5 of tentaflake-capsule-init: what leaves the capsule on the artifact channel after the
 * job is dead (capsule/protocol.h): the token, then chunks of /work/artifacts' tar stream and,
 * with cache paths, of the build cache's (docs/cache.md). A stream ends early, without reading
 * what is left of it, when its next entry would pass the host's bounds or the host asks for no
 * more of it (stop-records.c). */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capsule-init/init-internal.h"
#include "capsule/layer-diff.h"
#include "common/fd-util.h"
#include "common/path-util.h"

/* ---- chunks ------------------------------------------------------------------------------ */

typedef struct Out {
        uint8_t kind;             /* CAPSULE_CHUNK_ARTIFACTS, _CACHE or _CHANGES */
        bool cache;               /* the cache's rules: links kept, times to the nanosecond */
        char refusal[512];        /* cache: why it cannot go out whole */
        uint64_t entries, bytes;  /* sent so far, counted as the host's importer counts them */
        uint64_t max_entries, max_bytes;
        char over[512];           /* why the stream ended before an entry: its bounds */
        bool stopped;             /* the host asked for no more of it */
} Out;

static Out out_of(uint8_t kind) {
        bool cache = kind == CAPSULE_CHUNK_CACHE;
        /* The changes count themselves (write_changes): the stream has no bound of its own. */
        return (Out) {
                .kind = kind,
                .cache = cache,
                .max_entries = cache ? bounds.cache_entries : kind == CAPSULE_CHUNK_CHANGES ? UINT64_MAX : bounds.art_entries,
                .max_bytes = cache ? bounds.cache_bytes : kind == CAPSULE_CHUNK_CHANGES ? UINT64_MAX : bounds.art_bytes,
        };
}

/* Ended here, by init or by the host: nothing more of the stream may reach the channel. */
static bool out_ended(Out *o) {
        if (!o->over[0] && !o->stopped)
                o->stopped = control_stopped(o->kind);
        return o->over[0] || o->stopped;
}

static int put_chunk(uint8_t kind, const void *data, size_t len) {
        uint8_t h[CAPSULE_CHUNK_HEADER] = { kind, (uint8_t) len, (uint8_t) (len >> 8), (uint8_t) (len >> 16),
                                            (uint8_t) (len >> 24) };
        int r = write_all(STDOUT_FILENO, h, sizeof(h));
        return r < 0 ? r : write_all(STDOUT_FILENO, data, len);
}

static la_ssize_t chunk_write(struct archive *a, void *userdata, const void *buf, size_t len) {
        Out *o = userdata;
        const uint8_t *p = buf;
        /* A failed write, so libarchive stops too: it pads what an entry still owes (100 GiB of
         * a sparse file's zeros) through this very callback. */
        if (out_ended(o)) {
                archive_set_error(a, ECANCELED, "the stream was ended");
                return -1;
        }
        for (size_t left = len; left > 0;) {
                size_t n = MIN(left, (size_t) CAPSULE_CHUNK_MAX);
                int r = put_chunk(o->kind, p, n);
                if (r < 0) {
                        archive_set_error(a, -r, "cannot write the channel: %s", strerror(-r));
                        return -1;
                }
                p += n;
                left -= n;
        }
        return (la_ssize_t) len;
}

static int archive_result(struct archive *a, const Out *o, int r) {
        if (r == ARCHIVE_OK || r == ARCHIVE_WARN)
                return 0;
        if (o->over[0] || o->stopped)
                return -ECANCELED; /* said once, where the stream ends (stream_ended) */
        say("%s: %s", o->cache ? "cache" : "artifacts", archive_error_string(a) ?: "archive error");
        return -EIO;
}

/* The cache cannot go out whole: the first reason is the one the host is told. */
static int refuse(Out *o, const char *fmt, ...) _printf_(2, 3);
static int refuse(Out *o, const char *fmt, ...) {
        va_list ap;
        if (!o->refusal[0]) {
                va_start(ap, fmt);
                vsnprintf(o->refusal, sizeof(o->refusal), fmt, ap);
                va_end(ap);
        }
        return -ENOTSUP;
}

/* One more entry of `bytes` bytes (a file's size, holes included, sent or kept; a symbolic
 * link's target), counted as the host's importer counts them. Past its bounds the stream ends
 * here, before the entry's header and without reading it, in the importer's words (-E2BIG). */
static int count(Out *o, const char *path, uint64_t bytes) {
        const char *what = o->cache ? "cache" : "artifacts";
        if (o->entries >= o->max_entries)
                snprintf(o->over, sizeof(o->over), "%s: more than %llu entries (at '%s'); the capsule did not send it",
                         what, (unsigned long long) o->max_entries, path);
        else if (bytes > o->max_bytes - o->bytes)
                snprintf(o->over, sizeof(o->over), "%s: more than %llu bytes (at '%s'); the capsule did not send it",
                         what, (unsigned long long) o->max_bytes, path);
        else {
                o->entries++;
                o->bytes += bytes;
                return 0;
        }
        return -E2BIG;
}

/* ---- one tree --------------------------------------------------------------------------- */

static int tar_tree(struct archive *a, Out *o, int dir, char *path, size_t len, unsigned depth);

static int tar_file_data(struct archive *a, Out *o, int fd, int64_t size, const char *path) {
        static char buf[COPY_BUF];
        int r = 0;
        for (int64_t left = size; r >= 0 && left > 0;) {
                ssize_t k = read(fd, buf, (size_t) MIN((int64_t) sizeof(buf), left));
                if (k < 0 && errno == EINTR)
                        continue;
                /* An artifact cut short is padded with zeros by libarchive; a cache entry is not
                 * sent cut: make would trust its time over its broken content. */
                if (k <= 0 && o->cache)
                        return refuse(o, "'%s' could not be read whole: %s", path, k < 0 ? strerror(errno) : "it shrank");
                if (k <= 0)
                        break;
                if (archive_write_data(a, buf, (size_t) k) != k)
                        r = archive_result(a, o, ARCHIVE_FATAL);
                left -= k;
        }
        return r >= 0 ? archive_result(a, o, archive_write_finish_entry(a)) : r;
}

/* A symbolic link of the cache: as it is (the host judges where it points). */
static int tar_symlink(struct archive *a, Out *o, int dir, const char *name, const char *path, struct archive_entry *e) {
        char target[PATH_MAX];
        ssize_t k = readlinkat(dir, name, target, sizeof(target) - 1);
        if (k < 0)
                return refuse(o, "cannot read the link '%s': %s", path, strerror(errno));
        target[k] = 0;
        int r = count(o, path, (uint64_t) k);
        if (r < 0)
                return r;
        archive_entry_set_filetype(e, AE_IFLNK);
        archive_entry_set_perm(e, 0777);
        archive_entry_set_symlink(e, target);
        return archive_result(a, o, archive_write_header(a, e));
}

/* One entry of dir: artifacts take regular files and directories (anything else is skipped),
 * and what is below a directory; the cache takes symbolic links too, fails on anything else,
 * and takes a directory alone (its contents that changed are events of their own). */
static int tar_entry(struct archive *a, Out *o, int dir, const char *name, char *path, size_t len, unsigned depth) {
        struct stat st;
        size_t nl = strlen(name);
        int r = 0;

        if (len + nl + 2 > PATH_MAX) {
                if (o->cache)
                        return refuse(o, "a name longer than PATH_MAX below '%s'", path);
                say("artifacts: skipping a name longer than PATH_MAX");
                artifacts_skipped++;
                return 0;
        }
        if (len > 0)
                path[len++] = '/';
        memcpy(path + len, name, nl + 1);
        len += nl;

        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return o->cache ? refuse(o, "cannot look at '%s': %s", path, strerror(errno)) : -errno;
        struct archive_entry *e = archive_entry_new();
        if (!e)
                return -ENOMEM;
        archive_entry_set_pathname(e, path);
        archive_entry_set_mtime(e, st.st_mtim.tv_sec, o->cache ? st.st_mtim.tv_nsec : 0);
        if (o->cache && S_ISLNK(st.st_mode)) {
                r = tar_symlink(a, o, dir, name, path, e);
                archive_entry_free(e);
                return r;
        }
        if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
                archive_entry_free(e);
                if (o->cache)
                        return refuse(o, "'%s' is not a regular file, a directory or a symbolic link", path);
                say("artifacts: skipping '%s' (only regular files and directories leave)", path);
                artifacts_skipped++;
                return 0;
        }
        int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
        /* Judge the opened object, not the name. */
        if (fd < 0 || fstat(fd, &st) < 0 || (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))) {
                r = fd < 0 ? -errno : 0;
                if (fd >= 0)
                        close(fd);
                archive_entry_free(e);
                if (o->cache)
                        return refuse(o, "cannot read '%s': %s", path, r < 0 ? strerror(-r) : "it changed type");
                if (r < 0)
                        return r;
                artifacts_skipped++;
                return 0;
        }
        mode_t perm = o->cache ? (st.st_mode & 0777) : S_ISDIR(st.st_mode) || (st.st_mode & S_IXUSR) ? 0755 : 0644;
        archive_entry_set_perm(e, perm);
        if (S_ISDIR(st.st_mode)) {
                archive_entry_set_filetype(e, AE_IFDIR);
                r = count(o, path, 0);
                if (r >= 0)
                        r = archive_result(a, o, archive_write_header(a, e));
                /* The cache's directories come one event each (write_cache). */
                if (r >= 0 && !o->cache)
                        r = tar_tree(a, o, fd, path, len, depth + 1);
        } else {
                archive_entry_set_filetype(e, AE_IFREG);
                archive_entry_set_size(e, st.st_size);
                r = count(o, path, (uint64_t) st.st_size);
                if (r >= 0)
                        r = archive_result(a, o, archive_write_header(a, e));
                if (r >= 0)
                        r = tar_file_data(a, o, fd, st.st_size, path);
        }
        archive_entry_free(e);
        close(fd);
        return r;
}

static int tar_tree(struct archive *a, Out *o, int dir, char *path, size_t len, unsigned depth) {
        int r = 0;

        if (depth > MAX_DEPTH) {
                if (o->cache)
                        return refuse(o, "'%s' is deeper than %d levels", path, MAX_DEPTH);
                say("artifacts: skipping '%s' (deeper than %d levels)", path, MAX_DEPTH);
                artifacts_skipped++;
                return 0;
        }
        DIR *d = opendir_fd(dir);
        if (!d)
                return o->cache ? refuse(o, "cannot read '%s': %s", path, strerror(errno)) : -errno;
        struct dirent *de;
        while (r >= 0 && (errno = 0, de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                init_utf8_names();
                r = tar_entry(a, o, dir, de->d_name, path, len, depth);
                path[len] = 0;
        }
        if (r >= 0 && errno != 0)
                r = o->cache ? refuse(o, "cannot read '%s': %s", path, strerror(errno)) : -errno;
        closedir(d);
        return r;
}

/* ---- the two streams -------------------------------------------------------------------- */

static struct archive *stream_open(Out *o) {
        struct archive *a = archive_write_new();
        if (!a)
                return NULL;
        /* The cache's times to the nanosecond: only full pax records them (the restricted
         * flavour drops what ustar cannot hold). */
        if (archive_result(a, o, o->cache ? archive_write_set_format_pax(a) : archive_write_set_format_pax_restricted(a)) < 0 ||
            archive_result(a, o, archive_write_set_bytes_per_block(a, 64 * 1024)) < 0 ||
            archive_result(a, o, archive_write_set_bytes_in_last_block(a, 1)) < 0 ||
            archive_result(a, o, archive_write_open(a, o, NULL, chunk_write, NULL)) < 0) {
                archive_write_free(a);
                return NULL;
        }
        return a;
}

static int stream_close(struct archive *a, const Out *o, int r) {
        if (archive_write_close(a) != ARCHIVE_OK && r >= 0)
                r = archive_result(a, o, ARCHIVE_FATAL);
        archive_write_free(a);
        return r;
}

/* After stream_close: a stream ended over its bounds is followed by its 'a' or 'c' chunk, which
 * tells the host why (-E2BIG); one the host stopped is said in the log (-ECANCELED); else r. */
static int stream_ended(const Out *o, int r) {
        if (o->over[0]) {
                say("%s", o->over);
                int k = put_chunk(o->cache ? CAPSULE_CHUNK_CACHE_OVER : CAPSULE_CHUNK_ARTIFACTS_OVER, o->over, strlen(o->over));
                return k < 0 ? k : -E2BIG;
        }
        if (o->stopped) {
                say("%s: the worker takes no more of %s; the rest was not sent", o->cache ? "cache" : "artifacts", o->cache ? "it" : "them");
                return -ECANCELED;
        }
        return r;
}

static int write_artifacts(void) {
        static char path[PATH_MAX];
        Out o = out_of(CAPSULE_CHUNK_ARTIFACTS);
        struct archive *a = stream_open(&o);
        int r = 0;
        if (!a)
                return -ENOMEM;
        int dir = open(CAPSULE_WORK_PATH "/" CAPSULE_ARTIFACTS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir >= 0) {
                path[0] = 0;
                r = tar_tree(a, &o, dir, path, 0, 0);
                close(dir);
        } else if (errno != ENOENT)
                say("artifacts: '" CAPSULE_WORK_PATH "/" CAPSULE_ARTIFACTS_DIR "' is not a directory (%s); no artifacts",
                    strerror(errno));
        r = stream_ended(&o, stream_close(a, &o, r));
        /* Stopped by the host: init sent what it was asked for (the host knows why it asked). */
        return r == -ECANCELED && o.stopped ? 0 : r;
}

int open_work_dir(const char *path) {
        int work = open(CAPSULE_WORK_PATH, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (work < 0)
                return -errno;
        int fd = open_dir_components(work, path);
        close(work);
        return fd;
}

/* ---- the cache's changes (capsule/protocol.h, CAPSULE_CHUNK_CACHE) ---------------------- */

typedef struct CacheWalk {
        struct archive *a;
        Out *o;
        size_t i;         /* the cache path */
        FILE *list;       /* CAPSULE_CACHE_DELETED */
        uint64_t list_bytes;
} CacheWalk;

static void list_path(FILE *f, const char *p);
static size_t list_path_len(const char *p);

/* One change of the job's under cache path i, from its overlay's upper directory. */
static int cache_event(const LayerEvent *ev, void *userdata) {
        static char path[PATH_MAX];
        CacheWalk *w = userdata;
        size_t n = strlen(ev->path), leaf = strlen(ev->name);
        int k = snprintf(path, sizeof(path), "%zu/%s", w->i, ev->path);

        if (out_ended(w->o))
                return -ECANCELED;
        if (k < 0 || (size_t) k >= sizeof(path) || leaf > n)
                return refuse(w->o, "a name longer than PATH_MAX below '%s'", cache_paths[w->i]);
        switch (ev->change) {
        case LAYER_DELETED:
                w->list_bytes += list_path_len(path) + 1;
                if (w->list_bytes > CAPSULE_CHANGES_LIST_MAX)
                        return refuse(w->o, "more than %u bytes of deletions", (unsigned) CAPSULE_CHANGES_LIST_MAX);
                list_path(w->list, path);
                fputc('\n', w->list);
                return 0;
        case LAYER_REFUSED:
                return refuse(w->o, "'%s' is %s", path, ev->why);
        default: {
                /* tar_entry names it path + '/' + name. */
                size_t len = (size_t) k - leaf - 1;
                path[len] = 0;
                init_utf8_names();
                return tar_entry(w->a, w->o, ev->dir_fd, ev->name, path, len, 0);
        }
        }
}

/* Cache path i: the directory "<i>" (the overlay's root, its mode and times), then what the job
 * changed below it. */
static int tar_cache_path(CacheWalk *w, size_t i) {
        static char path[PATH_MAX];
        Out *o = w->o;
        snprintf(path, sizeof(path), "%zu", i);
        int fd = open_work_dir(cache_paths[i]);
        if (fd < 0)
                return refuse(o, "cannot open '" CAPSULE_WORK_PATH "/%s': %s", cache_paths[i], strerror(-fd));
        struct stat st;
        if (fstat(fd, &st) < 0) {
                close(fd);
                return refuse(o, "cannot look at '" CAPSULE_WORK_PATH "/%s': %s", cache_paths[i], strerror(errno));
        }
        struct archive_entry *e = archive_entry_new();
        int r = e ? count(o, path, 0) : -ENOMEM;
        if (r >= 0) {
                archive_entry_set_pathname(e, path);
                archive_entry_set_filetype(e, AE_IFDIR);
                archive_entry_set_perm(e, st.st_mode & 0777);
                archive_entry_set_mtime(e, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
                r = archive_result(w->a, o, archive_write_header(w->a, e));
        }
        archive_entry_free(e);
        w->i = i;
        if (r >= 0) {
                r = layer_diff(cache_upper_fd[i], cache_lower_fd[i], fd, NULL, LAYER_DIFF_CACHE, cache_event, w);
                if (r < 0 && !o->refusal[0] && !o->over[0] && r != -ECANCELED)
                        r = refuse(o, "cannot read what the job changed in '" CAPSULE_WORK_PATH "/%s': %s", cache_paths[i],
                                   strerror(-r));
        }
        close(fd);
        return r;
}

static int tar_list(struct archive *a, Out *o, const char *name, const char *buf, size_t len);

static CacheOut write_cache(void) {
        Out o = out_of(CAPSULE_CHUNK_CACHE);
        char *buf = NULL;
        size_t len = 0;
        CacheWalk w = { .a = stream_open(&o), .o = &o, .list = open_memstream(&buf, &len) };
        int r = w.a && w.list ? 0 : -ENOMEM;
        for (size_t i = 0; r >= 0 && i < n_cache_paths; i++)
                r = tar_cache_path(&w, i);
        if (w.list && fclose(w.list) != 0 && r >= 0)
                r = -ENOMEM;
        if (r >= 0 && !out_ended(&o) && (r = count(&o, CAPSULE_CACHE_DELETED, len)) >= 0)
                r = tar_list(w.a, &o, CAPSULE_CACHE_DELETED, buf, len);
        free(buf);
        if (w.a)
                r = stream_close(w.a, &o, r);
        r = stream_ended(&o, r);
        if (r >= 0)
                return CACHE_OUT_OK;
        if (o.over[0] || o.stopped)
                return CACHE_OUT_FAILED; /* the host was told, or told us */
        if (!o.refusal[0])
                snprintf(o.refusal, sizeof(o.refusal), "the cache stream failed: %s", strerror(-r));
        say("cache: %s; nothing of it is kept", o.refusal);
        (void) put_chunk(CAPSULE_CHUNK_CACHE_REFUSED, o.refusal, strlen(o.refusal));
        return CACHE_OUT_FAILED;
}

/* ---- the changes (capsule/protocol.h, CAPSULE_CHUNK_CHANGES) ------------------------------ */

typedef struct Changes {
        struct archive *a;
        Out *o;
        FILE *list;
        uint64_t entries, bytes, list_bytes;
        char incomplete[512];
} Changes;

/* A path in the list: printable ASCII but backslash, and bytes from 0x80, as they are, every
 * other byte \xHH. Its length counts against CAPSULE_CHANGES_LIST_MAX. */
static bool list_raw(unsigned char c) {
        return (c > 0x20 && c < 0x7f && c != '\\') || c >= 0x80;
}

static size_t list_path_len(const char *p) {
        size_t n = 0;
        for (const unsigned char *c = (const unsigned char *) p; *c; c++)
                n += list_raw(*c) ? 1 : 4;
        return n;
}

static void list_path(FILE *f, const char *p) {
        for (const unsigned char *c = (const unsigned char *) p; *c; c++)
                if (list_raw(*c))
                        fputc(*c, f);
                else
                        fprintf(f, "\\x%02x", *c);
}

/* A file the job wrote, into the stream at its path; what it is now is judged on the opened
 * descriptor (no job process exists: nothing changes it meanwhile). */
static int change_file(Changes *c, const LayerEvent *ev) {
        int fd = openat(ev->dir_fd, ev->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                int r = fd < 0 ? -errno : -EIO;
                if (fd >= 0)
                        close(fd);
                return r;
        }
        struct archive_entry *e = archive_entry_new();
        if (!e) {
                close(fd);
                return -ENOMEM;
        }
        archive_entry_set_pathname(e, ev->path);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, (st.st_mode & S_IXUSR) ? 0755 : 0644);
        archive_entry_set_size(e, st.st_size);
        archive_entry_set_mtime(e, st.st_mtim.tv_sec, 0);
        int r = archive_result(c->a, c->o, archive_write_header(c->a, e));
        if (r >= 0)
                r = tar_file_data(c->a, c->o, fd, st.st_size, ev->path);
        archive_entry_free(e);
        close(fd);
        return r;
}

static int change_event(const LayerEvent *ev, void *userdata) {
        Changes *c = userdata;
        uint64_t size = ev->change == LAYER_FILE ? (uint64_t) ev->st->st_size : 0;
        char p[64];

        if (out_ended(c->o))
                return -ECANCELED;
        /* The line's bound: its path, fields and reason, and room for the end line. */
        uint64_t line = list_path_len(ev->path) + 64 + (ev->why ? strlen(ev->why) : 0);
        if (c->list_bytes + line + 1024 > CAPSULE_CHANGES_LIST_MAX) {
                snprintf(c->incomplete, sizeof(c->incomplete), "more than %u bytes of list (at '%s'); the rest is not listed",
                         (unsigned) CAPSULE_CHANGES_LIST_MAX, printable_name(ev->path, p, sizeof(p)));
                return -E2BIG;
        }
        c->list_bytes += line;
        if (c->entries >= changes_max_entries || size > changes_max_bytes - c->bytes) {
                snprintf(c->incomplete, sizeof(c->incomplete), "more than %llu %s (at '%s'); the rest is not listed",
                         (unsigned long long) (c->entries >= changes_max_entries ? changes_max_entries : changes_max_bytes),
                         c->entries >= changes_max_entries ? "changes" : "bytes of changed files",
                         printable_name(ev->path, p, sizeof(p)));
                return -E2BIG;
        }
        c->entries++;
        c->bytes += size;
        init_utf8_names();
        switch (ev->change) {
        case LAYER_FILE:
                fprintf(c->list, "file\t%s\t%llu\t", (ev->st->st_mode & S_IXUSR) ? "755" : "644", (unsigned long long) size);
                list_path(c->list, ev->path);
                fputc('\n', c->list);
                return change_file(c, ev);
        case LAYER_DIR:
                fputs("dir\t", c->list);
                break;
        case LAYER_DELETED:
                fputs("deleted\t", c->list);
                break;
        case LAYER_REFUSED:
        case LAYER_LINK: /* only with LAYER_DIFF_CACHE */
                fputs("refused\t", c->list);
                list_path(c->list, ev->path);
                fprintf(c->list, "\t%s\n", ev->why ? ev->why : "a symbolic link");
                return 0;
        }
        list_path(c->list, ev->path);
        fputc('\n', c->list);
        return 0;
}

/* A list, the stream's last entry: a regular file of len bytes from buf. */
static int tar_list(struct archive *a, Out *o, const char *name, const char *buf, size_t len) {
        struct archive_entry *e = archive_entry_new();
        if (!e)
                return -ENOMEM;
        archive_entry_set_pathname(e, name);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, (la_int64_t) len);
        int r = archive_result(a, o, archive_write_header(a, e));
        if (r >= 0 && len > 0 && archive_write_data(a, buf, len) != (la_ssize_t) len)
                r = archive_result(a, o, ARCHIVE_FATAL);
        if (r >= 0)
                r = archive_result(a, o, archive_write_finish_entry(a));
        archive_entry_free(e);
        return r;
}

/* What the job changed under /work, from its layer (capsule/layer-diff.h), when the host asked
 * (CAPSULE_CHANGES_RECORD): never the control directory, artifacts/ or a cache path. */
static int write_changes(void) {
        Out o = out_of(CAPSULE_CHUNK_CHANGES);
        char *buf = NULL;
        size_t len = 0;
        Changes c = { .o = &o, .list = open_memstream(&buf, &len), .a = stream_open(&o) };
        int r = c.list && c.a ? 0 : -ENOMEM;
        int merged = r >= 0 ? open(CAPSULE_WORK_PATH, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
        const char *skip[CAPSULE_CACHE_PATHS_MAX + 3] = { ".tentaflake-worker", CAPSULE_ARTIFACTS_DIR };
        for (size_t i = 0; i < n_cache_paths; i++)
                skip[2 + i] = cache_paths[i];
        if (r >= 0 && merged < 0)
                r = -errno;
        if (r >= 0) {
                r = layer_diff(layer_upper_fd, layer_lower_fd, merged, skip, 0, change_event, &c);
                if (r == -E2BIG)
                        r = 0; /* listed as incomplete */
        }
        if (merged >= 0)
                close(merged);
        if (r < 0 && r != -ECANCELED && !c.incomplete[0])
                snprintf(c.incomplete, sizeof(c.incomplete), "the changes could not be read: %s", strerror(-r));
        if (c.list) {
                if (c.incomplete[0])
                        fprintf(c.list, "end\tincomplete\t%s\n", c.incomplete);
                else
                        fputs("end\tcomplete\n", c.list);
                if (fclose(c.list) != 0 && r >= 0)
                        r = -ENOMEM;
        }
        if (c.a && r != -ECANCELED && !out_ended(&o)) {
                /* The list, last: every change, and whether that is all of them. */
                int k = tar_list(c.a, c.o, CAPSULE_CHANGES_LIST, buf, len);
                if (r >= 0)
                        r = k;
        }
        free(buf);
        if (c.a)
                r = stream_close(c.a, &o, r);
        if (o.stopped) {
                say("changes: the worker takes no more of them; the rest was not sent");
                return 0;
        }
        if (c.incomplete[0])
                say("changes: %s", c.incomplete);
        return r;
}

static la_ssize_t discard_write(struct archive *a, void *userdata, const void *buf, size_t len) {
        (void) a;
        (void) userdata;
        (void) buf;
        return (la_ssize_t) len;
}

void outputs_warm_up(void) {
        /* The first header a process writes loads what libarchive converts names with (glibc's
         * iconv, its module cache read from the root: files, so system calls of gVisor's, about
         * 1.5 ms of every job's outputs otherwise, measured inside). Written to nowhere. */
        struct archive *a = archive_write_new();
        struct archive_entry *e = archive_entry_new();
        if (a && e && archive_write_set_format_pax_restricted(a) == ARCHIVE_OK &&
            archive_write_open(a, NULL, NULL, discard_write, NULL) == ARCHIVE_OK) {
                archive_entry_set_pathname(e, CAPSULE_CHANGES_LIST);
                archive_entry_set_filetype(e, AE_IFREG);
                archive_entry_set_perm(e, 0644);
                archive_entry_set_size(e, 0);
                (void) archive_write_header(a, e);
                (void) archive_write_close(a);
        }
        archive_entry_free(e);
        archive_write_free(a);
}

int write_outputs(CacheOut *ret_cache) {
        *ret_cache = CACHE_OUT_NONE;
        /* Before the token: the host writes its stop records only once it has read it. */
        control_drain();
        /* The token first: the host ignores everything before it on this channel. */
        int r = write_all(STDOUT_FILENO, secret, CAPSULE_TOKEN_SIZE);
        if (r < 0)
                return r;
        r = write_artifacts();
        if (n_cache_paths > 0)
                *ret_cache = write_cache();
        if (changes_max_entries > 0 && layer_upper_fd >= 0)
                (void) write_changes(); /* the list says how it went */
        return r;
}
