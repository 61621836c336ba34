/* SPDX-License-Identifier: MIT */
/* validation/manifest-reader.c, the manifest read as it arrives (issue 33 finding 7): it
 * accepts and refuses exactly what the whole-document parser it replaced did (kept below as
 * the reference) on the fuzzing corpus and on 20,000 mutations of good manifests; its verdict
 * does not depend on how the body is cut into chunks; and the ceilings stop the body while it
 * arrives: the entries, the bytes, one entry's text (also when given whole), a tree other
 * than the job's. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/macro.h"
#include "common/sha256.h"
#include "tests/unit/lib/tfw-test.h"
#include "validation/job.h"
#include "validation/text.h"

#define TREE "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321"
#define BLOB "473a0f4c3be8a93681a267e3b1e9a7dcda1185436fe141f7749120a303721813"
#define ENTRY(path, mode) "{\"path\":\"" path "\",\"mode\":\"" mode "\",\"blob\":\"" BLOB "\"}"

/* The whole-document parser before issue 33 (validation/job.c at 543cb1e), the reference. */
static int ref_parse(const char *buf, size_t len, VManifest **ret, TfwError *e) {
        static const char *const top_keys[] = {"tree", "entries", NULL};
        static const char *const entry_keys[] = {"path", "mode", "blob", NULL};
        _cleanup_json_ json_t *root = NULL;
        _cleanup_vmanifest_ VManifest *m = NULL;
        char shown[SHOW_MAX], field[64];
        json_t *entries, *it;
        const char *s;
        size_t i;
        int r;

        if (len > VMANIFEST_MAX_BYTES)
                return tfw_error(e, E2BIG, "too_large", "too large");
        r = json_load_object_strict(buf, len, "manifest", &root, e);
        if (r < 0)
                return r;
        r = json_check_keys(root, top_keys, "", e);
        if (r < 0)
                return r;
        m = calloc(1, sizeof(*m));
        assert_non_null(m);
        r = json_get_string(root, "tree", "tree", true, false, &s, e);
        if (r < 0)
                return r;
        if (!is_lower_hex64(s))
                return tfw_error(e, EBADMSG, "bad_value", "tree '%s'", text_show(s, shown));
        memcpy(m->tree, s, GIT_OID_HEX_SIZE);
        entries = json_object_get(root, "entries");
        if (!json_is_array(entries))
                return tfw_error(e, EBADMSG, "bad_type", "entries must be a list");
        if (json_array_size(entries) > VMANIFEST_ENTRIES_MAX)
                return tfw_error(e, E2BIG, "out_of_range", "too many");
        m->entries = calloc(json_array_size(entries) + 1, sizeof(VManifestEntry));
        assert_non_null(m->entries);
        json_array_foreach(entries, i, it) {
                VManifestEntry *en = &m->entries[i];
                snprintf(field, sizeof(field), "entries[%zu]", i);
                if (!json_is_object(it))
                        return tfw_error(e, EBADMSG, "bad_type", "%s must be an object", field);
                r = json_check_keys(it, entry_keys, "entries[].", e);
                if (r < 0)
                        return r;
                r = json_get_string(it, "path", "entries[].path", true, false, &s, e);
                if (r < 0)
                        return r;
                if (json_string_length(json_object_get(it, "path")) == 0 ||
                    json_string_length(json_object_get(it, "path")) > GIT_PATH_MAX || has_control(s))
                        return tfw_error(e, EBADMSG, "invalid_path", "%s", field);
                en->path = strdup(s);
                assert_non_null(en->path);
                m->n_entries++;
                r = json_get_string(it, "mode", "entries[].mode", true, false, &s, e);
                if (r < 0)
                        return r;
                if (streq(s, "100644"))
                        en->mode = GIT_MODE_FILE;
                else if (streq(s, "100755"))
                        en->mode = GIT_MODE_EXECUTABLE;
                else if (streq(s, "120000"))
                        en->mode = GIT_MODE_SYMLINK;
                else
                        return tfw_error(e, EBADMSG, "bad_mode", "%s", field);
                r = json_get_string(it, "blob", "entries[].blob", true, false, &s, e);
                if (r < 0)
                        return r;
                if (!is_lower_hex64(s) || sha256_from_hex(s, en->blob) < 0)
                        return tfw_error(e, EBADMSG, "bad_value", "%s", field);
        }
        *ret = TAKE_PTR(m);
        return 0;
}

/* The reader fed buf in chunks of `chunk` bytes (0: whole), then finished. */
static int read_chunked(const char *buf, size_t len, size_t chunk, const char *want, VManifest **ret, TfwError *e) {
        _cleanup_(vmanifest_reader_freep) VManifestReader *rd = NULL;
        assert_int_equal(vmanifest_reader_new(want, &rd), 0);
        for (size_t off = 0; off < len;) {
                size_t n = chunk ? MIN(chunk, len - off) : len;
                int r = vmanifest_reader_feed(rd, buf + off, n, e);
                if (r < 0)
                        return r;
                off += n;
        }
        return vmanifest_reader_finish(rd, ret, e);
}

static bool same_manifest(const VManifest *a, const VManifest *b) {
        if (memcmp(a->tree, b->tree, GIT_OID_HEX_SIZE) != 0 || a->n_entries != b->n_entries)
                return false;
        for (size_t i = 0; i < a->n_entries; i++)
                if (!streq(a->entries[i].path, b->entries[i].path) || a->entries[i].mode != b->entries[i].mode ||
                    memcmp(a->entries[i].blob, b->entries[i].blob, GIT_OID_SIZE) != 0)
                        return false;
        return true;
}

/* Reference, whole and chunked (1, 2, 3, 7, 64 and 4096 bytes) agree on buf. Returns whether
 * it was accepted. */
static bool agree(const char *buf, size_t len, const char *what) {
        static const size_t chunks[] = {1, 2, 3, 7, 64, 4096};
        _cleanup_vmanifest_ VManifest *ref = NULL, *whole = NULL;
        TfwError e1 = {0}, e2 = {0};
        int r1 = ref_parse(buf, len, &ref, &e1), r2 = read_chunked(buf, len, 0, NULL, &whole, &e2);

        if ((r1 < 0) != (r2 < 0))
                fail_msg("%s: the reference %s (%s), the reader %s (%s): %.*s", what, r1 < 0 ? "refuses" : "accepts",
                         e1.message, r2 < 0 ? "refuses" : "accepts", e2.message, (int) MIN(len, (size_t) 300), buf);
        if (r2 < 0 && (!e2.code || whole))
                fail_msg("%s: a refusal without a code", what);
        if (r1 >= 0 && !same_manifest(ref, whole))
                fail_msg("%s: the reader's manifest differs from the reference's", what);
        for (size_t c = 0; c < ELEMENTSOF(chunks); c++) {
                _cleanup_vmanifest_ VManifest *m = NULL;
                TfwError e3 = {0};
                int r3 = read_chunked(buf, len, chunks[c], NULL, &m, &e3);
                if ((r3 < 0) != (r2 < 0) || (r3 >= 0 && !same_manifest(m, whole)))
                        fail_msg("%s: in chunks of %zu the reader %s (%s), whole it %s", what, chunks[c],
                                 r3 < 0 ? "refuses" : "accepts", e3.message, r2 < 0 ? "refuses" : "accepts");
        }
        return r2 >= 0;
}

static const char *const seeds[] = {
        "{\"tree\":\"" TREE "\",\"entries\":[" ENTRY("a", "100644") "," ENTRY("b/x", "100755") "," ENTRY("l", "120000") "]}",
        " {\n  \"entries\" : [\n    " ENTRY("d\\u00e9j\\u00e0/\\ud83d\\ude00", "100644") " ,\n\t" ENTRY("caf\xc3\xa9", "100644")
        "\r\n  ] ,\n  \"tree\" : \"" TREE "\"\n}\n",
        "{\"tree\":\"" TREE "\",\"entries\":[]}",
        "{\"entries\":[{\"blob\":\"" BLOB "\",\"mode\":\"100644\",\"path\":\"z\\\"q\\\\\\/\"}],\"tr\\u0065e\":\"" TREE "\"}",
};

static void test_agrees_with_reference_on_seeds_and_corpus(void **state) {
        (void) state;
        for (size_t i = 0; i < ELEMENTSOF(seeds); i++)
                assert_true(agree(seeds[i], strlen(seeds[i]), "seed"));

        /* The fuzzer's corpus: a first byte with bit 0 clear selects the manifest parser. */
        DIR *d = opendir("tests/fuzz/corpus/manifest");
        if (!d)
                fail_msg("tests/fuzz/corpus/manifest: %m (run from the source tree's root)");
        size_t n = 0, accepted = 0;
        for (struct dirent *de; (de = readdir(d));) {
                if (de->d_name[0] == '.')
                        continue;
                _cleanup_close_ int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_CLOEXEC);
                _cleanup_free_ char *buf = NULL;
                size_t len = 0;
                assert_true(fd >= 0);
                assert_int_equal(read_full_fd_bounded(fd, 1 << 20, &buf, &len), 0);
                if (len == 0 || (buf[0] & 1))
                        continue;
                n++;
                accepted += agree(buf + 1, len - 1, de->d_name);
        }
        closedir(d);
        print_message("corpus: %zu manifests, %zu accepted by both\n", n, accepted);
        assert_true(n > 50);
        assert_true(accepted > 0);
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next_rand(void) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return rng;
}

/* buf with one random change: a byte replaced, removed or inserted (often a character that
 * means something to JSON), a range deleted or repeated. */
static size_t mutate_once(char *buf, size_t len, size_t cap) {
        static const char interesting[] = "{}[],:\" \\\n\tu0e9\xc3\xa9\xff\x80";
        size_t at = len ? next_rand() % len : 0, span = next_rand() % 80; /* MIN evaluates twice */
        char c = next_rand() % 2 ? interesting[next_rand() % (sizeof(interesting) - 1)] : (char) (next_rand() % 256);
        if (c == 0)
                c = ' ';
        switch (next_rand() % 5) {
        case 0:
                if (len)
                        buf[at] = c;
                return len;
        case 1:
                if (len)
                        memmove(buf + at, buf + at + 1, len - at - 1);
                return len ? len - 1 : 0;
        case 2:
                if (len + 1 > cap)
                        return len;
                memmove(buf + at + 1, buf + at, len - at);
                buf[at] = c;
                return len + 1;
        case 3: {
                size_t n = MIN(len - at, span);
                memmove(buf + at, buf + at + n, len - at - n);
                return len - n;
        }
        default: {
                size_t n = MIN(len - at, span);
                if (len + n > cap)
                        return len;
                memmove(buf + at + n, buf + at, len - at);
                return len + n;
        }
        }
}

static void test_agrees_with_reference_on_mutations(void **state) {
        (void) state;
        size_t accepted = 0, total = 20000;
        for (size_t i = 0; i < total; i++) {
                const char *seed = seeds[i % ELEMENTSOF(seeds)];
                char buf[4096];
                size_t len = strlen(seed);
                memcpy(buf, seed, len);
                for (unsigned k = 1 + next_rand() % 3; k > 0; k--)
                        len = mutate_once(buf, len, sizeof(buf));
                char what[32];
                snprintf(what, sizeof(what), "mutation %zu", i);
                accepted += agree(buf, len, what);
        }
        print_message("mutations: %zu, %zu accepted by both\n", total, accepted);
        assert_true(accepted > 100);
}

/* Bytes of a manifest of n distinct entries, made as needed (entry i is "p/<i, 8 digits>"). */
typedef struct Gen {
        size_t n, next;
        bool opened, closed;
} Gen;

static size_t gen_chunk(Gen *g, char *buf, size_t cap) {
        size_t len = 0;
        if (!g->opened) {
                len += (size_t) snprintf(buf, cap, "{\"tree\":\"%s\",\"entries\":[", TREE);
                g->opened = true;
        }
        while (g->next < g->n && len + 200 < cap) {
                len += (size_t) snprintf(buf + len, cap - len, "%s{\"path\":\"p/%08zu\",\"mode\":\"100644\",\"blob\":\"%s\"}",
                                         g->next ? "," : "", g->next, BLOB);
                g->next++;
        }
        if (g->next == g->n && !g->closed && len + 3 < cap) {
                len += (size_t) snprintf(buf + len, cap - len, "]}");
                g->closed = true;
        }
        return len;
}

static void test_entries_ceiling_stops_the_stream(void **state) {
        (void) state;
        _cleanup_(vmanifest_reader_freep) VManifestReader *rd = NULL;
        Gen g = {.n = VMANIFEST_ENTRIES_MAX + 100};
        TfwError e = {0};
        char buf[16384];
        int r = 0;

        assert_int_equal(vmanifest_reader_new(TREE, &rd), 0);
        while (r >= 0 && !g.closed)
                r = vmanifest_reader_feed(rd, buf, gen_chunk(&g, buf, sizeof(buf)), &e);
        /* Refused while the body arrived, at the entry past the ceiling, not at its end. */
        assert_int_equal(r, -E2BIG);
        assert_string_equal(e.code, "out_of_range");
        assert_non_null(strstr(e.message, "more than 1000000 entries"));
        assert_false(g.closed);
        assert_true(g.next <= VMANIFEST_ENTRIES_MAX + 100);

        /* At the ceiling exactly: accepted. */
        _cleanup_vmanifest_ VManifest *m = NULL;
        vmanifest_reader_free(TAKE_PTR(rd));
        assert_int_equal(vmanifest_reader_new(TREE, &rd), 0);
        g = (Gen) {.n = VMANIFEST_ENTRIES_MAX};
        while (!g.closed)
                assert_int_equal(vmanifest_reader_feed(rd, buf, gen_chunk(&g, buf, sizeof(buf)), &e), 0);
        assert_int_equal(vmanifest_reader_finish(rd, &m, &e), 0);
        assert_int_equal(m->n_entries, VMANIFEST_ENTRIES_MAX);
}

static void test_bytes_ceiling_stops_the_stream(void **state) {
        (void) state;
        _cleanup_(vmanifest_reader_freep) VManifestReader *rd = NULL;
        _cleanup_free_ char *blanks = malloc(1 << 20);
        TfwError e = {0};
        size_t fed = 0;
        int r;

        assert_non_null(blanks);
        memset(blanks, ' ', 1 << 20);
        assert_int_equal(vmanifest_reader_new(NULL, &rd), 0);
        const char *head = "{\"entries\":[";
        assert_int_equal(vmanifest_reader_feed(rd, head, strlen(head), &e), 0);
        fed = strlen(head);
        /* Blanks between entries are consumed as they come: only the count grows. */
        while ((r = vmanifest_reader_feed(rd, blanks, 1 << 20, &e)) == 0 && fed <= VMANIFEST_MAX_BYTES + (2U << 20))
                fed += 1 << 20;
        assert_int_equal(r, -E2BIG);
        assert_string_equal(e.code, "too_large");
        assert_true(fed <= VMANIFEST_MAX_BYTES);
        assert_true(fed + (1 << 20) > VMANIFEST_MAX_BYTES);
}

static void test_long_entry_stops_the_stream(void **state) {
        (void) state;
        _cleanup_(vmanifest_reader_freep) VManifestReader *rd = NULL;
        TfwError e = {0};
        char blanks[1024];
        size_t fed = 0;
        int r;

        memset(blanks, ' ', sizeof(blanks));
        assert_int_equal(vmanifest_reader_new(NULL, &rd), 0);
        const char *head = "{\"entries\":[{\"path\":";
        assert_int_equal(vmanifest_reader_feed(rd, head, strlen(head), &e), 0);
        /* Blanks inside an entry are its text: kept until it ends, and refused past the ceiling. */
        while ((r = vmanifest_reader_feed(rd, blanks, sizeof(blanks), &e)) == 0 && fed <= 2 * VMANIFEST_TOKEN_MAX)
                fed += sizeof(blanks);
        assert_int_equal(r, -E2BIG);
        assert_string_equal(e.code, "too_large");
        assert_true(fed < VMANIFEST_TOKEN_MAX + sizeof(blanks));

        /* The same refusal when the long entry comes whole. */
        _cleanup_free_ char *big = NULL;
        _cleanup_vmanifest_ VManifest *m = NULL;
        assert_true(asprintf(&big, "{\"tree\":\"%s\",\"entries\":[{\"path\":%*s\"a\",\"mode\":\"100644\",\"blob\":\"%s\"}]}",
                             TREE, (int) VMANIFEST_TOKEN_MAX, "", BLOB) > 0);
        assert_int_equal(vmanifest_parse(big, strlen(big), &m, &e), -E2BIG);
        assert_string_equal(e.code, "too_large");

        /* A body given whole whose key never ends: jansson is shown 64 KiB of it, not 8 MiB
         * (it would keep a copy of all of it to say "premature end"). */
        _cleanup_free_ char *open_key = malloc(8 << 20);
        assert_non_null(open_key);
        memset(open_key, 'k', 8 << 20);
        memcpy(open_key, "{\"", 2);
        assert_int_equal(vmanifest_parse(open_key, 8 << 20, &m, &e), -E2BIG);
        assert_string_equal(e.code, "too_large");
}

static void test_longest_legal_entry_trickled(void **state) {
        (void) state;
        /* A GIT_PATH_MAX path written as \u escapes, fed a byte at a time. */
        _cleanup_free_ char *path = malloc(GIT_PATH_MAX * 6 + 1), *json = NULL;
        assert_non_null(path);
        for (size_t i = 0; i < GIT_PATH_MAX; i++)
                memcpy(path + 6 * i, "\\u0061", 6);
        path[GIT_PATH_MAX * 6] = 0;
        assert_true(asprintf(&json, "{\"tree\":\"%s\",\"entries\":[{\"path\":\"%s\",\"mode\":\"100644\",\"blob\":\"%s\"}]}",
                             TREE, path, BLOB) > 0);
        _cleanup_vmanifest_ VManifest *m = NULL;
        TfwError e = {0};
        assert_int_equal(read_chunked(json, strlen(json), 1, TREE, &m, &e), 0);
        assert_int_equal(m->n_entries, 1);
        assert_int_equal(strlen(m->entries[0].path), GIT_PATH_MAX);
}

static void test_other_tree_stops_the_stream(void **state) {
        (void) state;
        _cleanup_(vmanifest_reader_freep) VManifestReader *rd = NULL;
        const char *head = "{\"tree\":\"" BLOB "\",";
        TfwError e = {0};

        assert_int_equal(vmanifest_reader_new(TREE, &rd), 0);
        assert_int_equal(vmanifest_reader_feed(rd, head, strlen(head), &e), -EBADMSG);
        assert_string_equal(e.code, "tree_mismatch");
        assert_non_null(strstr(e.message, BLOB));
        /* Nothing more is taken after a refusal. */
        assert_int_equal(vmanifest_reader_feed(rd, "]}", 2, &e), -EINVAL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_agrees_with_reference_on_seeds_and_corpus),
                cmocka_unit_test(test_agrees_with_reference_on_mutations),
                cmocka_unit_test(test_entries_ceiling_stops_the_stream),
                cmocka_unit_test(test_bytes_ceiling_stops_the_stream),
                cmocka_unit_test(test_long_entry_stops_the_stream),
                cmocka_unit_test(test_longest_legal_entry_trickled),
                cmocka_unit_test(test_other_tree_stops_the_stream),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
