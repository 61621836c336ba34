/* SPDX-License-Identifier: MIT */
/* `tentaflake-worker serve`'s command line: flags, their checks and corrections, usage errors
 * and exit codes, and the token (never from argv). validation/serve.c runs the worker. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/cli.h"
#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/log.h"
#include "common/macro.h"
#include "parser/config.h"
#include "orchestrator/doctor.h"
#include "parser/egress-allow.h"
#include "validation/serve.h"


enum {
        OPT_SERVER = 1000, OPT_KEY, OPT_TOKEN_FILE, OPT_LABEL, OPT_CONCURRENCY, OPT_SANDBOX, OPT_MAX_TIMEOUT,
        OPT_MAX_MEMORY, OPT_MAX_CPU, OPT_MAX_PIDS, OPT_DEF_TIMEOUT, OPT_DEF_MEMORY, OPT_DEF_PIDS, OPT_DEF_CPU,
        OPT_OUTPUT, OPT_TMP, OPT_ALLOW_NET, OPT_MOUNT, OPT_NO_SYS, OPT_SYS_ID, OPT_LEASE, OPT_WAIT, OPT_RETRY,
        OPT_BACKOFF, OPT_CLIENT_TIMEOUT, OPT_MAX_CHECKOUT, OPT_GRACE, OPT_WARM, OPT_STATE_DIR, OPT_RUNSC, OPT_PLATFORM,
        OPT_UID, OPT_GID, OPT_TOKEN, OPT_IMAGE, OPT_ENGINE_RUNTIME, OPT_TAIL, OPT_NOFILE, OPT_FSIZE,
        OPT_ENGINE_TIMEOUT, OPT_LOG_LEVEL, OPT_CHECK, OPT_JSON, OPT_SERVER_SOCKET, OPT_ALLOW_HOST,
};

/* `serve --check [--json]`: the live proof of serve's walls instead of serving. */
static bool check_mode, check_json;

const struct option serve_options[] = {
        {"server", required_argument, NULL, OPT_SERVER},
        {"key", required_argument, NULL, OPT_KEY},
        {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
        {"token", required_argument, NULL, OPT_TOKEN},
        {"label", required_argument, NULL, OPT_LABEL},
        {"concurrency", required_argument, NULL, OPT_CONCURRENCY},
        {"sandbox", required_argument, NULL, OPT_SANDBOX},
        {"max-timeout-secs", required_argument, NULL, OPT_MAX_TIMEOUT},
        {"max-memory-mb", required_argument, NULL, OPT_MAX_MEMORY},
        {"max-cpu-secs", required_argument, NULL, OPT_MAX_CPU},
        {"max-pids", required_argument, NULL, OPT_MAX_PIDS},
        {"default-timeout-secs", required_argument, NULL, OPT_DEF_TIMEOUT},
        {"default-memory-mb", required_argument, NULL, OPT_DEF_MEMORY},
        {"default-pids", required_argument, NULL, OPT_DEF_PIDS},
        {"default-cpu-secs", required_argument, NULL, OPT_DEF_CPU},
        {"output-mb", required_argument, NULL, OPT_OUTPUT},
        {"tmp-mb", required_argument, NULL, OPT_TMP},
        {"allow-network", no_argument, NULL, OPT_ALLOW_NET},
        {"allow-host", required_argument, NULL, OPT_ALLOW_HOST},
        {"mount", required_argument, NULL, OPT_MOUNT},
        {"no-system-mounts", no_argument, NULL, OPT_NO_SYS},
        {"system-mounts-identity", required_argument, NULL, OPT_SYS_ID},
        {"lease-secs", required_argument, NULL, OPT_LEASE},
        {"wait-secs", required_argument, NULL, OPT_WAIT},
        {"retry-after-secs", required_argument, NULL, OPT_RETRY},
        {"backoff-max-secs", required_argument, NULL, OPT_BACKOFF},
        {"client-timeout-secs", required_argument, NULL, OPT_CLIENT_TIMEOUT},
        {"max-checkout-mb", required_argument, NULL, OPT_MAX_CHECKOUT},
        {"shutdown-grace-secs", required_argument, NULL, OPT_GRACE},
        {"warm-secs", required_argument, NULL, OPT_WARM},
        {"state-dir", required_argument, NULL, OPT_STATE_DIR},
        {"runsc", required_argument, NULL, OPT_RUNSC},
        {"platform", required_argument, NULL, OPT_PLATFORM},
        {"sandbox-uid", required_argument, NULL, OPT_UID},
        {"sandbox-gid", required_argument, NULL, OPT_GID},
        {"image", required_argument, NULL, OPT_IMAGE},
        {"engine-runtime", required_argument, NULL, OPT_ENGINE_RUNTIME},
        {"result-tail-kb", required_argument, NULL, OPT_TAIL},
        {"open-files", required_argument, NULL, OPT_NOFILE},
        {"file-size-mb", required_argument, NULL, OPT_FSIZE},
        {"engine-timeout-secs", required_argument, NULL, OPT_ENGINE_TIMEOUT},
        {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
        {"check", no_argument, NULL, OPT_CHECK},
        {"server-socket", required_argument, NULL, OPT_SERVER_SOCKET},
        {"json", no_argument, NULL, OPT_JSON},
        {},
};

static int cli_like_usage(const char *fmt, ...) _printf_(1, 2);
static int cli_like_usage(const char *fmt, ...) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        log_error("serve: %s", msg);
        return -EINVAL;
}

static int parse_long(const char *flag, const char *v, long *ret) {
        char *end = NULL;
        errno = 0;
        long x = strtol(v, &end, 10);
        if (errno || !end || *end || end == v)
                return cli_like_usage("'%s' is not a number for --%s", v, flag);
        *ret = x;
        return 0;
}

/* Values out of range are corrected with a warning (as the CI worker page says). */
static void clamp(const char *flag, long *v, long lo, long hi) {
        if (*v < lo || *v > hi) {
                long c = *v < lo ? lo : hi;
                log_warning("serve: --%s %ld is out of range %ld..%ld, using %ld", flag, *v, lo, hi, c);
                *v = c;
        }
}

/* --log-level NAME: the journal's level names, as the daemon's configuration takes them. */
static int parse_log_level(const char *v) {
        static const struct { const char *name; int level; } levels[] = {
                {"error", LOG_ERR}, {"warning", LOG_WARNING}, {"notice", LOG_NOTICE},
                {"info", LOG_INFO}, {"debug", LOG_DEBUG},
        };
        int level = -1;
        for (size_t i = 0; i < ELEMENTSOF(levels); i++)
                if (streq(v, levels[i].name))
                        level = levels[i].level;
        if (level < 0)
                return cli_like_usage("--log-level must be error, warning, notice, info or debug, not '%s'", v);
        log_set_max_level(level);
        return 0;
}

/* What no flag says alone: the flags that go together, the sandbox's own, the allowlist. */
static int check_options(ServeOptions *o) {
        if (!o->server || !o->key)
                return cli_like_usage("--server URL and --key FILE are required");
        if (strncmp(o->server, "http://", 7) != 0 && strncmp(o->server, "https://", 8) != 0)
                return cli_like_usage("--server '%s' must be an http:// or https:// URL", o->server);
        if (o->server_socket && o->server_socket[0] != '/')
                return cli_like_usage("--server-socket '%s' must be an absolute path", o->server_socket);
        bool bundle = streq(o->sandbox, "runsc") || streq(o->sandbox, "runc");
        if (!bundle && !streq(o->sandbox, "docker") && !streq(o->sandbox, "podman"))
                return cli_like_usage("--sandbox must be runsc, runc, docker or podman");
        if (streq(o->sandbox, "runc") && (o->runsc || o->platform))
                return cli_like_usage("--runsc and --platform are gVisor's; --sandbox runc runs the job on the host's "
                                      "kernel");
        if (bundle) {
                if (o->image || o->engine_runtime)
                        return cli_like_usage("--image and --engine-runtime are for --sandbox docker or podman");
        } else {
                /* The image is the root: nothing of the host is mounted but the tree and init. */
                if (!o->image)
                        return cli_like_usage("--sandbox %s needs --image NAME@sha256:<digest> (already in the "
                                              "engine's local store; never pulled)",
                                              o->sandbox);
                if (o->n_mounts || o->system_mounts_identity || o->runsc || o->platform)
                        return cli_like_usage("--mount, --system-mounts-identity, --runsc and --platform are for "
                                              "--sandbox runsc; with %s the image is the root",
                                              o->sandbox);
        }
        /* Egress is asked for twice on purpose: --allow-network lets a policy ask, --allow-host says
         * where it may go; each entry is checked by the config's rule (the walls' parser). */
        if (o->n_allow_hosts && !o->allow_network)
                return cli_like_usage("--allow-host needs --allow-network (without it no policy gets network)");
        for (size_t i = 0; i < o->n_allow_hosts; i++) {
                EgressAllow rule;
                const char *why = NULL;
                if (egress_allow_parse(o->allow_hosts[i], &rule, &why) < 0)
                        return cli_like_usage("--allow-host '%s': %s", o->allow_hosts[i], why);
        }
        if (o->n_allow_hosts && !bundle)
                return cli_like_usage("--allow-host is for --sandbox runsc or runc: the worker passes the proxy's "
                                      "streams to the runtime itself, which an engine cannot");
        if (!o->platform && streq(o->sandbox, "runsc"))
                o->platform = CONFIG_DEFAULT_PLATFORM;
        return 0;
}

static void clamp_options(ServeOptions *o) {
        clamp("concurrency", &o->concurrency, 1, 64);
        clamp("lease-secs", &o->lease_secs, 5, 3600);
        clamp("wait-secs", &o->wait_secs, 0, 30);
        clamp("retry-after-secs", &o->retry_after_secs, 0, 86400);
        clamp("backoff-max-secs", &o->backoff_max_secs, 1, 3600);
        clamp("client-timeout-secs", &o->client_timeout_secs, 5, 3600);
        clamp("shutdown-grace-secs", &o->shutdown_grace_secs, 1, 3600);
        clamp("warm-secs", &o->warm_secs, 0, CONFIG_WARM_SECONDS_MAX);
        clamp("max-timeout-secs", &o->max_timeout_secs, 1, 604800);
        clamp("max-memory-mb", &o->max_memory_mb, 16, 1 << 20);
        clamp("max-cpu-secs", &o->max_cpu_secs, 1, 604800);
        clamp("max-pids", &o->max_pids, 8, 4194304);
        clamp("default-timeout-secs", &o->default_timeout_secs, 1, o->max_timeout_secs);
        clamp("default-memory-mb", &o->default_memory_mb, 16, o->max_memory_mb);
        clamp("default-pids", &o->default_pids, 8, o->max_pids);
        clamp("default-cpu-secs", &o->default_cpu_secs, 1, o->max_cpu_secs);
        clamp("output-mb", &o->output_mb, 1, 1024);
        clamp("tmp-mb", &o->tmp_mb, 1, 1 << 20);
        clamp("max-checkout-mb", &o->max_checkout_mb, 1, 1 << 20);
        clamp("sandbox-uid", &o->sandbox_uid, 1, 4294967294L);
        clamp("sandbox-gid", &o->sandbox_gid, 1, 4294967294L);
        clamp("result-tail-kb", &o->result_tail_kb, 0, 1024);
        clamp("open-files", &o->open_files, 64, 1048576);
        clamp("file-size-mb", &o->file_size_mb, 1, 1 << 20);
        clamp("engine-timeout-secs", &o->engine_timeout_secs, 5, 3600);
}

static int parse_options(int argc, char **argv, ServeOptions *o) {
        int c;
        long *target;
        const char *flag;

        serve_options_default(o);
        opterr = 0;
        optind = 0;
        while ((c = getopt_long(argc, argv, ":", serve_options, NULL)) != -1) {
                target = NULL;
                flag = NULL;
                for (const struct option *x = serve_options; x->name; x++)
                        if (x->val == c)
                                flag = x->name;
                switch (c) {
                case OPT_SERVER: o->server = optarg; break;
                case OPT_KEY: o->key = optarg; break;
                case OPT_TOKEN_FILE: o->token_file = optarg; break;
                case OPT_CHECK: check_mode = true; break;
                case OPT_SERVER_SOCKET: o->server_socket = optarg; break;
                case OPT_JSON: check_json = true; break;
                case OPT_TOKEN:
                        return cli_like_usage("the token is never taken from the command line: use TENTAFLAKE_TOKEN or --token-file");
                case OPT_LABEL: o->label = optarg; break;
                case OPT_SANDBOX: o->sandbox = optarg; break;
                case OPT_STATE_DIR: o->state_dir = optarg; break;
                case OPT_RUNSC: o->runsc = optarg; break;
                case OPT_PLATFORM: o->platform = optarg; break;
                case OPT_IMAGE: o->image = optarg; break;
                case OPT_ENGINE_RUNTIME: o->engine_runtime = optarg; break;
                case OPT_ALLOW_NET: o->allow_network = true; break;
                case OPT_NO_SYS: o->no_system_mounts = true; break;
                case OPT_SYS_ID: o->system_mounts_identity = optarg; break;
                case OPT_ALLOW_HOST:
                        if (o->n_allow_hosts >= SERVE_MAX_ALLOW_HOSTS)
                                return cli_like_usage("at most %d --allow-host", SERVE_MAX_ALLOW_HOSTS);
                        o->allow_hosts[o->n_allow_hosts++] = optarg;
                        break;
                case OPT_MOUNT:
                        if (o->n_mounts >= SERVE_MAX_MOUNTS)
                                return cli_like_usage("at most %d --mount", SERVE_MAX_MOUNTS);
                        o->mounts[o->n_mounts++] = optarg;
                        break;
                case OPT_CONCURRENCY: target = &o->concurrency; break;
                case OPT_MAX_TIMEOUT: target = &o->max_timeout_secs; break;
                case OPT_MAX_MEMORY: target = &o->max_memory_mb; break;
                case OPT_MAX_CPU: target = &o->max_cpu_secs; break;
                case OPT_MAX_PIDS: target = &o->max_pids; break;
                case OPT_DEF_TIMEOUT: target = &o->default_timeout_secs; break;
                case OPT_DEF_MEMORY: target = &o->default_memory_mb; break;
                case OPT_DEF_PIDS: target = &o->default_pids; break;
                case OPT_DEF_CPU: target = &o->default_cpu_secs; break;
                case OPT_OUTPUT: target = &o->output_mb; break;
                case OPT_TMP: target = &o->tmp_mb; break;
                case OPT_LEASE: target = &o->lease_secs; break;
                case OPT_WAIT: target = &o->wait_secs; break;
                case OPT_RETRY: target = &o->retry_after_secs; break;
                case OPT_BACKOFF: target = &o->backoff_max_secs; break;
                case OPT_CLIENT_TIMEOUT: target = &o->client_timeout_secs; break;
                case OPT_MAX_CHECKOUT: target = &o->max_checkout_mb; break;
                case OPT_GRACE: target = &o->shutdown_grace_secs; break;
                case OPT_WARM: target = &o->warm_secs; break;
                case OPT_UID: target = &o->sandbox_uid; break;
                case OPT_TAIL: target = &o->result_tail_kb; break;
                case OPT_NOFILE: target = &o->open_files; break;
                case OPT_FSIZE: target = &o->file_size_mb; break;
                case OPT_ENGINE_TIMEOUT: target = &o->engine_timeout_secs; break;
                case OPT_LOG_LEVEL:
                        if (parse_log_level(optarg) < 0)
                                return -EINVAL;
                        break;
                case OPT_GID: target = &o->sandbox_gid; break;
                case ':': return cli_like_usage("option '%s' needs a value", argv[optind - 1]);
                default: return cli_like_usage("unknown option '%s'", argv[optind - 1]);
                }
                if (target && parse_long(flag, optarg, target) < 0)
                        return -EINVAL;
        }
        if (optind < argc)
                return cli_like_usage("unexpected argument '%s'", argv[optind]);
        if (check_options(o) < 0)
                return -EINVAL;
        clamp_options(o);
        return 0;
}

static int read_token(const ServeOptions *o, char **ret) {
        const char *env = getenv("TENTAFLAKE_TOKEN");
        char *t = NULL;
        size_t n = 0;
        if (o->token_file) {
                _cleanup_close_ int fd = open(o->token_file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
                struct stat st;
                if (fd < 0)
                        return log_error_errno(-errno, "serve: --token-file '%s': %m", o->token_file);
                if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                        return log_error_errno(-EINVAL, "serve: --token-file '%s' is not a regular file", o->token_file);
                int r = read_full_fd_bounded(fd, SERVE_TOKEN_MAX, &t, &n);
                if (r < 0)
                        return log_error_errno(r, "serve: --token-file '%s' cannot be read", o->token_file);
        } else if (env) {
                t = strdup(env);
                if (!t)
                        return -ENOMEM;
                n = strlen(t);
        } else
                return log_error_errno(-EINVAL, "serve: no token: set TENTAFLAKE_TOKEN or --token-file");
        while (n > 0 && (t[n - 1] == '\n' || t[n - 1] == '\r' || t[n - 1] == ' '))
                t[--n] = 0;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) t[i] <= ' ' || (unsigned char) t[i] >= 0x7f) {
                        explicit_bzero(t, n);
                        free(t);
                        return log_error_errno(-EINVAL, "serve: the token has characters a header cannot carry");
                }
        if (n == 0) {
                free(t);
                return log_error_errno(-EINVAL, "serve: the token is empty");
        }
        *ret = t;
        return 0;
}

/* The key file: a regular file, root's, readable by nobody else. */
static void check_key_file(const char *path, DoctorLine *l) {
        struct stat st;
        l->check = "key";
        if (stat(path, &st) < 0) {
                snprintf(l->detail, sizeof(l->detail), "--key '%s': %s", path, strerror(errno));
                return;
        }
        if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 0077)) {
                snprintf(l->detail, sizeof(l->detail), "--key '%s' must be a regular file of root's with mode 0600 "
                         "(it is %u:%u %04o)", path, (unsigned) st.st_uid, (unsigned) st.st_gid,
                         (unsigned) (st.st_mode & 07777));
                return;
        }
        l->ok = true;
        snprintf(l->detail, sizeof(l->detail), "'%s' is root's, mode %04o", path, (unsigned) (st.st_mode & 07777));
}

/* serve --check: the same live proof as the inbox doctor, on serve's walls, with the key, the
 * token and the mounts' identities. Exit 1 on any ✗. */
static int serve_check(ServeOptions *o) {
        DoctorLine lines[5] = {0};
        size_t n = 0;
        ServeWalls w;
        TfwError e = {0};
        char *token = NULL;

        check_key_file(o->key, &lines[n++]);
        if (read_token(o, &token) >= 0) {
                lines[n] = (DoctorLine){.check = "token", .ok = true};
                snprintf(lines[n].detail, sizeof(lines[n].detail), "present (%zu bytes, from %s)", strlen(token),
                         o->token_file ? o->token_file : "TENTAFLAKE_TOKEN");
                explicit_bzero(token, strlen(token));
                free(token);
        } else {
                lines[n] = (DoctorLine){.check = "token"};
                snprintf(lines[n].detail, sizeof(lines[n].detail), "no usable token: set TENTAFLAKE_TOKEN or --token-file");
        }
        n++;
        (void) unsetenv("TENTAFLAKE_TOKEN");
        int r = serve_walls_load(o, &w, &e);
        lines[n] = (DoctorLine){.check = "walls", .ok = r >= 0};
        snprintf(lines[n].detail, sizeof(lines[n].detail), "%s",
                 r >= 0 ? "the key loads and the flags make a valid worker config" : e.message);
        n++;
        if (r < 0) {
                /* No walls to probe: the findings so far, then exit 1. */
                _cleanup_json_ json_t *arr = json_array();
                for (size_t i = 0; i < n; i++) {
                        if (check_json)
                                json_array_append_new(arr, json_pack("{s:s, s:b, s:s}", "check", lines[i].check, "ok",
                                                                     lines[i].ok, "detail", lines[i].detail));
                        else
                                printf("%s %s: %s\n", lines[i].ok ? "✓" : "✗", lines[i].check, lines[i].detail);
                }
                if (check_json) {
                        _cleanup_free_ char *text = json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
                        printf("%s\n", text ? text : "[]");
                }
                return EXIT_FAILURE;
        }
        /* The mounts whose identity is their host path: the digest cannot tell two hosts apart. */
        char list[900] = "";
        size_t without = 0;
        for (size_t i = 0; i < w.config->n_system_mounts; i++)
                if (!w.config->system_mounts[i].identity) {
                        size_t k = strlen(list);
                        snprintf(list + k, sizeof(list) - k, "%s%s", without ? ", " : "", w.config->system_mounts[i].host);
                        without++;
                }
        lines[n] = (DoctorLine){.check = "mount_identities", .ok = true};
        if (without)
                snprintf(lines[n].detail, sizeof(lines[n].detail),
                         "%zu mount(s) without an identity (the digest records their host paths): %s", without, list);
        else
                snprintf(lines[n].detail, sizeof(lines[n].detail), "every mount carries an identity");
        n++;
        DoctorOptions dopt = {
                .json = check_json, .inbox_dirs = false, .engine_runtime = o->engine_runtime, .lines = lines, .n_lines = n,
        };
        r = doctor_run_with(w.config, &dopt, stdout);
        serve_walls_done(&w);
        if (r < 0) {
                log_error("serve --check: %s", strerror(-r));
                return EXIT_FAILURE;
        }
        return r == 0 ? 0 : EXIT_FAILURE;
}

int cli_serve(int argc, char **argv) {
        ServeOptions o;
        TfwError e = {0};
        char *token = NULL;
        int r;

        if (parse_options(argc, argv, &o) < 0)
                return EXIT_USAGE;
        o.report = cli_report_line;
        if (check_mode)
                return serve_check(&o);
        if (check_json)
                return cli_usage_error("serve", "--json goes with --check");
        /* The token never comes from argv, and the environment variable is removed so no child
         * (runsc, env(1) in a capsule) could inherit it. */
        if (read_token(&o, &token) < 0)
                return EXIT_FAILURE;
        (void) unsetenv("TENTAFLAKE_TOKEN");
        r = serve_run(&o, token, &e);
        explicit_bzero(token, strlen(token));
        free(token);
        if (r < 0) {
                log_error("serve: %s", e.message[0] ? e.message : strerror(-r));
                return e.code && streq(e.code, "usage") ? EXIT_USAGE : EXIT_FAILURE;
        }
        return 0;
}
