/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/time-util.h"
#include "controller/outcome.h"
#include "controller/status.h"
#include "parser/request.h"

#define ARTIFACT_DEPTH_MAX 64

int controller_exit_status(const json_t *result) {
        const char *s = json_string_value(json_object_get(result, "status"));
        json_t *code = json_object_get(result, "exit_code"), *sig = json_object_get(result, "signal");

        if (!s)
                return CONTROLLER_EXIT_NOT_RUN;
        if (streq(s, "succeeded"))
                return 0;
        if (streq(s, "failed")) {
                json_int_t c = json_is_integer(code) ? json_integer_value(code) : 1;
                /* An exit status is 8 bits; a non-zero one must stay non-zero. */
                return c >= 1 && c <= 255 ? (int) c : 1;
        }
        if (streq(s, "timed_out"))
                return CONTROLLER_EXIT_TIMED_OUT;
        if (streq(s, "killed")) {
                json_int_t n = json_is_integer(sig) ? json_integer_value(sig) : SIGKILL;
                if (n < 1 || n > 127)
                        n = SIGKILL;
                return CONTROLLER_EXIT_SIGNAL_BASE + (int) n;
        }
        return CONTROLLER_EXIT_NOT_RUN;
}

static int open_in_result(int results_fd, const char *id, const char *name, int flags) {
        char path[REQUEST_ID_MAX + 32];
        if (!request_id_is_valid(id))
                return -EINVAL;
        snprintf(path, sizeof(path), "%s/%s", id, name);
        int fd = openat(results_fd, path, flags | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

int controller_log_copy(int results_fd, const char *id, uint64_t offset, FILE *out) {
        _cleanup_close_ int fd = open_in_result(results_fd, id, "job.log", O_RDONLY | O_NONBLOCK);
        char buf[65536];
        if (fd == -ENOENT)
                return 0;
        if (fd < 0)
                return fd;
        if (offset > INT64_MAX)
                return -EINVAL;
        if (lseek(fd, (off_t) offset, SEEK_SET) < 0)
                return -errno;
        for (;;) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return fflush(out) == 0 ? 0 : -EIO;
                if (fwrite(buf, 1, (size_t) n, out) != (size_t) n)
                        return -EIO;
        }
}

int controller_log_tail(int results_fd, const char *id, size_t max, char **ret, bool *ret_cut) {
        _cleanup_close_ int fd = open_in_result(results_fd, id, "job.log", O_RDONLY | O_NONBLOCK);
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        bool cut = false;

        if (fd == -ENOENT) {
                *ret = strdup("");
                *ret_cut = false;
                return *ret ? 0 : -ENOMEM;
        }
        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADMSG;
        off_t off = 0;
        if ((uint64_t) st.st_size > max) {
                off = st.st_size - (off_t) max;
                cut = true;
        }
        buf = malloc(max + 1);
        if (!buf)
                return -ENOMEM;
        size_t len = 0;
        while (len < max) {
                ssize_t n = pread(fd, buf + len, max - len, off + (off_t) len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                len += (size_t) n;
        }
        buf[len] = 0;
        char *start = buf;
        if (cut) {
                /* Start at a line when one begins in the first quarter: no half line. */
                char *nl = memchr(buf, '\n', MIN(len, max / 4));
                if (nl)
                        start = nl + 1;
        }
        *ret = strdup(start);
        if (!*ret)
                return -ENOMEM;
        *ret_cut = cut;
        return 0;
}

typedef struct Walk {
        json_t *paths;
        size_t max;
        bool truncated;
} Walk;

static int walk(Walk *w, int dfd, const char *prefix, unsigned depth) {
        if (depth > ARTIFACT_DEPTH_MAX) {
                w->truncated = true;
                return 0;
        }
        DIR *d = opendir_fd(dfd);
        if (!d)
                return -errno;
        struct dirent *de;
        int r = 0;
        while ((de = readdir(d))) {
                char rel[PATH_MAX];
                struct stat st;
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (snprintf(rel, sizeof(rel), "%s%s", prefix, de->d_name) >= (int) sizeof(rel) ||
                    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int sub = open_dir_at(dfd, de->d_name);
                        if (sub < 0 || strlen(rel) + 2 > sizeof(rel))
                                continue;
                        strcat(rel, "/");
                        r = walk(w, sub, rel, depth + 1);
                        if (r < 0)
                                break;
                } else if (S_ISREG(st.st_mode)) {
                        if (json_array_size(w->paths) >= w->max) {
                                w->truncated = true;
                                continue;
                        }
                        /* The worker accepts any bytes as a name; a name that is not UTF-8
                         * cannot be JSON and is left out (and counted as left out). */
                        json_t *s = json_string(rel);
                        if (!s) {
                                w->truncated = true;
                                continue;
                        }
                        json_array_append_new(w->paths, s);
                }
        }
        closedir(d);
        return r;
}

static int cmp_json_strings(const void *a, const void *b) {
        return strcmp(json_string_value(*(json_t *const *) a), json_string_value(*(json_t *const *) b));
}

int controller_artifacts(int results_fd, const char *id, size_t max, json_t **ret, bool *ret_truncated) {
        _cleanup_close_ int fd = open_in_result(results_fd, id, "artifacts", O_RDONLY | O_DIRECTORY);
        Walk w = {.paths = json_array(), .max = max};
        if (!w.paths)
                return -ENOMEM;
        if (fd >= 0) {
                int r = walk(&w, fd, "", 0);
                if (r < 0) {
                        json_decref(w.paths);
                        return r;
                }
        } else if (fd != -ENOENT) {
                json_decref(w.paths);
                return fd;
        }
        /* Sorted, so the list reads the same every time. */
        size_t n = json_array_size(w.paths);
        json_t **v = n ? calloc(n, sizeof(*v)) : NULL;
        if (n && !v) {
                json_decref(w.paths);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                v[i] = json_incref(json_array_get(w.paths, i));
        if (n > 1)
                qsort(v, n, sizeof(*v), cmp_json_strings);
        json_array_clear(w.paths);
        for (size_t i = 0; i < n; i++)
                json_array_append_new(w.paths, v[i]);
        free(v);
        *ret = w.paths;
        *ret_truncated = w.truncated;
        return 0;
}
