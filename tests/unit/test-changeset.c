/* SPDX-License-Identifier: MIT */
/* exec/changeset.c: the capsule's list of changes read as untrusted input against the files
 * the importer staged and the generation the job was given: a good list becomes the manifest
 * (kinds, git blob ids of the new content and of the base), and each way a list can lie is
 * refused (changes_rejected), the staged tree then not to be trusted. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/sha256.h"
#include "exec/changeset.h"
#include "tests/unit/lib/tfw-test.h"

typedef struct Dirs {
        TestDir *t;
        int staging, gen;
} Dirs;

static void dirs_make(TestDir *t, Dirs *d) {
        assert_int_equal(mkdirat(t->fd, "staging", 0755), 0);
        assert_int_equal(mkdirat(t->fd, "gen", 0755), 0);
        d->t = t;
        d->staging = openat(t->fd, "staging", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        d->gen = openat(t->fd, "gen", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(d->staging >= 0 && d->gen >= 0);
        assert_int_equal(mkdirat(d->staging, ".tentaflake-worker", 0755), 0);
}

static void list(Dirs *d, const char *text) {
        int ctl = openat(d->staging, ".tentaflake-worker", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(ctl >= 0);
        tfw_write_file(ctl, "changes", text, (size_t) -1);
        close(ctl);
}

static void blob_hex(const char *data, char hex[static SHA256_HEX_SIZE]) {
        char buf[256];
        int n = snprintf(buf, sizeof(buf), "blob %zu", strlen(data));
        memcpy(buf + n + 1, data, strlen(data));
        assert_int_equal(sha256_buffer_hex(buf, (size_t) n + 1 + strlen(data), hex), 0);
}

static void test_good_list(void **state) {
        Dirs d;
        dirs_make(*state, &d);
        tfw_write_file(d.gen, "a.c", "old\n", (size_t) -1);
        tfw_write_file(d.gen, "gone", "g\n", (size_t) -1);
        tfw_write_file(d.staging, "a.c", "new\n", (size_t) -1);
        tfw_write_file(d.staging, "n.txt", "n\n", (size_t) -1);
        list(&d, "file\t644\t4\ta.c\nfile\t755\t2\tn.txt\ndeleted\tgone\ndir\tmade\nrefused\tl\ta symbolic link\nend\tcomplete\n");
        json_t *m = NULL;
        ChangesetSummary s;
        TfwError e = {0};
        const char *const skip[] = { "artifacts", "build", NULL };
        assert_int_equal(changeset_build(d.staging, d.gen, skip, 100, &m, &s, &e), 0);
        assert_true(s.complete);
        assert_int_equal(s.added, 1);
        assert_int_equal(s.modified, 1);
        assert_int_equal(s.deleted, 1);
        assert_int_equal(s.directories, 1);
        assert_int_equal(s.refused, 1);
        char newid[SHA256_HEX_SIZE], oldid[SHA256_HEX_SIZE];
        blob_hex("new\n", newid);
        blob_hex("old\n", oldid);
        json_t *c0 = json_array_get(json_object_get(m, "changes"), 0);
        assert_string_equal(json_string_value(json_object_get(c0, "kind")), "modified");
        assert_string_equal(json_string_value(json_object_get(c0, "id")), newid);
        assert_string_equal(json_string_value(json_object_get(c0, "base")), oldid);
        /* The list and its directory are gone; the new content stays at its path. */
        assert_int_equal(faccessat(d.staging, ".tentaflake-worker", F_OK, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(faccessat(d.staging, "a.c", F_OK, AT_SYMLINK_NOFOLLOW), 0);
        json_decref(m);
        close(d.staging);
        close(d.gen);
}

/* Each list that lies, on a fresh tree each time. */
static void test_lies(void **state) {
        static const char *const lies[] = {
                "file\t644\t4\ta.c\nend\tcomplete\n",                      /* a file it did not send */
                "file\t644\t9\tstaged.txt\nend\tcomplete\n",               /* the wrong size */
                "end\tcomplete\n",                                          /* a staged file not named */
                "file\t644\t2\tstaged.txt\nfile\t644\t2\tstaged.txt\nend\tcomplete\n", /* named twice */
                "file\t644\t2\tstaged.txt\ndeleted\tnot-given\nend\tcomplete\n",      /* deletes what was not given */
                "file\t644\t2\tstaged.txt\ndir\t../up\nend\tcomplete\n",
                "file\t644\t2\tstaged.txt\ndir\t.tentaflake-worker/inbox\nend\tcomplete\n",
                "file\t644\t2\tstaged.txt\ndir\tartifacts/x\nend\tcomplete\n",  /* init leaves these out */
                "file\t644\t2\tstaged.txt\ndir\tbuild\nend\tcomplete\n",
                "file\t644\t2\tstaged.txt\ndir\ta\\x00b\nend\tcomplete\n",
                "file\t644\t2\tstaged.txt\ndir\ta\\xZZ\nend\tcomplete\n",
                "file\t600\t2\tstaged.txt\nend\tcomplete\n",
                "file\t644\t2\tstaged.txt\nend\tcomplete\ndir\tlate\n",       /* after the end */
                "file\t644\t2\tstaged.txt\n",                                 /* no end */
                "file\t644\t2\tstaged.txt\nend\tcomplete",                   /* no last newline */
                "file\t644\t2\tstaged.txt\nmoved\tx\nend\tcomplete\n",
                "file\t644\t2\tstaged.txt\ndir\td1\ndir\td2\ndir\td3\nend\tcomplete\n", /* over max_entries (3) */
        };
        TestDir *t = *state;
        for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
                char name[32];
                snprintf(name, sizeof(name), "case%zu", i);
                assert_int_equal(mkdirat(t->fd, name, 0755), 0);
                TestDir sub = { .fd = openat(t->fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC) };
                Dirs d;
                dirs_make(&sub, &d);
                tfw_write_file(d.staging, "staged.txt", "s\n", (size_t) -1);
                list(&d, lies[i]);
                json_t *m = NULL;
                ChangesetSummary s;
                TfwError e = {0};
                const char *const skip[] = { "artifacts", "build", NULL };
                int r = changeset_build(d.staging, d.gen, skip, 3, &m, &s, &e);
                if (r >= 0)
                        fail_msg("list %zu accepted", i);
                assert_null(m);
                assert_string_equal(e.code, "changes_rejected");
                close(d.staging);
                close(d.gen);
                close(sub.fd);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_good_list, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_lies, tfw_tmpdir_setup, tfw_tmpdir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
