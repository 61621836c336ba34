/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "capsule/env.h"
#include "capsule/oci-spec.h"
#include "capsule/protocol.h"
#include "capsule/seccomp-allowlist.h"
#include "capsule/seccomp-profile.h"
#include "common/macro.h"
#include "common/path-util.h"
#include "capsule/id.h"

/* jansson's *_new steals nothing and returns NULL on ENOMEM; the _new helpers of objects and
 * arrays below take ownership (json_object_set_new / json_array_append_new), and those accept
 * a NULL value and report failure, so one check at the end of each builder suffices. */

static json_t *strv_json(const char *const *l) {
        json_t *a = json_array();
        if (!a)
                return NULL;
        for (; *l; l++)
                if (json_array_append_new(a, json_string(*l)) < 0) {
                        json_decref(a);
                        return NULL;
                }
        return a;
}

static json_t *mount_json(const char *dest, const char *type, const char *source,
                          const char *const *options) {
        json_t *m = json_object();
        if (!m)
                return NULL;
        if (json_object_set_new(m, "destination", json_string(dest)) < 0 ||
            json_object_set_new(m, "type", json_string(type)) < 0 ||
            json_object_set_new(m, "source", json_string(source)) < 0 ||
            json_object_set_new(m, "options", strv_json(options)) < 0) {
                json_decref(m);
                return NULL;
        }
        return m;
}

/* A read-only bind of a host path: nothing written through it reaches the host, no set-id
 * bit or device node on it means anything. */
static json_t *ro_bind_json(const char *dest, const char *source, bool recursive, bool noexec) {
        const char *opts[] = { recursive ? "rbind" : "bind", "ro", "nosuid", "nodev",
                               noexec ? "noexec" : NULL, NULL };
        return mount_json(dest, "bind", source, opts);
}

static json_t *tmpfs_json(const char *dest, uint64_t size, const char *mode, uid_t uid,
                          gid_t gid, bool owned) {
        char sz[64], u[32], g[32];
        snprintf(sz, sizeof(sz), "size=%llu", (unsigned long long) size);
        snprintf(u, sizeof(u), "uid=%u", (unsigned) uid);
        snprintf(g, sizeof(g), "gid=%u", (unsigned) gid);
        const char *opts[] = { "nosuid", "nodev", sz, mode, owned ? u : NULL, owned ? g : NULL,
                               NULL };
        return mount_json(dest, "tmpfs", "tmpfs", opts);
}

/* The devices gVisor puts in every /dev beyond the null/zero/random family (contract section
 * 5: no devices). runsc turns any mount at /dev into its own device filesystem, whatever the
 * spec says, and it has no flag to leave one out (its --fuse is a no-op), so each is covered
 * by an empty tmpfs that cannot be written, read or entered (mode 0000, ro): /dev/fuse
 * becomes that empty directory, no device; /dev/net an empty one, no tun. */
static const char *const covered_devices[] = { CAPSULE_DEV_FUSE_PATH, CAPSULE_DEV_NET_PATH };

static json_t *cover_json(const char *dest) {
        const char *opts[] = { "ro", "nosuid", "nodev", "noexec", "mode=0000", "size=4k", NULL };
        return mount_json(dest, "tmpfs", "tmpfs", opts);
}

/* A runc capsule's /proc and /sys (threat 23): what tells of the host's kernel or changes it is
 * masked (/dev/null over a file, an empty read-only tmpfs over a directory), the rest read-only. */
static const char *const kernel_masked_paths[] = {
        "/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kallsyms", "/proc/kcore", "/proc/keys",
        "/proc/key-users", "/proc/kmsg", "/proc/latency_stats", "/proc/sched_debug", "/proc/scsi",
        "/proc/sysrq-trigger", "/proc/timer_list", "/proc/timer_stats", "/sys/firmware",
        "/sys/devices/virtual/powercap", "/sys/kernel/debug", "/sys/kernel/security", NULL,
};
static const char *const kernel_readonly_paths[] = {
        "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger", NULL,
};

static json_t *rlimit_json(const char *type, uint64_t v) {
        return json_pack("{s:s, s:I, s:I}", "type", type, "hard", (json_int_t) v, "soft",
                         (json_int_t) v);
}

uint64_t capsule_host_pids_limit(uint64_t pids) {
        /* Measured with runsc 20221219 on the ptrace platform: about 50 host threads for an
         * idle sandbox and 8 to 9 more per guest process. 16 per process leaves room for
         * threads; the cap keeps the product sane. */
        uint64_t v = 256 + 16 * MIN(pids, (uint64_t) 1 << 20);
        return MIN(v, (uint64_t) 1 << 22);
}

static int append_user_line(FILE *f, const char *name, unsigned uid, unsigned gid,
                            const char *gecos, const char *home, const char *shell) {
        return fprintf(f, "%s:x:%u:%u:%s:%s:%s\n", name, uid, gid, gecos, home, shell) < 0
                       ? -EIO
                       : 0;
}

int capsule_passwd_text(const Config *c, char **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        int r;

        if (!f)
                return -ENOMEM;
        r = append_user_line(f, "root", 0, 0, "root", "/root", "/usr/sbin/nologin");
        if (r >= 0)
                r = append_user_line(f, CAPSULE_USER_NAME, c->container_uid, c->container_gid,
                                     "tentaflake job", CAPSULE_WORK_PATH, "/bin/sh");
        if (r >= 0 && c->container_uid != 65534)
                r = append_user_line(f, "nobody", 65534, 65534, "nobody", "/nonexistent",
                                     "/usr/sbin/nologin");
        if (fclose(f) != 0 && r >= 0)
                r = -ENOMEM;
        if (r < 0)
                return r;
        *ret = TAKE_PTR(buf);
        return 0;
}

int capsule_group_text(const Config *c, char **ret) {
        char *s = NULL;
        int r;

        if (c->container_gid == 65534)
                r = asprintf(&s, "root:x:0:\n%s:x:%u:\n", CAPSULE_USER_NAME,
                             (unsigned) c->container_gid);
        else
                r = asprintf(&s, "root:x:0:\n%s:x:%u:\nnogroup:x:65534:\n", CAPSULE_USER_NAME,
                             (unsigned) c->container_gid);
        if (r < 0)
                return -ENOMEM;
        *ret = s;
        return 0;
}

const char *const capsule_egress_env[] = CAPSULE_EGRESS_ENV_INIT;

static json_t *process_json(const CapsuleSpecParams *p) {
        const Config *c = p->config;
        _cleanup_free_ char *job_env = NULL, *check_env = NULL;
        json_t *args, *proc;

        if (asprintf(&job_env, "TENTAFLAKE_JOB=%s", p->job_id) < 0 ||
            (p->check && asprintf(&check_env, "TENTAFLAKE_CHECK=%s", p->check) < 0))
                return NULL;
        const char *env[] = { CAPSULE_ENV_PATH, CAPSULE_ENV_HOME, CAPSULE_ENV_TMPDIR, CAPSULE_ENV_LANG,
                              job_env,          p->check ? CAPSULE_ENV_CI : NULL, check_env, NULL };
        const char *none[] = { NULL };

        /* A warm capsule: init waits for its job on the channel, nothing of it is here. */
        const char *warm_env[] = { CAPSULE_ENV_PATH, NULL };
        bool egress = capsule_config_egress(c);
        /* With a generation: init's first argument names the ids it drops to once it has
         * mounted the job's layer (capsule/protocol.h). */
        _cleanup_free_ char *layer = NULL;
        if (p->work_dir && asprintf(&layer, CAPSULE_LAYER_ARG "%u:%u", (unsigned) c->container_uid,
                                    (unsigned) c->container_gid) < 0)
                return NULL;
        args = json_pack("[s]", CAPSULE_INIT_PATH);
        if (args && p->kernel && p->kernel->landlock && json_array_append_new(args, json_string(CAPSULE_LANDLOCK_ARG)) < 0)
                json_decref(args), args = NULL;
        if (args && layer && json_array_append_new(args, json_string(layer)) < 0)
                json_decref(args), args = NULL;
        /* On the host's kernel init hands each connection's socket to the proxy (protocol.h). */
        if (args && egress &&
            json_array_append_new(args, json_string(p->kernel ? CAPSULE_EGRESS_PASS_ARG : CAPSULE_EGRESS_ARG)) < 0)
                json_decref(args), args = NULL;
        /* "--" ends init's own arguments; then the job's argv, never a shell. A warm capsule:
         * the job comes on the channel. */
        if (args && json_array_append_new(args, json_string(p->warm ? CAPSULE_WARM_ARG : "--")) < 0)
                json_decref(args), args = NULL;
        if (!args)
                return NULL;
        for (char *const *a = p->argv; !p->warm && *a; a++)
                if (json_array_append_new(args, json_string(*a)) < 0) {
                        json_decref(args);
                        return NULL;
                }

        json_t *envj = strv_json(p->warm ? warm_env : env);
        for (const char *const *v = capsule_egress_env; envj && egress && !p->warm && *v; v++)
                if (json_array_append_new(envj, json_string(*v)) < 0) {
                        json_decref(envj);
                        envj = NULL;
                }
        for (char *const *v = p->extra_env; envj && !p->warm && v && *v; v++)
                if (json_array_append_new(envj, json_string(*v)) < 0) {
                        json_decref(envj);
                        envj = NULL;
                }
        if (!envj) {
                json_decref(args);
                return NULL;
        }

        /* Init alone starts as the sandbox's root with the layer's capabilities, and only with
         * a generation: it mounts the layer and drops to the job's ids before any input or job
         * process (capsule-init/layer.c). Everything else starts as the job's ids, with none. */
        const char *layer_caps[] = CAPSULE_LAYER_CAPS;
        const char *const *held = p->work_dir ? layer_caps : none;
        json_int_t uid = p->work_dir ? 0 : (json_int_t) c->container_uid;
        json_int_t gid = p->work_dir ? 0 : (json_int_t) c->container_gid;
        proc = json_pack(
                "{s:b, s:{s:I, s:I, s:[]}, s:o, s:o, s:s,"
                " s:{s:o, s:o, s:o, s:o, s:o},"
                " s:[o, o], s:b}",
                "terminal", 0,
                "user", "uid", uid, "gid", gid, "additionalGids",
                "args", args,
                "env", envj,
                "cwd", CAPSULE_WORK_PATH,
                "capabilities", "bounding", strv_json(held), "effective", strv_json(held),
                "inheritable", strv_json(none), "permitted", strv_json(held), "ambient",
                strv_json(none),
                "rlimits", rlimit_json("RLIMIT_CORE", 0),
                rlimit_json("RLIMIT_NOFILE", c->limits.open_files ? c->limits.open_files : CAPSULE_NOFILE),
                "noNewPrivileges", 1);
        /* The guest process limit under runsc: gVisor counts it per uid inside the sandbox,
         * where only the job's processes (and init) have this uid. Under runc the cgroup's
         * pids.max is the job's own limit, and an RLIMIT_NPROC there would refuse the fork
         * first (the kernel asks it before the cgroup), so the cgroup's record of the refusal,
         * the "pids" wall, would never be written (capsule/job-walls.c). */
        if (proc && !p->kernel &&
            json_array_append_new(json_object_get(proc, "rlimits"), rlimit_json("RLIMIT_NPROC", c->limits.pids)) < 0) {
                json_decref(proc);
                return NULL;
        }
        if (proc && c->limits.file_size)
                (void) json_array_append_new(json_object_get(proc, "rlimits"),
                                             rlimit_json("RLIMIT_FSIZE", c->limits.file_size));
        return proc;
}

static int add_mount(json_t *mounts, json_t *m) {
        return json_array_append_new(mounts, m) < 0 ? -ENOMEM : 0;
}

static json_t *mounts_json(const CapsuleSpecParams *p) {
        const Config *c = p->config;
        const char *proc_opts[] = { "nosuid", "noexec", "nodev", NULL };
        const char *dev_opts[] = { "nosuid", "noexec", "strictatime", "mode=755",
                                   CAPSULE_DEV_TMPFS_SIZE, NULL };
        const char *sys_opts[] = { "nosuid", "noexec", "nodev", "ro", NULL };
        json_t *mounts = json_array();
        int r = 0;

        if (!mounts)
                return NULL;
        r = add_mount(mounts, mount_json("/proc", "proc", "proc", proc_opts));
        /* gVisor fills its own /dev with null, zero, full, random, urandom, tty, ptmx and pts,
         * and with every device it registers, fuse and net/tun among them; no host device is
         * ever passed (linux.devices stays empty). runc binds only null, zero, full, random,
         * urandom and tty of the host's into the tmpfs (its defaults), nothing else. */
        if (r >= 0)
                r = add_mount(mounts, mount_json("/dev", "tmpfs", "tmpfs", dev_opts));
        for (size_t i = 0; r >= 0 && !p->kernel && i < ELEMENTSOF(covered_devices); i++)
                r = add_mount(mounts, cover_json(covered_devices[i]));

        if (r >= 0)
                r = add_mount(mounts, mount_json("/sys", "sysfs", "sysfs", sys_opts));
        /* A generation and the cache's lower layers read-only, and the tmpfs that holds what
         * the job writes over them (capsule/protocol.h, CAPSULE_LAYER_PATH). */
        if (r >= 0 && p->work_dir)
                r = add_mount(mounts, ro_bind_json(CAPSULE_WORK_PATH, p->work_dir, false, false));
        if (r >= 0 && p->work_dir && p->cache_paths)
                r = add_mount(mounts, ro_bind_json(CAPSULE_CACHE_LOWER_PATH, p->cache_dir, false, false));
        if (r >= 0 && p->work_dir)
                r = add_mount(mounts, tmpfs_json(CAPSULE_LAYER_PATH, c->limits.workspace_tmpfs,
                                                 "mode=0700", 0, 0, false));
        if (r >= 0 && !p->work_dir)
                r = add_mount(mounts, tmpfs_json(CAPSULE_WORK_PATH, c->limits.workspace_tmpfs,
                                                 "mode=0700", c->container_uid,
                                                 c->container_gid, true));
        if (r >= 0)
                r = add_mount(mounts, tmpfs_json(CAPSULE_TMP_PATH, c->limits.tmp_tmpfs,
                                                 "mode=1777", 0, 0, false));
        if (r >= 0 && p->snapshot_dir) /* NULL: the workspace arrives on stdin */
                r = add_mount(mounts,
                              ro_bind_json(CAPSULE_SNAPSHOT_PATH, p->snapshot_dir, false, true));
        if (r >= 0)
                r = add_mount(mounts, ro_bind_json(CAPSULE_INIT_PATH, p->init_path, false, false));
        /* With an image root the synthetic /etc files are bound over the image's; the empty
         * root of the bundle carries them itself (two host mounts fewer). */
        if (c->rootfs && r >= 0)
                r = add_mount(mounts, ro_bind_json("/etc/passwd", p->passwd_path, false, true));
        if (c->rootfs && r >= 0)
                r = add_mount(mounts, ro_bind_json("/etc/group", p->group_path, false, true));
        if (!c->rootfs)
                for (size_t i = 0; r >= 0 && i < c->n_system_mounts; i++) {
                        json_t *m = ro_bind_json(c->system_mounts[i].sandbox, c->system_mounts[i].host, true, false);
                        /* runc makes only the top of an rbind read-only; its submounts keep their own
                         * flags unless "rro" (mount_setattr with AT_RECURSIVE) asks for all of them
                         * (threat 23). gVisor's binds are read-only whole. */
                        if (m && p->kernel && json_array_append_new(json_object_get(m, "options"), json_string("rro")) < 0) {
                                json_decref(m);
                                m = NULL;
                        }
                        r = add_mount(mounts, m);
                }
        if (r < 0) {
                json_decref(mounts);
                return NULL;
        }
        return mounts;
}

static json_t *id_map_json(unsigned job_id) {
        return json_pack("[{s:I, s:I, s:I}, {s:I, s:I, s:I}]", "containerID", (json_int_t) 0, "hostID",
                         (json_int_t) CONFIG_CAPSULE_ROOT_ID, "size", (json_int_t) 1, "containerID",
                         (json_int_t) job_id, "hostID", (json_int_t) job_id, "size", (json_int_t) 1);
}

/* runc's walls beyond runsc's spec (threat 23): a user namespace whose root is
 * CONFIG_CAPSULE_ROOT_ID on the host and whose only other id is the job's own, the cgroup
 * namespace too, masked and read-only paths and the allowlist (notifying the worker's listener
 * when the driver gave one: capsule/seccomp-notify.h). runc writes linux.resources into
 * the worker's cgroup again: the same values (pids: the job's own, which the host's cgroup
 * counts there, capsule/job.c). */
static int linux_kernel_walls(json_t *lx, const CapsuleSpecParams *p) {
        const Config *c = p->config;
        json_t *ns = json_object_get(lx, "namespaces");
        bool listener = p->kernel->listener_path[0] != '\0';

        if (json_array_insert_new(ns, 0, json_pack("{s:s}", "type", "user")) < 0 ||
            json_array_append_new(ns, json_pack("{s:s}", "type", "cgroup")) < 0 ||
            json_object_set_new(lx, "uidMappings", id_map_json(c->container_uid)) < 0 ||
            json_object_set_new(lx, "gidMappings", id_map_json(c->container_gid)) < 0 ||
            json_object_set_new(lx, "maskedPaths", strv_json(kernel_masked_paths)) < 0 ||
            json_object_set_new(lx, "readonlyPaths", strv_json(kernel_readonly_paths)) < 0 ||
            json_object_set_new(lx, "seccomp", capsule_seccomp_allowlist_json(p->work_dir != NULL, listener)) < 0)
                return -ENOMEM;
        if (listener && json_object_set_new(json_object_get(lx, "seccomp"), "listenerPath",
                                            json_string(p->kernel->listener_path)) < 0)
                return -ENOMEM;
        return 0;
}

static json_t *linux_json(const CapsuleSpecParams *p) {
        const ConfigLimits *l = &p->config->limits;
        /* A CPU quota of cpus_milli thousandths of a CPU per period. */
        uint64_t quota = l->cpus_milli * (CAPSULE_CPU_PERIOD_US / 1000);
        json_t *lx;

        /* The seccomp profile takes effect only with `runsc --oci-seccomp` (capsule/runsc.c);
         * without it runsc ignores it and says so in its log. */
        lx = json_pack(
                "{s:[{s:s}, {s:s}, {s:s}, {s:s}, {s:s}],"
                " s:{s:{s:I, s:I}, s:{s:I}, s:{s:I, s:I}, s:[{s:b, s:s}]}, s:o}",
                "namespaces", "type", "pid", "type", "ipc", "type", "uts", "type", "mount",
                "type", "network",
                "resources",
                "memory", "limit", (json_int_t) l->memory, "swap", (json_int_t) l->memory_swap,
                "pids", "limit", (json_int_t) l->pids,
                "cpu", "quota", (json_int_t) quota, "period", (json_int_t) CAPSULE_CPU_PERIOD_US,
                "devices", "allow", 0, "access", "rwm",
                "seccomp", p->kernel ? json_object() : capsule_seccomp_json(p->work_dir != NULL));
        if (lx && p->kernel && linux_kernel_walls(lx, p) < 0) {
                json_decref(lx);
                return NULL;
        }
        /* The cgroup the driver created and limited: runsc joins it as it is. */
        if (lx && p->cgroups_path &&
            json_object_set_new(lx, "cgroupsPath", json_string(p->cgroups_path)) < 0) {
                json_decref(lx);
                return NULL;
        }
        return lx;
}

static bool params_valid(const CapsuleSpecParams *p) {
        const char *paths[] = { p->snapshot_dir, p->init_path, p->passwd_path, p->group_path };

        if (p->work_dir && (p->snapshot_dir || !path_is_absolute_normalized(p->work_dir)))
                return false;
        if (p->cache_paths && !p->work_dir)
                return false;
        if (p->cache_paths && (!p->cache_dir || !path_is_absolute_normalized(p->cache_dir)))
                return false;
        for (size_t i = 0; p->cache_paths && p->cache_paths[i]; i++)
                if (!capsule_cache_path_is_valid(p->cache_paths[i], strlen(p->cache_paths[i])))
                        return false;

        if (!p->config || !p->job_id || !capsule_job_id_is_valid(p->job_id) || !p->argv ||
            !p->argv[0])
                return false;
        /* passwd and group are host paths only with an image root. */
        size_t n = p->config->rootfs ? ELEMENTSOF(paths) : 2;
        for (size_t i = 0; i < n; i++)
                if ((i > 0 || p->snapshot_dir) && (!paths[i] || !path_is_absolute_normalized(paths[i])))
                        return false;
        if (!p->config->rootfs && (!p->root_dir || !path_is_absolute_normalized(p->root_dir)))
                return false;
        if (p->config->container_uid == 0 || p->config->container_gid == 0)
                return false;
        if (p->cgroups_path && !path_is_absolute_normalized(p->cgroups_path))
                return false;
        /* runc's root is the worker's empty directory: never an image's. */
        if (p->kernel && (p->config->rootfs || !path_is_absolute_normalized(p->kernel->root_dir)))
                return false;
        if (!capsule_extra_env_is_valid(p->extra_env))
                return false;
        return true;
}

int capsule_spec_build(const CapsuleSpecParams *p, json_t **ret, TfwError *e) {
        char timeout[32];
        json_t *spec;

        if (!params_valid(p))
                return tfw_error(e, EINVAL, "bad_capsule_spec",
                                 "capsule spec: invalid parameters for job '%s'",
                                 p->job_id && capsule_job_id_is_valid(p->job_id) ? p->job_id : "?");

        snprintf(timeout, sizeof(timeout), "%llu", (unsigned long long) p->timeout_seconds);
        spec = json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:o, s:{s:s, s:s, s:s}}",
                         "ociVersion", "1.0.2",
                         "process", process_json(p),
                         "root", "path", p->kernel ? p->kernel->root_dir : p->config->rootfs ? p->config->rootfs : p->root_dir,
                         "readonly", 1,
                         "hostname", CAPSULE_HOSTNAME,
                         "mounts", mounts_json(p),
                         "linux", linux_json(p),
                         "annotations", CAPSULE_ANNOTATION_WORKER, p->config->name,
                         CAPSULE_ANNOTATION_JOB, p->job_id, "org.tentaflake.timeout_seconds",
                         timeout);
        if (!spec)
                return tfw_error(e, ENOMEM, "out_of_memory", "capsule spec: out of memory");
        *ret = spec;
        return 0;
}
