/* SPDX-License-Identifier: MIT */
/* Strict JSON loading on top of jansson, shared by every parser of untrusted or operator input.
 * jansson does the parsing; this layer turns its failures into the project's stable error codes
 * and adds the checks jansson leaves to the caller (unknown keys, integer-only fields). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"

/* jansson provides json_decrefp() for cleanup attributes. */
#define _cleanup_json_ _cleanup_(json_decrefp)

/* Parse buf[0..len) as one JSON object. Refuses: a raw NUL byte (nul_byte), invalid UTF-8
 * (invalid_utf8), a \u0000 escape (nul_byte), duplicate keys (duplicate_key), numbers too large
 * for 64 bits (out_of_range), anything else malformed or trailing (bad_json), a top level that
 * is not an object (bad_type). what names the input in messages ("request", "config"). */
int json_load_object_strict(const char *buf, size_t len, const char *what, json_t **ret,
                            TfwError *e);

/* Turn jansson's failure into the codes above (json_load_object_strict's): control characters
 * of the quoted input replaced by '?', the place as line and column (base < 0) or as the byte
 * base + je->position (a value decoded from the middle of a larger text). Returns the negative
 * errno. */
int json_refusal(json_error_t *je, const char *what, long long base, TfwError *e);

/* Refuse any key of obj not in allowed (NULL-terminated): unknown_field naming prefix+key. */
int json_check_keys(json_t *obj, const char *const *allowed, const char *prefix, TfwError *e);

/* A JSON integer (never a real, string or boolean) within [min, max]. field names it in
 * messages. Returns -ENOENT (no error recorded) when absent and not required. */
int json_get_int_range(json_t *obj, const char *key, const char *field, bool required,
                       int64_t min, int64_t max, int64_t *ret, TfwError *e);

/* A JSON string; -ENOENT when absent and not required. With allow_null, JSON null counts as
 * absent. The returned pointer is owned by obj. */
int json_get_string(json_t *obj, const char *key, const char *field, bool required,
                    bool allow_null, const char **ret, TfwError *e);

/* Serialise compactly with sorted keys (the canonical form used for digests). */
char *json_dumps_canonical(const json_t *j);
