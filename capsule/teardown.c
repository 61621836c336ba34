/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "capsule/cgroup.h"
#include "capsule/teardown.h"
#include "common/fd-util.h"
#include "common/macro.h"
#include "common/path-util.h"
#include "common/process.h"

/* Bytes of a process's argv read: runsc's are well below; a longer one is matched on its start. */
#define ARGV_READ_MAX (64U * 1024)
#define KILL_PASS_PAUSE_NSEC (10 * 1000 * 1000)
/* runsc's state file of one container is a few kB; one larger than this is never judged. */
#define TEARDOWN_STATE_MAX (4U << 20)

/* Does the NUL-separated argv name the runsc root (--root R, --root=R, or with one dash) and
 * hold the argument id? */
static bool argv_names(const char *buf, size_t len, const char *root, const char *id) {
        bool has_root = false, has_id = false, next_is_root = false;
        size_t rl = strlen(root);

        for (size_t off = 0; off < len;) {
                const char *a = buf + off;
                size_t al = strnlen(a, len - off);
                off += al + 1;
                if (next_is_root && al == rl && memcmp(a, root, rl) == 0)
                        has_root = true;
                next_is_root = false;
                const char *flag = a[0] == '-' ? (a[1] == '-' ? a + 2 : a + 1) : NULL;
                if (flag && strncmp(flag, "root", 4) == 0) {
                        if (flag[4] == 0)
                                next_is_root = true;
                        else if (flag[4] == '=' && streq(flag + 5, root))
                                has_root = true;
                }
                if (streq(a, id))
                        has_id = true;
        }
        return has_root && has_id;
}

static bool has_suffix(const char *s, const char *suffix) {
        size_t n = strlen(s), k = strlen(suffix);
        return n >= k && streq(s + n - k, suffix);
}

int capsule_kill_runtime_processes(const char *root, const char *id, pid_t except) {
        _cleanup_close_ int proc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_free_ char *buf = NULL;
        uid_t me = geteuid();
        pid_t self = getpid();
        int killed = 0;

        if (proc < 0)
                return -errno;
        buf = malloc(ARGV_READ_MAX + 1);
        if (!buf)
                return -ENOMEM;
        DIR *d = opendir_fd(proc);
        if (!d)
                return -errno;
        struct dirent *de;
        while ((de = readdir(d))) {
                char *end;
                long pid = strtol(de->d_name, &end, 10);
                if (*end || pid <= 0 || pid == self || pid == except)
                        continue;
                /* The pidfd first: the signal can only reach the process it was opened on (when
                 * that one exited and its pid was reused before the argv below was read, the
                 * signal fails), never another that got its pid meanwhile. */
                _cleanup_close_ int pidfd = pidfd_open_pid((pid_t) pid);
                _cleanup_close_ int dir = openat(proc, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                struct stat st;
                if (dir < 0 || fstat(dir, &st) < 0 || st.st_uid != me)
                        continue;
                _cleanup_close_ int fd = openat(dir, "cmdline", O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                size_t n = 0;
                while (n < ARGV_READ_MAX) {
                        ssize_t k = read(fd, buf + n, ARGV_READ_MAX - n);
                        if (k < 0 && errno == EINTR)
                                continue;
                        if (k <= 0)
                                break;
                        n += (size_t) k;
                }
                buf[n] = 0; /* a cut last argument ends here */
                if (n == 0 || !argv_names(buf, n, root, id))
                        continue; /* a zombie (no argv) or another process */
                if ((pidfd >= 0 ? pidfd_signal(pidfd, SIGKILL) : kill((pid_t) pid, SIGKILL)) >= 0)
                        killed++;
        }
        closedir(d);
        return killed;
}

static void pause_pass(void) {
        (void) nanosleep(&(struct timespec) {.tv_nsec = KILL_PASS_PAUSE_NSEC}, NULL);
}

/* Kill passes (the container's runsc processes, and what is in its job cgroup) until one finds
 * nothing to kill, within CAPSULE_TEARDOWN_KILL_USEC. A process being killed stays listed until
 * it has exited: a pass or two more. *ret_found: what the first pass found. */
static int kill_until_none(const Runsc *rt, const char *group, const char *id, unsigned *ret_found) {
        usec_t deadline = now_monotonic() + CAPSULE_TEARDOWN_KILL_USEC;
        for (unsigned pass = 0;; pass++) {
                int n = capsule_kill_runtime_processes(rt->root, id, 0);
                if (n < 0)
                        return n;
                int c = cgroup_job_kill_by_name(group, id);
                if (c > 0)
                        n += c;
                if (pass == 0)
                        *ret_found = (unsigned) n;
                if (n == 0)
                        return 0;
                if (now_monotonic() >= deadline)
                        return -EBUSY;
                pause_pass();
        }
}

/* Is the state file `name` one runsc itself cannot read? runsc writes it in place (an open
 * that truncates, then the write): a front killed between the two (a capsule ended while it
 * was still being made) leaves it empty or cut. `runsc list` still lists it, and `runsc
 * delete --force` fails on it for good ("unexpected end of JSON input"), at every start after.
 * A file that cannot be read or is larger than runsc writes one is not called garbled. */
static bool state_garbled(int root_fd, const char *name) {
        _cleanup_close_ int fd = openat(root_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        _cleanup_free_ char *buf = NULL;
        size_t len;

        if (fd < 0 || read_full_fd_bounded(fd, TEARDOWN_STATE_MAX, &buf, &len) < 0)
                return false;
        json_t *j = json_loadb(buf, len, 0, NULL);
        bool garbled = !json_is_object(j);
        json_decref(j);
        return garbled;
}

/* What runsc leaves of a container it was killed while creating: "<id>_sandbox:<sid>.lock"
 * without a ".state" (or with one it was killed while writing: state_garbled), and its control
 * socket "runsc-<id>.sock". Only when no state file runsc can read is left (a container runsc
 * knows is runsc's to delete); a garbled one only when none_runs (the kill passes found nothing
 * left: a live front could be between its truncation and its write). */
static int remove_creation_leftovers(const Runsc *rt, const char *id, bool none_runs) {
        _cleanup_close_ int fd = open(rt->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_free_ char *prefix = NULL, *sock = NULL;
        bool state = false;
        int r = 0;

        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        if (asprintf(&prefix, "%s_sandbox:", id) < 0 || asprintf(&sock, "runsc-%s.sock", id) < 0)
                return -ENOMEM;
        for (int pass = 0; pass < 2 && !state; pass++) {
                DIR *d = opendir_fd(fd);
                struct dirent *de;
                if (!d)
                        return -errno;
                while ((de = readdir(d))) {
                        bool mine = strncmp(de->d_name, prefix, strlen(prefix)) == 0;
                        if (pass == 0)
                                state = state || (mine && has_suffix(de->d_name, ".state") &&
                                                  !(none_runs && state_garbled(fd, de->d_name)));
                        else if ((mine && (has_suffix(de->d_name, ".lock") || has_suffix(de->d_name, ".state"))) ||
                                 streq(de->d_name, sock))
                                if (unlinkat(fd, de->d_name, 0) < 0 && errno != ENOENT)
                                        r = -errno;
                }
                closedir(d);
        }
        return state ? -EBUSY : r;
}

static int teardown_runsc(const Runsc *rt, const char *id, unsigned flags, CapsuleTeardown *t, TfwError *e) {
        _cleanup_free_ char *group = NULL;
        int r, rk, rc = 0;

        if (!rt->root || !filename_is_valid(id))
                return tfw_error(e, EINVAL, "capsule_teardown", "invalid container '%s'", id);
        r = cgroup_group_name(rt->worker_name, &group);
        if (r < 0)
                return tfw_error(e, -r, "capsule_teardown", "invalid cgroup group of worker '%s'",
                                 rt->worker_name);

        /* 1. The front process, any runsc command on this container, and everything in its
         *    cgroup (the sandbox and the gofer, stopped ones too): after this nothing is left
         *    that could start another process of it. */
        rk = kill_until_none(rt, group, id, &t->killed);
        /* 2. The cgroup, waited for until empty and removed in every hierarchy; or left to the
         *    job that still owns it. */
        if (!(flags & CAPSULE_TEARDOWN_KEEP_CGROUP))
                rc = cgroup_job_remove_stale(group, id);
        /* 3. runsc's record of it: nothing of it runs, so delete waits on nothing. */
        bool state = runsc_state_exists(rt, id) > 0;
        t->found = t->killed > 0 || state;
        if (state) {
                const char *args[] = {"delete", "--force", id, NULL};
                int st;
                (void) runsc_command(rt, args, CAPSULE_TEARDOWN_DELETE_USEC, &st);
        }
        r = runsc_state_exists(rt, id) > 0 ? remove_creation_leftovers(rt, id, rk >= 0) : 0;
        t->deleted = r >= 0;
        if (rc < 0)
                rc = cgroup_job_remove_stale(group, id); /* a sandbox that took long to die */
        t->cgroup_removed = rc >= 0 && !(flags & CAPSULE_TEARDOWN_KEEP_CGROUP);

        if (rk < 0)
                return tfw_error(e, -rk, "capsule_teardown",
                                 "container '%s': processes still alive after %u s", id,
                                 (unsigned) (CAPSULE_TEARDOWN_KILL_USEC / USEC_PER_SEC));
        if (rc < 0)
                return tfw_error(e, -rc, "capsule_teardown", "container '%s': cannot remove cgroup '%s/%s': %s",
                                 id, group, id, strerror(-rc));
        if (r < 0)
                return tfw_error(e, -r, "capsule_teardown",
                                 "container '%s': runsc still keeps its state in '%s'", id, rt->root);
        return 0;
}

int capsule_teardown(const Runsc *rt, const Engine *en, const char *id, unsigned flags, CapsuleTeardown *ret,
                     TfwError *e) {
        CapsuleTeardown t = {};
        int r;

        if (!id || !!rt == !!en)
                return tfw_error(e, EINVAL, "capsule_teardown", "invalid teardown parameters");
        if (rt)
                r = teardown_runsc(rt, id, flags, &t, e);
        else {
                /* The engine owns the container's cgroup: `rm -f` kills and removes. */
                r = engine_remove(en, id);
                t.deleted = t.cgroup_removed = r >= 0;
                if (r < 0)
                        r = tfw_error(e, -r, "capsule_teardown", "%s rm -f '%s': %s", en->binary, id,
                                      strerror(-r));
        }
        if (ret)
                *ret = t;
        return r;
}
