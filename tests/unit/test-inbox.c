/* SPDX-License-Identifier: MIT */
/* Capturing inbox entries (contract sections 3-5; threats 2 and 9). Root: the worker's
 * directories are root-owned. Each hostile entry is named after what it tries. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "orchestrator/inbox.h"
#include "orchestrator/store.h"
#include "tests/unit/lib/tfw-test.h"
#include "tests/unit/lib/worker-fixture.h"


static const char *req_json(const char *id, const char *cls) {
        static char buf[512];
        snprintf(buf, sizeof(buf),
                 "{\"version\":1,\"id\":\"%s\",\"action_class\":\"%s\",\"argv\":[\"make\",\"test\"]}", id, cls);
        return buf;
}

static void drop(Fixture *f, const char *name, const char *body) {
        tfw_write_file(f->w.inbox_fd, name, body, (size_t) -1);
}

static bool inbox_has(Fixture *f, const char *name) {
        struct stat st;
        return fstatat(f->w.inbox_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static char *read_result(Fixture *f, const char *id) {
        char path[128];
        snprintf(path, sizeof(path), "%s/result.json", id);
        _cleanup_close_ int fd = openat(f->w.dirs.results_fd, path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        char *buf = NULL;
        assert_int_equal(read_full_fd_bounded(fd, 1 << 20, &buf, NULL), 0);
        return buf;
}

static unsigned count_rejected(Fixture *f) {
        unsigned n = 0;
        int dfd = fcntl(f->w.dirs.rejected_fd, F_DUPFD_CLOEXEC, 3);
        DIR *d = fdopendir(dfd);
        struct dirent *de;
        rewinddir(d);
        while ((de = readdir(d)))
                n += de->d_name[0] != '.';
        closedir(d);
        return n;
}

static CaptureOutcome capture(Fixture *f, const char *name) {
        CaptureOutcome o;
        TfwError e = {0};
        if (inbox_capture(&f->w, name, &o, &e) < 0)
                fail_msg("capture '%s': %s", name, e.message);
        return o;
}

static void test_inbox_created_for_controller(void **state) {
        Fixture *f = worker_fixture(state);
        struct stat st;
        assert_int_equal(fstat(f->w.inbox_fd, &st), 0);
        assert_int_equal(st.st_uid, FIXTURE_UID);
        assert_int_equal(st.st_gid, FIXTURE_GID);
        assert_true(S_ISDIR(st.st_mode));
}

static void test_local_reversible_queued(void **state) {
        Fixture *f = worker_fixture(state);
        RequestRecord rec;
        TfwError e = {0};
        drop(f, "job1.json", req_json("job1", "local-reversible"));
        assert_int_equal(capture(f, "job1.json"), CAPTURE_QUEUED);
        assert_false(inbox_has(f, "job1.json"));
        assert_int_equal(store_load(f->w.dirs.requests_fd, "job1", &rec, &e), 0);
        assert_int_equal(rec.state, STATE_QUEUED);
        struct stat st;
        assert_int_equal(fstatat(f->w.dirs.results_fd, "job1.state.json", &st, 0), 0);
}

static void test_approval_classes_pending(void **state) {
        Fixture *f = worker_fixture(state);
        const char *classes[] = {"external-reversible", "irreversible", "financial", "production",
                                 "communicative", "privileged"};
        for (size_t i = 0; i < ELEMENTSOF(classes); i++) {
                char id[16], name[32];
                RequestRecord rec;
                TfwError e = {0};
                snprintf(id, sizeof(id), "p%zu", i);
                snprintf(name, sizeof(name), "%s.json", id);
                drop(f, name, req_json(id, classes[i]));
                assert_int_equal(capture(f, name), CAPTURE_PENDING);
                assert_int_equal(store_load(f->w.dirs.requests_fd, id, &rec, &e), 0);
                assert_int_equal(rec.state, STATE_PENDING);
        }
}

static void test_forbidden_rejected(void **state) {
        Fixture *f = worker_fixture(state);
        drop(f, "nope.json", req_json("nope", "forbidden"));
        assert_int_equal(capture(f, "nope.json"), CAPTURE_REJECTED);
        _cleanup_free_ char *res = read_result(f, "nope");
        assert_non_null(res);
        assert_non_null(strstr(res, "\"status\": \"rejected\""));
        assert_non_null(strstr(res, "\"error\": \"forbidden\""));
        assert_false(inbox_has(f, "nope.json"));
}

static void test_invalid_request_owns_its_id(void **state) {
        Fixture *f = worker_fixture(state);
        drop(f, "bad1.json", "{\"version\":1,\"id\":\"bad1\",\"action_class\":\"local-reversible\",\"argv\":[],\"x\":1}");
        assert_int_equal(capture(f, "bad1.json"), CAPTURE_REJECTED);
        _cleanup_free_ char *res = read_result(f, "bad1");
        assert_non_null(strstr(res, "\"error\": \"unknown_field\""));
        assert_non_null(strstr(res, "\"action_class\": null"));
        /* The id is now used: a corrected request under the same id is a duplicate. */
        drop(f, "bad1.json", req_json("bad1", "local-reversible"));
        assert_int_equal(capture(f, "bad1.json"), CAPTURE_REJECTED_ANON);
        assert_int_equal(count_rejected(f), 1);
}

static void test_bad_names_anonymous(void **state) {
        Fixture *f = worker_fixture(state);
        drop(f, "Upper.json", req_json("upper", "local-reversible"));
        drop(f, "noext", req_json("noext", "local-reversible"));
        assert_int_equal(capture(f, "Upper.json"), CAPTURE_REJECTED_ANON);
        assert_int_equal(capture(f, "noext"), CAPTURE_REJECTED_ANON);
        assert_int_equal(count_rejected(f), 2);
        assert_false(inbox_has(f, "noext"));
}

/* A name that is not UTF-8 is still consumed exactly once: messages and records show it in a
 * printable form (a raw name made the rejection record unwritable and the entry stayed). */
static void test_non_utf8_names_consumed(void **state) {
        Fixture *f = worker_fixture(state);
        drop(f, "\xff\xfe.json", req_json("x", "local-reversible"));
        assert_int_equal(mkfifoat(f->w.inbox_fd, "\xc3", 0666), 0);
        assert_int_equal(capture(f, "\xff\xfe.json"), CAPTURE_REJECTED_ANON);
        assert_int_equal(capture(f, "\xc3"), CAPTURE_REJECTED_ANON);
        assert_false(inbox_has(f, "\xff\xfe.json"));
        assert_false(inbox_has(f, "\xc3"));
        assert_int_equal(count_rejected(f), 2);
}

static void test_dotfiles_ignored(void **state) {
        Fixture *f = worker_fixture(state);
        drop(f, ".job2.json.tmp", "{");
        assert_int_equal(capture(f, ".job2.json.tmp"), CAPTURE_IGNORED);
        assert_true(inbox_has(f, ".job2.json.tmp"));
}

/* Threat 2: a FIFO must never be opened for reading (it would block the worker). */
static void test_fifo_rejected_without_blocking(void **state) {
        Fixture *f = worker_fixture(state);
        assert_int_equal(mkfifoat(f->w.inbox_fd, "fifo1.json", 0666), 0);
        assert_int_equal(capture(f, "fifo1.json"), CAPTURE_REJECTED_ANON);
        assert_false(inbox_has(f, "fifo1.json"));
}

/* Threat 2: a symlink to a root secret is never followed. */
static void test_symlink_to_secret_rejected(void **state) {
        Fixture *f = worker_fixture(state);
        char secret[600];
        snprintf(secret, sizeof(secret), "%s/secret.json", f->dir->path);
        int sfd = open(secret, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_true(sfd >= 0);
        const char *body = req_json("link1", "local-reversible");
        assert_int_equal(write_all(sfd, body, strlen(body)), 0);
        close(sfd);
        assert_int_equal(symlinkat(secret, f->w.inbox_fd, "link1.json"), 0);
        assert_int_equal(capture(f, "link1.json"), CAPTURE_REJECTED_ANON);
        TfwError e = {0};
        RequestRecord rec;
        assert_int_equal(store_load(f->w.dirs.requests_fd, "link1", &rec, &e), -ENOENT);
        assert_false(inbox_has(f, "link1.json"));
        assert_int_equal(access(secret, F_OK), 0); /* the target is untouched */
}

static void test_socket_directory_device_rejected(void **state) {
        Fixture *f = worker_fixture(state);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        char path[600];
        snprintf(path, sizeof(path), "%s/ws/.tentaflake-worker/inbox/sock1.json", f->dir->path);
        if (strlen(path) >= sizeof(sa.sun_path))
                tfw_skip("temporary path too long for a socket");
        strcpy(sa.sun_path, path);
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_int_equal(bind(s, (struct sockaddr *) &sa, sizeof(sa)), 0);
        close(s);
        assert_int_equal(mkdirat(f->w.inbox_fd, "dir1.json", 0755), 0);
        tfw_write_file(f->w.inbox_fd, "dir1.json/inner", "x", 1);
        assert_int_equal(mknodat(f->w.inbox_fd, "dev1.json", S_IFCHR | 0600, makedev(1, 3)), 0);

        assert_int_equal(capture(f, "sock1.json"), CAPTURE_REJECTED_ANON);
        assert_int_equal(capture(f, "dir1.json"), CAPTURE_REJECTED_ANON);
        assert_int_equal(capture(f, "dev1.json"), CAPTURE_REJECTED_ANON);
        assert_false(inbox_has(f, "sock1.json"));
        assert_false(inbox_has(f, "dir1.json"));
        assert_false(inbox_has(f, "dev1.json"));
        assert_int_equal(count_rejected(f), 3);
}

/* Threat 2: a hard link to a file outside the inbox (here a root-only file) is refused. */
static void test_hardlink_rejected(void **state) {
        Fixture *f = worker_fixture(state);
        char secret[600];
        snprintf(secret, sizeof(secret), "%s/ws/shadow-copy", f->dir->path);
        int sfd = open(secret, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        const char *body = req_json("hl1", "local-reversible");
        assert_int_equal(write_all(sfd, body, strlen(body)), 0);
        close(sfd);
        assert_int_equal(linkat(AT_FDCWD, secret, f->w.inbox_fd, "hl1.json", 0), 0);
        assert_int_equal(capture(f, "hl1.json"), CAPTURE_REJECTED_ANON);
        TfwError e = {0};
        RequestRecord rec;
        assert_int_equal(store_load(f->w.dirs.requests_fd, "hl1", &rec, &e), -ENOENT);
        assert_int_equal(access(secret, F_OK), 0);
}

static void test_oversize_rejected(void **state) {
        Fixture *f = worker_fixture(state);
        size_t n = f->w.policy.max_request_bytes + 1;
        _cleanup_free_ char *big = malloc(n);
        memset(big, ' ', n);
        tfw_write_file(f->w.inbox_fd, "big1.json", big, n);
        assert_int_equal(capture(f, "big1.json"), CAPTURE_REJECTED);
        _cleanup_free_ char *res = read_result(f, "big1");
        assert_non_null(strstr(res, "\"error\": \"too_large\""));
        assert_false(inbox_has(f, "big1.json"));
}

/* Threat 9: the private copy is what counts; rewriting the inbox afterwards changes nothing,
 * and the same id again (with other bytes) is a duplicate that leaves the first untouched. */
static void test_duplicate_and_rewrite(void **state) {
        Fixture *f = worker_fixture(state);
        RequestRecord rec, again;
        TfwError e = {0};
        drop(f, "dup1.json", req_json("dup1", "irreversible"));
        assert_int_equal(capture(f, "dup1.json"), CAPTURE_PENDING);
        assert_int_equal(store_load(f->w.dirs.requests_fd, "dup1", &rec, &e), 0);
        drop(f, "dup1.json", req_json("dup1", "local-reversible"));
        assert_int_equal(capture(f, "dup1.json"), CAPTURE_REJECTED_ANON);
        assert_int_equal(store_load(f->w.dirs.requests_fd, "dup1", &again, &e), 0);
        assert_string_equal(again.sha256, rec.sha256);
        assert_int_equal(again.state, STATE_PENDING);
        assert_int_equal(again.action_class, ACTION_IRREVERSIBLE);
}

/* A crash between capture and unlink: the same bytes again are just unlinked. */
static void test_replay_after_crash(void **state) {
        Fixture *f = worker_fixture(state);
        const char *body = req_json("re1", "local-reversible");
        drop(f, "re1.json", body);
        assert_int_equal(capture(f, "re1.json"), CAPTURE_QUEUED);
        drop(f, "re1.json", body);
        assert_int_equal(capture(f, "re1.json"), CAPTURE_REPLAYED);
        assert_false(inbox_has(f, "re1.json"));
        assert_int_equal(count_rejected(f), 0);
}

static void test_scan(void **state) {
        Fixture *f = worker_fixture(state);
        TfwError e = {0};
        drop(f, "s1.json", req_json("s1", "local-reversible"));
        drop(f, "s2.json", req_json("s2", "financial"));
        drop(f, ".s3.json", "{");
        assert_int_equal(inbox_scan(&f->w, &e), 2);
        assert_false(inbox_has(f, "s1.json"));
        assert_false(inbox_has(f, "s2.json"));
        assert_true(inbox_has(f, ".s3.json"));
}

/* The agent owns the workspace: a symlinked control directory is refused, not followed. */
static void test_control_dir_symlink_refused(void **state) {
        Fixture *f = worker_fixture(state);
        TfwError e = {0};
        char elsewhere[600];
        snprintf(elsewhere, sizeof(elsewhere), "%s/elsewhere", f->dir->path);
        assert_int_equal(mkdir(elsewhere, 0700), 0);
        _cleanup_close_ int ws = open(f->ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_int_equal(rm_rf_at(ws, ".tentaflake-worker"), 0);
        assert_int_equal(symlinkat(elsewhere, ws, ".tentaflake-worker"), 0);
        assert_true(inbox_open(&f->w, &e) < 0);
        assert_non_null(strstr(e.message, ".tentaflake-worker"));
        struct stat st;
        assert_int_equal(stat(elsewhere, &st), 0);
        assert_int_equal(st.st_nlink, 2); /* nothing was created in the target */
}

int main(void) {
#define T(x) cmocka_unit_test_setup_teardown(x, worker_fixture_setup, worker_fixture_teardown)
        const struct CMUnitTest tests[] = {
                T(test_inbox_created_for_controller),
                T(test_local_reversible_queued),
                T(test_approval_classes_pending),
                T(test_forbidden_rejected),
                T(test_invalid_request_owns_its_id),
                T(test_bad_names_anonymous),
                T(test_non_utf8_names_consumed),
                T(test_dotfiles_ignored),
                T(test_fifo_rejected_without_blocking),
                T(test_symlink_to_secret_rejected),
                T(test_socket_directory_device_rejected),
                T(test_hardlink_rejected),
                T(test_oversize_rejected),
                T(test_duplicate_and_rewrite),
                T(test_replay_after_crash),
                T(test_scan),
                T(test_control_dir_symlink_refused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
