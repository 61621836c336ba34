/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "capsule/id.h"
#include "capsule/oci-spec.h"
#include "capsule/protocol.h"
#include "capsule/runc.h"
#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/macro.h"
#include "common/path-util.h"

#define RUNC_STATE_MAX (4U << 20)
#define RUNC_ROOTS_NAME "runc-roots"
#define RUNC_LISTENERS_NAME "seccomp-listeners"

/* The kernel's Landlock ABI; 0 without Landlock (ENOSYS: not built, EOPNOTSUPP: off at boot);
 * -EPERM where a seccomp filter on this process refuses the call (the kernel itself never answers
 * EPERM here): a systemd unit's SystemCallFilter= without the runc drop-in, for one. */
static int kernel_landlock_abi(void) {
#ifdef SYS_landlock_create_ruleset
        long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        if (v < 0 && errno == EPERM)
                return -EPERM;
        return v > 0 ? (int) v : 0;
#else
        return 0;
#endif
}

/* <parent of root>/runc-roots, root's, 0711: the capsules' root id may pass through it to the
 * directory it owns but may not list it. */
static int roots_make(const char *root, char **ret) {
        _cleanup_free_ char *roots = NULL;
        const char *slash = strrchr(root, '/');
        struct stat st;

        if (!slash || asprintf(&roots, "%.*s/" RUNC_ROOTS_NAME, (int) (slash - root), root) < 0)
                return -ENOMEM;
        if (mkdir(roots, 0711) < 0 && errno != EEXIST)
                return -errno;
        _cleanup_close_ int fd = open(roots, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0 || fchown(fd, 0, 0) < 0 || fchmod(fd, 0711) < 0)
                return -errno;
        *ret = TAKE_PTR(roots);
        return 0;
}

/* <parent of root>/seccomp-listeners, root's, 0700: the listeners' sockets (capsule/seccomp-listen.h),
 * which no one but root may reach. */
static int listeners_make(const char *root, char **ret) {
        _cleanup_free_ char *dir = NULL;
        const char *slash = strrchr(root, '/');
        struct stat st;

        if (!slash || asprintf(&dir, "%.*s/" RUNC_LISTENERS_NAME, (int) (slash - root), root) < 0)
                return -ENOMEM;
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return -errno;
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0 || fchown(fd, 0, 0) < 0 || fchmod(fd, 0700) < 0)
                return -errno;
        *ret = TAKE_PTR(dir);
        return 0;
}

int runc_listener_path(const Runc *rc, char *buf, size_t size) {
        uint8_t rnd[8];
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t) sizeof(rnd))
                return -EIO;
        int n = snprintf(buf, size, "%s/%02x%02x%02x%02x%02x%02x%02x%02x.sock", rc->listeners, rnd[0], rnd[1], rnd[2],
                         rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
        return n > 0 && (size_t) n < size ? 0 : -ENAMETOOLONG;
}

void runc_listeners_clear(const Runc *rc) {
        _cleanup_close_ int fd = open(rc->listeners, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0)
                (void) rm_rf_children(fd);
}

int runc_init(Runc *rc, const Config *c, const char *root, TfwError *e) {
        Runc n = {};
        int r;

        if (!path_is_absolute_normalized(root) || streq(root, "/"))
                return tfw_error(e, EINVAL, "runtime_unavailable", "runc root '%s' is not an absolute normalised path",
                                 root);
        /* A wall the kernel has is never dropped silently: refused by a filter, no capsule runs. */
        n.landlock_abi = kernel_landlock_abi();
        if (n.landlock_abi < 0)
                return tfw_error(e, EPERM, "runtime_unavailable",
                                 "Landlock is refused to the worker (landlock_create_ruleset: %s, a seccomp filter's "
                                 "answer): its runc capsules would run without that wall; under systemd the runc "
                                 "drop-in allows it (docs/install.md, \"The runc engine\")",
                                 strerror(EPERM));
        r = c->runc ? ((n.rt.binary = strdup(c->runc)) ? 0 : -ENOMEM) : runsc_find_on_path("runc", &n.rt.binary);
        if (r < 0)
                return r == -ENOMEM ? tfw_error(e, ENOMEM, "out_of_memory", "out of memory")
                                    : tfw_error(e, -r, "runtime_unavailable", "runc not found on PATH (set runtime.runc)");
        if (mkdir(root, 0700) < 0 && errno != EEXIST) {
                r = -errno;
                runc_done(&n);
                return tfw_error(e, -r, "runtime_unavailable", "runc root '%s': %s", root, strerror(-r));
        }
        n.rt.root = strdup(root);
        n.rt.platform = strdup("host kernel");
        n.rt.worker_name = strdup(c->name);
        r = n.rt.root && n.rt.platform && n.rt.worker_name ? roots_make(root, &n.roots) : -ENOMEM;
        if (r >= 0)
                r = listeners_make(root, &n.listeners);
        if (r < 0) {
                runc_done(&n);
                return tfw_error(e, -r, "runtime_unavailable", "the capsules' roots beside '%s': %s", root, strerror(-r));
        }
        *rc = n;
        return 0;
}

void runc_done(Runc *rc) {
        runsc_done(&rc->rt);
        free(rc->roots);
        free(rc->listeners);
        *rc = (Runc) {};
}

int runc_root_path(const Runc *rc, const char *cid, char *buf, size_t size) {
        if (!filename_is_valid(cid))
                return -EINVAL;
        int n = snprintf(buf, size, "%s/%s", rc->roots, cid);
        return n > 0 && (size_t) n < size ? 0 : -ENAMETOOLONG;
}

int runc_root_remove(const Runc *rc, const char *cid) {
        _cleanup_close_ int fd = open(rc->roots, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (!filename_is_valid(cid))
                return -EINVAL;
        int r = rm_rf_at(fd, cid);
        return r == -ENOENT ? 0 : r;
}

/* The bundle's etc files (capsule/etc-files.h) into the root's own etc, root's and read-only;
 * the directory the capsule's root id's, so that runc can make the system mounts' points in it
 * (/etc/ld.so.cache, /etc/ssl/certs) before it makes the root read-only. */
#define RUNC_ETC_FILE_MAX (1U << 20)
static int copy_etc(int root_fd, const char *etc_src) {
        _cleanup_close_ int src = open(etc_src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct dirent *de;
        int r;

        if (src < 0)
                return -errno;
        if (mkdirat(root_fd, "etc", 0755) < 0)
                return -errno;
        _cleanup_close_ int dst = open_dir_at(root_fd, "etc");
        if (dst < 0)
                return dst;
        /* The mode explicitly: the worker's umask must not decide what the job can read. */
        if (fchown(dst, CONFIG_CAPSULE_ROOT_ID, CONFIG_CAPSULE_ROOT_ID) < 0 || fchmod(dst, 0755) < 0)
                return -errno;
        _cleanup_closedir_ DIR *d = opendir_fd(src);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                _cleanup_free_ char *buf = NULL;
                size_t len;
                if (de->d_type != DT_REG)
                        continue;
                _cleanup_close_ int in = openat(src, de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (in < 0)
                        return -errno;
                r = read_full_fd_bounded(in, RUNC_ETC_FILE_MAX, &buf, &len);
                if (r < 0)
                        return r;
                _cleanup_close_ int out =
                        openat(dst, de->d_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
                if (out < 0)
                        return -errno;
                r = write_all(out, buf, len);
                if (r < 0)
                        return r;
                if (fchmod(out, 0444) < 0)
                        return -errno;
        }
        return 0;
}

int runc_root_make(const Runc *rc, const char *cid, const char *etc_src) {
        _cleanup_close_ int fd = open(rc->roots, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int r;

        if (fd < 0)
                return -errno;
        r = runc_root_remove(rc, cid);
        if (r < 0)
                return r;
        if (mkdirat(fd, cid, 0755) < 0)
                return -errno;
        _cleanup_close_ int d = open_dir_at(fd, cid);
        if (d < 0)
                return d;
        if (fchown(d, CONFIG_CAPSULE_ROOT_ID, CONFIG_CAPSULE_ROOT_ID) < 0 || fchmod(d, 0755) < 0)
                return -errno;
        return copy_etc(d, etc_src);
}

int runc_spawn_run(const Runc *rc, const char *bundle, const char *id, const char *log_path, int in_fd, int out_fd,
                   int err_fd, const int *pass_fds, size_t n_pass, pid_t *ret_pid) {
        int fds[CAPSULE_EGRESS_FD_BASE + RUNSC_PASS_FDS_MAX] = {in_fd, out_fd, err_fd};
        char preserve[32];
        size_t n_fds = 3;

        if (n_pass > RUNSC_PASS_FDS_MAX || (n_pass && !pass_fds))
                return -E2BIG;
        _cleanup_close_ int null = n_pass ? open("/dev/null", O_RDWR | O_CLOEXEC) : -EBADF;
        if (n_pass && null < 0)
                return -errno;
        /* The egress streams at the capsule's CAPSULE_EGRESS_FD_BASE.. as under runsc: runc
         * passes fds 3..3+N-1 as they are, so 3 up to the base are /dev/null. */
        if (n_pass) {
                for (; n_fds < CAPSULE_EGRESS_FD_BASE; n_fds++)
                        fds[n_fds] = null;
                for (size_t i = 0; i < n_pass; i++)
                        fds[n_fds++] = pass_fds[i];
        }
        snprintf(preserve, sizeof(preserve), "--preserve-fds=%zu", n_fds - 3);
        /* --keep: without it runc removes the container's cgroup as its init ends, before the
         * worker has read the cgroup's records (the memory and pids walls, peak memory, CPU
         * time); the teardown deletes the stopped container (capsule/teardown.h). */
        char *argv[] = {rc->rt.binary, (char *) "--root", rc->rt.root, (char *) "--log", (char *) log_path,
                        (char *) "--log-format=json", (char *) "run", (char *) "--keep", (char *) "--bundle",
                        (char *) bundle, preserve, (char *) id, NULL};
        return runsc_spawn_argv(&rc->rt, argv, fds, n_fds, NULL, ret_pid);
}

static int read_state(int root_fd, const char *id, json_t **ret) {
        _cleanup_free_ char *p = NULL, *buf = NULL;
        size_t len;
        if (asprintf(&p, "%s/state.json", id) < 0)
                return -ENOMEM;
        _cleanup_close_ int fd = openat(root_fd, p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        int r = read_full_fd_bounded(fd, RUNC_STATE_MAX, &buf, &len);
        if (r < 0)
                return r;
        *ret = json_loadb(buf, len, 0, NULL);
        return *ret ? 0 : -EBADMSG;
}

/* runc keeps the spec's annotations as "KEY=VALUE" labels of its config. */
static bool state_is_workers(json_t *state, const char *worker) {
        json_t *l, *labels = json_object_get(json_object_get(state, "config"), "labels");
        size_t i, kl = strlen(CAPSULE_ANNOTATION_WORKER);
        json_array_foreach(labels, i, l) {
                const char *s = json_string_value(l);
                if (s && strncmp(s, CAPSULE_ANNOTATION_WORKER, kl) == 0 && s[kl] == '=' && streq(s + kl + 1, worker))
                        return true;
        }
        return false;
}

static void own_entry(const Runc *rc, int root_fd, const char *id, RunscOwnContainer *c, bool *ret_mine) {
        _cleanup_json_ json_t *state = NULL;
        *ret_mine = false;
        if (read_state(root_fd, id, &state) < 0) {
                /* No state file: a creation cut short, ours by its id alone. */
                *ret_mine = capsule_container_id_is_workers(rc->rt.worker_name, id);
                snprintf(c->state, sizeof(c->state), "creating");
        } else {
                json_int_t pid = json_integer_value(json_object_get(state, "init_process_pid"));
                *ret_mine = state_is_workers(state, rc->rt.worker_name);
                snprintf(c->state, sizeof(c->state), "%s", pid > 0 && kill((pid_t) pid, 0) == 0 ? "running" : "stopped");
        }
        size_t l = strnlen(id, sizeof(c->id) - 1); /* the caller checked that it fits */
        memcpy(c->id, id, l);
        c->id[l] = 0;
}

int runc_list_own(const Runc *rc, const char *root, RunscOwnContainer **ret, size_t *ret_n) {
        _cleanup_close_ int fd = open(root ? root : rc->rt.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_free_ RunscOwnContainer *own = NULL;
        size_t m = 0;
        struct dirent *de;

        *ret = NULL;
        *ret_n = 0;
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        _cleanup_closedir_ DIR *d = opendir_fd(fd);
        if (!d)
                return -errno;
        while ((de = readdir(d)) && m < RUNSC_OWN_MAX) {
                RunscOwnContainer c = {};
                bool mine;
                if (de->d_type != DT_DIR || !filename_is_valid(de->d_name) || strlen(de->d_name) >= sizeof(c.id))
                        continue;
                own_entry(rc, fd, de->d_name, &c, &mine);
                if (!mine)
                        continue;
                RunscOwnContainer *n = realloc(own, (m + 1) * sizeof(*own));
                if (!n)
                        return -ENOMEM;
                own = n;
                own[m++] = c;
        }
        *ret = TAKE_PTR(own);
        *ret_n = m;
        return 0;
}
