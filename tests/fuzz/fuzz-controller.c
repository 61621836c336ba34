/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the controller's side (issue 15). The first byte chooses:
 *  even: the rest is an MCP session (lines of JSON-RPC) served to its end against a workspace
 *        that does not exist: the server must answer and end cleanly, whatever the bytes;
 *  odd:  the rest is the JSON fields of a request: the builder must refuse with a code, or
 *        accept bytes that the worker's own parser accepts with the same id and sha256. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "controller/mcp.h"
#include "controller/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_session(const uint8_t *data, size_t size) {
        int in = memfd_create("mcp-in", MFD_CLOEXEC);
        int out = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (in < 0 || out < 0 || write_all(in, data, size) < 0 || lseek(in, 0, SEEK_SET) != 0)
                __builtin_trap();
        McpOptions o = {.workspace = "/nonexistent/tentaflake-fuzz"};
        TfwError e = {0};
        if (mcp_serve(in, out, &o, &e) < 0)
                __builtin_trap();
        close(in);
        close(out);
}

static void fuzz_build(const uint8_t *data, size_t size) {
        _cleanup_(json_decrefp) json_t *f = NULL;
        if (json_load_object_strict((const char *) data, size, "fields", &f, NULL) < 0)
                return;
        RequestPolicy p = request_policy_default;
        if (size > 0 && (data[0] & 2)) {
                p.max_argv = 4;
                p.max_argv_bytes = 32;
                p.max_timeout_seconds = 10;
                p.default_timeout_seconds = 5;
                p.max_request_bytes = 200;
        }
        ControllerRequest r = {};
        TfwError e = {0};
        if (controller_request_build(f, &p, "fz", &r, &e) < 0) {
                if (!e.code || r.bytes)
                        __builtin_trap();
                return;
        }
        Request *req = NULL;
        TfwError e2 = {0};
        if (request_parse_buffer(r.bytes, r.len, r.id, &p, &req, &e2) < 0 || strcmp(req->sha256, r.sha256) != 0 ||
            action_class_policy(req->action_class) == ACTION_POLICY_REJECT)
                __builtin_trap();
        request_free(req);
        controller_request_done(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size == 0)
                return 0;
        if (data[0] & 1)
                fuzz_build(data + 1, size - 1);
        else
                fuzz_session(data + 1, size - 1);
        return 0;
}
