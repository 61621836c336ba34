/* SPDX-License-Identifier: MIT */
/* common/dlopen-util (issue 5: the daemon links neither libarchive, libcurl nor libcrypto and
 * loads them where they are used): only absolute paths, all symbols or none, loaded once; and
 * the two SHA-256 implementations that split brings (libsodium one-shot, OpenSSL streaming)
 * agree. */
#include <dlfcn.h>
#include <errno.h>
#include <openssl/evp.h>
#include <string.h>

#include "artifacts/archive-dl.h"
#include "common/dlopen-util.h"
#include "common/sha256.h"
#include "tests/unit/lib/tfw-test.h"
#include "validation/curl-dl.h"

static DLSYM_PROTOTYPE(EVP_MD_CTX_new);
static DLSYM_PROTOTYPE(EVP_MD_CTX_free);

static void test_refuses_relative(void **state) {
        (void) state;
        void *dl = NULL;
        TfwError e = {0};

        /* A bare soname would be searched for (LD_LIBRARY_PATH, the working directory's
         * relative entries): the build fixes the file instead. */
        assert_int_equal(dlopen_many_sym(&dl, "libcrypto.so.3", &e, DLSYM_ARG(EVP_MD_CTX_new)), -EINVAL);
        assert_null(dl);
        assert_null(sym_EVP_MD_CTX_new);
        assert_non_null(strstr(e.message, "libcrypto.so.3"));
        assert_int_equal(dlopen_many_sym(&dl, "./libcrypto.so.3", &e, DLSYM_ARG(EVP_MD_CTX_new)), -EINVAL);
        assert_int_equal(dlopen_many_sym(&dl, "", &e, DLSYM_ARG(EVP_MD_CTX_new)), -EINVAL);
        assert_null(dl);
}

static void test_missing_library(void **state) {
        (void) state;
        void *dl = NULL;
        TfwError e = {0};

        assert_int_equal(dlopen_many_sym(&dl, "/nonexistent/libnothing.so.1", &e, DLSYM_ARG(EVP_MD_CTX_new)),
                         -EOPNOTSUPP);
        assert_null(dl);
        assert_null(sym_EVP_MD_CTX_new);
        assert_non_null(strstr(e.message, "/nonexistent/libnothing.so.1"));
}

static void test_all_or_nothing(void **state) {
        (void) state;
        void *dl = NULL, *bogus = NULL;
        TfwError e = {0};

        /* The first symbol exists, the second does not: neither slot is written. */
        assert_int_equal(dlopen_many_sym(&dl, TFW_LIBCRYPTO, &e, DLSYM_ARG(EVP_MD_CTX_new),
                                         (void **) &bogus, "tfw_no_such_symbol"),
                         -EOPNOTSUPP);
        assert_null(dl);
        assert_null(sym_EVP_MD_CTX_new);
        assert_null(bogus);
        assert_non_null(strstr(e.message, "tfw_no_such_symbol"));
}

static void test_loads_once(void **state) {
        (void) state;
        void *dl = NULL;
        TfwError e = {0};

        assert_int_equal(dlopen_many_sym(&dl, TFW_LIBCRYPTO, &e, DLSYM_ARG(EVP_MD_CTX_new), DLSYM_ARG(EVP_MD_CTX_free)), 0);
        assert_non_null(dl);
        assert_non_null(sym_EVP_MD_CTX_new);
        EVP_MD_CTX *c = sym_EVP_MD_CTX_new();
        assert_non_null(c);
        sym_EVP_MD_CTX_free(c);

        /* Loaded: a second call changes nothing and does not look at its symbols. */
        void *first = dl;
        sym_EVP_MD_CTX_free = NULL;
        assert_int_equal(dlopen_many_sym(&dl, TFW_LIBCRYPTO, &e, DLSYM_ARG(EVP_MD_CTX_free)), 0);
        assert_ptr_equal(dl, first);
        assert_null(sym_EVP_MD_CTX_free);
}

/* The libraries the build names exist and have every symbol the code calls. */
static void test_project_libraries(void **state) {
        (void) state;
        TfwError e = {0};

        assert_int_equal(dlopen_libarchive(&e), 0);
        assert_non_null(sym_archive_read_new);
        assert_int_equal(dlopen_libcurl(&e), 0);
        assert_non_null(sym_curl_easy_init);
}

/* sha256_buffer (libsodium) and Sha256 (OpenSSL) on every length around the block sizes and on
 * a large buffer. */
static void test_sha256_implementations_agree(void **state) {
        (void) state;
        static uint8_t buf[1 << 20];
        uint8_t a[SHA256_DIGEST_SIZE], b[SHA256_DIGEST_SIZE];
        _cleanup_(sha256_freep) Sha256 *h = NULL;

        for (size_t i = 0; i < sizeof(buf); i++)
                buf[i] = (uint8_t) (i * 131 + (i >> 8));
        assert_int_equal(sha256_new(&h), 0);
        for (size_t len = 0; len <= 300; len++) {
                assert_int_equal(sha256_buffer(buf, len, a), 0);
                assert_int_equal(sha256_update(h, buf, len / 3), 0);
                assert_int_equal(sha256_update(h, buf + len / 3, len - len / 3), 0);
                assert_int_equal(sha256_final(h, b), 0);
                assert_memory_equal(a, b, sizeof(a));
        }
        assert_int_equal(sha256_buffer(buf, sizeof(buf), a), 0);
        assert_int_equal(sha256_update(h, buf, sizeof(buf)), 0);
        assert_int_equal(sha256_final(h, b), 0);
        assert_memory_equal(a, b, sizeof(a));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_refuses_relative),
                cmocka_unit_test(test_missing_library),
                cmocka_unit_test(test_all_or_nothing),
                cmocka_unit_test(test_loads_once),
                cmocka_unit_test(test_project_libraries),
                cmocka_unit_test(test_sha256_implementations_agree),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
