/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/path-util.h"
#include "parser/request.h"

const RequestPolicy request_policy_default = {
        .max_request_bytes = 64 * 1024,
        .max_argv = 256,
        .max_argv_bytes = 64 * 1024,
        .default_timeout_seconds = 300,
        .max_timeout_seconds = 900,
};

static const char *const action_class_table[_ACTION_CLASS_MAX] = {
        [ACTION_LOCAL_REVERSIBLE] = "local-reversible",
        [ACTION_EXTERNAL_REVERSIBLE] = "external-reversible",
        [ACTION_IRREVERSIBLE] = "irreversible",
        [ACTION_FINANCIAL] = "financial",
        [ACTION_PRODUCTION] = "production",
        [ACTION_COMMUNICATIVE] = "communicative",
        [ACTION_PRIVILEGED] = "privileged",
        [ACTION_FORBIDDEN] = "forbidden",
};

const char *action_class_to_string(ActionClass c) {
        return (unsigned) c < _ACTION_CLASS_MAX ? action_class_table[c] : NULL;
}

int action_class_from_string(const char *s) {
        for (int i = 0; i < _ACTION_CLASS_MAX; i++)
                if (streq(action_class_table[i], s))
                        return i;
        return -EINVAL;
}

ActionPolicy action_class_policy(ActionClass c) {
        switch (c) {
        case ACTION_LOCAL_REVERSIBLE:
                return ACTION_POLICY_RUN;
        case ACTION_FORBIDDEN:
                return ACTION_POLICY_REJECT;
        default:
                /* Every other class, and anything unknown, waits for an operator. */
                return ACTION_POLICY_APPROVAL;
        }
}

bool request_id_is_valid(const char *id) {
        size_t n = strlen(id);

        if (n == 0 || n > REQUEST_ID_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = id[i];
                bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
                if (!alnum && (i == 0 || (c != '_' && c != '-')))
                        return false;
        }
        return true;
}

bool request_cwd_is_valid(const char *cwd) {
        size_t n = strlen(cwd);

        if (n == 0 || n > REQUEST_CWD_MAX || cwd[0] == '/')
                return false;
        if (streq(cwd, "."))
                return true;
        for (const char *c = cwd;;) {
                size_t k = strcspn(c, "/");
                if (k == 0 || (k == 1 && c[0] == '.') || (k == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                /* The control directory, at the root (contract section 3). */
                if (c == cwd && k == strlen(REQUEST_CONTROL_DIR) && strncmp(c, REQUEST_CONTROL_DIR, k) == 0)
                        return false;
                if (!c[k])
                        return true;
                c += k + 1;
        }
}

Request *request_free(Request *r) {
        if (!r)
                return NULL;
        free(r->id);
        strv_free(r->argv);
        free(r->reason);
        free(r->cwd);
        free(r);
        return NULL;
}

static const char *const request_fields[] = {
        "version", "id", "action_class", "argv", "timeout_seconds", "reason", "cwd", "changes", NULL,
};

static int parse_argv(json_t *obj, const RequestPolicy *p, Request *req, TfwError *e) {
        json_t *a = json_object_get(obj, "argv"), *v;
        uint64_t total = 0;
        size_t i, n;

        if (!a)
                return tfw_error(e, EBADMSG, "missing_field", "field 'argv' is required");
        if (!json_is_array(a))
                return tfw_error(e, EBADMSG, "bad_type", "field 'argv' must be an array of strings");
        n = json_array_size(a);
        if (n == 0)
                return tfw_error(e, EBADMSG, "empty_argv", "field 'argv' is empty");
        if (n > p->max_argv)
                return tfw_error(e, E2BIG, "argv_too_large",
                                 "field 'argv' has %zu strings, at most %" PRIu64 " allowed", n,
                                 p->max_argv);

        req->argv = calloc(n + 1, sizeof(char *));
        if (!req->argv)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        json_array_foreach(a, i, v) {
                if (!json_is_string(v))
                        return tfw_error(e, EBADMSG, "bad_type",
                                         "field 'argv[%zu]' must be a string", i);
                size_t len = json_string_length(v);
                /* Each string costs its bytes plus the NUL terminator execve() will need. */
                total += len + 1;
                if (total > p->max_argv_bytes)
                        return tfw_error(e, E2BIG, "argv_too_large",
                                         "field 'argv' exceeds %" PRIu64 " bytes in total",
                                         p->max_argv_bytes);
                req->argv[i] = strndup(json_string_value(v), len);
                if (!req->argv[i])
                        return tfw_error(e, ENOMEM, "internal", "out of memory");
        }
        req->argc = n;
        if (req->argv[0][0] == 0)
                return tfw_error(e, EBADMSG, "empty_argv", "field 'argv[0]' is an empty string");
        return 0;
}

/* The request's id: well-formed, and the one its file is named after (expected_id, if any). */
static int parse_id(json_t *obj, const char *expected_id, Request *req, TfwError *e) {
        const char *s;
        int r;

        r = json_get_string(obj, "id", "id", true, false, &s, e);
        if (r < 0)
                return r;
        if (!request_id_is_valid(s))
                return tfw_error(e, EBADMSG, "bad_id",
                                 "field 'id' must match ^[a-z0-9][a-z0-9_-]{0,63}$");
        if (expected_id && !streq(s, expected_id))
                return tfw_error(e, EBADMSG, "id_mismatch",
                                 "field 'id' is '%s' but the file is named '%s.json'", s,
                                 expected_id);
        req->id = strdup(s);
        if (!req->id)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        return 0;
}

/* timeout_seconds: at least 1 and within the policy; the policy's default when absent. */
static int parse_timeout(json_t *obj, const RequestPolicy *policy, Request *req, TfwError *e) {
        int64_t x;

        json_t *t = json_object_get(obj, "timeout_seconds");
        if (t) {
                if (!json_is_integer(t))
                        return tfw_error(e, EBADMSG, "bad_type",
                                         "field 'timeout_seconds' must be an integer");
                x = json_integer_value(t);
                if (x < 1)
                        return tfw_error(e, ERANGE, "out_of_range",
                                         "field 'timeout_seconds' must be at least 1");
                if ((uint64_t) x > policy->max_timeout_seconds)
                        return tfw_error(e, ERANGE, "timeout_above_policy",
                                         "field 'timeout_seconds' is %" PRId64
                                         ", the policy allows at most %" PRIu64,
                                         x, policy->max_timeout_seconds);
                req->timeout_seconds = (uint64_t) x;
                req->timeout_explicit = true;
        } else
                req->timeout_seconds = policy->default_timeout_seconds;
        return 0;
}

/* The agent's reason, optional and bounded. */
static int parse_reason(json_t *obj, Request *req, TfwError *e) {
        const char *s;
        int r;

        r = json_get_string(obj, "reason", "reason", false, false, &s, e);
        if (r >= 0) {
                json_t *rv = json_object_get(obj, "reason");
                if (json_string_length(rv) > REQUEST_REASON_MAX)
                        return tfw_error(e, E2BIG, "reason_too_large",
                                         "field 'reason' is longer than %d bytes",
                                         REQUEST_REASON_MAX);
                req->reason = strdup(s);
                if (!req->reason)
                        return tfw_error(e, ENOMEM, "internal", "out of memory");
        } else if (r != -ENOENT)
                return r;
        return 0;
}

int request_parse_buffer(const char *buf, size_t len, const char *expected_id,
                         const RequestPolicy *policy, Request **ret, TfwError *e) {
        _cleanup_(json_decrefp) json_t *obj = NULL;
        _cleanup_request_ Request *req = NULL;
        const char *s;
        int r;

        if (!policy)
                policy = &request_policy_default;
        if (len > policy->max_request_bytes)
                return tfw_error(e, E2BIG, "too_large",
                                 "request is larger than %" PRIu64 " bytes", policy->max_request_bytes);

        r = json_load_object_strict(buf, len, "request", &obj, e);
        if (r < 0)
                return r;

        req = calloc(1, sizeof(*req));
        if (!req)
                return tfw_error(e, ENOMEM, "internal", "out of memory");

        /* Version first: a newer request should say so rather than list fields we don't know. */
        json_t *ver = json_object_get(obj, "version");
        if (!ver)
                return tfw_error(e, EBADMSG, "missing_field", "field 'version' is required");
        if (!json_is_integer(ver))
                return tfw_error(e, EBADMSG, "bad_type", "field 'version' must be an integer");
        if (json_integer_value(ver) != 1)
                return tfw_error(e, EPROTONOSUPPORT, "unsupported_version",
                                 "field 'version' is %" JSON_INTEGER_FORMAT ", only 1 is supported",
                                 json_integer_value(ver));
        req->version = 1;

        r = json_check_keys(obj, request_fields, NULL, e);
        if (r < 0)
                return r;

        r = parse_id(obj, expected_id, req, e);
        if (r < 0)
                return r;

        r = json_get_string(obj, "action_class", "action_class", true, false, &s, e);
        if (r < 0)
                return r;
        r = action_class_from_string(s);
        if (r < 0) {
                char p[80];
                return tfw_error(e, EBADMSG, "bad_action_class",
                                 "field 'action_class' is '%s', not a known action class",
                                 printable_name(s, p, sizeof(p)));
        }
        req->action_class = (ActionClass) r;

        r = parse_argv(obj, policy, req, e);
        if (r < 0)
                return r;

        r = parse_timeout(obj, policy, req, e);
        if (r < 0)
                return r;

        r = parse_reason(obj, req, e);
        if (r < 0)
                return r;

        r = json_get_string(obj, "cwd", "cwd", false, false, &s, e);
        if (r >= 0) {
                char p[64];
                if (!request_cwd_is_valid(s))
                        return tfw_error(e, EINVAL, "bad_cwd",
                                         "field 'cwd' is '%s', not a relative path inside the workspace (no '..', "
                                         "no empty component, not absolute, not in " REQUEST_CONTROL_DIR "/, at most %d bytes)",
                                         printable_name(s, p, sizeof(p)), REQUEST_CWD_MAX);
                if (!streq(s, ".") && !(req->cwd = strdup(s)))
                        return tfw_error(e, ENOMEM, "internal", "out of memory");
        } else if (r != -ENOENT)
                return r;

        json_t *ch = json_object_get(obj, "changes");
        if (ch && !json_is_boolean(ch))
                return tfw_error(e, EBADMSG, "bad_type", "field 'changes' must be true or false");
        req->changes = !ch || json_is_true(ch);

        r = sha256_buffer_hex(buf, len, req->sha256);
        if (r < 0)
                return tfw_error(e, -r, "internal", "cannot hash the request");

        *ret = TAKE_PTR(req);
        return 0;
}

int request_parse_fd(int fd, const char *expected_id, const RequestPolicy *policy,
                     Request **ret, TfwError *e) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        int r;

        if (!policy)
                policy = &request_policy_default;
        r = read_full_fd_bounded(fd, policy->max_request_bytes, &buf, &len);
        if (r == -E2BIG)
                return tfw_error(e, E2BIG, "too_large", "request is larger than %" PRIu64 " bytes",
                                 policy->max_request_bytes);
        if (r < 0)
                return tfw_error(e, -r, "io_error", "cannot read the request: %s", strerror(-r));
        return request_parse_buffer(buf, len, expected_id, policy, ret, e);
}
