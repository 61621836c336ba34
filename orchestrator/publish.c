/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "orchestrator/publish.h"

#define STATE_SUFFIX ".state.json"
#define LIVE_SUFFIX ".live.log"
#define RESULT_JSON_MAX (1 << 20)

/* The captured request's argv (its bytes were checked at capture), or NULL when it cannot be read:
 * the state file is a hint and goes without it rather than not at all. */
static json_t *captured_argv(const WorkerDirs *d, const char *id) {
        _cleanup_close_ int dfd = open_dir_at(d->requests_fd, id);
        _cleanup_close_ int fd = dfd < 0 ? -EBADF : openat(dfd, "request.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_free_ char *buf = NULL;
        size_t n = 0;
        if (fd < 0 || read_full_fd_bounded(fd, RESULT_JSON_MAX, &buf, &n) < 0)
                return NULL;
        _cleanup_(json_decrefp) json_t *j = json_loadb(buf, n, JSON_REJECT_DUPLICATES, NULL);
        json_t *argv = json_object_get(j, "argv");
        return json_is_array(argv) ? json_incref(argv) : NULL;
}

int publish_state(const WorkerDirs *d, gid_t gid, const RequestRecord *rec, usec_t since, TfwError *e) {
        char name[REQUEST_ID_MAX + sizeof(STATE_SUFFIX)], ts[RFC3339_MAX];
        _cleanup_(json_decrefp) json_t *j = NULL;
        _cleanup_free_ char *s = NULL;
        int r;

        snprintf(name, sizeof(name), "%s" STATE_SUFFIX, rec->id);
        /* The class and the command too, so that the controller's own list names what each of
         * its requests is once the inbox no longer holds it. */
        j = json_pack("{s:s, s:s, s:s, s:s?, s:o*}", "id", rec->id, "state", request_state_to_string(rec->state),
                      "since", format_rfc3339(since, ts), "action_class",
                      rec->action_class >= 0 ? action_class_to_string(rec->action_class) : NULL, "argv",
                      captured_argv(d, rec->id));
        s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        if (!s)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        /* Not fsynced: the state file is a hint for the controller that recovery rewrites
         * from the durable store at every start (queued and pending ones rewritten, running
         * ones published as interrupted, final ones removed), so a power loss can cost it
         * nothing a guarantee rests on; its two fsyncs were on every request's path twice
         * (issue 5). Still renamed into place: a reader never sees half of it. */
        r = write_file_replace_at(d->results_fd, name, s, strlen(s), 0640, 0, gid);
        if (r < 0)
                return tfw_error(e, r, "internal", "cannot write '%s': %s", name, strerror(-r));
        return 0;
}

int publish_live_open(const WorkerDirs *d, gid_t gid, const char *id, TfwError *e) {
        char name[REQUEST_ID_MAX + sizeof(LIVE_SUFFIX)];
        snprintf(name, sizeof(name), "%s" LIVE_SUFFIX, id);
        if (unlinkat(d->results_fd, name, 0) < 0 && errno != ENOENT)
                return tfw_error(e, errno, "internal", "cannot remove the stale '%s': %m", name);
        _cleanup_close_ int fd = openat(d->results_fd, name, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
        if (fd < 0)
                return tfw_error(e, errno, "internal", "cannot create '%s': %m", name);
        /* The mode explicitly: a service's UMask= must not make it unreadable. */
        int r = ensure_owner_mode(fd, 0, gid, 0640);
        if (r < 0)
                return tfw_error(e, r, "internal", "cannot set the mode of '%s': %s", name, strerror(-r));
        return TAKE_FD(fd);
}

void publish_live_drop(const WorkerDirs *d, const char *id) {
        char name[REQUEST_ID_MAX + sizeof(LIVE_SUFFIX)];
        snprintf(name, sizeof(name), "%s" LIVE_SUFFIX, id);
        (void) unlinkat(d->results_fd, name, 0);
}

int publish_stage_begin(const WorkerDirs *d, const char *id, TfwError *e) {
        int r = rm_rf_at(d->staging_fd, id);
        if (r < 0)
                return tfw_error(e, r, "internal", "cannot clear the staging area of '%s': %s", id,
                                 strerror(-r));
        /* 0750 in the setgid staging area: the directory inherits the controller's group and
         * the setgid bit, so publishing needs no chmod of a setgid mode (which systemd's
         * RestrictSUIDSGID= refuses). The staging area itself (02700) hides it meanwhile. */
        if (mkdirat(d->staging_fd, id, 0750) < 0)
                return tfw_error(e, errno, "internal", "cannot create the staging area of '%s': %m", id);
        int fd = open_dir_at(d->staging_fd, id);
        if (fd < 0)
                return tfw_error(e, fd, "internal", "cannot open the staging area of '%s': %s", id,
                                 strerror(-fd));
        return fd;
}

int publish_commit(const WorkerDirs *d, gid_t gid, const char *id, json_t *result, TfwError *e) {
        char name[REQUEST_ID_MAX + sizeof(STATE_SUFFIX)];
        _cleanup_free_ char *s = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        fd = open_dir_at(d->staging_fd, id);
        if (fd < 0)
                return tfw_error(e, fd, "internal", "no staging area for '%s'", id);
        s = json_dumps(result, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (!s)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        size_t len = strlen(s);
        s[len] = '\n'; /* json_dumps leaves room for its NUL: reuse it for the newline */
        /* The directory's mode first: the directory fsync that ends write_file_atomic_at (after
         * result.json's own fsync and rename) then makes the mode and result.json's name durable
         * at once, before the rename below shows the directory.
         * A second fsync of the same directory was a device cache flush on every request's
         * path before its result was visible, for nothing that fsync did not already cover. */
        r = ensure_owner_mode(fd, 0, gid, 02750);
        if (r < 0)
                return tfw_error(e, r, "internal", "cannot set the mode of the result of '%s': %s", id,
                                 strerror(-r));
        r = write_file_atomic_at(fd, "result.json", s, len + 1, 0640, 0, gid);
        if (r < 0)
                return tfw_error(e, r, "internal", "cannot write the result of '%s': %s", id, strerror(-r));
        if (renameat2(d->staging_fd, id, d->results_fd, id, RENAME_NOREPLACE) < 0)
                return tfw_error(e, errno, "internal", "cannot publish the result of '%s': %m", id);
        r = fsync_fd(d->results_fd);
        if (r < 0)
                return tfw_error(e, r, "internal", "cannot fsync the results directory");
        /* The live log goes once job.log is there: a reader never finds neither. */
        publish_live_drop(d, id);
        snprintf(name, sizeof(name), "%s" STATE_SUFFIX, id);
        if (unlinkat(d->results_fd, name, 0) < 0 && errno != ENOENT)
                return tfw_error(e, errno, "internal", "cannot remove '%s': %m", name);
        return 0;
}

/* Keep [a-z0-9._-] of the controller's name, at most 64 of them, never a leading dot. */
static void sanitise_name(const char *name, char *out, size_t size) {
        size_t n = 0;
        for (const char *p = name; *p && n + 1 < size && n < 64; p++) {
                char c = *p;
                bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                          c == '_' || c == '-' || (c == '.' && n > 0);
                out[n++] = ok ? c : '_';
        }
        if (n == 0)
                out[n++] = '_';
        out[n] = 0;
}

int publish_rejected_record(const WorkerDirs *d, gid_t gid, const char *name, const char *code,
                            const char *message, usec_t now, TfwError *e) {
        char safe[80], stamp[RFC3339_MAX], ts[RFC3339_MAX], file[200];
        _cleanup_(json_decrefp) json_t *j = NULL;
        _cleanup_free_ char *s = NULL;
        int r;

        sanitise_name(name, safe, sizeof(safe));
        format_utc_stamp(now, stamp);
        /* Two rejections of the same name in one second get distinct files. */
        for (unsigned i = 0; i < 1000; i++) {
                if (i == 0)
                        snprintf(file, sizeof(file), "%s-%s.json", safe, stamp);
                else
                        snprintf(file, sizeof(file), "%s-%s-%u.json", safe, stamp, i);
                if (faccessat(d->rejected_fd, file, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
                        break;
        }
        /* The original name is untrusted bytes: keep it only if it is valid UTF-8 text. */
        json_t *jn = json_string(name);
        j = json_pack("{s:i, s:o, s:s, s:s, s:s, s:s}", "version", 1, "name", jn ? jn : json_null(),
                      "status", "rejected", "error", code, "message", message, "rejected_at",
                      format_rfc3339(now, ts));
        s = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        if (!s)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        r = write_file_atomic_at(d->rejected_fd, file, s, strlen(s), 0640, 0, gid);
        if (r < 0)
                return tfw_error(e, r, "internal", "cannot write '.rejected/%s': %s", file, strerror(-r));
        return 0;
}

bool publish_exists(const WorkerDirs *d, const char *id) {
        return faccessat(d->results_fd, id, F_OK, AT_SYMLINK_NOFOLLOW) >= 0;
}

json_t *publish_load_result(const WorkerDirs *d, const char *id) {
        char path[REQUEST_ID_MAX + 16];
        _cleanup_free_ char *buf = NULL;
        size_t len;
        json_t *j = NULL;

        snprintf(path, sizeof(path), "%s/result.json", id);
        _cleanup_close_ int fd = openat(d->results_fd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || read_full_fd_bounded(fd, RESULT_JSON_MAX, &buf, &len) < 0 ||
            json_load_object_strict(buf, len, "result", &j, NULL) < 0)
                return NULL;
        return j;
}
