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
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <sys/random.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "capsule/driver.h"
#include "capsule/egress.h"
#include "capsule/init-path.h"
#include "capsule/oci-spec.h"
#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/log.h"
#include "common/path-util.h"
#include "common/root-dir.h"
#include "artifacts/attest.h"
#include "validation/checkout.h"
#include "exec/exec.h"
#include "parser/image-ref.h"
#include "validation/http.h"
#include "validation/job.h"
#include "validation/serve.h"
#include "artifacts/signing.h"



typedef struct Serve {
        ServeOptions o;
        const char *token;   /* the caller's; wiped by it */
        ServeWalls walls;    /* the key and the walls, built from the flags */
        char init_path[PATH_MAX];
        char scratch_path[PATH_MAX];
        int scratch_fd;
        int lock_fd;         /* flock on <state_dir>/serve.lock, held until exit */
        int runtime_lock_fd; /* <state_dir>/runtime.lock, held by every runsc process too */
        char runsc_root[PATH_MAX];
        CapsuleDriver driver; /* shared by the lanes: its operations only read it */
        char runtime_version[1024];
        atomic_int stopping;  /* 1: finish current jobs; 2: kill them */
        atomic_int fatal;     /* a lane hit 401/403 or another fatal error */
        atomic_bool ready_sent; /* READY=1 went to systemd (the first claim is under way) */
        char fatal_message[2600];
        pthread_mutex_t lock;
        pthread_cond_t cond;  /* signalled on stop */
} Serve;

static Serve *the_serve;

/* ---- small helpers ------------------------------------------------------------------------ */

/* The worker's events (one line each: a job's outcome, a lane's trouble, a signal taken) go to
 * the caller's report function, which logs them (cli/serve.c): this library logs nothing
 * itself. */
static void say(int level, const char *fmt, ...) _printf_(2, 3);
static void say(int level, const char *fmt, ...) {
        char line[4096];
        va_list ap;
        const Serve *s = the_serve;

        if (!s || !s->o.report)
                return;
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        s->o.report(s->o.report_userdata, level, line);
}

/* The driver's start-up self-check: the first failing line is why the worker does not start. */
static void check_line(void *userdata, const char *check, bool ok, const char *detail) {
        TfwError *e = userdata;
        if (!ok && !e->message[0])
                (void) tfw_error(e, ENOENT, "runtime_unavailable", "sandbox unavailable (%s): %s", check, detail);
}

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




void serve_options_default(ServeOptions *o) {
        *o = (ServeOptions){
                .label = NULL, .sandbox = "runsc", .concurrency = 1,
                .max_timeout_secs = 3600, .max_memory_mb = 8192, .max_cpu_secs = 3600, .max_pids = 4096,
                .default_timeout_secs = 600, .default_memory_mb = 2048, .default_pids = 512, .default_cpu_secs = 600,
                .output_mb = 8, .tmp_mb = 512, .lease_secs = 120, .wait_secs = 20, .retry_after_secs = 10,
                .backoff_max_secs = 30, .client_timeout_secs = 120, .max_checkout_mb = 4096,
                .shutdown_grace_secs = 15, .sandbox_uid = 65534, .sandbox_gid = 65534,
                .result_tail_kb = 8, .open_files = 1024, .file_size_mb = 1024, .engine_timeout_secs = 60,
                .warm_secs = CONFIG_DEFAULT_WARM_SECONDS,
        };
}

/* A config name from the label: lowercase [a-z0-9-], at most 48. */
static void name_from_label(const char *label, char out[static CONFIG_NAME_MAX + 1]) {
        /* The config name (cgroup group, container names and labels, the default state
         * directory) from the label: "serve-" and the label in [a-z0-9-]. When that folding
         * changed anything (case, punctuation, length), 8 hex digits of the label's sha256
         * follow, so that two labels never share a name (ci.1, CI-1 and ci-1 are three
         * workers): a second worker's start-up cleanup would remove the first one's capsules. */
        const char *prefix = "serve-";
        const size_t hashed_max = CONFIG_NAME_MAX - 9; /* room for "-" and 8 hex digits */
        size_t n = strlen(prefix);
        bool changed = false;

        memcpy(out, prefix, n);
        for (const char *p = label; *p; p++) {
                char c = *p;
                if (n >= CONFIG_NAME_MAX) {
                        changed = true;
                        break;
                }
                char f = c >= 'A' && c <= 'Z' ? (char) (c - 'A' + 'a') : c;
                if (!((f >= 'a' && f <= 'z') || (f >= '0' && f <= '9')))
                        f = '-';
                changed = changed || f != c;
                out[n++] = f;
        }
        out[n] = 0;
        if (!changed)
                return;
        uint8_t h[SHA256_DIGEST_SIZE];
        char hex[SHA256_HEX_SIZE];
        sha256_buffer(label, strlen(label), h);
        sha256_to_hex(h, hex);
        n = MIN(n, hashed_max);
        snprintf(out + n, CONFIG_NAME_MAX + 1 - n, "-%.8s", hex);
}

/* The walls, as a worker config (contract section 2) built from the flags and parsed by the
 * same strict parser, so serve and the inbox plane get the same defaults and the same
 * refusals (a mount that would expose the key, for one). */
static int build_config(const ServeOptions *o, ServeWalls *w, TfwError *e) {
        _cleanup_json_ json_t *cfg = NULL, *mounts = json_array();
        static const char *const defaults[] = {"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc/ld.so.cache",
                                               "/etc/alternatives", "/etc/ssl/certs", NULL};
        char ws[PATH_MAX], res[PATH_MAX], sz[64];

        if (!mounts)
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        bool engine = !streq(o->sandbox, "runsc") && !streq(o->sandbox, "runc");
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
        cfg = json_pack("{s:i, s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:s}", "version", 1, "name", w->name, "workspace", ws,
                        "state_dir", o->state_dir, "results_dir", res, "container_uid", (json_int_t) o->sandbox_uid,
                        "container_gid", (json_int_t) o->sandbox_gid, "signing_key", o->key, "signing_identity",
                        w->key->identity);
        if (!cfg)
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        json_t *rt = engine             ? json_pack("{s:s, s:s}", "driver", o->sandbox, "image", o->image)
                     : !o->platform ? json_pack("{s:s, s:O}", "driver", o->sandbox, "system_mounts", mounts)
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
        /* Egress for the policies that ask for network (docs/egress.md); job_walls takes it away
         * from the others. */
        if (o->n_allow_hosts) {
                json_t *allow = json_array();
                for (size_t i = 0; allow && i < o->n_allow_hosts; i++)
                        json_array_append_new(allow, json_string(o->allow_hosts[i]));
                json_object_set_new(cfg, "network", json_pack("{s:o}", "allow", allow));
        }

        _cleanup_free_ char *text = json_dumps(cfg, JSON_COMPACT);
        if (!text)
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        int r = config_parse_buffer(text, strlen(text), &w->config, e);
        if (r < 0)
                tfw_error_prefix(e, "serve flags: ");
        return r;
}

/* The token file is refused inside every mount the capsule gets, as the key is (the config
 * parser refuses a mount that contains signing_key): a `--mount` of the token's directory, or
 * of any directory above it, would hand the credential to the check. Both the spelling and the
 * resolved path of each mount are compared with the token's resolved path. */
static int check_token_not_mounted(const ServeOptions *o, const Config *c, TfwError *e) {
        char a[PATH_MAX + 16], b[PATH_MAX + 16];
        if (!o->token_file)
                return 0;
        _cleanup_free_ char *token = realpath(o->token_file, NULL);
        if (!token)
                return tfw_error(e, errno, "token_file", "--token-file '%s': %m",
                                 printable_name(o->token_file, a, sizeof(a)));
        for (size_t i = 0; i < c->n_system_mounts; i++) {
                const char *host = c->system_mounts[i].host;
                _cleanup_free_ char *real = realpath(host, NULL);
                if (path_is_below_or_equal(token, host) || (real && path_is_below_or_equal(token, real)))
                        return tfw_error(e, EINVAL, "inconsistent",
                                         "mount host path '%s' contains --token-file '%s'; the check would see it",
                                         printable_name(host, a, sizeof(a)), printable_name(token, b, sizeof(b)));
        }
        return 0;
}


int serve_walls_load(ServeOptions *o, ServeWalls *w, TfwError *e) {
        *w = (ServeWalls){0};
        if (signing_key_load(o->key, &w->key, e) < 0)
                return -EINVAL;
        /* The config parser wants the key's absolute path (it refuses mounts that would expose it). */
        w->key_path = realpath(o->key, NULL);
        if (!w->key_path)
                return tfw_error(e, errno, "key", "key '%s': %m", o->key);
        o->key = w->key_path;
        if (!o->label)
                o->label = w->key->identity;
        if (!signing_identity_is_valid(o->label) || strlen(o->label) > VJOB_TEXT_MAX)
                return tfw_error(e, EINVAL, "usage", "--label must be 1..%d printable characters without spaces",
                                 VJOB_TEXT_MAX);
        name_from_label(o->label, w->name);
        if (!o->state_dir) {
                snprintf(w->state_dir, sizeof(w->state_dir), "/var/lib/tentaflake-worker-%s", w->name);
                o->state_dir = w->state_dir;
        }
        if (build_config(o, w, e) < 0) {
                e->code = "usage";
                return -EINVAL;
        }
        /* The walls the inbox config has no key for (contract section 8's CI worker flags). */
        w->config->limits.open_files = (uint64_t) o->open_files;
        w->config->limits.file_size = (uint64_t) o->file_size_mb << 20;
        w->config->engine_timeout_seconds = (uint64_t) o->engine_timeout_secs;
        /* As the key is (the config parser), the token is refused inside every mount. */
        if (check_token_not_mounted(o, w->config, e) < 0) {
                tfw_error_prefix(e, "serve flags: ");
                e->code = "usage";
                return -EINVAL;
        }
        return 0;
}

void serve_walls_done(ServeWalls *w) {
        signing_key_free(w->key);
        free(w->key_path);
        config_free(w->config);
        *w = (ServeWalls){0};
}

/* ---- one worker per state directory (issue 13) ------------------------------------------- */

/* One worker per state directory. Labels that fold to the same name (`ci.1`, `CI-1`) share the
 * default state directory, and a second worker's start-up cleanup would remove the first one's
 * running containers: so before that cleanup, take a non-blocking exclusive flock on
 * <state_dir>/serve.lock (which holds the holder's label, for the message) and refuse to start
 * when another worker holds it. The fd is O_CLOEXEC (runsc never inherits it) and the lock
 * lasts as long as the process. */
static int lock_state_dir(Serve *s, int dfd, TfwError *e) {
        char shown[PATH_MAX + 16], other[VJOB_TEXT_MAX + 32] = "";
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
                                 "--state-dir '%s' is in use by the running worker labelled '%s': give this worker "
                                 "(label '%s') a --state-dir of its own",
                                 printable_name(s->o.state_dir, shown, sizeof(shown)), other[0] ? other : "(unknown)",
                                 s->o.label);
        }
        if (ftruncate(fd, 0) < 0 || dprintf(fd, "%s\n", s->o.label) < 0)
                return tfw_error(e, errno, "state_dir", "cannot write '%s/serve.lock': %m",
                                 printable_name(s->o.state_dir, shown, sizeof(shown)));
        s->lock_fd = TAKE_FD(fd);
        return 0;
}

/* How long a start waits for a killed predecessor's runtime processes (as the inbox daemon's
 * jobs.lock). */
#define RUNTIME_LOCK_WAIT_USEC (30 * USEC_PER_SEC)

/* Every runsc process the worker starts holds <state_dir>/runtime.lock (capsule_driver_hold)
 * for as long as it lives. They die with the lane that started them (PR_SET_PDEATHSIG), also
 * when serve is killed, but a process being killed still completes the system call it is in
 * (runsc writing its container's state), and one in an uninterruptible wait lives on: the
 * start-up cleanup waits until the last of a predecessor's is gone, or it could look for their
 * containers before they are made, and leave them to the start after. Taken once serve.lock
 * is ours (no other worker runs on this directory, only what a dead one left). Bounded; then
 * the start fails having removed nothing. */
static int take_runtime_lock(Serve *s, int dfd, TfwError *e) {
        char shown[PATH_MAX + 16];
        _cleanup_close_ int fd = openat(dfd, "runtime.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
        if (fd < 0)
                return tfw_error(e, errno, "state_dir", "cannot open '%s/runtime.lock': %m",
                                 printable_name(s->o.state_dir, shown, sizeof(shown)));
        int r = flock(fd, LOCK_EX | LOCK_NB) < 0 ? -errno : 0;
        if (r == -EWOULDBLOCK) {
                say(LOG_NOTICE, "serve: waiting up to %llu s for the runtime processes of a previous run (they hold "
                                "'%s/runtime.lock')",
                    (unsigned long long) (RUNTIME_LOCK_WAIT_USEC / USEC_PER_SEC),
                    printable_name(s->o.state_dir, shown, sizeof(shown)));
                /* Not yet READY=1: systemd's start timeout applies (90 s), not the watchdog. */
                (void) sd_notify(0, "STATUS=waiting for the runtime processes of a previous run (runtime.lock)");
                r = flock_exclusive_within(fd, RUNTIME_LOCK_WAIT_USEC);
        }
        if (r == -ETIMEDOUT)
                return tfw_error(e, EBUSY, "state_dir",
                                 "runtime processes of a previous run on --state-dir '%s' are still running after %llu s "
                                 "(they hold '%s/runtime.lock'); nothing was removed",
                                 printable_name(s->o.state_dir, shown, sizeof(shown)),
                                 (unsigned long long) (RUNTIME_LOCK_WAIT_USEC / USEC_PER_SEC), shown);
        if (r < 0)
                return tfw_error(e, -r, "state_dir", "cannot lock '%s/runtime.lock': %s",
                                 printable_name(s->o.state_dir, shown, sizeof(shown)), strerror(-r));
        s->runtime_lock_fd = TAKE_FD(fd);
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
        const VJob *job;
        ExecCancel cancel; /* ends the running check (exec/exec.h) */
        bool started, joined; /* its thread was created / has been joined */

        /* The capsule started ahead of the lane's next job (--warm-secs), in its own scratch
         * directory <scratch>/<warm_dir> whose checkout/ is bound at /snapshot. Only the lane's
         * thread uses it; warm_cid (under lock) lets the shutdown tear it down. */
        CapsuleWarm *warm;
        char warm_dir[64];
        char warm_cid[256];
        usec_t warm_until; /* monotonic: keep one until then; 0: none wanted */
        bool warm_network; /* the lane's last job had egress: so is the next capsule started */
        Config warm_config; /* the walls it was started with (a shallow copy of the worker's) */
} Lane;

/* Called WITHOUT l->lock held: ending a capsule can take the teardown's bound, and the main
 * thread (which feeds the watchdog) takes l->lock on a second signal. ExecCancel has its own
 * lock. */
static void lane_kill_container(Lane *l) {
        exec_cancel(&l->cancel);
}

/* The shutdown grace is over and serve exits without waiting for its lanes: end every capsule
 * still there first (runsc and engines alike), each lane's lock taken with a bound (a lane's
 * heartbeat may be in the middle of the same teardown). */
static void lanes_teardown_before_exit(Lane *lanes, long n) {
        for (long i = 0; i < n; i++) {
                TfwError e = {0};
                if (exec_cancel_teardown(&lanes[i].cancel, lanes[i].s->driver.ops->teardown_bound(&lanes[i].s->driver),
                                         &e) < 0)
                        say(LOG_ERR, "serve %s: %s", lanes[i].label, e.message);
                /* And a capsule that waited for the lane's next job. */
                char cid[sizeof(lanes[i].warm_cid)];
                pthread_mutex_lock(&lanes[i].lock);
                snprintf(cid, sizeof(cid), "%s", lanes[i].warm_cid);
                pthread_mutex_unlock(&lanes[i].lock);
                if (cid[0] && lanes[i].s->driver.ops->teardown(&lanes[i].s->driver, cid, 0, NULL, &e) < 0)
                        say(LOG_ERR, "serve %s: %s", lanes[i].label, e.message);
        }
}

/* ---- the lane's capsule started ahead (--warm-secs) ----------------------------------------- */

/* Bounded (capsule_warm_end): a capsule that cannot be ended is said, with its id, and left for
 * the next start's cleanup; the lane goes on. */
static void lane_warm_drop(Lane *l) {
        TfwError e = {0};
        if (!l->warm)
                return;
        if (capsule_warm_end(TAKE_PTR(l->warm), &e) < 0)
                say(LOG_WARNING, "serve %s: %s", l->label, e.message);
        pthread_mutex_lock(&l->lock);
        l->warm_cid[0] = 0;
        pthread_mutex_unlock(&l->lock);
        (void) rm_rf_at(l->s->scratch_fd, l->warm_dir);
}

/* The lane's checkout kept between jobs (validation/checkout.h checkout_update): the directory
 * <scratch>/lane-<i>-tree holding checkout/ and its index, made when missing; the absolute path
 * of checkout/ into co. Returns the directory's fd. */
static int lane_tree_open(Lane *l, char *co, size_t co_size) {
        Serve *s = l->s;
        char name[64], path[PATH_MAX];
        snprintf(name, sizeof(name), "lane-%u-tree", l->index);
        if (mkdirat(s->scratch_fd, name, 0700) < 0 && errno != EEXIST)
                return -errno;
        _cleanup_close_ int fd = open_dir_at(s->scratch_fd, name);
        if (fd < 0)
                return fd;
        if (mkdirat(fd, "checkout", 0750) < 0 && errno != EEXIST)
                return -errno;
        _cleanup_close_ int co_fd = open_dir_at(fd, "checkout");
        if (co_fd < 0)
                return co_fd;
        int r = ensure_owner_mode(co_fd, 0, s->walls.config->container_gid, 0750);
        if (r < 0)
                return r;
        if (path_join_buf(path, sizeof(path), s->scratch_path, name) < 0 || path_join_buf(co, co_size, path, "checkout") < 0)
                return -ENAMETOOLONG;
        return TAKE_FD(fd);
}

/* The walls config with network only when asked for: a policy without it gets no proxy, no
 * stream and no variable (jc is a shallow copy; nothing of it is freed). */
static void walls_network(const Serve *s, bool network, Config *jc) {
        *jc = *s->walls.config;
        if (!network)
                jc->network = (ConfigNetwork) { .max_upload_bytes = jc->network.max_upload_bytes,
                                                .max_download_bytes = jc->network.max_download_bytes };
}

/* Before each claim: one capsule waits while the window after the last job is open (runsc
 * only, never while stopping), none otherwise. It has the default walls, with network when the
 * lane's last job had it; a job whose walls differ starts cold. */
static void lane_warm_maintain(Lane *l) {
        Serve *s = l->s;
        bool wanted = s->o.warm_secs > 0 && s->driver.ops->boots_ahead && !atomic_load(&s->stopping) &&
                      l->warm_until > now_monotonic();
        if (!wanted) {
                lane_warm_drop(l);
                return;
        }
        /* The next job likely asks for the network the last one had; a capsule booted for the
         * other kind goes first. The walls live in the lane: the capsule points at them. */
        Config *wc = &l->warm_config;
        walls_network(s, l->warm_network, wc);
        if (l->warm && !capsule_warm_fits(l->warm, wc))
                lane_warm_drop(l);
        if (l->warm)
                return;
        char path[PATH_MAX], co[PATH_MAX], warm_id[CAPSULE_JOB_ID_MAX + 1];
        uint8_t rnd[6];
        _cleanup_close_ int dfd = -EBADF, cfd = -EBADF;
        TfwError e = {0};
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t) sizeof(rnd))
                return;
        snprintf(warm_id, sizeof(warm_id), "l%u-warm-%02x%02x%02x%02x%02x%02x", l->index, rnd[0], rnd[1], rnd[2],
                 rnd[3], rnd[4], rnd[5]);
        snprintf(l->warm_dir, sizeof(l->warm_dir), "lane-%u-warm", l->index);
        (void) rm_rf_at(s->scratch_fd, l->warm_dir);
        /* It binds the lane's kept checkout (lane_tree_open), which the next job's checkout
         * changes into its tree before the job is given. */
        if (mkdirat(s->scratch_fd, l->warm_dir, 0700) < 0 || (dfd = open_dir_at(s->scratch_fd, l->warm_dir)) < 0 ||
            (cfd = lane_tree_open(l, co, sizeof(co))) < 0 ||
            path_join_buf(path, sizeof(path), s->scratch_path, l->warm_dir) < 0) {
                (void) rm_rf_at(s->scratch_fd, l->warm_dir);
                return;
        }
        if (exec_warm_start(wc, &s->driver, dfd, path, warm_id, co, NULL, NULL, &l->warm, &e) < 0) {
                say(LOG_WARNING, "serve %s: cannot start a capsule ahead: %s", l->label, e.message);
                (void) rm_rf_at(s->scratch_fd, l->warm_dir);
                l->warm_until = 0; /* not again before the next job */
                return;
        }
        pthread_mutex_lock(&l->lock);
        snprintf(l->warm_cid, sizeof(l->warm_cid), "%s", capsule_warm_container(l->warm));
        pthread_mutex_unlock(&l->lock);
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
            http_set_unix_socket(h, s->o.server_socket) < 0)
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
                        pthread_mutex_unlock(&l->lock);
                        lane_kill_container(l);
                        pthread_mutex_lock(&l->lock);
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
                        say(LOG_WARNING, "serve %s: heartbeat of job '%s' failed: %s", l->label, l->job->id, e.message);
                else if (status == 409)
                        l->lost = true;
                else if (status == 200 && ans && json_is_true(json_object_get(ans, "stale")))
                        l->stale = true;
                else if (status != 200)
                        say(LOG_WARNING, "serve %s: heartbeat of job '%s': HTTP %ld", l->label, l->job->id, status);
                if (l->stale || l->lost || l->unauthorized) {
                        pthread_mutex_unlock(&l->lock);
                        lane_kill_container(l);
                        pthread_mutex_lock(&l->lock);
                }
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
        say(LOG_NOTICE, "serve %s: job '%s' attempt %" PRId64 ": fail%s: %s", l->label, j->id, j->attempt,
                   permanent ? " (permanent)" : "", reason);
        int r = post_json(l, l->http, path, body, &status, NULL, &e);
        if (r == -EACCES) {
                set_fatal(l->s, e.message);
                return OUT_FATAL;
        }
        if (r < 0) {
                say(LOG_WARNING, "serve %s: cannot report the failure of job '%s': %s", l->label, j->id, e.message);
                return OUT_DROPPED;
        }
        if (status == 409) {
                say(LOG_NOTICE, "serve %s: job '%s': lease lost, failure dropped", l->label, j->id);
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
                say(LOG_NOTICE, "serve %s: job '%s': completion not accepted (%s), result dropped", l->label, j->id,
                           r < 0 ? e.message : status == 409 ? "lease lost" : "server error");
                return OUT_DROPPED;
        }
        say(LOG_NOTICE, "serve %s: job '%s' attempt %" PRId64 ": %s", l->label, j->id, j->attempt, status_word);
        return OUT_COMPLETED;
}

/* Refusals before anything is downloaded: what this worker must not run. */
static int refuse_before_download(Lane *l, const VJob *j, char *msg, size_t size) {
        const ServeOptions *o = &l->s->o;
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
        if (j->run.network && !capsule_config_egress(l->s->walls.config))
                return snprintf(msg, size, "the policy asks for network; this worker has no --allow-host, so its capsules "
                                           "have none"), 1;
        if (j->run.image && !l->s->driver.ops->runs_images)
                return snprintf(msg, size, "the policy pins image '%s'; the %s sandbox runs no images", j->run.image,
                                l->s->driver.ops->name), 1;
        if (j->run.image && !image_ref_is_pinned(j->run.image))
                return snprintf(msg, size, "the policy's image '%s' is not pinned by digest (NAME@sha256:<64 hex>)",
                                j->run.image), 1;
        if (j->run.image) {
                /* Present in the engine's local store: this worker never pulls. */
                Config c = *l->s->walls.config;
                TfwError e = {};
                c.image = j->run.image;
                if (l->s->driver.ops->prepare(&l->s->driver, &c, &e) < 0)
                        return snprintf(msg, size, "the policy's image cannot run here: %s", e.message), 1;
        }
        return 0;
}

/* The job's walls: the policy's limits within the ceilings, 0 meaning the default. */
static void job_walls(const Serve *s, const VJob *j, Config *jc, uint64_t *ret_timeout) {
        walls_network(s, j->run.network, jc);
        *ret_timeout = j->run.timeout_secs ? j->run.timeout_secs : (uint64_t) s->o.default_timeout_secs;
        jc->limits.memory = (j->run.memory_mb ? j->run.memory_mb : (uint64_t) s->o.default_memory_mb) << 20;
        jc->limits.memory_swap = jc->limits.memory;
        jc->limits.pids = j->run.max_pids ? j->run.max_pids : (uint64_t) s->o.default_pids;
        if (j->run.image)
                jc->image = j->run.image;
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

static json_t *limits_json(const ExecResult *x) {
        json_t *o = json_object();
        for (size_t i = 0; o && i < x->n_limits; i++) {
                const ExecLimit *lim = &x->limits[i];
                json_object_set_new(o, lim->name,
                                    json_pack("{s:o, s:s}", "value",
                                              lim->text ? json_string(lim->text) : json_integer((json_int_t) lim->value),
                                              "enforced", lim->enforced));
        }
        return o;
}

/* RESULT of contract section 8: sent with complete, not signed, no authority. */
static json_t *result_json(const ExecResult *x, bool pass, const CheckoutSummary *cs, const char *digest, int log_fd,
                           size_t tail_bytes, const Config *jc, int egress_fd) {
        const CapsuleResult *cr = &x->capsule;
        char started[RFC3339_MAX], finished[RFC3339_MAX];
        _cleanup_free_ char *tail = read_tail(log_fd, tail_bytes);

        format_rfc3339(x->started_at, started);
        format_rfc3339(x->finished_at, finished);
        json_t *res = json_pack(
                "{s:s, s:s, s:s?, s:s?, s:s, s:s, s:I, s:s, s:o, s:{s:I, s:I, s:I}, s:{s:I, s:b, s:s}}",
                "status", capsule_status_to_string(cr->status), "result", pass ? "pass" : "fail", "reason", cr->reason,
                "message", cr->message[0] ? cr->message : NULL, "started_at", started, "finished_at", finished,
                "duration_ms", (json_int_t) x->duration_ms, "environment_digest", digest, "limits", limits_json(x),
                "checkout", "bytes", (json_int_t) cs->bytes, "files", (json_int_t) cs->files, "symlinks",
                (json_int_t) cs->symlinks, "log", "bytes", (json_int_t) cr->log_bytes, "truncated", cr->log_truncated,
                "tail", tail ? tail : "");
        if (res) {
                json_object_set_new(res, "exit_code", cr->exit_code >= 0 ? json_integer(cr->exit_code) : json_null());
                json_object_set_new(res, "signal", cr->signal ? json_integer(cr->signal) : json_null());
                json_object_set_new(res, "peak_memory_bytes",
                                    x->have_peak_memory ? json_integer((json_int_t) x->peak_memory_bytes) : json_null());
                /* The connections of a job that had egress (docs/egress.md), else null. */
                json_t *net = cr->egress.enabled ? egress_result_json(jc, &cr->egress, egress_fd) : NULL;
                json_object_set_new(res, "network", net ? net : json_null());
        }
        return res;
}

/* The capsule's own id for a lane's job: unique among the lanes, whatever the server's id
 * looks like (capsule/id.h's rule). */
static void lane_capsule_id(const Lane *l, const VJob *j, char out[static 64]) {
        uint8_t h[SHA256_DIGEST_SIZE];
        char hex[SHA256_HEX_SIZE];
        sha256_buffer(j->id, strlen(j->id), h);
        sha256_to_hex(h, hex);
        snprintf(out, 64, "l%u-%.16s", l->index, hex);
}

/* What the steps of one job share, from its plan to the lane's cleanup. The plan points into it
 * (the walls, argv, the lane's paths), so it lives in run_job's frame and never moves. */
typedef struct JobRun {
        char msg[2600];          /* the text of fault (or of a refusal), when it is not a constant */
        const char *fault;       /* STEP_FAIL: the job fails with this reason */
        bool permanent;          /* ... and never again (no retry) */
        Outcome out;             /* STEP_DONE: what the job came to */
        char lane_dir[64], lane_path[PATH_MAX], snap_path[PATH_MAX];
        char local_id[64];
        char digest[ENV_DIGEST_SIZE];
        char **argv;             /* owned; its strings are the job's */
        Config jc;
        uint64_t timeout;
        bool use_warm;           /* the lane's capsule started ahead runs this job */
        ExecPlan plan;
        VManifest *m;
        int lane_fd, co_fd, log_fd;
        int egress_fd;           /* the job's connections (capsule/egress.h), with network */
        CheckoutSummary cs;
        ExecResult x;
        pthread_t hb;
        bool hb_started;
} JobRun;

/* How a step ends: the next step; a fail (r->fault, r->permanent) still to send; or r->out
 * already decided (completed, dropped, fatal). */
typedef enum Step {
        STEP_GO_ON,
        STEP_FAIL,
        STEP_DONE,
} Step;

/* What a JobRun owns goes when run_job returns, after the lane is cleaned. */
static void job_run_done(JobRun *r) {
        free(r->argv);
        safe_close(r->log_fd);
        safe_close(r->egress_fd);
        safe_close(r->co_fd);
        safe_close(r->lane_fd);
        vmanifest_free(r->m);
}

/* A fault whose reason is formatted into r->msg (errno is untouched until then: %m works). */
static Step job_fault(JobRun *r, bool permanent, const char *fmt, ...) _printf_(3, 4);
static Step job_fault(JobRun *r, bool permanent, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
        va_end(ap);
        r->fault = r->msg;
        r->permanent = permanent;
        return STEP_FAIL;
}

/* Step: refuse what this worker must not run (the server's refusal, the ceilings), before any download. */
static Step job_refuse(Lane *l, const VJob *j, JobRun *r) {
        if (j->refusal) {
                r->fault = j->refusal;
                r->permanent = true;
                return STEP_FAIL;
        }
        if (refuse_before_download(l, j, r->msg, sizeof(r->msg))) {
                r->fault = r->msg;
                return STEP_FAIL;
        }
        return STEP_GO_ON;
}

/* Step: plan the run (argv, walls, capsule, environment digest) and refuse a pin it does not match. */
static Step job_plan(Lane *l, const VJob *j, JobRun *r) {
        Serve *s = l->s;

        /* argv, without a shell; the policy's env goes after the constant one (extra_env). */
        r->argv = calloc(j->run.n_argv + 1, sizeof(char *));
        if (!r->argv) {
                r->fault = "out of memory";
                return STEP_FAIL;
        }
        for (size_t i = 0; i < j->run.n_argv; i++)
                r->argv[i] = j->run.argv[i];
        lane_capsule_id(l, j, r->local_id);
        job_walls(s, j, &r->jc, &r->timeout);
        /* The lane's capsule started ahead, when the job's walls are its walls (the defaults). */
        r->use_warm = l->warm && capsule_warm_fits(l->warm, &r->jc) && !r->jc.image;
        if (r->use_warm)
                snprintf(r->lane_dir, sizeof(r->lane_dir), "%s", l->warm_dir);
        else
                snprintf(r->lane_dir, sizeof(r->lane_dir), "lane-%u", l->index);

        /* The seed's rules: output beyond --output-mb and CPU beyond the CPU seconds end the
         * check (a signed fail), like time, memory and processes. */
        r->plan = (ExecPlan) {
                .config = &r->jc, .driver = &s->driver, .runtime_version = s->runtime_version,
                .tree_dir = r->snap_path, .scratch_fd = -EBADF, .scratch_path = r->lane_path,
                .job_id = r->local_id, .argv = r->argv, .extra_env = j->run.env, .check = j->check,
                .timeout_seconds = r->timeout, .cpu_seconds = (uint64_t) s->o.default_cpu_secs,
                .end_on_log_limit = true, .log_fd = -EBADF, .artifacts_fd = -EBADF, .cancel = &l->cancel,
        };
        /* The digest depends only on the flags and the policy: a pin this worker does not
         * produce is refused before anything is downloaded. */
        if (exec_plan_digest(&r->plan, r->digest) < 0) {
                r->fault = "cannot compute the environment digest";
                return STEP_FAIL;
        }
        if (j->run.environment_digest && !streq(j->run.environment_digest, r->digest))
                return job_fault(r, false, "the policy pins environment_digest %s; this worker produces %s",
                                 j->run.environment_digest, r->digest);
        return STEP_GO_ON;
}

/* Step: keep the lease: the heartbeat thread renews it from here until the job ends. */
static void job_heartbeat_start(Lane *l, const VJob *j, JobRun *r) {
        /* Started before the download: fetching a big tree takes time too. */
        exec_cancel_reset(&l->cancel);
        pthread_mutex_lock(&l->lock);
        l->job = j;
        l->running = true;
        l->done = l->stale = l->lost = l->unauthorized = false;
        /* A job claimed as the second signal came is stopped like the others. */
        l->interrupted = atomic_load(&l->s->stopping) >= 2;
        pthread_mutex_unlock(&l->lock);
        r->hb_started = pthread_create(&r->hb, NULL, heartbeat_main, l) == 0;
}

static int manifest_chunk(const char *p, size_t n, void *userdata, TfwError *e) {
        return vmanifest_reader_feed(userdata, p, n, e);
}

/* Step: fetch the tree's manifest and verify it (the job's tree, its paths, the tree id
 * recomputed). It is read as it arrives, and refused as soon as it shows more entries, bytes
 * or longer entries than the ceilings (validation/job.h), or another tree than the job's: a
 * lane holds at most the entries it accepts (docs/validation.md, "Memory"). */
static Step job_fetch_manifest(Lane *l, const VJob *j, JobRun *r) {
        _cleanup_(vmanifest_reader_freep) VManifestReader *rd = NULL;
        TfwError e = {0};
        char path[1024];
        long status = 0;
        int k;

        snprintf(path, sizeof(path), "/v1/repos/%s/trees/%s", j->repo, j->tree);
        if (vmanifest_reader_new(j->tree, &rd) < 0)
                return job_fault(r, false, "cannot fetch the manifest: out of memory");
        /* The byte cap of the transfer is the reader's own: it counts the same bytes. */
        k = http_get_stream(l->http, path, VMANIFEST_MAX_BYTES, manifest_chunk, rd, &status, &e);
        if (k < 0 && e.code && !streq(e.code, "http") && !streq(e.code, "oom"))
                return job_fault(r, false, "the manifest is not acceptable: %s", e.message);
        if (k < 0)
                return job_fault(r, false, "cannot fetch the manifest: %s", e.message);
        if (status == 401 || status == 403) {
                snprintf(r->msg, sizeof(r->msg), "the server refused the credential (HTTP %ld)", status);
                set_fatal(l->s, r->msg);
                r->out = OUT_FATAL;
                return STEP_DONE;
        }
        if (status != 200)
                return job_fault(r, false, "the server answered HTTP %ld for the manifest", status);
        k = vmanifest_reader_finish(rd, &r->m, &e);
        if (k < 0)
                return job_fault(r, false, "the manifest is not acceptable: %s", e.message);
        k = vmanifest_check_paths(r->m, &e);
        if (k < 0)
                return job_fault(r, true, "the tree will never be materialised: %s", e.message);
        k = vmanifest_verify_tree(r->m, j->tree, &e);
        if (k < 0)
                return job_fault(r, false, "the manifest does not verify: %s", e.message);
        return STEP_GO_ON;
}

/* Step: prepare a fresh lane directory for the checkout, the bundle and the log. */
static Step job_prepare_lane_dir(Lane *l, JobRun *r) {
        Serve *s = l->s;

        /* For a capsule started ahead, its own (its bundle is there); the checkout is the lane's
         * kept one (lane_tree_open), which that capsule has bound at /snapshot. */
        if (r->use_warm) {
                if ((r->lane_fd = open_dir_at(s->scratch_fd, r->lane_dir)) < 0)
                        return job_fault(r, false, "cannot open the scratch directory: %m");
        } else {
                (void) rm_rf_at(s->scratch_fd, r->lane_dir);
                if (mkdirat(s->scratch_fd, r->lane_dir, 0700) < 0 ||
                    (r->lane_fd = open_dir_at(s->scratch_fd, r->lane_dir)) < 0)
                        return job_fault(r, false, "cannot prepare the scratch directory: %m");
        }
        r->co_fd = lane_tree_open(l, r->snap_path, sizeof(r->snap_path));
        if (r->co_fd < 0)
                return job_fault(r, false, "cannot open the lane's checkout: %s", strerror(-r->co_fd));
        if (path_join_buf(r->lane_path, sizeof(r->lane_path), s->scratch_path, r->lane_dir) < 0) {
                r->fault = "the scratch path is too long";
                return STEP_FAIL;
        }
        return STEP_GO_ON;
}

/* Step: the lane's checkout changed into the job's verified tree: what changed since the lane's
 * last checkout of the same repository is downloaded and hash-checked, the rest kept. */
static Step job_checkout(Lane *l, const VJob *j, JobRun *r) {
        Serve *s = l->s;
        TfwError e = {0};
        bool permanent;
        usec_t t0 = now_monotonic();

        if (checkout_update(l->http, j->repo, r->m, r->co_fd, s->walls.config->container_gid,
                            (uint64_t) s->o.max_checkout_mb << 20, &r->cs, &e) >= 0) {
                say(LOG_INFO, "serve %s: job '%s': checkout of %zu entries: %" PRIu64 " downloaded (%" PRIu64
                    " bytes), %" PRIu64 " kept (%" PRIu64 " ms)",
                    l->label, j->id, r->m->n_entries, r->cs.downloaded, r->cs.download_bytes, r->cs.kept,
                    (uint64_t) ((now_monotonic() - t0) / 1000));
                return STEP_GO_ON;
        }
        if (e.code && streq(e.code, "unauthorized")) {
                set_fatal(s, e.message);
                r->out = OUT_FATAL;
                return STEP_DONE;
        }
        permanent = e.code && (streq(e.code, "symlink_escape") || streq(e.code, "bad_symlink"));
        return job_fault(r, permanent, "%s: %s",
                         permanent ? "the tree will never be materialised" : "checkout failed", e.message);
}

/* Step: run the check in its capsule, the log in the lane directory. */
static Step job_execute(Lane *l, const VJob *j, JobRun *r) {
        TfwError e = {0};

        r->log_fd = openat(r->lane_fd, "job.log", O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (r->log_fd < 0)
                return job_fault(r, false, "cannot create the job log: %m");
        r->plan.scratch_fd = r->lane_fd;
        r->plan.log_fd = r->log_fd;
        if (capsule_config_egress(&r->jc)) {
                r->egress_fd = memfd_create("egress-records", MFD_CLOEXEC);
                if (r->egress_fd < 0)
                        return job_fault(r, false, "cannot keep the job's connections: %m");
                r->plan.egress_log_fd = r->egress_fd;
        }
        if (r->use_warm) {
                /* Given to this one job; the shutdown's teardown finds it by the cancellation
                 * from here on. */
                r->plan.warm = TAKE_PTR(l->warm);
                pthread_mutex_lock(&l->lock);
                l->warm_cid[0] = 0;
                pthread_mutex_unlock(&l->lock);
                say(LOG_INFO, "serve %s: job '%s' runs in a capsule started ahead", l->label, j->id);
        }
        if (exec_run(&r->plan, &r->x, &e) < 0) {
                r->x.outcome = EXEC_WORKER_FAULT;
                snprintf(r->x.message, sizeof(r->x.message), "%s", e.message);
        } else if (r->x.warm_lost[0])
                say(LOG_WARNING, "serve %s: job '%s': %s; it ran in a capsule of its own", l->label, j->id,
                    r->x.warm_lost);
        return STEP_GO_ON;
}

/* Step: judge how the check ended; STEP_GO_ON: a real run ended, to be signed. */
static Step job_judge_ending(Lane *l, const VJob *j, JobRun *r) {
        const ExecResult *x = &r->x;

        /* The lease first (what the heartbeat and the signals said), then the classification. */
        pthread_mutex_lock(&l->lock);
        bool lost = l->lost, stale = l->stale, unauth = l->unauthorized, interrupted = l->interrupted;
        pthread_mutex_unlock(&l->lock);

        if (unauth) {
                r->out = OUT_FATAL;
                return STEP_DONE;
        }
        if (lost) {
                say(LOG_NOTICE, "serve %s: job '%s': lease lost, the check was stopped and its result dropped", l->label, j->id);
                r->out = OUT_DROPPED;
                return STEP_DONE;
        }
        if (stale) {
                _cleanup_json_ json_t *res = json_pack("{s:s}", "status", "stale");
                r->out = send_complete(l, j, "stale", NULL, res);
                return STEP_DONE;
        }
        if (interrupted || x->outcome == EXEC_CANCELLED) {
                r->fault = "the worker was stopped during the check";
                return STEP_FAIL;
        }
        /* The validation plane's reading of the one classification: a worker fault, an argv[0]
         * this worker cannot execute (a toolchain it lacks) included, is never signed. */
        if (x->outcome != EXEC_RAN)
                return job_fault(r, x->outcome == EXEC_REFUSED, "worker fault (%s): %s",
                                 x->error ? x->error : exec_outcome_to_string(x->outcome), x->message);
        return STEP_GO_ON;
}

/* Step: sign pass (exit 0) or fail (everything else) and complete the job with its RESULT. */
static Step job_sign_and_complete(Lane *l, const VJob *j, JobRun *r) {
        Serve *s = l->s;
        const ExecResult *x = &r->x;
        const CapsuleResult *cr = &x->capsule;
        _cleanup_json_ json_t *st = NULL, *env = NULL, *res = NULL;
        TfwError e = {0};
        bool pass = cr->status == CAPSULE_SUCCEEDED;
        ValidationFacts f = {
                .job_id = j->id, .repo = j->repo, .proposal = j->proposal, .check = j->check, .tree = j->tree,
                .policy_version = j->policy_version, .attempt = j->attempt, .pass = pass,
                .status = capsule_status_to_string(cr->status), .exit_code = cr->exit_code, .signal = cr->signal,
                .environment_digest = r->digest, .worker = l->label, .started_at = x->started_at,
                .finished_at = x->finished_at,
        };

        st = attest_validation_statement(&f, s->walls.key->identity);
        if (!st || attest_sign_statement(s->walls.key, st, &env, &e) < 0) {
                r->fault = "cannot sign the attestation";
                return STEP_FAIL;
        }
        res = result_json(x, pass, &r->cs, r->digest, r->log_fd, (size_t) s->o.result_tail_kb << 10, &r->jc,
                          r->egress_fd);
        r->out = send_complete(l, j, pass ? "pass" : "fail", env, res ? res : json_object());
        return STEP_DONE;
}

/* Step: stop the heartbeat (the lease is no longer kept) and join its thread. */
static void job_heartbeat_stop(Lane *l, JobRun *r) {
        pthread_mutex_lock(&l->lock);
        l->done = true;
        l->running = false;
        pthread_cond_broadcast(&l->cond);
        pthread_mutex_unlock(&l->lock);
        if (r->hb_started)
                pthread_join(r->hb, NULL);
        pthread_mutex_lock(&l->lock);
        l->job = NULL;
        pthread_mutex_unlock(&l->lock);
}

/* Step: clean the lane and open the window in which a capsule waits for the next job. */
static void job_clean_lane(Lane *l, JobRun *r) {
        Serve *s = l->s;

        /* A capsule started ahead that this job did not get to use may have a partial
         * checkout bound: it goes too. */
        if (r->use_warm && l->warm)
                lane_warm_drop(l);
        if (r->lane_fd >= 0 || s->scratch_fd >= 0)
                (void) rm_rf_at(s->scratch_fd, r->lane_dir);
        /* The next job may come soon: a capsule waits for it for --warm-secs, with network when
         * this one had it. */
        l->warm_until = now_monotonic() + (usec_t) s->o.warm_secs * USEC_PER_SEC;
        l->warm_network = capsule_config_egress(&r->jc);
}

/* One claimed job, its steps in order (docs/architecture.md lists them). A refusal fails the
 * job before the heartbeat starts; from then on every ending stops the heartbeat and cleans
 * the lane, a fail being sent first. */
static Outcome run_job(Lane *l, VJob *j) {
        _cleanup_(job_run_done) JobRun r = {
                .out = OUT_FAILED, .lane_fd = -EBADF, .co_fd = -EBADF, .log_fd = -EBADF, .egress_fd = -EBADF,
        };
        Step step = job_refuse(l, j, &r);

        if (step == STEP_GO_ON)
                step = job_plan(l, j, &r);
        if (step != STEP_GO_ON)
                return send_fail(l, j, r.fault, r.permanent);

        job_heartbeat_start(l, j, &r);
        step = job_fetch_manifest(l, j, &r);
        if (step == STEP_GO_ON)
                step = job_prepare_lane_dir(l, &r);
        if (step == STEP_GO_ON)
                step = job_checkout(l, j, &r);
        if (step == STEP_GO_ON)
                step = job_execute(l, j, &r);
        if (step == STEP_GO_ON)
                step = job_judge_ending(l, j, &r);
        if (step == STEP_GO_ON)
                step = job_sign_and_complete(l, j, &r);
        if (step == STEP_FAIL)
                r.out = send_fail(l, j, r.fault ? r.fault : "worker fault", r.permanent);
        job_heartbeat_stop(l, &r);
        job_clean_lane(l, &r);
        return r.out;
}

/* ---- lanes ------------------------------------------------------------------------------------- */

static void *lane_main(void *arg) {
        Lane *l = arg;
        Serve *s = l->s;
        TfwError e = {0};
        double backoff = 1;

        while (!atomic_load(&s->stopping)) {
                lane_warm_maintain(l);
                /* Under systemd (Type=notify) the worker is ready once the runtime, the image and
                 * the key were checked (serve_run did that before any lane started) and its first
                 * claim is under way. Without NOTIFY_SOCKET this does nothing. */
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
                        say(LOG_WARNING, "serve %s: claim failed: %s", l->label,
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
                        say(LOG_ERR, "serve %s: the server's job is not acceptable: %s", l->label, e.message);
                        if (wait_or_stop(s, (double) s->o.retry_after_secs))
                                break;
                        continue;
                }
                l->jobs++;
                /* A claim that was already waiting when the worker was asked to stop: handed
                 * back at once, with a retry, rather than started during the shutdown. */
                if (atomic_load(&s->stopping)) {
                        (void) send_fail(l, j, "the worker is stopping; the job was not started", false);
                        break;
                }
                if (run_job(l, j) == OUT_FATAL)
                        break;
        }
        lane_warm_drop(l);
        return NULL;
}

/* The warnings of walls that start but give less than they seem to (network, mounts). */
static void serve_warn_walls(Serve *s) {
        if (s->o.allow_network && !s->o.n_allow_hosts)
                say(LOG_WARNING, "serve: --allow-network without --allow-host: there is no network to give, and a policy "
                            "asking for network fails as this worker's fault");
        else if (s->o.n_allow_hosts) {
                char why[256];
                say(LOG_NOTICE, "serve: a policy asking for network gets %zu allowlist entr%s through the worker's proxy",
                    s->o.n_allow_hosts, s->o.n_allow_hosts == 1 ? "y" : "ies");
                if (egress_host_route_check(why, sizeof(why)) < 0)
                        say(LOG_WARNING, "serve: the egress proxy can reach nothing from this worker: %s (docs/install.md, "
                                    "\"Network for jobs\"); every connection of a check will fail", why);
        }
        if (streq(s->o.sandbox, "runsc") && !s->o.system_mounts_identity && !s->o.no_system_mounts)
                say(LOG_WARNING, "serve: the system mounts carry no identity (--system-mounts-identity): the environment "
                            "digest records only their host paths");
}

/* The state directory checked (root's, private), locked against another worker, its scratch/
 * and runsc/ made and opened by descriptor. */
static int serve_prepare_state(Serve *s, int state_fd, TfwError *e) {
        struct stat sst;
        if (fstat(state_fd, &sst) < 0 || !root_dir_is_private(sst.st_uid, sst.st_mode)) {
                return tfw_error(e, EPERM, "state_dir", "--state-dir '%s' must be root's and writable by root only",
                                 s->o.state_dir);
        }
        /* runc: the capsules' roots are below it (runc-roots/, 0711), and each capsule's root id
         * mounts its own from inside its user namespace: it must pass, not list (0711; what is
         * below is root's 0700, 0711 or 0600). Made 0700 by serve or by systemd's
         * StateDirectoryMode=, it would refuse every capsule ("error preparing rootfs: ...
         * permission denied"). */
        if (streq(s->o.sandbox, "runc") && (sst.st_mode & 07777) != 0711 && fchmod(state_fd, 0711) < 0) {
                return tfw_error(e, errno, "state_dir", "cannot make --state-dir '%s' passable (0711) for runc: %m",
                                 s->o.state_dir);
        }
        /* Before the start-up cleanup: it would remove another worker's running containers. */
        if (lock_state_dir(s, state_fd, e) < 0) {
                return -EBUSY;
        }
        if (take_runtime_lock(s, state_fd, e) < 0)
                return -EBUSY;
        if (path_join_buf(s->scratch_path, sizeof(s->scratch_path), s->o.state_dir, "scratch") < 0 ||
            path_join_buf(s->runsc_root, sizeof(s->runsc_root), s->o.state_dir, "runsc") < 0) {
                return tfw_error(e, ENAMETOOLONG, "state_dir", "--state-dir '%s' is too long", s->o.state_dir);
        }
        for (int i = 0; i < 2; i++) { /* scratch/ and runsc/, made and opened by descriptor */
                const char *sub = i == 0 ? "scratch" : "runsc";
                int fd = mkdirat(state_fd, sub, 0700) < 0 && errno != EEXIST ? -errno : open_dir_at(state_fd, sub);
                if (fd < 0) {
                        return tfw_error(e, -fd, "state_dir", "cannot open '%s/%s': %s", s->o.state_dir, sub,
                                         strerror(-fd));
                }
                if (i == 0)
                        s->scratch_fd = fd;
                else
                        safe_close(fd);
        }
        return 0;
}

/* The init found, the sandbox checked (the engines: the runtime and the image), what a
 * previous run left removed, libcurl ready. */
static int serve_start_sandbox(Serve *s, TfwError *e) {
        if (capsule_find_init(s->init_path, sizeof(s->init_path), e) < 0) {
                return -ENOENT;
        }
        /* The sandbox answers (the engines: know the runtime and hold the image), or no start. */
        if (capsule_driver_init(&s->driver, s->walls.config, s->runsc_root, s->o.engine_runtime, e) < 0) {
                tfw_error_prefix(e, "sandbox unavailable: ");
                return -ENOENT;
        }
        /* From here on, every runsc holds the lock the next start waits for (take_runtime_lock). */
        capsule_driver_hold(&s->driver, s->runtime_lock_fd);
        if (!s->driver.ops->check(&s->driver, check_line, e)) {
                return -ENOENT;
        }
        s->driver.ops->version(&s->driver, s->runtime_version, sizeof(s->runtime_version));
        unsigned removed = 0;
        TfwError ce = {0};
        if (s->driver.ops->cleanup_stale(&s->driver, s->scratch_fd, &removed, &ce) < 0)
                say(LOG_WARNING, "serve: start-up cleanup: %s", ce.message);
        else if (removed)
                say(LOG_NOTICE, "serve: removed %u container(s) left by a previous run", removed);
        if (http_global_init(e) < 0) {
                tfw_error_prefix(e, "libcurl cannot be initialised: ");
                return -EIO;
        }
        return 0;
}

/* Each lane's label, lock, cancellation and HTTP client, then its thread. */
static int lanes_start(Serve *s, Lane *lanes, long n_lanes, TfwError *e) {
        for (long i = 0; i < n_lanes; i++) {
                Lane *l = &lanes[i];
                l->s = s;
                l->index = (unsigned) (i + 1);
                if (n_lanes > 1)
                        snprintf(l->label, sizeof(l->label), "%s-%ld", s->o.label, i + 1);
                else
                        snprintf(l->label, sizeof(l->label), "%s", s->o.label);
                pthread_mutex_init(&l->lock, NULL);
                pthread_cond_init(&l->cond, NULL);
                exec_cancel_init(&l->cancel);
                if (http_new(s->o.server, s->token, s->o.client_timeout_secs, &l->http, e) < 0 ||
                    http_set_unix_socket(l->http, s->o.server_socket) < 0) {
                        return e->message[0] ? -EIO : tfw_error(e, EINVAL, "server_socket", "--server-socket cannot be used");
                }
        }
        say(LOG_INFO, "serve: %ld lane(s) as '%s' claiming from %s", n_lanes, s->o.label, s->o.server);
        for (long i = 0; i < n_lanes; i++) {
                int k = pthread_create(&lanes[i].thread, NULL, lane_main, &lanes[i]);
                if (k != 0) {
                        /* The lanes already started finish as after a first signal. */
                        char msg[256];
                        snprintf(msg, sizeof(msg), "cannot start lane %ld: %s", i + 1, strerror(k));
                        set_fatal(s, msg);
                        break;
                }
                lanes[i].started = true;
        }
        return 0;
}

/* Until every lane has ended: the watchdog fed, a first signal finishes the running checks, a
 * second stops them; the lanes not stopped within the grace: ETIMEDOUT, s still in use. */
static int serve_wait(Serve *s, Lane *lanes, long n_lanes, sigset_t *mask, TfwError *e) {
        /* Wait for signals or for every lane to end (fatal). A lane is joined once: its thread
         * handle means nothing after that. */
        struct timespec poll_ts = {.tv_sec = 1};
        usec_t kill_deadline = 0;
        /* The watchdog is fed from this loop, which wakes at least every second (WatchdogSec
         * must be 2 s or more); it runs whatever the lanes are doing. */
        uint64_t wd_usec = 0;
        bool watchdog = sd_watchdog_enabled(0, &wd_usec) > 0;
        for (;;) {
                bool all_done = true;
                if (watchdog)
                        (void) sd_notify(0, "WATCHDOG=1");
                for (long i = 0; i < n_lanes; i++) {
                        if (!lanes[i].started || lanes[i].joined)
                                continue;
                        if (pthread_tryjoin_np(lanes[i].thread, NULL) == 0)
                                lanes[i].joined = true;
                        else
                                all_done = false;
                }
                if (all_done)
                        break;
                if (kill_deadline && now_monotonic() > kill_deadline) {
                        /* Every capsule still there is ended first; the lanes still use s: it is
                         * left to the process's end. */
                        lanes_teardown_before_exit(lanes, n_lanes);
                        return tfw_error(e, ETIMEDOUT, "shutdown", "lanes did not stop within --shutdown-grace-secs");
                }
                int sig = sigtimedwait(mask, NULL, &poll_ts);
                if (sig <= 0)
                        continue;
                if (atomic_load(&s->stopping) < 1) {
                        say(LOG_NOTICE, "serve: signal %d: finishing the running checks, then exiting (again to stop now)", sig);
                        (void) sd_notify(0, "STOPPING=1\nSTATUS=finishing the running checks");
                        pthread_mutex_lock(&s->lock);
                        atomic_store(&s->stopping, 1);
                        pthread_cond_broadcast(&s->cond);
                        pthread_mutex_unlock(&s->lock);
                } else {
                        say(LOG_NOTICE, "serve: signal %d: stopping the running checks and handing their jobs back", sig);
                        atomic_store(&s->stopping, 2);
                        kill_deadline = now_monotonic() + (usec_t) s->o.shutdown_grace_secs * USEC_PER_SEC;
                        for (long i = 0; i < n_lanes; i++) {
                                Lane *l = &lanes[i];
                                pthread_mutex_lock(&l->lock);
                                bool running = l->running;
                                if (running) {
                                        l->interrupted = true;
                                        pthread_cond_broadcast(&l->cond);
                                }
                                pthread_mutex_unlock(&l->lock);
                                if (running)
                                        lane_kill_container(l);
                        }
                }
        }
        return 0;
}

int serve_run(ServeOptions *o, const char *token, TfwError *e) {
        Serve *s = calloc(1, sizeof(*s));
        Lane *lanes = NULL;
        long n_lanes = 0;
        sigset_t mask;
        int ret = 0, state_fd = -EBADF;

        if (!s)
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        the_serve = s;
        s->scratch_fd = -EBADF;
        s->lock_fd = -EBADF;
        s->runtime_lock_fd = -EBADF;
        s->o = *o;
        s->token = token;
        pthread_mutex_init(&s->lock, NULL);
        pthread_cond_init(&s->cond, NULL);
        if (serve_walls_load(&s->o, &s->walls, e) < 0) {
                ret = -EINVAL;
                goto out;
        }
        if (geteuid() != 0) {
                ret = tfw_error(e, EPERM, "not_root", "the %s sandbox needs root", s->o.sandbox);
                goto out;
        }
        serve_warn_walls(s);
        /* By descriptor from "/", every ancestor root's alone (common/root-dir.h), and the
         * directory itself writable by root only: the worker makes its scratch, runsc root and
         * lock there. */
        state_fd = root_dir_open("--state-dir", s->o.state_dir, true, 0, 0, 0700, NULL, e);
        if (state_fd < 0) {
                ret = state_fd;
                goto out;
        }
        ret = serve_prepare_state(s, state_fd, e);
        if (ret < 0)
                goto out;
        ret = serve_start_sandbox(s, e);
        if (ret < 0)
                goto out;

        /* Signals are taken synchronously by this thread; every other thread blocks them. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        pthread_sigmask(SIG_BLOCK, &mask, NULL);

        lanes = calloc((size_t) s->o.concurrency, sizeof(Lane));
        if (!lanes) {
                ret = tfw_error(e, ENOMEM, "oom", "out of memory");
                goto out;
        }
        n_lanes = s->o.concurrency;
        ret = lanes_start(s, lanes, n_lanes, e);
        if (ret < 0)
                goto out;

        /* Only when the lanes did not stop in time: they still use s, left to the process's end. */
        ret = serve_wait(s, lanes, n_lanes, &mask, e);
        if (ret < 0)
                return ret;
        if (atomic_load(&s->fatal))
                ret = tfw_error(e, EIO, "fatal", "%s", s->fatal_message);
out:
        for (long i = 0; lanes && i < n_lanes; i++) {
                http_free(lanes[i].http);
                exec_cancel_destroy(&lanes[i].cancel);
        }
        free(lanes);
        capsule_driver_done(&s->driver);
        serve_walls_done(&s->walls);
        safe_close(s->scratch_fd);
        safe_close(s->lock_fd);
        safe_close(s->runtime_lock_fd);
        safe_close(state_fd);
        free(s);
        the_serve = NULL;
        return ret;
}
