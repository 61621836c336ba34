/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "orchestrator/retention.h"
#include "orchestrator/store.h"

static usec_t mtime_usec(const struct stat *st) {
        return (usec_t) st->st_mtim.tv_sec * USEC_PER_SEC + (usec_t) st->st_mtim.tv_nsec / 1000;
}

static void note_next(usec_t *next, usec_t t) {
        if (*next == 0 || t < *next)
                *next = t;
}

/* Entries of results_dir (or .rejected/) that no record owns and that are older than keep. */
static int sweep_dir(int dir_fd, bool ids_only, int requests_fd, usec_t now, usec_t keep, usec_t *next) {
        int removed = 0;
        _cleanup_closedir_ DIR *d = opendir_fd(dir_fd);
        if (!d)
                return -errno;
        struct dirent *de;
        while ((de = readdir(d))) {
                struct stat st;
                if (de->d_name[0] == '.')
                        continue;
                if (ids_only) {
                        /* <id>/ owned by a live record is handled through the record. */
                        if (!request_id_is_valid(de->d_name) ||
                            faccessat(requests_fd, de->d_name, F_OK, AT_SYMLINK_NOFOLLOW) >= 0)
                                continue;
                }
                if (fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (ids_only && !S_ISDIR(st.st_mode))
                        continue;
                if (mtime_usec(&st) + keep > now) {
                        note_next(next, mtime_usec(&st) + keep);
                        continue;
                }
                if (rm_rf_at(dir_fd, de->d_name) >= 0)
                        removed++;
        }
        return removed;
}

int retention_run(Worker *w, usec_t now, bool force_rotate, usec_t *ret_next, RetentionReport *ret,
                  TfwError *e) {
        _cleanup_free_ RequestRecord *list = NULL;
        RetentionReport rep = {};
        usec_t keep = (usec_t) w->config->retention_days * 86400 * USEC_PER_SEC, next = 0;
        size_t n = 0;
        int r, removed = 0;

        int lock = r = store_lock(w->dirs.requests_fd);
        if (r < 0)
                return tfw_error(e, r, "internal", "cannot lock the request store");
        r = store_list(w->dirs.requests_fd, &list, &n, e);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                RequestRecord *rec = &list[i];
                if (rec->state != STATE_FINAL)
                        continue;
                if (rec->updated_at + keep > now) {
                        note_next(&next, rec->updated_at + keep);
                        continue;
                }
                /* The record first: a crash in between leaves an orphan result, which the
                 * sweep below removes, never a record whose result recovery would re-create. */
                if (store_remove(w->dirs.requests_fd, rec->id) < 0 || rm_rf_at(w->dirs.results_fd, rec->id) < 0) {
                        r = tfw_error(e, EIO, "internal", "cannot remove the expired result '%s'", rec->id);
                        break;
                }
                removed++;
        }
        if (r >= 0) {
                int k = sweep_dir(w->dirs.results_fd, true, w->dirs.requests_fd, now, keep, &next);
                if (k > 0)
                        removed += k;
                k = sweep_dir(w->dirs.rejected_fd, false, -EBADF, now, keep, &next);
                rep.rejected = MAX(k, 0);
        }
        store_unlock(lock);
        if (r < 0)
                return r;
        if (removed > 0) {
                _cleanup_(json_decrefp) json_t *f = json_pack("{s:i}", "count", removed);
                (void) worker_audit_best_effort(w, "expired-results", f);
        }
        r = audit_rotate(w->audit, now, force_rotate, &rep.audit, e);
        if (r < 0)
                return r;
        if (ret_next)
                *ret_next = next;
        rep.results = removed;
        if (ret)
                *ret = rep;
        return removed;
}
