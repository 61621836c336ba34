/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capsule/docker.h"
#include "parser/image-ref.h"
#include "capsule/env.h"
#include "capsule/oci-spec.h"
#include "capsule/protocol.h"
#include "common/exec-path.h"
#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/process.h"
#include "common/macro.h"
#include "common/path-util.h"
#include "capsule/id.h"

#define ENGINE_ENV_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define ENGINE_ARGS_MAX 128 /* our own flags; the job's argv comes on top (capped by policy) */

static bool apparmor_enabled(void) {
        char c = 0;
        _cleanup_close_ int fd = open("/sys/module/apparmor/parameters/enabled",
                                      O_RDONLY | O_CLOEXEC);
        return fd >= 0 && read(fd, &c, 1) == 1 && c == 'Y';
}

int engine_init(Engine *en, const Config *c, const char *runtime, TfwError *e) {
        /* The distribution's CLI first: it matches the distribution's engine. */
        static const char *const first[] = { "/usr/bin", NULL };
        Engine n = { .driver = c->driver };
        const char *name;
        int r;

        if (c->driver == DRIVER_DOCKER)
                name = "docker";
        else if (c->driver == DRIVER_PODMAN)
                name = "podman";
        else
                return tfw_error(e, EINVAL, "runtime_unavailable",
                                 "runtime.driver is not docker or podman");
        if (!c->image || !engine_image_is_pinned(c->image))
                return tfw_error(e, EINVAL, "runtime_unavailable",
                                 "runtime.image must be pinned by digest");
        r = find_executable(name, first, &n.binary);
        if (r < 0)
                return tfw_error(e, -r, "runtime_unavailable", "%s not found on PATH", name);
        n.runtime = strdup(runtime ?: ENGINE_DEFAULT_RUNTIME);
        n.worker_name = strdup(c->name);
        n.image = strdup(c->image);
        n.apparmor = apparmor_enabled();
        n.command_timeout = (c->engine_timeout_seconds ? c->engine_timeout_seconds
                                                        : CONFIG_DEFAULT_ENGINE_TIMEOUT_SECONDS) * USEC_PER_SEC;
        if (!n.runtime || !n.worker_name || !n.image) {
                engine_done(&n);
                return tfw_error(e, ENOMEM, "out_of_memory", "out of memory");
        }
        *en = n;
        return 0;
}

void engine_done(Engine *en) {
        free(en->binary);
        free(en->runtime);
        free(en->worker_name);
        free(en->image);
        *en = (Engine) {};
}

static bool is_hex64(const char *s) {
        size_t i;
        for (i = 0; s[i]; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return i == 64;
}

bool engine_image_is_pinned(const char *image) {
        return image_ref_is_pinned(image);
}

/* A host path spelled inside a --mount value: absolute, normalised, and free of the
 * characters of that syntax. */
static bool mount_path_ok(const char *p) {
        return p && path_is_absolute_normalized(p) && !strpbrk(p, ",:=\"");
}

/* ---- the argument list ---------------------------------------------------------------- */

typedef struct Args {
        char **v;
        size_t n, cap;
        bool oom;
} Args;

static void add(Args *a, const char *s) {
        if (a->oom)
                return;
        if (a->n + 2 > a->cap) {
                size_t cap = a->cap ? a->cap * 2 : 64;
                char **v = realloc(a->v, cap * sizeof(char *));
                if (!v) {
                        a->oom = true;
                        return;
                }
                a->v = v;
                a->cap = cap;
        }
        a->v[a->n] = strdup(s);
        if (!a->v[a->n]) {
                a->oom = true;
                return;
        }
        a->v[++a->n] = NULL;
}

static void addf(Args *a, const char *fmt, ...) _printf_(2, 3);
static void addf(Args *a, const char *fmt, ...) {
        char *s = NULL;
        va_list ap;
        va_start(ap, fmt);
        int r = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (r < 0) {
                a->oom = true;
                return;
        }
        add(a, s);
        free(s);
}

static void add2(Args *a, const char *flag, const char *value) {
        add(a, flag);
        add(a, value);
}

static void add_ro_bind(Args *a, const char *source, const char *target) {
        add(a, "--mount");
        addf(a, "type=bind,source=%s,target=%s,readonly", source, target);
}

/* Every field the command line is made of is present and well-formed, the limits set. */
static bool run_plan_is_valid(const EngineRunPlan *p) {
        if (!p || !p->limits || !p->runtime || !*p->runtime || !p->name ||
            !filename_is_valid(p->name) || !p->worker_name ||
            !config_name_is_valid(p->worker_name) || !p->job_id ||
            !capsule_job_id_is_valid(p->job_id) || !engine_image_is_pinned(p->image) ||
            (p->snapshot_dir && !mount_path_ok(p->snapshot_dir)) || !mount_path_ok(p->init_path) ||
            !mount_path_ok(p->passwd_path) || !mount_path_ok(p->group_path) || !p->argv ||
            !p->argv[0] || p->uid == 0 || p->gid == 0 ||
            (p->driver != DRIVER_DOCKER && p->driver != DRIVER_PODMAN) ||
            strchr(p->runtime, '=') || p->runtime[0] == '-' || !capsule_extra_env_is_valid(p->extra_env))
                return false;
        const ConfigLimits *l = p->limits;
        if (l->memory == 0 || l->memory_swap < l->memory || l->pids == 0 || !l->cpus[0] ||
            l->workspace_tmpfs == 0 || l->tmp_tmpfs == 0)
                return false;
        return true;
}

/* The capsule's limits: its two tmpfs, memory, CPU, processes, and the rlimits. */
static void add_limits(Args *a, const EngineRunPlan *p) {
        const ConfigLimits *l = p->limits;

        /* /work belongs to the job user: docker passes uid=/gid= to the tmpfs, podman 4.3
         * refuses them and spells it "U" (chown to the container's user). */
        add(a, "--tmpfs");
        if (p->driver == DRIVER_PODMAN)
                addf(a, "%s:rw,exec,nosuid,nodev,size=%llu,mode=0700,U", CAPSULE_WORK_PATH,
                     (unsigned long long) l->workspace_tmpfs);
        else
                addf(a, "%s:rw,exec,nosuid,nodev,size=%llu,mode=0700,uid=%u,gid=%u",
                     CAPSULE_WORK_PATH, (unsigned long long) l->workspace_tmpfs,
                     (unsigned) p->uid, (unsigned) p->gid);
        add(a, "--tmpfs");
        addf(a, "%s:rw,exec,nosuid,nodev,size=%llu,mode=1777", CAPSULE_TMP_PATH,
             (unsigned long long) l->tmp_tmpfs);
        add(a, "--memory");
        addf(a, "%llu", (unsigned long long) l->memory);
        add(a, "--memory-swap");
        addf(a, "%llu", (unsigned long long) l->memory_swap);
        add2(a, "--cpus", l->cpus);
        /* As with the runsc driver: the guest's process limit is RLIMIT_NPROC inside the
         * sandbox; the host cgroup carries the backstop for the sentry's threads. */
        add(a, "--pids-limit");
        addf(a, "%llu", (unsigned long long) capsule_host_pids_limit(l->pids));
        add(a, "--ulimit");
        addf(a, "nproc=%llu:%llu", (unsigned long long) l->pids, (unsigned long long) l->pids);
        add2(a, "--ulimit", "core=0:0");
        uint64_t nofile = l->open_files ? l->open_files : CAPSULE_NOFILE;
        add(a, "--ulimit");
        addf(a, "nofile=%llu:%llu", (unsigned long long) nofile, (unsigned long long) nofile);
        if (l->file_size) {
                add(a, "--ulimit");
                addf(a, "fsize=%llu:%llu", (unsigned long long) l->file_size,
                     (unsigned long long) l->file_size);
        }
}

/* The job's whole environment: the constant variables, the check's, the caller's, and none
 * of the engine's own. */
static void add_env(Args *a, const EngineRunPlan *p) {
        /* The constant environment (contract section 6), by value: none of it is secret. */
        add2(a, "--env", CAPSULE_ENV_PATH);
        add2(a, "--env", CAPSULE_ENV_HOME);
        add2(a, "--env", CAPSULE_ENV_TMPDIR);
        add2(a, "--env", CAPSULE_ENV_LANG);
        add(a, "--env");
        addf(a, "TENTAFLAKE_JOB=%s", p->job_id);
        /* The validation plane's constant variables (contract section 6). */
        if (p->check) {
                add2(a, "--env", CAPSULE_ENV_CI);
                add(a, "--env");
                addf(a, "TENTAFLAKE_CHECK=%s", p->check);
        }
        /* The caller's variables, each NAME=VALUE (a bare NAME would copy the engine CLI's
         * own variable: refused by capsule_env_is_valid). */
        for (char *const *v = p->extra_env; v && *v; v++)
                add2(a, "--env", *v);
        /* podman adds TERM and container=podman of its own (containers.conf). */
        if (p->driver == DRIVER_PODMAN) {
                add2(a, "--unsetenv", "TERM");
                add2(a, "--unsetenv", "container");
        }
}

int engine_run_args(const EngineRunPlan *p, char ***ret) {
        Args a = {};

        if (!run_plan_is_valid(p))
                return -EINVAL;

        add(&a, "run");
        /* stdin stays open for the channel secret; stdout and stderr are attached. */
        add(&a, "-i");
        add2(&a, "--name", p->name);
        add(&a, "--label");
        addf(&a, "%s=%s", ENGINE_LABEL_WORKER, p->worker_name);
        add(&a, "--label");
        addf(&a, "%s=%s", ENGINE_LABEL_JOB, p->job_id);
        /* Never a registry; never a copy of the output kept by the engine. */
        add2(&a, "--pull", "never");
        add2(&a, "--log-driver", "none");

        /* The walls. */
        add2(&a, "--runtime", p->runtime);
        /* Docker hands runsc --network=none through daemon.json's runtimeArgs; podman 4.3
         * would start runsc in the host's network namespace without it ("cannot run with
         * network enabled in root network namespace"), so it is passed per container. */
        if (p->driver == DRIVER_PODMAN)
                add2(&a, "--runtime-flag", "network=none");
        add2(&a, "--network", "none");
        add2(&a, "--ipc", "private");
        add(&a, "--user");
        addf(&a, "%u:%u", (unsigned) p->uid, (unsigned) p->gid);
        add2(&a, "--cap-drop", "ALL");
        add2(&a, "--security-opt", "no-new-privileges");
        /* Docker's default profile by name where AppArmor exists (podman picks its own
         * default there); the default seccomp profile is kept by never naming one. */
        if (p->apparmor && p->driver == DRIVER_DOCKER)
                add2(&a, "--security-opt", "apparmor=" ENGINE_APPARMOR_PROFILE);
        add(&a, "--read-only");
        /* The image's own metadata never acts: no HEALTHCHECK exec'd into the running capsule
         * by the engine, and (podman) no anonymous volume for a VOLUME line; docker has no such
         * switch, so engine_image_check refuses an image that declares one. */
        add(&a, "--no-healthcheck");
        if (p->driver == DRIVER_PODMAN)
                add2(&a, "--image-volume", "ignore");
        add_limits(&a, p);
        add2(&a, "--hostname", CAPSULE_HOSTNAME);
        add2(&a, "--workdir", CAPSULE_WORK_PATH);

        add_env(&a, p);

        /* Its only mounts, all read-only. */
        if (p->snapshot_dir) /* NULL: the workspace arrives on stdin */
                add_ro_bind(&a, p->snapshot_dir, CAPSULE_SNAPSHOT_PATH);
        add_ro_bind(&a, p->init_path, CAPSULE_INIT_PATH);
        add_ro_bind(&a, p->passwd_path, "/etc/passwd");
        add_ro_bind(&a, p->group_path, "/etc/group");

        /* Last: the entrypoint, the image, and init's "--" before the job's argv. */
        add2(&a, "--entrypoint", CAPSULE_INIT_PATH);
        add(&a, p->image);
        add(&a, "--");
        for (char *const *v = p->argv; *v; v++)
                add(&a, *v);

        if (a.oom) {
                strv_free(a.v);
                return -ENOMEM;
        }
        *ret = a.v;
        return 0;
}

/* ---- running the CLI ------------------------------------------------------------------ */

static _noreturn_ void exec_child(const Engine *en, char *const *argv, int in_fd, int out_fd,
                                  int err_fd, const char *workdir) {
        if (child_setup_stdio(in_fd, out_fd, err_fd) < 0)
                _exit(127);
        /* podman's conmon writes an "oom" file into its working directory when the kernel
         * kills the container for memory: never into the worker's. */
        if (workdir && chdir(workdir) < 0)
                _exit(127);
        char *env[] = { (char *) ENGINE_ENV_PATH, NULL };
        execve(en->binary, argv, env);
        _exit(127);
}

static int spawn_argv(const Engine *en, char *const *args, int in_fd, int out_fd, int err_fd,
                      const char *workdir, pid_t *ret_pid) {
        _cleanup_free_ char **argv = NULL;
        size_t n = 0;

        while (args[n])
                n++;
        argv = calloc(n + 2, sizeof(char *));
        if (!argv)
                return -ENOMEM;
        argv[0] = en->binary;
        memcpy(argv + 1, args, n * sizeof(char *));
        pid_t pid;
        int r = safe_fork(0, &pid);
        if (r < 0)
                return r;
        if (pid == 0)
                exec_child(en, argv, in_fd, out_fd, err_fd, workdir);
        *ret_pid = pid;
        return 0;
}

int engine_spawn(const Engine *en, char *const *args, int in_fd, int out_fd, int err_fd,
                 const char *workdir, pid_t *ret_pid) {
        return spawn_argv(en, args, in_fd, out_fd, err_fd, workdir, ret_pid);
}


int engine_command(const Engine *en, const char *const *args, usec_t timeout, int *ret_status,
                   char **ret_out) {
        _cleanup_close_ int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        _cleanup_close_ int memfd = -EBADF;
        pid_t pid;
        int st = 0, r;

        if (null < 0)
                return -errno;
        if (ret_out) {
                memfd = memfd_create("engine-out", MFD_CLOEXEC);
                if (memfd < 0)
                        return -errno;
        }
        r = spawn_argv(en, (char *const *) args, null, memfd >= 0 ? memfd : null, null, NULL, &pid);
        if (r < 0)
                return r;
        r = waitpid_bounded(pid, timeout, &st);
        if (r < 0)
                return r;
        if (ret_out) {
                _cleanup_free_ char *buf = NULL;
                size_t len;
                if (lseek(memfd, 0, SEEK_SET) < 0)
                        return -errno;
                r = read_full_fd_bounded(memfd, ENGINE_OUTPUT_MAX, &buf, &len);
                if (r < 0)
                        return r;
                *ret_out = TAKE_PTR(buf);
        }
        *ret_status = st;
        return 0;
}

static bool exited_zero(int st) {
        return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int engine_server_version(const Engine *en, char **ret, TfwError *e) {
        const char *args[] = { "version", "--format", "{{.Server.Version}}", NULL };
        _cleanup_free_ char *out = NULL;
        int st, r;

        r = engine_command(en, args, 20 * USEC_PER_SEC, &st, &out);
        if (r < 0 || !exited_zero(st))
                return tfw_error(e, r < 0 ? -r : EIO, "runtime_unavailable",
                                 "the %s engine does not answer ('%s version' failed)",
                                 driver_to_string(en->driver), en->binary);
        out[strcspn(out, "\r\n")] = 0;
        if (!out[0])
                return tfw_error(e, EIO, "runtime_unavailable",
                                 "the %s engine did not report a version",
                                 driver_to_string(en->driver));
        *ret = TAKE_PTR(out);
        return 0;
}

int engine_image_check(const Engine *en, TfwError *e) {
        const char *args[] = { "image", "inspect", "--format", "{{.Id}} {{json .Config.Volumes}}", en->image, NULL };
        _cleanup_free_ char *out = NULL;
        int st, r;

        r = engine_command(en, args, en->command_timeout, &st, &out);
        if (r < 0)
                return tfw_error(e, -r, "runtime_unavailable", "'%s image inspect': %s",
                                 en->binary, strerror(-r));
        if (!exited_zero(st))
                return tfw_error(e, ENOENT, "image_missing",
                                 "image '%s' is not in the local %s store (it is never pulled)",
                                 en->image, driver_to_string(en->driver));
        out[strcspn(out, "\r\n")] = 0;
        /* A VOLUME line would give docker's container a writable anonymous volume on the
         * host's disk, outside the tmpfs sizes: such an image is not run (podman ignores it). */
        char *vol = strchr(out, ' ');
        if (vol) {
                *vol++ = 0;
                if (en->driver == DRIVER_DOCKER && !streq(vol, "null") && !streq(vol, "{}"))
                        return tfw_error(e, EPERM, "image_refused",
                                         "image '%s' declares volumes (%.200s): docker would mount them writable "
                                         "from the host's disk",
                                         en->image, vol);
        }
        /* A local id must be the image's own id, not a prefix the engine resolved. */
        if (strncmp(en->image, "sha256:", 7) == 0) {
                const char *id = strncmp(out, "sha256:", 7) == 0 ? out + 7 : out;
                if (!streq(id, en->image + 7))
                        return tfw_error(e, ENOENT, "image_missing",
                                         "image '%s' resolves to another image ('%s')",
                                         en->image, out);
        }
        return 0;
}

int engine_runtime_entry(const Engine *en, char **ret) {
        _cleanup_free_ char *out = NULL;
        int st, r;

        *ret = NULL;
        if (en->driver == DRIVER_PODMAN)
                return 0; /* resolved through containers.conf at run time: not listed */
        const char *args[] = { "info", "--format", "{{json .Runtimes}}", NULL };
        r = engine_command(en, args, 20 * USEC_PER_SEC, &st, &out);
        if (r < 0)
                return r;
        if (!exited_zero(st))
                return -EIO;
        json_error_t err;
        _cleanup_(json_decrefp) json_t *all = json_loads(out, JSON_REJECT_DUPLICATES, &err);
        json_t *entry = json_object_get(all, en->runtime);
        if (!json_is_object(entry))
                return -ENOENT;
        *ret = json_dumps(entry, JSON_COMPACT | JSON_SORT_KEYS);
        return *ret ? 1 : -ENOMEM;
}

int engine_runtime_known(const Engine *en) {
        _cleanup_free_ char *entry = NULL;
        /* podman resolves the name through containers.conf at run time; the probe job is the
         * proof. */
        if (en->driver == DRIVER_PODMAN)
                return 1;
        int r = engine_runtime_entry(en, &entry);
        if (r == -ENOENT)
                return 0;
        return r < 0 ? r : 1;
}

int engine_kill(const Engine *en, const char *name) {
        const char *args[] = { "kill", name, NULL };
        int st;
        return engine_command(en, args, en->command_timeout, &st, NULL);
}

/* The full ids of containers matching a filter, one per line. */
static int list_filtered(const Engine *en, const char *filter, char **ret) {
        const char *args[] = { "ps", "-a", "-q", "--no-trunc", "--filter", filter, NULL };
        _cleanup_free_ char *out = NULL;
        int st, r;

        r = engine_command(en, args, en->command_timeout, &st, &out);
        if (r < 0)
                return r;
        if (!exited_zero(st))
                return -EIO;
        *ret = TAKE_PTR(out);
        return 0;
}

int engine_remove(const Engine *en, const char *name) {
        const char *args[] = { "rm", "-f", "-v", name, NULL };
        _cleanup_free_ char *filter = NULL, *left = NULL;
        int st, r;

        r = engine_command(en, args, en->command_timeout, &st, NULL);
        if (r < 0)
                return r;
        if (exited_zero(st))
                return 0;
        /* "No such container" is success: ask again whether it is there. */
        if (asprintf(&filter, "name=^%s$", name) < 0)
                return -ENOMEM;
        r = list_filtered(en, filter, &left);
        if (r < 0)
                return r;
        return left[strspn(left, " \r\n")] ? -EBUSY : 0;
}

/* One field of a container (a Go template of `inspect`) into *ret; -ENOENT: no such container. */
static int inspect_container(const Engine *en, const char *name, const char *format, usec_t timeout, char **ret) {
        const char *args[] = { "inspect", "--type", "container", "--format", format, name, NULL };
        _cleanup_free_ char *out = NULL;
        int st, r;

        r = engine_command(en, args, timeout, &st, &out);
        if (r < 0)
                return r;
        if (!exited_zero(st) || !out)
                return -ENOENT;
        *ret = TAKE_PTR(out);
        return 0;
}

int engine_oom_killed(const Engine *en, const char *name) {
        _cleanup_free_ char *out = NULL;
        int r = inspect_container(en, name, "{{.State.OOMKilled}}", en->command_timeout, &out);
        if (r < 0)
                return r;
        return strncmp(out, "true", 4) == 0;
}

int engine_container_pid(const Engine *en, const char *name, pid_t *ret_pid, char ret_id[static ENGINE_ID_MAX + 1]) {
        _cleanup_free_ char *out = NULL;
        /* Asked while the job runs, from its event loop: a short bound. */
        int r = inspect_container(en, name, "{{.State.Pid}} {{.Id}}", ENGINE_INSPECT_PID_TIMEOUT_USEC, &out);
        if (r < 0)
                return r;
        char *end;
        errno = 0;
        long pid = strtol(out, &end, 10);
        if (errno || end == out || *end != ' ')
                return -EBADMSG;
        const char *id = end + 1;
        size_t n = strcspn(id, "\r\n");
        if (n < 12 || n > ENGINE_ID_MAX || strspn(id, "0123456789abcdef") < n)
                return -EBADMSG;
        if (pid <= 0)
                return -ESRCH; /* created, not running (yet, or any more) */
        memcpy(ret_id, id, n);
        ret_id[n] = 0;
        *ret_pid = (pid_t) pid;
        return 0;
}

int engine_list_owned(const Engine *en, char **ret) {
        _cleanup_free_ char *filter = NULL;
        if (asprintf(&filter, "label=%s=%s", ENGINE_LABEL_WORKER, en->worker_name) < 0)
                return -ENOMEM;
        return list_filtered(en, filter, ret);
}

int engine_cleanup_stale(const Engine *en, unsigned *ret_removed, TfwError *e) {
        _cleanup_free_ char *out = NULL;
        unsigned removed = 0;
        char *save = NULL;
        int r;

        r = engine_list_owned(en, &out);
        if (r < 0)
                return tfw_error(e, -r, "runtime_unavailable",
                                 "cannot list the %s containers of worker '%s'",
                                 driver_to_string(en->driver), en->worker_name);
        for (char *id = strtok_r(out, " \r\n", &save); id; id = strtok_r(NULL, " \r\n", &save)) {
                if (!is_hex64(id))
                        continue; /* not an id the engine would print */
                r = engine_remove(en, id);
                if (r < 0)
                        return tfw_error(e, -r, "runtime_unavailable",
                                         "cannot remove stale container '%s': %s", id,
                                         strerror(-r));
                removed++;
        }
        if (ret_removed)
                *ret_removed = removed;
        return 0;
}

int engine_spawn_run(const Engine *en, const Config *c, const char *name, const char *job_id,
                     char *const *argv, char *const *extra_env, const char *check, const char *snapshot_dir,
                     const char *init_path, const char *passwd_path, const char *group_path,
                     const char *workdir, int in_fd, int out_fd, int err_fd, pid_t *ret_pid) {
        _cleanup_strv_free_ char **args = NULL;
        EngineRunPlan plan = {
                .driver = en->driver,
                .runtime = en->runtime,
                .name = name,
                .worker_name = c->name,
                .job_id = job_id,
                .image = c->image ? c->image : en->image, /* a policy's pinned image */
                .apparmor = en->apparmor,
                .limits = &c->limits,
                .uid = c->container_uid,
                .gid = c->container_gid,
                .snapshot_dir = snapshot_dir,
                .init_path = init_path,
                .passwd_path = passwd_path,
                .group_path = group_path,
                .argv = argv,
                .extra_env = extra_env,
                .check = check,
        };
        int r = engine_run_args(&plan, &args);
        if (r < 0)
                return r;
        return engine_spawn(en, args, in_fd, out_fd, err_fd, workdir, ret_pid);
}
