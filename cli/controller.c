/* SPDX-License-Identifier: MIT */
/* The controller's verbs (contract section 9): `submit` and `mcp`, run as the controller's
 * own unprivileged user with no configuration file, and `list` as the controller. Parsing and exit statuses only; the work
 * is in controller/. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/json-util.h"
#include "common/log.h"
#include "controller/cancel.h"
#include "controller/list.h"
#include "controller/mcp.h"
#include "controller/outcome.h"
#include "controller/request.h"
#include "controller/apply.h"
#include "controller/submit.h"
#include "controller/terminal.h"

enum { OPT_WORKSPACE = 300, OPT_CLASS, OPT_TIMEOUT, OPT_REASON, OPT_ID, OPT_WAIT, OPT_NO_WAIT, OPT_JSON, OPT_RESULTS, OPT_APPLY,
       OPT_WAIT_TIMEOUT, OPT_CANCEL, OPT_ATTACH, OPT_RECENT, OPT_DRY_RUN, OPT_DIFF, OPT_ALLOW_GIT, OPT_RAW };

/* --wait-timeout S: 1..SUBMIT_WAIT_TIMEOUT_MAX seconds. */
static int parse_wait_timeout(const char *s, unsigned *ret) {
        size_t n = strlen(s);
        if (n == 0 || n > 10 || strspn(s, "0123456789") != n)
                return -EINVAL;
        unsigned long long v = strtoull(s, NULL, 10);
        if (v == 0 || v > SUBMIT_WAIT_TIMEOUT_MAX)
                return -ERANGE;
        *ret = (unsigned) v;
        return 0;
}

/* submit --cancel ID [--workspace DIR] [--results DIR] [--wait-timeout S] [--json]. */
static int submit_cancel(int argc, char **argv, const SubmitOptions *o, bool other_options, const char *id) {
        if (optind < argc)
                return cli_usage_error("submit", "--cancel ID takes no command ('%s')", argv[optind]);
        if (other_options)
                return cli_usage_error("submit", "--cancel ID takes only --workspace, --results, --wait-timeout and --json");
        TfwError e = {0};
        int status = 1;
        if (controller_cancel(o->workspace, o->results, id, o->wait_timeout, o->json, stdout, stderr, &status, &e) < 0) {
                log_error("submit --cancel: %s%s%s%s", e.message, e.code ? " (" : "", e.code ? e.code : "",
                          e.code ? ")" : "");
                return 1;
        }
        fflush(stdout);
        return status;
}

/* submit --attach ID [--workspace DIR] [--results DIR] [--wait-timeout S] [--json] [--apply]:
 * follow a request already submitted, as submit follows its own. */
static int submit_attach(int argc, char **argv, const SubmitOptions *o, bool other_options) {
        if (optind < argc)
                return cli_usage_error("submit", "--attach ID takes no command ('%s')", argv[optind]);
        if (other_options)
                return cli_usage_error("submit", "--attach ID takes only --workspace, --results, --wait-timeout, --json, --apply and --raw");
        TfwError e = {0};
        int status = 0;
        if (controller_submit_on_terminal(o, stdout, stderr, &status, &e) < 0) {
                log_error("submit --attach: %s%s%s%s", e.message, e.code ? " (" : "", e.code ? e.code : "", e.code ? ")" : "");
                return CONTROLLER_EXIT_NOT_RUN;
        }
        fflush(stdout);
        return status;
}

const struct option submit_options[] = {
        {"workspace", required_argument, NULL, OPT_WORKSPACE},
        {"class", required_argument, NULL, OPT_CLASS},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"reason", required_argument, NULL, OPT_REASON},
        {"id", required_argument, NULL, OPT_ID},
        {"wait", no_argument, NULL, OPT_WAIT},
        {"no-wait", no_argument, NULL, OPT_NO_WAIT},
        {"json", no_argument, NULL, OPT_JSON},
        {"results", required_argument, NULL, OPT_RESULTS},
        {"apply", no_argument, NULL, OPT_APPLY},
        {"wait-timeout", required_argument, NULL, OPT_WAIT_TIMEOUT},
        {"cancel", required_argument, NULL, OPT_CANCEL},
        {"attach", required_argument, NULL, OPT_ATTACH},
        {"raw", no_argument, NULL, OPT_RAW},
        {},
};

int verb_submit(int argc, char **argv, const Config *config, const char *config_path) {
        const char *cls = NULL, *timeout = NULL, *reason = NULL, *id = NULL, *cancel = NULL;
        SubmitOptions o = {.wait = true};
        int c;
        (void) config;
        (void) config_path;

        opterr = 0;
        optind = 0;
        /* '+': the command starts at the first argument that is not an option (or after --). */
        while ((c = getopt_long(argc, argv, "+:", submit_options, NULL)) != -1) {
                switch (c) {
                case OPT_WORKSPACE:
                        o.workspace = optarg;
                        break;
                case OPT_CLASS:
                        cls = optarg;
                        break;
                case OPT_TIMEOUT:
                        timeout = optarg;
                        break;
                case OPT_REASON:
                        reason = optarg;
                        break;
                case OPT_ID:
                        id = optarg;
                        break;
                case OPT_WAIT:
                        o.wait = true;
                        break;
                case OPT_APPLY:
                        o.apply = true;
                        break;
                case OPT_NO_WAIT:
                        o.wait = false;
                        break;
                case OPT_JSON:
                        o.json = true;
                        break;
                case OPT_RESULTS:
                        o.results = optarg;
                        break;
                case OPT_CANCEL:
                        cancel = optarg;
                        break;
                case OPT_ATTACH:
                        o.attach = optarg;
                        break;
                case OPT_RAW:
                        o.raw = true;
                        break;
                case OPT_WAIT_TIMEOUT:
                        if (parse_wait_timeout(optarg, &o.wait_timeout) < 0)
                                return cli_usage_error("submit", "--wait-timeout '%s' is not a number of seconds (1..%u)",
                                                       optarg, SUBMIT_WAIT_TIMEOUT_MAX);
                        break;
                case ':':
                        return cli_usage_error("submit", "option '%s' needs a value", argv[optind - 1]);
                default:
                        return cli_usage_error("submit", "unknown option '%s'", argv[optind - 1]);
                }
        }
        if (cancel)
                return submit_cancel(argc, argv, &o, cls || timeout || reason || id || o.apply || !o.wait || o.attach, cancel);
        if (o.attach)
                return submit_attach(argc, argv, &o, cls || timeout || reason || id || !o.wait);
        if (optind >= argc)
                return cli_usage_error("submit", "missing the command to run (submit [OPTIONS] -- ARGV...)");
        if (o.json && !o.wait)
                return cli_usage_error("submit", "--json prints the result, which --no-wait does not wait for");
        if (o.apply && !o.wait)
                return cli_usage_error("submit", "--apply applies the job's changes once it ended, which --no-wait does not wait for");
        if (o.wait_timeout && !o.wait)
                return cli_usage_error("submit", "--wait-timeout bounds the wait, which --no-wait does not make");

        _cleanup_(json_decrefp) json_t *fields = NULL;
        TfwError e = {0};
        int status = 0;
        if (controller_fields_from_strings(argv + optind, (size_t) (argc - optind), cls, timeout, reason, id, &fields,
                                           &e) < 0 ||
            (o.fields = fields, controller_submit_on_terminal(&o, stdout, stderr, &status, &e)) < 0) {
                log_error("submit: %s%s%s%s", e.message, e.code ? " (" : "", e.code ? e.code : "", e.code ? ")" : "");
                /* As timeout(1) does when it fails itself: the command did not run to an end. */
                return CONTROLLER_EXIT_NOT_RUN;
        }
        fflush(stdout);
        return status;
}

const struct option apply_options[] = {
        {"workspace", required_argument, NULL, OPT_WORKSPACE},
        {"results", required_argument, NULL, OPT_RESULTS},
        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
        {"diff", no_argument, NULL, OPT_DIFF},
        {"allow-git", no_argument, NULL, OPT_ALLOW_GIT},
        {},
};

int verb_apply(int argc, char **argv, const Config *config, const char *config_path) {
        ApplyOptions o = {};
        int c;
        (void) config;
        (void) config_path;

        opterr = 0;
        optind = 0;
        while ((c = getopt_long(argc, argv, ":", apply_options, NULL)) != -1) {
                if (c == OPT_WORKSPACE)
                        o.workspace = optarg;
                else if (c == OPT_RESULTS)
                        o.results = optarg;
                else if (c == OPT_DRY_RUN)
                        o.dry_run = true;
                else if (c == OPT_DIFF)
                        o.diff = true;
                else if (c == OPT_ALLOW_GIT)
                        o.allow_git = true;
                else if (c == ':')
                        return cli_usage_error("apply", "option '%s' needs a value", argv[optind - 1]);
                else
                        return cli_usage_error("apply", "unknown option '%s'", argv[optind - 1]);
        }
        if (optind + 1 != argc)
                return cli_usage_error("apply", optind == argc ? "missing the request id (apply ID)" : "unexpected argument '%s'",
                                       argv[optind + 1 < argc ? optind + 1 : optind]);
        o.id = argv[optind];
        TfwError e = {0};
        if (controller_apply(&o, stdout, stderr, &e) < 0) {
                log_error("%s%s%s%s", e.message, e.code ? " (" : "", e.code ? e.code : "", e.code ? ")" : "");
                return 1;
        }
        return 0;
}

const struct option mcp_options[] = {
        {"workspace", required_argument, NULL, OPT_WORKSPACE},
        {"results", required_argument, NULL, OPT_RESULTS},
        {},
};

int verb_mcp(int argc, char **argv, const Config *config, const char *config_path) {
        McpOptions o = {};
        int c;
        (void) config;
        (void) config_path;

        opterr = 0;
        optind = 0;
        while ((c = getopt_long(argc, argv, ":", mcp_options, NULL)) != -1) {
                if (c == OPT_WORKSPACE)
                        o.workspace = optarg;
                else if (c == OPT_RESULTS)
                        o.results = optarg;
                else if (c == ':')
                        return cli_usage_error("mcp", "option '%s' needs a value", argv[optind - 1]);
                else
                        return cli_usage_error("mcp", "unknown option '%s'", argv[optind - 1]);
        }
        if (optind < argc)
                return cli_usage_error("mcp", "unexpected argument '%s'", argv[optind]);

        /* A client that goes away is an end, not a signal. */
        (void) signal(SIGPIPE, SIG_IGN);
        TfwError e = {0};
        if (mcp_serve(STDIN_FILENO, STDOUT_FILENO, &o, &e) < 0) {
                log_error("mcp: %s", e.message);
                return 1;
        }
        return 0;
}

/* `list` as the controller (cli/main.c: not root, no configuration named): list [--workspace DIR]
 * [--results DIR] [--recent N] [--json]. */
const struct option list_controller_options[] = {
        {"workspace", required_argument, NULL, OPT_WORKSPACE},
        {"results", required_argument, NULL, OPT_RESULTS},
        {"recent", required_argument, NULL, OPT_RECENT},
        {"json", no_argument, NULL, OPT_JSON},
        {},
};

int verb_list_controller(int argc, char **argv) {
        const char *workspace = NULL, *results = NULL;
        size_t recent = CONTROLLER_LIST_RECENT_DEFAULT;
        bool json = false;
        int c;

        opterr = 0;
        optind = 0;
        while ((c = getopt_long(argc, argv, ":", list_controller_options, NULL)) != -1) {
                if (c == OPT_WORKSPACE)
                        workspace = optarg;
                else if (c == OPT_RESULTS)
                        results = optarg;
                else if (c == OPT_JSON)
                        json = true;
                else if (c == OPT_RECENT) {
                        size_t n = strlen(optarg);
                        if (n == 0 || n > 3 || strspn(optarg, "0123456789") != n ||
                            strtoul(optarg, NULL, 10) > CONTROLLER_LIST_RECENT_MAX)
                                return cli_usage_error("list", "--recent '%s' is not a number of results (0..%d)", optarg,
                                                       CONTROLLER_LIST_RECENT_MAX);
                        recent = strtoul(optarg, NULL, 10);
                } else if (c == ':')
                        return cli_usage_error("list", "option '%s' needs a value", argv[optind - 1]);
                else
                        return cli_usage_error("list", "unknown option '%s' (as the controller, list takes --workspace, "
                                                       "--results, --recent and --json; root's list takes a configuration)",
                                               argv[optind - 1]);
        }
        if (optind < argc)
                return cli_usage_error("list", "unexpected argument '%s'", argv[optind]);
        return controller_list_run(workspace, results, recent, json, stdout, stderr);
}
