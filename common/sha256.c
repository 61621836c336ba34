/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <openssl/evp.h>
#include <sodium.h>

#include "dlopen-util.h"
#include "macro.h"
#include "sha256.h"

static void *crypto_dl;
static DLSYM_PROTOTYPE(EVP_DigestFinal_ex);
static DLSYM_PROTOTYPE(EVP_DigestInit_ex);
static DLSYM_PROTOTYPE(EVP_DigestUpdate);
static DLSYM_PROTOTYPE(EVP_MD_CTX_free);
static DLSYM_PROTOTYPE(EVP_MD_CTX_new);
static DLSYM_PROTOTYPE(EVP_sha256);

static int dlopen_libcrypto(void) {
        return dlopen_many_sym(&crypto_dl, TFW_LIBCRYPTO, NULL,
                               DLSYM_ARG(EVP_DigestFinal_ex),
                               DLSYM_ARG(EVP_DigestInit_ex),
                               DLSYM_ARG(EVP_DigestUpdate),
                               DLSYM_ARG(EVP_MD_CTX_free),
                               DLSYM_ARG(EVP_MD_CTX_new),
                               DLSYM_ARG(EVP_sha256));
}

int sha256_preload(void) {
        return dlopen_libcrypto();
}

struct Sha256 {
        EVP_MD_CTX *ctx;
};

int sha256_new(Sha256 **ret) {
        int r = dlopen_libcrypto();
        if (r < 0)
                return r;
        Sha256 *h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->ctx = sym_EVP_MD_CTX_new();
        if (!h->ctx || sym_EVP_DigestInit_ex(h->ctx, sym_EVP_sha256(), NULL) != 1) {
                sha256_free(h);
                return -ENOMEM;
        }
        *ret = h;
        return 0;
}

int sha256_update(Sha256 *h, const void *data, size_t len) {
        return sym_EVP_DigestUpdate(h->ctx, data, len) == 1 ? 0 : -EIO;
}

int sha256_final(Sha256 *h, uint8_t out[static SHA256_DIGEST_SIZE]) {
        unsigned n = 0;
        if (sym_EVP_DigestFinal_ex(h->ctx, out, &n) != 1 || n != SHA256_DIGEST_SIZE)
                return -EIO;
        return sym_EVP_DigestInit_ex(h->ctx, sym_EVP_sha256(), NULL) == 1 ? 0 : -EIO;
}

void sha256_free(Sha256 *h) {
        if (!h)
                return;
        sym_EVP_MD_CTX_free(h->ctx);
        free(h);
}

/* One-shot digests are of small things (a request, an audit line, a key), and the daemon makes
 * them: libsodium's, so the daemon never maps libcrypto (common/dlopen-util.h). */
int sha256_buffer(const void *data, size_t len, uint8_t out[static SHA256_DIGEST_SIZE]) {
        if (sodium_init() < 0)
                return -EIO;
        return crypto_hash_sha256(out, data, len) == 0 ? 0 : -EIO;
}

void sha256_to_hex(const uint8_t d[static SHA256_DIGEST_SIZE], char hex[static SHA256_HEX_SIZE]) {
        /* Lowercase, NUL-terminated; constant time (libsodium). */
        (void) sodium_bin2hex(hex, SHA256_HEX_SIZE, d, SHA256_DIGEST_SIZE);
}

static int unhex(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        return -1;
}

int sha256_from_hex(const char *hex, uint8_t out[static SHA256_DIGEST_SIZE]) {
        for (size_t i = 0; i < SHA256_DIGEST_SIZE; i++) {
                int a = unhex(hex[2 * i]), b = a < 0 ? -1 : unhex(hex[2 * i + 1]);
                if (a < 0 || b < 0)
                        return -EINVAL;
                out[i] = (uint8_t) (a << 4 | b);
        }
        return hex[2 * SHA256_DIGEST_SIZE] == 0 ? 0 : -EINVAL;
}

int sha256_buffer_hex(const void *data, size_t len, char hex[static SHA256_HEX_SIZE]) {
        uint8_t d[SHA256_DIGEST_SIZE];
        int r = sha256_buffer(data, len, d);
        if (r < 0)
                return r;
        sha256_to_hex(d, hex);
        return 0;
}
