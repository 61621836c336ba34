/* SPDX-License-Identifier: MIT */
/* The worker's directories, the private request store and result publishing. Root: the
 * owners and modes are the point. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <seccomp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "orchestrator/dirs.h"
#include "orchestrator/publish.h"
#include "orchestrator/store.h"
#include "tests/unit/lib/tfw-test.h"

#define GID 10000

typedef struct Fixture {
        TestDir *dir;
        Config config;
        char state[512], results[512];
        WorkerDirs dirs;
} Fixture;

static int setup(void **state) {
        Fixture *f = calloc(1, sizeof(*f));
        void *d = NULL;
        if (!f || tfw_tmpdir_setup(&d) < 0)
                return -1;
        f->dir = d;
        snprintf(f->state, sizeof(f->state), "%s/var/lib/tfw-demo", f->dir->path);
        snprintf(f->results, sizeof(f->results), "%s/run/tfw-demo/results", f->dir->path);
        f->config.state_dir = f->state;
        f->config.results_dir = f->results;
        f->config.container_gid = GID;
        f->dirs = (WorkerDirs) WORKER_DIRS_NULL;
        *state = f;
        return 0;
}

static int teardown(void **state) {
        Fixture *f = *state;
        void *d = f->dir;
        worker_dirs_close(&f->dirs);
        tfw_tmpdir_teardown(&d);
        free(f);
        return 0;
}

static void require_root(void) {
        if (geteuid() != 0)
                tfw_skip("needs root to check owners and groups");
}

static void assert_owner_mode(int dir_fd, const char *name, uid_t uid, gid_t gid, mode_t mode) {
        struct stat st;
        assert_int_equal(fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW), 0);
        if (st.st_uid != uid || st.st_gid != gid || (st.st_mode & 07777) != mode)
                fail_msg("'%s': %u:%u %04o, expected %u:%u %04o", name, st.st_uid, st.st_gid,
                         st.st_mode & 07777, uid, gid, mode);
}

static void test_dirs_created(void **state) {
        Fixture *f = *state;
        TfwError e = {0};
        require_root();
        assert_int_equal(worker_dirs_open(&f->config, &f->dirs, &e), 0);
        assert_owner_mode(AT_FDCWD, f->state, 0, 0, 0700);
        assert_owner_mode(AT_FDCWD, f->results, 0, GID, 02750);
        assert_owner_mode(f->dirs.state_fd, "requests", 0, 0, 0700);
        assert_owner_mode(f->dirs.results_fd, ".staging", 0, GID, 02700);
        assert_owner_mode(f->dirs.results_fd, ".rejected", 0, GID, 02750);
        /* Opening again accepts what it made. */
        worker_dirs_close(&f->dirs);
        assert_int_equal(worker_dirs_open(&f->config, &f->dirs, &e), 0);
}

/* runsc's root below /run (orchestrator/dirs.h): made when missing, repaired when its mode
 * drifted, refused below a runtime directory that is not root's alone or is a symlink. A name
 * of this test's own, removed at the end. */
static void test_runsc_root(void **state) {
        Fixture *f = *state;
        TfwError e = {0};
        char name[64], run[128], root[PATH_MAX], target[600];
        require_root();
        snprintf(name, sizeof(name), "unit-%d", (int) getpid());
        snprintf(run, sizeof(run), CONFIG_RUNTIME_DIR_PREFIX "%s", name);
        f->config.name = name;
        (void) rm_rf_at(AT_FDCWD, run);

        assert_int_equal(worker_runsc_root_open(&f->config, root, sizeof(root), &e), 0);
        assert_true(snprintf(target, sizeof(target), "%s/runsc", run) > 0);
        assert_string_equal(root, target);
        assert_owner_mode(AT_FDCWD, run, 0, 0, 0755);
        assert_owner_mode(AT_FDCWD, root, 0, 0, 0700);

        assert_int_equal(chmod(root, 0755), 0);
        assert_int_equal(worker_runsc_root_open(&f->config, root, sizeof(root), &e), 0);
        assert_owner_mode(AT_FDCWD, root, 0, 0, 0700);

        assert_int_equal(chmod(run, 0777), 0);
        assert_true(worker_runsc_root_open(&f->config, root, sizeof(root), &e) < 0);
        assert_non_null(strstr(e.message, run));
        assert_non_null(strstr(e.message, "0777"));
        assert_int_equal(chmod(run, 0700), 0); /* any mode root alone can write is fine */
        assert_int_equal(worker_runsc_root_open(&f->config, root, sizeof(root), &e), 0);

        assert_int_equal(chown(run, 1, 0), 0);
        assert_true(worker_runsc_root_open(&f->config, root, sizeof(root), &e) < 0);
        assert_non_null(strstr(e.message, "owned by 1"));

        assert_int_equal(rm_rf_at(AT_FDCWD, run), 0);
        assert_true(snprintf(target, sizeof(target), "%s/elsewhere", f->dir->path) > 0);
        assert_int_equal(mkdir(target, 0755), 0);
        assert_int_equal(symlink(target, run), 0);
        assert_true(worker_runsc_root_open(&f->config, root, sizeof(root), &e) < 0);
        assert_non_null(strstr(e.message, "symlinks are refused"));
        assert_int_equal(unlink(run), 0);
}

static void test_dirs_wrong_mode_refused(void **state) {
        Fixture *f = *state;
        TfwError e = {0};
        require_root();
        assert_int_equal(worker_dirs_open(&f->config, &f->dirs, &e), 0);
        worker_dirs_close(&f->dirs);

        assert_int_equal(chmod(f->state, 0755), 0);
        assert_true(worker_dirs_open(&f->config, &f->dirs, &e) < 0);
        assert_non_null(strstr(e.message, "key 'state_dir'"));
        assert_non_null(strstr(e.message, "0755"));
        assert_int_equal(chmod(f->state, 0700), 0);

        assert_int_equal(chmod(f->results, 0755), 0);
        assert_true(worker_dirs_open(&f->config, &f->dirs, &e) < 0);
        assert_non_null(strstr(e.message, "key 'results_dir'"));
        assert_int_equal(chmod(f->results, 02750), 0);

        assert_int_equal(chown(f->results, 0, GID + 1), 0);
        assert_true(worker_dirs_open(&f->config, &f->dirs, &e) < 0);
        assert_non_null(strstr(e.message, "key 'results_dir'"));
        assert_int_equal(chown(f->results, 0, GID), 0);
        assert_int_equal(chmod(f->results, 02750), 0);
        assert_int_equal(worker_dirs_open(&f->config, &f->dirs, &e), 0);
}

static void test_dirs_symlink_refused(void **state) {
        Fixture *f = *state;
        TfwError e = {0};
        char target[600];
        require_root();
        snprintf(target, sizeof(target), "%s/elsewhere", f->dir->path);
        assert_int_equal(mkdir(target, 0700), 0);
        assert_int_equal(mkdirat(f->dir->fd, "var", 0755), 0);
        assert_int_equal(mkdirat(f->dir->fd, "var/lib", 0755), 0);
        assert_int_equal(symlink(target, f->state), 0);
        assert_true(worker_dirs_open(&f->config, &f->dirs, &e) < 0);
        assert_non_null(strstr(e.message, "key 'state_dir'"));
}

/* Issue 19: a state_dir or results_dir below a directory that anyone but root can write is
 * refused, naming that directory, and nothing is made below it (the controller could swap what
 * root makes there for a symlink to a root-only file before root's chown and chmod). A symlink
 * in an ancestor is refused too. Missing ancestors are made 0755 whatever the umask. */
static void test_dirs_untrusted_ancestor(void **state) {
        Fixture *f = *state;
        TfwError e = {0};
        char run[600], below[700], made[700], target[600];
        struct stat st;
        require_root();
        snprintf(run, sizeof(run), "%s/run", f->dir->path);
        snprintf(below, sizeof(below), "is below '%s',", run);
        snprintf(made, sizeof(made), "%s/tfw-demo", run);
        assert_int_equal(mkdir(run, 0755), 0);

        const struct { uid_t uid; gid_t gid; mode_t mode; const char *shown; } bad[] = {
                {GID, GID, 0755, "owned by 10000:10000 with mode 0755"}, /* the controller's */
                {0, GID, 0775, "owned by 0:10000 with mode 0775"},       /* group-writable */
                {0, 0, 01777, "owned by 0:0 with mode 1777"},            /* like /tmp */
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(chown(run, bad[i].uid, bad[i].gid), 0);
                assert_int_equal(chmod(run, bad[i].mode), 0);
                assert_int_equal(worker_dirs_open(&f->config, &f->dirs, &e), -EPERM);
                assert_non_null(strstr(e.message, "key 'results_dir'"));
                assert_non_null(strstr(e.message, below));
                assert_non_null(strstr(e.message, bad[i].shown));
                assert_true(lstat(made, &st) < 0 && errno == ENOENT);
        }

        assert_int_equal(chown(run, 0, 0), 0);
        assert_int_equal(chmod(run, 0755), 0);
        mode_t old = umask(077);
        int r = worker_dirs_open(&f->config, &f->dirs, &e);
        umask(old);
        assert_int_equal(r, 0);
        assert_owner_mode(AT_FDCWD, made, 0, 0, 0755);
        worker_dirs_close(&f->dirs);

        /* A symlink in an ancestor of state_dir, to a directory that is itself fine. */
        snprintf(target, sizeof(target), "%s/var-real", f->dir->path);
        assert_int_equal(renameat(f->dir->fd, "var", f->dir->fd, "var-real"), 0);
        assert_int_equal(symlinkat(target, f->dir->fd, "var"), 0);
        assert_int_equal(worker_dirs_open(&f->config, &f->dirs, &e), -ELOOP);
        assert_non_null(strstr(e.message, "key 'state_dir'"));
        assert_non_null(strstr(e.message, "is a symlink"));
}

static void make_record(RequestRecord *r, const char *id, const char *body, RequestState st) {
        memset(r, 0, sizeof(*r));
        strcpy(r->id, id);
        r->state = st;
        r->action_class = ACTION_LOCAL_REVERSIBLE;
        assert_int_equal(sha256_buffer_hex(body, strlen(body), r->sha256), 0);
}

static void test_store_capture_and_load(void **state) {
        Fixture *f = *state;
        TfwError e = {0};
        RequestRecord rec, got, existing;
        const char *body = "{\"version\":1,\"id\":\"a1\",\"action_class\":\"local-reversible\",\"argv\":[\"true\"]}";
        require_root();
        assert_int_equal(worker_dirs_open(&f->config, &f->dirs, &e), 0);

        make_record(&rec, "a1", body, STATE_QUEUED);
        assert_int_equal(store_capture(f->dirs.requests_fd, &rec, body, strlen(body), 1000000, NULL, &e), 0);
        assert_int_equal(rec.seq, 1);
        assert_int_equal(store_load(f->dirs.requests_fd, "a1", &got, &e), 0);
        assert_string_equal(got.id, "a1");
        assert_int_equal(got.state, STATE_QUEUED);
        assert_string_equal(got.sha256, rec.sha256);
        assert_int_equal(got.seq, 1);
        assert_int_equal(got.submitted_at, 1000000);

        /* The captured bytes parse back to the same request. */
        _cleanup_request_ Request *req = NULL;
        assert_int_equal(store_read_request(f->dirs.requests_fd, "a1", NULL, &req, &e), 0);
        assert_string_equal(req->sha256, rec.sha256);

        /* The id is taken now: a second capture is refused and reports the first. */
        RequestRecord again;
        make_record(&again, "a1", "{}", STATE_QUEUED);
        assert_int_equal(store_capture(f->dirs.requests_fd, &again, "{}", 2, 2000000, &existing, &e), -EEXIST);
        assert_string_equal(e.code, "duplicate_id");
        assert_string_equal(existing.sha256, rec.sha256);
        assert_int_equal(store_load(f->dirs.requests_fd, "a1", &got, &e), 0);
        assert_string_equal(got.sha256, rec.sha256);

        /* State changes persist; arrival order is kept by seq. */
        got.state = STATE_FINAL;
        strcpy(got.status, "succeeded");
        assert_int_equal(store_save(f->dirs.requests_fd, &got, &e), 0);
        make_record(&rec, "b2", body, STATE_PENDING);
        rec.action_class = -1;
        assert_int_equal(store_capture(f->dirs.requests_fd, &rec, body, strlen(body), 3000000, NULL, &e), 0);
        RequestRecord *list = NULL;
        size_t n = 0;
        assert_int_equal(store_list(f->dirs.requests_fd, &list, &n, &e), 0);
        assert_int_equal(n, 2);
        assert_string_equal(list[0].id, "a1");
        assert_string_equal(list[0].status, "succeeded");
        assert_int_equal(list[0].state, STATE_FINAL);
        assert_string_equal(list[1].id, "b2");
        assert_int_equal(list[1].action_class, -1);
        assert_true(list[1].seq > list[0].seq);
        free(list);

        assert_int_equal(store_remove(f->dirs.requests_fd, "a1"), 0);
        assert_int_equal(store_load(f->dirs.requests_fd, "a1", &got, &e), -ENOENT);
        assert_int_equal(store_remove(f->dirs.requests_fd, "../x"), -EINVAL);
}

/* A capture that died before its rename leaves a hidden directory that is never a record and
 * is cleaned by the next listing. */
static json_t *load_state_file(int results_fd, const char *name) {
        _cleanup_close_ int fd = openat(results_fd, name, O_RDONLY | O_CLOEXEC);
        _cleanup_free_ char *buf = NULL;
        size_t n = 0;
        assert_true(fd >= 0);
        assert_int_equal(read_full_fd_bounded(fd, 65536, &buf, &n), 0);
        json_t *j = json_loadb(buf, n, 0, NULL);
        assert_non_null(j);
        return j;
}

/* The state file names the request's class and command (the controller's own list shows them once
 * the inbox no longer holds the request), and goes without the command when the store has none. */
static void test_publish_state_names_command(void **state) {
        Fixture *f = *state;
        TfwError e = {0};
        RequestRecord rec, lost;
        const char *body = "{\"version\":1,\"id\":\"s1\",\"action_class\":\"external-reversible\",\"argv\":[\"make\",\"-j2\"]}";
        require_root();
        assert_int_equal(worker_dirs_open(&f->config, &f->dirs, &e), 0);

        make_record(&rec, "s1", body, STATE_RUNNING);
        rec.action_class = ACTION_EXTERNAL_REVERSIBLE;
        assert_int_equal(store_capture(f->dirs.requests_fd, &rec, body, strlen(body), 1000000, NULL, &e), 0);
        assert_int_equal(publish_state(&f->dirs, GID, &rec, 1000000, &e), 0);
        _cleanup_(json_decrefp) json_t *j = load_state_file(f->dirs.results_fd, "s1.state.json");
        assert_string_equal(json_string_value(json_object_get(j, "state")), "running");
        assert_string_equal(json_string_value(json_object_get(j, "action_class")), "external-reversible");
        json_t *argv = json_object_get(j, "argv");
        assert_int_equal(json_array_size(argv), 2);
        assert_string_equal(json_string_value(json_array_get(argv, 1)), "-j2");

        make_record(&lost, "s2", "{}", STATE_PENDING);
        assert_int_equal(publish_state(&f->dirs, GID, &lost, 1000000, &e), 0);
        _cleanup_(json_decrefp) json_t *k = load_state_file(f->dirs.results_fd, "s2.state.json");
        assert_string_equal(json_string_value(json_object_get(k, "state")), "pending");
        assert_null(json_object_get(k, "argv"));
}

static void test_store_incomplete_capture(void **state) {
        Fixture *f = *state;
        TfwError e = {0};
        struct stat st;
        require_root();
        assert_int_equal(worker_dirs_open(&f->config, &f->dirs, &e), 0);
        assert_int_equal(mkdirat(f->dirs.requests_fd, ".capture-x1-00000000", 0700), 0);
        RequestRecord *list = NULL;
        size_t n = 9;
        assert_int_equal(store_list(f->dirs.requests_fd, &list, &n, &e), 0);
        assert_int_equal(n, 0);
        free(list);
        /* Listing (which operators do without the lock) never removes a capture in progress. */
        assert_int_equal(fstatat(f->dirs.requests_fd, ".capture-x1-00000000", &st, 0), 0);
        assert_int_equal(store_remove_incomplete(f->dirs.requests_fd), 1);
        assert_int_equal(fstatat(f->dirs.requests_fd, ".capture-x1-00000000", &st, 0), -1);
}

/* Two processes capturing the same id at once: exactly one wins. */
static void test_store_capture_race(void **state) {
        Fixture *f = *state;
        TfwError e = {0};
        require_root();
        assert_int_equal(worker_dirs_open(&f->config, &f->dirs, &e), 0);
        for (int round = 0; round < 20; round++) {
                char id[16];
                int wins = 0;
                snprintf(id, sizeof(id), "race%d", round);
                pid_t pids[4];
                for (int i = 0; i < 4; i++) {
                        pids[i] = fork();
                        assert_true(pids[i] >= 0);
                        if (pids[i] == 0) {
                                RequestRecord r;
                                TfwError ce = {0};
                                make_record(&r, id, "{}", STATE_QUEUED);
                                int lock = store_lock(f->dirs.requests_fd);
                                if (lock < 0)
                                        _exit(3);
                                int k = store_capture(f->dirs.requests_fd, &r, "{}", 2, 1, NULL, &ce);
                                store_unlock(lock);
                                _exit(k == 0 ? 0 : k == -EEXIST ? 1 : 2);
                        }
                }
                for (int i = 0; i < 4; i++) {
                        int status;
                        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
                        assert_true(WIFEXITED(status));
                        assert_true(WEXITSTATUS(status) <= 1);
                        wins += WEXITSTATUS(status) == 0;
                }
                assert_int_equal(wins, 1);
        }
}

static void test_publish(void **state) {
        Fixture *f = *state;
        TfwError e = {0};
        require_root();
        assert_int_equal(worker_dirs_open(&f->config, &f->dirs, &e), 0);

        RequestRecord queued;
        make_record(&queued, "j1", "{}", STATE_QUEUED);
        assert_int_equal(publish_state(&f->dirs, GID, &queued, 0, &e), 0);
        assert_owner_mode(f->dirs.results_fd, "j1.state.json", 0, GID, 0640);

        _cleanup_close_ int fd = publish_stage_begin(&f->dirs, "j1", &e);
        assert_true(fd >= 0);
        tfw_write_file(fd, "job.log", "hello\n", (size_t) -1);
        assert_int_equal(fchown(fd, 0, 0), 0);
        assert_false(publish_exists(&f->dirs, "j1"));
        json_t *res = json_pack("{s:i, s:s, s:s}", "version", 1, "id", "j1", "status", "succeeded");
        assert_int_equal(publish_commit(&f->dirs, GID, "j1", res, &e), 0);
        assert_true(publish_exists(&f->dirs, "j1"));
        assert_owner_mode(f->dirs.results_fd, "j1", 0, GID, 02750);
        assert_owner_mode(f->dirs.results_fd, "j1/result.json", 0, GID, 0640);
        struct stat st;
        assert_int_equal(fstatat(f->dirs.results_fd, "j1.state.json", &st, 0), -1);
        assert_int_equal(fstatat(f->dirs.staging_fd, "j1", &st, 0), -1);

        /* A second publication of the same id never replaces the first. */
        safe_close(publish_stage_begin(&f->dirs, "j1", &e));
        assert_true(publish_commit(&f->dirs, GID, "j1", res, &e) < 0);
        _cleanup_free_ char *buf = NULL;
        _cleanup_close_ int rfd = openat(f->dirs.results_fd, "j1/result.json", O_RDONLY | O_CLOEXEC);
        assert_int_equal(read_full_fd_bounded(rfd, 4096, &buf, NULL), 0);
        assert_non_null(strstr(buf, "\"succeeded\""));
        json_decref(res);
}

/* systemd's RestrictSUIDSGID= refuses any chmod to a set-id mode. With the results directory
 * made 02750 beforehand (by tmpfiles), the worker must still set up its directories and
 * publish complete results with their 02750 mode, inherited rather than chmod'ed. */
static void test_publish_without_setgid_chmod(void **state) {
        Fixture *f = *state;
        TfwError e = {0};
        require_root();
        assert_int_equal(mkdirat(f->dir->fd, "run", 0755), 0);
        assert_int_equal(mkdirat(f->dir->fd, "run/tfw-demo", 0755), 0);
        assert_int_equal(mkdir(f->results, 0750), 0);
        assert_int_equal(chown(f->results, 0, GID), 0);
        assert_int_equal(chmod(f->results, 02750), 0);

        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
                if (!ctx)
                        _exit(10);
                /* As systemd does: refuse chmod-family calls whose mode has S_ISUID or S_ISGID. */
                for (mode_t bit = S_ISUID; bit >= S_ISGID; bit >>= 1) {
                        if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(chmod), 1,
                                             SCMP_A1(SCMP_CMP_MASKED_EQ, bit, bit)) < 0 ||
                            seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(fchmod), 1,
                                             SCMP_A1(SCMP_CMP_MASKED_EQ, bit, bit)) < 0 ||
                            seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(fchmodat), 1,
                                             SCMP_A2(SCMP_CMP_MASKED_EQ, bit, bit)) < 0 ||
                            seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(mkdirat), 1,
                                             SCMP_A2(SCMP_CMP_MASKED_EQ, bit, bit)) < 0)
                                _exit(11);
                }
                if (seccomp_load(ctx) < 0)
                        _exit(12);
                WorkerDirs d = WORKER_DIRS_NULL;
                TfwError ce = {0};
                if (worker_dirs_open(&f->config, &d, &ce) < 0) {
                        fprintf(stderr, "dirs: %s\n", ce.message);
                        _exit(13);
                }
                int sfd = publish_stage_begin(&d, "s1", &ce);
                if (sfd < 0)
                        _exit(14);
                json_t *res = json_pack("{s:s}", "status", "succeeded");
                if (publish_commit(&d, GID, "s1", res, &ce) < 0) {
                        fprintf(stderr, "publish: %s\n", ce.message);
                        _exit(15);
                }
                _exit(0);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_int_equal(worker_dirs_open(&f->config, &f->dirs, &e), 0);
        assert_owner_mode(f->dirs.results_fd, "s1", 0, GID, 02750);
        assert_owner_mode(f->dirs.results_fd, "s1/result.json", 0, GID, 0640);
        assert_owner_mode(f->dirs.results_fd, ".staging", 0, GID, 02700);
        assert_owner_mode(f->dirs.results_fd, ".rejected", 0, GID, 02750);
}

static void test_rejected_record(void **state) {
        Fixture *f = *state;
        TfwError e = {0};
        require_root();
        assert_int_equal(worker_dirs_open(&f->config, &f->dirs, &e), 0);
        /* A hostile name is never used as a path. */
        assert_int_equal(publish_rejected_record(&f->dirs, GID, "../../etc/passwd", "bad_id", "no",
                                                 1796050800ULL * USEC_PER_SEC, &e), 0);
        assert_int_equal(publish_rejected_record(&f->dirs, GID, "../../etc/passwd", "bad_id", "no",
                                                 1796050800ULL * USEC_PER_SEC, &e), 0);
        assert_owner_mode(f->dirs.rejected_fd, "_._.._etc_passwd-20261130T150000Z.json", 0, GID, 0640);
        assert_owner_mode(f->dirs.rejected_fd, "_._.._etc_passwd-20261130T150000Z-1.json", 0, GID, 0640);
        _cleanup_free_ char *buf = NULL;
        _cleanup_close_ int fd = openat(f->dirs.rejected_fd, "_._.._etc_passwd-20261130T150000Z.json",
                                        O_RDONLY | O_CLOEXEC);
        assert_int_equal(read_full_fd_bounded(fd, 4096, &buf, NULL), 0);
        assert_non_null(strstr(buf, "\"name\": \"../../etc/passwd\""));
        assert_non_null(strstr(buf, "\"error\": \"bad_id\""));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_dirs_created, setup, teardown),
                cmocka_unit_test_setup_teardown(test_dirs_wrong_mode_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_runsc_root, setup, teardown),
                cmocka_unit_test_setup_teardown(test_dirs_symlink_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_dirs_untrusted_ancestor, setup, teardown),
                cmocka_unit_test_setup_teardown(test_store_capture_and_load, setup, teardown),
                cmocka_unit_test_setup_teardown(test_publish_state_names_command, setup, teardown),
                cmocka_unit_test_setup_teardown(test_store_incomplete_capture, setup, teardown),
                cmocka_unit_test_setup_teardown(test_store_capture_race, setup, teardown),
                cmocka_unit_test_setup_teardown(test_publish, setup, teardown),
                cmocka_unit_test_setup_teardown(test_rejected_record, setup, teardown),
                cmocka_unit_test_setup_teardown(test_publish_without_setgid_chmod, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
