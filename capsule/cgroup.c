/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "capsule/cgroup.h"
#include "common/fd-util.h"
#include "common/macro.h"
#include "common/path-util.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

#define CGROUP_ROOT "/sys/fs/cgroup"
#define PROCS_MAX (1U << 20) /* bytes of cgroup.procs read at most */

enum { CG_MEMORY, CG_PIDS, CG_CPU, _CG_MAX };
static const char *const controller_names[_CG_MAX] = { "memory", "pids", "cpu" };

struct CgroupJob {
        bool v2;
        size_t n; /* hierarchies used: 3 under v1, 1 under v2 */
        char *name;
        char *path; /* "/<group>/<name>" */
        int group_fd[_CG_MAX];
        int dir_fd[_CG_MAX];
        int procs_fd[_CG_MAX];
        int acct_fd; /* where the CPU time used is read: the cpu directory (v2, or v1 with cpu
                      * and cpuacct mounted together) or our own cpuacct directory (v1) */
        int acct_group_fd; /* v1 with a separate cpuacct hierarchy: its group directory */
};

static bool is_v2(void) {
        struct statfs s;
        return statfs(CGROUP_ROOT, &s) >= 0 && s.f_type == CGROUP2_SUPER_MAGIC;
}

/* Read /proc/self/mountinfo (bounded) into *ret_buf. */
static int read_mountinfo(char **ret_buf) {
        _cleanup_close_ int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return read_full_fd_bounded(fd, 4U << 20, ret_buf, NULL);
}

/* The next cgroup (v1) mount of the mountinfo text at *cursor, which it consumes: its mount
 * point, the root of the hierarchy it shows, and its super options (the controllers, comma
 * separated). Pointers into the buffer. Returns false at the end. */
static bool next_v1_mount(char **cursor, char **ret_mount, char **ret_root, char **ret_super) {
        for (char *line = *cursor, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = 0;
                *cursor = next;
                /* id parent maj:min root mountpoint opts [optional...] - fstype source super */
                char *f[5] = {}, *save = NULL, *tok = strtok_r(line, " ", &save);
                for (int i = 0; i < 5 && tok; i++, tok = strtok_r(NULL, " ", &save))
                        f[i] = tok;
                while (tok && !streq(tok, "-"))
                        tok = strtok_r(NULL, " ", &save);
                if (!tok || !f[4])
                        continue;
                char *fstype = strtok_r(NULL, " ", &save);
                (void) strtok_r(NULL, " ", &save);
                char *super = strtok_r(NULL, " ", &save);
                if (!fstype || !super || !streq(fstype, "cgroup"))
                        continue;
                *ret_mount = f[4];
                *ret_root = f[3];
                *ret_super = super;
                return true;
        }
        *cursor = NULL;
        return false;
}

static bool options_contain(char *super, const char *controller) {
        char *save = NULL;
        for (char *o = strtok_r(super, ",", &save); o; o = strtok_r(NULL, ",", &save))
                if (streq(o, controller))
                        return true;
        return false;
}

/* Under v1: the mount point of the hierarchy carrying `controller`, from mountinfo. */
static int v1_mount_point(const char *controller, char **ret_mount, char **ret_root) {
        _cleanup_free_ char *buf = NULL;
        char *cursor, *mount, *root, *super;
        int r = read_mountinfo(&buf);

        if (r < 0)
                return r;
        for (cursor = buf; next_v1_mount(&cursor, &mount, &root, &super);)
                if (options_contain(super, controller)) {
                        char *m = strdup(mount), *rt = strdup(root);
                        if (!m || !rt) {
                                free(m);
                                free(rt);
                                return -ENOMEM;
                        }
                        *ret_mount = m;
                        *ret_root = rt;
                        return 0;
                }
        return -ENOENT;
}

/* Under v1: the mount points of the other hierarchies (cpuset, cpuacct, devices, freezer,
 * blkio, the named systemd one, ...). runsc creates the job's path in each of them, owns and
 * normally removes it; a runsc that was killed leaves it behind. NULL-terminated. */
/* The mount points of the v1 hierarchies: all of them, or only those without a controller the
 * jobs use (others_only). */
static int v1_mounts(bool others_only, char ***ret) {
        _cleanup_free_ char *buf = NULL;
        char **l = NULL, *cursor, *mount, *root, *super;
        size_t n = 0;
        int r = read_mountinfo(&buf);

        if (r < 0)
                return r;
        for (cursor = buf; next_v1_mount(&cursor, &mount, &root, &super);) {
                bool ours = false;
                char *s2 = NULL;
                for (char *o = strtok_r(super, ",", &s2); o; o = strtok_r(NULL, ",", &s2))
                        for (int c = 0; c < _CG_MAX; c++)
                                ours = ours || streq(o, controller_names[c]);
                if ((ours && others_only) || n >= 64)
                        continue;
                char **nl = realloc(l, (n + 2) * sizeof(char *));
                if (!nl) {
                        strv_free(l);
                        return -ENOMEM;
                }
                l = nl;
                l[n] = strdup(mount);
                l[++n] = NULL;
                if (!l[n - 1]) {
                        strv_free(l);
                        return -ENOMEM;
                }
        }
        if (!l) {
                l = calloc(1, sizeof(char *));
                if (!l)
                        return -ENOMEM;
        }
        *ret = l;
        return 0;
}

static int v1_other_mounts(char ***ret) {
        return v1_mounts(true, ret);
}

static int write_at(int dir_fd, const char *file, const char *value) {
        _cleanup_close_ int fd = openat(dir_fd, file, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        return write_all(fd, value, strlen(value));
}

static int write_u64_at(int dir_fd, const char *file, uint64_t v) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%" PRIu64, v);
        return write_at(dir_fd, file, buf);
}

static int read_at(int dir_fd, const char *file, size_t max, char **ret) {
        _cleanup_close_ int fd = openat(dir_fd, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        size_t len;
        if (fd < 0)
                return -errno;
        return read_full_fd_bounded(fd, max, ret, &len);
}

/* "key N" lines (memory.events, pids.events, memory.oom_control). Missing key: 0. */
static uint64_t read_key(int dir_fd, const char *file, const char *key) {
        _cleanup_free_ char *buf = NULL;
        size_t kl = strlen(key);
        if (read_at(dir_fd, file, 64 * 1024, &buf) < 0)
                return 0;
        for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (strncmp(l, key, kl) == 0 && l[kl] == ' ')
                        return strtoull(l + kl + 1, NULL, 10);
        return 0;
}

static bool has_controllers(int dir_fd, const char *file) {
        _cleanup_free_ char *buf = NULL;
        if (read_at(dir_fd, file, 4096, &buf) < 0)
                return false;
        for (int i = 0; i < _CG_MAX; i++) {
                bool found = false;
                char *save = NULL;
                _cleanup_free_ char *copy = strdup(buf);
                if (!copy)
                        return false;
                for (char *t = strtok_r(copy, " \n", &save); t && !found;
                     t = strtok_r(NULL, " \n", &save))
                        found = streq(t, controller_names[i]);
                if (!found)
                        return false;
        }
        return true;
}

/* v2: children of dir_fd get memory, pids and cpu. dir_fd is the root (exempt from the
 * no-internal-process rule) or the group, which never holds a process. */
static int v2_enable(int dir_fd, const char *what, TfwError *e) {
        if (has_controllers(dir_fd, "cgroup.subtree_control"))
                return 0;
        if (!has_controllers(dir_fd, "cgroup.controllers"))
                return tfw_error(e, EOPNOTSUPP, "cgroup_unavailable",
                                 "cgroup v2: memory, pids and cpu are not all available in %s",
                                 what);
        int r = write_at(dir_fd, "cgroup.subtree_control", "+memory +pids +cpu");
        if (r < 0)
                return tfw_error(e, -r, "cgroup_unavailable",
                                 "cgroup v2: cannot enable memory, pids and cpu in %s: %s", what,
                                 strerror(-r));
        return 0;
}

static void job_free(CgroupJob *j) {
        if (!j)
                return;
        for (int i = 0; i < _CG_MAX; i++) {
                safe_close(j->procs_fd[i]);
                safe_close(j->dir_fd[i]);
                safe_close(j->group_fd[i]);
        }
        safe_close(j->acct_fd);
        safe_close(j->acct_group_fd);
        free(j->name);
        free(j->path);
        free(j);
}

static CgroupJob *job_new(const char *group, const char *name) {
        CgroupJob *j = calloc(1, sizeof(*j));
        if (!j)
                return NULL;
        for (int i = 0; i < _CG_MAX; i++)
                j->group_fd[i] = j->dir_fd[i] = j->procs_fd[i] = -EBADF;
        j->acct_fd = j->acct_group_fd = -EBADF;
        j->name = strdup(name);
        if (!j->name || asprintf(&j->path, "/%s/%s", group, name) < 0) {
                free(j->name);
                free(j);
                return NULL;
        }
        return j;
}

/* Open (creating when asked) the group directory in every hierarchy into j->group_fd. */
static int job_open_group(CgroupJob *j, const char *group, bool create, TfwError *e) {
        int r;

        j->v2 = is_v2();
        j->n = j->v2 ? 1 : _CG_MAX;
        for (size_t i = 0; i < j->n; i++) {
                _cleanup_free_ char *mount = NULL, *root = NULL;
                _cleanup_close_ int root_fd = -EBADF;
                const char *what = j->v2 ? "the unified hierarchy" : controller_names[i];

                if (j->v2)
                        root_fd = open(CGROUP_ROOT, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                else {
                        r = v1_mount_point(controller_names[i], &mount, &root);
                        if (r < 0)
                                return tfw_error(e, -r, "cgroup_unavailable",
                                                 "cgroup v1: no hierarchy carries the %s "
                                                 "controller",
                                                 controller_names[i]);
                        root_fd = open(mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                }
                if (root_fd < 0)
                        return tfw_error(e, errno, "cgroup_unavailable",
                                         "cgroup: cannot open %s: %s", what, strerror(errno));
                if (j->v2 && create && (r = v2_enable(root_fd, "the root cgroup", e)) < 0)
                        return r;
                if (create && mkdirat(root_fd, group, 0755) < 0 && errno != EEXIST)
                        return tfw_error(e, errno, "cgroup_unavailable",
                                         "cgroup '%s' (%s): cannot create it: %s", group, what,
                                         strerror(errno));
                j->group_fd[i] = open_dir_at(root_fd, group);
                if (j->group_fd[i] < 0)
                        return tfw_error(e, -j->group_fd[i], "cgroup_unavailable",
                                         "cgroup '%s' (%s): %s", group, what,
                                         strerror(-j->group_fd[i]));
                if (j->v2 && create && (r = v2_enable(j->group_fd[i], group, e)) < 0)
                        return r;
        }
        return 0;
}

int cgroup_group_name(const char *worker_name, char **ret) {
        char *s;
        if (asprintf(&s, "tentaflake-worker-%s", worker_name) < 0)
                return -ENOMEM;
        if (!filename_is_valid(s)) {
                free(s);
                return -EINVAL;
        }
        *ret = s;
        return 0;
}

static int apply_limits(CgroupJob *j, const CgroupLimits *l, TfwError *e) {
        int mem = j->dir_fd[j->v2 ? 0 : CG_MEMORY], pids = j->dir_fd[j->v2 ? 0 : CG_PIDS],
            cpu = j->dir_fd[j->v2 ? 0 : CG_CPU];
        const char *what;
        int r;

        if (j->v2) {
                char buf[64];
                what = "memory.max";
                r = write_u64_at(mem, what, l->memory);
                if (r >= 0) {
                        what = "memory.swap.max";
                        r = write_u64_at(mem, what, l->memory_swap - l->memory);
                        /* No swap controller (swapaccount=0): no swap is possible to limit,
                         * and none can be granted either. */
                        if (r == -ENOENT)
                                r = 0;
                }
                if (r >= 0) {
                        what = "pids.max";
                        r = write_u64_at(pids, what, l->pids);
                }
                if (r >= 0 && l->cpu_quota_us > 0) {
                        what = "cpu.max";
                        snprintf(buf, sizeof(buf), "%" PRIu64 " %" PRIu64, l->cpu_quota_us,
                                 l->cpu_period_us);
                        r = write_at(cpu, what, buf);
                }
        } else {
                what = "memory.limit_in_bytes";
                r = write_u64_at(mem, what, l->memory);
                if (r >= 0) {
                        what = "memory.memsw.limit_in_bytes";
                        r = write_u64_at(mem, what, l->memory_swap);
                        if (r == -ENOENT) {
                                /* Swap accounting is off: keep the job out of swap so memory
                                 * alone bounds it. */
                                what = "memory.swappiness";
                                r = write_u64_at(mem, what, 0);
                        }
                }
                if (r >= 0) {
                        what = "pids.max";
                        r = write_u64_at(pids, what, l->pids);
                }
                if (r >= 0 && l->cpu_quota_us > 0) {
                        what = "cpu.cfs_period_us";
                        r = write_u64_at(cpu, what, l->cpu_period_us);
                        if (r >= 0) {
                                what = "cpu.cfs_quota_us";
                                r = write_u64_at(cpu, what, l->cpu_quota_us);
                        }
                }
        }
        if (r < 0)
                return tfw_error(e, -r, "cgroup_unavailable",
                                 "cgroup '%s': cannot set %s: %s", j->name, what, strerror(-r));
        return 0;
}

/* Where the CPU time is read. v2: cpu.stat of the job's directory. v1: cpuacct.usage, in
 * the cpu hierarchy when cpuacct is mounted with it, else in a directory of the same path we
 * create in the cpuacct hierarchy (runsc joins the spec's path in every hierarchy, so the
 * sandbox is accounted there; the v1 sweep of the other hierarchies removes it). */
static int open_accounting(CgroupJob *j, const char *group, TfwError *e) {
        struct stat st;
        if (j->v2 || fstatat(j->dir_fd[CG_CPU], "cpuacct.usage", &st, AT_SYMLINK_NOFOLLOW) >= 0) {
                j->acct_fd = fcntl(j->dir_fd[j->v2 ? 0 : CG_CPU], F_DUPFD_CLOEXEC, 3);
                return j->acct_fd < 0 ? tfw_error(e, errno, "cgroup_unavailable", "cgroup '%s': %s", j->path,
                                                  strerror(errno))
                                      : 0;
        }
        _cleanup_free_ char *mount = NULL, *root = NULL;
        int r = v1_mount_point("cpuacct", &mount, &root);
        if (r < 0)
                return tfw_error(e, -r, "cgroup_unavailable", "cgroup v1: no hierarchy carries the cpuacct controller");
        _cleanup_close_ int root_fd = open(mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return tfw_error(e, errno, "cgroup_unavailable", "cgroup: cannot open %s: %s", mount, strerror(errno));
        if (mkdirat(root_fd, group, 0755) < 0 && errno != EEXIST)
                return tfw_error(e, errno, "cgroup_unavailable", "cgroup '%s' (cpuacct): cannot create it: %s", group,
                                 strerror(errno));
        j->acct_group_fd = open_dir_at(root_fd, group);
        if (j->acct_group_fd < 0)
                return tfw_error(e, -j->acct_group_fd, "cgroup_unavailable", "cgroup '%s' (cpuacct): %s", group,
                                 strerror(-j->acct_group_fd));
        if (mkdirat(j->acct_group_fd, j->name, 0755) < 0) {
                j->acct_group_fd = safe_close(j->acct_group_fd); /* not ours: never removed */
                return tfw_error(e, errno, errno == EEXIST ? "cgroup_exists" : "cgroup_unavailable",
                                 "cgroup '%s' (cpuacct): cannot create it: %s", j->path, strerror(errno));
        }
        j->acct_fd = open_dir_at(j->acct_group_fd, j->name);
        if (j->acct_fd < 0)
                return tfw_error(e, -j->acct_fd, "cgroup_unavailable", "cgroup '%s' (cpuacct): %s", j->path,
                                 strerror(-j->acct_fd));
        return 0;
}

static int read_u64_file(int dir_fd, const char *file, uint64_t *ret) {
        _cleanup_free_ char *buf = NULL;
        int r = read_at(dir_fd, file, 64, &buf);
        if (r < 0)
                return r;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(buf, &end, 10);
        if (errno || end == buf || (*end && *end != '\n'))
                return -EBADMSG;
        *ret = v;
        return 0;
}

/* CPU time in µs from a directory: v2 cpu.stat usage_usec, v1 cpuacct.usage (ns). */
static int cpu_usage_at(int dir_fd, bool v2, uint64_t *ret_usec) {
        if (v2) {
                _cleanup_free_ char *buf = NULL;
                int r = read_at(dir_fd, "cpu.stat", 64 * 1024, &buf);
                if (r < 0)
                        return r;
                for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                        if (strncmp(l, "usage_usec ", 11) == 0) {
                                *ret_usec = strtoull(l + 11, NULL, 10);
                                return 0;
                        }
                return -ENODATA;
        }
        uint64_t ns;
        int r = read_u64_file(dir_fd, "cpuacct.usage", &ns);
        if (r >= 0)
                *ret_usec = ns / 1000;
        return r;
}

int cgroup_job_set_cpu_weight(const CgroupJob *j, bool low) {
        int cpu = j->dir_fd[j->v2 ? 0 : CG_CPU];
        if (j->v2)
                return write_u64_at(cpu, "cpu.weight", low ? 1 : 100);
        return write_u64_at(cpu, "cpu.shares", low ? 2 : 1024);
}

int cgroup_job_cpu_usage(const CgroupJob *j, uint64_t *ret_usec) {
        if (j->acct_fd < 0)
                return -EBADF;
        if (j->acct_group_fd >= 0) {
                /* Our own cpuacct directory counts only if the sandbox really joined it: empty
                 * while the memory cgroup holds processes would read 0 for ever. */
                _cleanup_free_ char *procs = NULL, *mem = NULL;
                int r = read_at(j->acct_fd, "cgroup.procs", PROCS_MAX, &procs);
                if (r < 0)
                        return r;
                if (!procs[0] && read_at(j->dir_fd[CG_MEMORY], "cgroup.procs", PROCS_MAX, &mem) >= 0 && mem[0])
                        return -ENODATA;
        }
        return cpu_usage_at(j->acct_fd, j->v2, ret_usec);
}

int cgroup_cpu_usage_of_pid(pid_t pid, const char *owner_id, uint64_t *ret_usec) {
        char path[64], *save = NULL;
        _cleanup_free_ char *buf = NULL;
        bool v2 = is_v2();
        int r;

        if (pid <= 0 || !owner_id || strlen(owner_id) < 12)
                return -EINVAL;
        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int) pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        r = read_full_fd_bounded(fd, 64 * 1024, &buf, NULL);
        if (r < 0)
                return r;
        /* "N:controllers:/path" lines; v2 has the one "0::/path". */
        for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *c = strchr(line, ':'), *p = c ? strchr(c + 1, ':') : NULL;
                if (!p || p[1] != '/')
                        continue;
                *p++ = 0;
                c++;
                bool hit = v2 ? *c == 0 : false;
                if (!v2) {
                        char *s2 = NULL;
                        for (char *o = strtok_r(c, ",", &s2); o && !hit; o = strtok_r(NULL, ",", &s2))
                                hit = streq(o, "cpuacct");
                }
                if (!hit)
                        continue;
                _cleanup_free_ char *mount = NULL, *root = NULL;
                if (!v2 && (r = v1_mount_point("cpuacct", &mount, &root)) < 0)
                        return r;
                /* The path is relative to the hierarchy's root as this mount shows it. */
                const char *rel = p;
                if (!v2 && !streq(root, "/")) {
                        size_t rl = strlen(root);
                        if (strncmp(p, root, rl) != 0 || (p[rl] != '/' && p[rl] != 0))
                                return -ENOENT;
                        rel = p + rl;
                }
                _cleanup_close_ int base = open(v2 ? CGROUP_ROOT : mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (base < 0)
                        return -errno;
                while (*rel == '/')
                        rel++;
                /* The container's own cgroup, or nothing: its last component names the
                 * container (docker: /docker/<id>, docker-<id>.scope; podman: libpod-<id>),
                 * so a reused pid or a process in a shared cgroup is never measured. */
                const char *last = strrchr(p, '/');
                if (!last || !strstr(last, owner_id) || strstr(rel, ".."))
                        return -ESTALE;
                _cleanup_close_ int dir = *rel ? openat(base, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)
                                               : fcntl(base, F_DUPFD_CLOEXEC, 3);
                if (dir < 0)
                        return -errno;
                return cpu_usage_at(dir, v2, ret_usec);
        }
        return -ENOENT;
}

static void remove_dirs(CgroupJob *j) {
        j->acct_fd = safe_close(j->acct_fd);
        if (j->acct_group_fd >= 0)
                (void) unlinkat(j->acct_group_fd, j->name, AT_REMOVEDIR);
        for (size_t i = 0; i < j->n; i++) {
                j->procs_fd[i] = safe_close(j->procs_fd[i]);
                j->dir_fd[i] = safe_close(j->dir_fd[i]);
                if (j->group_fd[i] >= 0)
                        (void) unlinkat(j->group_fd[i], j->name, AT_REMOVEDIR);
        }
}

int cgroup_job_create(const char *group, const char *name, const CgroupLimits *limits,
                      CgroupJob **ret, TfwError *e) {
        CgroupJob *j;
        int r;

        if (!filename_is_valid(group) || !filename_is_valid(name))
                return tfw_error(e, EINVAL, "cgroup_unavailable", "invalid cgroup name");
        if (limits->memory_swap < limits->memory)
                return tfw_error(e, EINVAL, "cgroup_unavailable",
                                 "cgroup '%s': memory+swap below memory", name);
        j = job_new(group, name);
        if (!j)
                return tfw_error(e, ENOMEM, "out_of_memory", "out of memory");
        r = job_open_group(j, group, true, e);
        if (r < 0)
                goto fail;
        for (size_t i = 0; i < j->n; i++) {
                if (mkdirat(j->group_fd[i], name, 0755) < 0) {
                        r = tfw_error(e, errno,
                                      errno == EEXIST ? "cgroup_exists" : "cgroup_unavailable",
                                      "cgroup '%s': cannot create it: %s", j->path,
                                      strerror(errno));
                        /* Never remove a cgroup we did not create. */
                        for (size_t k = i; k < j->n; k++)
                                j->group_fd[k] = safe_close(j->group_fd[k]);
                        goto fail;
                }
                j->dir_fd[i] = open_dir_at(j->group_fd[i], name);
                if (j->dir_fd[i] < 0) {
                        r = tfw_error(e, -j->dir_fd[i], "cgroup_unavailable",
                                      "cgroup '%s': cannot open it: %s", j->path,
                                      strerror(-j->dir_fd[i]));
                        goto fail;
                }
                j->procs_fd[i] = openat(j->dir_fd[i], "cgroup.procs",
                                        O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
                if (j->procs_fd[i] < 0) {
                        r = tfw_error(e, errno, "cgroup_unavailable",
                                      "cgroup '%s': cannot open cgroup.procs: %s", j->path,
                                      strerror(errno));
                        goto fail;
                }
        }
        r = apply_limits(j, limits, e);
        if (r >= 0)
                r = open_accounting(j, group, e);
        if (r < 0)
                goto fail;
        *ret = j;
        return 0;
fail:
        remove_dirs(j);
        job_free(j);
        return r;
}

const char *cgroup_job_path(const CgroupJob *j) {
        return j->path;
}

int cgroup_job_enter(const CgroupJob *j) {
        for (size_t i = 0; i < j->n; i++)
                if (write(j->procs_fd[i], "0", 1) != 1)
                        return -errno;
        return 0;
}

static int cmp_pid(const void *a, const void *b) {
        pid_t x = *(const pid_t *) a, y = *(const pid_t *) b;
        return x < y ? -1 : x > y;
}

/* Append the pids listed in dir_fd/cgroup.procs to *pids (bounded by PROCS_MAX bytes). */
static int collect_pids(int dir_fd, pid_t **pids, size_t *n) {
        _cleanup_free_ char *buf = NULL;
        int r = read_at(dir_fd, "cgroup.procs", PROCS_MAX, &buf);
        if (r < 0)
                return r;
        for (char *p = buf, *end; *p; p = end) {
                long pid = strtol(p, &end, 10);
                if (end == p)
                        break;
                while (*end == '\n')
                        end++;
                if (pid <= 0)
                        continue;
                pid_t *np = realloc(*pids, (*n + 1) * sizeof(pid_t));
                if (!np)
                        return -ENOMEM;
                *pids = np;
                (*pids)[(*n)++] = (pid_t) pid;
        }
        return 0;
}

int cgroup_job_kill(const CgroupJob *j, pid_t except) {
        _cleanup_free_ pid_t *pids = NULL;
        size_t n = 0;
        int killed = 0;

        /* Every hierarchy (a process is normally in all of them), each pid once.
         * cgroup.kill (v2, Linux 5.14) would race nothing, but cannot spare `except`. */
        for (size_t i = 0; i < j->n; i++) {
                int r = collect_pids(j->dir_fd[i], &pids, &n);
                if (r < 0)
                        return r;
        }
        if (n > 0)
                qsort(pids, n, sizeof(pid_t), cmp_pid);
        for (size_t i = 0; i < n; i++) {
                if ((i > 0 && pids[i] == pids[i - 1]) || pids[i] == except)
                        continue;
                if (kill(pids[i], SIGKILL) >= 0)
                        killed++;
        }
        return killed;
}

int cgroup_job_populated(const CgroupJob *j) {
        for (size_t i = 0; i < j->n; i++) {
                _cleanup_free_ char *buf = NULL;
                int r = read_at(j->dir_fd[i], "cgroup.procs", PROCS_MAX, &buf);
                if (r < 0)
                        return r;
                if (buf[0] != 0)
                        return 1;
        }
        return 0;
}

int cgroup_job_events(const CgroupJob *j, CgroupEvents *ret) {
        CgroupEvents ev = {};
        if (j->v2) {
                ev.oom_kills = read_key(j->dir_fd[0], "memory.events", "oom_kill");
                ev.pids_max = read_key(j->dir_fd[0], "pids.events", "max");
        } else {
                ev.oom_kills = read_key(j->dir_fd[CG_MEMORY], "memory.oom_control", "oom_kill");
                ev.pids_max = read_key(j->dir_fd[CG_PIDS], "pids.events", "max");
        }
        *ret = ev;
        return 0;
}

int cgroup_job_peak_memory(const CgroupJob *j, uint64_t *ret_bytes) {
        /* v1: memory.max_usage_in_bytes; v2: memory.peak (kernel 5.19 and later). */
        if (j->v2)
                return read_u64_file(j->dir_fd[0], "memory.peak", ret_bytes);
        return read_u64_file(j->dir_fd[CG_MEMORY], "memory.max_usage_in_bytes", ret_bytes);
}

/* v1: remove <group>/<name> from the hierarchies runsc created it in (killing anything
 * still listed there first). Best effort: a leftover here limits nothing. */
static void v1_sweep_others(const char *group, const char *name) {
        _cleanup_strv_free_ char **mounts = NULL;

        if (v1_other_mounts(&mounts) < 0)
                return;
        for (char **m = mounts; *m; m++) {
                _cleanup_close_ int root = open(*m, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                _cleanup_close_ int g = root >= 0 ? open_dir_at(root, group) : -EBADF;
                _cleanup_close_ int d = g >= 0 ? open_dir_at(g, name) : -EBADF;
                if (d < 0)
                        continue;
                _cleanup_free_ pid_t *pids = NULL;
                size_t n = 0;
                if (collect_pids(d, &pids, &n) >= 0)
                        for (size_t i = 0; i < n; i++)
                                (void) kill(pids[i], SIGKILL);
                d = safe_close(d);
                for (int tries = 0; tries < 100; tries++) {
                        if (unlinkat(g, name, AT_REMOVEDIR) >= 0 || errno != EBUSY)
                                break;
                        nanosleep(&(struct timespec) { .tv_nsec = 10 * 1000 * 1000 }, NULL);
                }
        }
}

int cgroup_job_destroy(CgroupJob *j) {
        int r = 0;

        if (!j->v2) {
                /* path is "/<group>/<name>" */
                _cleanup_free_ char *group = strndup(j->path + 1, strlen(j->path) - strlen(j->name) - 2);
                if (group)
                        v1_sweep_others(group, j->name);
        }

        /* Processes leave a cgroup when they exit; an unkillable moment (a task in the middle
         * of exiting) is short. Bounded: 10 s, then give up and report EBUSY. */
        for (int tries = 0; tries < 1000; tries++) {
                (void) cgroup_job_kill(j, 0);
                r = cgroup_job_populated(j);
                if (r <= 0)
                        break;
                r = -EBUSY;
                nanosleep(&(struct timespec) { .tv_nsec = 10 * 1000 * 1000 }, NULL);
        }
        if (r >= 0) {
                /* Our cpuacct directory (v1, separate hierarchy): the sweep above ran while the
                 * sandbox may still have been in it. */
                j->acct_fd = safe_close(j->acct_fd);
                if (j->acct_group_fd >= 0)
                        (void) unlinkat(j->acct_group_fd, j->name, AT_REMOVEDIR);
                for (size_t i = 0; i < j->n; i++) {
                        j->procs_fd[i] = safe_close(j->procs_fd[i]);
                        j->dir_fd[i] = safe_close(j->dir_fd[i]);
                        if (unlinkat(j->group_fd[i], j->name, AT_REMOVEDIR) < 0 &&
                            errno != ENOENT && r >= 0)
                                r = -errno;
                }
        }
        job_free(j);
        return r;
}

/* The job cgroup <group>/<name> as it exists (only the hierarchies where it is), or *ret NULL
 * when the group does not. */
static int job_open_existing(const char *group, const char *name, CgroupJob **ret) {
        TfwError e = {};
        CgroupJob *j;
        int r;

        if (!filename_is_valid(group) || !filename_is_valid(name))
                return -EINVAL;
        j = job_new(group, name);
        if (!j)
                return -ENOMEM;
        r = job_open_group(j, group, false, &e);
        if (r == -ENOENT) {
                job_free(j);
                *ret = NULL;
                return 0; /* no group: nothing of ours */
        }
        if (r < 0) {
                job_free(j);
                return r;
        }
        /* Keep only the hierarchies where it exists, dense, for the helpers. */
        size_t k = 0;
        for (size_t i = 0; i < j->n; i++) {
                int fd = open_dir_at(j->group_fd[i], name);
                if (fd < 0) {
                        j->group_fd[i] = safe_close(j->group_fd[i]);
                        if (fd != -ENOENT && r >= 0)
                                r = fd;
                        continue;
                }
                j->dir_fd[k] = fd;
                if (k != i) {
                        j->group_fd[k] = j->group_fd[i];
                        j->group_fd[i] = -EBADF;
                }
                k++;
        }
        j->n = k;
        if (r < 0) {
                job_free(j);
                return r;
        }
        *ret = j;
        return 0;
}

int cgroup_job_remove_stale(const char *group, const char *name) {
        CgroupJob *j = NULL;
        int r = job_open_existing(group, name, &j);
        if (r < 0 || !j)
                return r;
        return cgroup_job_destroy(j);
}

int cgroup_job_kill_by_name(const char *group, const char *name) {
        CgroupJob *j = NULL;
        int r = job_open_existing(group, name, &j);
        if (r < 0 || !j)
                return r;
        r = cgroup_job_kill(j, 0);
        job_free(j);
        return r;
}

int cgroup_group_remove_stale(const char *group, unsigned *ret_removed) {
        TfwError e = {};
        CgroupJob *j = job_new(group, "x");
        unsigned removed = 0;
        int r;

        if (!j)
                return -ENOMEM;
        r = job_open_group(j, group, false, &e);
        if (r < 0) {
                job_free(j);
                if (ret_removed)
                        *ret_removed = 0;
                return r == -ENOENT ? 0 : r;
        }
        for (size_t i = 0; i < j->n; i++) {
                _cleanup_closedir_ DIR *d = opendir_fd(j->group_fd[i]);
                struct dirent *de;
                if (!d)
                        continue;
                struct stat st;
                /* Under v1 a job appears in every hierarchy; count it where it still is. */
                while ((de = readdir(d)))
                        if (de->d_type == DT_DIR && filename_is_valid(de->d_name) &&
                            fstatat(j->group_fd[i], de->d_name, &st, AT_SYMLINK_NOFOLLOW) >= 0 &&
                            cgroup_job_remove_stale(group, de->d_name) >= 0)
                                removed++;
        }
        /* Leaves only runsc made (in the other v1 hierarchies), for a job whose own cgroup
         * is already gone. */
        _cleanup_strv_free_ char **mounts = NULL;
        if (!j->v2 && v1_other_mounts(&mounts) >= 0)
                for (char **m = mounts; *m; m++) {
                        _cleanup_close_ int root = open(*m, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        int gfd = root >= 0 ? open_dir_at(root, group) : -EBADF;
                        _cleanup_closedir_ DIR *d = gfd >= 0 ? fdopendir(gfd) : NULL;
                        struct dirent *de;
                        if (!d) {
                                safe_close(gfd);
                                continue;
                        }
                        while ((de = readdir(d)))
                                if (de->d_type == DT_DIR && filename_is_valid(de->d_name))
                                        v1_sweep_others(group, de->d_name);
                }
        job_free(j);
        if (ret_removed)
                *ret_removed = removed;
        return 0;
}

int cgroup_group_remove_empty(const char *group, unsigned *ret_busy) {
        _cleanup_strv_free_ char **mounts = NULL;
        unsigned busy = 0;

        if (is_v2()) {
                mounts = calloc(2, sizeof(char *));
                if (!mounts || !(mounts[0] = strdup(CGROUP_ROOT)))
                        return -ENOMEM;
        } else {
                int r = v1_mounts(false, &mounts);
                if (r < 0)
                        return r;
        }
        for (char **m = mounts; *m; m++) {
                _cleanup_close_ int root = open(*m, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                /* rmdir of a cgroup succeeds only when it has no child cgroup and no process. */
                if (root >= 0 && unlinkat(root, group, AT_REMOVEDIR) < 0 && errno != ENOENT)
                        busy++;
        }
        if (ret_busy)
                *ret_busy = busy;
        return 0;
}

const char *cgroup_mode_string(void) {
        struct statfs s;
        if (statfs(CGROUP_ROOT, &s) < 0)
                return NULL;
        if (s.f_type == CGROUP2_SUPER_MAGIC)
                return "v2";
        _cleanup_free_ char *m = NULL, *root = NULL;
        if (v1_mount_point("memory", &m, &root) < 0)
                return NULL;
        return "v1";
}
