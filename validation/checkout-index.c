/* SPDX-License-Identifier: MIT */
/* The kept checkout's index, a line at a time (validation/checkout-index.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/macro.h"
#include "common/sha256.h"
#include "validation/checkout-index.h"

#define INDEX_VERSION 2
/* The longest line: a GIT_PATH_MAX path written as \u escapes and the numbers. */
#define LINE_MAX_BYTES (GIT_PATH_MAX * 6 + 512)
#define IO_CHUNK (64U << 10)

CheckoutIndex *checkout_index_free(CheckoutIndex *x) {
        if (!x)
                return NULL;
        for (size_t i = 0; i < x->n; i++)
                free(x->records[i].path);
        free(x->records);
        free(x);
        return NULL;
}

static int record_cmp(const void *a, const void *b) {
        return strcmp(((const CheckoutRecord *) a)->path, ((const CheckoutRecord *) b)->path);
}

CheckoutRecord *checkout_index_find(const CheckoutIndex *x, const char *path) {
        CheckoutRecord key = {.path = (char *) path};
        return x && x->n ? bsearch(&key, x->records, x->n, sizeof(CheckoutRecord), record_cmp) : NULL;
}

bool checkout_record_matches(const CheckoutRecord *rec, const VManifestEntry *en, const struct stat *st) {
        return rec->mode == en->mode && memcmp(rec->blob, en->blob, GIT_OID_SIZE) == 0 &&
               rec->size == (uint64_t) st->st_size && rec->ino == (uint64_t) st->st_ino &&
               rec->ctime_sec == (int64_t) st->st_ctim.tv_sec && rec->ctime_nsec == (int64_t) st->st_ctim.tv_nsec;
}

/* One line: the header (first) or a record. 1: taken; 0: the index is not usable. */
static int take_line(CheckoutIndex *x, const char *line, size_t len, bool first, const char *repo, size_t *cap,
                     size_t max_records) {
        _cleanup_json_ json_t *j = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
        if (first) {
                json_t *v = json_object_get(j, "version"), *rp = json_object_get(j, "repo");
                return json_is_integer(v) && json_integer_value(v) == INDEX_VERSION && json_is_string(rp) &&
                       streq(json_string_value(rp), repo);
        }
        const char *path = json_string_value(json_array_get(j, 0)), *hex = json_string_value(json_array_get(j, 2));
        json_int_t num[5];
        if (!json_is_array(j) || json_array_size(j) != 7 || !path || !hex || strlen(hex) != GIT_OID_HEX_SIZE - 1 ||
            x->n >= max_records)
                return 0;
        for (size_t k = 0; k < 5; k++) {
                json_t *n = json_array_get(j, k == 0 ? 1 : k + 2);
                if (!json_is_integer(n))
                        return 0;
                num[k] = json_integer_value(n);
        }
        if (num[0] < 0 || num[0] > UINT32_MAX || num[1] < 0 || num[2] < 0)
                return 0;
        if (x->n == *cap) {
                size_t c = MAX(*cap * 2, (size_t) 1024);
                CheckoutRecord *r = reallocarray(x->records, c, sizeof(CheckoutRecord));
                if (!r)
                        return -ENOMEM;
                x->records = r;
                *cap = c;
        }
        CheckoutRecord *rec = &x->records[x->n];
        *rec = (CheckoutRecord) {.mode = (uint32_t) num[0], .size = (uint64_t) num[1], .ino = (uint64_t) num[2],
                                 .ctime_sec = num[3], .ctime_nsec = num[4]};
        if (sha256_from_hex(hex, rec->blob) < 0)
                return 0;
        rec->path = strdup(path);
        if (!rec->path)
                return -ENOMEM;
        x->n++;
        return 1;
}

/* Read fd a line at a time into x. 1: complete; 0: not usable. */
static int read_lines(int fd, CheckoutIndex *x, const char *repo, size_t max_records) {
        _cleanup_free_ char *buf = malloc(LINE_MAX_BYTES + IO_CHUNK);
        size_t len = 0, cap = 0;
        bool first = true;

        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t n = read(fd, buf + len, LINE_MAX_BYTES + IO_CHUNK - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return 0;
                len += (size_t) n;
                size_t start = 0;
                for (char *nl; (nl = memchr(buf + start, '\n', len - start));) {
                        int r = take_line(x, buf + start, (size_t) (nl - buf) - start, first, repo, &cap, max_records);
                        if (r <= 0)
                                return r;
                        first = false;
                        start = (size_t) (nl - buf) + 1;
                }
                memmove(buf, buf + start, len - start);
                len -= start;
                if (n == 0)
                        return len == 0 && !first; /* a last line without its newline: cut short */
                if (len >= LINE_MAX_BYTES)
                        return 0;
        }
}

int checkout_index_load(int dir_fd, const char *name, const char *repo, size_t max_records, CheckoutIndex **ret) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_(checkout_index_freep) CheckoutIndex *x = NULL;

        *ret = NULL;
        if (fd < 0)
                return 0;
        x = calloc(1, sizeof(*x));
        if (!x)
                return -ENOMEM;
        int r = read_lines(fd, x, repo, max_records);
        if (r <= 0)
                return r;
        qsort(x->records, x->n, sizeof(CheckoutRecord), record_cmp);
        for (size_t i = 1; i < x->n; i++)
                if (streq(x->records[i - 1].path, x->records[i].path))
                        return 0;
        *ret = TAKE_PTR(x);
        return 0;
}

typedef struct Writer {
        int fd;
        char buf[IO_CHUNK];
        size_t len;
} Writer;

static int put(Writer *w, const char *s, size_t n) {
        if (w->len + n > sizeof(w->buf)) {
                int r = write_all(w->fd, w->buf, w->len);
                if (r < 0)
                        return r;
                w->len = 0;
        }
        if (n > sizeof(w->buf))
                return write_all(w->fd, s, n);
        memcpy(w->buf + w->len, s, n);
        w->len += n;
        return 0;
}

/* j as one compact line; takes j. */
static int put_line(Writer *w, json_t *j) {
        _cleanup_free_ char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!text)
                return -ENOMEM;
        int r = put(w, text, strlen(text));
        return r < 0 ? r : put(w, "\n", 1);
}

static int write_records(Writer *w, const char *repo, const VManifest *m, CheckoutStatFn stat_entry, void *userdata) {
        int r = put_line(w, json_pack("{s:i, s:s}", "version", INDEX_VERSION, "repo", repo));
        for (size_t i = 0; r >= 0 && i < m->n_entries; i++) {
                const VManifestEntry *en = &m->entries[i];
                char hex[GIT_OID_HEX_SIZE];
                struct stat st;
                r = stat_entry(i, &st, userdata);
                if (r < 0)
                        break;
                sha256_to_hex(en->blob, hex);
                r = put_line(w, json_pack("[s, I, s, I, I, I, I]", en->path, (json_int_t) en->mode, hex,
                                          (json_int_t) st.st_size, (json_int_t) st.st_ino,
                                          (json_int_t) st.st_ctim.tv_sec, (json_int_t) st.st_ctim.tv_nsec));
        }
        return r < 0 ? r : write_all(w->fd, w->buf, w->len);
}

int checkout_index_save(int dir_fd, const char *name, const char *repo, const VManifest *m, CheckoutStatFn stat_entry,
                        void *userdata) {
        _cleanup_free_ Writer *w = calloc(1, sizeof(Writer));
        char tmp[NAME_MAX + 1];
        uint64_t rnd;

        if (!w)
                return -ENOMEM;
        if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
                return -EIO;
        if (snprintf(tmp, sizeof(tmp), ".#%.200s.%016" PRIx64, name, rnd) >= (int) sizeof(tmp))
                return -ENAMETOOLONG;
        w->fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (w->fd < 0)
                return -errno;
        int r = write_records(w, repo, m, stat_entry, userdata);
        safe_close(w->fd);
        if (r >= 0 && renameat(dir_fd, tmp, dir_fd, name) < 0)
                r = -errno;
        if (r < 0)
                (void) unlinkat(dir_fd, tmp, 0);
        return r;
}
