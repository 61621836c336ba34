/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/sha256.h"
#include "artifacts/signing.h"

static int sodium_ready(void) {
        /* Idempotent and thread-safe: 0 first time, 1 afterwards, -1 on failure. */
        return sodium_init() < 0 ? -EIO : 0;
}

bool signing_identity_is_valid(const char *s) {
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > SIGNING_IDENTITY_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] <= ' ' || s[i] > '~')
                        return false;
        return true;
}

char *base64_encode(const void *data, size_t len) {
        if (sodium_ready() < 0)
                return NULL;
        size_t n = sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_ORIGINAL);
        char *s = malloc(n);
        if (!s)
                return NULL;
        sodium_bin2base64(s, n, data, len, sodium_base64_VARIANT_ORIGINAL);
        return s;
}

int base64_decode(const char *s, size_t max, uint8_t **ret, size_t *ret_len) {
        size_t slen = strlen(s), n = 0;
        const char *end = NULL;

        if (sodium_ready() < 0)
                return -EIO;
        if (slen % 4 != 0 || slen / 4 * 3 > max + 2)
                return -EBADMSG;
        _cleanup_free_ uint8_t *buf = malloc(slen / 4 * 3 + 1);
        if (!buf)
                return -ENOMEM;
        if (sodium_base642bin(buf, slen / 4 * 3 + 1, s, slen, NULL, &n, &end,
                              sodium_base64_VARIANT_ORIGINAL) != 0 ||
            end != s + slen || n > max)
                return -EBADMSG;
        *ret = TAKE_PTR(buf);
        *ret_len = n;
        return 0;
}

/* Decode into caller memory of exactly want bytes (for key material: no heap copy). */
static int base64_decode_exact(const char *s, size_t slen, uint8_t *out, size_t want) {
        size_t n = 0;
        const char *end = NULL;

        if (sodium_base642bin(out, want, s, slen, NULL, &n, &end, sodium_base64_VARIANT_ORIGINAL) !=
                    0 ||
            end != s + slen || n != want)
                return -EBADMSG;
        return 0;
}

static void keyid_of(const uint8_t pk[static SIGNING_PUBLIC_KEY_SIZE], char out[static 65]) {
        uint8_t d[SHA256_DIGEST_SIZE];
        if (sha256_buffer(pk, SIGNING_PUBLIC_KEY_SIZE, d) < 0) {
                out[0] = 0;
                return;
        }
        sha256_to_hex(d, out);
}

SigningKey *signing_key_free(SigningKey *k) {
        if (!k)
                return NULL;
        sodium_free(k->secret_key); /* wipes */
        free(k);
        return NULL;
}

char *signing_key_public_b64(const SigningKey *k) {
        return base64_encode(k->public_key, SIGNING_PUBLIC_KEY_SIZE);
}

/* Build the key file text in sodium memory. */
static int key_text(const char *identity, const uint8_t pk[static 32], const uint8_t seed[static 32],
                    char **ret, size_t *ret_len) {
        char pkb[sodium_base64_ENCODED_LEN(32, sodium_base64_VARIANT_ORIGINAL)];
        size_t cap = strlen(identity) + 256;
        char *t = sodium_malloc(cap);
        char *sb = sodium_malloc(sizeof(pkb));
        int n;

        if (!t || !sb) {
                sodium_free(t);
                sodium_free(sb);
                return -ENOMEM;
        }
        sodium_bin2base64(pkb, sizeof(pkb), pk, 32, sodium_base64_VARIANT_ORIGINAL);
        sodium_bin2base64(sb, sizeof(pkb), seed, 32, sodium_base64_VARIANT_ORIGINAL);
        n = snprintf(t, cap, SIGNING_KEY_HEADER "\nidentity %s\npublic %s\nseed %s\n", identity, pkb, sb);
        sodium_free(sb);
        if (n < 0 || (size_t) n >= cap) {
                sodium_free(t);
                return -ENOMEM;
        }
        *ret = t;
        *ret_len = (size_t) n;
        return 0;
}

/* Security contract: the key file appears at path complete, mode 0600, or not at all, and an
 * existing path (file, symlink, anything) is never replaced: the text is written to a hidden
 * O_EXCL|O_NOFOLLOW temporary in the same directory and link()ed into place (link refuses an
 * existing name), then the temporary is removed. */
int signing_key_generate(const char *path, const char *identity, char **ret_public_b64, TfwError *e) {
        uint8_t pk[crypto_sign_PUBLICKEYBYTES];
        uint8_t *sk = NULL, *seed = NULL;
        char *text = NULL;
        size_t text_len = 0;
        char tmp[PATH_MAX];
        uint64_t rnd;
        int r;

        if (!signing_identity_is_valid(identity))
                return tfw_error(e, EINVAL, "bad_identity",
                                 "identity must be 1..%d printable ASCII characters without spaces",
                                 SIGNING_IDENTITY_MAX);
        if (sodium_ready() < 0)
                return tfw_error(e, EIO, "crypto", "libsodium cannot be initialised");
        if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
                return tfw_error(e, EIO, "io", "getrandom failed: %m");
        if (snprintf(tmp, sizeof(tmp), "%s.tmp-%016llx", path, (unsigned long long) rnd) >= (int) sizeof(tmp))
                return tfw_error(e, ENAMETOOLONG, "io", "key path '%s' is too long", path);
        /* The temporary must be hidden and in the same directory: prefix its basename with '.'. */
        {
                const char *slash = strrchr(path, '/');
                size_t dirlen = slash ? (size_t) (slash - path + 1) : 0;
                if (snprintf(tmp + dirlen, sizeof(tmp) - dirlen, ".%s.tmp-%016llx", path + dirlen,
                             (unsigned long long) rnd) >= (int) (sizeof(tmp) - dirlen))
                        return tfw_error(e, ENAMETOOLONG, "io", "key path '%s' is too long", path);
        }

        sk = sodium_malloc(crypto_sign_SECRETKEYBYTES);
        seed = sodium_malloc(crypto_sign_SEEDBYTES);
        if (!sk || !seed) {
                r = tfw_error(e, ENOMEM, "io", "out of memory");
                goto out;
        }
        randombytes_buf(seed, crypto_sign_SEEDBYTES);
        if (crypto_sign_seed_keypair(pk, sk, seed) != 0) {
                r = tfw_error(e, EIO, "crypto", "key generation failed");
                goto out;
        }
        r = key_text(identity, pk, seed, &text, &text_len);
        if (r < 0) {
                tfw_error(e, -r, "io", "out of memory");
                goto out;
        }

        {
                _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd < 0) {
                        r = tfw_error(e, errno, "io", "cannot create a key file next to '%s': %m", path);
                        goto out;
                }
                r = write_all(fd, text, text_len);
                if (r >= 0 && fchmod(fd, 0600) < 0)
                        r = -errno;
                if (r >= 0 && fsync(fd) < 0)
                        r = -errno;
                if (r >= 0 && link(tmp, path) < 0)
                        r = -errno;
                (void) unlink(tmp);
                if (r == -EEXIST) {
                        r = tfw_error(e, EEXIST, "exists", "'%s' already exists; a key is never overwritten", path);
                        goto out;
                }
                if (r < 0) {
                        r = tfw_error(e, -r, "io", "cannot write the key '%s': %s", path, strerror(-r));
                        goto out;
                }
        }
        *ret_public_b64 = base64_encode(pk, sizeof(pk));
        r = *ret_public_b64 ? 0 : tfw_error(e, ENOMEM, "io", "out of memory");
out:
        sodium_free(sk);
        sodium_free(seed);
        sodium_free(text);
        return r;
}

/* Find "<word> <value>\n" at *p, advance past it; value is not NUL-terminated. */
static int take_line(char **p, char *end, const char *word, char **ret_value, size_t *ret_len) {
        size_t wl = strlen(word);
        char *nl = memchr(*p, '\n', (size_t) (end - *p));
        if (!nl)
                nl = end; /* last line without newline */
        if ((size_t) (nl - *p) < wl + 1 || memcmp(*p, word, wl) != 0 || (*p)[wl] != ' ')
                return -EBADMSG;
        *ret_value = *p + wl + 1;
        *ret_len = (size_t) (nl - *ret_value);
        *p = nl < end ? nl + 1 : end;
        return 0;
}

int signing_key_load(const char *path, SigningKey **ret, TfwError *e) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        char *buf = NULL, *p, *end, *v;
        uint8_t *seed = NULL;
        size_t n = 0, vl;
        SigningKey *k = NULL;
        uint8_t pk[crypto_sign_PUBLICKEYBYTES];
        int r;

        if (sodium_ready() < 0)
                return tfw_error(e, EIO, "crypto", "libsodium cannot be initialised");
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return tfw_error(e, errno, "key", "key '%s': %m", path);
        if (fstat(fd, &st) < 0)
                return tfw_error(e, errno, "key", "key '%s': %m", path);
        if (!S_ISREG(st.st_mode))
                return tfw_error(e, EINVAL, "key", "key '%s' is not a regular file", path);
        if (st.st_mode & 077)
                return tfw_error(e, EPERM, "key",
                                 "key '%s' is accessible by group or others (mode %04o); it must be 0600",
                                 path, (unsigned) (st.st_mode & 07777));
        if (st.st_size > SIGNING_KEY_FILE_MAX)
                return tfw_error(e, E2BIG, "key", "key '%s' is larger than %d bytes", path, SIGNING_KEY_FILE_MAX);

        buf = sodium_malloc(SIGNING_KEY_FILE_MAX + 1);
        seed = sodium_malloc(crypto_sign_SEEDBYTES);
        k = calloc(1, sizeof(*k));
        if (!buf || !seed || !k) {
                r = tfw_error(e, ENOMEM, "key", "out of memory");
                goto out;
        }
        while (n <= SIGNING_KEY_FILE_MAX) {
                ssize_t m = read(fd, buf + n, SIGNING_KEY_FILE_MAX + 1 - n);
                if (m < 0 && errno == EINTR)
                        continue;
                if (m < 0) {
                        r = tfw_error(e, errno, "key", "key '%s': %m", path);
                        goto out;
                }
                if (m == 0)
                        break;
                n += (size_t) m;
        }
        if (n > SIGNING_KEY_FILE_MAX) {
                r = tfw_error(e, E2BIG, "key", "key '%s' is larger than %d bytes", path, SIGNING_KEY_FILE_MAX);
                goto out;
        }
        p = buf;
        end = buf + n;
        r = -EBADMSG;
        size_t hl = strlen(SIGNING_KEY_HEADER);
        if (n < hl + 1 || memcmp(p, SIGNING_KEY_HEADER "\n", hl + 1) != 0)
                goto bad;
        p += hl + 1;
        if (take_line(&p, end, "identity", &v, &vl) < 0 || vl == 0 || vl > SIGNING_IDENTITY_MAX)
                goto bad;
        memcpy(k->identity, v, vl);
        k->identity[vl] = 0;
        if (!signing_identity_is_valid(k->identity))
                goto bad;
        if (take_line(&p, end, "public", &v, &vl) < 0 || base64_decode_exact(v, vl, k->public_key, 32) < 0)
                goto bad;
        if (take_line(&p, end, "seed", &v, &vl) < 0 || base64_decode_exact(v, vl, seed, 32) < 0)
                goto bad;
        if (p != end)
                goto bad;
        k->secret_key = sodium_malloc(crypto_sign_SECRETKEYBYTES);
        if (!k->secret_key) {
                r = tfw_error(e, ENOMEM, "key", "out of memory");
                goto out;
        }
        if (crypto_sign_seed_keypair(pk, k->secret_key, seed) != 0)
                goto bad;
        if (sodium_memcmp(pk, k->public_key, sizeof(pk)) != 0) {
                r = tfw_error(e, EBADMSG, "key", "key '%s': the public key does not match the seed", path);
                goto out;
        }
        keyid_of(k->public_key, k->keyid);
        *ret = TAKE_PTR(k);
        r = 0;
        goto out;
bad:
        r = tfw_error(e, EBADMSG, "key", "key '%s' is not a tentaflake-worker ed25519 key file", path);
out:
        sodium_free(buf);
        sodium_free(seed);
        signing_key_free(k);
        return r;
}

int dsse_pae(const char *type, const void *body, size_t len, uint8_t **ret, size_t *ret_len) {
        size_t tl = strlen(type);
        char head[128];
        int hn = snprintf(head, sizeof(head), "DSSEv1 %zu ", tl);
        char mid[32];
        int mn = snprintf(mid, sizeof(mid), " %zu ", len);
        if (hn < 0 || mn < 0)
                return -EINVAL;
        size_t total = (size_t) hn + tl + (size_t) mn + len;
        uint8_t *b = malloc(total ? total : 1);
        if (!b)
                return -ENOMEM;
        memcpy(b, head, (size_t) hn);
        memcpy(b + hn, type, tl);
        memcpy(b + hn + tl, mid, (size_t) mn);
        if (len)
                memcpy(b + hn + tl + mn, body, len);
        *ret = b;
        *ret_len = total;
        return 0;
}

int dsse_sign(const SigningKey *k, const char *type, const void *body, size_t len, json_t **ret_envelope,
              TfwError *e) {
        _cleanup_free_ uint8_t *pae = NULL;
        _cleanup_free_ char *payload = NULL, *sig64 = NULL;
        uint8_t sig[crypto_sign_BYTES];
        size_t pl;
        int r;

        if (sodium_ready() < 0)
                return tfw_error(e, EIO, "crypto", "libsodium cannot be initialised");
        r = dsse_pae(type, body, len, &pae, &pl);
        if (r < 0)
                return tfw_error(e, -r, "crypto", "cannot build the DSSE encoding");
        if (crypto_sign_detached(sig, NULL, pae, pl, k->secret_key) != 0)
                return tfw_error(e, EIO, "crypto", "signing failed");
        payload = base64_encode(body, len);
        sig64 = base64_encode(sig, sizeof(sig));
        if (!payload || !sig64)
                return tfw_error(e, ENOMEM, "crypto", "out of memory");
        json_t *env = json_pack("{s:s, s:s, s:[{s:s, s:s}]}", "payloadType", type, "payload", payload,
                                "signatures", "keyid", k->keyid, "sig", sig64);
        if (!env)
                return tfw_error(e, ENOMEM, "crypto", "out of memory");
        *ret_envelope = env;
        return 0;
}

int dsse_verify(json_t *envelope, const uint8_t public_key[static SIGNING_PUBLIC_KEY_SIZE], char **ret_payload,
                size_t *ret_len, TfwError *e) {
        static const char *const keys[] = {"payloadType", "payload", "signatures", NULL};
        const char *type, *payload;
        _cleanup_free_ uint8_t *body = NULL, *pae = NULL;
        size_t bl = 0, pl = 0;
        json_t *sigs, *s;
        size_t i;
        int r;

        if (sodium_ready() < 0)
                return tfw_error(e, EIO, "crypto", "libsodium cannot be initialised");
        if (!json_is_object(envelope))
                return tfw_error(e, EBADMSG, "bad_envelope", "the envelope is not an object");
        for (const char *const *k = keys; *k; k++)
                if (!json_object_get(envelope, *k))
                        return tfw_error(e, EBADMSG, "bad_envelope", "the envelope has no '%s'", *k);
        if (json_object_size(envelope) != 3)
                return tfw_error(e, EBADMSG, "bad_envelope", "the envelope has unknown keys");
        type = json_string_value(json_object_get(envelope, "payloadType"));
        payload = json_string_value(json_object_get(envelope, "payload"));
        sigs = json_object_get(envelope, "signatures");
        if (!type || !payload || !json_is_array(sigs) || json_array_size(sigs) == 0 || json_array_size(sigs) > 16)
                return tfw_error(e, EBADMSG, "bad_envelope", "the envelope's fields have the wrong types");
        if (base64_decode(payload, DSSE_PAYLOAD_MAX, &body, &bl) < 0)
                return tfw_error(e, EBADMSG, "bad_envelope", "the payload is not base64");
        r = dsse_pae(type, body, bl, &pae, &pl);
        if (r < 0)
                return tfw_error(e, -r, "crypto", "cannot build the DSSE encoding");
        json_array_foreach(sigs, i, s) {
                const char *sig64 = json_string_value(json_object_get(s, "sig"));
                _cleanup_free_ uint8_t *sig = NULL;
                size_t sl = 0;
                if (!sig64 || base64_decode(sig64, crypto_sign_BYTES, &sig, &sl) < 0 || sl != crypto_sign_BYTES)
                        continue;
                if (crypto_sign_verify_detached(sig, pae, pl, public_key) == 0) {
                        char *out = malloc(bl + 1);
                        if (!out)
                                return tfw_error(e, ENOMEM, "crypto", "out of memory");
                        if (bl)
                                memcpy(out, body, bl);
                        out[bl] = 0;
                        *ret_payload = out;
                        *ret_len = bl;
                        return 0;
                }
        }
        return tfw_error(e, EPERM, "bad_signature", "no signature of the envelope verifies with the key");
}
