/* SPDX-License-Identifier: MIT */
/* orchestrator/audit: the hash-chained audit log. Each tamper case (edited, deleted, swapped,
 * inserted, forged, truncated line) must be found and named; rotation across days keeps one
 * chain and prunes old files; concurrent writers from several processes lose nothing; fields
 * are bounded and whitelisted; a torn tail is repaired in the open; no symlink is followed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/sha256.h"
#include "orchestrator/audit.h"
#include "tests/unit/lib/tfw-test.h"

/* 2026-11-29T12:00:00Z */
#define DAY0 ((usec_t) 1795953600ULL * USEC_PER_SEC)
#define DAY ((usec_t) 86400ULL * USEC_PER_SEC)
#define ZEROS "0000000000000000000000000000000000000000000000000000000000000000"

static usec_t test_clock(void *userdata) {
        return *(usec_t *) userdata;
}

static Audit *open_audit(int state_fd, unsigned generations, usec_t *clock) {
        Audit *a = NULL;
        TfwError e = {};
        int r = audit_open(state_fd, generations, &a, &e);
        if (r < 0)
                fail_msg("audit_open: %s", e.message);
        if (clock)
                audit_set_clock(a, test_clock, clock);
        return a;
}

static void append_one(Audit *a, const char *event, unsigned i) {
        TfwError e = {};
        char id[32], msg[64];
        snprintf(id, sizeof(id), "job_%u", i);
        snprintf(msg, sizeof(msg), "line %u of the test", i);
        _cleanup_json_ json_t *f = json_pack("{s:s, s:s, s:[s,s], s:s}", "id", id, "message", msg,
                                             "argv", "make", "test", "request_sha256",
                                             "ab" "cdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
        assert_non_null(f);
        int r = audit_append(a, event, f, &e);
        if (r < 0)
                fail_msg("audit_append: %s", e.message);
}

static void append_n(Audit *a, unsigned from, unsigned n) {
        static const char *const events[] = {"captured", "pending", "approved", "started", "finished"};
        for (unsigned i = from; i < from + n; i++)
                append_one(a, events[i % ELEMENTSOF(events)], i);
}

static char *read_rel(int dir_fd, const char *rel, size_t *ret_len) {
        char *buf = NULL;
        _cleanup_close_ int fd = openat(dir_fd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                fail_msg("open '%s': %s", rel, strerror(errno));
        assert_int_equal(read_full_fd_bounded(fd, 64 << 20, &buf, ret_len), 0);
        return buf;
}

/* The lines of a file (without newlines); a last fragment without newline is included. */
static size_t read_lines(int dir_fd, const char *rel, char ***ret) {
        size_t len, n = 0;
        _cleanup_free_ char *buf = read_rel(dir_fd, rel, &len);
        char **lines = calloc(len + 2, sizeof(char *));
        assert_non_null(lines);
        for (char *p = buf; p < buf + len;) {
                char *nl = memchr(p, '\n', (size_t) (buf + len - p));
                size_t l = nl ? (size_t) (nl - p) : (size_t) (buf + len - p);
                lines[n++] = strndup(p, l);
                p += l + 1;
        }
        *ret = lines;
        return n;
}

static void write_lines(int dir_fd, const char *rel, char **lines, size_t n, bool last_newline) {
        size_t total = 0, off = 0;
        for (size_t i = 0; i < n; i++)
                total += strlen(lines[i]) + 1;
        _cleanup_free_ char *buf = malloc(total + 1);
        assert_non_null(buf);
        for (size_t i = 0; i < n; i++) {
                size_t l = strlen(lines[i]);
                memcpy(buf + off, lines[i], l);
                off += l;
                if (i + 1 < n || last_newline)
                        buf[off++] = '\n';
        }
        tfw_write_file(dir_fd, rel, buf, off);
}

static void expect_intact(int state_fd, AuditVerifyReport *rep) {
        TfwError e = {};
        int r = audit_verify(state_fd, rep, &e);
        if (r != 0)
                fail_msg("audit_verify: %d %s", r, e.message);
        assert_true(rep->intact);
        assert_int_equal(rep->break_line, 0);
}

static void expect_break(int state_fd, const char *file, uint64_t line, const char *fragment) {
        AuditVerifyReport rep;
        TfwError e = {};
        int r = audit_verify(state_fd, &rep, &e);
        print_message("    verify: %s\n", rep.message);
        assert_int_equal(r, -EBADMSG);
        assert_false(rep.intact);
        assert_string_equal(e.code, "audit_broken");
        assert_string_equal(e.message, rep.message);
        assert_string_equal(rep.break_file, file);
        assert_int_equal(rep.break_line, line);
        if (fragment && !strstr(rep.message, fragment))
                fail_msg("message '%s' lacks '%s'", rep.message, fragment);
}

/* Ten lines in audit.jsonl; the state directory is the test directory. */
static void setup_ten(int state_fd) {
        usec_t now = DAY0;
        _cleanup_(audit_closep) Audit *a = open_audit(state_fd, 14, &now);
        append_n(a, 1, 10);
}

static void free_lines(char **l, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(l[i]);
        free(l);
}

static void test_append_verify(void **state) {
        TestDir *d = *state;
        AuditVerifyReport rep;
        char **lines;
        char hex[SHA256_HEX_SIZE];
        struct stat st;

        setup_ten(d->fd);
        expect_intact(d->fd, &rep);
        assert_int_equal(rep.n_lines, 10);
        assert_int_equal(rep.n_files, 1);
        assert_int_equal(rep.first_seq, 1);
        assert_int_equal(rep.last_seq, 10);
        assert_non_null(strstr(rep.message, "from the first record"));

        size_t n = read_lines(d->fd, "audit/audit.jsonl", &lines);
        assert_int_equal(n, 10);
        for (size_t i = 0; i < n; i++) {
                _cleanup_json_ json_t *j = json_loads(lines[i], 0, NULL);
                assert_non_null(j);
                /* Canonical: compact with sorted keys, byte for byte. */
                _cleanup_free_ char *c = json_dumps_canonical(j);
                assert_string_equal(c, lines[i]);
                assert_int_equal(json_integer_value(json_object_get(j, "seq")), i + 1);
                assert_string_equal(json_string_value(json_object_get(j, "time")),
                                    "2026-11-29T12:00:00Z");
                if (i == 0)
                        assert_string_equal(json_string_value(json_object_get(j, "prev")), ZEROS);
                else {
                        sha256_buffer_hex(lines[i - 1], strlen(lines[i - 1]), hex);
                        assert_string_equal(json_string_value(json_object_get(j, "prev")), hex);
                }
        }
        sha256_buffer_hex(lines[9], strlen(lines[9]), hex);
        assert_string_equal(rep.head_sha256, hex);
        free_lines(lines, n);

        /* Private: the directory 0700, the files without group or other bits. */
        assert_int_equal(fstatat(d->fd, "audit", &st, 0), 0);
        assert_int_equal(st.st_mode & 07777, 0700);
        assert_int_equal(fstatat(d->fd, "audit/audit.jsonl", &st, 0), 0);
        assert_int_equal(st.st_mode & 077, 0);
        assert_int_equal(fstatat(d->fd, "audit/audit.lock", &st, 0), 0);
        assert_int_equal(st.st_mode & 077, 0);
}

static void test_empty(void **state) {
        TestDir *d = *state;
        AuditVerifyReport rep;

        /* No audit directory at all, then a directory without lines: both an empty log. */
        expect_intact(d->fd, &rep);
        assert_int_equal(rep.n_lines, 0);
        _cleanup_(audit_closep) Audit *a = open_audit(d->fd, 14, NULL);
        assert_non_null(a);
        expect_intact(d->fd, &rep);
        assert_int_equal(rep.n_lines, 0);
        assert_int_equal(rep.first_seq, 0);
        assert_string_equal(rep.head_sha256, "");
}

static void test_refused_fields(void **state) {
        TestDir *d = *state;
        TfwError e = {};
        struct stat st;
        _cleanup_(audit_closep) Audit *a = open_audit(d->fd, 14, NULL);
        const char *bad[] = {
                "{\"seq\": 5}", "{\"prev\": \"" ZEROS "\"}", "{\"time\": \"x\"}", "{\"event\": \"approved\"}",
                "{\"environment\": \"PATH=/bin\"}", "{\"content\": \"secret\"}", "{\"truncated\": []}",
                "{\"discarded_bytes\": 1}", "{\"exit_code\": \"0\"}", "{\"exit_code\": 1.0}",
                "{\"id\": 5}", "{\"argv\": \"make\"}", "{\"argv\": [\"make\", 1]}",
                "{\"request_sha256\": \"ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789\"}",
                "{\"request_sha256\": \"abc\"}",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_json_ json_t *f = json_loads(bad[i], 0, NULL);
                assert_non_null(f);
                if (audit_append(a, "approved", f, &e) != -EINVAL)
                        fail_msg("accepted %s", bad[i]);
                assert_string_equal(e.code, "audit_field");
        }
        assert_int_equal(audit_append(a, "hacked", NULL, &e), -EINVAL);
        assert_int_equal(audit_append(a, "audit-repaired", NULL, &e), -EINVAL);
        assert_int_equal(audit_append(a, NULL, NULL, &e), -EINVAL);
        /* Nothing was written for any of them. */
        assert_true(fstatat(d->fd, "audit/audit.jsonl", &st, 0) < 0 || st.st_size == 0);

        /* Every listed event is accepted, with null fields dropped. */
        const char *events[] = {"captured", "rejected", "pending", "approved", "denied", "expired",
                                "started", "finished", "error", "interrupted", "expired-results",
                                "worker-start", "worker-stop"};
        for (size_t i = 0; i < ELEMENTSOF(events); i++) {
                _cleanup_json_ json_t *f = json_pack("{s:n, s:i}", "signal", "exit_code", 3);
                if (audit_append(a, events[i], f, &e) < 0)
                        fail_msg("%s: %s", events[i], e.message);
        }
        size_t len;
        _cleanup_free_ char *buf = read_rel(d->fd, "audit/audit.jsonl", &len);
        assert_null(strstr(buf, "signal"));
        AuditVerifyReport rep;
        expect_intact(d->fd, &rep);
        assert_int_equal(rep.n_lines, ELEMENTSOF(events));
}

static void test_tamper_edit(void **state) {
        TestDir *d = *state;
        char **lines;

        setup_ten(d->fd);
        size_t n = read_lines(d->fd, "audit/audit.jsonl", &lines);
        /* One byte of line 5's message, still valid canonical JSON: line 5 is named. */
        char *p = strstr(lines[4], "line 5 of");
        assert_non_null(p);
        p[5] = '7';
        write_lines(d->fd, "audit/audit.jsonl", lines, n, true);
        expect_break(d->fd, "audit.jsonl", 5, "was changed");

        /* The same byte of line 9: only line 10 can tell, and nothing vouches for line 10. */
        p[5] = '5';
        p = strstr(lines[8], "line 9 of");
        p[5] = '1';
        write_lines(d->fd, "audit/audit.jsonl", lines, n, true);
        expect_break(d->fd, "audit.jsonl", 10, "prev is not the sha256");

        /* An edit that breaks the JSON is named on the line itself. */
        p[5] = '9';
        lines[5][0] = 'x';
        write_lines(d->fd, "audit/audit.jsonl", lines, n, true);
        expect_break(d->fd, "audit.jsonl", 6, "not a valid audit record");

        /* An edit of the prev field of line 7 names line 7 (line 8 does not vouch for it). */
        lines[5][0] = '{';
        p = strstr(lines[6], "\"prev\":\"");
        char orig = p[8];
        p[8] = orig == 'a' ? 'b' : 'a';
        write_lines(d->fd, "audit/audit.jsonl", lines, n, true);
        expect_break(d->fd, "audit.jsonl", 7, NULL);

        /* Whitespace is a change too, even where JSON would not care. */
        p[8] = orig;
        AuditVerifyReport rep;
        write_lines(d->fd, "audit/audit.jsonl", lines, n, true);
        expect_intact(d->fd, &rep);
        char *spaced = NULL;
        assert_true(asprintf(&spaced, "%s ", lines[9]) > 0);
        free(lines[9]);
        lines[9] = spaced;
        write_lines(d->fd, "audit/audit.jsonl", lines, n, true);
        expect_break(d->fd, "audit.jsonl", 10, "canonical");

        /* The first line ever must have the zero prev. */
        lines[9] = strndup(spaced, strlen(spaced) - 1);
        free(spaced);
        p = strstr(lines[0], "\"prev\":\"");
        p[8] = '1';
        write_lines(d->fd, "audit/audit.jsonl", lines, n, true);
        expect_break(d->fd, "audit.jsonl", 1, "64 zeros");
        free_lines(lines, n);
}

static void test_tamper_delete_swap_insert(void **state) {
        TestDir *d = *state;
        char **lines;

        setup_ten(d->fd);
        size_t n = read_lines(d->fd, "audit/audit.jsonl", &lines);

        /* Deleted line 5: the break is where it is missing. */
        char *saved = lines[4];
        memmove(lines + 4, lines + 5, (n - 5) * sizeof(char *));
        write_lines(d->fd, "audit/audit.jsonl", lines, n - 1, true);
        expect_break(d->fd, "audit.jsonl", 5, "missing");
        memmove(lines + 5, lines + 4, (n - 5) * sizeof(char *));
        lines[4] = saved;

        /* Lines 4 and 5 swapped. */
        saved = lines[3];
        lines[3] = lines[4];
        lines[4] = saved;
        write_lines(d->fd, "audit/audit.jsonl", lines, n, true);
        expect_break(d->fd, "audit.jsonl", 4, "moved");
        lines[4] = lines[3];
        lines[3] = saved;

        /* A copy of line 3 inserted after line 6. */
        char **ins = calloc(n + 1, sizeof(char *));
        memcpy(ins, lines, 6 * sizeof(char *));
        ins[6] = lines[2];
        memcpy(ins + 7, lines + 6, (n - 6) * sizeof(char *));
        write_lines(d->fd, "audit/audit.jsonl", ins, n + 1, true);
        expect_break(d->fd, "audit.jsonl", 7, NULL);

        /* A well-formed line inserted after line 6 with the right seq and prev: the line after
         * it is out of sequence. */
        char hex[SHA256_HEX_SIZE], *forged = NULL;
        sha256_buffer_hex(lines[5], strlen(lines[5]), hex);
        assert_true(asprintf(&forged, "{\"event\":\"approved\",\"id\":\"job_x\",\"prev\":\"%s\","
                             "\"seq\":7,\"time\":\"2026-11-29T12:00:00Z\"}", hex) > 0);
        ins[6] = forged;
        write_lines(d->fd, "audit/audit.jsonl", ins, n + 1, true);
        expect_break(d->fd, "audit.jsonl", 8, "seq 7 where 8");
        free(forged);

        /* A forged line appended at the end with a wrong prev. */
        assert_true(asprintf(&forged, "{\"event\":\"approved\",\"id\":\"job_x\",\"prev\":\"%s\","
                             "\"seq\":11,\"time\":\"2026-11-29T12:00:00Z\"}", hex) > 0);
        memcpy(ins, lines, n * sizeof(char *));
        ins[n] = forged;
        write_lines(d->fd, "audit/audit.jsonl", ins, n + 1, true);
        expect_break(d->fd, "audit.jsonl", 11, "prev is not the sha256");
        free(forged);
        free(ins);

        /* The untouched lines verify again. */
        AuditVerifyReport rep;
        write_lines(d->fd, "audit/audit.jsonl", lines, n, true);
        expect_intact(d->fd, &rep);
        assert_int_equal(rep.n_lines, 10);
        free_lines(lines, n);
}

static void test_tamper_truncate(void **state) {
        TestDir *d = *state;
        size_t len;

        setup_ten(d->fd);
        _cleanup_free_ char *buf = read_rel(d->fd, "audit/audit.jsonl", &len);

        /* Cut in the middle of line 7. */
        size_t off = 0;
        for (int i = 0; i < 6; i++)
                off = (size_t) ((char *) memchr(buf + off, '\n', len - off) - buf) + 1;
        tfw_write_file(d->fd, "audit/audit.jsonl", buf, off + 40);
        expect_break(d->fd, "audit.jsonl", 7, "cut off");

        /* Only the final newline missing. */
        tfw_write_file(d->fd, "audit/audit.jsonl", buf, len - 1);
        expect_break(d->fd, "audit.jsonl", 10, "cut off");

        /* Cut exactly after a newline: the chain cannot tell (documented limit) and says where
         * the head is, for a comparison with a copy kept elsewhere. */
        AuditVerifyReport rep;
        tfw_write_file(d->fd, "audit/audit.jsonl", buf, off);
        expect_intact(d->fd, &rep);
        assert_int_equal(rep.last_seq, 6);
}

/* A torn tail (a crash mid-write) is cut by the next append and recorded in the chain. */
static void test_torn_tail_repair(void **state) {
        TestDir *d = *state;
        usec_t now = DAY0;
        AuditVerifyReport rep;
        TfwError e = {};
        size_t len;
        char **lines;

        _cleanup_(audit_closep) Audit *a = open_audit(d->fd, 14, &now);
        append_n(a, 1, 5);
        _cleanup_free_ char *buf = read_rel(d->fd, "audit/audit.jsonl", &len);
        static const char frag[] = "{\"event\":\"sta";
        _cleanup_free_ char *torn = malloc(len + sizeof(frag));
        memcpy(torn, buf, len);
        memcpy(torn + len, frag, sizeof(frag) - 1);
        tfw_write_file(d->fd, "audit/audit.jsonl", torn, len + sizeof(frag) - 1);
        expect_break(d->fd, "audit.jsonl", 6, "cut off");

        append_n(a, 6, 1);
        expect_intact(d->fd, &rep);
        assert_int_equal(rep.n_lines, 7);
        assert_int_equal(rep.n_repairs, 1);
        assert_non_null(strstr(rep.message, "torn"));
        size_t n = read_lines(d->fd, "audit/audit.jsonl", &lines);
        assert_int_equal(n, 7);
        _cleanup_json_ json_t *j = json_loads(lines[5], 0, NULL);
        assert_string_equal(json_string_value(json_object_get(j, "event")), "audit-repaired");
        assert_int_equal(json_integer_value(json_object_get(j, "discarded_bytes")), sizeof(frag) - 1);
        char hex[SHA256_HEX_SIZE];
        sha256_buffer_hex(frag, sizeof(frag) - 1, hex);
        assert_string_equal(json_string_value(json_object_get(j, "discarded_sha256")), hex);
        free_lines(lines, n);

        /* A complete last line that is not a record stops appends; nothing is written. */
        struct stat st1, st2;
        _cleanup_free_ char *cur = read_rel(d->fd, "audit/audit.jsonl", &len);
        _cleanup_free_ char *bad = malloc(len + 9);
        memcpy(bad, cur, len);
        memcpy(bad + len, "garbage\n", 8);
        tfw_write_file(d->fd, "audit/audit.jsonl", bad, len + 8);
        assert_int_equal(fstatat(d->fd, "audit/audit.jsonl", &st1, 0), 0);
        assert_int_equal(audit_append(a, "started", NULL, &e), -EBADMSG);
        assert_string_equal(e.code, "audit_corrupt");
        assert_int_equal(fstatat(d->fd, "audit/audit.jsonl", &st2, 0), 0);
        assert_int_equal(st1.st_size, st2.st_size);
}

static bool file_exists(int dir_fd, const char *rel) {
        struct stat st;
        return fstatat(dir_fd, rel, &st, AT_SYMLINK_NOFOLLOW) >= 0;
}

static size_t count_lines(int dir_fd, const char *rel) {
        size_t len, n = 0;
        _cleanup_free_ char *buf = read_rel(dir_fd, rel, &len);
        for (size_t i = 0; i < len; i++)
                n += buf[i] == '\n';
        return n;
}

/* A torn tail met at a day boundary, or by gc's forced rotation, never ends up in a rotated
 * file (which is never rewritten): it is cut from the current file first. */
static void test_torn_tail_rotation(void **state) {
        TestDir *d = *state;
        usec_t now = DAY0;
        AuditVerifyReport rep;
        TfwError e = {};
        size_t len;
        char **lines;

        _cleanup_(audit_closep) Audit *a = open_audit(d->fd, 14, &now);
        append_n(a, 1, 3);
        _cleanup_free_ char *buf = read_rel(d->fd, "audit/audit.jsonl", &len);
        tfw_write_file(d->fd, "audit/audit.jsonl", buf, len - 7);

        /* gc on a torn file leaves it alone. */
        assert_int_equal(audit_rotate(a, now, true, NULL, &e), 0);
        assert_false(file_exists(d->fd, "audit/audit-20261129.jsonl"));

        now += DAY;
        append_n(a, 4, 1);
        assert_true(file_exists(d->fd, "audit/audit-20261129.jsonl"));
        assert_int_equal(count_lines(d->fd, "audit/audit-20261129.jsonl"), 2);
        size_t n = read_lines(d->fd, "audit/audit.jsonl", &lines);
        assert_int_equal(n, 2);
        assert_non_null(strstr(lines[0], "\"event\":\"audit-repaired\""));
        assert_non_null(strstr(lines[0], "\"seq\":3,"));
        assert_non_null(strstr(lines[1], "\"seq\":4,"));
        free_lines(lines, n);
        expect_intact(d->fd, &rep);
        assert_int_equal(rep.n_lines, 4);
        assert_int_equal(rep.n_repairs, 1);
}

static void test_rotation(void **state) {
        TestDir *d = *state;
        AuditVerifyReport rep;
        TfwError e = {};
        char **lines;
        /* 23:59:30 on 2026-11-29, then past midnight. */
        usec_t now = DAY0 + (11 * 3600 + 59 * 60 + 30) * USEC_PER_SEC;
        _cleanup_(audit_closep) Audit *a = open_audit(d->fd, 2, &now);

        append_n(a, 1, 3);
        now += 60 * USEC_PER_SEC;  /* 2026-11-30T00:00:30Z */
        append_n(a, 4, 3);
        assert_true(file_exists(d->fd, "audit/audit-20261129.jsonl"));
        assert_int_equal(count_lines(d->fd, "audit/audit-20261129.jsonl"), 3);
        assert_int_equal(count_lines(d->fd, "audit/audit.jsonl"), 3);
        now += DAY;
        append_n(a, 7, 3);
        assert_true(file_exists(d->fd, "audit/audit-20261130.jsonl"));
        expect_intact(d->fd, &rep);
        assert_int_equal(rep.n_files, 3);
        assert_int_equal(rep.n_lines, 9);
        assert_int_equal(rep.first_seq, 1);

        /* The chain continues across the file boundary. */
        size_t n = read_lines(d->fd, "audit/audit.jsonl", &lines);
        char **old;
        size_t m = read_lines(d->fd, "audit/audit-20261130.jsonl", &old);
        char hex[SHA256_HEX_SIZE];
        sha256_buffer_hex(old[m - 1], strlen(old[m - 1]), hex);
        assert_non_null(strstr(lines[0], hex));
        assert_non_null(strstr(lines[0], "\"seq\":7"));
        free_lines(lines, n);

        /* A line removed at the end of a rotated file breaks the next file's first line. */
        write_lines(d->fd, "audit/audit-20261130.jsonl", old, m - 1, true);
        expect_break(d->fd, "audit.jsonl", 1, "seq 7 where 6");
        write_lines(d->fd, "audit/audit-20261130.jsonl", old, m, true);
        /* An edited last line of a rotated file is caught by the next file. */
        char *p = strstr(old[m - 1], "line 6 of");
        p[5] = '8';
        write_lines(d->fd, "audit/audit-20261130.jsonl", old, m, true);
        expect_break(d->fd, "audit-20261130.jsonl", 3, "was changed");
        p[5] = '6';
        write_lines(d->fd, "audit/audit-20261130.jsonl", old, m, true);
        free_lines(old, m);
        expect_intact(d->fd, &rep);

        /* A whole middle file removed. */
        _cleanup_free_ char *mid = read_rel(d->fd, "audit/audit-20261130.jsonl", &m);
        assert_int_equal(unlinkat(d->fd, "audit/audit-20261130.jsonl", 0), 0);
        expect_break(d->fd, "audit.jsonl", 1, "missing");
        tfw_write_file(d->fd, "audit/audit-20261130.jsonl", mid, m);

        /* Two generations kept: the oldest file goes, the chain starts at seq 4. */
        now += DAY;
        append_n(a, 10, 1);
        assert_false(file_exists(d->fd, "audit/audit-20261129.jsonl"));
        assert_true(file_exists(d->fd, "audit/audit-20261130.jsonl"));
        assert_true(file_exists(d->fd, "audit/audit-20261201.jsonl"));
        expect_intact(d->fd, &rep);
        assert_int_equal(rep.first_seq, 4);
        assert_int_equal(rep.last_seq, 10);
        assert_non_null(strstr(rep.message, "starts at seq 4"));

        /* Forced rotation (gc) twice the same day, then a clock that went back a day: names
         * stay in chain order, and pruning still keeps two. */
        assert_int_equal(audit_rotate(a, now, true, NULL, &e), 0);
        assert_false(file_exists(d->fd, "audit/audit.jsonl"));
        expect_intact(d->fd, &rep);
        append_n(a, 11, 1);
        AuditRotation rot;
        assert_int_equal(audit_rotate(a, now, true, &rot, &e), 0);
        assert_true(file_exists(d->fd, "audit/audit-20261202.jsonl"));
        assert_true(file_exists(d->fd, "audit/audit-20261202.1.jsonl"));
        /* what gc reports: the file made and the old ones pruned beyond two */
        assert_true(rot.rotated);
        assert_string_equal(rot.name, "audit-20261202.1.jsonl");
        assert_int_equal(rot.pruned, 1);
        assert_int_equal(audit_rotate(a, now, true, &rot, &e), 0);  /* nothing to rotate */
        assert_false(rot.rotated);
        assert_int_equal(rot.pruned, 0);
        assert_false(file_exists(d->fd, "audit/audit-20261202.2.jsonl"));
        append_n(a, 12, 1);
        now -= 2 * DAY;
        append_n(a, 13, 1);
        assert_true(file_exists(d->fd, "audit/audit-20261202.2.jsonl"));
        append_n(a, 14, 1);
        expect_intact(d->fd, &rep);
        assert_int_equal(rep.last_seq, 14);
        assert_int_equal(rep.first_seq, 11);
        assert_int_equal(rep.n_files, 3);
        /* Files not named like rotated ones are ignored. */
        tfw_write_file(d->fd, "audit/notes.txt", "hello\n", (size_t) -1);
        expect_intact(d->fd, &rep);
}

#define N_PROCS 4
#define N_LINES 200

static int child_append(Audit *inherited, int state_fd, unsigned k) {
        _cleanup_(audit_closep) Audit *own = NULL;
        TfwError e = {};
        Audit *a = inherited;

        /* Half the children share the parent's Audit (and its fds), half open their own. */
        if (k % 2 == 1) {
                if (audit_open(state_fd, 14, &own, &e) < 0)
                        return 1;
                a = own;
        }
        for (unsigned i = 0; i < N_LINES; i++) {
                _cleanup_json_ json_t *f = json_pack("{s:i, s:i}", "pid", (int) k, "count", (int) i);
                if (!f || audit_append(a, "started", f, &e) < 0) {
                        fprintf(stderr, "child %u: %s\n", k, e.message);
                        return 1;
                }
        }
        return 0;
}

static void test_concurrent(void **state) {
        TestDir *d = *state;
        AuditVerifyReport rep;
        pid_t pids[N_PROCS];
        char **lines;
        _cleanup_(audit_closep) Audit *a = open_audit(d->fd, 14, NULL);

        append_n(a, 1, 1);
        for (unsigned k = 0; k < N_PROCS; k++) {
                pids[k] = fork();
                assert_true(pids[k] >= 0);
                if (pids[k] == 0)
                        _exit(child_append(a, d->fd, k));
        }
        for (unsigned k = 0; k < N_PROCS; k++) {
                int status;
                assert_int_equal(waitpid(pids[k], &status, 0), pids[k]);
                assert_true(WIFEXITED(status));
                assert_int_equal(WEXITSTATUS(status), 0);
        }
        expect_intact(d->fd, &rep);
        assert_int_equal(rep.n_lines, 1 + N_PROCS * N_LINES);

        /* No line lost or duplicated: every (child, count) pair exactly once. */
        bool seen[N_PROCS][N_LINES] = {};
        size_t n = read_lines(d->fd, "audit/audit.jsonl", &lines);
        assert_int_equal(n, 1 + N_PROCS * N_LINES);
        for (size_t i = 1; i < n; i++) {
                _cleanup_json_ json_t *j = json_loads(lines[i], 0, NULL);
                assert_non_null(j);
                json_int_t k = json_integer_value(json_object_get(j, "pid"));
                json_int_t c = json_integer_value(json_object_get(j, "count"));
                assert_true(k >= 0 && k < N_PROCS && c >= 0 && c < N_LINES);
                assert_false(seen[k][c]);
                seen[k][c] = true;
        }
        free_lines(lines, n);
}

static void test_bounded_fields(void **state) {
        TestDir *d = *state;
        AuditVerifyReport rep;
        TfwError e = {};
        char **lines;
        _cleanup_(audit_closep) Audit *a = open_audit(d->fd, 14, NULL);

        /* A 1 MiB message is cut to its budget and the cut is said. */
        size_t big = 1 << 20;
        _cleanup_free_ char *s = malloc(big + 1);
        memset(s, 'A', big);
        s[big] = 0;
        _cleanup_json_ json_t *f1 = json_pack("{s:s, s:s}", "message", s, "id", "job_1");
        assert_int_equal(audit_append(a, "error", f1, &e), 0);

        /* 5000 argv elements of 100 bytes: a head is kept. */
        _cleanup_json_ json_t *argv = json_array();
        memset(s, 'x', 100);
        s[100] = 0;
        for (int i = 0; i < 5000; i++)
                json_array_append_new(argv, json_string(s));
        _cleanup_json_ json_t *f2 = json_pack("{s:O}", "argv", argv);
        assert_int_equal(audit_append(a, "captured", f2, &e), 0);

        /* The worst case: every string field full of bytes that escape to six. */
        memset(s, '\x01', big);
        s[big] = 0;
        _cleanup_json_ json_t *argv2 = json_array();
        for (int i = 0; i < 20000; i++)
                json_array_append_new(argv2, json_string(s + big - 50));
        _cleanup_json_ json_t *f3 = json_pack(
                "{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:O, s:I, s:I, s:I, s:I, s:I, s:s,"
                " s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:O}",
                "id", s, "name", s, "action_class", s, "outcome", s, "error", s, "approver", s,
                "reason", s, "message", s, "cwd", s, "argv", argv2, "exit_code", (json_int_t) INT64_MIN,
                "signal", (json_int_t) INT64_MIN, "duration_ms", (json_int_t) INT64_MIN,
                "count", (json_int_t) INT64_MIN, "pid", (json_int_t) INT64_MIN, "request_sha256",
                "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789",
                /* An egress line's (docs/egress.md) */
                "host", s, "address", s, "kind", s, "verdict", s, "port", (json_int_t) INT64_MIN,
                "bytes_up", (json_int_t) INT64_MIN, "bytes_down", (json_int_t) INT64_MIN,
                /* A finished job's walls (capsule/walls.h) */
                "walls", argv2);
        assert_non_null(f3);
        if (audit_append(a, "finished", f3, &e) < 0)
                fail_msg("worst case refused: %s", e.message);

        /* A newline in a value cannot start a line of its own; a NUL becomes U+FFFD. */
        _cleanup_json_ json_t *f4 = json_pack("{s:s, s:s%}", "message",
                                              "x\n{\"event\":\"approved\",\"seq\":99}\n", "reason",
                                              "a\0b", (size_t) 3);
        assert_int_equal(audit_append(a, "denied", f4, &e), 0);
        /* Invalid UTF-8 smuggled past jansson's checks is refused, not written. */
        _cleanup_json_ json_t *f5 = json_pack("{s:o}", "message", json_stringn_nocheck("\xff\xfe", 2));
        assert_int_equal(audit_append(a, "denied", f5, &e), -EINVAL);

        size_t n = read_lines(d->fd, "audit/audit.jsonl", &lines);
        assert_int_equal(n, 4);
        for (size_t i = 0; i < n; i++) {
                print_message("    line %zu: %zu bytes\n", i + 1, strlen(lines[i]));
                assert_true(strlen(lines[i]) <= AUDIT_LINE_MAX);
        }
        _cleanup_json_ json_t *j1 = json_loads(lines[0], 0, NULL);
        assert_int_equal(json_string_length(json_object_get(j1, "message")), 8192);
        assert_string_equal(json_string_value(json_array_get(json_object_get(j1, "truncated"), 0)),
                            "message");
        assert_int_equal(json_array_size(json_object_get(j1, "truncated")), 1);
        _cleanup_json_ json_t *j2 = json_loads(lines[1], 0, NULL);
        json_t *av = json_object_get(j2, "argv");
        assert_true(json_array_size(av) > 300 && json_array_size(av) < 400);
        char xs[101];
        memset(xs, 'x', 100);
        xs[100] = 0;
        assert_string_equal(json_string_value(json_array_get(av, 0)), xs);
        assert_string_equal(json_string_value(json_array_get(json_object_get(j2, "truncated"), 0)), "argv");
        _cleanup_json_ json_t *j3 = json_loads(lines[2], 0, NULL);
        assert_int_equal(json_array_size(json_object_get(j3, "truncated")), 15); /* every string field, argv, walls */
        _cleanup_json_ json_t *j4 = json_loads(lines[3], 0, NULL);
        assert_string_equal(json_string_value(json_object_get(j4, "reason")), "a\xef\xbf\xbd" "b");
        assert_null(json_object_get(j4, "truncated"));
        free_lines(lines, n);
        expect_intact(d->fd, &rep);
        assert_int_equal(rep.n_lines, 4);

        /* A line over the cap written by someone else is refused by verify. */
        _cleanup_free_ char *huge = malloc(AUDIT_LINE_MAX + 2);
        memset(huge, ' ', AUDIT_LINE_MAX + 1);
        huge[AUDIT_LINE_MAX + 1] = '\n';
        _cleanup_close_ int fd = openat(d->fd, "audit/audit.jsonl", O_WRONLY | O_APPEND | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(write_all(fd, huge, AUDIT_LINE_MAX + 2), 0);
        expect_break(d->fd, "audit.jsonl", 5, "longer than");
        assert_int_equal(audit_append(a, "denied", NULL, &e), -EBADMSG);
}

/* Nothing is written through a symlink, and the directory itself may not be one. */
static void test_no_symlinks(void **state) {
        TestDir *d = *state;
        TfwError e = {};
        Audit *a = NULL;
        struct stat st;

        assert_int_equal(mkdirat(d->fd, "s1", 0700), 0);
        assert_int_equal(mkdirat(d->fd, "s1/elsewhere", 0700), 0);
        assert_int_equal(symlinkat("elsewhere", d->fd, "s1/audit"), 0);
        _cleanup_close_ int s1 = open_dir_at(d->fd, "s1");
        assert_true(audit_open(s1, 14, &a, &e) < 0);
        assert_null(a);

        assert_int_equal(mkdirat(d->fd, "s2", 0700), 0);
        _cleanup_close_ int s2 = open_dir_at(d->fd, "s2");
        a = open_audit(s2, 14, NULL);
        tfw_write_file(d->fd, "victim", "precious\n", (size_t) -1);
        assert_int_equal(symlinkat("../../victim", d->fd, "s2/audit/audit.jsonl"), 0);
        assert_true(audit_append(a, "started", NULL, &e) < 0);
        assert_int_equal(fstatat(d->fd, "victim", &st, 0), 0);
        assert_int_equal(st.st_size, 9);
        AuditVerifyReport rep;
        assert_true(audit_verify(s2, &rep, &e) < 0);
        audit_close(a);

        /* A FIFO in place of the current file neither blocks nor is written. */
        assert_int_equal(unlinkat(s2, "audit/audit.jsonl", 0), 0);
        assert_int_equal(mkfifoat(s2, "audit/audit.jsonl", 0600), 0);
        a = open_audit(s2, 14, NULL);
        assert_int_equal(audit_append(a, "started", NULL, &e), -EBADMSG);
        assert_int_equal(audit_verify(s2, &rep, &e), -EBADMSG);
        assert_string_equal(rep.break_file, "audit.jsonl");
        audit_close(a);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_append_verify, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_empty, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_refused_fields, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_tamper_edit, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_tamper_delete_swap_insert, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_tamper_truncate, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_torn_tail_repair, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_torn_tail_rotation, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_rotation, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_concurrent, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_bounded_fields, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_no_symlinks, tfw_tmpdir_setup, tfw_tmpdir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
