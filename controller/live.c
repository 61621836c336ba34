/* SPDX-License-Identifier: MIT */
/* Following a job's live log (live.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "controller/live.h"
#include "parser/request.h"

#define LIVE_SUFFIX ".live.log"

/* The live log, or with final <id>/job.log: read-only, no link followed in the last component
 * (the results directory's own entries are root's), a regular file or nothing. */
static int log_open(int results_fd, const char *id, bool final) {
        char name[REQUEST_ID_MAX + sizeof(LIVE_SUFFIX) + sizeof("/job.log")];
        struct stat st;
        if (!request_id_is_valid(id))
                return -EINVAL;
        snprintf(name, sizeof(name), final ? "%s/job.log" : "%s" LIVE_SUFFIX, id);
        _cleanup_close_ int fd = openat(results_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADF;
        return TAKE_FD(fd);
}

static int read_at(int fd, uint64_t offset, char *buf, size_t max, size_t *ret_len) {
        size_t n = 0;
        if (offset > INT64_MAX)
                return -EINVAL;
        while (n < max) {
                ssize_t k = pread(fd, buf + n, max - n, (off_t) (offset + n));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        *ret_len = n;
        return 0;
}

/* Of the n bytes read, how many go now: up to the last newline; all of them when no newline
 * is there and the partial line has waited long enough or fills the buffer. */
static size_t take(LiveFollow *l, const char *buf, size_t n, size_t max, usec_t now) {
        const char *nl = memrchr(buf, '\n', n);
        if (nl) {
                size_t k = (size_t) (nl - buf) + 1;
                l->partial_since = k < n ? now : 0;
                return k;
        }
        if (n == 0)
                return 0;
        if (!l->partial_since)
                l->partial_since = now;
        if (n >= max || now - l->partial_since >= LIVE_PARTIAL_USEC) {
                l->partial_since = 0;
                return n;
        }
        return 0;
}

int live_follow_next(LiveFollow *l, int results_fd, const char *id, int inotify_fd, char *buf, size_t max,
                     usec_t now, size_t *ret_len) {
        size_t n;
        *ret_len = 0;
        if (l->fd < 0) {
                int fd = log_open(results_fd, id, false);
                if (fd == -ENOENT)
                        return 0; /* not running yet, or ended: job.log says the rest */
                if (fd < 0)
                        return fd;
                l->fd = fd;
                if (inotify_fd >= 0) {
                        char path[64];
                        snprintf(path, sizeof(path), "/proc/self/fd/%d", l->fd);
                        l->wd = inotify_add_watch(inotify_fd, path, IN_MODIFY);
                }
        }
        int r = read_at(l->fd, l->offset, buf, max, &n);
        if (r < 0)
                return r;
        size_t k = take(l, buf, n, max, now);
        l->offset += k;
        *ret_len = k;
        return 0;
}

int live_follow_due_ms(const LiveFollow *l, usec_t now) {
        if (!l->partial_since)
                return -1;
        usec_t due = l->partial_since + LIVE_PARTIAL_USEC;
        return due <= now ? 0 : (int) ((due - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC);
}

void live_follow_close(LiveFollow *l, int inotify_fd) {
        if (l->wd >= 0 && inotify_fd >= 0)
                (void) inotify_rm_watch(inotify_fd, l->wd);
        l->wd = -1;
        l->fd = safe_close(l->fd);
}

json_t *live_json_text(const char *buf, size_t len) {
        json_t *j = memchr(buf, 0, len) ? NULL : json_stringn(buf, len);
        if (j)
                return j;
        _cleanup_free_ char *copy = malloc(len + 1);
        if (!copy)
                return NULL;
        for (size_t i = 0; i < len; i++)
                copy[i] = buf[i] == 0 || (unsigned char) buf[i] > 0x7f ? '?' : buf[i];
        copy[len] = 0;
        return json_stringn(copy, len);
}

int live_log_read(int results_fd, const char *id, bool final, uint64_t offset, size_t max, char **ret,
                  size_t *ret_len) {
        _cleanup_close_ int fd = log_open(results_fd, id, final);
        if (fd < 0)
                return fd;
        _cleanup_free_ char *buf = malloc(max + 1);
        size_t n;
        if (!buf)
                return -ENOMEM;
        int r = read_at(fd, offset, buf, max, &n);
        if (r < 0)
                return r;
        buf[n] = 0;
        *ret = TAKE_PTR(buf);
        *ret_len = n;
        return 0;
}
