/* SPDX-License-Identifier: MIT */
/* `apply ID`: a job's changeset into the workspace, by the controller (controller/apply.h). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/macro.h"
#include "common/name-fold.h"
#include "common/path-util.h"
#include "common/resolve.h"
#include "controller/apply-git.h"
#include "common/term-escape.h"
#include "controller/apply.h"
#include "controller/site.h"
#include "parser/changes-manifest.h"
#include "snapshot/git-object.h"

#define MANIFEST_MAX_BYTES (256u << 20)

extern char **environ;

typedef enum Found { FOUND_NONE, FOUND_FILE, FOUND_DIR, FOUND_OTHER, FOUND_BLOCKED } Found;

typedef struct Apply {
        int ws_fd, changes_fd;
        bool openat2;
        Sha256 *h;
        uint8_t buf[64 * 1024];
        FILE *out, *err;
        unsigned conflicts;
        json_t *deleted;   /* the paths the changeset deletes (a set) */
        json_t *remade;    /* ... of which it then makes a directory (a type replaced) */
        json_t *refused;   /* the paths listed as refused (a link, a special file: never carried) */
} Apply;

/* Is path, or a directory above it, a path the changeset lists as refused? Then the job put
 * something in its place that apply cannot carry (a link, a FIFO), and deleting what the
 * workspace holds there would leave neither: that deletion is not applied, the workspace keeps
 * its version (nothing lost). */
static bool kept_by_refusal(const Apply *a, const char *path) {
        char p[PATH_MAX];
        if (!a->refused || json_object_size(a->refused) == 0 || strlen(path) >= sizeof(p))
                return false;
        strcpy(p, path);
        for (;;) {
                if (json_object_get(a->refused, p))
                        return true;
                char *slash = strrchr(p, '/');
                if (!slash)
                        return false;
                *slash = 0;
        }
}

/* The directory holding path below root (its parents one component at a time, never through a
 * link); its last name in *leaf. mkdirs: make the missing ones (0755). */
static int parent_of(Apply *a, int root, const char *path, bool mkdirs, const char **leaf) {
        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        int fd = fcntl(root, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return -errno;
        char *c = p;
        for (char *slash; (slash = strchr(c, '/')); c = slash + 1) {
                *slash = 0;
                int next = openat_child(fd, c, O_RDONLY | O_DIRECTORY, a->openat2);
                if (next == -ENOENT && mkdirs && (mkdirat(fd, c, 0755) == 0 || errno == EEXIST))
                        next = openat_child(fd, c, O_RDONLY | O_DIRECTORY, a->openat2);
                close(fd);
                if (next < 0)
                        return next;
                fd = next;
        }
        *leaf = path + (c - p);
        return fd;
}

/* What is at leaf in d (parent_of's answer for the path: -ENOENT, a parent is missing). */
static Found find(int d, const char *leaf, struct stat *st) {
        if (d == -ENOENT)
                return FOUND_NONE;
        if (d < 0)
                return FOUND_BLOCKED; /* a link, a file or a special file where a directory must be */
        if (fstatat(d, leaf, st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? FOUND_NONE : FOUND_BLOCKED;
        return S_ISREG(st->st_mode) ? FOUND_FILE : S_ISDIR(st->st_mode) ? FOUND_DIR : FOUND_OTHER;
}

/* The file at leaf in d: its blob id, or "" on any failure. */
static void blob_of(Apply *a, int d, const char *leaf, char hex[static GIT_OID_HEX_SIZE]) {
        struct stat st;
        uint8_t oid[GIT_OID_SIZE];
        hex[0] = 0;
        _cleanup_close_ int fd = openat_child(d, leaf, O_RDONLY | O_NONBLOCK, a->openat2);
        if (fd >= 0 && fstat(fd, &st) >= 0 && S_ISREG(st.st_mode) &&
            git_blob_id_fd(a->h, fd, (uint64_t) st.st_size, a->buf, sizeof(a->buf), oid) >= 0)
                sha256_to_hex(oid, hex);
}

/* A path as the reviewer's terminal may show it: the job chose it (common/term-escape.h). */
#define SHOWN(p) term_escape_strdup((p), TERM_ESCAPE_NAME)

static void conflict(Apply *a, const ChangeEntry *c, const char *what) {
        _cleanup_free_ char *p = SHOWN(c->path);
        a->conflicts++;
        fprintf(a->err, "apply: conflict: '%s' (%s): %s\n", p ? p : "?", change_kind_to_string(c->kind), what);
}

/* A directory the job removed: everything in it now must be removed by the changeset too, or
 * its removal would fail half-way. */
static void check_emptied(Apply *a, const ChangeEntry *c, int d, const char *leaf) {
        _cleanup_close_ int fd = openat_child(d, leaf, O_RDONLY | O_DIRECTORY, a->openat2);
        _cleanup_closedir_ DIR *dir = fd >= 0 ? opendir_fd(fd) : NULL;
        if (!dir)
                return conflict(a, c, "it cannot be read");
        struct dirent *de;
        while ((de = readdir(dir))) {
                _cleanup_free_ char *p = NULL;
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (asprintf(&p, "%s/%s", c->path, de->d_name) < 0)
                        return conflict(a, c, "out of memory");
                if (!json_object_get(a->deleted, p)) {
                        char shown[80];
                        char *what = NULL;
                        if (asprintf(&what, "it holds '%s', which the job did not remove", printable_name(de->d_name, shown, sizeof(shown))) < 0)
                                return conflict(a, c, "it holds what the job did not remove");
                        conflict(a, c, what);
                        free(what);
                        return;
                }
        }
}

/* Is a proper ancestor of path a directory the changeset makes where it deletes something else
 * (a file the job turned into a directory)? Then what is in the way now is gone by the time
 * path is written. */
static bool under_remade(const Apply *a, const char *path) {
        _cleanup_free_ char *p = strdup(path);
        for (char *slash; p && (slash = strrchr(p, '/'));) {
                *slash = 0;
                if (json_object_get(a->remade, p))
                        return true;
        }
        return false;
}

/* The directory this change writes in, or for a new path its nearest existing ancestor: it must
 * be writable by us, or the change would fail after others were made. d: parent_of's answer for
 * the path itself (a file in the way counts as missing below a directory the changeset remakes). */
static bool writable_dir(Apply *a, const char *path, int d) {
        bool remade = under_remade(a, path);
        if (d >= 0)
                return faccessat(d, ".", W_OK | X_OK, AT_EACCESS) == 0;
        if (d != -ENOENT && !(remade && d == -ENOTDIR))
                return false;
        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return false;
        for (char *slash; (slash = strrchr(p, '/'));) {
                *slash = 0; /* the directory that holds this name is missing: the one above is written */
                const char *leaf;
                _cleanup_close_ int up = parent_of(a, a->ws_fd, p, false, &leaf);
                if (up >= 0)
                        return faccessat(up, ".", W_OK | X_OK, AT_EACCESS) == 0;
                if (up != -ENOENT && !(remade && up == -ENOTDIR))
                        return false;
        }
        return faccessat(a->ws_fd, ".", W_OK | X_OK, AT_EACCESS) == 0;
}

/* Does the workspace still hold what the job was given, where this change applies? */
static void check(Apply *a, const ChangeEntry *c) {
        struct stat st;
        char hex[GIT_OID_HEX_SIZE];
        const char *leaf;
        /* The path's directory, opened once for every question below. */
        _cleanup_close_ int d = parent_of(a, a->ws_fd, c->path, false, &leaf);
        Found f = d == -ENOTDIR && under_remade(a, c->path) ? FOUND_NONE : find(d, leaf, &st);
        /* Replaced by another type: the deletion's own check vouches for what is there now. */
        bool replaced = json_object_get(a->deleted, c->path) && (c->kind == CHANGE_ADDED || c->kind == CHANGE_DIRECTORY);
        if (f == FOUND_BLOCKED || (f == FOUND_OTHER && !replaced))
                return conflict(a, c, "a symbolic link, a special file or a file is in the way");
        if (c->kind != CHANGE_REFUSED && !writable_dir(a, c->path, d))
                return conflict(a, c, "its directory cannot be written by this user");
        switch (c->kind) {
        case CHANGE_ADDED:
                if (f != FOUND_NONE && !replaced)
                        conflict(a, c, "the workspace has it now");
                return;
        case CHANGE_DIRECTORY:
                if (f == FOUND_FILE && !replaced)
                        conflict(a, c, "the workspace has a file there now");
                return;
        case CHANGE_MODIFIED:
        case CHANGE_MODE:
        case CHANGE_DELETED:
                if (c->base_mode == 040000) {
                        if (f != FOUND_DIR)
                                conflict(a, c, "it is no longer the directory the job was given");
                        else
                                check_emptied(a, c, d, leaf);
                        return;
                }
                if (f != FOUND_FILE)
                        return conflict(a, c, f == FOUND_NONE ? "the workspace no longer has it" : "it is no longer a file");
                blob_of(a, d, leaf, hex);
                if (!streq(hex, c->base) || !!(st.st_mode & S_IXUSR) != (c->base_mode == 0100755))
                        conflict(a, c, "it changed since the job was given it");
                return;
        case CHANGE_REFUSED:
                return;
        }
}

/* A unified diff of old (the workspace's, or none) and new (the result's, or none): diff -u. */
static int show_diff(Apply *a, const ChangeEntry *c) {
        const char *leaf;
        _cleanup_close_ int od = -EBADF, nd = -EBADF, ofd = -EBADF, nfd = -EBADF;
        if (c->kind == CHANGE_MODIFIED || c->kind == CHANGE_MODE || (c->kind == CHANGE_DELETED && c->base_mode != 040000)) {
                if ((od = parent_of(a, a->ws_fd, c->path, false, &leaf)) >= 0)
                        ofd = openat_child(od, leaf, O_RDONLY | O_NONBLOCK, a->openat2);
        }
        if (c->kind == CHANGE_ADDED || c->kind == CHANGE_MODIFIED || c->kind == CHANGE_MODE) {
                if ((nd = parent_of(a, a->changes_fd, c->path, false, &leaf)) >= 0)
                        nfd = openat_child(nd, leaf, O_RDONLY | O_NONBLOCK, a->openat2);
                if (nfd < 0)
                        return nfd;
        }
        if (ofd < 0 && nfd < 0)
                return 0;
        /* Only files: a FIFO in the workspace would hold diff forever. */
        struct stat st;
        if ((ofd >= 0 && (fstat(ofd, &st) < 0 || !S_ISREG(st.st_mode))) || (nfd >= 0 && (fstat(nfd, &st) < 0 || !S_ISREG(st.st_mode))))
                return -EINVAL;
        _cleanup_free_ char *la = NULL, *lb = NULL;
        if (asprintf(&la, "a/%s", c->path) < 0 || asprintf(&lb, "b/%s", c->path) < 0) /* escaped with the rest */
                return -ENOMEM;
        char *argv[] = { (char *) "diff", (char *) "-u", (char *) "--label", la, (char *) "--label", lb,
                         (char *) (ofd >= 0 ? "/proc/self/fd/3" : "/dev/null"),
                         (char *) (nfd >= 0 ? "/proc/self/fd/4" : "/dev/null"), NULL };
        /* The two files at fds above 4 first, so that placing them at 3 and 4 cannot clobber one
         * with the other; diff's output through a pipe, shown through the escaper (a job's bytes
         * must not drive, or reorder, the terminal of whoever reviews them). */
        _cleanup_close_ int o5 = ofd >= 0 ? fcntl(ofd, F_DUPFD_CLOEXEC, 5) : -EBADF;
        _cleanup_close_ int n5 = nfd >= 0 ? fcntl(nfd, F_DUPFD_CLOEXEC, 5) : -EBADF;
        int pfd[2];
        if ((ofd >= 0 && o5 < 0) || (nfd >= 0 && n5 < 0) || pipe2(pfd, O_CLOEXEC) < 0)
                return -errno;
        posix_spawn_file_actions_t fa;
        pid_t pid;
        int r = posix_spawn_file_actions_init(&fa);
        if (r == 0 && o5 >= 0)
                r = posix_spawn_file_actions_adddup2(&fa, o5, 3);
        if (r == 0 && n5 >= 0)
                r = posix_spawn_file_actions_adddup2(&fa, n5, 4);
        if (r == 0)
                r = posix_spawn_file_actions_adddup2(&fa, pfd[1], STDOUT_FILENO);
        if (r == 0)
                r = posix_spawnp(&pid, "diff", &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(pfd[1]);
        if (r != 0) {
                close(pfd[0]);
                return -r;
        }
        char buf[4096];
        TermEscape esc = TERM_ESCAPE_INIT(0);
        for (ssize_t k; (k = read(pfd[0], buf, sizeof(buf))) != 0;) {
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        break;
                (void) term_escape_write(&esc, buf, (size_t) k, a->out);
        }
        (void) term_escape_finish(&esc, a->out);
        close(pfd[0]);
        int ws;
        while (waitpid(pid, &ws, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        /* 0: the same, 1: differences; anything else is diff's trouble. */
        return WIFEXITED(ws) && WEXITSTATUS(ws) <= 1 ? 0 : -EIO;
}

/* The staging directory of this apply, at the workspace's root: every new file is written and
 * checked there before anything of the workspace changes. */
#define STAGING_PREFIX ".tfw-apply."

/* The file of change i, from the result into the staging directory as "f<i>": its bytes checked
 * against its id as they are copied, fsync'ed. */
static int stage_file(Apply *a, int staging, const ChangeEntry *c, size_t i) {
        const char *src_leaf;
        char tmp[32], hex[GIT_OID_HEX_SIZE];
        uint8_t oid[GIT_OID_SIZE];
        _cleanup_close_ int sd = parent_of(a, a->changes_fd, c->path, false, &src_leaf);
        if (sd < 0)
                return sd;
        _cleanup_close_ int in = openat_child(sd, src_leaf, O_RDONLY | O_NONBLOCK, a->openat2);
        if (in < 0)
                return in;
        snprintf(tmp, sizeof(tmp), "f%zu", i);
        _cleanup_close_ int outfd = openat(staging, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, c->executable ? 0755 : 0644);
        if (outfd < 0)
                return -errno;
        int r = git_blob_hash_start(a->h, c->size);
        uint64_t left = c->size;
        while (r >= 0 && left > 0) {
                ssize_t k = read(in, a->buf, (size_t) MIN((uint64_t) sizeof(a->buf), left));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        r = k < 0 ? -errno : -EIO;
                        break;
                }
                if ((r = sha256_update(a->h, a->buf, (size_t) k)) >= 0)
                        r = write_all(outfd, a->buf, (size_t) k);
                left -= (uint64_t) k;
        }
        if (r >= 0 && (r = sha256_final(a->h, oid)) >= 0) {
                sha256_to_hex(oid, hex);
                if (!streq(hex, c->id))
                        r = -EBADMSG; /* the result's file is not the one its manifest names */
        }
        if (r >= 0 && fchmod(outfd, c->executable ? 0755 : 0644) < 0)
                r = -errno;
        if (r >= 0 && fsync(outfd) < 0)
                r = -errno;
        return r;
}

/* The staged file of change i renamed over its path (its directories made as needed). */
static int place_file(Apply *a, int staging, const ChangeEntry *c, size_t i) {
        const char *leaf;
        char tmp[32];
        _cleanup_close_ int d = parent_of(a, a->ws_fd, c->path, true, &leaf);
        if (d < 0)
                return d;
        snprintf(tmp, sizeof(tmp), "f%zu", i);
        return renameat(staging, tmp, d, leaf) < 0 ? -errno : 0;
}

static bool is_file_change(const ChangeEntry *c) {
        return c->kind == CHANGE_ADDED || c->kind == CHANGE_MODIFIED || c->kind == CHANGE_MODE;
}

static int remove_path(Apply *a, const ChangeEntry *c) {
        const char *leaf;
        _cleanup_close_ int d = parent_of(a, a->ws_fd, c->path, false, &leaf);
        if (d < 0)
                return d;
        return unlinkat(d, leaf, c->base_mode == 040000 ? AT_REMOVEDIR : 0) < 0 ? -errno : 0;
}

static int make_dir(Apply *a, const ChangeEntry *c) {
        const char *leaf;
        _cleanup_close_ int d = parent_of(a, a->ws_fd, c->path, true, &leaf);
        if (d < 0)
                return d;
        return mkdirat(d, leaf, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

static int by_depth_desc(const void *x, const void *y) {
        const ChangeEntry *const *a = x, *const *b = y;
        size_t la = strlen((*a)->path), lb = strlen((*b)->path);
        return la < lb ? 1 : la > lb ? -1 : 0;
}

/* Every new file staged and checked first (a failure there changes nothing of the workspace);
 * then files deleted, directories deleted deepest first, directories made, and each staged file
 * renamed over its path. */
static int write_all_changes(Apply *a, const ChangesManifest *m, unsigned *done, TfwError *e) {
        _cleanup_free_ const ChangeEntry **dirs = calloc(MAX(m->n, (size_t) 1), sizeof(*dirs));
        char staging_name[64];
        size_t nd = 0;
        int r = 0;
        if (!dirs)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        snprintf(staging_name, sizeof(staging_name), STAGING_PREFIX "%d", (int) getpid());
        if (mkdirat(a->ws_fd, staging_name, 0700) < 0)
                return tfw_error(e, errno, "apply_failed", "cannot make '%s' in the workspace: %m", staging_name);
        _cleanup_close_ int staging = openat_child(a->ws_fd, staging_name, O_RDONLY | O_DIRECTORY, a->openat2);
        if (staging < 0) {
                (void) unlinkat(a->ws_fd, staging_name, AT_REMOVEDIR);
                return tfw_error(e, -staging, "apply_failed", "cannot open '%s': %s", staging_name, strerror(-staging));
        }
        for (size_t i = 0; i < m->n && r >= 0; i++)
                if (is_file_change(&m->v[i]) && (r = stage_file(a, staging, &m->v[i], i)) < 0) {
                        _cleanup_free_ char *p = SHOWN(m->v[i].path);
                        (void) tfw_error(e, -r, "apply_failed", "nothing applied: cannot stage '%s': %s", p ? p : "?",
                                         r == -EBADMSG ? "the result's file is not the one changes.json names" : strerror(-r));
                }
        for (int pass = 0; pass < 4 && r >= 0; pass++) {
                if (pass == 1) {
                        qsort(dirs, nd, sizeof(*dirs), by_depth_desc);
                        for (size_t i = 0; i < nd && r >= 0; i++, (*done) += r >= 0)
                                if ((r = remove_path(a, dirs[i])) < 0) {
                                        _cleanup_free_ char *p = SHOWN(dirs[i]->path);
                                        (void) tfw_error(e, -r, "apply_failed", "cannot remove the directory '%s': %s",
                                                         p ? p : "?", strerror(-r));
                                }
                        continue;
                }
                for (size_t i = 0; i < m->n && r >= 0; i++) {
                        const ChangeEntry *c = &m->v[i];
                        const char *what = NULL;
                        if (c->kind == CHANGE_DELETED && kept_by_refusal(a, c->path))
                                continue; /* nothing lost: see kept_by_refusal() */
                        if (pass == 0 && c->kind == CHANGE_DELETED && c->base_mode == 040000)
                                dirs[nd++] = c;
                        else if (pass == 0 && c->kind == CHANGE_DELETED)
                                r = remove_path(a, c), what = "remove";
                        else if (pass == 2 && c->kind == CHANGE_DIRECTORY)
                                r = make_dir(a, c), what = "make the directory";
                        else if (pass == 3 && is_file_change(c))
                                r = place_file(a, staging, c, i), what = "write";
                        if (what && r < 0) {
                                _cleanup_free_ char *p = SHOWN(c->path);
                                (void) tfw_error(e, -r, "apply_failed", "cannot %s '%s': %s", what, p ? p : "?", strerror(-r));
                        } else if (what)
                                (*done)++;
                }
        }
        /* What is left of the staging directory: nothing after a success. */
        (void) rm_rf_children(staging);
        (void) unlinkat(a->ws_fd, staging_name, AT_REMOVEDIR);
        return r;
}

static int load(const ControllerSite *s, const char *id, ChangesManifest **ret, int *ret_changes_fd, TfwError *e) {
        _cleanup_close_ int rd = -EBADF, fd = -EBADF, res = -EBADF;
        _cleanup_free_ char *buf = NULL, *rbuf = NULL;
        _cleanup_json_ json_t *result = NULL;
        size_t len;
        TfwError je = {};
        if (!request_id_is_valid(id))
                return tfw_error(e, EINVAL, "bad_id", "apply '%s': not a request id", id);
        rd = openat(s->results_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (rd < 0)
                return tfw_error(e, errno, "no_result", "apply '%s': no result in '%s' (%m)", id, s->results_dir);
        res = openat(rd, "result.json", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (res < 0 || read_full_fd_bounded(res, 16u << 20, &rbuf, &len) < 0 ||
            json_load_object_strict(rbuf, len, "result.json", &result, &je) < 0)
                return tfw_error(e, EBADMSG, "no_result", "apply '%s': its result.json cannot be read", id);
        json_t *c = json_object_get(result, "changes");
        if (!json_is_object(c))
                return tfw_error(e, ENOENT, "no_changes", "apply '%s': the job has no changeset (the request asked for none, or it "
                                 "did not run on a snapshot generation)", id);
        const char *code = json_string_value(json_object_get(c, "error"));
        if (code)
                return tfw_error(e, EBADMSG, "no_changes", "apply '%s': the job's changes could not be taken (%s): nothing to apply",
                                 id, code);
        fd = openat(rd, "changes.json", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0 || read_full_fd_bounded(fd, MANIFEST_MAX_BYTES, &buf, &len) < 0)
                return tfw_error(e, errno ? errno : EIO, "no_changes", "apply '%s': its changes.json cannot be read", id);
        int r = changes_manifest_parse(buf, len, ret, e);
        if (r < 0)
                return r;
        *ret_changes_fd = openat(rd, "changes", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (*ret_changes_fd < 0) {
                *ret = changes_manifest_free(*ret);
                return tfw_error(e, errno, "no_changes", "apply '%s': its changes/ directory cannot be opened (%m)", id);
        }
        return 0;
}

int controller_apply(const ApplyOptions *o, FILE *out, FILE *err, TfwError *e) {
        _cleanup_(controller_site_close) ControllerSite site = CONTROLLER_SITE_NULL;
        _cleanup_(changes_manifest_freep) ChangesManifest *m = NULL;
        _cleanup_free_ Apply *a = calloc(1, sizeof(Apply));
        _cleanup_close_ int changes_fd = -EBADF;
        int r;

        if (!a)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        if ((r = controller_site_open(o->workspace, o->results, &site, e)) < 0 || (r = controller_site_need_results(&site, e)) < 0)
                return r;
        if ((r = load(&site, o->id, &m, &changes_fd, e)) < 0)
                return r;
        if (!m->complete)
                return tfw_error(e, EBADMSG, "incomplete", "apply '%s': the changeset is incomplete (%s): apply takes a whole one only",
                                 o->id, m->incomplete ? m->incomplete : "?");
        *a = (Apply) { .changes_fd = changes_fd, .openat2 = openat2_usable(), .out = out, .err = err };
        a->ws_fd = open_dir_path_nofollow(site.workspace, a->openat2);
        if (a->ws_fd < 0)
                return tfw_error(e, -a->ws_fd, "no_workspace", "apply '%s': cannot open the workspace '%s': %s", o->id, site.workspace,
                                 strerror(-a->ws_fd));
        if (sha256_new(&a->h) < 0) {
                close(a->ws_fd);
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        }
        unsigned n = 0, git = 0;
        a->deleted = json_object();
        a->remade = json_object();
        a->refused = json_object();
        for (size_t i = 0; a->refused && i < m->n; i++)
                if (m->v[i].kind == CHANGE_REFUSED && json_object_set_new(a->refused, m->v[i].path, json_true()) < 0)
                        break;
        for (size_t i = 0; a->deleted && i < m->n; i++)
                if (m->v[i].kind == CHANGE_DELETED && json_object_set_new(a->deleted, m->v[i].path, json_true()) < 0)
                        break;
        for (size_t i = 0; a->remade && i < m->n; i++)
                if (m->v[i].kind == CHANGE_DIRECTORY && json_object_get(a->deleted, m->v[i].path) &&
                    json_object_set_new(a->remade, m->v[i].path, json_true()) < 0)
                        break;
        for (size_t i = 0; i < m->n; i++) {
                const ChangeEntry *c = &m->v[i];
                /* A refused path is the worker's printable form already (its backslashes kept). */
                _cleanup_free_ char *p = c->kind == CHANGE_REFUSED ? term_escape_strdup(c->path, TERM_ESCAPE_LINE) : SHOWN(c->path);
                if (c->kind == CHANGE_REFUSED) {
                        _cleanup_free_ char *why = term_escape_strdup(c->why ? c->why : "", TERM_ESCAPE_LINE);
                        fprintf(err, "apply: not carried: '%s': %s\n", p ? p : "?", why ? why : "?");
                        continue;
                }
                if (c->kind == CHANGE_DELETED && kept_by_refusal(a, c->path)) {
                        if (json_object_get(a->refused, c->path))
                                fprintf(err, "apply: kept: '%s': the job replaced it with what is not carried, so the "
                                             "workspace keeps its own\n", p ? p : "?");
                        continue;
                }
                n++;
                if (apply_path_is_control(c->path)) {
                        git++;
                        fprintf(err, "apply: refused: '%s': a control directory of tentaflake-worker\n", p ? p : "?");
                        continue;
                }
                if (path_component_folds_to(c->path, ".claude") || path_component_folds_to(c->path, ".codex") ||
                    path_component_folds_to(c->path, ".mcp.json")) {
                        git++;
                        fprintf(err, "apply: refused: '%s': a harness's settings (its hooks, its MCP servers and its "
                                     "shell prefix run on the host); copy it from the result by hand if you mean it\n",
                                p ? p : "?");
                        continue;
                }
                if (!o->allow_git && apply_git_refuses_change(c, err)) {
                        git++;
                        continue;
                }
                check(a, c);
        }
        /* A directory the changeset would leave as a repository (HEAD, objects/, refs/) with no
         * .git in any path (controller/apply-git.h). */
        if (!o->allow_git) {
                int k = apply_git_repositories(a->ws_fd, m, err);
                if (k < 0) {
                        r = tfw_error(e, -k, "internal", "apply '%s': out of memory", o->id);
                        goto out;
                }
                git += (unsigned) k;
        }
        for (size_t i = 0; o->diff && i < m->n; i++) {
                int k = m->v[i].kind == CHANGE_REFUSED ? 0 : show_diff(a, &m->v[i]);
                _cleanup_free_ char *p = k < 0 ? SHOWN(m->v[i].path) : NULL;
                if (k < 0)
                        fprintf(err, "apply: no diff of '%s': %s\n", p ? p : "?", strerror(-k));
        }
        if (git || a->conflicts) {
                r = tfw_error(e, EBUSY, "conflict", "apply '%s': nothing applied: %u conflict(s), %u refused by the git or "
                              "control directory rules", o->id, a->conflicts, git);
                goto out;
        }
        if (o->dry_run) {
                for (size_t i = 0; i < m->n; i++) {
                        _cleanup_free_ char *p = SHOWN(m->v[i].path);
                        if (m->v[i].kind != CHANGE_REFUSED &&
                            !(m->v[i].kind == CHANGE_DELETED && kept_by_refusal(a, m->v[i].path)))
                                fprintf(out, "%s %s\n", change_kind_to_string(m->v[i].kind), p ? p : "?");
                }
                r = 0;
                goto out;
        }
        unsigned done = 0;
        r = write_all_changes(a, m, &done, e);
        if (r < 0)
                fprintf(err, "apply '%s': %u of %u change(s) applied before the failure below\n", o->id, done, n);
        else
                fprintf(err, "apply '%s': %u change(s) applied to '%s'\n", o->id, done, site.workspace);
out:
        json_decref(a->deleted);
        json_decref(a->remade);
        json_decref(a->refused);
        sha256_free(a->h);
        close(a->ws_fd);
        return r;
}
