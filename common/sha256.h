/* SPDX-License-Identifier: MIT */
/* Streaming SHA-256 (Sha256) through OpenSSL's EVP interface: it uses the CPU's SHA extensions,
 * measured here at about four times libsodium's portable code, which matters for snapshots and
 * tree checks. libcrypto is loaded by the first sha256_new() (common/dlopen-util.h), so the idle
 * daemon does not map it. One-shot sha256_buffer() digests small inputs with libsodium. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_SIZE 32
#define SHA256_HEX_SIZE (SHA256_DIGEST_SIZE * 2 + 1)

typedef struct Sha256 Sha256;  /* opaque EVP_MD_CTX */

int sha256_new(Sha256 **ret);
/* libcrypto loaded now, not by the first sha256_new(): a process that will hash later loads it
 * while it waits (a capsule started ahead, for its request's walk). */
int sha256_preload(void);
int sha256_update(Sha256 *h, const void *data, size_t len);
/* Finish into out and reset the context so it can be reused. */
int sha256_final(Sha256 *h, uint8_t out[static SHA256_DIGEST_SIZE]);
void sha256_free(Sha256 *h);
static inline void sha256_freep(Sha256 **h) {
        sha256_free(*h);
}

int sha256_buffer(const void *data, size_t len, uint8_t out[static SHA256_DIGEST_SIZE]);
/* Lowercase hex of a digest into hex (SHA256_HEX_SIZE bytes, NUL-terminated). */
void sha256_to_hex(const uint8_t d[static SHA256_DIGEST_SIZE], char hex[static SHA256_HEX_SIZE]);
/* Parse exactly 64 lowercase hex digits. */
int sha256_from_hex(const char *hex, uint8_t out[static SHA256_DIGEST_SIZE]);
int sha256_buffer_hex(const void *data, size_t len, char hex[static SHA256_HEX_SIZE]);
