/* SPDX-License-Identifier: MIT */
/* ed25519 signing keys and DSSE envelopes (contract sections 7 and 8).
 *
 * A key file, written by `keygen`, is five text lines:
 *
 *     tentaflake-worker ed25519 key v1
 *     identity <identity>
 *     public <base64 of the 32-byte public key>
 *     seed <base64 of the 32-byte secret seed>
 *
 * (plus an optional trailing newline). It is created 0600 and never overwritten. The secret
 * half only ever lives in sodium_malloc'd memory, which is locked, guarded and wiped when
 * freed; the file is read into such memory too.
 *
 * DSSE (github.com/secure-systems-lab/dsse): the signature is ed25519 over the
 * pre-authentication encoding
 *     "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body
 * with LEN the ASCII decimal byte length. The envelope is
 *     {"payloadType":T,"payload":base64(body),"signatures":[{"keyid":K,"sig":base64(sig)}]}
 * with standard base64 (with padding). keyid is the lowercase hex sha256 of the raw public
 * key. The signature verifies with any ed25519 implementation given the public key. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/macro.h"

#define SIGNING_PUBLIC_KEY_SIZE 32
#define SIGNING_SIGNATURE_SIZE 64
#define SIGNING_IDENTITY_MAX 256
#define SIGNING_KEY_FILE_MAX 4096
#define SIGNING_KEY_HEADER "tentaflake-worker ed25519 key v1"
#define DSSE_PAYLOAD_TYPE_INTOTO "application/vnd.in-toto+json"
/* Bound on an envelope payload we will decode (verification of our own or a test's). */
#define DSSE_PAYLOAD_MAX (1U << 20)

typedef struct SigningKey {
        char identity[SIGNING_IDENTITY_MAX + 1];
        uint8_t public_key[SIGNING_PUBLIC_KEY_SIZE];
        char keyid[65];       /* hex sha256 of public_key */
        uint8_t *secret_key;  /* sodium_malloc'd, crypto_sign_SECRETKEYBYTES */
} SigningKey;

/* 1..SIGNING_IDENTITY_MAX printable ASCII characters, no space (as signing_identity). */
bool signing_identity_is_valid(const char *s);

/* Create a new key at path. Refuses an existing path (EEXIST: never overwritten; the file
 * appears complete or not at all), an invalid identity (EINVAL). The file is 0600 whatever
 * the umask. On success *ret_public_b64 (caller frees) is the base64 public key. */
int signing_key_generate(const char *path, const char *identity, char **ret_public_b64,
                         TfwError *e);

/* Load a key file. Security contract: accepts a regular file of at most
 * SIGNING_KEY_FILE_MAX bytes that is not readable or writable by group or others (refused
 * with EPERM otherwise), in exactly the format above; refuses a seed whose derived public
 * key differs from the "public" line (EBADMSG). Every copy of the secret is in sodium memory
 * and wiped. */
int signing_key_load(const char *path, SigningKey **ret, TfwError *e);
SigningKey *signing_key_free(SigningKey *k);
static inline void signing_key_freep(SigningKey **k) {
        signing_key_free(*k);
}
#define _cleanup_signing_key_ _cleanup_(signing_key_freep)

/* The base64 of the public key (caller frees). */
char *signing_key_public_b64(const SigningKey *k);

/* The DSSE pre-authentication encoding of (type, body). Caller frees *ret. */
int dsse_pae(const char *type, const void *body, size_t len, uint8_t **ret, size_t *ret_len);

/* Sign body as a DSSE envelope of payloadType type. */
int dsse_sign(const SigningKey *k, const char *type, const void *body, size_t len,
              json_t **ret_envelope, TfwError *e);

/* Verify an envelope against a public key: exactly the keys payloadType, payload and
 * signatures; at least one signature that verifies over the PAE. On success the decoded
 * payload (NUL-terminated, caller frees) and its length are returned. -EBADMSG when malformed,
 * -EPERM when no signature verifies. */
int dsse_verify(json_t *envelope, const uint8_t public_key[static SIGNING_PUBLIC_KEY_SIZE],
                char **ret_payload, size_t *ret_len, TfwError *e);

/* base64 (standard, padded) helpers on top of libsodium. */
char *base64_encode(const void *data, size_t len);
/* Decode exactly; refuses anything not standard padded base64 and outputs above max. */
int base64_decode(const char *s, size_t max, uint8_t **ret, size_t *ret_len);
