/* SPDX-License-Identifier: MIT */
/* changes.json read strictly (parser/changes-manifest.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/json-util.h"
#include "common/macro.h"
#include "common/path-util.h"
#include "parser/changes-manifest.h"
#include "parser/request.h"

#define CONTROL_DIR REQUEST_CONTROL_DIR
#define PATH_MAX_BYTES 4096
#define WHY_MAX 256

static const char *const kinds[] = {
        [CHANGE_ADDED] = "added", [CHANGE_MODIFIED] = "modified", [CHANGE_MODE] = "mode",
        [CHANGE_DELETED] = "deleted", [CHANGE_DIRECTORY] = "directory", [CHANGE_REFUSED] = "refused",
};

const char *change_kind_to_string(ChangeKind k) {
        return (size_t) k < ELEMENTSOF(kinds) ? kinds[k] : "?";
}

bool changes_path_is_valid(const char *p) {
        size_t k = strcspn(p, "/");
        return strlen(p) <= PATH_MAX_BYTES && path_is_relative_normalized(p) &&
               !(k == strlen(CONTROL_DIR) && strncmp(p, CONTROL_DIR, k) == 0);
}

static bool hex64(const char *s) {
        if (strlen(s) != CHANGES_ID_HEX)
                return false;
        for (const char *c = s; *c; c++)
                if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
                        return false;
        return true;
}

static int bad(TfwError *e, size_t i, const char *what) {
        return tfw_error(e, EBADMSG, "changes_invalid", "changes.json: entry %zu: %s", i, what);
}

/* An optional string field: 1 set, 0 null or absent, -1 another type. */
static int opt_string(json_t *o, const char *key, const char **ret) {
        json_t *v = json_object_get(o, key);
        *ret = NULL;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_string(v))
                return -1;
        *ret = json_string_value(v);
        return 1;
}

static int mode_of(const char *s, unsigned *ret) {
        static const struct { const char *s; unsigned m; } modes[] = {
                { "100644", 0100644 }, { "100755", 0100755 }, { "120000", 0120000 }, { "40000", 040000 },
        };
        for (size_t i = 0; s && i < ELEMENTSOF(modes); i++)
                if (streq(s, modes[i].s)) {
                        *ret = modes[i].m;
                        return 0;
                }
        return -EINVAL;
}

static int entry(json_t *o, size_t i, json_t *seen, ChangeEntry *c, TfwError *e) {
        static const char *const keys[] = { "path", "kind", "mode", "size", "id", "base", "base_mode", "why", NULL };
        const char *path, *kind, *mode, *id, *base, *base_mode, *why;
        if (!json_is_object(o))
                return bad(e, i, "not an object");
        const char *key;
        json_t *val;
        json_object_foreach(o, key, val) {
                bool known = false;
                for (size_t x = 0; keys[x]; x++)
                        known |= streq(key, keys[x]);
                if (!known)
                        return bad(e, i, "an unknown field");
        }
        if (opt_string(o, "path", &path) != 1 || opt_string(o, "kind", &kind) != 1 || opt_string(o, "mode", &mode) < 0 ||
            opt_string(o, "id", &id) < 0 || opt_string(o, "base", &base) < 0 || opt_string(o, "base_mode", &base_mode) < 0 ||
            opt_string(o, "why", &why) < 0)
                return bad(e, i, "a field of the wrong type, or path or kind missing");
        size_t k = 0;
        while (k < ELEMENTSOF(kinds) && !streq(kinds[k], kind))
                k++;
        if (k == ELEMENTSOF(kinds))
                return bad(e, i, "an unknown kind");
        c->kind = (ChangeKind) k;
        if (!(c->path = strdup(path)))
                return -ENOMEM;
        json_t *size = json_object_get(o, "size");
        if (c->kind == CHANGE_REFUSED) {
                if (!why || strlen(why) > WHY_MAX || mode || id || base || base_mode || size)
                        return bad(e, i, "a refused entry names why, and nothing else");
                return (c->why = strdup(why)) ? 0 : -ENOMEM;
        }
        if (!changes_path_is_valid(path))
                return bad(e, i, "a path that leaves the workspace, or names the control directory");
        /* Once, or twice when the job replaced it by another type: deleted, then added or made a
         * directory. */
        json_t *before = json_object_get(seen, path);
        bool replacing = before && json_is_string(before) && streq(json_string_value(before), "deleted") &&
                         (c->kind == CHANGE_ADDED || c->kind == CHANGE_DIRECTORY);
        if (before && !replacing)
                return bad(e, i, "a path named twice (only a deletion, then an addition or a directory, replaces it)");
        if (json_object_set_new(seen, path, json_string(replacing ? "replaced" : kind)) < 0)
                return -ENOMEM;
        if (why)
                return bad(e, i, "why, on an entry that is not refused");
        unsigned bm = 0;
        if (base_mode && mode_of(base_mode, &bm) < 0)
                return bad(e, i, "an unknown base_mode");
        if (base && !hex64(base))
                return bad(e, i, "a base that is not a blob id");
        c->base_mode = bm;
        snprintf(c->base, sizeof(c->base), "%s", base ? base : "");
        switch (c->kind) {
        case CHANGE_ADDED:
        case CHANGE_MODIFIED:
        case CHANGE_MODE: {
                unsigned m = 0;
                if (!mode || mode_of(mode, &m) < 0 || (m != 0100644 && m != 0100755))
                        return bad(e, i, "a file's mode is not 100644 or 100755");
                if (!id || !hex64(id))
                        return bad(e, i, "a file's id is not a blob id");
                if (!json_is_integer(size) || json_integer_value(size) < 0 || json_integer_value(size) > (json_int_t) 1 << 62)
                        return bad(e, i, "a file's size is not a number of bytes");
                bool had = c->kind != CHANGE_ADDED;
                if (had != !!base || had != !!base_mode || (had && bm != 0100644 && bm != 0100755))
                        return bad(e, i, "added has no base; modified and mode have a file's");
                if (c->kind == CHANGE_MODE && (!streq(id, base) || m == bm))
                        return bad(e, i, "a mode change keeps the content and changes the mode");
                if (c->kind == CHANGE_MODIFIED && streq(id, base))
                        return bad(e, i, "a modification that keeps the content");
                c->executable = m == 0100755;
                c->size = (uint64_t) json_integer_value(size);
                snprintf(c->id, sizeof(c->id), "%s", id);
                return 0;
        }
        case CHANGE_DELETED:
                if (mode || id || size || !base_mode || ((bm == 0100644 || bm == 0100755) && !base))
                        return bad(e, i, "a deletion names its base_mode, and a file's base");
                return 0;
        case CHANGE_DIRECTORY:
                if (mode || id || size || base || base_mode)
                        return bad(e, i, "a directory made names nothing else");
                return 0;
        case CHANGE_REFUSED:
                break;
        }
        return bad(e, i, "an unknown kind");
}

int changes_manifest_parse(const char *buf, size_t len, ChangesManifest **ret, TfwError *e) {
        static const char *const keys[] = { "version", "complete", "incomplete", "changes", NULL };
        _cleanup_json_ json_t *j = NULL, *seen = json_object();
        _cleanup_(changes_manifest_freep) ChangesManifest *m = calloc(1, sizeof(ChangesManifest));
        int r;

        if (!m || !seen)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        if ((r = json_load_object_strict(buf, len, "changes.json", &j, e)) < 0)
                return r;
        if ((r = json_check_keys(j, keys, "changes.json: ", e)) < 0)
                return r;
        json_t *v = json_object_get(j, "version"), *c = json_object_get(j, "complete"), *inc = json_object_get(j, "incomplete"),
               *ch = json_object_get(j, "changes");
        if (!json_is_integer(v) || json_integer_value(v) != 1)
                return tfw_error(e, EBADMSG, "changes_invalid", "changes.json: version is not 1");
        if (!json_is_boolean(c) || (inc && !json_is_null(inc) && !json_is_string(inc)) || !json_is_array(ch))
                return tfw_error(e, EBADMSG, "changes_invalid", "changes.json: complete, incomplete or changes of the wrong type");
        m->complete = json_is_true(c);
        if (m->complete == (inc && json_is_string(inc)))
                return tfw_error(e, EBADMSG, "changes_invalid", "changes.json: an incomplete changeset says why, a complete one does not");
        if (json_is_string(inc) && !(m->incomplete = strdup(json_string_value(inc))))
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        if (json_array_size(ch) > CHANGES_MANIFEST_MAX)
                return tfw_error(e, E2BIG, "changes_invalid", "changes.json: more than %d changes", CHANGES_MANIFEST_MAX);
        if (!(m->v = calloc(MAX(json_array_size(ch), (size_t) 1), sizeof(ChangeEntry))))
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        size_t i;
        json_t *o;
        json_array_foreach(ch, i, o) {
                m->n = i + 1;
                r = entry(o, i, seen, &m->v[i], e);
                if (r == -ENOMEM)
                        return tfw_error(e, ENOMEM, "internal", "out of memory");
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(m);
        return 0;
}

ChangesManifest *changes_manifest_free(ChangesManifest *m) {
        if (!m)
                return NULL;
        for (size_t i = 0; i < m->n; i++) {
                free(m->v[i].path);
                free(m->v[i].why);
        }
        free(m->v);
        free(m->incomplete);
        free(m);
        return NULL;
}
