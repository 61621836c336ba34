/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "orchestrator/store.h"

#define STATE_JSON_MAX (16 * 1024)
#define SEQ_FILE ".seq"

static const char *const state_names[_STATE_MAX] = {
        [STATE_PENDING] = "pending",
        [STATE_QUEUED] = "queued",
        [STATE_RUNNING] = "running",
        [STATE_FINAL] = "final",
};

const char *request_state_to_string(RequestState s) {
        return (unsigned) s < _STATE_MAX ? state_names[s] : "unknown";
}

static int request_state_from_string(const char *s) {
        for (int i = 0; i < _STATE_MAX; i++)
                if (streq(state_names[i], s))
                        return i;
        return -EINVAL;
}

int store_lock(int requests_fd) {
        /* A fresh open file description every time: flock() belongs to the description, so a
         * lock taken on an fd that forked processes share would not exclude them. */
        int fd = openat(requests_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        while (flock(fd, LOCK_EX) < 0)
                if (errno != EINTR) {
                        int r = -errno;
                        safe_close(fd);
                        return r;
                }
        return fd;
}

void store_unlock(int lock_fd) {
        safe_close(lock_fd); /* closing the last fd of the description releases the lock */
}

static json_t *record_to_json(const RequestRecord *r) {
        char sub[RFC3339_MAX], upd[RFC3339_MAX], dec[RFC3339_MAX];
        json_t *j = json_pack("{s:s, s:s, s:s?, s:I, s:s, s:s?, s:s, s:s, s:s?, s:s?, s:s?, s:s?}",
                         "id", r->id, "state", request_state_to_string(r->state),
                         "status", r->status[0] ? r->status : NULL, "seq", (json_int_t) r->seq,
                         "sha256", r->sha256, "action_class",
                         r->action_class >= 0 ? action_class_to_string(r->action_class) : NULL,
                         "submitted_at",
                         format_rfc3339(r->submitted_at, sub), "updated_at",
                         format_rfc3339(r->updated_at, upd), "decision",
                         r->decision[0] ? r->decision : NULL, "approver",
                         r->approver[0] ? r->approver : NULL, "decided_at",
                         r->decided_at ? format_rfc3339(r->decided_at, dec) : NULL, "reason",
                         r->reason[0] ? r->reason : NULL);
        /* Only when set: every record written before it existed reads as false. */
        if (j && r->ending_unrecorded && json_object_set_new(j, "ending_unrecorded", json_true()) < 0) {
                json_decref(j);
                return NULL;
        }
        return j;
}

static int copy_field(json_t *o, const char *key, char *dst, size_t size, bool required) {
        json_t *v = json_object_get(o, key);
        if (!v || json_is_null(v)) {
                dst[0] = 0;
                return required ? -EBADMSG : 0;
        }
        if (!json_is_string(v) || json_string_length(v) >= size)
                return -EBADMSG;
        memcpy(dst, json_string_value(v), json_string_length(v) + 1);
        return 0;
}

static int time_field(json_t *o, const char *key, usec_t *ret) {
        json_t *v = json_object_get(o, key);
        *ret = 0;
        if (!v || json_is_null(v))
                return 0;
        return json_is_string(v) ? parse_rfc3339(json_string_value(v), ret) : -EBADMSG;
}

static int record_from_json(json_t *o, RequestRecord *r) {
        char buf[32];
        int k;

        memset(r, 0, sizeof(*r));
        if (copy_field(o, "id", r->id, sizeof(r->id), true) < 0 || !request_id_is_valid(r->id) ||
            copy_field(o, "state", buf, sizeof(buf), true) < 0 ||
            (k = request_state_from_string(buf)) < 0)
                return -EBADMSG;
        r->state = (RequestState) k;
        if (copy_field(o, "status", r->status, sizeof(r->status), false) < 0 ||
            copy_field(o, "sha256", r->sha256, sizeof(r->sha256), true) < 0 ||
            copy_field(o, "action_class", buf, sizeof(buf), false) < 0)
                return -EBADMSG;
        r->action_class = -1;
        if (buf[0]) {
                if ((k = action_class_from_string(buf)) < 0)
                        return -EBADMSG;
                r->action_class = k;
        }
        json_t *seq = json_object_get(o, "seq");
        if (!json_is_integer(seq) || json_integer_value(seq) < 0)
                return -EBADMSG;
        r->seq = (uint64_t) json_integer_value(seq);
        if (time_field(o, "submitted_at", &r->submitted_at) < 0 ||
            time_field(o, "updated_at", &r->updated_at) < 0 ||
            time_field(o, "decided_at", &r->decided_at) < 0 ||
            copy_field(o, "decision", r->decision, sizeof(r->decision), false) < 0 ||
            copy_field(o, "approver", r->approver, sizeof(r->approver), false) < 0 ||
            copy_field(o, "reason", r->reason, sizeof(r->reason), false) < 0)
                return -EBADMSG;
        json_t *unrec = json_object_get(o, "ending_unrecorded");
        if (unrec && !json_is_boolean(unrec))
                return -EBADMSG;
        r->ending_unrecorded = json_is_true(unrec);
        return 0;
}

static int write_record(int dir_fd, const RequestRecord *rec) {
        _cleanup_(json_decrefp) json_t *j = record_to_json(rec);
        if (!j)
                return -ENOMEM;
        _cleanup_free_ char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        if (!s)
                return -ENOMEM;
        return write_file_atomic_at(dir_fd, "state.json", s, strlen(s), 0600, (uid_t) -1,
                                    (gid_t) -1);
}

/* The arrival counter: state_dir/requests/.seq, read and bumped under the store lock. */
static int next_seq(int requests_fd, uint64_t *ret) {
        _cleanup_close_ int fd = openat(requests_fd, SEQ_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        _cleanup_free_ char *buf = NULL;
        uint64_t v = 0;
        char out[32];
        int r;

        if (fd >= 0) {
                r = read_full_fd_bounded(fd, 30, &buf, NULL);
                if (r < 0)
                        return r;
                if (sscanf(buf, "%" SCNu64, &v) != 1)
                        return -EBADMSG;
        } else if (errno != ENOENT)
                return -errno;
        v++;
        snprintf(out, sizeof(out), "%" PRIu64 "\n", v);
        r = write_file_atomic_at(requests_fd, SEQ_FILE, out, strlen(out), 0600, (uid_t) -1, (gid_t) -1);
        if (r < 0)
                return r;
        *ret = v;
        return 0;
}

int store_capture(int requests_fd, RequestRecord *rec, const char *bytes, size_t len, usec_t now,
                  RequestRecord *ret_existing, TfwError *e) {
        char tmp[REQUEST_ID_MAX + 32];
        uint32_t rnd;
        int r;

        if (!request_id_is_valid(rec->id))
                return tfw_error(e, EINVAL, "bad_id", "invalid id");
        if (faccessat(requests_fd, rec->id, F_OK, AT_SYMLINK_NOFOLLOW) >= 0) {
                if (ret_existing && store_load(requests_fd, rec->id, ret_existing, NULL) < 0)
                        memset(ret_existing, 0, sizeof(*ret_existing));
                return tfw_error(e, EEXIST, "duplicate_id",
                                 "id '%s' is already in use (pending, queued, running or with a result)",
                                 rec->id);
        }

        rec->submitted_at = rec->updated_at = now;
        r = next_seq(requests_fd, &rec->seq);
        if (r < 0)
                return tfw_error(e, r, "internal", "cannot advance the arrival counter: %s", strerror(-r));

        if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
                return tfw_error(e, EIO, "internal", "getrandom failed");
        snprintf(tmp, sizeof(tmp), ".capture-%s-%08x", rec->id, rnd);
        if (mkdirat(requests_fd, tmp, 0700) < 0)
                return tfw_error(e, errno, "internal", "cannot create '%s': %m", tmp);
        _cleanup_close_ int dfd = open_dir_at(requests_fd, tmp);
        if (dfd < 0) {
                r = dfd;
                goto fail;
        }
        /* Written in place: the capture directory is private until the rename below (a
         * dot-name the store never lists, removed by recovery), so no temporary name is
         * needed; the file's fsync here and the directory's fsync by write_record make both
         * files durable before the rename (issue 5: one rename and one fsync less). */
        {
                _cleanup_close_ int rfd = openat(dfd, "request.json",
                                                 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                r = rfd < 0 ? -errno : write_all(rfd, bytes, len);
                if (r >= 0)
                        r = fsync_fd(rfd);
        }
        if (r < 0)
                goto fail;
        r = write_record(dfd, rec);
        if (r < 0)
                goto fail;
        /* RENAME_NOREPLACE: even a racing capture of the same id cannot replace this one. */
        if (renameat2(requests_fd, tmp, requests_fd, rec->id, RENAME_NOREPLACE) < 0) {
                r = -errno;
                goto fail;
        }
        r = fsync_fd(requests_fd);
        if (r < 0)
                return tfw_error(e, r, "internal", "cannot fsync the request store: %s", strerror(-r));
        return 0;
fail:
        (void) rm_rf_at(requests_fd, tmp);
        if (r == -EEXIST)
                return tfw_error(e, EEXIST, "duplicate_id", "id '%s' is already in use", rec->id);
        return tfw_error(e, r, "internal", "cannot capture '%s': %s", rec->id, strerror(-r));
}

int store_load(int requests_fd, const char *id, RequestRecord *ret, TfwError *e) {
        _cleanup_close_ int dfd = -EBADF, fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        _cleanup_(json_decrefp) json_t *j = NULL;
        size_t len;
        int r;

        if (!request_id_is_valid(id))
                return tfw_error(e, EINVAL, "bad_id", "'%s' is not a request id", id);
        dfd = open_dir_at(requests_fd, id);
        if (dfd < 0)
                return tfw_error(e, dfd, dfd == -ENOENT ? "not_found" : "internal",
                                 "no request with id '%s'", id);
        fd = openat(dfd, "state.json", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return tfw_error(e, errno, "internal", "request '%s': cannot open its state: %m", id);
        r = read_full_fd_bounded(fd, STATE_JSON_MAX, &buf, &len);
        if (r < 0)
                return tfw_error(e, r, "internal", "request '%s': cannot read its state: %s", id,
                                 strerror(-r));
        r = json_load_object_strict(buf, len, "state", &j, e);
        if (r < 0)
                return r;
        r = record_from_json(j, ret);
        if (r < 0 || !streq(ret->id, id))
                return tfw_error(e, EBADMSG, "internal", "request '%s': its state file is corrupt", id);
        return 0;
}

int store_save(int requests_fd, const RequestRecord *rec, TfwError *e) {
        _cleanup_close_ int dfd = open_dir_at(requests_fd, rec->id);
        if (dfd < 0)
                return tfw_error(e, dfd, "internal", "request '%s': %s", rec->id, strerror(-dfd));
        int r = write_record(dfd, rec);
        if (r < 0)
                return tfw_error(e, r, "internal", "request '%s': cannot save its state: %s", rec->id,
                                 strerror(-r));
        return 0;
}

int store_read_request(int requests_fd, const char *id, const RequestPolicy *policy,
                       Request **ret, TfwError *e) {
        _cleanup_close_ int dfd = -EBADF, fd = -EBADF;

        if (!request_id_is_valid(id))
                return tfw_error(e, EINVAL, "bad_id", "'%s' is not a request id", id);
        dfd = open_dir_at(requests_fd, id);
        if (dfd < 0)
                return tfw_error(e, dfd, "not_found", "no request with id '%s'", id);
        fd = openat(dfd, "request.json", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return tfw_error(e, errno, "internal", "request '%s': cannot open the captured copy: %m", id);
        return request_parse_fd(fd, id, policy, ret, e);
}

static int cmp_seq(const void *a, const void *b) {
        const RequestRecord *x = a, *y = b;
        return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int store_list(int requests_fd, RequestRecord **ret, size_t *ret_n, TfwError *e) {
        _cleanup_free_ RequestRecord *list = NULL;
        size_t n = 0, alloc = 0;
        _cleanup_closedir_ DIR *d = opendir_fd(requests_fd);
        if (!d)
                return tfw_error(e, errno, "internal", "cannot read the request store: %m");
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue; /* a capture in progress, or one a crash left (see below) */
                if (!request_id_is_valid(de->d_name))
                        continue;
                if (n == alloc) {
                        size_t na = alloc ? alloc * 2 : 64;
                        RequestRecord *nl = realloc(list, na * sizeof(*nl));
                        if (!nl) {
                                return tfw_error(e, ENOMEM, "internal", "out of memory");
                        }
                        list = nl;
                        alloc = na;
                }
                if (store_load(requests_fd, de->d_name, &list[n], NULL) >= 0)
                        n++;
        }
        if (n > 1)
                qsort(list, n, sizeof(*list), cmp_seq);
        *ret = TAKE_PTR(list);
        *ret_n = n;
        return 0;
}

int store_remove_incomplete(int requests_fd) {
        int removed = 0;
        _cleanup_closedir_ DIR *d = opendir_fd(requests_fd);
        if (!d)
                return -errno;
        struct dirent *de;
        while ((de = readdir(d)))
                if (strncmp(de->d_name, ".capture-", 9) == 0 && rm_rf_at(requests_fd, de->d_name) >= 0)
                        removed++;
        return removed;
}

int store_remove(int requests_fd, const char *id) {
        if (!request_id_is_valid(id))
                return -EINVAL;
        return rm_rf_at(requests_fd, id);
}
