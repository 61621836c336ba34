/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "capsule/cgroup.h"
#include "capsule/docker.h"
#include "capsule/job.h"
#include "capsule/oci-spec.h"
#include "exec/exec.h"
#include "capsule/runsc.h"
#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/macro.h"
#include "common/proc-locks.h"
#include "common/resolve.h"
#include "common/size.h"
#include "orchestrator/controller-view.h"
#include "orchestrator/dirs.h"
#include "orchestrator/doctor.h"
#include "orchestrator/doctor-internal.h"
#include "capsule/init-path.h"
#include "orchestrator/job.h"
#include "orchestrator/notify.h"


#define PROBE_LOG_MAX (1U << 20)
#define VERSION_TIMEOUT_USEC (20 * USEC_PER_SEC)


void doctor_report(Doctor *d, const char *check, bool ok, const char *fmt, ...) {
        char detail[2048];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(detail, sizeof(detail), fmt, ap);
        va_end(ap);
        detail[strcspn(detail, "\n")] = 0; /* one line per check, whatever a tool printed */
        if (!ok)
                d->failed = true;
        (void) json_array_append_new(d->checks,
                                     json_pack("{s:s, s:b, s:s}", "check", check, "ok", ok, "detail", detail));
        if (!d->json) {
                fprintf(d->out, "%s %s: %s\n", ok ? "✓" : "✗", check, detail);
                fflush(d->out);
        }
}

/* A line that informs and cannot fail doctor ("·" in text, "ok": null in JSON). */
void doctor_info(Doctor *d, const char *check, const char *fmt, ...) {
        char detail[2048];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(detail, sizeof(detail), fmt, ap);
        va_end(ap);
        detail[strcspn(detail, "\n")] = 0;
        (void) json_array_append_new(d->checks,
                                     json_pack("{s:s, s:n, s:s}", "check", check, "ok", "detail", detail));
        if (!d->json) {
                fprintf(d->out, "· %s: %s\n", check, detail);
                fflush(d->out);
        }
}

/* ---- static checks ------------------------------------------------------------------- */

/* The driver's own lines (runtime, engine_runtime, image), through doctor_report(). */
static void report_line(void *userdata, const char *check, bool ok, const char *detail) {
        doctor_report((Doctor *) userdata, check, ok, "%s", detail);
}

static void check_openat2(Doctor *d) {
        if (openat2_usable())
                doctor_report(d, "openat2", true, "openat2 with RESOLVE_NO_SYMLINKS is used");
        else
                doctor_report(d, "openat2", true,
                       "openat2 is unavailable or filtered: the O_NOFOLLOW component-by-component fallback is in use");
}

/* A controller is available when /proc/cgroups lists it enabled and it is mounted: in the
 * unified hierarchy's cgroup.controllers (v2) or as a v1 hierarchy (mountinfo). */
static bool controller_available(const char *mode, const char *name, char *why, size_t n) {
        _cleanup_fclose_ FILE *f = fopen("/proc/cgroups", "re");
        char line[512];
        bool enabled = false;

        if (!f) {
                snprintf(why, n, "cannot read /proc/cgroups: %m");
                return false;
        }
        while (fgets(line, sizeof(line), f)) {
                char sub[64];
                unsigned hier, num, en;
                if (sscanf(line, "%63s %u %u %u", sub, &hier, &num, &en) == 4 && streq(sub, name))
                        enabled = en == 1;
        }
        if (!enabled) {
                snprintf(why, n, "the kernel has the %s controller disabled or missing (/proc/cgroups)", name);
                return false;
        }
        if (streq(mode, "v2")) {
                _cleanup_fclose_ FILE *cf = fopen("/sys/fs/cgroup/cgroup.controllers", "re");
                if (!cf || !fgets(line, sizeof(line), cf)) {
                        snprintf(why, n, "cannot read /sys/fs/cgroup/cgroup.controllers");
                        return false;
                }
                for (char *save = NULL, *t = strtok_r(line, " \n", &save); t; t = strtok_r(NULL, " \n", &save))
                        if (streq(t, name))
                                return true;
                snprintf(why, n, "'%s' is not in /sys/fs/cgroup/cgroup.controllers", name);
                return false;
        }
        _cleanup_fclose_ FILE *mi = fopen("/proc/self/mountinfo", "re");
        char buf[4096];
        if (!mi) {
                snprintf(why, n, "cannot read /proc/self/mountinfo: %m");
                return false;
        }
        while (fgets(buf, sizeof(buf), mi)) {
                char *sep = strstr(buf, " - cgroup ");
                if (!sep)
                        continue;
                /* " - cgroup SOURCE OPTIONS": the controller is one of the comma-separated options */
                char *opts = strrchr(sep, ' ');
                if (!opts)
                        continue;
                opts++;
                opts[strcspn(opts, "\n")] = 0;
                for (char *save = NULL, *t = strtok_r(opts, ",", &save); t; t = strtok_r(NULL, ",", &save))
                        if (streq(t, name))
                                return true;
        }
        snprintf(why, n, "no cgroup v1 hierarchy has the %s controller mounted", name);
        return false;
}

static void check_cgroups(Doctor *d) {
        const char *mode = cgroup_mode_string();
        static const char *const names[] = {"memory", "pids"};

        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                char check[32], why[256];
                snprintf(check, sizeof(check), "cgroup_%s", names[i]);
                if (!mode)
                        doctor_report(d, check, false, "no usable cgroup hierarchy under /sys/fs/cgroup");
                else if (controller_available(mode, names[i], why, sizeof(why)))
                        doctor_report(d, check, true, "the %s controller is available (cgroup %s)", names[i], mode);
                else
                        doctor_report(d, check, false, "%s", why);
        }
}

/* One of the worker's own directories, without creating or repairing it: ✓ as it should be;
 * ✓ too when it does not exist yet, since the worker makes it with the right owner and mode at
 * its first start (a new setup is not a broken one); ✗ for anything else: a wrong owner or
 * mode, a symlink, something that is not a directory. */
static void check_worker_dir(Doctor *d, bool results) {
        const Config *c = d->config;
        const char *check = results ? "results_dir" : "state_dir", *path = results ? c->results_dir : c->state_dir;
        mode_t mode = results ? RESULTS_DIR_MODE : STATE_DIR_MODE;
        char owner[32];
        TfwError e = {0};

        if (results)
                snprintf(owner, sizeof(owner), "root:%u", (unsigned) c->container_gid);
        else
                snprintf(owner, sizeof(owner), "root");
        int r = worker_dir_check(c, results, &e);
        if (r >= 0)
                doctor_report(d, check, true, "'%s' is %s mode %04o", path, results ? owner : "root:root", mode);
        else if (r == -ENOENT) /* O_NOFOLLOW: a symlink, even a dangling one, is ELOOP, not this */
                doctor_report(d, check, true, "'%s' does not exist yet: it will be created, %s 0%o", path, owner, mode);
        else
                doctor_report(d, check, false, "%s", e.message);
}

static void check_dirs(Doctor *d) {
        check_worker_dir(d, false);
        check_worker_dir(d, true);
}

static void view_line(void *userdata, const char *check, bool ok, const char *detail) {
        doctor_report((Doctor *) userdata, check, ok, "%s", detail);
}

/* The notify hook's file is root's alone (orchestrator/notify.h), when one is configured. */
static void check_notify(Doctor *d) {
        char why[512];
        const ConfigNotify *n = &d->config->notify;
        if (!n->command)
                return;
        if (notify_command_check(n->command[0], why, sizeof(why)) < 0)
                doctor_report(d, "notify_hook", false, "%s", why);
        else
                doctor_report(d, "notify_hook", true, "'%s' is root's alone; it runs as %u:%u, at most %u s", n->command[0],
                       (unsigned) n->uid, (unsigned) n->gid, n->timeout_seconds);
}

/* The controller's view of its workspace, inbox and results (orchestrator/controller-view.h). */
static void check_controller_view(Doctor *d) {
        controller_view_check(d->config, openat2_usable(), view_line, d);
}

static void check_group(Doctor *d) {
        gid_t gid = d->config->container_gid;
        errno = 0;
        struct group *g = getgrgid(gid);
        if (g)
                doctor_report(d, "container_gid", true, "group %u is '%s'", (unsigned) gid, g->gr_name);
        else
                doctor_report(d, "container_gid", false, "no group entry for container_gid %u%s%s", (unsigned) gid,
                       errno ? ": " : "", errno ? strerror(errno) : "");
}

/* ---- the probe jobs ----------------------------------------------------------------- */

/* A private directory: scratch for bundles, a runsc root (the worker's own is never used: a
 * running worker is not disturbed) and a snapshot with one file writable by permission, so
 * only the read-only mount can refuse a write to it. */
/* Containers of this worker that a predecessor killed with SIGKILL left (threat 13): only
 * while no worker of this config runs, which proves itself by its lock on
 * state_dir/daemon.lock (read from /proc/locks, never taken: a worker starting now must not
 * find it held). A live worker's containers are its own, never called leftovers. */
typedef struct Leftovers {
        char list[1400];
        size_t len;
} Leftovers;

static void leftover_line(void *userdata, const char *id, const char *state) {
        Leftovers *l = userdata;
        if (l->len >= sizeof(l->list) - 1)
                return;
        int n = snprintf(l->list + l->len, sizeof(l->list) - l->len, "%s%s (%s)", l->len ? ", " : "", id, state);
        l->len = n < 0 ? l->len : MIN(l->len + (size_t) n, sizeof(l->list) - 1);
}

/* What the running daemon last reported (orchestrator/worker.h), read by the config's path:
 * 0 with *ret NULL when there is none yet (no state_dir either), -EBADMSG when unreadable. */
static int daemon_report(const Config *c, const char *name, json_t **ret) {
        _cleanup_close_ int sfd = open(c->state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        *ret = NULL;
        return sfd >= 0 ? worker_daemon_report(sfd, name, ret) : 0;
}

/* The generation store's use, as the running daemon last reported it (state_dir/store.json:
 * the store is a tmpfs of the daemon's own namespace, not visible here). Informational. */
static void check_store(Doctor *d) {
        const Config *c = d->config;
        char a[32], b[32];

        if (!d->driver.ops || !d->driver.ops->binds_generations) {
                doctor_info(d, "generation_store", "none with the %s driver: every workspace is streamed",
                            d->driver.ops ? d->driver.ops->name : "configured");
                return;
        }
        _cleanup_(json_decrefp) json_t *j = NULL;
        int k = daemon_report(c, "store.json", &j);
        if (k >= 0 && !j) {
                doctor_info(d, "generation_store", "no job has used it yet (limit %s, limits.max_store_bytes)",
                            format_size(c->limits.max_store_bytes, a, sizeof(a)));
                return;
        }
        json_t *bytes = json_object_get(j, "bytes"), *gens = json_object_get(j, "generations");
        if (!json_is_integer(bytes) || !json_is_integer(gens)) {
                doctor_info(d, "generation_store", "state_dir/store.json cannot be read");
                return;
        }
        doctor_info(d, "generation_store", "%lld generation(s), %s of %s (limits.max_store_bytes) after the last job",
                    (long long) json_integer_value(gens), format_size((uint64_t) json_integer_value(bytes), a, sizeof(a)),
                    format_size(c->limits.max_store_bytes, b, sizeof(b)));
}

/* The build cache (docs/cache.md), as the running daemon last reported it (state_dir/cache.json).
 * Informational. */
static void check_cache(Doctor *d) {
        const Config *c = d->config;
        char a[32], b[32];

        if (!c->cache.paths)
                return;
        _cleanup_(json_decrefp) json_t *j = NULL;
        int k = daemon_report(c, "cache.json", &j);
        if (k >= 0 && !j) {
                doctor_info(d, "build_cache", "empty: no job has left one yet (limit %s, cache.max_bytes)",
                            format_size(c->cache.max_bytes, a, sizeof(a)));
                return;
        }
        json_t *bytes = json_object_get(j, "bytes"), *entries = json_object_get(j, "entries");
        const char *tree = json_string_value(json_object_get(j, "tree"));
        if (!json_is_integer(bytes) || !json_is_integer(entries)) {
                doctor_info(d, "build_cache", "state_dir/cache.json cannot be read");
                return;
        }
        if (!tree) {
                doctor_info(d, "build_cache", "empty (cleared or never kept; limit %s, cache.max_bytes)",
                            format_size(c->cache.max_bytes, a, sizeof(a)));
                return;
        }
        doctor_info(d, "build_cache", "%s bytes in %lld entries (limit %s, cache.max_bytes), tree %.16s, after the last job",
                    format_size((uint64_t) json_integer_value(bytes), a, sizeof(a)), (long long) json_integer_value(entries),
                    format_size(c->cache.max_bytes, b, sizeof(b)), tree);
}

static void check_leftovers(Doctor *d) {
        const Config *c = d->config;
        char root[PATH_MAX];
        Leftovers l = {};
        struct stat st;

        if (!d->driver.ops || !d->driver.ops->leftovers)
                return;
        _cleanup_close_ int sfd = open(c->state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sfd >= 0 && fstatat(sfd, "daemon.lock", &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISREG(st.st_mode)) {
                int r = flock_held(st.st_ino);
                if (r > 0) {
                        doctor_report(d, "leftover_containers", true,
                               "a worker runs (it holds '%s/daemon.lock'): its containers are its own", c->state_dir);
                        return;
                }
                if (r < 0) {
                        doctor_report(d, "leftover_containers", true,
                               "cannot read /proc/locks (%s): a worker may run, its containers are not judged",
                               strerror(-r));
                        return;
                }
        }
        if (config_runsc_root(c, root, sizeof(root)) < 0) {
                doctor_report(d, "leftover_containers", false, "the runsc root of worker '%s' has no valid path", c->name);
                return;
        }
        int n = d->driver.ops->leftovers(&d->driver, root, leftover_line, &l);
        if (n < 0)
                doctor_report(d, "leftover_containers", false, "cannot read the runsc root '%s': %s", root, strerror(-n));
        else if (n == 0)
                doctor_report(d, "leftover_containers", true, "none in '%s'", root);
        else
                doctor_report(d, "leftover_containers", false,
                       "no worker runs, yet '%s' holds %d container(s) of this worker: %s%s; "
                       "the next start of the worker removes them",
                       root, n, l.list, l.len >= sizeof(l.list) - 1 ? "…" : "");
}

static int probe_setup(Doctor *d) {
        const Config *c = d->config;
        _cleanup_close_ int base = -EBADF, snap = -EBADF, f = -EBADF;
        int r;

        base = mkdtemp_fd("/tmp", "tfw-doctor-", &d->base);
        if (base < 0)
                return base;
        if (fchmod(base, 0755) < 0)
                return -errno;
        if (snprintf(d->scratch, sizeof(d->scratch), "%s/scratch", d->base) >= (int) sizeof(d->scratch) ||
            snprintf(d->snapshot, sizeof(d->snapshot), "%s/snapshot", d->base) >= (int) sizeof(d->snapshot) ||
            snprintf(d->runsc_root, sizeof(d->runsc_root), "%s/runsc", d->base) >= (int) sizeof(d->runsc_root))
                return -ENAMETOOLONG;
        if (mkdirat(base, "scratch", 0700) < 0 || mkdirat(base, "snapshot", 0750) < 0)
                return -errno;
        d->scratch_fd = open_dir_at(base, "scratch");
        if (d->scratch_fd < 0)
                return d->scratch_fd;
        snap = open_dir_at(base, "snapshot");
        if (snap < 0)
                return snap;
        r = ensure_owner_mode(snap, 0, c->container_gid, 0750);
        if (r < 0)
                return r;
        f = openat(snap, "rw.txt", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (f < 0)
                return -errno;
        if (write_all(f, "doctor\n", 7) < 0)
                return -EIO;
        return ensure_owner_mode(f, 0, c->container_gid, 0666);
}


void doctor_probe_free(Probe *p) {
        free(p->log);
        p->log = NULL;
}

/* warm: run it in a capsule started ahead (runtime.warm_seconds), booted here first. */
static int run_probe_in(Doctor *d, const Config *c, const char *what, char **argv, uint64_t timeout, bool warm,
                        Probe *ret) {
        _cleanup_close_ int log_fd = memfd_create("doctor-probe.log", MFD_CLOEXEC);
        char id[64];
        TfwError e = {0};
        CapsuleWarm *w = NULL;
        int r;

        if (log_fd < 0)
                return -errno;
        snprintf(id, sizeof(id), "doctor-%d-%s", (int) getpid(), what);
        if (warm) {
                char wid[80];
                snprintf(wid, sizeof(wid), "%s-warm", id);
                r = exec_warm_start(c, &d->driver, d->scratch_fd, d->scratch, wid, d->snapshot, NULL, NULL, &w, &e);
                if (r < 0)
                        return r;
        }
        ExecPlan plan = {
                .config = c,
                .driver = &d->driver,
                .runtime_version = "doctor",
                .tree_dir = d->snapshot,
                .scratch_fd = d->scratch_fd,
                .scratch_path = d->scratch,
                .job_id = id,
                .argv = argv,
                .timeout_seconds = timeout,
                .log_fd = log_fd,
                .artifacts_fd = -EBADF,
                .warm = w,
        };
        ExecResult x = {};
        *ret = (Probe){};
        r = exec_run(&plan, &x, &e);
        if (r < 0)
                return r;
        ret->res = x.capsule;
        if (!x.ran) {
                ret->res.status = CAPSULE_ERROR;
                ret->res.reason = x.error;
                snprintf(ret->res.message, sizeof(ret->res.message), "%.1000s", x.message);
        }
        if (lseek(log_fd, 0, SEEK_SET) < 0)
                return -errno;
        return read_full_fd_bounded(log_fd, PROBE_LOG_MAX, &ret->log, &ret->log_len);
}

int doctor_probe(Doctor *d, const Config *c, const char *what, char **argv, uint64_t timeout, Probe *ret) {
        return run_probe_in(d, c, what, argv, timeout, false, ret);
}

/* The value of the last "key=value" line the probe printed, or NULL. */
const char *doctor_probe_get(const Probe *p, const char *key, char *buf, size_t n) {
        size_t kl = strlen(key);
        const char *found = NULL;

        for (const char *l = p->log; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (strncmp(l, key, kl) == 0 && l[kl] == '=')
                        found = l + kl + 1;
        if (!found)
                return NULL;
        snprintf(buf, n, "%.*s", (int) strcspn(found, "\n"), found);
        /* trailing blanks from `tr '\n' ' '` */
        for (size_t k = strlen(buf); k > 0 && buf[k - 1] == ' '; k--)
                buf[k - 1] = 0;
        return buf;
}

const char *doctor_probe_result(const Probe *p, char *buf, size_t n) {
        snprintf(buf, n, "%s%s%s%s", capsule_status_to_string(p->res.status), p->res.reason ? " (" : "",
                 p->res.reason ?: "", p->res.reason ? ")" : "");
        if (p->res.message[0]) {
                size_t k = strlen(buf);
                snprintf(buf + k, n - k, ": %s", p->res.message);
        }
        return buf;
}

static char *sh_argv[] = {(char *) "/bin/sh", (char *) "-c", NULL, NULL};

static bool probe_platform(Doctor *d) {
        const Config *c = d->config;
        Probe p;
        char buf[1200];
        char *argv[4];
        int r;

        memcpy(argv, sh_argv, sizeof(argv));
        argv[2] = (char *) "echo sandbox=started";
        r = doctor_probe(d, c, "start", argv, DOCTOR_START_TIMEOUT_SECONDS, &p);
        char what[128];
        capsule_driver_label(&d->driver, what, sizeof(what));
        if (r < 0) {
                doctor_report(d, "platform", false, "%s: the probe job could not run: %s", what, strerror(-r));
                return false;
        }
        bool ok = p.res.status == CAPSULE_SUCCEEDED && doctor_probe_get(&p, "sandbox", buf, sizeof(buf)) &&
                  streq(buf, "started");
        if (ok)
                doctor_report(d, "platform", true, "%s started a sandbox in %llu ms", what, (unsigned long long) p.res.duration_ms);
        else if (p.res.status == CAPSULE_TIMED_OUT)
                doctor_report(d, "platform", false, "%s did not start a sandbox within %d s (killed)", what, DOCTOR_START_TIMEOUT_SECONDS);
        else
                doctor_report(d, "platform", false, "%s did not run a trivial job: %s", what, doctor_probe_result(&p, buf, sizeof(buf)));
        doctor_probe_free(&p);
        return ok;
}

/* The runsc driver: which other platforms start a sandbox here, and how fast (informational:
 * only the configured platform can fail doctor). A platform that hangs (kvm on some hosts) is
 * ended after DOCTOR_OTHER_PLATFORM_SECONDS by the same teardown as any timed-out job. */
static void probe_other_platforms(Doctor *d) {
        static const char *const platforms[] = {"systrap", "ptrace", "kvm"};
        const Config *c = d->config;
        char *argv[4];

        if (!d->driver.ops->worker_cgroup || d->driver.ops->host_kernel)
                return; /* the engine's runtime registration chooses the platform; runc has none */
        memcpy(argv, sh_argv, sizeof(argv));
        argv[2] = (char *) "echo sandbox=started";
        for (size_t i = 0; i < ELEMENTSOF(platforms); i++) {
                char name[64], buf[1200], id[32];
                if (streq(platforms[i], c->platform))
                        continue;
                Config pc = *c;
                pc.platform = (char *) platforms[i];
                char *saved_platform = d->driver.runsc.platform;
                d->driver.runsc.platform = (char *) platforms[i];
                snprintf(id, sizeof(id), "start-%s", platforms[i]);
                Probe p;
                int r = doctor_probe(d, &pc, id, argv, DOCTOR_OTHER_PLATFORM_SECONDS, &p);
                d->driver.runsc.platform = saved_platform;
                snprintf(name, sizeof(name), "platform_%s", platforms[i]);
                if (r < 0)
                        doctor_info(d, name, "not tried: %s", strerror(-r));
                else if (p.res.status == CAPSULE_SUCCEEDED && doctor_probe_get(&p, "sandbox", buf, sizeof(buf)))
                        doctor_info(d, name, "also works here: started a sandbox in %llu ms (runtime.platform)",
                                    (unsigned long long) p.res.duration_ms);
                else if (p.res.status == CAPSULE_TIMED_OUT)
                        doctor_info(d, name, "does not work here: no sandbox within %d s (ended)",
                                    DOCTOR_OTHER_PLATFORM_SECONDS);
                else
                        doctor_info(d, name, "does not work here: %s", doctor_probe_result(&p, buf, sizeof(buf)));
                if (r >= 0)
                        doctor_probe_free(&p);
        }
}

static bool is_zero_caps(const char *v) {
        return v && strlen(v) == 16 && strspn(v, "0") == 16;
}

/* The walls, in a capsule started for the job (warm false) or ahead of it (warm true: every
 * check's name then ends in "_warm"). */
static void probe_walls(Doctor *d, bool warm) {
        const Config *c = d->config;
        char script[2048], buf[1200], want[64], cap[64], nm[64];
        const char *sfx = warm ? "_warm" : "";
#define NAME(n) (snprintf(nm, sizeof(nm), "%s%s", (n), sfx), nm)
        Probe p;
        char *argv[4];
        int r;

        /* gVisor's /proc/self/status has no NoNewPrivs line: prctl(PR_GET_NO_NEW_PRIVS) is read
         * through perl's syscall() (the host's perl under the runsc driver) or the image's
         * nnp-probe; the status line is used where the kernel shows it. */
        snprintf(script, sizeof(script),
                 "echo ids=$(id -u):$(id -g) groups=$(id -G);"
                 "for k in CapPrm CapEff CapBnd; do echo $k=$(sed -n \"s/^$k:[[:space:]]*//p\" /proc/self/status); done;"
                 "echo nnp_status=$(sed -n 's/^NoNewPrivs:[[:space:]]*//p' /proc/self/status);"
                 "if command -v perl >/dev/null 2>&1; then echo nnp_prctl=$(perl -e 'print syscall(%ld, %d, 0, 0, 0, 0)'); "
                 "elif command -v nnp-probe >/dev/null 2>&1; then echo nnp_prctl=$(nnp-probe | sed -n 's/^NoNewPrivs=//p'); fi;"
                 "echo ifaces=$(sed -n '3,$s/^ *\\([^:]*\\):.*/\\1/p' /proc/net/dev | sort | tr '\\n' ' ');"
                 "(: >/.tentaflake-doctor) 2>/dev/null && echo root_write=ok || echo root_write=refused;"
                 "(echo x >>/snapshot/rw.txt) 2>/dev/null && echo snap_write=ok || echo snap_write=refused",
                 (long) SYS_prctl, 39 /* PR_GET_NO_NEW_PRIVS */);
        memcpy(argv, sh_argv, sizeof(argv));
        argv[2] = script;
        r = run_probe_in(d, c, warm ? "wallswarm" : "walls", argv, DOCTOR_PROBE_TIMEOUT_SECONDS, warm, &p);
        if (r < 0 || p.res.status != CAPSULE_SUCCEEDED) {
                doctor_report(d, NAME("probe_walls"), false, "the walls probe job did not complete: %s",
                       r < 0 ? strerror(-r) : doctor_probe_result(&p, buf, sizeof(buf)));
                doctor_probe_free(&p);
                return;
        }

        snprintf(want, sizeof(want), "%u:%u groups=%u", (unsigned) c->container_uid, (unsigned) c->container_gid,
                 (unsigned) c->container_gid);
        const char *v = doctor_probe_get(&p, "ids", buf, sizeof(buf));
        if (v && streq(v, want))
                doctor_report(d, NAME("probe_uid_gid"), true, "uid:gid %s, no other group", want);
        else
                doctor_report(d, NAME("probe_uid_gid"), false, "the job ran as '%s', expected %s", v ?: "(nothing printed)", want);

        bool caps_ok = true;
        char caps[256] = "";
        static const char *const capk[] = {"CapPrm", "CapEff", "CapBnd"};
        for (size_t i = 0; i < ELEMENTSOF(capk); i++) {
                v = doctor_probe_get(&p, capk[i], cap, sizeof(cap));
                if (!is_zero_caps(v))
                        caps_ok = false;
                size_t k = strlen(caps);
                snprintf(caps + k, sizeof(caps) - k, "%s%s=%s", i ? " " : "", capk[i], v && *v ? v : "?");
        }
        doctor_report(d, NAME("probe_capabilities"), caps_ok, "%s%s", caps, caps_ok ? "" : " (all must be 0)");

        char st[32], pr[32];
        const char *nst = doctor_probe_get(&p, "nnp_status", st, sizeof(st));
        const char *npr = doctor_probe_get(&p, "nnp_prctl", pr, sizeof(pr));
        if (npr && *npr)
                doctor_report(d, NAME("probe_no_new_privs"), streq(npr, "1"), "prctl(PR_GET_NO_NEW_PRIVS) = %s inside the capsule%s",
                       npr, streq(npr, "1") ? "" : " (must be 1)");
        else if (nst && *nst)
                doctor_report(d, NAME("probe_no_new_privs"), streq(nst, "1"), "/proc/self/status NoNewPrivs: %s%s", nst,
                       streq(nst, "1") ? "" : " (must be 1)");
        else
                doctor_report(d, NAME("probe_no_new_privs"), false,
                       "cannot prove it: the status has no NoNewPrivs line and neither perl nor nnp-probe is in the capsule");

        v = doctor_probe_get(&p, "ifaces", buf, sizeof(buf));
        doctor_report(d, NAME("probe_network"), v && streq(v, "lo"), "interfaces in /proc/net/dev: %s%s", v && *v ? v : "(none)",
               v && streq(v, "lo") ? "" : " (only lo is allowed)");

        v = doctor_probe_get(&p, "root_write", buf, sizeof(buf));
        doctor_report(d, NAME("probe_readonly_root"), v && streq(v, "refused"), "a write to / was %s",
               v && streq(v, "refused") ? "refused" : v ? "allowed" : "not tried");
        v = doctor_probe_get(&p, "snap_write", buf, sizeof(buf));
        doctor_report(d, NAME("probe_readonly_snapshot"), v && streq(v, "refused"), "a write to /snapshot (mode 0666) was %s",
               v && streq(v, "refused") ? "refused" : v ? "allowed" : "not tried");
        doctor_probe_free(&p);
#undef NAME
}

/* ---- the narrower capsule: no FUSE or tun device, the seccomp profile ------------------ */

/* The devices gVisor's /dev may show a job (contract section 5: no other device). */
static bool device_allowed(const char *name) {
        static const char *const family[] = {"full", "null", "random", "urandom", "zero", "tty", "ptmx", "pts/ptmx"};
        for (size_t i = 0; i < ELEMENTSOF(family); i++)
                if (streq(name, family[i]))
                        return true;
        return false;
}

/* A finding of the narrow probe: ✓/✗ where the capsule runs the worker's own profile (the
 * runsc driver), "·" for an engine's capsule, which keeps the engine's own spec. */
static void report_narrow(Doctor *d, const char *check, bool ok, const char *fmt, ...) _printf_(4, 5);
static void report_narrow(Doctor *d, const char *check, bool ok, const char *fmt, ...) {
        char detail[1600];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(detail, sizeof(detail), fmt, ap);
        va_end(ap);
        if (d->driver.ops->own_seccomp)
                doctor_report(d, check, ok, "%s", detail);
        else
                doctor_info(d, check, "%s (the engine's own profile and /dev, not the worker's)", detail);
}

/* What the probe printed for one attempt: "allowed", "refused:N" as "refused (EPERM)", or
 * "not tried" when it printed nothing. */
static const char *attempt_text(const char *v, char *buf, size_t n) {
        if (!v)
                return "not tried";
        if (strncmp(v, "refused:", 8) != 0)
                return v;
        const char *name = strerrorname_np((int) strtol(v + 8, NULL, 10));
        snprintf(buf, n, "refused (%s)", name ?: v + 8);
        return buf;
}

static void report_no_fuse(Doctor *d, const Probe *p, const char *name) {
        char buf[1200], extra[512] = "";
        const char *v = doctor_probe_get(p, "devices", buf, sizeof(buf));
        bool ok = v != NULL;

        for (char *save = NULL, *t = v ? strtok_r(buf, " ", &save) : NULL; t; t = strtok_r(NULL, " ", &save)) {
                if (device_allowed(t))
                        continue;
                ok = false;
                size_t k = strlen(extra);
                snprintf(extra + k, sizeof(extra) - k, "%s/dev/%s", k ? ", " : "", t);
        }
        char mk[32];
        const char *made = doctor_probe_get(p, "mknod_dev", mk, sizeof(mk));
        if (!v)
                report_narrow(d, name, false, "the probe printed no device list");
        else if (!ok)
                report_narrow(d, name, false, "/dev has %s: a device beyond the null/zero/random family", extra);
        else if (!made || !streq(made, "refused"))
                report_narrow(d, name, false, "%s",
                              made && streq(made, "allowed")
                                      ? "the job made a FUSE device node (mknod c 10 229 in /tmp): past the /dev cover"
                                      : "cannot prove that no device node can be made: mknod is not in the capsule");
        else
                report_narrow(d, name, true, "no device in /dev but the null/zero/random family, tty and ptmx "
                                             "(no /dev/fuse, no /dev/net/tun), and mknod of one is refused");
}

static void report_seccomp(Doctor *d, const Probe *p, const char *name) {
        static const struct {
                const char *key, *what;
        } attempts[] = {
                {"unshare_user", "unshare(CLONE_NEWUSER)"},
                {"userns_mount", "a tmpfs mount in a new user namespace"},
                {"keyctl", "keyctl"},
                {"bpf", "bpf"},
                {"ptrace", "ptrace of a child"},
        };
        char detail[1400] = "", sc[32], v[64], t[64];
        const char *mode = doctor_probe_get(p, "seccomp", sc, sizeof(sc));
        bool ok = mode && streq(mode, "2"), tried = false;

        for (size_t i = 0; i < ELEMENTSOF(attempts); i++) {
                const char *r = doctor_probe_get(p, attempts[i].key, v, sizeof(v));
                tried = tried || r;
                ok = ok && r && strncmp(r, "refused:", 8) == 0;
                size_t k = strlen(detail);
                snprintf(detail + k, sizeof(detail) - k, "%s%s %s", i ? ", " : "", attempts[i].what,
                         attempt_text(r, t, sizeof(t)));
        }
        if (!tried)
                report_narrow(d, name, false, "cannot prove it: perl is not in the capsule (Seccomp: %s)",
                              mode && *mode ? mode : "?");
        else
                report_narrow(d, name, ok, "%s; Seccomp: %s%s", detail, mode && *mode ? mode : "?",
                              ok ? "" : " (each must be refused, under a filter: Seccomp 2)");
}

/* The narrower capsule (attack review): gVisor's /dev without fuse or tun, and the seccomp
 * profile refusing, live, a new user namespace, a tmpfs mount inside one, keyctl, bpf and
 * ptrace. The syscalls are made through perl's syscall() (the host's perl under the runsc
 * driver); numbers are this architecture's. warm: on a capsule started ahead ("_warm"). */
static void probe_narrow(Doctor *d, bool warm) {
        const Config *c = d->config;
        char script[2048], buf[1200], nm[64], nm2[64];
        Probe p;
        char *argv[4];
        int r;

        snprintf(script, sizeof(script),
                 "printf devices=; for f in /dev/* /dev/*/*; do [ -L \"$f\" ] && continue;"
                 " { [ -c \"$f\" ] || [ -b \"$f\" ]; } && printf '%%s ' \"${f#/dev/}\"; done; echo;"
                 "if command -v mknod >/dev/null 2>&1; then mknod /tmp/tfw-doctor-fuse c 10 229 2>/dev/null"
                 " && echo mknod_dev=allowed || echo mknod_dev=refused; else echo mknod_dev=untested; fi;"
                 "echo seccomp=$(sed -n 's/^Seccomp:[[:space:]]*//p' /proc/self/status);"
                 "command -v perl >/dev/null 2>&1 || exit 0;"
                 "perl -e 'sub t { print $_[0], \"=\", ($_[1] >= 0 ? \"allowed\" : \"refused:\" . ($!+0)), \"\\n\" }"
                 " t(\"keyctl\", syscall(%ld, 0, -3, 0)); t(\"bpf\", syscall(%ld, 0, 0, 0));"
                 " my $p = fork; if (!$p) { sleep 10; exit 0 }"
                 " t(\"ptrace\", syscall(%ld, 16, $p, 0, 0)); kill 9, $p; waitpid $p, 0;"
                 " t(\"unshare_user\", syscall(%ld, 0x10000000));';"
                 "perl -e 'if (syscall(%ld, 0x10020000) < 0) { print \"userns_mount=refused:\", $!+0, \"\\n\"; exit }"
                 " my ($s, $t, $f) = (\"none\", \"/tmp\", \"tmpfs\");"
                 " print \"userns_mount=\", (syscall(%ld, $s, $t, $f, 0, 0) >= 0 ? \"allowed\""
                 " : \"refused:\" . ($!+0)), \"\\n\"'; :",
                 (long) SYS_keyctl, (long) SYS_bpf, (long) SYS_ptrace, (long) SYS_unshare, (long) SYS_unshare,
                 (long) SYS_mount);
        memcpy(argv, sh_argv, sizeof(argv));
        argv[2] = script;
        snprintf(nm, sizeof(nm), "probe_no_fuse%s", warm ? "_warm" : "");
        snprintf(nm2, sizeof(nm2), "probe_seccomp%s", warm ? "_warm" : "");
        r = run_probe_in(d, c, warm ? "narrowwarm" : "narrow", argv, DOCTOR_PROBE_TIMEOUT_SECONDS, warm, &p);
        if (r < 0 || p.res.status != CAPSULE_SUCCEEDED) {
                const char *why = r < 0 ? strerror(-r) : doctor_probe_result(&p, buf, sizeof(buf));
                doctor_report(d, nm, false, "the narrow-capsule probe job did not complete: %s", why);
                doctor_report(d, nm2, false, "the narrow-capsule probe job did not complete: %s", why);
                if (r >= 0)
                        doctor_probe_free(&p);
                return;
        }
        report_no_fuse(d, &p, nm);
        report_seccomp(d, &p, nm2);
        doctor_probe_free(&p);
}

/* The pids limit and the /work tmpfs size, with small overrides of the configured limits. */
static void probe_pids_tmpfs(Doctor *d) {
        Config c = *d->config;
        char script[1024], buf[1200];
        Probe p;
        char *argv[4];
        int r;

        /* Never looser than configured: the probe proves the mechanism, not a number. */
        c.limits.pids = MIN(c.limits.pids, (uint64_t) DOCTOR_PIDS_LIMIT);
        c.limits.workspace_tmpfs = MIN(c.limits.workspace_tmpfs, DOCTOR_TMPFS_LIMIT);
        uint64_t pids = c.limits.pids, tmpfs = c.limits.workspace_tmpfs;
        snprintf(script, sizeof(script),
                 "dd if=/dev/zero of=/work/fill bs=65536 count=%llu 2>/tmp/dd.err;"
                 "echo fill_size=$(wc -c </work/fill);"
                 "grep -q 'No space left' /tmp/dd.err && echo fill_error=ENOSPC || echo fill_error=none;"
                 "rm -f /work/fill;"
                 "i=0; while [ $i -lt %d ]; do sleep 30 & i=$((i+1)); echo forks=$i; done; echo fork_bomb=survived",
                 (unsigned long long) (2 * tmpfs / 65536), (int) (4 * pids));
        memcpy(argv, sh_argv, sizeof(argv));
        argv[2] = script;
        r = doctor_probe(d, &c, "limits", argv, DOCTOR_PROBE_TIMEOUT_SECONDS, &p);
        if (r < 0 || p.res.status == CAPSULE_ERROR || p.res.status == CAPSULE_TIMED_OUT) {
                const char *why = r < 0 ? strerror(-r) : doctor_probe_result(&p, buf, sizeof(buf));
                doctor_report(d, "probe_pids_limit", false, "the limits probe job did not complete: %s", why);
                doctor_report(d, "probe_tmpfs_limit", false, "the limits probe job did not complete: %s", why);
                doctor_probe_free(&p);
                return;
        }

        const char *v = doctor_probe_get(&p, "fill_size", buf, sizeof(buf));
        uint64_t size = v ? strtoull(v, NULL, 10) : 0;
        char err[32];
        const char *fe = doctor_probe_get(&p, "fill_error", err, sizeof(err));
        bool ok = v && fe && streq(fe, "ENOSPC") && size > 0 && size <= tmpfs;
        doctor_report(d, "probe_tmpfs_limit", ok, "writing %llu bytes into /work with workspace_tmpfs %llu bytes %s after %llu bytes",
               (unsigned long long) (2 * tmpfs), (unsigned long long) tmpfs,
               fe && streq(fe, "ENOSPC") ? "stopped with ENOSPC" : "did not fail with ENOSPC", (unsigned long long) size);

        v = doctor_probe_get(&p, "forks", buf, sizeof(buf));
        unsigned long forks = v ? strtoul(v, NULL, 10) : 0;
        bool survived = doctor_probe_get(&p, "fork_bomb", err, sizeof(err)) != NULL;
        ok = !survived && forks < pids;
        doctor_report(d, "probe_pids_limit", ok, "a fork bomb under pids %llu %s after %lu processes", (unsigned long long) pids,
               survived ? "was not stopped" : "was stopped", forks);
        doctor_probe_free(&p);
}

static void probe_memory(Doctor *d) {
        Config c = *d->config;
        char prog[256], buf[1200];
        Probe p;
        int r;

        c.limits.memory = c.limits.memory_swap = MIN(c.limits.memory, DOCTOR_MEMORY_LIMIT);
        uint64_t limit = c.limits.memory;
        snprintf(prog, sizeof(prog),
                 "BEGIN { s = \"a\"; for (i = 0; i < %d; i++) s = s s; print \"survived=\" length(s) }",
                 DOCTOR_MEMORY_ALLOC_SHIFT);
        char *argv[] = {(char *) "awk", prog, NULL};
        r = doctor_probe(d, &c, "memory", argv, DOCTOR_PROBE_TIMEOUT_SECONDS, &p);
        if (r < 0) {
                doctor_report(d, "probe_memory_limit", false, "the memory probe job could not run: %s", strerror(-r));
                return;
        }
        bool survived = doctor_probe_get(&p, "survived", buf, sizeof(buf)) != NULL;
        /* runsc >= 20240729 under docker/podman sizes the guest's memory to the limit: the guest
         * kernel refuses the allocation and awk exits with its own error (not 126/127: it ran). */
        bool refused = p.res.status == CAPSULE_FAILED && p.res.exit_code > 0 && p.res.exit_code < 126;
        if (!survived && p.res.status == CAPSULE_KILLED)
                doctor_report(d, "probe_memory_limit", true, "allocating %llu MiB under a %llu MiB limit was killed (%s)",
                       1ULL << (DOCTOR_MEMORY_ALLOC_SHIFT - 20), (unsigned long long) (limit >> 20),
                       p.res.reason ?: "signal");
        else if (!survived && refused)
                doctor_report(d, "probe_memory_limit", true,
                       "allocating %llu MiB under a %llu MiB limit was refused inside the capsule (exit %d)",
                       1ULL << (DOCTOR_MEMORY_ALLOC_SHIFT - 20), (unsigned long long) (limit >> 20),
                       p.res.exit_code);
        else
                doctor_report(d, "probe_memory_limit", false,
                       "allocating %llu MiB under a %llu MiB limit was not killed: the job ended %s",
                       1ULL << (DOCTOR_MEMORY_ALLOC_SHIFT - 20), (unsigned long long) (limit >> 20),
                       doctor_probe_result(&p, buf, sizeof(buf)));
        doctor_probe_free(&p);
}

/* ---- the whole --------------------------------------------------------------------- */

static void doctor_done(Doctor *d) {
        d->scratch_fd = safe_close(d->scratch_fd);
        if (d->base)
                (void) rm_rf_at(AT_FDCWD, d->base);
        free(d->base);
        d->base = NULL;
        capsule_driver_done(&d->driver);
        json_decref(d->checks);
}

int doctor_run(const Config *c, bool json, FILE *out) {
        DoctorOptions o = {.json = json, .inbox_dirs = true};
        return doctor_run_with(c, &o, out);
}

int doctor_run_with(const Config *c, const DoctorOptions *o, FILE *out) {
        bool json = o->json;
        /* The walls are proved without egress (a capsule with it holds its streams at
         * /proc/1/fd); the route has probes of its own (doctor-egress.c). */
        Config plain = *c;
        plain.network = (ConfigNetwork) { .max_upload_bytes = c->network.max_upload_bytes,
                                          .max_download_bytes = c->network.max_download_bytes };
        Doctor d = {.config = &plain, .json = json, .out = out, .scratch_fd = -EBADF};
        TfwError e = {0};
        bool runtime_ok;
        int r;

        d.checks = json_array();
        if (!d.checks)
                return -ENOMEM;
        r = probe_setup(&d);
        if (r < 0) {
                doctor_done(&d);
                return r;
        }

        for (size_t i = 0; i < o->n_lines; i++)
                doctor_report(&d, o->lines[i].check, o->lines[i].ok, "%s", o->lines[i].detail);
        runtime_ok = capsule_driver_init(&d.driver, c, d.runsc_root, o->engine_runtime, &e) >= 0;
        if (!runtime_ok)
                doctor_report(&d, "runtime", false, "%s", e.message);
        else
                runtime_ok = d.driver.ops->check(&d.driver, report_line, &d);
        if (d.driver.ops)
                doctor_isolation_line(&d);
        check_openat2(&d);
        check_cgroups(&d);
        if (o->inbox_dirs) {
                check_dirs(&d);
                check_group(&d);
                check_controller_view(&d);
                check_notify(&d);
                check_leftovers(&d);
                check_store(&d);
                doctor_check_watch(&d);
                check_cache(&d);
        }

        e = (TfwError){0};
        bool have_init = capsule_find_init(d.init_path, sizeof(d.init_path), &e) >= 0;
        if (!have_init)
                doctor_report(&d, "capsule_init", false, "%s", e.message);

        if (!runtime_ok || !have_init)
                doctor_report(&d, "probe", false, "not run: %s", !runtime_ok ? "the runtime is unavailable" : "no capsule init");
        else if (probe_platform(&d)) {
                probe_walls(&d, false);
                probe_narrow(&d, false);
                /* The same walls on a capsule started ahead of its job, as the daemon and
                 * serve's lanes use them (runtime.warm_seconds; threat 12). */
                if (c->warm_seconds > 0 && d.driver.ops->boots_ahead) {
                        probe_walls(&d, true);
                        probe_narrow(&d, true);
                }
                doctor_probe_kernel_walls(&d);
                probe_pids_tmpfs(&d);
                probe_memory(&d);
                if (capsule_config_egress(c))
                        doctor_probe_egress(&d, c);
                probe_other_platforms(&d);
        } else
                doctor_report(&d, "probe", false, "not run: no sandbox started");

        if (json) {
                char *s = json_dumps(d.checks, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
                if (!s) {
                        doctor_done(&d);
                        return -ENOMEM;
                }
                fprintf(out, "%s\n", s);
                free(s);
                fflush(out);
        }
        bool failed = d.failed;
        doctor_done(&d);
        return failed ? 1 : 0;
}
