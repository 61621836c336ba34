/* SPDX-License-Identifier: MIT */
/* The audit log's writer and verifier; the format and its guarantees are in audit.h. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/log.h"
#include "common/macro.h"

#define AUDIT_DIR "audit"
#define AUDIT_CURRENT "audit.jsonl"
#define AUDIT_LOCK "audit.lock"
#define AUDIT_ROTATED_N_MAX 999U
#define EVENT_REPAIRED "audit-repaired"

static const char *const audit_events[] = {
        "captured", "rejected", "pending",  "approved",        "denied",       "expired",
        "started",  "finished", "error",    "interrupted",     "expired-results",
        "worker-start", "worker-stop", "cache-cleared", "egress", "cancelled", "cancel-requested",
        "cancel-refused", "config-reload",
};

bool audit_event_is_valid(const char *event) {
        if (!event)
                return false;
        for (size_t i = 0; i < ELEMENTSOF(audit_events); i++)
                if (streq(audit_events[i], event))
                        return true;
        return false;
}

/* What the verifier accepts as an event: the callers' list plus the writer's own repair note. */
static bool event_is_known(const char *event) {
        return audit_event_is_valid(event) || streq(event, EVENT_REPAIRED);
}

typedef enum FieldType {
        FIELD_STRING,
        FIELD_SHA256,
        FIELD_INT,
        FIELD_ARGV,
        FIELD_TRUNCATED,
} FieldType;

typedef struct FieldSpec {
        const char *key;
        FieldType type;
        size_t budget;  /* bytes of the JSON-escaped value, quotes and commas included */
        bool internal;  /* written by this file only, refused from callers */
} FieldSpec;

/* Sorted by key, which is also the order "truncated" lists them in. With every field at its
 * budget and every byte a control character escaped as \u00XX, a line is about 60 KiB
 * (test-audit's worst case measures 60,640 bytes), under AUDIT_LINE_MAX by construction; the
 * final length check in audit_build_line() is only a second line of defence. */
static const FieldSpec field_specs[] = {
        {"action_class", FIELD_STRING, 66, false},
        {"address", FIELD_STRING, 50, false},
        {"approver", FIELD_STRING, 258, false},
        {"argv", FIELD_ARGV, 36864, false},
        {"bytes_down", FIELD_INT, 0, false},
        {"bytes_up", FIELD_INT, 0, false},
        {"count", FIELD_INT, 0, false},
        {"cwd", FIELD_STRING, 1026, false},
        {"discarded_bytes", FIELD_INT, 0, true},
        {"discarded_sha256", FIELD_SHA256, 0, true},
        {"duration_ms", FIELD_INT, 0, false},
        {"error", FIELD_STRING, 66, false},
        {"exit_code", FIELD_INT, 0, false},
        {"host", FIELD_STRING, 258, false},
        {"id", FIELD_STRING, 258, false},
        {"isolation", FIELD_STRING, 514, false},
        {"kind", FIELD_STRING, 18, false},
        {"message", FIELD_STRING, 8194, false},
        {"name", FIELD_STRING, 514, false},
        {"outcome", FIELD_STRING, 66, false},
        {"pid", FIELD_INT, 0, false},
        {"port", FIELD_INT, 0, false},
        {"reason", FIELD_STRING, 4098, false},
        {"request_sha256", FIELD_SHA256, 0, false},
        {"signal", FIELD_INT, 0, false},
        {"truncated", FIELD_TRUNCATED, 0, true},
        {"verdict", FIELD_STRING, 18, false},
        {"walls", FIELD_ARGV, 8192, false}, /* "<wall>: <detail> (<count>)" each (capsule/walls.h) */
};

static const FieldSpec *field_lookup(const char *key) {
        for (size_t i = 0; i < ELEMENTSOF(field_specs); i++)
                if (streq(field_specs[i].key, key))
                        return &field_specs[i];
        return NULL;
}

static bool key_is_reserved(const char *key) {
        return streq(key, "time") || streq(key, "event") || streq(key, "seq") || streq(key, "prev");
}

/* Bytes jansson writes for one byte of a string (it escapes '"', '\\' and control
 * characters, nothing else without flags). */
static size_t escaped_len_byte(unsigned char c) {
        switch (c) {
        case '"': case '\\': case '\b': case '\f': case '\n': case '\r': case '\t':
                return 2;
        default:
                return c < 0x20 ? 6 : 1;
        }
}

static size_t escaped_len(const char *s, size_t n) {
        size_t l = 2;
        for (size_t i = 0; i < n; i++)
                l += escaped_len_byte((unsigned char) s[i]);
        return l;
}

/* The longest prefix of s whose quoted, escaped form fits budget, cut on a UTF-8 boundary. */
static size_t prefix_fitting(const char *s, size_t n, size_t budget) {
        size_t l = 2, i = 0;
        if (budget < 2)
                return 0;
        while (i < n) {
                size_t c = escaped_len_byte((unsigned char) s[i]);
                if (l + c > budget)
                        break;
                l += c;
                i++;
        }
        if (i < n)
                while (i > 0 && ((unsigned char) s[i] & 0xC0) == 0x80)
                        i--;
        return i;
}

/* A bounded copy of a JSON string: NUL bytes (which the verifier's strict loader refuses)
 * become U+FFFD, then the value is cut to budget. */
static int bounded_string(json_t *v, size_t budget, json_t **ret, bool *ret_cut) {
        const char *s = json_string_value(v);
        size_t n = json_string_length(v);
        _cleanup_free_ char *copy = NULL;

        if (memchr(s, 0, n)) {
                size_t m = 0;
                copy = malloc(n * 3 + 1);
                if (!copy)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++) {
                        if (s[i] == 0) {
                                memcpy(copy + m, "\xef\xbf\xbd", 3);
                                m += 3;
                        } else
                                copy[m++] = s[i];
                }
                s = copy;
                n = m;
        }
        size_t k = prefix_fitting(s, n, budget);
        json_t *nv = json_stringn(s, k);
        if (!nv)
                return -EINVAL;  /* not valid UTF-8 (a json_stringn_nocheck value) */
        *ret = nv;
        *ret_cut = k < n;
        return 0;
}

static int bounded_argv(json_t *v, size_t budget, json_t **ret, bool *ret_cut) {
        _cleanup_json_ json_t *out = json_array();
        size_t used = 2, idx;
        json_t *el;
        bool cut = false;

        if (!out)
                return -ENOMEM;
        json_array_foreach(v, idx, el) {
                if (!json_is_string(el))
                        return -EINVAL;
                size_t sep = idx > 0 ? 1 : 0;
                size_t cost = escaped_len(json_string_value(el), json_string_length(el)) + sep;
                json_t *nv = NULL;
                if (used + cost <= budget) {
                        bool dummy;
                        int r = bounded_string(el, SIZE_MAX, &nv, &dummy);
                        if (r < 0)
                                return r;
                        used += cost;
                } else {
                        cut = true;
                        /* Keep a useful head of the element that does not fit, then stop. */
                        if (budget - used < sep + 16)
                                break;
                        bool dummy;
                        int r = bounded_string(el, budget - used - sep, &nv, &dummy);
                        if (r < 0)
                                return r;
                        used = budget;
                }
                if (json_array_append_new(out, nv) < 0)
                        return -ENOMEM;
                if (cut)
                        break;
        }
        *ret = TAKE_PTR(out);
        *ret_cut = cut;
        return 0;
}

static bool is_hex64(json_t *v) {
        uint8_t d[SHA256_DIGEST_SIZE];
        return json_is_string(v) && json_string_length(v) == 64 &&
               sha256_from_hex(json_string_value(v), d) >= 0;
}

/* Copy the caller's fields into a fresh object, refusing what is not whitelisted and cutting
 * what is too long. */
static int audit_bound_fields(json_t *fields, json_t **ret, TfwError *e) {
        _cleanup_json_ json_t *out = json_object();
        _cleanup_json_ json_t *truncated = json_array();
        const char *key;
        json_t *v;

        if (!out || !truncated)
                return -ENOMEM;
        if (fields) {
                if (!json_is_object(fields))
                        return tfw_error(e, EINVAL, "audit_field", "audit: fields must be an object");
                json_object_foreach(fields, key, v) {
                        const FieldSpec *f = field_lookup(key);
                        if (!f || f->internal)
                                return tfw_error(e, EINVAL, "audit_field",
                                                 "audit: field '%.64s' may not be written", key);
                }
        }
        for (size_t i = 0; fields && i < ELEMENTSOF(field_specs); i++) {
                const FieldSpec *f = &field_specs[i];
                json_t *nv = NULL;
                bool cut = false;
                int r = 0;

                v = json_object_get(fields, f->key);
                if (!v || json_is_null(v))
                        continue;
                switch (f->type) {
                case FIELD_STRING:
                        r = json_is_string(v) ? bounded_string(v, f->budget, &nv, &cut) : -EINVAL;
                        break;
                case FIELD_SHA256:
                        r = is_hex64(v) ? 0 : -EINVAL;
                        nv = r >= 0 ? json_incref(v) : NULL;
                        break;
                case FIELD_INT:
                        r = json_is_integer(v) ? 0 : -EINVAL;
                        nv = r >= 0 ? json_integer(json_integer_value(v)) : NULL;
                        break;
                case FIELD_ARGV:
                        r = json_is_array(v) ? bounded_argv(v, f->budget, &nv, &cut) : -EINVAL;
                        break;
                case FIELD_TRUNCATED:
                        r = -EINVAL;
                        break;
                }
                if (r == -ENOMEM)
                        return tfw_error(e, ENOMEM, "audit_io", "audit: out of memory");
                if (r < 0)
                        return tfw_error(e, EINVAL, "audit_field",
                                         "audit: field '%s' has the wrong type or invalid UTF-8",
                                         f->key);
                if (!nv || json_object_set_new(out, f->key, nv) < 0)
                        return tfw_error(e, ENOMEM, "audit_io", "audit: out of memory");
                if (cut && json_array_append_new(truncated, json_string(f->key)) < 0)
                        return tfw_error(e, ENOMEM, "audit_io", "audit: out of memory");
        }
        if (json_array_size(truncated) > 0 &&
            json_object_set(out, "truncated", truncated) < 0)
                return tfw_error(e, ENOMEM, "audit_io", "audit: out of memory");
        *ret = TAKE_PTR(out);
        return 0;
}

typedef struct AuditLine {
        uint64_t seq;
        uint8_t prev[SHA256_DIGEST_SIZE];
        bool repaired;
} AuditLine;

static bool digest_is_zero(const uint8_t d[static SHA256_DIGEST_SIZE]) {
        for (size_t i = 0; i < SHA256_DIGEST_SIZE; i++)
                if (d[i])
                        return false;
        return true;
}

/* Parse one line (without its newline) exactly as the writer produces it: strict JSON, only
 * known keys with their types, the four required ones present, canonical serialisation. On
 * failure why says what is wrong. */
static int audit_line_parse(const char *line, size_t len, AuditLine *ret, char *why,
                            size_t why_len) {
        _cleanup_json_ json_t *j = NULL;
        _cleanup_free_ char *canon = NULL;
        TfwError pe = {};
        const char *key, *s;
        json_t *v;
        usec_t t;
        char tbuf[RFC3339_MAX];
        AuditLine out = {};

        if (json_load_object_strict(line, len, "line", &j, &pe) < 0) {
                snprintf(why, why_len, "%.200s", pe.message);
                return -EBADMSG;
        }
        json_object_foreach(j, key, v) {
                const FieldSpec *f;
                bool ok = true;

                if (key_is_reserved(key))
                        continue;
                f = field_lookup(key);
                if (!f) {
                        snprintf(why, why_len, "unknown field '%.64s'", key);
                        return -EBADMSG;
                }
                switch (f->type) {
                case FIELD_STRING:
                        ok = json_is_string(v);
                        break;
                case FIELD_SHA256:
                        ok = is_hex64(v);
                        break;
                case FIELD_INT:
                        ok = json_is_integer(v);
                        break;
                case FIELD_ARGV:
                case FIELD_TRUNCATED: {
                        size_t i;
                        json_t *el;
                        ok = json_is_array(v);
                        json_array_foreach(v, i, el) {
                                const FieldSpec *g;
                                if (!json_is_string(el))
                                        ok = false;
                                else if (f->type == FIELD_TRUNCATED &&
                                         (!(g = field_lookup(json_string_value(el))) ||
                                          (g->type != FIELD_STRING && g->type != FIELD_ARGV)))
                                        ok = false;
                        }
                        break;
                }
                }
                if (!ok) {
                        snprintf(why, why_len, "field '%s' has the wrong type", key);
                        return -EBADMSG;
                }
        }

        v = json_object_get(j, "time");
        if (!json_is_string(v) || parse_rfc3339(s = json_string_value(v), &t) < 0 ||
            !streq(format_rfc3339(t, tbuf), s)) {
                snprintf(why, why_len, "\"time\" is missing or not an RFC 3339 UTC time");
                return -EBADMSG;
        }
        v = json_object_get(j, "event");
        if (!json_is_string(v) || !event_is_known(json_string_value(v))) {
                snprintf(why, why_len, "\"event\" is missing or not a known event");
                return -EBADMSG;
        }
        out.repaired = streq(json_string_value(v), EVENT_REPAIRED);
        v = json_object_get(j, "seq");
        if (!json_is_integer(v) || json_integer_value(v) < 1) {
                snprintf(why, why_len, "\"seq\" is missing or not a positive integer");
                return -EBADMSG;
        }
        out.seq = (uint64_t) json_integer_value(v);
        v = json_object_get(j, "prev");
        if (!is_hex64(v)) {
                snprintf(why, why_len, "\"prev\" is missing or not 64 lowercase hex digits");
                return -EBADMSG;
        }
        (void) sha256_from_hex(json_string_value(v), out.prev);

        canon = json_dumps_canonical(j);
        if (!canon)
                return -ENOMEM;
        if (strlen(canon) != len || memcmp(canon, line, len) != 0) {
                snprintf(why, why_len, "not in the canonical form the writer produces");
                return -EBADMSG;
        }
        *ret = out;
        return 0;
}

/* Serialise one line; its bytes are re-read by the verifier's own parser before they may be
 * written, so the writer can never produce a line that `audit verify` refuses. */
static int audit_build_line(json_t *obj, const char *event, usec_t now, uint64_t seq,
                            const uint8_t prev[static SHA256_DIGEST_SIZE], char **ret,
                            size_t *ret_len, TfwError *e) {
        char tbuf[RFC3339_MAX], hex[SHA256_HEX_SIZE], why[256];
        AuditLine check;

        if (seq > INT64_MAX)
                return tfw_error(e, EOVERFLOW, "audit_corrupt", "audit: seq overflow");
        sha256_to_hex(prev, hex);
        if (json_object_set_new(obj, "time", json_string(format_rfc3339(now, tbuf))) < 0 ||
            json_object_set_new(obj, "event", json_string(event)) < 0 ||
            json_object_set_new(obj, "seq", json_integer((json_int_t) seq)) < 0 ||
            json_object_set_new(obj, "prev", json_string(hex)) < 0)
                return tfw_error(e, ENOMEM, "audit_io", "audit: out of memory");

        _cleanup_free_ char *line = json_dumps_canonical(obj);
        if (!line)
                return tfw_error(e, ENOMEM, "audit_io", "audit: out of memory");
        size_t len = strlen(line);
        if (len > AUDIT_LINE_MAX)
                return tfw_error(e, E2BIG, "audit_field",
                                 "audit: a %s line would be %zu bytes, more than %zu", event, len,
                                 AUDIT_LINE_MAX);
        int r = audit_line_parse(line, len, &check, why, sizeof(why));
        if (r == -ENOMEM)
                return tfw_error(e, ENOMEM, "audit_io", "audit: out of memory");
        if (r < 0)
                return tfw_error(e, EINVAL, "audit_field", "audit: refusing to write a %s line: %s",
                                 event, why);
        *ret = TAKE_PTR(line);
        *ret_len = len;
        return 0;
}

/* ---- files ----------------------------------------------------------------------------- */

struct Audit {
        int dir_fd;
        unsigned generations;
        AuditClock clock;
        void *clock_userdata;
};

static usec_t default_clock(void *userdata) {
        (void) userdata;
        return now_realtime();
}

/* Open state_dir_fd/audit without following a symlink; with create, make it (0700) first and
 * tighten its mode. It must belong to our euid either way. */
static int open_audit_dir(int state_dir_fd, bool create, TfwError *e) {
        struct stat st;

        if (create && mkdirat(state_dir_fd, AUDIT_DIR, 0700) < 0 && errno != EEXIST)
                return tfw_error(e, errno, "audit_io", "audit: cannot create '%s': %m", AUDIT_DIR);
        _cleanup_close_ int fd = openat(state_dir_fd, AUDIT_DIR,
                                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOENT && !create)
                        return -ENOENT;
                return tfw_error(e, errno, "audit_io",
                                 "audit: cannot open '%s' (a directory, not a symlink): %m",
                                 AUDIT_DIR);
        }
        if (fstat(fd, &st) < 0)
                return tfw_error(e, errno, "audit_io", "audit: cannot stat '%s': %m", AUDIT_DIR);
        if (st.st_uid != geteuid())
                return tfw_error(e, EPERM, "audit_io", "audit: '%s' is owned by uid %u, not %u",
                                 AUDIT_DIR, (unsigned) st.st_uid, (unsigned) geteuid());
        if (create && (st.st_mode & 07777) != 0700 && fchmod(fd, 0700) < 0)
                return tfw_error(e, errno, "audit_io", "audit: cannot chmod '%s': %m", AUDIT_DIR);
        return TAKE_FD(fd);
}

/* Open name below the audit directory: never through a symlink, never blocking on a FIFO,
 * and only a regular file owned by our euid. */
static int open_audit_file(int dir_fd, const char *name, int flags, TfwError *e) {
        struct stat st;
        _cleanup_close_ int fd =
                openat(dir_fd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
        if (fd < 0) {
                if (errno == ENOENT)
                        return -ENOENT;
                return tfw_error(e, errno, "audit_io", "audit: cannot open '%s/%s': %m", AUDIT_DIR,
                                 name);
        }
        if (fstat(fd, &st) < 0)
                return tfw_error(e, errno, "audit_io", "audit: cannot stat '%s/%s': %m", AUDIT_DIR,
                                 name);
        if (!S_ISREG(st.st_mode))
                return tfw_error(e, EBADMSG, "audit_corrupt", "audit: '%s/%s' is not a regular file",
                                 AUDIT_DIR, name);
        if (st.st_uid != geteuid())
                return tfw_error(e, EPERM, "audit_corrupt", "audit: '%s/%s' is owned by uid %u",
                                 AUDIT_DIR, name, (unsigned) st.st_uid);
        return TAKE_FD(fd);
}

/* Take the lock on a fresh open file description, so that two processes sharing an inherited
 * fd still exclude each other (flock belongs to the description, not the process). */
static int audit_lock(int dir_fd, bool exclusive, TfwError *e) {
        _cleanup_close_ int fd = open_audit_file(
                dir_fd, AUDIT_LOCK, exclusive ? O_RDWR | O_CREAT : O_RDONLY, e);
        if (fd < 0)
                return fd;
        while (flock(fd, exclusive ? LOCK_EX : LOCK_SH) < 0)
                if (errno != EINTR)
                        return tfw_error(e, errno, "audit_io", "audit: cannot lock '%s/%s': %m",
                                         AUDIT_DIR, AUDIT_LOCK);
        return TAKE_FD(fd);
}

static int pread_full(int fd, void *buf, size_t n, uint64_t off) {
        char *p = buf;
        while (n > 0) {
                ssize_t k = pread(fd, p, n, (off_t) off);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        return -EIO;  /* the file shrank under the lock: someone else wrote it */
                p += k;
                off += (uint64_t) k;
                n -= (size_t) k;
        }
        return 0;
}

static int file_size(int fd, uint64_t *ret) {
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        *ret = (uint64_t) st.st_size;
        return 0;
}

/* Offset just past the last newline among the first size bytes of fd, looking back at most
 * AUDIT_LINE_MAX+1 bytes; 0 when a short file has none. -EBADMSG when a longer unterminated
 * tail makes the line start unfindable within the bound. */
static int find_line_end(int fd, uint64_t size, uint64_t *ret) {
        size_t n = (size_t) MIN(size, (uint64_t) AUDIT_LINE_MAX + 1);
        _cleanup_free_ char *buf = malloc(n ? n : 1);
        if (!buf)
                return -ENOMEM;
        int r = pread_full(fd, buf, n, size - n);
        if (r < 0)
                return r;
        const char *p = memrchr(buf, '\n', n);
        if (p)
                *ret = size - n + (uint64_t) (p - buf) + 1;
        else if (size > n)
                return -EBADMSG;
        else
                *ret = 0;
        return 0;
}

/* The line that ends with the newline at end-1 (end > 0), read by seeking back at most
 * AUDIT_LINE_MAX+2 bytes. */
static int read_line_before(int fd, uint64_t end, char **ret, size_t *ret_len) {
        size_t n = (size_t) MIN(end, (uint64_t) AUDIT_LINE_MAX + 2);
        _cleanup_free_ char *buf = malloc(n);
        if (!buf)
                return -ENOMEM;
        int r = pread_full(fd, buf, n, end - n);
        if (r < 0)
                return r;
        if (buf[n - 1] != '\n')
                return -EBADMSG;
        const char *p = n > 1 ? memrchr(buf, '\n', n - 1) : NULL;
        size_t start;
        if (p)
                start = (size_t) (p - buf) + 1;
        else if (end > n)
                return -EBADMSG;  /* longer than AUDIT_LINE_MAX */
        else
                start = 0;
        size_t len = n - 1 - start;
        if (len > AUDIT_LINE_MAX)
                return -EBADMSG;
        memmove(buf, buf + start, len);
        buf[len] = 0;
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

typedef struct Prev {
        uint64_t seq;  /* 0: nothing before (the next line is seq 1) */
        uint8_t digest[SHA256_DIGEST_SIZE];
} Prev;

/* The chain head from the last line of fd (which ends with a newline at end-1). */
static int prev_from_file(int fd, uint64_t end, const char *name, Prev *ret, TfwError *e) {
        _cleanup_free_ char *line = NULL;
        size_t len;
        AuditLine l;
        char why[256];

        int r = read_line_before(fd, end, &line, &len);
        if (r == -EBADMSG)
                return tfw_error(e, EBADMSG, "audit_corrupt",
                                 "audit: the last line of '%s/%s' is longer than %zu bytes; "
                                 "run 'audit verify'", AUDIT_DIR, name, AUDIT_LINE_MAX);
        if (r < 0)
                return tfw_error(e, r, "audit_io", "audit: cannot read '%s/%s': %s", AUDIT_DIR,
                                 name, strerror(-r));
        r = audit_line_parse(line, len, &l, why, sizeof(why));
        if (r == -ENOMEM)
                return tfw_error(e, ENOMEM, "audit_io", "audit: out of memory");
        if (r < 0)
                return tfw_error(e, EBADMSG, "audit_corrupt",
                                 "audit: the last line of '%s/%s' is not a valid audit record (%s); "
                                 "run 'audit verify'", AUDIT_DIR, name, why);
        ret->seq = l.seq;
        return sha256_buffer(line, len, ret->digest);
}

/* ---- rotation ------------------------------------------------------------------------- */

typedef struct Rotated {
        uint32_t date;  /* YYYYMMDD */
        unsigned n;     /* 0 for audit-YYYYMMDD.jsonl, N for audit-YYYYMMDD.N.jsonl */
        char name[AUDIT_FILE_NAME_MAX];
} Rotated;

static bool parse_rotated_name(const char *name, uint32_t *ret_date, unsigned *ret_n) {
        uint32_t date = 0;
        unsigned n = 0;
        const char *p = name;

        if (strncmp(p, "audit-", 6) != 0)
                return false;
        p += 6;
        for (int i = 0; i < 8; i++, p++) {
                if (*p < '0' || *p > '9')
                        return false;
                date = date * 10 + (uint32_t) (*p - '0');
        }
        if (*p == '.' && p[1] >= '1' && p[1] <= '9') {
                p++;
                for (int i = 0; i < 3 && *p >= '0' && *p <= '9'; i++, p++)
                        n = n * 10 + (unsigned) (*p - '0');
                if (n == 0)
                        return false;
        }
        if (!streq(p, ".jsonl"))
                return false;
        *ret_date = date;
        *ret_n = n;
        return true;
}

static void format_rotated_name(uint32_t date, unsigned n, char buf[static AUDIT_FILE_NAME_MAX]) {
        if (n == 0)
                snprintf(buf, AUDIT_FILE_NAME_MAX, "audit-%08" PRIu32 ".jsonl", date);
        else
                snprintf(buf, AUDIT_FILE_NAME_MAX, "audit-%08" PRIu32 ".%u.jsonl", date, n);
}

static int rotated_cmp(const void *a, const void *b) {
        const Rotated *x = a, *y = b;
        if (x->date != y->date)
                return x->date < y->date ? -1 : 1;
        return x->n < y->n ? -1 : x->n > y->n;
}

/* The rotated files of dir_fd, oldest first. */
static int list_rotated(int dir_fd, Rotated **ret, size_t *ret_n) {
        _cleanup_free_ Rotated *list = NULL;
        size_t n = 0, alloc = 0;
        struct dirent *de;
        int r = 0;

        _cleanup_closedir_ DIR *d = opendir_fd(dir_fd);
        if (!d)
                return -errno;
        while ((errno = 0, de = readdir(d))) {
                uint32_t date;
                unsigned k;
                if (!parse_rotated_name(de->d_name, &date, &k))
                        continue;
                if (n >= AUDIT_ROTATED_MAX) {
                        r = -E2BIG;
                        break;
                }
                if (n == alloc) {
                        size_t na = alloc ? alloc * 2 : 32;
                        Rotated *nl = reallocarray(list, na, sizeof(*list));
                        if (!nl) {
                                r = -ENOMEM;
                                break;
                        }
                        list = nl;
                        alloc = na;
                }
                list[n].date = date;
                list[n].n = k;
                format_rotated_name(date, k, list[n].name);
                n++;
        }
        if (r == 0 && errno != 0)
                r = -errno;
        if (r < 0)
                return r;
        if (n > 0)
                qsort(list, n, sizeof(*list), rotated_cmp);
        *ret = TAKE_PTR(list);
        *ret_n = n;
        return 0;
}

static uint32_t utc_date(usec_t t) {
        time_t sec = (time_t) (t / USEC_PER_SEC);
        struct tm tm;
        if (!gmtime_r(&sec, &tm))
                return 0;
        return (uint32_t) ((tm.tm_year + 1900) * 10000 + (tm.tm_mon + 1) * 100 + tm.tm_mday);
}

/* The UTC date of the first line of fd, or 0 when it cannot be read. */
static uint32_t first_line_date(int fd, uint64_t size) {
        size_t n = (size_t) MIN(size, (uint64_t) AUDIT_LINE_MAX + 1);
        _cleanup_free_ char *buf = malloc(n + 1);
        _cleanup_json_ json_t *j = NULL;
        usec_t t;

        if (!buf || pread_full(fd, buf, n, 0) < 0)
                return 0;
        char *nl = memchr(buf, '\n', n);
        if (!nl)
                return 0;
        if (json_load_object_strict(buf, (size_t) (nl - buf), "line", &j, NULL) < 0)
                return 0;
        json_t *v = json_object_get(j, "time");
        if (!json_is_string(v) || parse_rfc3339(json_string_value(v), &t) < 0)
                return 0;
        return utc_date(t);
}

static int prune_locked(Audit *a, unsigned *ret_pruned, TfwError *e) {
        _cleanup_free_ Rotated *list = NULL;
        size_t n = 0;
        bool removed = false;

        int r = list_rotated(a->dir_fd, &list, &n);
        if (r < 0)
                return tfw_error(e, r, "audit_io", "audit: cannot list '%s': %s", AUDIT_DIR,
                                 strerror(-r));
        for (size_t i = 0; i + a->generations < n; i++) {
                if (unlinkat(a->dir_fd, list[i].name, 0) < 0 && errno != ENOENT)
                        return tfw_error(e, errno, "audit_io", "audit: cannot remove '%s/%s': %m",
                                         AUDIT_DIR, list[i].name);
                removed = true;
                (*ret_pruned)++;
        }
        if (removed && fsync_fd(a->dir_fd) < 0)
                return tfw_error(e, errno, "audit_io", "audit: cannot fsync '%s': %m", AUDIT_DIR);
        return 0;
}

/* Should a current file of size bytes (ending with a complete line) be rotated at now? Its
 * first line's UTC date is compared with now's; *ret_date is the date its name will carry (that
 * of its first line, or now's when the first line is unreadable). */
static bool rotation_due(int fd, uint64_t size, usec_t now, bool force, uint32_t *ret_date) {
        uint32_t first = first_line_date(fd, size), today = utc_date(now);
        *ret_date = first ? first : today;
        return size > 0 && (force || first != today);
}

/* With the lock held: rename audit.jsonl to the next rotated name for date, raised to the
 * newest existing name's date if the clock went back, so that name order is always chain
 * order. */
static int rotate_current_locked(Audit *a, uint32_t date, char name[static AUDIT_FILE_NAME_MAX], TfwError *e) {
        _cleanup_free_ Rotated *list = NULL;
        size_t n = 0;
        unsigned k = 0;

        int r = list_rotated(a->dir_fd, &list, &n);
        if (r < 0)
                return tfw_error(e, r, "audit_io", "audit: cannot list '%s': %s", AUDIT_DIR,
                                 strerror(-r));
        if (n > 0 && date <= list[n - 1].date) {
                date = list[n - 1].date;
                k = list[n - 1].n + 1;
                if (k > AUDIT_ROTATED_N_MAX)
                        return tfw_error(e, EEXIST, "audit_io",
                                         "audit: too many rotations on %08" PRIu32, date);
        }
        format_rotated_name(date, k, name);
        if (renameat2(a->dir_fd, AUDIT_CURRENT, a->dir_fd, name, RENAME_NOREPLACE) < 0)
                return tfw_error(e, errno, "audit_io", "audit: cannot rename '%s/%s' to '%s': %m",
                                 AUDIT_DIR, AUDIT_CURRENT, name);
        if (fsync_fd(a->dir_fd) < 0)
                return tfw_error(e, errno, "audit_io", "audit: cannot fsync '%s': %m", AUDIT_DIR);
        return 0;
}

/* ---- public API ----------------------------------------------------------------------- */

int audit_open(int state_dir_fd, unsigned generations, Audit **ret, TfwError *e) {
        if (generations < 1)
                return tfw_error(e, EINVAL, "audit_io", "audit: at least one generation is kept");
        _cleanup_close_ int dir_fd = open_audit_dir(state_dir_fd, true, e);
        if (dir_fd < 0)
                return dir_fd;
        _cleanup_close_ int lock_fd = open_audit_file(dir_fd, AUDIT_LOCK, O_RDWR | O_CREAT, e);
        if (lock_fd < 0)
                return lock_fd;
        Audit *a = calloc(1, sizeof(*a));
        if (!a)
                return tfw_error(e, ENOMEM, "audit_io", "audit: out of memory");
        a->dir_fd = TAKE_FD(dir_fd);
        a->generations = generations;
        a->clock = default_clock;
        *ret = a;
        return 0;
}

void audit_close(Audit *a) {
        if (!a)
                return;
        safe_close(a->dir_fd);
        free(a);
}

void audit_set_clock(Audit *a, AuditClock clock, void *userdata) {
        a->clock = clock ? clock : default_clock;
        a->clock_userdata = userdata;
}

int audit_rotate(Audit *a, usec_t now, bool force, AuditRotation *ret, TfwError *e) {
        AuditRotation dummy;
        uint64_t size = 0, end = 0;
        uint32_t date;
        int r;

        if (!ret)
                ret = &dummy;
        *ret = (AuditRotation){};

        _cleanup_close_ int lock_fd = audit_lock(a->dir_fd, true, e);
        if (lock_fd < 0)
                return lock_fd;
        _cleanup_close_ int fd = open_audit_file(a->dir_fd, AUDIT_CURRENT, O_RDONLY, e);
        if (fd < 0 && fd != -ENOENT)
                return fd;
        if (fd >= 0 && file_size(fd, &size) < 0)
                return tfw_error(e, errno, "audit_io", "audit: cannot stat '%s/%s': %m", AUDIT_DIR,
                                 AUDIT_CURRENT);
        /* A torn tail stays where it is: the next append repairs it in the current file, and a
         * rotated file is never modified. */
        if (size > 0 && (find_line_end(fd, size, &end) < 0 || end != size))
                log_debug("audit: not rotating '%s/%s', its last line is incomplete", AUDIT_DIR,
                          AUDIT_CURRENT);
        else if (size > 0 && rotation_due(fd, size, now, force, &date)) {
                r = rotate_current_locked(a, date, ret->name, e);
                if (r < 0)
                        return r;
                ret->rotated = true;
        }
        return prune_locked(a, &ret->pruned, e);
}

/* The chain head when audit.jsonl is empty: the last line of the newest rotated file, or
 * nothing at all. Rotated files are never repaired, only reported. */
static int prev_from_rotated(Audit *a, Prev *ret, TfwError *e) {
        _cleanup_free_ Rotated *list = NULL;
        size_t n = 0;
        uint64_t size = 0, end = 0;

        int r = list_rotated(a->dir_fd, &list, &n);
        if (r < 0)
                return tfw_error(e, r, "audit_io", "audit: cannot list '%s': %s", AUDIT_DIR,
                                 strerror(-r));
        if (n == 0) {
                *ret = (Prev) {};
                return 0;
        }
        const char *name = list[n - 1].name;
        _cleanup_close_ int fd = open_audit_file(a->dir_fd, name, O_RDONLY, e);
        if (fd == -ENOENT)
                return tfw_error(e, ENOENT, "audit_io", "audit: '%s/%s' disappeared", AUDIT_DIR, name);
        if (fd < 0)
                return fd;
        if (file_size(fd, &size) < 0)
                return tfw_error(e, errno, "audit_io", "audit: cannot stat '%s/%s': %m", AUDIT_DIR,
                                 name);
        r = size > 0 ? find_line_end(fd, size, &end) : 0;
        if (r < 0 && r != -EBADMSG)
                return tfw_error(e, r, "audit_io", "audit: cannot read '%s/%s': %s", AUDIT_DIR, name,
                                 strerror(-r));
        if (size == 0 || r < 0 || end != size)
                return tfw_error(e, EBADMSG, "audit_corrupt",
                                 "audit: '%s/%s' is empty or does not end with a complete line; "
                                 "run 'audit verify'", AUDIT_DIR, name);
        return prev_from_file(fd, size, name, ret, e);
}

/* A torn tail (bytes after the last newline): what the repair line says of it, its length and
 * sha256; the caller cuts it just before its write. */
static int torn_tail_repair(int fd, uint64_t size, uint64_t end, json_t **ret, TfwError *e) {
        int r;
        size_t frag_len = (size_t) (size - end);
        _cleanup_free_ char *frag = malloc(frag_len);
        char hex[SHA256_HEX_SIZE];

        if (!frag)
                return tfw_error(e, ENOMEM, "audit_io", "audit: out of memory");
        r = pread_full(fd, frag, frag_len, end);
        if (r >= 0)
                r = sha256_buffer_hex(frag, frag_len, hex);
        if (r < 0)
                return tfw_error(e, r, "audit_io", "audit: cannot read '%s/%s': %s",
                                 AUDIT_DIR, AUDIT_CURRENT, strerror(-r));
        *ret = json_pack("{s:I, s:s, s:s}", "discarded_bytes", (json_int_t) frag_len,
                         "discarded_sha256", hex, "message",
                         "the last line had no newline (a cut file or an interrupted "
                         "write); its bytes were discarded before appending");
        if (!*ret)
                return tfw_error(e, ENOMEM, "audit_io", "audit: out of memory");
        return 0;
}

/* Rotation under the lock: the current file renamed for its day, the oldest pruned, a new empty
 * current file opened in *fd (its size in *size). */
static int rotate_and_reopen(Audit *a, uint32_t date, int *fd, uint64_t *size, TfwError *e) {
        int r;
        /* The old file's last line stays the chain head; the lines go to a new file. */
        char name[AUDIT_FILE_NAME_MAX];
        r = rotate_current_locked(a, date, name, e);
        if (r < 0)
                return r;
        unsigned pruned = 0;
        r = prune_locked(a, &pruned, e);
        if (r < 0)
                return r;
        safe_close(*fd);
        *fd = open_audit_file(a->dir_fd, AUDIT_CURRENT, O_RDWR | O_APPEND | O_CREAT, e);
        if (*fd < 0)
                return *fd;
        if (file_size(*fd, size) < 0)
                return tfw_error(e, errno, "audit_io", "audit: cannot stat '%s/%s': %m",
                                 AUDIT_DIR, AUDIT_CURRENT);
        if (*size != 0)
                return tfw_error(e, EBUSY, "audit_corrupt",
                                 "audit: '%s/%s' was recreated by someone else", AUDIT_DIR,
                                 AUDIT_CURRENT);
        return 0;
}

/* The repair line (if any) and the line in one write() and fdatasync; on failure the file is
 * cut back to size. */
static int write_lines(int fd, const char *repair_line, size_t repair_len, const char *line, size_t line_len,
                       uint64_t size, TfwError *e) {
        _cleanup_free_ char *buf = NULL;
        int r;

        /* One write() for everything, so a reader never sees half of the repair. */
        size_t total = (repair_line ? repair_len + 1 : 0) + line_len + 1, off = 0;
        buf = malloc(total);
        if (!buf)
                return tfw_error(e, ENOMEM, "audit_io", "audit: out of memory");
        if (repair_line) {
                memcpy(buf, repair_line, repair_len);
                buf[repair_len] = '\n';
                off = repair_len + 1;
        }
        memcpy(buf + off, line, line_len);
        buf[off + line_len] = '\n';

        r = write_all(fd, buf, total);
        if (r >= 0 && fdatasync(fd) < 0)
                r = -errno;
        if (r < 0) {
                /* Best effort: on failure the next append finds a torn tail and repairs it. */
                if (ftruncate(fd, (off_t) size) < 0)
                        log_debug("audit: cannot truncate a failed append: %m");
                return tfw_error(e, r, "audit_io", "audit: cannot append to '%s/%s': %s", AUDIT_DIR,
                                 AUDIT_CURRENT, strerror(-r));
        }
        return 0;
}

/* Security contract: see audit.h. Everything happens under the exclusive lock: repair of a
 * torn tail, rotation, reading the chain head, one write of the new line(s), fdatasync. The
 * lines are built before any file is changed; on a failed write the file is truncated back
 * to where it was. */
int audit_append(Audit *a, const char *event, json_t *fields, TfwError *e) {
        _cleanup_json_ json_t *obj = NULL, *repair = NULL;
        _cleanup_free_ char *line = NULL, *repair_line = NULL;
        size_t line_len = 0, repair_len = 0;
        uint64_t size = 0, end = 0;
        Prev prev = {};
        bool rotate = false;
        uint32_t date = 0;
        int r;

        if (!audit_event_is_valid(event))
                return tfw_error(e, EINVAL, "audit_field", "audit: unknown event '%.64s'",
                                 event ? event : "(null)");
        r = audit_bound_fields(fields, &obj, e);
        if (r < 0)
                return r;

        _cleanup_close_ int lock_fd = audit_lock(a->dir_fd, true, e);
        if (lock_fd < 0)
                return lock_fd;
        /* Read the clock only with the lock held: a writer that waited must not put an older
         * day into a file another writer has just started (which would rotate it again). */
        usec_t now = a->clock(a->clock_userdata);

        _cleanup_close_ int fd =
                open_audit_file(a->dir_fd, AUDIT_CURRENT, O_RDWR | O_APPEND | O_CREAT, e);
        if (fd < 0)
                return fd;
        if (file_size(fd, &size) < 0)
                return tfw_error(e, errno, "audit_io", "audit: cannot stat '%s/%s': %m", AUDIT_DIR,
                                 AUDIT_CURRENT);

        /* A torn tail: remember what it was; it is cut just before the write, and the repair
         * is said in the chain. */
        r = size > 0 ? find_line_end(fd, size, &end) : (end = 0, 0);
        if (r == -EBADMSG)
                return tfw_error(e, EBADMSG, "audit_corrupt",
                                 "audit: '%s/%s' ends with more than %zu bytes without a newline; "
                                 "run 'audit verify'", AUDIT_DIR, AUDIT_CURRENT, AUDIT_LINE_MAX);
        if (r < 0)
                return tfw_error(e, r, "audit_io", "audit: cannot read '%s/%s': %s", AUDIT_DIR,
                                 AUDIT_CURRENT, strerror(-r));
        if (end < size) {
                r = torn_tail_repair(fd, size, end, &repair, e);
                if (r < 0)
                        return r;
        }

        /* The chain head: the last complete line here, else the newest rotated file's. */
        if (end > 0) {
                rotate = rotation_due(fd, end, now, false, &date);
                r = prev_from_file(fd, end, AUDIT_CURRENT, &prev, e);
        } else
                r = prev_from_rotated(a, &prev, e);
        if (r < 0)
                return r;

        /* Everything that can fail without touching the files happens first. */
        if (repair) {
                r = audit_build_line(repair, EVENT_REPAIRED, now, prev.seq + 1, prev.digest,
                                     &repair_line, &repair_len, e);
                if (r < 0)
                        return r;
                prev.seq++;
                r = sha256_buffer(repair_line, repair_len, prev.digest);
                if (r < 0)
                        return tfw_error(e, r, "audit_io", "audit: sha256 failed");
        }
        r = audit_build_line(obj, event, now, prev.seq + 1, prev.digest, &line, &line_len, e);
        if (r < 0)
                return r;

        if (end < size && (ftruncate(fd, (off_t) end) < 0 || fdatasync(fd) < 0))
                return tfw_error(e, errno, "audit_io", "audit: cannot truncate '%s/%s': %m",
                                 AUDIT_DIR, AUDIT_CURRENT);
        size = end;
        if (rotate) {
                r = rotate_and_reopen(a, date, &fd, &size, e);
                if (r < 0)
                        return r;
        }

        r = write_lines(fd, repair_line, repair_len, line, line_len, size, e);
        if (r < 0)
                return r;
        /* A new file's directory entry must survive a crash too. */
        if (size == 0 && fsync_fd(a->dir_fd) < 0)
                return tfw_error(e, errno, "audit_io", "audit: cannot fsync '%s': %m", AUDIT_DIR);
        return 0;
}

/* ---- verification --------------------------------------------------------------------- */

/* Lines of every file in chain order, each at most AUDIT_LINE_MAX bytes, read in chunks so
 * memory stays bounded whatever the files' sizes. */
typedef struct LineIter {
        int dir_fd;
        const Rotated *files;
        size_t n_files;
        size_t next;           /* index of the next file to open; n_files means audit.jsonl */
        bool done;
        int fd;
        char name[AUDIT_FILE_NAME_MAX];
        uint64_t lineno;
        unsigned n_opened;
        char *buf;
        size_t cap, start, end;
        bool eof;
} LineIter;

typedef struct IterLine {
        const char *data;
        size_t len;
        bool newline;
        bool too_long;
} IterLine;

#define ITER_CHUNK ((size_t) 65536)

static int iter_open_next(LineIter *it, TfwError *e) {
        for (;;) {
                const char *name;
                if (it->next > it->n_files) {
                        it->done = true;
                        return 0;
                }
                name = it->next < it->n_files ? it->files[it->next].name : AUDIT_CURRENT;
                it->next++;
                int fd = open_audit_file(it->dir_fd, name, O_RDONLY, e);
                if (fd == -ENOENT)
                        continue;  /* audit.jsonl after a rotation, before the next append */
                snprintf(it->name, sizeof(it->name), "%s", name);
                if (fd < 0)
                        return fd;
                it->fd = fd;
                it->lineno = 0;
                it->start = it->end = 0;
                it->eof = false;
                it->n_opened++;
                return 1;
        }
}

/* audit/ for reading the chain, with audit.lock taken shared (so appends wait meanwhile; no
 * lock file yet: none taken): -ENOENT when there is no audit/ yet. */
static int chain_open_shared(int state_dir_fd, int *ret_dir, int *ret_lock, TfwError *e) {
        _cleanup_close_ int dir_fd = open_audit_dir(state_dir_fd, false, e);
        if (dir_fd < 0)
                return dir_fd;
        int lock_fd = audit_lock(dir_fd, false, e);
        if (lock_fd < 0 && lock_fd != -ENOENT)
                return lock_fd;
        *ret_dir = TAKE_FD(dir_fd);
        *ret_lock = lock_fd < 0 ? -EBADF : lock_fd;
        return 0;
}

/* An iterator over every file of dir_fd in chain order; *ret_files and *ret_buf are the
 * caller's to free (also on failure). */
static int iter_init(LineIter *it, int dir_fd, Rotated **ret_files, char **ret_buf, TfwError *e) {
        size_t n_files = 0;
        int r = list_rotated(dir_fd, ret_files, &n_files);
        if (r < 0)
                return tfw_error(e, r, "audit_io", "audit: cannot list '%s': %s", AUDIT_DIR, strerror(-r));
        *ret_buf = malloc(AUDIT_LINE_MAX + 1 + ITER_CHUNK);
        if (!*ret_buf)
                return tfw_error(e, ENOMEM, "audit_io", "audit: out of memory");
        *it = (LineIter) {
                .dir_fd = dir_fd, .files = *ret_files, .n_files = n_files, .fd = -EBADF,
                .buf = *ret_buf, .cap = AUDIT_LINE_MAX + 1 + ITER_CHUNK,
        };
        return 0;
}

/* 1 with a line in *ret (valid until the next call), 0 at the end of the last file. */
static int iter_next(LineIter *it, IterLine *ret, TfwError *e) {
        for (;;) {
                if (it->done)
                        return 0;
                if (it->fd < 0) {
                        int r = iter_open_next(it, e);
                        if (r <= 0)
                                return r;
                }
                char *nl = memchr(it->buf + it->start, '\n', it->end - it->start);
                if (nl || it->eof || it->end - it->start > AUDIT_LINE_MAX) {
                        size_t len = nl ? (size_t) (nl - (it->buf + it->start)) : it->end - it->start;
                        if (!nl && it->eof && len == 0) {
                                it->fd = safe_close(it->fd);
                                continue;
                        }
                        it->lineno++;
                        *ret = (IterLine) {
                                .data = it->buf + it->start,
                                .len = len,
                                .newline = nl != NULL,
                                .too_long = len > AUDIT_LINE_MAX,
                        };
                        it->start += nl ? len + 1 : len;
                        return 1;
                }
                if (it->start > 0) {
                        memmove(it->buf, it->buf + it->start, it->end - it->start);
                        it->end -= it->start;
                        it->start = 0;
                }
                ssize_t k = read(it->fd, it->buf + it->end, it->cap - it->end);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return tfw_error(e, errno, "audit_io", "audit: cannot read '%s/%s': %m",
                                         AUDIT_DIR, it->name);
                }
                if (k == 0)
                        it->eof = true;
                it->end += (size_t) k;
        }
}

typedef struct Where {
        char file[AUDIT_FILE_NAME_MAX];
        uint64_t line;
        uint64_t seq;
} Where;

static int verify_break(AuditVerifyReport *rep, const Where *w, TfwError *e, const char *fmt, ...)
        _printf_(4, 5);
static int verify_break(AuditVerifyReport *rep, const Where *w, TfwError *e, const char *fmt, ...) {
        char detail[768];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(detail, sizeof(detail), fmt, ap);
        va_end(ap);
        rep->intact = false;
        snprintf(rep->break_file, sizeof(rep->break_file), "%s", w->file);
        rep->break_line = w->line;
        if (w->line > 0)
                snprintf(rep->message, sizeof(rep->message),
                         "audit log broken at '%s/%s' line %" PRIu64 ": %s", AUDIT_DIR, w->file,
                         w->line, detail);
        else
                snprintf(rep->message, sizeof(rep->message), "audit log broken at '%s/%s': %s",
                         AUDIT_DIR, w->file, detail);
        return tfw_error(e, EBADMSG, "audit_broken", "%s", rep->message);
}

/* A line whose prev is not the sha256 of the line before it: which one changed? If the next
 * line vouches for this one, the line before was edited; otherwise this one was edited or
 * inserted. -EBADMSG with the break in rep, or another negative errno when the next line
 * cannot be read. */
static int verify_which_changed(LineIter *it, AuditVerifyReport *rep, const Where *prev_where, const Where *cur,
                                const uint8_t *digest, TfwError *e) {
        IterLine nx;
        AuditLine an;
        Where here = *cur;
        bool vouched = false;
        char why[256];
        int r;

        r = iter_next(it, &nx, e);
        if (r < 0 && r != -EBADMSG)
                return r;
        if (r > 0 && nx.newline && !nx.too_long &&
            audit_line_parse(nx.data, nx.len, &an, why, sizeof(why)) >= 0)
                vouched = memcmp(an.prev, digest, SHA256_DIGEST_SIZE) == 0;
        if (vouched)
                r = verify_break(rep, prev_where, e,
                                 "this line (seq %" PRIu64 ") was changed: its "
                                 "sha256 is no longer the prev recorded by the "
                                 "line after it",
                                 prev_where->seq);
        else
                r = verify_break(rep, &here, e,
                                 "its prev is not the sha256 of the line before it "
                                 "('%s/%s' line %" PRIu64 "): this line was "
                                 "changed or inserted, or the one before it changed",
                                 AUDIT_DIR, prev_where->file, prev_where->line);
        return r;
}

/* What an intact chain says: its lines, files and seqs, where it starts, its repairs, its head. */
static void verify_intact_message(AuditVerifyReport *rep, bool have_prev, unsigned n_opened) {
        if (!have_prev)
                snprintf(rep->message, sizeof(rep->message), "audit log empty: no lines yet");
        else {
                char start[160], repairs[160] = "";
                if (rep->first_seq == 1)
                        snprintf(start, sizeof(start), "from the first record");
                else
                        snprintf(start, sizeof(start),
                                 "the chain starts at seq %" PRIu64 ": older files were rotated "
                                 "away and that first link cannot be checked",
                                 rep->first_seq);
                if (rep->n_repairs > 0)
                        snprintf(repairs, sizeof(repairs),
                                 "; %" PRIu64 " torn line(s) were discarded and recorded "
                                 "(event %s)", rep->n_repairs, EVENT_REPAIRED);
                snprintf(rep->message, sizeof(rep->message),
                         "audit log intact: %" PRIu64 " lines in %u file(s), seq %" PRIu64
                         "..%" PRIu64 " (%s)%s; head sha256 %s",
                         rep->n_lines, n_opened, rep->first_seq, rep->last_seq, start, repairs,
                         rep->head_sha256);
        }
}

/* Security contract: reads only regular files below state_dir_fd/audit (no symlinks, no
 * FIFOs), never writes, holds one line (at most AUDIT_LINE_MAX bytes) plus a read chunk in
 * memory, and reports the first line that breaks the chain. It cannot see lines removed from
 * the end of the newest file, nor files pruned from the old end; the report gives the first
 * seq and the head sha256 so an external copy can be compared. */
int audit_verify(int state_dir_fd, AuditVerifyReport *report, TfwError *e) {
        _cleanup_free_ Rotated *files = NULL;
        _cleanup_free_ char *buf = NULL;
        AuditVerifyReport rep = {};
        Where prev_where = {}, cur = {};
        uint8_t prev_digest[SHA256_DIGEST_SIZE] = {};
        uint64_t prev_seq = 0;
        bool have_prev = false;
        char why[256];
        int r;

        _cleanup_close_ int dir_fd = -EBADF, lock_fd = -EBADF;
        r = chain_open_shared(state_dir_fd, &dir_fd, &lock_fd, e);
        if (r == -ENOENT) {
                rep.intact = true;
                snprintf(rep.message, sizeof(rep.message),
                         "audit log empty: there is no '%s' directory yet", AUDIT_DIR);
                *report = rep;
                return 0;
        }
        if (r < 0)
                return r;

        LineIter it;
        r = iter_init(&it, dir_fd, &files, &buf, e);
        if (r < 0)
                return r;

        for (;;) {
                IterLine l;
                AuditLine al;
                uint8_t digest[SHA256_DIGEST_SIZE];

                r = iter_next(&it, &l, e);
                if (r == -EBADMSG) {
                        Where w = {};
                        snprintf(w.file, sizeof(w.file), "%s", it.name);
                        r = verify_break(&rep, &w, e, "not a regular file owned by this user");
                        goto finish;
                }
                if (r < 0)
                        goto fail;
                if (r == 0)
                        break;
                snprintf(cur.file, sizeof(cur.file), "%s", it.name);
                cur.line = it.lineno;
                cur.seq = 0;
                if (l.too_long) {
                        r = verify_break(&rep, &cur, e, "longer than %zu bytes", AUDIT_LINE_MAX);
                        goto finish;
                }
                if (!l.newline) {
                        r = verify_break(&rep, &cur, e,
                                         "the line is cut off (no newline at the end): the file "
                                         "was truncated or a write did not finish");
                        goto finish;
                }
                r = audit_line_parse(l.data, l.len, &al, why, sizeof(why));
                if (r == -ENOMEM)
                        goto fail_oom;
                if (r < 0) {
                        r = verify_break(&rep, &cur, e, "not a valid audit record: %s", why);
                        goto finish;
                }
                cur.seq = al.seq;
                if (sha256_buffer(l.data, l.len, digest) < 0) {
                        r = tfw_error(e, EIO, "audit_io", "audit: sha256 failed");
                        goto fail;
                }
                if (!have_prev) {
                        if ((al.seq == 1) != digest_is_zero(al.prev)) {
                                r = verify_break(&rep, &cur, e,
                                                 "seq %" PRIu64 " with %s prev: only the first line "
                                                 "ever (seq 1) has a prev of 64 zeros",
                                                 al.seq, digest_is_zero(al.prev) ? "a zero" : "a non-zero");
                                goto finish;
                        }
                        rep.first_seq = al.seq;
                } else if (al.seq != prev_seq + 1) {
                        r = verify_break(&rep, &cur, e,
                                         "seq %" PRIu64 " where %" PRIu64 " was expected: a line "
                                         "is missing before it, or lines were moved",
                                         al.seq, prev_seq + 1);
                        goto finish;
                } else if (memcmp(al.prev, prev_digest, SHA256_DIGEST_SIZE) != 0) {
                        r = verify_which_changed(&it, &rep, &prev_where, &cur, digest, e);
                        if (r != -EBADMSG)
                                goto fail;
                        goto finish;
                }
                if (al.repaired)
                        rep.n_repairs++;
                memcpy(prev_digest, digest, sizeof(prev_digest));
                prev_seq = al.seq;
                prev_where = cur;
                have_prev = true;
                rep.n_lines++;
        }

        rep.intact = true;
        rep.last_seq = prev_seq;
        if (have_prev)
                sha256_to_hex(prev_digest, rep.head_sha256);
        verify_intact_message(&rep, have_prev, it.n_opened);
        r = 0;
finish:
        rep.n_files = it.n_opened;
        if (!rep.intact)
                rep.last_seq = prev_seq;
        safe_close(it.fd);
        *report = rep;
        return r;
fail_oom:
        r = tfw_error(e, ENOMEM, "audit_io", "audit: out of memory");
fail:
        safe_close(it.fd);
        return r;
}

/* ---- search ---------------------------------------------------------------------------- */

/* Does line (canonical JSON, keys sorted) record one of events for id? The substrings are
 * only a filter: a quote inside a value is escaped, so `"id":"X"` cannot come from a value,
 * and the line is parsed before it counts. */
static bool line_records(const IterLine *l, const char *needle, const char *id, const char *sha256, usec_t since,
                         const char *const *events) {
        usec_t t;
        if (!l->newline || l->too_long || !memmem(l->data, l->len, needle, strlen(needle)))
                return false;
        _cleanup_(json_decrefp) json_t *o = json_loadb(l->data, l->len, JSON_REJECT_DUPLICATES, NULL);
        json_t *jid = json_object_get(o, "id"), *jev = json_object_get(o, "event");
        json_t *jsha = json_object_get(o, "request_sha256"), *jt = json_object_get(o, "time");
        if (!json_is_string(jid) || !json_is_string(jev) || !streq(json_string_value(jid), id))
                return false;
        /* An earlier request under the same id (ids are free again after retention): another
         * sha256, or a line from before this one was captured (times have whole seconds). */
        if (json_is_string(jsha) && sha256 && sha256[0] && !streq(json_string_value(jsha), sha256))
                return false;
        if (!json_is_string(jt) || parse_rfc3339(json_string_value(jt), &t) < 0 || t + USEC_PER_SEC <= since)
                return false;
        for (const char *const *ev = events; *ev; ev++)
                if (streq(json_string_value(jev), *ev))
                        return true;
        return false;
}

int audit_find(int state_dir_fd, const char *id, const char *sha256, usec_t since, const char *const *events,
               TfwError *e) {
        _cleanup_free_ Rotated *files = NULL;
        _cleanup_free_ char *buf = NULL, *needle = NULL;
        int r;

        if (asprintf(&needle, "\"id\":\"%s\"", id) < 0)
                return tfw_error(e, ENOMEM, "audit_io", "audit: out of memory");
        _cleanup_close_ int dir_fd = -EBADF, lock_fd = -EBADF;
        r = chain_open_shared(state_dir_fd, &dir_fd, &lock_fd, e);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        LineIter it;
        r = iter_init(&it, dir_fd, &files, &buf, e);
        if (r < 0)
                return r;
        /* A rotated file holds one UTC day: none before the day of since is read. */
        uint32_t first_day = utc_date(since);
        while (it.n_files > 0 && it.files[0].date < first_day) {
                it.files++;
                it.n_files--;
        }
        for (;;) {
                IterLine l;
                r = iter_next(&it, &l, e);
                if (r <= 0)
                        break;
                if (line_records(&l, needle, id, sha256, since, events)) {
                        r = 1;
                        break;
                }
        }
        safe_close(it.fd);
        return r;
}
