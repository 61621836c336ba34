/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <string.h>

#include "json-util.h"

int json_refusal(json_error_t *je, const char *what, long long base, TfwError *e) {
        /* jansson quotes the offending input raw ("near '...'"): a newline or escape there
         * would let the input forge or garble log lines. */
        for (char *p = je->text; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        *p = '?';
        long long at = (base < 0 ? 0 : base) + je->position;
        switch (json_error_code(je)) {
        case json_error_invalid_utf8:
                return tfw_error(e, EBADMSG, "invalid_utf8", "%s is not valid UTF-8 (at byte %lld)", what, at);
        case json_error_null_character:
        case json_error_null_byte_in_key:
                return tfw_error(e, EBADMSG, "nul_byte", "%s contains an escaped NUL (\\u0000) at byte %lld", what,
                                 at);
        case json_error_duplicate_key:
                return tfw_error(e, EBADMSG, "duplicate_key", "%s: %s", what, je->text);
        case json_error_numeric_overflow:
                return tfw_error(e, ERANGE, "out_of_range", "%s: number out of range at byte %lld", what, at);
        default:
                if (base < 0)
                        return tfw_error(e, EBADMSG, "bad_json", "%s is not valid JSON: %s (line %d, column %d)", what,
                                         je->text, je->line, je->column);
                return tfw_error(e, EBADMSG, "bad_json", "%s is not valid JSON: %s (at byte %lld)", what, je->text,
                                 at);
        }
}

int json_load_object_strict(const char *buf, size_t len, const char *what, json_t **ret,
                            TfwError *e) {
        json_error_t je;
        json_t *j;

        /* A raw NUL would otherwise be reported as a syntax error at best; name it. */
        if (memchr(buf, 0, len))
                return tfw_error(e, EBADMSG, "nul_byte", "%s contains a NUL byte", what);

        j = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
        if (!j)
                return json_refusal(&je, what, -1, e);
        if (!json_is_object(j)) {
                json_decref(j);
                return tfw_error(e, EBADMSG, "bad_type", "%s must be a JSON object", what);
        }
        *ret = j;
        return 0;
}

int json_check_keys(json_t *obj, const char *const *allowed, const char *prefix, TfwError *e) {
        const char *key;
        json_t *v;

        json_object_foreach(obj, key, v) {
                bool ok = false;
                for (const char *const *a = allowed; *a; a++)
                        if (streq(*a, key)) {
                                ok = true;
                                break;
                        }
                if (!ok) {
                        /* The key is input: a decoded "\n" in it must not split the log line. */
                        char shown[201];
                        size_t i = 0;
                        for (; key[i] && i < sizeof(shown) - 1; i++)
                                shown[i] = ((unsigned char) key[i] < 0x20 || key[i] == 0x7f)
                                                   ? '?'
                                                   : key[i];
                        shown[i] = 0;
                        return tfw_error(e, EBADMSG, "unknown_field", "unknown field '%s%s'",
                                         prefix ? prefix : "", shown);
                }
        }
        return 0;
}

int json_get_int_range(json_t *obj, const char *key, const char *field, bool required,
                       int64_t min, int64_t max, int64_t *ret, TfwError *e) {
        json_t *v = json_object_get(obj, key);

        if (!v) {
                if (required)
                        return tfw_error(e, EBADMSG, "missing_field", "field '%s' is required",
                                         field);
                return -ENOENT;
        }
        if (!json_is_integer(v))
                return tfw_error(e, EBADMSG, "bad_type", "field '%s' must be an integer", field);
        json_int_t x = json_integer_value(v);
        if (x < min || x > max)
                return tfw_error(e, ERANGE, "out_of_range",
                                 "field '%s' is %" PRId64 ", allowed %" PRId64 "..%" PRId64, field,
                                 (int64_t) x, min, max);
        *ret = x;
        return 0;
}

int json_get_string(json_t *obj, const char *key, const char *field, bool required,
                    bool allow_null, const char **ret, TfwError *e) {
        json_t *v = json_object_get(obj, key);

        if (!v || (allow_null && json_is_null(v))) {
                if (required)
                        return tfw_error(e, EBADMSG, "missing_field", "field '%s' is required",
                                         field);
                return -ENOENT;
        }
        if (!json_is_string(v))
                return tfw_error(e, EBADMSG, "bad_type", "field '%s' must be a string", field);
        *ret = json_string_value(v);
        return 0;
}

char *json_dumps_canonical(const json_t *j) {
        return json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}
