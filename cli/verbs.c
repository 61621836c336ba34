/* SPDX-License-Identifier: MIT */
/* The verb table: synopsis, help text and option parsing for every command of contract
 * section 1. A verb whose component has not been built yet checks its arguments like the
 * real one will, then says it is not available and exits 1: it never pretends to work. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "approve/cache.h"
#include "approve/decide.h"
#include "orchestrator/expire.h"
#include "approve/report.h"
#include "approve/wait.h"
#include "cli/cli.h"
#include "common/fd-util.h"
#include "common/log.h"
#include "common/proc-locks.h"
#include "common/root-dir.h"
#include "common/sha256.h"
#include "controller/no-worker.h"
#include "controller/outcome.h"
#include "orchestrator/audit.h"
#include "orchestrator/daemon.h"
#include "orchestrator/doctor.h"
#include "orchestrator/retention.h"
#include "orchestrator/store-tmpfs.h"
#include "orchestrator/worker.h"
#include "parser/request.h"
#include "validation/serve.h"
#include "artifacts/signing.h"

bool cli_verb_help_requested(int argc, char **argv, const Verb *v) {
        for (int i = 1; i < argc; i++) {
                if (streq(argv[i], "--"))
                        break;
                if (streq(argv[i], "--help") || streq(argv[i], "-h")) {
                        fputs(v->help, stdout);
                        return true;
                }
        }
        return false;
}

/* Parse options for verbs with the shape VERB [ID] [options]. id_required: 1 exactly one ID,
 * 0 none. Flags are reported through the out parameters. */
typedef struct VerbArgs {
        const char *id;
        const char *expect_sha256;
        const char *reason;
        const char *timeout; /* approve --timeout SECS, as given */
        uint64_t timeout_seconds;
        bool wait, json, all, scheduled;
} VerbArgs;

enum { OPT_EXPECT = 256, OPT_WAIT, OPT_REASON, OPT_JSON, OPT_ALL, OPT_TIMEOUT, OPT_SCHEDULED };

static int parse_verb_args(int argc, char **argv, const struct option *opts, int n_ids,
                           VerbArgs *a) {
        const char *verb = argv[0];
        int c;

        opterr = 0;
        optind = 0; /* 0: glibc re-initialises its scanner for the new argv */
        while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
                switch (c) {
                case OPT_EXPECT:
                        a->expect_sha256 = optarg;
                        break;
                case OPT_WAIT:
                        a->wait = true;
                        break;
                case OPT_REASON:
                        a->reason = optarg;
                        break;
                case OPT_JSON:
                        a->json = true;
                        break;
                case OPT_ALL:
                        a->all = true;
                        break;
                case OPT_TIMEOUT:
                        a->timeout = optarg;
                        break;
                case OPT_SCHEDULED:
                        a->scheduled = true;
                        break;
                case ':':
                        return cli_usage_error(verb, "option '%s' needs a value", argv[optind - 1]);
                default:
                        return cli_usage_error(verb, "unknown option '%s'", argv[optind - 1]);
                }
        }
        int rest = argc - optind;
        if (rest < n_ids)
                return cli_usage_error(verb, "missing the request ID");
        if (rest > n_ids)
                return cli_usage_error(verb, "unexpected argument '%s'", argv[optind + n_ids]);
        if (n_ids == 1) {
                a->id = argv[optind];
                if (!request_id_is_valid(a->id))
                        return cli_usage_error(verb,
                                               "'%s' is not a request id (^[a-z0-9][a-z0-9_-]{0,63}$)",
                                               a->id);
        }
        if (a->expect_sha256) {
                uint8_t d[SHA256_DIGEST_SIZE];
                if (sha256_from_hex(a->expect_sha256, d) < 0)
                        return cli_usage_error(verb, "--expect-sha256 '%s' is not 64 lowercase hex digits",
                                               a->expect_sha256);
        }
        if (a->timeout) {
                char *end = NULL;
                errno = 0;
                unsigned long long v = strtoull(a->timeout, &end, 10);
                if (!a->wait)
                        return cli_usage_error(verb, "--timeout needs --wait");
                if (a->timeout[0] < '0' || a->timeout[0] > '9' || errno || !end || *end || v == 0 ||
                    v > APPROVE_WAIT_TIMEOUT_MAX)
                        return cli_usage_error(verb, "--timeout '%s' is not a number of seconds (1..%u)", a->timeout,
                                               APPROVE_WAIT_TIMEOUT_MAX);
                a->timeout_seconds = v;
        }
        if (a->reason && strlen(a->reason) > REQUEST_REASON_MAX)
                return cli_usage_error(verb, "--reason is longer than %d bytes", REQUEST_REASON_MAX);
        return 0;
}

/* Open the worker's state for an operator verb; logs and returns an exit status on failure. */
static int open_worker(Worker *w, const Config *config) {
        TfwError e = {0};
        if (worker_open(w, config, &e) < 0) {
                log_error("%s", e.message);
                return 1;
        }
        w->report = cli_report_line;
        return 0;
}

static int fail(Worker *w, const TfwError *e) {
        log_error("%s", e->message);
        worker_close(w);
        return 1;
}

static const struct option run_options[] = {{}};

static int verb_run(int argc, char **argv, const Config *config, const char *config_path) {
        VerbArgs a = {};
        TfwError e = {0};
        int r = parse_verb_args(argc, argv, run_options, 0, &a);
        if (r)
                return r;
        DaemonOptions o = {
                .drain = streq(argv[0], "drain"),
                .stop_grace = DAEMON_STOP_GRACE_DEFAULT,
                .config_path = config_path,
                .report = cli_report_line,
        };
        if (daemon_run(config, &o, &e) < 0) {
                log_error("%s: %s", argv[0], e.message);
                return 1;
        }
        return 0;
}

/* The operator verbs share one shape: parse, open the worker's state, act, close. */
typedef int (*OperatorAction)(Worker *w, const VerbArgs *a, TfwError *e);

static int run_operator_verb(int argc, char **argv, const Config *config, const struct option *opts,
                             int n_ids, OperatorAction act) {
        VerbArgs a = {};
        Worker w;
        TfwError e = {0};
        int r = parse_verb_args(argc, argv, opts, n_ids, &a);
        if (r)
                return r;
        if ((r = open_worker(&w, config)))
                return r;
        if (act(&w, &a, &e) < 0)
                return fail(&w, &e);
        worker_close(&w);
        return 0;
}

/* One JSON document on stdout (approve, deny, gc, audit verify --json). */
static int print_json(json_t *o, TfwError *e) {
        _cleanup_free_ char *s = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        if (!s)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        printf("%s\n", s);
        return 0;
}

static int act_approve(Worker *w, const VerbArgs *a, TfwError *e) {
        char who[128];
        decide_operator_identity(who, sizeof(who));
        int r = decide_approve(w, a->id, a->expect_sha256, who, e);
        if (r < 0)
                return r;
        if (!a->json) {
                printf("approve '%s': approved by %s; queued\n", a->id, who);
                if (w->config->cache.paths)
                        printf("approve '%s': it starts from the build cache, read-only: at its paths it sees what "
                               "local-reversible jobs left there, not the workspace's own entries (cache clear "
                               "empties it)\n", a->id);
        }
        if (!a->wait) {
                if (!a->json)
                        return 0;
                _cleanup_(json_decrefp) json_t *o = json_pack("{s:s, s:s, s:s}", "id", a->id, "decision", "approved",
                                                              "by", who);
                return print_json(o, e);
        }
        fflush(stdout);
        _cleanup_(json_decrefp) json_t *res = NULL;
        r = approve_wait_result(w, a->id, a->timeout_seconds, &res, e);
        if (r < 0)
                return r;
        if (a->json) {
                _cleanup_(json_decrefp) json_t *o = json_pack("{s:s, s:s, s:s, s:O}", "id", a->id, "decision",
                                                              "approved", "by", who, "result", res);
                return print_json(o, e);
        }
        printf("result of '%s':\n", a->id);
        report_print_summary(res, stdout);
        return 0;
}

static int act_deny(Worker *w, const VerbArgs *a, TfwError *e) {
        char who[128];
        decide_operator_identity(who, sizeof(who));
        int r = decide_deny(w, a->id, a->reason, who, e);
        if (r < 0)
                return r;
        if (!a->json) {
                printf("deny '%s': denied by %s\n", a->id, who);
                return 0;
        }
        _cleanup_(json_decrefp) json_t *o = json_pack("{s:s, s:s, s:s, s:s?}", "id", a->id, "decision", "denied", "by",
                                                      who, "reason", a->reason);
        return print_json(o, e);
}

static int act_list(Worker *w, const VerbArgs *a, TfwError *e) {
        return report_list(w, a->all, a->json, stdout, e);
}

static int act_show(Worker *w, const VerbArgs *a, TfwError *e) {
        return report_show(w, a->id, a->json, stdout, e);
}

static void print_gc(const RetentionReport *rep, int expired, bool scheduled) {
        printf("gc: removed %d result(s) and %d rejection record(s); expired %d pending request(s); ", rep->results,
               rep->rejected, expired);
        if (rep->audit.rotated)
                printf("audit log rotated to audit/%s", rep->audit.name);
        else
                printf("audit log not rotated (%s)", scheduled ? "empty, or its day is not over" : "empty");
        if (rep->audit.pruned)
                printf(", %u old audit file(s) removed beyond audit_generations", rep->audit.pruned);
        printf("\n");
}

static int act_gc(Worker *w, const VerbArgs *a, TfwError *e) {
        RetentionReport rep;
        int expired = expire_pending(w, now_realtime(), e);
        if (expired < 0)
                return expired;
        /* --scheduled (the hourly timer): rotate the audit log only once its day is over, as
         * the daemon does; a plain gc rotates it now. */
        int r = retention_run(w, now_realtime(), !a->scheduled, NULL, &rep, e);
        if (r < 0)
                return r;
        if (!a->json) {
                print_gc(&rep, expired, a->scheduled);
                return 0;
        }
        _cleanup_(json_decrefp) json_t *o =
                json_pack("{s:i, s:i, s:i, s:{s:b, s:s?, s:i}}", "results_removed", rep.results, "rejected_removed",
                          rep.rejected, "pending_expired", expired, "audit", "rotated", rep.audit.rotated, "rotated_to",
                          rep.audit.rotated ? rep.audit.name : NULL, "files_removed", (int) rep.audit.pruned);
        return print_json(o, e);
}

static const struct option approve_options[] = {
        {"expect-sha256", required_argument, NULL, OPT_EXPECT},
        {"wait", no_argument, NULL, OPT_WAIT},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"json", no_argument, NULL, OPT_JSON},
        {},
};

static int verb_approve(int argc, char **argv, const Config *config, const char *config_path) {
        (void) config_path;
        return run_operator_verb(argc, argv, config, approve_options, 1, act_approve);
}

static const struct option deny_options[] = {
        {"reason", required_argument, NULL, OPT_REASON},
        {"json", no_argument, NULL, OPT_JSON},
        {},
};

static int verb_deny(int argc, char **argv, const Config *config, const char *config_path) {
        (void) config_path;
        return run_operator_verb(argc, argv, config, deny_options, 1, act_deny);
}

static const struct option list_options[] = {
        {"json", no_argument, NULL, OPT_JSON},
        {"all", no_argument, NULL, OPT_ALL},
        {},
};

static int verb_list(int argc, char **argv, const Config *config, const char *config_path) {
        (void) config_path;
        return run_operator_verb(argc, argv, config, list_options, 0, act_list);
}

static const struct option show_options[] = {
        {"json", no_argument, NULL, OPT_JSON},
        {},
};

static int verb_show(int argc, char **argv, const Config *config, const char *config_path) {
        (void) config_path;
        return run_operator_verb(argc, argv, config, show_options, 1, act_show);
}

static const struct option doctor_options[] = {
        {"json", no_argument, NULL, OPT_JSON},
        {},
};

static int verb_doctor(int argc, char **argv, const Config *config, const char *config_path) {
        VerbArgs a = {};
        (void) config_path;
        int r = parse_verb_args(argc, argv, doctor_options, 0, &a);
        if (r)
                return r;
        r = doctor_run(config, a.json, stdout);
        if (r < 0) {
                log_error("doctor: cannot run: %s", strerror(-r));
                return 1;
        }
        return r;
}

static const struct option gc_options[] = {
        {"scheduled", no_argument, NULL, OPT_SCHEDULED},
        {"json", no_argument, NULL, OPT_JSON},
        {},
};

static int verb_gc(int argc, char **argv, const Config *config, const char *config_path) {
        (void) config_path;
        return run_operator_verb(argc, argv, config, gc_options, 0, act_gc);
}

/* audit verify [--json]: parsed by hand (the subcommand comes first). */
static const struct option audit_options[] = {
        {"json", no_argument, NULL, 0},
        {},
};

static int verb_audit(int argc, char **argv, const Config *config, const char *config_path) {
        (void) config_path;
        if (argc < 2)
                return cli_usage_error("audit", "missing the subcommand (verify)");
        if (!streq(argv[1], "verify"))
                return cli_usage_error("audit", "unknown subcommand '%s' (only verify)", argv[1]);
        bool json = false;
        for (int i = 2; i < argc; i++) {
                if (strncmp(argv[i], "--", 2) != 0 || !streq(argv[i] + 2, audit_options[0].name))
                        return cli_usage_error("audit", "unexpected argument '%s'", argv[i]);
                json = true;
        }

        Worker w;
        AuditVerifyReport rep = {};
        TfwError e = {0};
        int r = open_worker(&w, config);
        if (r)
                return r;
        r = audit_verify(w.dirs.state_fd, &rep, &e);
        worker_close(&w);
        if (r < 0 && r != -EBADMSG) {
                log_error("audit verify: %s", e.message);
                return 1;
        }
        if (json) {
                _cleanup_(json_decrefp) json_t *o = json_pack(
                        "{s:b, s:i, s:I, s:I, s:I, s:s?, s:I, s:s?, s:I, s:s}", "intact", r >= 0, "files",
                        (int) rep.n_files, "lines", (json_int_t) rep.n_lines, "first_seq", (json_int_t) rep.first_seq,
                        "last_seq", (json_int_t) rep.last_seq, "head_sha256", rep.head_sha256[0] ? rep.head_sha256 : NULL,
                        "repairs", (json_int_t) rep.n_repairs, "break_file", rep.break_file[0] ? rep.break_file : NULL,
                        "break_line", (json_int_t) rep.break_line, "message", rep.message);
                TfwError pe = {0};
                if (print_json(o, &pe) < 0) {
                        log_error("audit verify: %s", pe.message);
                        return 1;
                }
                return r >= 0 ? 0 : 1;
        }
        if (r == -EBADMSG) {
                log_error("audit verify: %s", rep.message);
                return 1;
        }
        printf("audit verify: %s\n", rep.message);
        return 0;
}

/* check-config: the file parses, and the directories it names are as they must be or can be
 * made; nothing is created. */
static const struct option check_config_options[] = {{}};

static int verb_check_config(int argc, char **argv, const Config *config, const char *config_path) {
        VerbArgs a = {};
        int r = parse_verb_args(argc, argv, check_config_options, 0, &a);
        if (r)
                return r;
        int failed = 0;
        for (int results = 0; results <= 1; results++) {
                TfwError e = {0};
                r = worker_dir_check(config, results, &e);
                if (r < 0 && r != -ENOENT) {
                        log_error("check-config: %s", e.message);
                        failed = 1;
                }
        }
        TfwError we = {0};
        r = worker_workspace_check(config, &we);
        if (r < 0) {
                log_error("check-config: %s", we.message);
                failed = 1;
        }
        if (!failed)
                printf("check-config: '%s' is valid: worker '%s', workspace '%s', results in '%s'\n", config_path,
                       config->name, config->workspace, config->results_dir);
        return failed;
}

static int verb_cache(int argc, char **argv, const Config *config, const char *config_path) {
        (void) config_path;
        if (argc < 2)
                return cli_usage_error("cache", "missing the subcommand (clear)");
        if (!streq(argv[1], "clear"))
                return cli_usage_error("cache", "unknown subcommand '%s' (only clear)", argv[1]);
        if (argc > 2)
                return cli_usage_error("cache", "unexpected argument '%s'", argv[2]);

        Worker w;
        TfwError e = {0};
        bool daemon = false;
        int r = open_worker(&w, config);
        if (r)
                return r;
        r = cache_clear(&w, &daemon, &e);
        worker_close(&w);
        if (r < 0) {
                log_error("cache clear: %s", e.message);
                return 1;
        }
        if (daemon)
                printf("cache clear: the build cache of worker '%s' is empty; the next job starts without one\n", config->name);
        else
                printf("cache clear: no daemon of worker '%s' runs: its build cache (kept in state_dir/store across "
                       "restarts) is emptied when the daemon starts, before its first job\n", config->name);
        return 0;
}

/* `store mount` (tentaflake-worker-store@NAME.service, before the worker) and `store remove`
 * (uninstall): the generation store's tmpfs, orchestrator/store-tmpfs.h. */
static int verb_store(int argc, char **argv, const Config *config, const char *config_path) {
        (void) config_path;
        if (argc != 2 || (!streq(argv[1], "mount") && !streq(argv[1], "remove")))
                return cli_usage_error("store", argc < 2 ? "missing the subcommand (mount or remove)"
                                                         : "expected one subcommand: mount or remove");
        TfwError e = {0};
        bool made = false;
        _cleanup_close_ int state = root_dir_open("key 'state_dir'", config->state_dir, true, 0, 0, 0700, NULL, &e);
        int r = state;
        if (r >= 0 && streq(argv[1], "remove")) {
                struct stat st;
                if (fstatat(state, "daemon.lock", &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISREG(st.st_mode) &&
                    flock_held(st.st_ino) != 0)
                        r = tfw_error(&e, EBUSY, "daemon_running", "the daemon of worker '%s' runs: stop it first",
                                      config->name);
                else
                        r = store_tmpfs_unmount(state, &e);
        } else if (r >= 0)
                r = store_tmpfs_mount(state, config, &made, &e);
        if (r < 0) {
                log_error("store %s: %s", argv[1], e.message);
                return 1;
        }
        printf("store %s: %s\n", argv[1], streq(argv[1], "remove") ? "the generation store is unmounted and removed"
                                         : made ? "the generation store is mounted on state_dir/store"
                                                : "the generation store was mounted already");
        return 0;
}

static const struct option keygen_options[] = {
        {"out", required_argument, NULL, 'o'},
        {"identity", required_argument, NULL, 'i'},
        {},
};

static int verb_keygen(int argc, char **argv, const Config *config, const char *config_path) {
        const char *out = NULL, *identity = NULL;
        int c;
        (void) config;
        (void) config_path;

        opterr = 0;
        optind = 0; /* 0: glibc re-initialises its scanner for the new argv */
        while ((c = getopt_long(argc, argv, ":", keygen_options, NULL)) != -1) {
                if (c == 'o')
                        out = optarg;
                else if (c == 'i')
                        identity = optarg;
                else if (c == ':')
                        return cli_usage_error("keygen", "option '%s' needs a value", argv[optind - 1]);
                else
                        return cli_usage_error("keygen", "unknown option '%s'", argv[optind - 1]);
        }
        if (optind < argc)
                return cli_usage_error("keygen", "unexpected argument '%s'", argv[optind]);
        if (!out || !identity)
                return cli_usage_error("keygen", "--out FILE and --identity ID are required");
        _cleanup_free_ char *pub = NULL;
        TfwError e = {0};
        if (signing_key_generate(out, identity, &pub, &e) < 0) {
                log_error("keygen: %s", e.message);
                return 1;
        }
        /* The policy snippet that trusts this key: JSON, so jansson quotes the identity. */
        json_t *snippet = json_pack("{s:[{s:s, s:s}]}", "trusted_issuers", "identity", identity, "public_key", pub);
        char *text = snippet ? json_dumps(snippet, JSON_INDENT(2)) : NULL;
        json_decref(snippet);
        if (!text) {
                log_error("keygen '%s': out of memory", out);
                return 1;
        }
        printf("%s\n", text);
        free(text);
        return 0;
}

static int verb_serve(int argc, char **argv, const Config *config, const char *config_path) {
        (void) config;
        (void) config_path;
        return cli_serve(argc, argv);
}

#define CONFIG_OPT                                                                                 \
        "\nRun as root, with the configuration given by --config FILE or --name NAME (before or\n" \
        "after the command), or by $TENTAFLAKE_WORKER_CONFIG.\n"

_Static_assert(CONTROLLER_NO_WORKER_SECONDS == 5, "submit --help says a worker takes a request within 5 s");

const Verb verbs[] = {
        {"run", "run                      inbox daemon: watch the inbox and run jobs",
         "Usage: tentaflake-worker --config FILE run\n\n"
         "Run the inbox daemon for one controller: take requests from\n"
         "<workspace>/.tentaflake-worker/inbox/, apply the action-class policy, run jobs in\n"
         "capsules and publish results. Notifies systemd (Type=notify) when ready.\n" CONFIG_OPT,
         true, verb_run, NULL, run_options, NULL},
        {"drain", "drain                    process the inbox and queue until idle, then exit",
         "Usage: tentaflake-worker --config FILE drain\n\n"
         "Do the daemon's work until the inbox and the queue are empty, then exit\n"
         "(for the path-activated oneshot service).\n" CONFIG_OPT,
         true, verb_run, NULL, run_options, NULL},
        {"approve", "approve ID [--expect-sha256 HEX] [--wait [--timeout SECS]] [--json]",
         "Usage: tentaflake-worker --config FILE approve ID [--expect-sha256 HEX] [--wait [--timeout SECS]] [--json]\n\n"
         "Approve a pending request. It runs from the worker's private copy, captured when it\n"
         "arrived; approval never widens the capsule. A running daemon, or the path unit's\n"
         "drain, starts it. With a build cache (cache.paths) it starts from the cache,\n"
         "read-only: at those paths it sees what local-reversible jobs left there.\n\n"
         "  --expect-sha256 HEX  refuse unless the captured copy has this sha256\n"
         "  --wait               wait for the final result and print its summary; exit 1 at\n"
         "                       once when no worker runs and none can be started\n"
         "  --timeout SECS       give up waiting after SECS (default: the request's timeout\n"
         "                       plus 120 s); the request stays approved\n"
         "  --json               print the decision (and with --wait the result) as JSON\n" CONFIG_OPT,
         true, verb_approve, NULL, approve_options, NULL},
        {"deny", "deny ID [--reason TEXT] [--json]",
         "Usage: tentaflake-worker --config FILE deny ID [--reason TEXT] [--json]\n\n"
         "Deny a pending request; its result says denied, with the reason.\n\n"
         "  --reason TEXT  shown in the request's result\n"
         "  --json         print the decision as JSON\n" CONFIG_OPT,
         true, verb_deny, NULL, deny_options, NULL},
        {"list", "list [--json] [--all]     pending, queued and running requests (also the controller's)",
         "Usage: tentaflake-worker --config FILE list [--json] [--all]\n"
         "       tentaflake-worker list [--workspace DIR] [--results DIR] [--recent N] [--json]\n\n"
         "As root, with a configuration: list the requests still in the inbox (not taken yet),\n"
         "pending, queued and running.\n\n"
         "  --all   add the results still kept (retention_days)\n"
         "  --json  the same as JSON, with the daemon's generation store and build cache\n" CONFIG_OPT
         "\n"
         "As the controller (not root, no --config or --name): this workspace's requests, from\n"
         "what the controller can read: those in its inbox not taken yet (with their class and\n"
         "command), those pending, queued or running (since when), and the most recent results\n"
         "(status, exit code, class, when they ended, the command in short). Exit 0; 1 when the\n"
         "results directory is unknown or cannot be read.\n\n"
         "  --workspace DIR  as for submit; --results DIR  as for submit\n"
         "  --recent N       how many recent results to list (0..100, default 20)\n"
         "  --json           the same as JSON: inbox, active, recent, recent_more, inbox_other\n"
         "See docs/controller.md.\n",
         true, verb_list, verb_list_controller, list_options, list_controller_options},
        {"show", "show ID [--json]         one request: captured copy, sha256, state, result",
         "Usage: tentaflake-worker --config FILE show ID [--json]\n\n"
         "Show the captured request, its sha256, its state, when it expires while pending,\n"
         "and once it ran: start, end, duration, result summary and the paths of its\n"
         "result and log.\n\n"
         "  --json  the record, the captured request and result.json as JSON\n" CONFIG_OPT,
         true, verb_show, NULL, show_options, NULL},
        {"doctor", "doctor [--json]          prove the configured isolation works, live",
         "Usage: tentaflake-worker --config FILE doctor [--json]\n\n"
         "Check the runtime, directories and limits, then run a probe job in a real capsule.\n"
         "Among them, as the controller's uid: the workspace, that the inbox can be written\n"
         "and results_dir read. Exits 1 when any check fails.\n\n"
         "  --json  the checks as a JSON array of {check, ok, detail}\n" CONFIG_OPT,
         true, verb_doctor, NULL, doctor_options, NULL},
        {"gc", "gc [--scheduled] [--json] expire results, rotate the audit log now",
         "Usage: tentaflake-worker --config FILE gc [--scheduled] [--json]\n\n"
         "Expire pending requests older than pending_ttl_hours, remove results and used ids\n"
         "older than retention_days and rotate the audit log.\n\n"
         "  --scheduled  rotate the audit log only when its day is over, as the daemon does\n"
         "               (what tentaflake-worker-gc@NAME.timer runs every hour)\n"
         "  --json       print what was removed and rotated as JSON\n" CONFIG_OPT,
         true, verb_gc, NULL, gc_options, NULL},
        {"audit", "audit verify [--json]    check the audit hash chain",
         "Usage: tentaflake-worker --config FILE audit verify [--json]\n\n"
         "Verify the hash chain of the audit log across its rotated files.\n\n"
         "  --json  the report as JSON (intact, files, lines, sequence numbers, first break)\n" CONFIG_OPT,
         true, verb_audit, NULL, audit_options, NULL},
        {"check-config", "check-config             validate the configuration, create nothing",
         "Usage: tentaflake-worker --config FILE check-config\n\n"
         "Parse the configuration and check the directories it names (state_dir,\n"
         "results_dir: right owner and mode, or not made yet) and the workspace, without\n"
         "creating or changing anything. Exits 1 naming the key when something is wrong.\n" CONFIG_OPT,
         true, verb_check_config, NULL, check_config_options, NULL},
        {"cache", "cache clear              empty the build cache (docs/cache.md)",
         "Usage: tentaflake-worker --config FILE cache clear\n\n"
         "Empty the build cache that local-reversible jobs leave for the next (cache.paths):\n"
         "the running daemon removes it and the next job starts without one; a job running\n"
         "meanwhile keeps nothing. Waits until it is done.\n" CONFIG_OPT,
         true, verb_cache, NULL, NULL, NULL},
        {"store", "store mount|remove       the generation store's tmpfs (docs/snapshot.md)",
         "Usage: tentaflake-worker --config FILE store mount|remove\n\n"
         "The generation store and build cache live in a tmpfs at state_dir/store that outlives\n"
         "the daemon (a restart keeps them; a reboot does not).\n\n"
         "  mount   mount it unless it is there (what tentaflake-worker-store@NAME.service runs\n"
         "          before the daemon; a daemon started by hand mounts it itself)\n"
         "  remove  unmount it and remove its directory (refused while the daemon runs)\n" CONFIG_OPT,
         true, verb_store, NULL, NULL, NULL},
        {"keygen", "keygen --out FILE --identity ID   make an ed25519 signing key",
         "Usage: tentaflake-worker keygen --out FILE --identity ID\n\n"
         "Create an ed25519 signing key (mode 0600, never overwritten) and print the\n"
         "trusted_issuers entry with its public key.\n",
         false, verb_keygen, NULL, keygen_options, NULL},
        {"serve", "serve --server URL --key FILE [flags]   validation plane worker",
         "Usage: tentaflake-worker serve --server URL --key FILE [flags]\n"
         "       tentaflake-worker serve --check [--json] [flags]\n\n"
         "Claim validation jobs from a server, verify the candidate tree, run the check in a\n"
         "capsule and sign an attestation. The token comes from TENTAFLAKE_TOKEN or\n"
         "--token-file, never from the command line.\n\n"
         "  --server URL                    the validation server\n"
         "  --server-socket PATH            reach the server through this unix socket (a\n"
         "                                  local proxy); the URL still names the server\n"
         "  --key FILE                      the ed25519 signing key (keygen)\n"
         "  --token-file FILE               the server's bearer token\n"
         "  --check                         prove serve's walls live and exit (doctor's probes)\n"
         "  --json                          with --check: the checks as JSON\n"
         "  --sandbox runsc|runc|docker|podman  the capsule's driver (default runsc)\n"
         "  --image NAME@sha256:<hex>       docker/podman: the pinned, local image\n"
         "  --engine-runtime NAME           docker/podman: the engine's gVisor runtime\n"
         "  --engine-timeout-secs N         each housekeeping call to docker/podman (60)\n"
         "  --runsc PATH                    the runsc binary (default: found on PATH)\n"
         "  --platform NAME                 runsc --platform (systrap, ptrace)\n"
         "  --label L                       the worker's name towards the server\n"
         "  --concurrency N                 jobs run at once (lanes)\n"
         "  --state-dir DIR                 serve's private state\n"
         "  --warm-secs N                   keep a capsule started ahead N s after a job (60; 0 off)\n"
         "  --max-timeout-secs N            ceilings a job may ask for ...\n"
         "  --max-cpu-secs N\n"
         "  --max-memory-mb N\n"
         "  --max-pids N\n"
         "  --default-timeout-secs N        ... and what a job gets when it asks for nothing\n"
         "  --default-cpu-secs N\n"
         "  --default-memory-mb N\n"
         "  --default-pids N\n"
         "  --output-mb N                   the job's output ceiling\n"
         "  --tmp-mb N                      the capsule's /tmp\n"
         "  --max-checkout-mb N             the candidate tree's ceiling\n"
         "  --result-tail-kb N              the log's tail sent in RESULT (8)\n"
         "  --open-files N                  RLIMIT_NOFILE inside the capsule (1024)\n"
         "  --file-size-mb N                RLIMIT_FSIZE inside the capsule (1024)\n"
         "  --allow-network                 accept policies that ask for network: they get --allow-host's\n"
         "                                  allowlist through the worker's proxy (none without one)\n"
         "  --allow-host HOST:PORT          an allowlist entry: NAME:PORT, *.SUFFIX:PORT, IP:PORT or\n"
         "                                  [IPV6]:PORT (repeatable; needs --allow-network)\n"
         "  --mount HOST[:SANDBOX][=ID]     a read-only mount into the capsule (repeatable)\n"
         "  --no-system-mounts              no default system mounts\n"
         "  --system-mounts-identity ID     the identity of the system mounts in the environment digest\n"
         "  --sandbox-uid N                 the job's uid inside the capsule\n"
         "  --sandbox-gid N                 the job's gid inside the capsule\n"
         "  --lease-secs N                  the lease asked of the server\n"
         "  --wait-secs N                   the long poll for a job\n"
         "  --retry-after-secs N            the pause after an empty poll\n"
         "  --backoff-max-secs N            the longest pause after errors\n"
         "  --client-timeout-secs N         each HTTP request\n"
         "  --shutdown-grace-secs N         how long running jobs may finish at a stop\n"
         "  --log-level error|warning|notice|info|debug   (info)\n"
         "See docs/validation.md.\n",
         false, verb_serve, NULL, serve_options, NULL},
        {"submit", "submit [OPTIONS] -- ARGV...   controller: run a command, wait, take its exit code",
         "Usage: tentaflake-worker submit [--workspace DIR] [--class CLASS] [--timeout S]\n"
         "                                [--reason TEXT] [--id ID] [--wait|--no-wait] [--json]\n"
         "                                [--apply] [--raw] [--wait-timeout S] [--results DIR]\n"
         "                                -- ARGV...\n"
         "       tentaflake-worker submit --cancel ID [--workspace DIR] [--results DIR]\n"
         "                                [--wait-timeout S] [--json]\n"
         "       tentaflake-worker submit --attach ID [--workspace DIR] [--results DIR]\n"
         "                                [--wait-timeout S] [--json] [--apply] [--raw]\n\n"
         "Run by the controller's own user, with no configuration file. Writes one request for\n"
         "ARGV (run without a shell) into <workspace>/.tentaflake-worker/inbox/, refusing at\n"
         "once what the worker would reject, then waits for its result (inotify): the job's\n"
         "output on stdout as it is written (whole lines; a partial line after 1 s; the head of\n"
         "job.log live, the rest at the end, so stdout is job.log, once), its artifacts' paths\n"
         "on stderr, then one line there for each wall of the sandbox the job met (a refused\n"
         "connection, the memory limit, a full /work: the sandbox's decision, and the way\n"
         "out), its exit code as submit's own. A request\n"
         "that needs an operator says so once, with the command that approves it, and waits;\n"
         "one that no worker takes within 5 s says so once, naming the worker and its unit,\n"
         "and waits. The job starts in the current directory's place below the workspace\n"
         "(/work/<cwd>), or in /work from the workspace's root or from outside it. What it\n"
         "changes under /work comes back as a changeset, never written to the workspace by the\n"
         "worker: submit says how many paths changed, and --apply writes them\n"
         "(tentaflake-worker apply ID).\n\n"
         "  --workspace DIR  the workspace (default: the current directory or the nearest\n"
         "                   parent holding .tentaflake-worker/)\n"
         "  --class CLASS    the action class (default local-reversible)\n"
         "  --timeout S      wall-clock limit in seconds (default: the worker's)\n"
         "  --reason TEXT    shown to the operator when approval is needed\n"
         "  --id ID          the request id (default: a fresh one)\n"
         "  --no-wait        print the id and exit 0 once the request is written\n"
         "  --json           print result.json instead of the log and artifacts\n"
         "  --apply          once the job ended by itself, apply its changes (as apply ID does)\n"
         "  --raw            the job's output as it is on a terminal too (by default, on a\n"
         "                   terminal, its control characters, escape sequences, bidi controls\n"
         "                   and invalid UTF-8 are shown as text, \\x1b; and each line submit\n"
         "                   writes on a terminal's stderr starts with a reset and 'tfw' in\n"
         "                   reverse video, which the job's output cannot show)\n"
         "  --wait-timeout S stop waiting after S seconds (default: wait until the result); the\n"
         "                   request stays with the worker, submit says where it is, exit 125\n"
         "  --results DIR    the results directory (default: from .tentaflake-worker/worker.json)\n"
         "  --cancel ID      stop request ID of this workspace instead: withdraw it while pending,\n"
         "                   drop it while queued, end its capsule while it runs (as a timeout\n"
         "                   would); waits for its result (--wait-timeout, default 120 s): exit 0\n"
         "                   when it ended cancelled, 1 when it had ended, ended first, is no\n"
         "                   request of this workspace, or the worker refused the cancel\n"
         "  --attach ID      follow request ID of this workspace instead of submitting one (one\n"
         "                   sent with --no-wait, or by another submit): its state while pending\n"
         "                   or queued, its output while it runs, its result and exit status as\n"
         "                   submit gives them; an id of no request of this workspace: 125\n"
         "                   (tentaflake-worker list, as the controller, shows this workspace's\n"
         "                   requests and their ids)\n\n"
         "Exit status: the job's exit code; 124 timed out; 128+N killed by signal N; 2 usage\n"
         "error; 125 when the result is one of\n"
         "  " CONTROLLER_EXIT_NOT_RUN_STATUSES "\n"
         "(rejected by the worker, or by submit before writing), or when\n"
         "  " CONTROLLER_EXIT_NOT_RUN_SUBMIT ".\n"
         "See docs/controller.md.\n",
         false, verb_submit, NULL, submit_options, NULL},
        {"apply", "apply ID [--dry-run] [--diff] [--allow-git] [--workspace DIR] [--results DIR]   controller: write a job's changes into the workspace",
         "Usage: tentaflake-worker apply [--workspace DIR] [--results DIR] [--dry-run] [--diff]\n"
         "                               [--allow-git] ID\n\n"
         "Run by the controller's own user: write the changeset of request ID (RESULTS/ID/\n"
         "changes.json and changes/) into the workspace. The whole changeset or nothing: it is\n"
         "refused when it is incomplete; when a path has a component named .git at any depth,\n"
         "changes a .gitmodules, writes a gitdir or commondir file, or changes anything in a\n"
         "directory that git would take for a repository after it (a HEAD beside objects/ and\n"
         "refs/, or beside a commondir, counting what the workspace holds): a job must not plant\n"
         "a hook or a config your git would run; when a path has a component named\n"
         ".tentaflake-worker or a harness's settings (.claude, .codex, .mcp.json: hooks and MCP\n"
         "servers run on the host); or when any path no longer holds the version the job was given.\n"
         "Names are compared as a case-insensitive or normalising file system takes them (.GIT,\n"
         ".git., GIT~1 count as .git). Each refusal and each conflict names the path and the\n"
         "rule. Every name is resolved below the workspace without following a link; each\n"
         "file is written to a new file, checked against its id, and renamed into place.\n\n"
         "  --dry-run        say what would change, write nothing\n"
         "  --diff           show a unified diff of each file (the system's diff)\n"
         "  --allow-git      take what the git rules refuse too (never .tentaflake-worker)\n"
         "  --workspace DIR  as for submit; --results DIR  as for submit\n\n"
         "Exit status: 0 applied (or, with --dry-run, applicable); 1 refused or failed; 2 usage\n"
         "error. See docs/controller.md.\n",
         false, verb_apply, NULL, apply_options, NULL},
        {"mcp", "mcp [--workspace DIR] [--results DIR]   controller: MCP server on stdio (tools run, result, list, apply, cancel)",
         "Usage: tentaflake-worker mcp [--workspace DIR] [--results DIR]\n\n"
         "A Model Context Protocol server on stdin/stdout (JSON-RPC 2.0, one message per line),\n"
         "run by the controller's own user, with no configuration file. Tools:\n"
         "  run     argv, action_class, timeout_seconds, reason, cwd, id, wait_seconds, apply:\n"
         "          run a command in a capsule (in /work/<cwd>; cwd defaults to this server's\n"
         "          directory in the workspace) and answer with its outcome (status, exit code,\n"
         "          log tail, artifact paths, what it changed; with apply: true, applied); a\n"
         "          request that needs an operator answers at once with its id and the\n"
         "          approve command\n"
         "  result  id, wait_seconds, offset: the outcome of a request, or where it is; for a\n"
         "          running job its output so far from byte offset on\n"
         "  list    recent: pending, queued, running and recent requests of this workspace\n"
         "  apply   id, dry_run: a request's changes into the workspace (as apply; never a .git)\n"
         "  cancel  id: stop a request of this workspace, as submit does with its cancel\n"
         "With a client of protocol 2025-11-25 or later (or one declaring the tasks capability),\n"
         "run may be called as a task: it answers at once with the task (its id is the request's),\n"
         "and tasks/get, tasks/result, tasks/cancel and tasks/list follow it, also from a new\n"
         "server after the client went away (the job runs on).\n"
         "The instructions and run's description say what worker.json says a job gets\n"
         "(network, limits, build cache, changes); run answers with the words submit prints\n"
         "when no worker takes its request within 5 s.\n\n"
         "  --workspace DIR  as for submit; --results DIR  as for submit\n\n"
         "Register it with a harness, e.g. `claude mcp add tentaflake -- tentaflake-worker mcp`\n"
         "(docs/controller.md). Exits 0 at end of input.\n",
         false, verb_mcp, NULL, mcp_options, NULL},
                 {"shell", "shell [OPTIONS] -c STRING | -- ARGV...   controller: a shell whose commands run in capsules",
         "Usage: tentaflake-worker shell [--apply auto|review] [--timeout S] [--workspace DIR]\n"
         "                              [--results DIR] -c STRING\n"
         "       tentaflake-worker shell [OPTIONS] -- ARGV...\n\n"
         "submit shaped as a shell, for a harness's shell prefix (Claude Code's\n"
         "CLAUDE_CODE_SHELL_PREFIX; tentaflake-worker harness writes it: tentaflake-worker-shell\n"
         "STRING, this program under that name, is shell -c STRING with --apply from\n"
         "TENTAFLAKE_SHELL_APPLY, auto or review, auto when unset). Run by the controller's\n"
         "own user: STRING runs in a capsule as `sh -c STRING` (Claude Code's Bash-tool string,\n"
         "which is bash's, as `bash -c`), ARGV as it is, from the current directory's place\n"
         "below the workspace; the job's output on stdout as it is written, its exit status as\n"
         "shell's own. Claude Code's Bash-tool string keeps working: its last step, writing its\n"
         "directory into its cwd file under /tmp, writes the host's path of the directory the job\n"
         "ended in (one the workspace holds, reached without a link). The string that is exactly this\n"
         "program's path and `mcp` (the worker's own MCP server, started through the prefix)\n"
         "runs here, unwrapped; nothing else does. SIGTERM, SIGINT or SIGHUP (a harness giving\n"
         "up on the command) cancels the job, as submit's cancel does. On a terminal the job's\n"
         "output is escaped and shell's own lines marked, as submit's (for the bytes as they are, pipe it).\n\n"
         "  --apply auto     once the job ended by itself, apply its changes (the default)\n"
         "  --apply review   leave them in the result, said in one line (apply ID takes them)\n"
         "  --timeout S      wall-clock limit in seconds (default: the worker's)\n"
         "  --workspace DIR  as for submit; --results DIR  as for submit\n\n"
         "Exit status: as submit's: the job's exit code; 124 timed out; 128+N killed by signal N\n"
         "(or shell itself stopped by it); 125 not run, or its changes could not be applied; 2\n"
         "usage error. See\n"
         "docs/controller.md, \"Make the worker the agent's only shell\".\n",
         false, verb_shell, NULL, shell_options, NULL},
        {"harness", "harness claude-code|codex [OPTIONS]   controller: route a harness through the worker",
         "Usage: tentaflake-worker harness claude-code [--apply auto|review] [--dry-run] [--remove]\n"
         "                                [--prefix-program PATH] [--workspace DIR]\n"
         "       tentaflake-worker harness codex [--dry-run] [--remove] [--workspace DIR]\n\n"
         "Run by the controller in its workspace: write the harness's project settings that\n"
         "register the worker's MCP server and take the harness's own shell off the host, and\n"
         "say what changed. claude-code: .mcp.json (mcpServers.tentaflake-worker: this program's\n"
         "mcp) and .claude/settings.json (env.CLAUDE_CODE_SHELL_PREFIX: tentaflake-worker-shell,\n"
         "this program under that name, which runs shell; env.TENTAFLAKE_SHELL_APPLY: the --apply\n"
         "below; enabledMcpjsonServers; permissions.deny: Edit rules that keep Claude Code's file\n"
         "tools off these settings and .tentaflake-worker/harness/); every command of its Bash\n"
         "tool, its shell-form hooks and its MCP servers start through shell. The prefix must be a\n"
         "program only root can change (root's, in directories only root can write), or the\n"
         "agent's own file tools could rewrite it: make install and the package link it beside\n"
         "this program; without one, harness claude-code is refused. codex: .codex/config.toml (one marked block: [mcp_servers.tentaflake-worker] and\n"
         "[features] shell_tool = false: Codex has no shell prefix, so its shell is switched off).\n"
         "JSON is merged, other keys kept; the originals are kept in .tentaflake-worker/harness/.\n\n"
         "  --apply auto|review  what the prefix does with a job's changes (claude-code; auto)\n"
         "  --prefix-program PATH  the prefix, an absolute path ending in tentaflake-worker-shell\n"
         "                       (default: the one beside this program), checked as above\n"
         "  --dry-run            print each file as it would be, write nothing\n"
         "  --remove             put the files back as they were, byte for byte (only this\n"
         "                       program's keys taken out of a file changed since)\n"
         "  --workspace DIR      as for submit\n\n"
         "Exit status: 0 done; 1 refused or failed (nothing of that file changed); 2 usage error.\n"
         "See docs/controller.md, \"Make the worker the agent's only shell\".\n",
         false, verb_harness, NULL, harness_options, NULL},
        {},
};
