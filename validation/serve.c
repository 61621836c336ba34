/* SPDX-License-Identifier: MIT */
/* `tentaflake-worker serve` (contract section 8; threats 7 and 11). docs/validation.md has the
 * design; in short, per lane (thread): claim -> refuse what this worker must not run -> fetch
 * and verify the manifest -> fetch, hash-check and materialise every blob -> run argv in the
 * same capsule as the inbox plane, a heartbeat thread keeping the lease alive -> sign pass
 * (exit 0) or fail (every other ending of the check) -> complete. Worker faults fail the job
 * with a retry delay and sign nothing; a tree that can never be materialised fails
 * permanently; stale completes without an attestation; a lost lease kills the check and drops
 * the result; 401/403 stops the worker.
 *
 * The token and the key stay in this process: the capsule gets neither (its environment is
 * the constant one plus the policy's env, its mounts are the system mounts, which the config
 * parser refuses to overlap the key, and runsc gets no fd of ours). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capsule/init-path.h"
#include "capsule/job.h"
#include "capsule/docker.h"
#include "capsule/runsc.h"
#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/log.h"
#include "common/path-util.h"
#include "artifacts/attest.h"
#include "validation/checkout.h"
#include "artifacts/envdigest.h"
#include "validation/http.h"
#include "validation/job.h"
#include "validation/serve.h"
#include "artifacts/signing.h"

#include <systemd/sd-daemon.h>

#define TOKEN_MAX 4096
#define MAX_MOUNTS 32
#define LOG_TAIL_BYTES 8192

typedef struct Options {
        const char *server, *key, *token_file, *label, *sandbox, *state_dir, *runsc, *platform;
        const char *image, *engine_runtime; /* --sandbox docker|podman */
        const char *server_socket;          /* issue 13: --server-socket (the unit's proxy) */
        const char *mounts[MAX_MOUNTS];
        size_t n_mounts;
        bool no_system_mounts, allow_network;
        const char *system_mounts_identity;
        long concurrency;
        long max_timeout_secs, max_memory_mb, max_cpu_secs, max_pids;
        long default_timeout_secs, default_memory_mb, default_pids, default_cpu_secs;
        long output_mb, tmp_mb, lease_secs, wait_secs, retry_after_secs, backoff_max_secs, client_timeout_secs;
        long max_checkout_mb, shutdown_grace_secs;
        long sandbox_uid, sandbox_gid;
} Options;

typedef struct Serve {
        Options o;
        char *token;         /* sodium-free: plain heap, wiped at exit */
        SigningKey *key;
        char *key_path;
        Config *config;      /* the walls, built from the flags */
        char name[CONFIG_NAME_MAX + 1];
        char init_path[PATH_MAX];
        char scratch_path[PATH_MAX];
        int scratch_fd;
        int lock_fd;         /* flock on <state_dir>/serve.lock, held until exit */
        char runsc_root[PATH_MAX];
        char runtime_version[1024];
        atomic_int stopping;  /* 1: finish current jobs; 2: kill them */
        atomic_int fatal;     /* a lane hit 401/403 or another fatal error */
        atomic_bool ready_sent; /* issue 13: READY=1 went to systemd (the first claim is under way) */
        char fatal_message[2600];
        pthread_mutex_t lock;
        pthread_cond_t cond;  /* signalled on stop */
} Serve;

static Serve *the_serve;

/* ---- small helpers ------------------------------------------------------------------------ */

static void set_fatal(Serve *s, const char *msg) {
        pthread_mutex_lock(&s->lock);
        if (!atomic_load(&s->fatal)) {
                snprintf(s->fatal_message, sizeof(s->fatal_message), "%s", msg);
                atomic_store(&s->fatal, 1);
        }
        if (atomic_load(&s->stopping) < 1)
                atomic_store(&s->stopping, 1);
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
}

/* Wait up to secs or until stop is requested. Returns true when stopping. */
static bool wait_or_stop(Serve *s, double secs) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += (time_t) secs;
        ts.tv_nsec += (long) ((secs - (double) (long) secs) * 1e9);
        if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&s->lock);
        while (!atomic_load(&s->stopping))
                if (pthread_cond_timedwait(&s->cond, &s->lock, &ts) == ETIMEDOUT)
                        break;
        pthread_mutex_unlock(&s->lock);
        return atomic_load(&s->stopping) > 0;
}




/* ---- flags ---------------------------------------------------------------------------------- */

enum {
        OPT_SERVER = 1000, OPT_KEY, OPT_TOKEN_FILE, OPT_LABEL, OPT_CONCURRENCY, OPT_SANDBOX, OPT_MAX_TIMEOUT,
        OPT_MAX_MEMORY, OPT_MAX_CPU, OPT_MAX_PIDS, OPT_DEF_TIMEOUT, OPT_DEF_MEMORY, OPT_DEF_PIDS, OPT_DEF_CPU,
        OPT_OUTPUT, OPT_TMP, OPT_ALLOW_NET, OPT_MOUNT, OPT_NO_SYS, OPT_SYS_ID, OPT_LEASE, OPT_WAIT, OPT_RETRY,
        OPT_BACKOFF, OPT_CLIENT_TIMEOUT, OPT_MAX_CHECKOUT, OPT_GRACE, OPT_STATE_DIR, OPT_RUNSC, OPT_PLATFORM,
        OPT_UID, OPT_GID, OPT_TOKEN, OPT_IMAGE, OPT_ENGINE_RUNTIME,
        OPT_SERVER_SOCKET, /* issue 13 */
};

static const struct option serve_opts[] = {
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
        {"state-dir", required_argument, NULL, OPT_STATE_DIR},
        {"runsc", required_argument, NULL, OPT_RUNSC},
        {"platform", required_argument, NULL, OPT_PLATFORM},
        {"sandbox-uid", required_argument, NULL, OPT_UID},
        {"sandbox-gid", required_argument, NULL, OPT_GID},
        {"image", required_argument, NULL, OPT_IMAGE},
        {"engine-runtime", required_argument, NULL, OPT_ENGINE_RUNTIME},
        {"server-socket", required_argument, NULL, OPT_SERVER_SOCKET}, /* issue 13 */
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

static void options_default(Options *o) {
        *o = (Options){
                .label = NULL, .sandbox = "runsc", .concurrency = 1,
                .max_timeout_secs = 3600, .max_memory_mb = 8192, .max_cpu_secs = 3600, .max_pids = 4096,
                .default_timeout_secs = 600, .default_memory_mb = 2048, .default_pids = 512, .default_cpu_secs = 600,
                .output_mb = 8, .tmp_mb = 512, .lease_secs = 120, .wait_secs = 20, .retry_after_secs = 10,
                .backoff_max_secs = 30, .client_timeout_secs = 120, .max_checkout_mb = 4096,
                .shutdown_grace_secs = 15, .sandbox_uid = 65534, .sandbox_gid = 65534,
        };
}

static int parse_options(int argc, char **argv, Options *o) {
        int c;
        long *target;
        const char *flag;

        options_default(o);
        opterr = 0;
        optind = 0;
        while ((c = getopt_long(argc, argv, ":", serve_opts, NULL)) != -1) {
                target = NULL;
                flag = NULL;
                for (const struct option *x = serve_opts; x->name; x++)
                        if (x->val == c)
                                flag = x->name;
                switch (c) {
                case OPT_SERVER: o->server = optarg; break;
                case OPT_KEY: o->key = optarg; break;
                case OPT_TOKEN_FILE: o->token_file = optarg; break;
                case OPT_TOKEN:
                        return cli_like_usage("the token is never taken from the command line: use TENTAFLAKE_TOKEN or --token-file");
                case OPT_LABEL: o->label = optarg; break;
                case OPT_SANDBOX: o->sandbox = optarg; break;
                case OPT_STATE_DIR: o->state_dir = optarg; break;
                case OPT_RUNSC: o->runsc = optarg; break;
                case OPT_PLATFORM: o->platform = optarg; break;
                case OPT_IMAGE: o->image = optarg; break;
                case OPT_ENGINE_RUNTIME: o->engine_runtime = optarg; break;
                case OPT_SERVER_SOCKET: o->server_socket = optarg; break; /* issue 13 */
                case OPT_ALLOW_NET: o->allow_network = true; break;
                case OPT_NO_SYS: o->no_system_mounts = true; break;
                case OPT_SYS_ID: o->system_mounts_identity = optarg; break;
                case OPT_MOUNT:
                        if (o->n_mounts >= MAX_MOUNTS)
                                return cli_like_usage("at most %d --mount", MAX_MOUNTS);
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
                case OPT_UID: target = &o->sandbox_uid; break;
                case OPT_GID: target = &o->sandbox_gid; break;
                case ':': return cli_like_usage("option '%s' needs a value", argv[optind - 1]);
                default: return cli_like_usage("unknown option '%s'", argv[optind - 1]);
                }
                if (target && parse_long(flag, optarg, target) < 0)
                        return -EINVAL;
        }
        if (optind < argc)
                return cli_like_usage("unexpected argument '%s'", argv[optind]);
        if (!o->server || !o->key)
                return cli_like_usage("--server URL and --key FILE are required");
        if (strncmp(o->server, "http://", 7) != 0 && strncmp(o->server, "https://", 8) != 0)
                return cli_like_usage("--server '%s' must be an http:// or https:// URL", o->server);
        if (o->server_socket && o->server_socket[0] != '/') /* issue 13 */
                return cli_like_usage("--server-socket '%s' must be an absolute path", o->server_socket);
        if (!streq(o->sandbox, "runsc") && !streq(o->sandbox, "docker") && !streq(o->sandbox, "podman"))
                return cli_like_usage("--sandbox must be runsc, docker or podman");
        if (streq(o->sandbox, "runsc")) {
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
        if (!o->platform && streq(o->sandbox, "runsc"))
                o->platform = CONFIG_DEFAULT_PLATFORM;
        clamp("concurrency", &o->concurrency, 1, 64);
        clamp("lease-secs", &o->lease_secs, 5, 3600);
        clamp("wait-secs", &o->wait_secs, 0, 30);
        clamp("retry-after-secs", &o->retry_after_secs, 0, 86400);
        clamp("backoff-max-secs", &o->backoff_max_secs, 1, 3600);
        clamp("client-timeout-secs", &o->client_timeout_secs, 5, 3600);
        clamp("shutdown-grace-secs", &o->shutdown_grace_secs, 1, 3600);
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
        return 0;
}

/* A config name from the label: lowercase [a-z0-9-], at most 48. */
static void name_from_label(const char *label, char out[static CONFIG_NAME_MAX + 1]) {
        size_t n = 0;
        const char *prefix = "serve-";
        memcpy(out, prefix, strlen(prefix));
        n = strlen(prefix);
        for (const char *p = label; *p && n < CONFIG_NAME_MAX; p++) {
                char c = *p;
                if (c >= 'A' && c <= 'Z')
                        c = (char) (c - 'A' + 'a');
                out[n++] = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ? c : '-';
        }
        out[n] = 0;
}

/* The walls, as a worker config (contract section 2) built from the flags and parsed by the
 * same strict parser, so serve and the inbox plane get the same defaults and the same
 * refusals (a mount that would expose the key, for one). */
static int build_config(Serve *s, TfwError *e) {
        const Options *o = &s->o;
        _cleanup_json_ json_t *cfg = NULL, *mounts = json_array();
        static const char *const defaults[] = {"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc/ld.so.cache",
                                               "/etc/alternatives", "/etc/ssl/certs", NULL};
        char ws[PATH_MAX], res[PATH_MAX], sz[64];

        if (!mounts)
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        bool engine = !streq(o->sandbox, "runsc");
        if (!o->no_system_mounts && !engine)
                for (const char *const *d = defaults; *d; d++) {
                        struct stat st;
                        char m[PATH_MAX + 300];
                        if (lstat(*d, &st) < 0)
                                continue; /* /lib64 is missing on some systems */
                        if (o->system_mounts_identity)
                                snprintf(m, sizeof(m), "%s=%s", *d, o->system_mounts_identity);
                        else
                                snprintf(m, sizeof(m), "%s", *d);
                        json_array_append_new(mounts, json_string(m));
                }
        for (size_t i = 0; i < o->n_mounts; i++)
                json_array_append_new(mounts, json_string(o->mounts[i]));

        snprintf(ws, sizeof(ws), "/nonexistent/tentaflake-serve/workspace");
        snprintf(res, sizeof(res), "/nonexistent/tentaflake-serve/results");
        cfg = json_pack("{s:i, s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:s}", "version", 1, "name", s->name, "workspace", ws,
                        "state_dir", o->state_dir, "results_dir", res, "container_uid", (json_int_t) o->sandbox_uid,
                        "container_gid", (json_int_t) o->sandbox_gid, "signing_key", o->key, "signing_identity",
                        s->key->identity);
        if (!cfg)
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        json_t *rt = engine ? json_pack("{s:s, s:s}", "driver", o->sandbox, "image", o->image)
                            : json_pack("{s:s, s:s, s:O}", "driver", o->sandbox, "platform", o->platform,
                                        "system_mounts", mounts);
        if (rt && o->runsc)
                json_object_set_new(rt, "runsc", json_string(o->runsc));
        json_object_set_new(cfg, "runtime", rt);
        json_t *lim = json_object();
        snprintf(sz, sizeof(sz), "%ldm", o->max_checkout_mb);
        json_object_set_new(lim, "max_snapshot_bytes", json_string(sz));
        json_object_set_new(lim, "workspace_tmpfs", json_string(sz));
        snprintf(sz, sizeof(sz), "%ldm", o->tmp_mb);
        json_object_set_new(lim, "tmp_tmpfs", json_string(sz));
        snprintf(sz, sizeof(sz), "%ldm", o->output_mb);
        json_object_set_new(lim, "max_log_bytes", json_string(sz));
        snprintf(sz, sizeof(sz), "%ldm", o->default_memory_mb);
        json_object_set_new(lim, "memory", json_string(sz));
        json_object_set_new(lim, "pids", json_integer(o->default_pids));
        json_object_set_new(lim, "max_timeout_seconds", json_integer(o->max_timeout_secs));
        json_object_set_new(lim, "default_timeout_seconds", json_integer(o->default_timeout_secs));
        json_object_set_new(cfg, "limits", lim);

        _cleanup_free_ char *text = json_dumps(cfg, JSON_COMPACT);
        if (!text)
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        int r = config_parse_buffer(text, strlen(text), &s->config, e);
        if (r < 0)
                tfw_error_prefix(e, "serve flags: ");
        return r;
}

/* ---- issue 13: worker faults (one state directory per worker; the token kept out of mounts) -- */

/* One worker per state directory. Labels that fold to the same name (`ci.1`, `CI-1`) share the
 * default state directory, and a second worker's start-up cleanup would remove the first one's
 * running containers: so before that cleanup, take a non-blocking exclusive flock on
 * <state_dir>/serve.lock (which holds the holder's label, for the message) and refuse to start
 * when another worker holds it. The fd is O_CLOEXEC (runsc never inherits it) and the lock
 * lasts as long as the process. */
static int lock_state_dir(Serve *s, TfwError *e) {
        char shown[PATH_MAX + 16], other[VJOB_TEXT_MAX + 32] = "";
        _cleanup_close_ int dfd = open(s->o.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return tfw_error(e, errno, "state_dir", "cannot open --state-dir '%s': %m",
                                 printable_name(s->o.state_dir, shown, sizeof(shown)));
        _cleanup_close_ int fd = openat(dfd, "serve.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
        if (fd < 0)
                return tfw_error(e, errno, "state_dir", "cannot open '%s/serve.lock': %m",
                                 printable_name(s->o.state_dir, shown, sizeof(shown)));
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                int err = errno;
                if (err != EWOULDBLOCK)
                        return tfw_error(e, err, "state_dir", "cannot lock '%s/serve.lock': %s",
                                         printable_name(s->o.state_dir, shown, sizeof(shown)), strerror(err));
                char buf[VJOB_TEXT_MAX + 1];
                ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
                buf[n > 0 ? n : 0] = 0;
                buf[strcspn(buf, "\n")] = 0;
                if (buf[0])
                        (void) printable_name(buf, other, sizeof(other));
                return tfw_error(e, EBUSY, "state_dir",
                                 "--state-dir '%s' is in use by the running worker labelled '%s'; labels that differ "
                                 "only in case or punctuation share a state directory: give this worker "
                                 "(label '%s') another --label or --state-dir",
                                 printable_name(s->o.state_dir, shown, sizeof(shown)), other[0] ? other : "(unknown)",
                                 s->o.label);
        }
        if (ftruncate(fd, 0) < 0 || dprintf(fd, "%s\n", s->o.label) < 0)
                return tfw_error(e, errno, "state_dir", "cannot write '%s/serve.lock': %m",
                                 printable_name(s->o.state_dir, shown, sizeof(shown)));
        s->lock_fd = TAKE_FD(fd);
        return 0;
}

/* The token file is refused inside every mount the capsule gets, as the key is (the config
 * parser refuses a mount that contains signing_key): a `--mount` of the token's directory, or
 * of any directory above it, would hand the credential to the check. Both the spelling and the
 * resolved path of each mount are compared with the token's resolved path. */
static int check_token_not_mounted(const Serve *s, TfwError *e) {
        char a[PATH_MAX + 16], b[PATH_MAX + 16];
        if (!s->o.token_file)
                return 0;
        _cleanup_free_ char *token = realpath(s->o.token_file, NULL);
        if (!token)
                return tfw_error(e, errno, "token_file", "--token-file '%s': %m",
                                 printable_name(s->o.token_file, a, sizeof(a)));
        for (size_t i = 0; i < s->config->n_system_mounts; i++) {
                const char *host = s->config->system_mounts[i].host;
                _cleanup_free_ char *real = realpath(host, NULL);
                if (path_is_below_or_equal(token, host) || (real && path_is_below_or_equal(token, real)))
                        return tfw_error(e, EINVAL, "inconsistent",
                                         "mount host path '%s' contains --token-file '%s'; the check would see it",
                                         printable_name(host, a, sizeof(a)), printable_name(token, b, sizeof(b)));
        }
        return 0;
}

/* ---- one job ---------------------------------------------------------------------------------- */

typedef enum Outcome {
        OUT_COMPLETED,   /* pass/fail/stale accepted */
        OUT_FAILED,      /* fail sent */
        OUT_DROPPED,     /* lease lost: nothing accepted */
        OUT_FATAL,       /* 401/403: the worker stops */
} Outcome;

typedef struct Lane {
        Serve *s;
        unsigned index;
        char label[VJOB_TEXT_MAX + 16];
        Http *http;
        pthread_t thread;
        unsigned long jobs;

        /* The running job, shared with the heartbeat thread and the signal handler thread. */
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool running, done;
        bool stale, lost, unauthorized, interrupted;
        char container_id[256];
        const VJob *job;
        Runsc *rt;        /* the job's driver while it runs: runsc, or */
        const Engine *en; /* docker/podman */
} Lane;

static void lane_kill_container(Lane *l) {
        /* Called with l->lock held. Force-deleting the container makes `runsc run` (or the
         * engine's `run`) return; capsule_run_job then cleans up as after any other ending. */
        if (!l->container_id[0])
                return;
        if (l->rt)
                (void) runsc_delete_force(l->rt, l->container_id);
        else if (l->en)
                (void) engine_kill(l->en, l->container_id); /* `podman rm -f` waits on the attached run */
}

static int post_json(Lane *l, Http *h, const char *path, json_t *body, long *status, json_t **ret, TfwError *e) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        int r = http_call(h, true, path, body, HTTP_BODY_MAX, 0, status, &buf, &len, e);
        (void) l;
        if (r < 0)
                return r;
        if (ret) {
                *ret = NULL;
                if (*status == 200 && len > 0)
                        (void) json_load_object_strict(buf, len, "answer", ret, e);
        }
        if ((*status == 401 || *status == 403)) {
                _cleanup_json_ json_t *j = NULL;
                const char *msg = NULL;
                TfwError ign = {0};
                if (len && json_load_object_strict(buf, len, "answer", &j, &ign) >= 0)
                        msg = json_string_value(json_object_get(j, "error"));
                return tfw_error(e, EACCES, "unauthorized", "the server refused the credential (HTTP %ld): %s", *status,
                                 msg ? msg : "no message");
        }
        return 0;
}

static void *heartbeat_main(void *arg) {
        Lane *l = arg;
        Serve *s = l->s;
        _cleanup_http_ Http *h = NULL;
        TfwError e = {0};
        char path[512];
        double interval = MAX(1.0, (double) s->o.lease_secs / 3.0);

        if (http_new(s->o.server, s->token, s->o.client_timeout_secs, &h, &e) < 0 ||
            http_set_unix_socket(h, s->o.server_socket) < 0) /* issue 13 */
                return NULL;
        snprintf(path, sizeof(path), "/v1/jobs/%s/heartbeat", l->job->id);
        pthread_mutex_lock(&l->lock);
        for (;;) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                double wait = (l->stale || l->lost || l->unauthorized || l->interrupted) ? 1.0 : interval;
                ts.tv_sec += (time_t) wait;
                while (!l->done)
                        if (pthread_cond_timedwait(&l->cond, &l->lock, &ts) == ETIMEDOUT)
                                break;
                if (l->done)
                        break;
                if (l->stale || l->lost || l->unauthorized || l->interrupted) {
                        /* The container may have been created after the last kill: again. */
                        lane_kill_container(l);
                        continue;
                }
                pthread_mutex_unlock(&l->lock);
                _cleanup_json_ json_t *body = json_pack("{s:s}", "lease", l->job->lease_id), *ans = NULL;
                long status = 0;
                int r = post_json(l, h, path, body, &status, &ans, &e);
                pthread_mutex_lock(&l->lock);
                if (r == -EACCES) {
                        l->unauthorized = true;
                        set_fatal(s, e.message);
                } else if (r < 0)
                        log_warning("serve %s: heartbeat of job '%s' failed: %s", l->label, l->job->id, e.message);
                else if (status == 409)
                        l->lost = true;
                else if (status == 200 && ans && json_is_true(json_object_get(ans, "stale")))
                        l->stale = true;
                else if (status != 200)
                        log_warning("serve %s: heartbeat of job '%s': HTTP %ld", l->label, l->job->id, status);
                if (l->stale || l->lost || l->unauthorized)
                        lane_kill_container(l);
        }
        pthread_mutex_unlock(&l->lock);
        return NULL;
}

static Outcome send_fail(Lane *l, const VJob *j, const char *reason, bool permanent) {
        char path[512];
        TfwError e = {0};
        long status = 0;
        _cleanup_json_ json_t *body = json_pack("{s:s, s:s, s:I, s:b}", "lease", j->lease_id, "reason", reason,
                                                "retry_after_secs", (json_int_t) l->s->o.retry_after_secs, "permanent",
                                                permanent);
        snprintf(path, sizeof(path), "/v1/jobs/%s/fail", j->id);
        log_notice("serve %s: job '%s' attempt %" PRId64 ": fail%s: %s", l->label, j->id, j->attempt,
                   permanent ? " (permanent)" : "", reason);
        int r = post_json(l, l->http, path, body, &status, NULL, &e);
        if (r == -EACCES) {
                set_fatal(l->s, e.message);
                return OUT_FATAL;
        }
        if (r < 0) {
                log_warning("serve %s: cannot report the failure of job '%s': %s", l->label, j->id, e.message);
                return OUT_DROPPED;
        }
        if (status == 409) {
                log_notice("serve %s: job '%s': lease lost, failure dropped", l->label, j->id);
                return OUT_DROPPED;
        }
        return OUT_FAILED;
}

static Outcome send_complete(Lane *l, const VJob *j, const char *status_word, json_t *attestation, json_t *result) {
        char path[512];
        TfwError e = {0};
        long status = 0;
        _cleanup_json_ json_t *body = json_pack("{s:s, s:s, s:O?, s:O}", "lease", j->lease_id, "status", status_word,
                                                "attestation", attestation, "result", result);
        snprintf(path, sizeof(path), "/v1/jobs/%s/complete", j->id);
        int r = post_json(l, l->http, path, body, &status, NULL, &e);
        if (r == -EACCES) {
                set_fatal(l->s, e.message);
                return OUT_FATAL;
        }
        if (r < 0 || status == 409 || status != 200) {
                log_notice("serve %s: job '%s': completion not accepted (%s), result dropped", l->label, j->id,
                           r < 0 ? e.message : status == 409 ? "lease lost" : "server error");
                return OUT_DROPPED;
        }
        log_notice("serve %s: job '%s' attempt %" PRId64 ": %s", l->label, j->id, j->attempt, status_word);
        return OUT_COMPLETED;
}

/* Refusals before anything is downloaded: what this worker must not run. */
static int refuse_before_download(Lane *l, const VJob *j, char *msg, size_t size) {
        const Options *o = &l->s->o;
        if (j->run.timeout_secs > (uint64_t) o->max_timeout_secs)
                return snprintf(msg, size, "the policy asks for timeout_secs %" PRIu64 ", above this worker's ceiling %ld",
                                j->run.timeout_secs, o->max_timeout_secs), 1;
        if (j->run.memory_mb > (uint64_t) o->max_memory_mb)
                return snprintf(msg, size, "the policy asks for memory_mb %" PRIu64 ", above this worker's ceiling %ld",
                                j->run.memory_mb, o->max_memory_mb), 1;
        if (j->run.max_pids > (uint64_t) o->max_pids)
                return snprintf(msg, size, "the policy asks for max_pids %" PRIu64 ", above this worker's ceiling %ld",
                                j->run.max_pids, o->max_pids), 1;
        if (j->run.network && !o->allow_network)
                return snprintf(msg, size, "the policy asks for network, which this worker does not allow"), 1;
        if (j->run.network)
                return snprintf(msg, size, "the policy asks for network; this worker's capsule has none"), 1;
        if (j->run.image && l->s->config->driver == DRIVER_RUNSC)
                return snprintf(msg, size, "the policy pins image '%s'; the runsc sandbox runs no images", j->run.image), 1;
        if (j->run.image && !engine_image_is_pinned(j->run.image))
                return snprintf(msg, size, "the policy's image '%s' is not pinned by digest (NAME@sha256:<64 hex>)",
                                j->run.image), 1;
        if (j->run.image) {
                /* Present in the engine's local store: this worker never pulls. */
                Engine en = {};
                Config c = *l->s->config;
                TfwError e = {};
                c.image = j->run.image;
                int r = engine_init(&en, &c, o->engine_runtime, &e);
                if (r >= 0)
                        r = engine_image_check(&en, &e);
                engine_done(&en);
                if (r < 0)
                        return snprintf(msg, size, "the policy's image cannot run here: %s", e.message), 1;
        }
        return 0;
}

static char *read_tail(int fd, size_t max) {
        struct stat st;
        if (fstat(fd, &st) < 0)
                return strdup("");
        off_t off = st.st_size > (off_t) max ? st.st_size - (off_t) max : 0;
        size_t n = (size_t) (st.st_size - off);
        char *buf = malloc(n + 1);
        if (!buf)
                return NULL;
        ssize_t m = pread(fd, buf, n, off);
        buf[m > 0 ? m : 0] = 0;
        /* JSON strings must be valid UTF-8: replace what is not ASCII-printable or newline. */
        for (ssize_t i = 0; i < m; i++)
                if (((unsigned char) buf[i] < 0x20 && buf[i] != '\n' && buf[i] != '\t') || (unsigned char) buf[i] >= 0x7f)
                        buf[i] = '?';
        return buf;
}

static Outcome run_job(Lane *l, VJob *j) {
        Serve *s = l->s;
        TfwError e = {0};
        char msg[2600], path[1024], lane_dir[64], lane_path[PATH_MAX], snap_path[PATH_MAX];
        _cleanup_free_ char *body = NULL;
        _cleanup_vmanifest_ VManifest *m = NULL;
        _cleanup_close_ int lane_fd = -EBADF, co_fd = -EBADF, log_fd = -EBADF;
        /* Every owned resource is declared here: the gotos below jump forward over the code
         * that fills them, and a cleanup attribute must never see an uninitialised value. */
        _cleanup_json_ json_t *desc = NULL, *st = NULL, *env = NULL, *res = NULL;
        _cleanup_free_ char **argv = NULL;
        _cleanup_free_ char *cid = NULL, *tail = NULL;
        CheckoutSummary cs = {};
        CapsuleResult cr = {};
        Config jc;
        char digest[ENV_DIGEST_SIZE] = "";
        char local_id[64];
        uint64_t timeout = 0;
        size_t len = 0;
        long status = 0;
        int r;

        if (refuse_before_download(l, j, msg, sizeof(msg)))
                return send_fail(l, j, msg, false);

        /* The heartbeat runs from here on: fetching a big tree takes time too. */
        pthread_t hb;
        Runsc rt = {};
        Engine en = {};
        bool engine = s->config->driver != DRIVER_RUNSC;
        pthread_mutex_lock(&l->lock);
        l->job = j;
        l->running = true;
        l->done = l->stale = l->lost = l->unauthorized = l->interrupted = false;
        l->container_id[0] = 0;
        l->rt = NULL;
        l->en = NULL;
        pthread_mutex_unlock(&l->lock);
        bool hb_started = pthread_create(&hb, NULL, heartbeat_main, l) == 0;
        Outcome out = OUT_FAILED;
        bool permanent = false;
        const char *fault = NULL;

        snprintf(path, sizeof(path), "/v1/repos/%s/trees/%s", j->repo, j->tree);
        r = http_call(l->http, false, path, NULL, VMANIFEST_MAX_BYTES, 0, &status, &body, &len, &e);
        if (r < 0) {
                snprintf(msg, sizeof(msg), "cannot fetch the manifest: %s", e.message);
                fault = msg;
                goto end;
        }
        if (status == 401 || status == 403) {
                snprintf(msg, sizeof(msg), "the server refused the credential (HTTP %ld)", status);
                set_fatal(s, msg);
                out = OUT_FATAL;
                goto end_nofail;
        }
        if (status != 200) {
                snprintf(msg, sizeof(msg), "the server answered HTTP %ld for the manifest", status);
                fault = msg;
                goto end;
        }
        r = vmanifest_parse(body, len, &m, &e);
        if (r >= 0 && !streq(m->tree, j->tree))
                r = tfw_error(&e, EBADMSG, "tree_mismatch", "the manifest names tree %s, not the job's %s", m->tree, j->tree);
        if (r < 0) {
                snprintf(msg, sizeof(msg), "the manifest is not acceptable: %s", e.message);
                fault = msg;
                goto end;
        }
        r = vmanifest_check_paths(m, &e);
        if (r < 0) {
                snprintf(msg, sizeof(msg), "the tree will never be materialised: %s", e.message);
                fault = msg;
                permanent = true;
                goto end;
        }
        r = vmanifest_verify_tree(m, j->tree, &e);
        if (r < 0) {
                snprintf(msg, sizeof(msg), "the manifest does not verify: %s", e.message);
                fault = msg;
                goto end;
        }

        /* A fresh lane directory holding the checkout, the bundle and the log. */
        snprintf(lane_dir, sizeof(lane_dir), "lane-%u", l->index);
        (void) rm_rf_at(s->scratch_fd, lane_dir);
        if (mkdirat(s->scratch_fd, lane_dir, 0700) < 0 || (lane_fd = open_dir_at(s->scratch_fd, lane_dir)) < 0 ||
            mkdirat(lane_fd, "checkout", 0750) < 0 || (co_fd = open_dir_at(lane_fd, "checkout")) < 0 ||
            fchown(co_fd, 0, s->config->container_gid) < 0 || fchmod(co_fd, 0750) < 0) {
                snprintf(msg, sizeof(msg), "cannot prepare the scratch directory: %m");
                fault = msg;
                goto end;
        }
        if (path_join_buf(lane_path, sizeof(lane_path), s->scratch_path, lane_dir) < 0 ||
            path_join_buf(snap_path, sizeof(snap_path), lane_path, "checkout") < 0) {
                fault = "the scratch path is too long";
                goto end;
        }

        r = checkout_materialise(l->http, j->repo, m, co_fd, s->config->container_gid,
                                 (uint64_t) s->o.max_checkout_mb << 20, &cs, &e);
        if (r < 0) {
                if (e.code && streq(e.code, "unauthorized")) {
                        set_fatal(s, e.message);
                        out = OUT_FATAL;
                        goto end_nofail;
                }
                permanent = e.code && (streq(e.code, "symlink_escape") || streq(e.code, "bad_symlink"));
                snprintf(msg, sizeof(msg), "%s: %s", permanent ? "the tree will never be materialised" : "checkout failed",
                         e.message);
                fault = msg;
                goto end;
        }

        /* The job's walls: the policy's limits within the ceilings, 0 meaning the default. */
        jc = *s->config;
        timeout = j->run.timeout_secs ? j->run.timeout_secs : (uint64_t) s->o.default_timeout_secs;
        jc.limits.memory = (j->run.memory_mb ? j->run.memory_mb : (uint64_t) s->o.default_memory_mb) << 20;
        jc.limits.memory_swap = jc.limits.memory;
        jc.limits.pids = j->run.max_pids ? j->run.max_pids : (uint64_t) s->o.default_pids;
        if (engine && j->run.image)
                jc.image = j->run.image;

        desc = env_description(&jc, timeout, jc.limits.max_log_bytes, (uint64_t) s->o.default_cpu_secs, j->run.env,
                               s->runtime_version);
        if (!desc || env_digest(desc, digest) < 0) {
                fault = "cannot compute the environment digest";
                goto end;
        }

        /* argv, without a shell; the policy's env goes after the constant one (extra_env). */
        argv = calloc(j->run.n_argv + 1, sizeof(char *));
        if (!argv) {
                fault = "out of memory";
                goto end;
        }
        for (size_t i = 0; i < j->run.n_argv; i++)
                argv[i] = j->run.argv[i];

        uint8_t h[SHA256_DIGEST_SIZE];
        char hex[SHA256_HEX_SIZE];
        sha256_buffer(j->id, strlen(j->id), h);
        sha256_to_hex(h, hex);
        snprintf(local_id, sizeof(local_id), "l%u-%.16s", l->index, hex);

        log_fd = openat(lane_fd, "job.log", O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (log_fd < 0) {
                snprintf(msg, sizeof(msg), "cannot create the job log: %m");
                fault = msg;
                goto end;
        }
        r = engine ? engine_init(&en, &jc, s->o.engine_runtime, &e) : runsc_init(&rt, &jc, s->runsc_root, &e);
        if (r < 0) {
                snprintf(msg, sizeof(msg), "sandbox unavailable: %s", e.message);
                fault = msg;
                goto end;
        }
        (void) capsule_container_id(jc.name, local_id, &cid);

        pthread_mutex_lock(&l->lock);
        bool stop_now = l->stale || l->lost || l->unauthorized || l->interrupted;
        if (cid)
                snprintf(l->container_id, sizeof(l->container_id), "%s", cid);
        l->rt = engine ? NULL : &rt;
        l->en = engine ? &en : NULL;
        pthread_mutex_unlock(&l->lock);

        if (!stop_now) {
                /* The seed's rules: output beyond --output-mb and CPU beyond the CPU seconds end
                 * the check (a signed fail), like time, memory and processes. */
                CapsuleJobParams p = {
                        .config = &jc, .runtime = engine ? NULL : &rt, .engine = engine ? &en : NULL,
                        .scratch_fd = lane_fd, .scratch_path = lane_path, .job_id = local_id, .argv = argv,
                        .extra_env = j->run.env, .timeout_seconds = timeout,
                        .cpu_seconds = (uint64_t) s->o.default_cpu_secs, .end_on_log_limit = true,
                        .snapshot_dir = snap_path, .init_path = s->init_path, .log_fd = log_fd, .staging_fd = -1,
                        .unpriv_uid = 65534, .unpriv_gid = 65534,
                };
                r = capsule_run_job(&p, &cr, &e);
                if (r < 0) {
                        cr.status = CAPSULE_ERROR;
                        snprintf(cr.message, sizeof(cr.message), "%s", e.message);
                }
        }
        pthread_mutex_lock(&l->lock);
        l->rt = NULL;
        l->en = NULL;
        l->container_id[0] = 0;
        bool lost = l->lost, stale = l->stale, unauth = l->unauthorized, interrupted = l->interrupted;
        pthread_mutex_unlock(&l->lock);
        if (engine)
                engine_done(&en);
        else
                runsc_done(&rt);

        if (unauth) {
                out = OUT_FATAL;
                goto end_nofail;
        }
        if (lost) {
                log_notice("serve %s: job '%s': lease lost, the check was stopped and its result dropped", l->label, j->id);
                out = OUT_DROPPED;
                goto end_nofail;
        }
        if (stale) {
                res = json_pack("{s:s}", "status", "stale");
                out = send_complete(l, j, "stale", NULL, res);
                goto end_nofail;
        }
        if (interrupted) {
                fault = "the worker was stopped during the check";
                goto end;
        }
        if (cr.status == CAPSULE_ERROR) {
                snprintf(msg, sizeof(msg), "worker fault (%s): %s", cr.reason ? cr.reason : "error", cr.message);
                fault = msg;
                goto end;
        }
        if (j->run.environment_digest && !streq(j->run.environment_digest, digest)) {
                snprintf(msg, sizeof(msg), "the policy pins environment_digest %s; this worker produces %s",
                         j->run.environment_digest, digest);
                fault = msg;
                goto end;
        }

        /* A real run ended: sign pass (exit 0) or fail (everything else). */
        bool pass = cr.status == CAPSULE_SUCCEEDED;
        ValidationFacts f = {
                .job_id = j->id, .repo = j->repo, .proposal = j->proposal, .check = j->check, .tree = j->tree,
                .policy_version = j->policy_version, .attempt = j->attempt, .pass = pass,
                .status = capsule_status_to_string(cr.status), .exit_code = cr.exit_code, .signal = cr.signal,
                .environment_digest = digest, .worker = l->label, .started_at = cr.started_at,
                .finished_at = cr.finished_at,
        };
        st = attest_validation_statement(&f, s->key->identity);
        if (!st || attest_sign_statement(s->key, st, &env, &e) < 0) {
                fault = "cannot sign the attestation";
                goto end;
        }
        tail = read_tail(log_fd, LOG_TAIL_BYTES);
        res = json_pack(
                "{s:s, s:s, s:s?, s:s?, s:I, s:s, s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I, s:I}, s:{s:I, s:b, s:s}}",
                "status", capsule_status_to_string(cr.status), "result", pass ? "pass" : "fail", "reason", cr.reason,
                "message", cr.message[0] ? cr.message : NULL, "duration_ms", (json_int_t) cr.duration_ms,
                "environment_digest", digest, "limits", "timeout_secs", (json_int_t) timeout, "memory",
                (json_int_t) jc.limits.memory, "pids", (json_int_t) jc.limits.pids, "output_bytes",
                (json_int_t) jc.limits.max_log_bytes, "checkout", "bytes", (json_int_t) cs.bytes, "files",
                (json_int_t) cs.files, "symlinks", (json_int_t) cs.symlinks, "log", "bytes", (json_int_t) cr.log_bytes,
                "truncated", cr.log_truncated, "tail", tail ? tail : "");
        if (res) {
                json_object_set_new(res, "exit_code", cr.exit_code >= 0 ? json_integer(cr.exit_code) : json_null());
                json_object_set_new(res, "signal", cr.signal ? json_integer(cr.signal) : json_null());
        }
        out = send_complete(l, j, pass ? "pass" : "fail", env, res ? res : json_object());
        goto end_nofail;

end:
        out = send_fail(l, j, fault ? fault : "worker fault", permanent);
end_nofail:
        pthread_mutex_lock(&l->lock);
        l->done = true;
        l->running = false;
        pthread_cond_broadcast(&l->cond);
        pthread_mutex_unlock(&l->lock);
        if (hb_started)
                pthread_join(hb, NULL);
        pthread_mutex_lock(&l->lock);
        l->job = NULL;
        pthread_mutex_unlock(&l->lock);
        if (lane_fd >= 0 || s->scratch_fd >= 0) {
                snprintf(lane_dir, sizeof(lane_dir), "lane-%u", l->index);
                (void) rm_rf_at(s->scratch_fd, lane_dir);
        }
        return out;
}

/* ---- lanes ------------------------------------------------------------------------------------- */

static void *lane_main(void *arg) {
        Lane *l = arg;
        Serve *s = l->s;
        TfwError e = {0};
        double backoff = 1;

        while (!atomic_load(&s->stopping)) {
                /* issue 13: under systemd (Type=notify) the worker is ready once the runtime, the
                 * image and the key were checked (serve_main did that before any lane started)
                 * and its first claim is under way. Without NOTIFY_SOCKET this does nothing. */
                if (!atomic_exchange(&s->ready_sent, true))
                        (void) sd_notifyf(0, "READY=1\nSTATUS=claiming from %s as '%s'", s->o.server, s->o.label);
                _cleanup_json_ json_t *body = json_pack("{s:s, s:I, s:I}", "worker", l->label, "wait_secs",
                                                        (json_int_t) s->o.wait_secs, "lease_secs",
                                                        (json_int_t) s->o.lease_secs);
                _cleanup_free_ char *ans = NULL;
                size_t len = 0;
                long status = 0;
                int r = http_call(l->http, true, "/v1/jobs/claim", body, VJOB_CLAIM_MAX_BYTES,
                                  s->o.wait_secs + s->o.client_timeout_secs, &status, &ans, &len, &e);
                if (r >= 0 && (status == 401 || status == 403)) {
                        _cleanup_json_ json_t *j = NULL;
                        TfwError ign = {0};
                        const char *m = NULL;
                        if (len && json_load_object_strict(ans, len, "answer", &j, &ign) >= 0)
                                m = json_string_value(json_object_get(j, "error"));
                        char msg[2600];
                        snprintf(msg, sizeof(msg), "the server refused the credential (HTTP %ld): %s", status,
                                 m ? m : "no message");
                        set_fatal(s, msg);
                        break;
                }
                if (r < 0 || (status != 200 && status != 204)) {
                        log_warning("serve %s: claim failed: %s", l->label,
                                    r < 0 ? e.message : "unexpected HTTP status");
                        if (wait_or_stop(s, backoff))
                                break;
                        backoff = MIN(backoff * 2, (double) s->o.backoff_max_secs);
                        continue;
                }
                backoff = 1;
                if (status == 204)
                        continue;
                _cleanup_vjob_ VJob *j = NULL;
                r = vjob_parse_claim(ans, len, &j, &e);
                if (r < 0) {
                        log_error("serve %s: the server's job is not acceptable: %s", l->label, e.message);
                        if (wait_or_stop(s, (double) s->o.retry_after_secs))
                                break;
                        continue;
                }
                l->jobs++;
                if (run_job(l, j) == OUT_FATAL)
                        break;
        }
        return NULL;
}

static int read_token(const Options *o, char **ret) {
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
                int r = read_full_fd_bounded(fd, TOKEN_MAX, &t, &n);
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

int serve_main(int argc, char **argv) {
        Serve *s = calloc(1, sizeof(*s));
        Lane *lanes = NULL;
        TfwError e = {0};
        sigset_t mask;
        int ret = 1;

        if (!s)
                return 1;
        the_serve = s;
        s->scratch_fd = -EBADF;
        s->lock_fd = -EBADF;
        pthread_mutex_init(&s->lock, NULL);
        pthread_cond_init(&s->cond, NULL);
        if (parse_options(argc, argv, &s->o) < 0) {
                ret = 2;
                goto out;
        }
        /* The token never comes from argv, and the environment variable is removed so no child
         * (runsc, env(1) in a capsule) could inherit it. */
        if (read_token(&s->o, &s->token) < 0)
                goto out;
        (void) unsetenv("TENTAFLAKE_TOKEN");
        if (signing_key_load(s->o.key, &s->key, &e) < 0) {
                log_error("serve: %s", e.message);
                goto out;
        }
        /* The config parser wants the key's absolute path (it refuses mounts that would expose it). */
        s->key_path = realpath(s->o.key, NULL);
        if (!s->key_path) {
                log_error("serve: key '%s': %m", s->o.key);
                goto out;
        }
        s->o.key = s->key_path;
        if (!s->o.label)
                s->o.label = s->key->identity;
        if (!signing_identity_is_valid(s->o.label) || strlen(s->o.label) > VJOB_TEXT_MAX) {
                log_error("serve: --label must be 1..%d printable characters without spaces", VJOB_TEXT_MAX);
                ret = 2;
                goto out;
        }
        name_from_label(s->o.label, s->name);
        char state_default[PATH_MAX];
        if (!s->o.state_dir) {
                snprintf(state_default, sizeof(state_default), "/var/lib/tentaflake-worker-%s", s->name);
                s->o.state_dir = state_default;
        }
        if (geteuid() != 0) {
                log_error("serve: the %s sandbox needs root", s->o.sandbox);
                goto out;
        }
        if (streq(s->o.sandbox, "runsc") && !s->o.system_mounts_identity && !s->o.no_system_mounts)
                log_warning("serve: the system mounts carry no identity (--system-mounts-identity): the environment "
                            "digest records only their host paths");
        if (build_config(s, &e) < 0) {
                log_error("serve: %s", e.message);
                ret = 2;
                goto out;
        }
        if (check_token_not_mounted(s, &e) < 0) {
                log_error("serve flags: %s", e.message);
                ret = 2;
                goto out;
        }
        if (mkdir(s->o.state_dir, 0700) < 0 && errno != EEXIST) {
                log_error("serve: cannot create --state-dir '%s': %m", s->o.state_dir);
                goto out;
        }
        if (lock_state_dir(s, &e) < 0) {
                log_error("serve: %s", e.message);
                goto out;
        }
        if (path_join_buf(s->scratch_path, sizeof(s->scratch_path), s->o.state_dir, "scratch") < 0 ||
            path_join_buf(s->runsc_root, sizeof(s->runsc_root), s->o.state_dir, "runsc") < 0) {
                log_error("serve: --state-dir '%s' is too long", s->o.state_dir);
                goto out;
        }
        if ((mkdir(s->scratch_path, 0700) < 0 && errno != EEXIST) ||
            (s->scratch_fd = open(s->scratch_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
                log_error("serve: cannot open '%s': %m", s->scratch_path);
                goto out;
        }
        if (capsule_find_init(s->init_path, sizeof(s->init_path), &e) < 0) {
                log_error("serve: %s", e.message);
                goto out;
        }
        if (s->config->driver != DRIVER_RUNSC) {
                /* The engine answers, knows the runtime and holds the image, or no start. */
                Engine en = {};
                _cleanup_free_ char *version = NULL;
                int r = engine_init(&en, s->config, s->o.engine_runtime, &e);
                if (r >= 0)
                        r = engine_server_version(&en, &version, &e);
                if (r >= 0 && engine_runtime_known(&en) <= 0)
                        r = tfw_error(&e, ENOENT, "runtime_unavailable", "%s does not know the runtime '%s'",
                                      s->o.sandbox, en.runtime);
                if (r >= 0)
                        r = engine_image_check(&en, &e);
                if (r < 0) {
                        log_error("serve: sandbox unavailable: %s", e.message);
                        engine_done(&en);
                        goto out;
                }
                /* The engine's version and the runtime it is asked for: another --engine-runtime is
                 * another environment digest. */
                _cleanup_free_ char *entry = NULL;
                (void) engine_runtime_entry(&en, &entry);
                snprintf(s->runtime_version, sizeof(s->runtime_version), "%s, runtime %s%s%s",
                         version ? version : "unknown", en.runtime, entry ? " " : "", entry ? entry : "");
                unsigned removed = 0;
                if (engine_cleanup_stale(&en, &removed, &e) < 0)
                        log_warning("serve: start-up cleanup: %s", e.message);
                else if (removed)
                        log_notice("serve: removed %u container(s) left by a previous run", removed);
                engine_done(&en);
        } else {
                Runsc rt = {};
                if (runsc_init(&rt, s->config, s->runsc_root, &e) < 0) {
                        log_error("serve: sandbox unavailable: %s", e.message);
                        goto out;
                }
                runsc_version(&rt, s->runtime_version, sizeof(s->runtime_version));
                unsigned removed = 0;
                if (capsule_cleanup_stale(&rt, s->scratch_fd, &removed, &e) < 0)
                        log_warning("serve: start-up cleanup: %s", e.message);
                else if (removed)
                        log_notice("serve: removed %u container(s) left by a previous run", removed);
                runsc_done(&rt);
        }
        if (http_global_init(&e) < 0) {
                log_error("serve: libcurl cannot be initialised: %s", e.message);
                goto out;
        }

        /* Signals are taken synchronously by this thread; every other thread blocks them. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        pthread_sigmask(SIG_BLOCK, &mask, NULL);

        lanes = calloc((size_t) s->o.concurrency, sizeof(Lane));
        if (!lanes)
                goto out;
        for (long i = 0; i < s->o.concurrency; i++) {
                Lane *l = &lanes[i];
                l->s = s;
                l->index = (unsigned) (i + 1);
                if (s->o.concurrency > 1)
                        snprintf(l->label, sizeof(l->label), "%s-%ld", s->o.label, i + 1);
                else
                        snprintf(l->label, sizeof(l->label), "%s", s->o.label);
                pthread_mutex_init(&l->lock, NULL);
                pthread_cond_init(&l->cond, NULL);
                if (http_new(s->o.server, s->token, s->o.client_timeout_secs, &l->http, &e) < 0) {
                        log_error("serve: %s", e.message);
                        goto out;
                }
                if (http_set_unix_socket(l->http, s->o.server_socket) < 0) /* issue 13 */
                        goto out;
        }
        log_info("serve: %ld lane(s) as '%s' claiming from %s", s->o.concurrency, s->o.label, s->o.server);
        for (long i = 0; i < s->o.concurrency; i++)
                pthread_create(&lanes[i].thread, NULL, lane_main, &lanes[i]);

        /* Wait for signals or for every lane to end (fatal). */
        struct timespec poll_ts = {.tv_sec = 1};
        usec_t kill_deadline = 0;
        /* issue 13: the watchdog is fed from this loop, which wakes at least every second
         * (WatchdogSec must be 2 s or more); it runs whatever the lanes are doing. */
        uint64_t wd_usec = 0;
        bool watchdog = sd_watchdog_enabled(0, &wd_usec) > 0;
        for (;;) {
                bool all_done = true;
                if (watchdog)
                        (void) sd_notify(0, "WATCHDOG=1");
                for (long i = 0; i < s->o.concurrency; i++)
                        if (pthread_tryjoin_np(lanes[i].thread, NULL) == EBUSY)
                                all_done = false;
                        else
                                lanes[i].thread = 0;
                if (all_done)
                        break;
                if (kill_deadline && now_monotonic() > kill_deadline) {
                        log_error("serve: lanes did not stop within --shutdown-grace-secs; exiting");
                        _exit(1);
                }
                int sig = sigtimedwait(&mask, NULL, &poll_ts);
                if (sig <= 0)
                        continue;
                if (atomic_load(&s->stopping) < 1) {
                        log_notice("serve: signal %d: finishing the running checks, then exiting (again to stop now)", sig);
                        (void) sd_notify(0, "STOPPING=1\nSTATUS=finishing the running checks"); /* issue 13 */
                        pthread_mutex_lock(&s->lock);
                        atomic_store(&s->stopping, 1);
                        pthread_cond_broadcast(&s->cond);
                        pthread_mutex_unlock(&s->lock);
                } else {
                        log_notice("serve: signal %d: stopping the running checks and handing their jobs back", sig);
                        atomic_store(&s->stopping, 2);
                        kill_deadline = now_monotonic() + (usec_t) s->o.shutdown_grace_secs * USEC_PER_SEC;
                        for (long i = 0; i < s->o.concurrency; i++) {
                                Lane *l = &lanes[i];
                                pthread_mutex_lock(&l->lock);
                                if (l->running) {
                                        l->interrupted = true;
                                        lane_kill_container(l);
                                        pthread_cond_broadcast(&l->cond);
                                }
                                pthread_mutex_unlock(&l->lock);
                        }
                }
        }
        for (long i = 0; lanes && i < s->o.concurrency; i++)
                if (lanes[i].thread)
                        pthread_join(lanes[i].thread, NULL);
        if (atomic_load(&s->fatal)) {
                log_error("serve: %s", s->fatal_message);
                ret = 1;
        } else
                ret = 0;
out:
        if (lanes)
                for (long i = 0; i < s->o.concurrency; i++)
                        http_free(lanes[i].http);
        free(lanes);
        if (s->token) {
                explicit_bzero(s->token, strlen(s->token));
                free(s->token);
        }
        signing_key_free(s->key);
        free(s->key_path);
        config_free(s->config);
        safe_close(s->scratch_fd);
        safe_close(s->lock_fd);
        free(s);
        the_serve = NULL;
        return ret;
}
