/* SPDX-License-Identifier: MIT */
/* The tree manifest, read as it arrives (validation/job.h, VManifestReader). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json-util.h"
#include "common/sha256.h"
#include "validation/job.h"
#include "validation/text.h"

/* Where the reader is in {"tree": "…", "entries": [{…}, …]}: what the next non-blank byte must
 * begin. */
typedef enum ReaderState {
        RD_OPEN,          /* '{' */
        RD_FIRST_KEY,     /* a key or '}' */
        RD_KEY,           /* a key (after ',') */
        RD_COLON,         /* ':' */
        RD_VALUE,         /* the value of rd->key */
        RD_AFTER_MEMBER,  /* ',' or '}' */
        RD_FIRST_ENTRY,   /* an entry or ']' */
        RD_ENTRY,         /* an entry (after ',') */
        RD_AFTER_ENTRY,   /* ',' or ']' */
        RD_END,           /* nothing but whitespace */
} ReaderState;

typedef enum ReaderKey {
        KEY_TREE,
        KEY_ENTRIES,
} ReaderKey;

struct VManifestReader {
        char *pending;      /* received, not consumed yet: the start of an unfinished value */
        size_t n_pending, cap_pending;
        size_t tried;       /* pending bytes when its value last proved unfinished; 0: not tried */
        unsigned long long offset; /* of the first pending byte in the body */
        unsigned long long received;
        ReaderState state;
        ReaderKey key;
        bool seen_tree, seen_entries, failed;
        char want[GIT_OID_HEX_SIZE + 1]; /* "" when any tree will do */
        VManifest *m;
        size_t cap_entries;
};

int vmanifest_reader_new(const char *want_tree, VManifestReader **ret) {
        VManifestReader *rd = calloc(1, sizeof(*rd));
        if (!rd)
                return -ENOMEM;
        rd->m = calloc(1, sizeof(*rd->m));
        if (!rd->m) {
                free(rd);
                return -ENOMEM;
        }
        if (want_tree)
                snprintf(rd->want, sizeof(rd->want), "%s", want_tree);
        *ret = rd;
        return 0;
}

VManifestReader *vmanifest_reader_free(VManifestReader *rd) {
        if (!rd)
                return NULL;
        vmanifest_free(rd->m);
        free(rd->pending);
        free(rd);
        return NULL;
}

VManifest *vmanifest_free(VManifest *m) {
        if (!m)
                return NULL;
        for (size_t i = 0; i < m->n_entries; i++)
                free(m->entries[i].path);
        free(m->entries);
        free(m);
        return NULL;
}

static bool is_blank(char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Decode the JSON value at b[*pos..n) with jansson (flags: what it may be). 1 with *ret: done,
 * *pos past it. 0: not finished yet, more bytes may finish it (never when final). Negative:
 * refused. jansson is shown at most VMANIFEST_TOKEN_MAX + 8 bytes, so a value never costs it
 * more, however the body came. Whether an error is final: jansson reads left to right, looking
 * at most one UTF-8 sequence (4 bytes) past where it reports an error, so an error further than
 * that from the end of the bytes it was shown stays an error whatever follows; one nearer may
 * be the cut of a chunk. A value tried unfinished is tried again once its bytes have doubled
 * (or at the end, or past the ceiling), so a server that trickles a byte at a time costs
 * O(n log n). */
static int take_value(VManifestReader *rd, const char *b, size_t n, size_t *pos, size_t flags, bool final,
                      json_t **ret, TfwError *e) {
        size_t avail = n - *pos, shown = MIN(avail, (size_t) VMANIFEST_TOKEN_MAX + 8);
        json_error_t je;

        if (!final && avail <= VMANIFEST_TOKEN_MAX && rd->tried && avail < 2 * rd->tried)
                return 0;
        json_t *v = json_loadb(b + *pos, shown, flags | JSON_DISABLE_EOF_CHECK, &je);
        bool cut = !v && (size_t) je.position + 4 >= shown; /* it may go on past what was shown */
        if (cut && shown < avail)
                return tfw_error(e, E2BIG, "too_large",
                                 "the manifest has an entry or value longer than %u bytes (at byte %llu)",
                                 VMANIFEST_TOKEN_MAX, rd->offset + *pos);
        if (cut && !final) {
                rd->tried = avail;
                return 0;
        }
        if (!v)
                return json_refusal(&je, "the manifest", (long long) (rd->offset + *pos), e);
        /* The same ceiling whether the value came in one piece or in many. */
        if ((size_t) je.position > VMANIFEST_TOKEN_MAX) {
                json_decref(v);
                return tfw_error(e, E2BIG, "too_large",
                                 "the manifest has an entry or value longer than %u bytes (at byte %llu)",
                                 VMANIFEST_TOKEN_MAX, rd->offset + *pos);
        }
        rd->tried = 0;
        *pos += (size_t) je.position;
        *ret = v;
        return 1;
}

/* One entry: {"path", "mode", "blob"}, appended to the manifest. */
static int add_entry(VManifestReader *rd, json_t *it, TfwError *e) {
        static const char *const entry_keys[] = {"path", "mode", "blob", NULL};
        VManifest *m = rd->m;
        char shown[SHOW_MAX], field[64];
        const char *s;
        int r;

        snprintf(field, sizeof(field), "entries[%zu]", m->n_entries);
        if (!json_is_object(it))
                return tfw_error(e, EBADMSG, "bad_type", "%s must be an object", field);
        if (m->n_entries >= VMANIFEST_ENTRIES_MAX)
                return tfw_error(e, E2BIG, "out_of_range", "the manifest has more than %d entries", VMANIFEST_ENTRIES_MAX);
        r = json_check_keys(it, entry_keys, "entries[].", e);
        if (r < 0)
                return r;
        if (m->n_entries == rd->cap_entries) {
                size_t cap = MIN(MAX(rd->cap_entries * 2, (size_t) 1024), (size_t) VMANIFEST_ENTRIES_MAX);
                VManifestEntry *en = reallocarray(m->entries, cap + 1, sizeof(VManifestEntry));
                if (!en)
                        return tfw_error(e, ENOMEM, "oom", "out of memory");
                m->entries = en;
                rd->cap_entries = cap;
        }
        VManifestEntry *en = &m->entries[m->n_entries];
        *en = (VManifestEntry) {};
        r = json_get_string(it, "path", "entries[].path", true, false, &s, e);
        if (r < 0)
                return r;
        if (json_string_length(json_object_get(it, "path")) == 0 ||
            json_string_length(json_object_get(it, "path")) > GIT_PATH_MAX || has_control(s))
                return tfw_error(e, EBADMSG, "invalid_path", "%s: path '%s' is empty, too long or has control characters",
                                 field, text_show(s, shown));
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
                return tfw_error(e, EBADMSG, "bad_mode", "%s: mode '%s' is not 100644, 100755 or 120000", field,
                                 text_show(s, shown));
        r = json_get_string(it, "blob", "entries[].blob", true, false, &s, e);
        if (r < 0)
                return r;
        if (!is_lower_hex64(s) || sha256_from_hex(s, en->blob) < 0)
                return tfw_error(e, EBADMSG, "bad_value", "%s: blob '%s' is not 64 lowercase hex digits", field,
                                 text_show(s, shown));
        en->path = strdup(json_string_value(json_object_get(it, "path")));
        if (!en->path)
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        m->n_entries++;
        return 0;
}

/* A key of the top-level object: "tree" or "entries", each once. */
static int take_key(VManifestReader *rd, json_t *k, TfwError *e) {
        char shown[SHOW_MAX];
        if (!json_is_string(k))
                return tfw_error(e, EBADMSG, "bad_json", "the manifest is not valid JSON: a key must be a string");
        const char *s = json_string_value(k);
        bool *seen;
        if (streq(s, "tree")) {
                rd->key = KEY_TREE;
                seen = &rd->seen_tree;
        } else if (streq(s, "entries")) {
                rd->key = KEY_ENTRIES;
                seen = &rd->seen_entries;
        } else
                return tfw_error(e, EBADMSG, "unknown_field", "unknown field '%s'", text_show(s, shown));
        if (*seen)
                return tfw_error(e, EBADMSG, "duplicate_key", "the manifest: duplicate object key '%s'", s);
        *seen = true;
        return 0;
}

static int take_tree(VManifestReader *rd, json_t *v, TfwError *e) {
        char shown[SHOW_MAX];
        if (!json_is_string(v))
                return tfw_error(e, EBADMSG, "bad_type", "field 'tree' must be a string");
        const char *s = json_string_value(v);
        if (!is_lower_hex64(s))
                return tfw_error(e, EBADMSG, "bad_value", "tree '%s' is not 64 lowercase hex digits", text_show(s, shown));
        if (rd->want[0] && !streq(s, rd->want))
                return tfw_error(e, EBADMSG, "tree_mismatch", "the manifest names tree %s, not the job's %s", s, rd->want);
        memcpy(rd->m->tree, s, GIT_OID_HEX_SIZE);
        return 0;
}

/* One byte that must be one of the structural characters allowed here. */
static int expect(char c, const char *allowed, const char *what, unsigned long long at, TfwError *e) {
        if (c && strchr(allowed, c))
                return 0;
        return tfw_error(e, EBADMSG, "bad_json", "the manifest is not valid JSON: %s expected (at byte %llu)", what, at);
}

/* Consume what b[0..n) completes; *ret_used: how many bytes. Stops at an unfinished value. */
static int step(VManifestReader *rd, const char *b, size_t n, bool final, size_t *ret_used, TfwError *e) {
        size_t pos = 0;
        int r = 0;

        for (;;) {
                _cleanup_json_ json_t *v = NULL;
                while (pos < n && is_blank(b[pos]))
                        pos++;
                if (pos == n)
                        break;
                char c = b[pos];
                unsigned long long at = rd->offset + pos;
                switch (rd->state) {
                case RD_OPEN:
                        if (c != '{')
                                return tfw_error(e, EBADMSG, "bad_type", "the manifest must be a JSON object");
                        pos++;
                        rd->state = RD_FIRST_KEY;
                        continue;
                case RD_FIRST_KEY:
                case RD_KEY:
                        if (rd->state == RD_FIRST_KEY && c == '}') {
                                pos++;
                                rd->state = RD_END;
                                continue;
                        }
                        r = expect(c, "\"", "a key", at, e);
                        if (r < 0)
                                return r;
                        r = take_value(rd, b, n, &pos, JSON_DECODE_ANY, final, &v, e);
                        if (r <= 0)
                                break;
                        r = take_key(rd, v, e);
                        if (r < 0)
                                return r;
                        rd->state = RD_COLON;
                        continue;
                case RD_COLON:
                        r = expect(c, ":", "':'", at, e);
                        if (r < 0)
                                return r;
                        pos++;
                        rd->state = RD_VALUE;
                        continue;
                case RD_VALUE:
                        if (rd->key == KEY_ENTRIES) {
                                if (c != '[')
                                        return tfw_error(e, EBADMSG, "bad_type", "entries must be a list");
                                pos++;
                                rd->state = RD_FIRST_ENTRY;
                                continue;
                        }
                        if (c != '"')
                                return tfw_error(e, EBADMSG, "bad_type", "field 'tree' must be a string");
                        r = take_value(rd, b, n, &pos, JSON_DECODE_ANY, final, &v, e);
                        if (r <= 0)
                                break;
                        r = take_tree(rd, v, e);
                        if (r < 0)
                                return r;
                        rd->state = RD_AFTER_MEMBER;
                        continue;
                case RD_AFTER_MEMBER:
                        r = expect(c, ",}", "',' or '}'", at, e);
                        if (r < 0)
                                return r;
                        pos++;
                        rd->state = c == ',' ? RD_KEY : RD_END;
                        continue;
                case RD_FIRST_ENTRY:
                case RD_ENTRY:
                        if (rd->state == RD_FIRST_ENTRY && c == ']') {
                                pos++;
                                rd->state = RD_AFTER_MEMBER;
                                continue;
                        }
                        /* jansson refuses anything but an object or a list here itself. */
                        r = take_value(rd, b, n, &pos, JSON_REJECT_DUPLICATES, final, &v, e);
                        if (r <= 0)
                                break;
                        r = add_entry(rd, v, e);
                        if (r < 0)
                                return r;
                        rd->state = RD_AFTER_ENTRY;
                        continue;
                case RD_AFTER_ENTRY:
                        r = expect(c, ",]", "',' or ']'", at, e);
                        if (r < 0)
                                return r;
                        pos++;
                        rd->state = c == ',' ? RD_ENTRY : RD_AFTER_MEMBER;
                        continue;
                case RD_END:
                        return tfw_error(e, EBADMSG, "bad_json", "the manifest is not valid JSON: data after its end (at byte %llu)",
                                         at);
                }
                if (r < 0)
                        return r;
                break; /* an unfinished value: wait for more */
        }
        *ret_used = pos;
        return 0;
}

/* Step through b[0..n), keeping what is left unconsumed as the pending bytes. b is the pending
 * buffer itself, or a chunk given while nothing was pending (not copied: a body given whole is
 * read in place). */
static int run(VManifestReader *rd, const char *b, size_t n, bool final, TfwError *e) {
        size_t used = 0;
        int r = step(rd, b, n, final, &used, e);
        if (r < 0)
                return r;
        size_t left = n - used;
        if (left > rd->cap_pending) { /* never when b is the pending buffer: left <= n */
                char *p = realloc(rd->pending, left);
                if (!p)
                        return tfw_error(e, ENOMEM, "oom", "out of memory");
                rd->pending = p;
                rd->cap_pending = left;
        }
        /* Nothing consumed from the pending buffer: it stays as it is (a server trickling a byte
         * at a time would otherwise have it moved whole at every byte). */
        if (left && !(b == rd->pending && used == 0))
                memmove(rd->pending, b + used, left);
        rd->n_pending = left;
        rd->offset += used;
        return 0;
}

int vmanifest_reader_feed(VManifestReader *rd, const char *p, size_t n, TfwError *e) {
        int r;

        if (rd->failed)
                return tfw_error(e, EINVAL, "internal", "the manifest was refused already");
        rd->failed = true; /* until this chunk is through */
        if (n > VMANIFEST_MAX_BYTES - MIN(rd->received, (unsigned long long) VMANIFEST_MAX_BYTES))
                return tfw_error(e, E2BIG, "too_large", "the manifest is larger than %u bytes", VMANIFEST_MAX_BYTES);
        rd->received += n;
        /* A raw NUL would otherwise be reported as a syntax error at best; name it. */
        if (memchr(p, 0, n))
                return tfw_error(e, EBADMSG, "nul_byte", "the manifest contains a NUL byte");
        if (rd->n_pending == 0)
                r = run(rd, p, n, false, e); /* no copy of a body given whole */
        else {
                if (rd->n_pending + n > rd->cap_pending) {
                        size_t cap = MAX(rd->cap_pending * 2, rd->n_pending + n);
                        char *b = realloc(rd->pending, cap);
                        if (!b)
                                return tfw_error(e, ENOMEM, "oom", "out of memory");
                        rd->pending = b;
                        rd->cap_pending = cap;
                }
                memcpy(rd->pending + rd->n_pending, p, n);
                r = run(rd, rd->pending, rd->n_pending + n, false, e);
        }
        if (r < 0)
                return r;
        rd->failed = false;
        return 0;
}

int vmanifest_reader_finish(VManifestReader *rd, VManifest **ret, TfwError *e) {
        int r;

        if (rd->failed)
                return tfw_error(e, EINVAL, "internal", "the manifest was refused already");
        rd->failed = true;
        r = run(rd, rd->pending, rd->n_pending, true, e);
        if (r < 0)
                return r;
        if (rd->state != RD_END)
                return tfw_error(e, EBADMSG, "bad_json", "the manifest is not valid JSON: it ends early (at byte %llu)",
                                 rd->offset + rd->n_pending);
        if (!rd->seen_tree)
                return tfw_error(e, EBADMSG, "missing_field", "field 'tree' is required");
        if (!rd->seen_entries)
                return tfw_error(e, EBADMSG, "bad_type", "entries must be a list");
        *ret = TAKE_PTR(rd->m);
        return 0;
}

int vmanifest_parse(const char *buf, size_t len, VManifest **ret, TfwError *e) {
        _cleanup_(vmanifest_reader_freep) VManifestReader *rd = NULL;
        int r;

        if (len > VMANIFEST_MAX_BYTES)
                return tfw_error(e, E2BIG, "too_large", "the manifest is larger than %u bytes", VMANIFEST_MAX_BYTES);
        if (vmanifest_reader_new(NULL, &rd) < 0)
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        r = vmanifest_reader_feed(rd, buf, len, e);
        if (r < 0)
                return r;
        return vmanifest_reader_finish(rd, ret, e);
}
