/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capsule/id.h"
#include "capsule/oci-spec.h"
#include "capsule/protocol.h"
#include "capsule/runsc.h"
#include "common/fd-util.h"
#include "common/process.h"
#include "common/json-util.h"
#include "common/macro.h"
#include "common/path-util.h"

#define RUNSC_ENV_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define RUNSC_LIST_MAX (4U << 20)
#define RUNSC_STATE_MAX (4U << 20)
/* `runsc --version` answers at once; one that does not is killed after this. */
#define RUNSC_VERSION_USEC (10 * USEC_PER_SEC)

int runsc_find_on_path(const char *name, char **ret) {
        const char *path = getenv("PATH");
        if (!path || !*path)
                path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
        _cleanup_free_ char *copy = strdup(path);
        char *save = NULL;
        if (!copy)
                return -ENOMEM;
        for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
                _cleanup_free_ char *p = NULL;
                if (d[0] != '/')
                        continue; /* a relative PATH entry would depend on our cwd */
                if (asprintf(&p, "%s/%s", d, name) < 0)
                        return -ENOMEM;
                struct stat st;
                if (stat(p, &st) >= 0 && S_ISREG(st.st_mode) && access(p, X_OK) >= 0) {
                        *ret = TAKE_PTR(p);
                        return 0;
                }
        }
        return -ENOENT;
}

int runsc_init(Runsc *rt, const Config *c, const char *root, TfwError *e) {
        Runsc n = {};
        int r;

        if (!path_is_absolute_normalized(root))
                return tfw_error(e, EINVAL, "runtime_unavailable",
                                 "runsc root '%s' is not an absolute normalised path", root);
        if (c->runsc) {
                n.binary = strdup(c->runsc);
                if (!n.binary)
                        return tfw_error(e, ENOMEM, "out_of_memory", "out of memory");
        } else {
                r = runsc_find_on_path("runsc", &n.binary);
                if (r < 0)
                        return tfw_error(e, -r, "runtime_unavailable",
                                         "runsc not found on PATH (set runtime.runsc)");
        }
        if (mkdir(root, 0700) < 0 && errno != EEXIST) {
                r = -errno;
                free(n.binary);
                return tfw_error(e, -r, "runtime_unavailable", "runsc root '%s': %s", root,
                                 strerror(-r));
        }
        n.root = strdup(root);
        n.platform = strdup(c->platform ? c->platform : CONFIG_DEFAULT_PLATFORM);
        n.worker_name = strdup(c->name);
        if (!n.root || !n.platform || !n.worker_name) {
                runsc_done(&n);
                return tfw_error(e, ENOMEM, "out_of_memory", "out of memory");
        }
        *rt = n;
        return 0;
}

void runsc_done(Runsc *rt) {
        free(rt->binary);
        free(rt->root);
        free(rt->platform);
        free(rt->worker_name);
        *rt = (Runsc) {};
}

void runsc_hold(Runsc *rt, int fd) {
        rt->hold = fd >= 0;
        rt->hold_fd = fd;
}

/* Between fork and exec: raw syscalls only (common/process.h). fds: the child's 0, 1, 2 and then
 * what it passes on (--pass-fd). */
static _noreturn_ void exec_child(const Runsc *rt, char *const *argv, const int *fds, size_t n_fds,
                                  const CgroupJob *cg) {
        if (cg && cgroup_job_enter(cg) < 0)
                _exit(127);
        if (child_setup_fds(fds, n_fds) < 0)
                _exit(127);
        /* runsc creates the capsule's mount points (such as /.tentaflake in the empty root)
         * with its caller's umask, and the job, neither their owner nor in their group, must
         * traverse them: a service's UMask=0077 would lock it out of its own init. */
        (void) umask(022);
        char *env[] = { (char *) RUNSC_ENV_PATH, NULL };
        execve(rt->binary, argv, env);
        _exit(127);
}

int runsc_spawn_argv(const Runsc *rt, char *const *argv, const int *fds, size_t n_fds, const CgroupJob *cg,
                     pid_t *ret_pid) {
        int all[CAPSULE_EGRESS_FD_BASE + RUNSC_PASS_FDS_MAX + 1]; /* runc: /dev/null up to the base */
        pid_t pid;

        if (n_fds + 1 > ELEMENTSOF(all))
                return -E2BIG;
        memcpy(all, fds, n_fds * sizeof(int));
        if (rt->hold)
                all[n_fds++] = rt->hold_fd; /* runsc_hold */
        /* Killed with the thread that starts it: a front left to itself by a killed caller
         * would go on making its container after the next start's cleanup looked for it. */
        int r = safe_fork(FORK_DEATHSIG, &pid);
        if (r < 0)
                return r;
        if (pid == 0)
                exec_child(rt, argv, all, n_fds, cg);
        *ret_pid = pid;
        return 0;
}

int runsc_spawn_run(const Runsc *rt, const char *bundle, const char *id, const char *log_path,
                    int in_fd, int out_fd, int err_fd, const int *pass_fds, size_t n_pass, const CgroupJob *cg,
                    pid_t *ret_pid) {
        _cleanup_free_ char *platform = NULL, *log = NULL;
        char pass[RUNSC_PASS_FDS_MAX][32];
        int fds[3 + RUNSC_PASS_FDS_MAX] = { in_fd, out_fd, err_fd };

        if (n_pass > RUNSC_PASS_FDS_MAX || (n_pass && !pass_fds))
                return -E2BIG;
        if (asprintf(&platform, "--platform=%s", rt->platform) < 0 ||
            asprintf(&log, "--log=%s", log_path) < 0)
                return -ENOMEM;
        /* --cpu-num-from-quota: nproc inside follows the CPU quota (at least 2).
         * --oci-seccomp: the spec's linux.seccomp is loaded inside the sandbox (without it runsc
         * ignores the profile: capsule/seccomp-profile.h).
         * No --overlay2: what the job writes over a generation is a layer init mounts itself,
         * bounded (capsule/protocol.h, CAPSULE_LAYER_PATH); every other mount but the tmpfs is
         * read-only.
         * File access, directfs and the dentry cache stay at runsc's defaults: the levers on
         * them were measured and none is taken (docs/performance.md, "Levers"). */
        char *argv[16 + RUNSC_PASS_FDS_MAX];
        size_t n = 0;
        argv[n++] = rt->binary;
        argv[n++] = (char *) "--root";
        argv[n++] = rt->root;
        argv[n++] = (char *) "--network=none";
        argv[n++] = platform;
        argv[n++] = (char *) "--cpu-num-from-quota";
        argv[n++] = (char *) "--oci-seccomp";
        argv[n++] = log;
        argv[n++] = (char *) "run";
        /* The egress streams (capsule/protocol.h): the child holds pass_fds[i] as fd 3+i and
         * the capsule gets it as CAPSULE_EGRESS_FD_BASE+i. */
        for (size_t i = 0; i < n_pass; i++) {
                fds[3 + i] = pass_fds[i];
                snprintf(pass[i], sizeof(pass[i]), "--pass-fd=%zu:%zu", 3 + i, (size_t) CAPSULE_EGRESS_FD_BASE + i);
                argv[n++] = pass[i];
        }
        argv[n++] = (char *) "--bundle";
        argv[n++] = (char *) bundle;
        argv[n++] = (char *) id;
        argv[n] = NULL;
        return runsc_spawn_argv(rt, argv, fds, 3 + n_pass, cg, ret_pid);
}


static int run_capture(const Runsc *rt, const char *const *args, usec_t timeout, int out_fd,
                       int *ret_status) {
        char *argv[16];
        size_t n = 0;
        int r;

        argv[n++] = rt->binary;
        argv[n++] = (char *) "--root";
        argv[n++] = rt->root;
        for (; *args; args++) {
                if (n + 2 > ELEMENTSOF(argv))
                        return -E2BIG;
                argv[n++] = (char *) *args;
        }
        argv[n] = NULL;

        _cleanup_close_ int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null < 0)
                return -errno;
        pid_t pid = 0;
        int fds[3] = { null, out_fd >= 0 ? out_fd : null, null };
        r = runsc_spawn_argv(rt, argv, fds, 3, NULL, &pid);
        if (r < 0)
                return r;
        return waitpid_bounded(pid, timeout, ret_status);
}

int runsc_command(const Runsc *rt, const char *const *args, usec_t timeout, int *ret_status) {
        return run_capture(rt, args, timeout, -EBADF, ret_status);
}

int runsc_delete_force(const Runsc *rt, const char *id) {
        const char *args[] = { "delete", "--force", id, NULL };
        int st, r;

        r = runsc_command(rt, args, 30 * USEC_PER_SEC, &st);
        if (r < 0)
                return r;
        if (runsc_state_exists(rt, id) > 0)
                return -EBUSY;
        return 0;
}

int runsc_state_exists(const Runsc *rt, const char *id) {
        _cleanup_close_ int fd = open(rt->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        size_t il = strlen(id);
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int found = 0;

        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        d = fdopendir(fd);
        if (!d)
                return -errno;
        TAKE_FD(fd);
        while ((de = readdir(d)))
                if (strncmp(de->d_name, id, il) == 0 &&
                    (de->d_name[il] == '_' || de->d_name[il] == 0)) {
                        found = 1;
                        break;
                }
        return found;
}

/* The owner annotation of a container: from its bundle's config.json when the bundle is
 * still there, else from runsc's own state file for it. */
static int read_json_file(const char *path, size_t max, json_t **ret) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int r;

        if (fd < 0)
                return -errno;
        r = read_full_fd_bounded(fd, max, &buf, &len);
        if (r < 0)
                return r;
        json_t *j = json_loadb(buf, len, 0, NULL);
        if (!j)
                return -EBADMSG;
        *ret = j;
        return 0;
}

static const char *owner_of_spec(json_t *spec) {
        return json_string_value(
                json_object_get(json_object_get(spec, "annotations"), CAPSULE_ANNOTATION_WORKER));
}

static int container_owner(const Runsc *rt, const char *id, const char *bundle, char **ret) {
        _cleanup_json_ json_t *j = NULL;
        const char *owner = NULL;

        if (bundle && path_is_absolute_normalized(bundle)) {
                _cleanup_free_ char *p = NULL;
                if (asprintf(&p, "%s/config.json", bundle) < 0)
                        return -ENOMEM;
                if (read_json_file(p, RUNSC_STATE_MAX, &j) >= 0)
                        owner = owner_of_spec(j);
        }
        if (!owner) {
                _cleanup_free_ char *p = NULL;
                json_decref(j);
                j = NULL;
                if (asprintf(&p, "%s/%s_sandbox:%s.state", rt->root, id, id) < 0)
                        return -ENOMEM;
                if (read_json_file(p, RUNSC_STATE_MAX, &j) >= 0)
                        owner = owner_of_spec(json_object_get(j, "spec"));
        }
        if (!owner)
                return -ENOENT;
        char *s = strdup(owner);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

int runsc_cleanup_stale(const Runsc *rt, unsigned *ret_removed, TfwError *e) {
        _cleanup_close_ int memfd = memfd_create("runsc-list", MFD_CLOEXEC);
        _cleanup_free_ char *buf = NULL;
        _cleanup_json_ json_t *list = NULL;
        const char *args[] = { "list", "-format=json", NULL };
        unsigned removed = 0;
        size_t len, i;
        json_t *c;
        int st, r;

        if (memfd < 0)
                return tfw_error(e, errno, "runtime_unavailable", "memfd_create: %s",
                                 strerror(errno));
        r = run_capture(rt, args, 30 * USEC_PER_SEC, memfd, &st);
        if (r < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return tfw_error(e, r < 0 ? -r : EIO, "runtime_unavailable",
                                 "'%s list' in '%s' failed", rt->binary, rt->root);
        if (lseek(memfd, 0, SEEK_SET) < 0)
                return tfw_error(e, errno, "runtime_unavailable", "lseek: %s", strerror(errno));
        r = read_full_fd_bounded(memfd, RUNSC_LIST_MAX, &buf, &len);
        if (r < 0)
                return tfw_error(e, -r, "runtime_unavailable", "reading runsc list: %s",
                                 strerror(-r));
        /* An empty root lists "null". */
        list = json_loadb(buf, len, JSON_DECODE_ANY, NULL);
        if (!list || json_is_null(list)) {
                if (ret_removed)
                        *ret_removed = 0;
                return list ? 0
                            : tfw_error(e, EBADMSG, "runtime_unavailable",
                                        "runsc list printed something that is not JSON");
        }
        if (!json_is_array(list))
                return tfw_error(e, EBADMSG, "runtime_unavailable",
                                 "runsc list printed something that is not a list");
        json_array_foreach(list, i, c) {
                const char *id = json_string_value(json_object_get(c, "id"));
                const char *bundle = json_string_value(json_object_get(c, "bundle"));
                _cleanup_free_ char *owner = NULL;
                if (!id || !filename_is_valid(id))
                        continue;
                if (container_owner(rt, id, bundle, &owner) < 0 ||
                    !streq(owner, rt->worker_name))
                        continue; /* not ours: never touched */
                r = runsc_delete_force(rt, id);
                if (r < 0)
                        return tfw_error(e, -r, "runtime_unavailable",
                                         "cannot delete stale container '%s': %s", id,
                                         strerror(-r));
                _cleanup_free_ char *group = NULL;
                if (cgroup_group_name(rt->worker_name, &group) >= 0)
                        (void) cgroup_job_remove_stale(group, id);
                removed++;
        }
        if (ret_removed)
                *ret_removed = removed;
        return 0;
}

/* The container id a file of runsc's root is about: "<id>_sandbox:<sandbox id>.state" or
 * ".lock", "runsc-<id>.sock". false when it names none. */
static bool root_entry_id(const char *name, char *id, size_t size, bool *ret_state) {
        size_t n = strlen(name), l;
        const char *sep = strstr(name, "_sandbox:");
        bool state = n > 6 && streq(name + n - 6, ".state");

        if (sep && (state || (n > 5 && streq(name + n - 5, ".lock"))))
                l = (size_t) (sep - name);
        else if (n > 11 && strncmp(name, "runsc-", 6) == 0 && streq(name + n - 5, ".sock")) {
                name += 6;
                l = n - 11;
                state = false;
        } else
                return false;
        if (l == 0 || l >= size)
                return false;
        memcpy(id, name, l);
        id[l] = 0;
        *ret_state = state;
        return filename_is_valid(id);
}

typedef struct RootEntry {
        RunscOwnContainer c;
        char state_file[NAME_MAX + 1]; /* empty: none */
} RootEntry;

int runsc_list_own(const Runsc *rt, const char *root, RunscOwnContainer **ret, size_t *ret_n) {
        _cleanup_free_ RootEntry *all = NULL;
        RunscOwnContainer *own = NULL;
        size_t n = 0, m = 0;
        struct dirent *de;

        if (!root)
                root = rt->root;
        _cleanup_close_ int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                if (errno != ENOENT)
                        return -errno;
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        _cleanup_closedir_ DIR *d = fdopendir(fd);
        if (!d)
                return -errno;
        TAKE_FD(fd);
        all = calloc(RUNSC_OWN_MAX, sizeof(*all));
        if (!all)
                return -ENOMEM;
        while ((de = readdir(d))) {
                char id[sizeof(all->c.id)];
                bool state;
                size_t i;
                if (!root_entry_id(de->d_name, id, sizeof(id), &state))
                        continue;
                for (i = 0; i < n && !streq(all[i].c.id, id); i++)
                        ;
                if (i == n) {
                        if (n == RUNSC_OWN_MAX)
                                continue; /* the bound: the rest is found at the next look */
                        snprintf(all[n++].c.id, sizeof(all->c.id), "%s", id);
                }
                if (state)
                        snprintf(all[i].state_file, sizeof(all[i].state_file), "%s", de->d_name);
        }
        for (size_t i = 0; i < n; i++) {
                RootEntry *en = &all[i];
                _cleanup_json_ json_t *j = NULL;
                _cleanup_free_ char *p = NULL;
                const char *owner = NULL, *status = NULL;

                if (en->state_file[0]) {
                        if (asprintf(&p, "%s/%s", root, en->state_file) < 0)
                                return -ENOMEM;
                        if (read_json_file(p, RUNSC_STATE_MAX, &j) >= 0) {
                                owner = owner_of_spec(json_object_get(j, "spec"));
                                status = json_string_value(json_object_get(j, "status"));
                        }
                }
                if (owner) {
                        if (!streq(owner, rt->worker_name))
                                continue; /* another worker's: not ours to report or remove */
                } else if (!capsule_container_id_is_workers(rt->worker_name, en->c.id))
                        continue;
                if (!en->state_file[0])
                        status = "creating";
                else if (!status)
                        status = "unknown"; /* a state file runsc was killed while writing */
                else if (streq(status, "created") || streq(status, "running")) {
                        json_int_t pid = json_integer_value(json_object_get(json_object_get(j, "sandbox"), "pid"));
                        if (pid <= 0 || pid > INT_MAX || (kill((pid_t) pid, 0) < 0 && errno == ESRCH))
                                status = "stopped";
                }
                snprintf(en->c.state, sizeof(en->c.state), "%s", status);
                all[m++].c = en->c;
        }
        if (m) {
                own = calloc(m, sizeof(*own));
                if (!own)
                        return -ENOMEM;
                for (size_t i = 0; i < m; i++)
                        own[i] = all[i].c;
        }
        *ret = own;
        *ret_n = m;
        return 0;
}

void runsc_version(const Runsc *rt, char *buf, size_t size) {
        _cleanup_close_ int memfd = memfd_create("runsc-version", MFD_CLOEXEC);
        const char *args[] = {"--version", NULL};
        char out[1024];
        int st;

        snprintf(buf, size, "unknown");
        /* Bounded like every runtime command (threat 13): a runsc that hangs leaves "unknown",
         * never the worker waiting at its start. */
        if (memfd < 0 || run_capture(rt, args, RUNSC_VERSION_USEC, memfd, &st) < 0 || lseek(memfd, 0, SEEK_SET) < 0)
                return;
        ssize_t n = read(memfd, out, sizeof(out) - 1);
        if (n <= 0)
                return;
        out[n] = 0;
        out[strcspn(out, "\n")] = 0;
        if (out[0])
                snprintf(buf, size, "%.200s", out);
}
