/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>

#include "common/json-util.h"
#include "artifacts/attest.h"

static json_t *time_json(usec_t t) {
        char buf[RFC3339_MAX];
        return t ? json_string(format_rfc3339(t, buf)) : json_null();
}

json_t *attest_validation_statement(const ValidationFacts *f, const char *issuer) {
        json_t *pred = json_pack(
                "{s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:s, s:s, s:I}", "check", f->check, "repo", f->repo,
                "proposal", f->proposal, "job", f->job_id, "policy_version", (json_int_t) f->policy_version, "result",
                f->pass ? "pass" : "fail", "status", f->status, "environment_digest", f->environment_digest, "issuer",
                issuer, "worker", f->worker, "tree", f->tree, "attempt", (json_int_t) f->attempt);
        if (!pred)
                return NULL;
        if (json_object_set_new(pred, "exit_code", f->exit_code >= 0 ? json_integer(f->exit_code) : json_null()) < 0 ||
            json_object_set_new(pred, "signal", f->signal ? json_integer(f->signal) : json_null()) < 0 ||
            json_object_set_new(pred, "started_at", time_json(f->started_at)) < 0 ||
            json_object_set_new(pred, "finished_at", time_json(f->finished_at)) < 0) {
                json_decref(pred);
                return NULL;
        }
        return json_pack("{s:s, s:[{s:s, s:{s:s}}], s:s, s:o}", "_type", INTOTO_STATEMENT_TYPE, "subject", "name",
                         f->repo, "digest", "gitTree", f->tree, "predicateType", ATTEST_PREDICATE_VALIDATION,
                         "predicate", pred);
}

int attest_sign_statement(const SigningKey *k, json_t *statement, json_t **ret_envelope, TfwError *e) {
        _cleanup_free_ char *body = json_dumps_canonical(statement);
        if (!body)
                return tfw_error(e, ENOMEM, "crypto", "cannot serialise the statement");
        return dsse_sign(k, DSSE_PAYLOAD_TYPE_INTOTO, body, strlen(body), ret_envelope, e);
}
