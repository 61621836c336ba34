/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "common/process.h"
#include "artifacts/archive-dl.h"
#include "capsule/cgroup.h"
#include "capsule/driver.h"
#include "capsule/egress.h"
#include "capsule/oci-spec.h"
#include "orchestrator/expire.h"
#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/log.h"
#include "orchestrator/cancel.h"
#include "orchestrator/cancel-listen.h"
#include "orchestrator/controller-view.h"
#include "orchestrator/daemon.h"
#include "orchestrator/discovery.h"
#include "orchestrator/inbox.h"
#include "orchestrator/job.h"
#include "orchestrator/notify.h"
#include "orchestrator/publish.h"
#include "orchestrator/recover.h"
#include "orchestrator/retention.h"
#include "orchestrator/reload.h"
#include "orchestrator/scratch.h"
#include "orchestrator/seed-ahead.h"
#include "orchestrator/store-tmpfs.h"
#include "orchestrator/start.h"
#include "orchestrator/store.h"
#include "orchestrator/watch.h"

#define INBOX_EVENTS (IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_ONLYDIR)
#define RETENTION_MIN_INTERVAL (3600 * USEC_PER_SEC)
/* How long a new daemon waits for the job processes of a predecessor that died to be gone. */
#define JOBS_LOCK_WAIT (30 * USEC_PER_SEC)

/* A warm capsule's id: its container is tfw-<name>-<id>, its scratch <scratch>/<id>. */
#define WARM_ID_MAX 32
/* The daemon's word to a warm child that it is to go (never a request id). The socket's end
 * without it means the daemon died (SIGKILL): the child then leaves its capsule alone. */
#define WARM_RETIRE "-"
/* One capsule waits for the next request; two while requests come back to back (one started
 * within WARM_PAIR_USEC of the last one's start), until none has run for WARM_PAIR_USEC: a
 * request that follows a short job's result at once then finds the capsule started at the request
 * before booted, not the one started beside that job (a boot, 0.2 to 1 s under load, takes longer
 * than a short job). */
#define WARM_AHEAD_MAX 2
#define WARM_PAIR_USEC (2 * USEC_PER_SEC)
#define WARM_RETIRING_MAX (2 * WARM_AHEAD_MAX)

typedef struct Running {
        pid_t pid;
        char id[REQUEST_ID_MAX + 1];
        char capsule[WARM_ID_MAX]; /* the warm capsule it runs in; empty: its own (cold) */
        bool stop_killed; /* killed by a shutdown: interrupted, not an error */
        int cancel_fd;    /* the daemon's end of its cancel channel (orchestrator/cancel-listen.h) */
} Running;

/* A child process holding a capsule started ahead of the next request (runtime.warm_seconds):
 * it boots the capsule and waits on sock for a request id (it then runs that job in it) or
 * for the socket's end (it then tears the capsule down and exits). */
typedef struct WarmChild {
        pid_t pid;     /* 0: none */
        int sock;
        char id[WARM_ID_MAX];
} WarmChild;

typedef struct Daemon {
        Worker w;
        DaemonOptions o;
        int lock_fd, inotify_fd, signal_fd, timer_fd; /* jobs.lock: w.jobs_lock_fd */
        pid_t pid;
        int inbox_wd, state_wd;
        Running running[64];
        unsigned n_running;
        bool rescan, reload_queue, stopping, killing;
        bool clear_cache;                   /* WORKER_CACHE_CLEAR_FILE appeared */
        usec_t stop_deadline;
        usec_t watchdog_usec, next_watchdog;
        usec_t next_expiry, next_retention, last_retention;
        char (*queue)[REQUEST_ID_MAX + 1]; /* queued ids in arrival order */
        size_t n_queue;
        size_t n_pending;                   /* waiting for an operator (STATUS=) */
        DirtySet *watch;                    /* the workspace's watch, or NULL (watch.h) */
        bool reload_config;                 /* SIGHUP: read the configuration again */
        json_t *config_raw;                 /* the configuration in use, as JSON (reload.h) */
        Config **configs;                   /* the ones reloads made (the first is the caller's) */
        size_t n_configs;
        char *config_abs;                   /* the configuration's absolute path, or NULL */
        WarmChild warm[WARM_AHEAD_MAX];     /* those waiting for the next requests, oldest first */
        unsigned n_warm;
        WarmChild retiring[WARM_RETIRING_MAX]; /* told to go, not reaped yet */
        usec_t warm_until;                  /* monotonic: keep one until then (0: none) */
        usec_t mark_rest_until;             /* monotonic: the mark's descriptor not polled till
                                             * then while a job runs (mark_polled) */
        bool warm_pair;                     /* the last request came back to back (WARM_PAIR_USEC) */
        usec_t last_start, last_end;        /* monotonic: the last request's start, the last job's end */
} Daemon;

static int take_instance_lock(Daemon *d, TfwError *e) {
        d->lock_fd = openat(d->w.dirs.state_fd, "daemon.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (d->lock_fd < 0)
                return tfw_error(e, errno, "internal", "cannot open '%s/daemon.lock': %m", d->w.config->state_dir);
        if (flock(d->lock_fd, LOCK_EX | LOCK_NB) < 0) {
                if (errno == EWOULDBLOCK)
                        return tfw_error(e, EBUSY, "busy",
                                         "another worker for config '%s' is already running (lock '%s/daemon.lock')",
                                         d->w.config->name, d->w.config->state_dir);
                return tfw_error(e, errno, "internal", "cannot lock '%s/daemon.lock': %m", d->w.config->state_dir);
        }
        return 0;
}

/* Job processes hold jobs.lock (the daemon's open file description of it, inherited across
 * fork) for as long as any of them lives, and so does every runtime process they start (`runsc
 * run` and the others: capsule_driver_hold). They die with the daemon, the runtime's with the
 * job's (PR_SET_PDEATHSIG), but a process that is being killed still completes the system call
 * it is in (a rename publishing a result, a mkdir of its cgroup, runsc writing its container's
 * state), so recovery and the start-up cleanup wait until the last of a predecessor's is gone:
 * otherwise a dying job could publish over `interrupted`, or a front left running make its
 * container after the cleanup looked for it, for good. Bounded; then the start fails. */
static int take_jobs_lock(Daemon *d, TfwError *e) {
        d->w.jobs_lock_fd = openat(d->w.dirs.state_fd, "jobs.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (d->w.jobs_lock_fd < 0)
                return tfw_error(e, errno, "internal", "cannot open '%s/jobs.lock': %m", d->w.config->state_dir);
        int r = flock_exclusive_within(d->w.jobs_lock_fd, JOBS_LOCK_WAIT);
        if (r == -ETIMEDOUT)
                return tfw_error(e, EBUSY, "busy",
                                 "job or runsc processes of a previous worker for config '%s' are still "
                                 "running (they hold '%s/jobs.lock')",
                                 d->w.config->name, d->w.config->state_dir);
        if (r < 0)
                return tfw_error(e, -r, "internal", "cannot lock '%s/jobs.lock': %s", d->w.config->state_dir, strerror(-r));
        return 0;
}

/* Rebuild the in-memory queue and the next pending expiry from the store. */
static int load_queue(Daemon *d, TfwError *e) {
        _cleanup_free_ RequestRecord *list = NULL;
        size_t n = 0, q = 0;
        usec_t ttl = (usec_t) d->w.config->pending_ttl_hours * 3600 * USEC_PER_SEC;
        int r = store_list(d->w.dirs.requests_fd, &list, &n, e);
        if (r < 0)
                return r;
        free(d->queue);
        d->queue = calloc(n ? n : 1, sizeof(*d->queue));
        if (!d->queue)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        d->next_expiry = 0;
        d->n_pending = 0;
        for (size_t i = 0; i < n; i++) {
                d->n_pending += list[i].state == STATE_PENDING;
                if (list[i].state == STATE_QUEUED)
                        memcpy(d->queue[q++], list[i].id, sizeof(list[i].id));
                else if (list[i].state == STATE_PENDING &&
                         (d->next_expiry == 0 || list[i].submitted_at + ttl < d->next_expiry))
                        d->next_expiry = list[i].submitted_at + ttl;
        }
        d->n_queue = q;
        d->reload_queue = false;
        return 0;
}

static void status_notify(Daemon *d) {
        (void) sd_notifyf(0, "STATUS=%u running, %zu queued, %zu pending approval%s", d->n_running, d->n_queue,
                          d->n_pending, d->stopping ? ", stopping" : "");
}

static void close_daemon_fds(Daemon *d) {
        d->lock_fd = safe_close(d->lock_fd); /* w.jobs_lock_fd stays with the job processes */
        d->inotify_fd = safe_close(d->inotify_fd);
        d->signal_fd = safe_close(d->signal_fd);
        d->timer_fd = safe_close(d->timer_fd);
}

static void close_warm_socks(Daemon *d) {
        for (unsigned i = 0; i < d->n_warm; i++)
                d->warm[i].sock = safe_close(d->warm[i].sock);
        /* Another job's cancel channel is never a child's to hold. */
        for (unsigned i = 0; i < d->n_running; i++)
                d->running[i].cancel_fd = safe_close(d->running[i].cancel_fd);
        for (unsigned i = 0; i < WARM_RETIRING_MAX; i++)
                d->retiring[i].sock = safe_close(d->retiring[i].sock);
}

static void run_job_in(Daemon *d, RequestRecord *rec, CapsuleWarm *warm, GenLane *lane, int cancel_fd) {
        TfwError e = {0};
        if (job_execute(&d->w, rec, warm, lane, cancel_fd, &e) < 0) {
                worker_say(&d->w, LOG_ERR, "job '%s': %s", rec->id, e.message);
                TfwError e2 = {0};
                if (recover_finish_unpublished(&d->w, rec, "error", e.code ? e.code : "internal", e.message, &e2) < 0)
                        worker_say(&d->w, LOG_ERR, "job '%s': cannot publish its error: %s", rec->id, e2.message);
        }
}

static _noreturn_ void run_child(Daemon *d, RequestRecord *rec, int cancel_fd) {
        sigset_t all;

        /* The child must not hold the daemon's lock or event sources, and takes signals
         * normally again. Its own process group lets a shutdown kill it with its runtime. */
        close_daemon_fds(d);
        close_warm_socks(d);
        sigemptyset(&all);
        (void) sigprocmask(SIG_SETMASK, &all, NULL);
        (void) setpgid(0, 0);
        run_job_in(d, rec, NULL, NULL, cancel_fd);
        _exit(0);
}

/* ---- capsules started ahead (runtime.warm_seconds, issue 12) ------------------------------- */

/* The warm child: boot, seed its lane when it has no generation (seed-ahead.h), wait for one
 * request id or the end of the socket. given: the start's lane, inherited (see
 * start_walk_ahead), or NULL: it takes a free one. */
static _noreturn_ void warm_child(Daemon *d, int sock, const char *warm_id, GenLane *given) {
        _cleanup_(capsule_driver_done) CapsuleDriver drv = {};
        CapsuleWarm *warm = NULL;
        GenLane *lane = NULL;
        TfwError e = {0};
        sigset_t all;

        close_daemon_fds(d);
        close_warm_socks(d);
        sigemptyset(&all);
        (void) sigprocmask(SIG_SETMASK, &all, NULL);
        (void) setpgid(0, 0);
        /* The start's lane, still being walked by the daemon: its lock is the daemon's copy's
         * to hold until the walk ends (the seed below waits on it). */
        if (given)
                given->update_fd = safe_close(given->update_fd);
        bool booted = job_warm_start(&d->w, warm_id, &drv, given, &warm, &lane, &e) >= 0;
        if (!booted) {
                /* The request may already be on its way: it is still served, cold. */
                worker_say(&d->w, LOG_WARNING, "warm capsule '%s': %s", warm_id, e.message);
                (void) rm_rf_at(d->w.dirs.scratch_fd, warm_id);
                warm = NULL;
        } else {
                seed_ahead(&d->w, warm_id, lane, sock);
                /* What every job's outputs load (libarchive, for their importers), loaded while
                 * it waits rather than on the request's path (2 to 4 ms of it). */
                (void) dlopen_libarchive(NULL);
        }
        char id[REQUEST_ID_MAX + 2];
        ssize_t n = watch_recv_id(sock, id, sizeof(id) - 1, &d->w.watch_view_fd);
        /* Kept while a job runs: the daemon's cancel comes on it (orchestrator/cancel-listen.h). */
        if (n <= 0)
                sock = safe_close(sock);
        if (n == 0) {
                /* The daemon died without a word (SIGKILL): this process dies with it
                 * (FORK_DEATHSIG), and a teardown started now would be cut short by that kill
                 * half-way, after the capsule's processes but before its record and cgroup, which
                 * left "stopped" containers behind. Not begun: its runtime's front dies with
                 * this process, and the next start, which waits for that front (take_jobs_lock),
                 * removes what is left of the capsule whole. */
                _exit(1);
        }
        RequestRecord rec;
        if (n == (ssize_t) strlen(WARM_RETIRE) && memcmp(id, WARM_RETIRE, (size_t) n) == 0)
                n = 0; /* told to go */
        else if (n > 0) {
                id[n] = 0;
                if (store_load(d->w.dirs.requests_fd, id, &rec, &e) < 0) {
                        worker_say(&d->w, LOG_ERR, "job '%s': %s", id, e.message);
                        n = 0;
                }
        }
        if (n <= 0) {
                /* No request came in time (or the daemon stops): nothing of it is left. A
                 * capsule that could not boot says so (no other one until the next request); one
                 * that could not be ended whole exits unclean too, so the daemon tears down what
                 * is left of it (warm_reaped) before it goes on, or before it stops. */
                TfwError we = {0};
                sock = safe_close(sock);
                bool ended = capsule_warm_end(warm, &we) >= 0;
                if (!ended)
                        worker_say(&d->w, LOG_WARNING, "warm capsule '%s': %s", warm_id, we.message);
                gen_lane_release(lane);
                (void) rm_rf_at(d->w.dirs.scratch_fd, warm_id);
                _exit(booted && ended ? 0 : 1);
        }
        run_job_in(d, &rec, warm, lane, sock);
        (void) rm_rf_at(d->w.dirs.scratch_fd, warm_id);
        _exit(0);
}

/* Should capsules wait for the next requests now? While a request runs and for warm_seconds
 * after the last one ended (a job longer than the window still finds one ready behind it; a
 * capsule that could not start sets warm_until to 0: none again before the next request); with
 * drain only while requests are queued; never while stopping; only with a driver that boots
 * capsules ahead (runsc, runc). */
static bool warm_wanted(const Daemon *d) {
        const CapsuleDriverOps *ops = capsule_driver_ops(d->w.config->driver);
        return d->w.config->warm_seconds > 0 && ops && ops->boots_ahead && !d->stopping &&
               d->warm_until && (d->warm_until > now_monotonic() || d->n_running > 0) &&
               (!d->o.drain || d->n_queue > 0);
}

static unsigned warm_retiring(const Daemon *d) {
        unsigned n = 0;
        for (unsigned i = 0; i < WARM_RETIRING_MAX; i++)
                n += d->retiring[i].pid != 0;
        return n;
}

/* Do two capsules wait (WARM_AHEAD_MAX)? While requests come back to back: while a job runs and
 * for WARM_PAIR_USEC after the last one ended. */
static bool warm_pair(const Daemon *d, usec_t now) {
        return d->warm_pair && (d->n_running > 0 || d->last_end + WARM_PAIR_USEC > now);
}

/* How many capsules should wait now: one while they are wanted, two while requests come back to
 * back, but never more than the lanes of the generation store left (concurrency + 1 of them: a
 * capsule waits on a lane of its own, a job runs on its capsule's or takes one, a capsule told to
 * go keeps its lane until it has ended), so that no job ever finds every lane taken and its
 * workspace streamed. */
static unsigned warm_target(const Daemon *d) {
        unsigned lanes = scratch_store_lanes(d->w.config), held = d->n_running + warm_retiring(d);
        if (!warm_wanted(d) || held >= lanes)
                return 0;
        unsigned want = warm_pair(d, now_monotonic()) ? WARM_AHEAD_MAX : 1;
        return MIN(want, lanes - held);
}

/* A request starts: back to back when it came within WARM_PAIR_USEC of the last one's start. */
static void warm_note_request(Daemon *d) {
        usec_t now = now_monotonic();
        d->warm_pair = d->last_start && now - d->last_start < WARM_PAIR_USEC;
        d->last_start = now;
        /* Keep capsules ready for the next one for warm_seconds. */
        d->warm_until = now + d->w.config->warm_seconds * USEC_PER_SEC;
}

/* A child that walks the workspace: its opens are not stamped by the file system's mark. Every
 * event queued before the fork is read first, with the pid still someone else's (it may have
 * been, until just before the fork). */
static void own_child(Daemon *d, pid_t pid) {
        if (!d->watch)
                return;
        (void) dirty_set_read(d->watch);
        dirty_set_own(d->watch, pid, true);
}

/* A warm child forked, on the lane given (the start's, its descriptors inherited) or a free one,
 * the newest of those waiting. False when none could be. */
static bool warm_spawn(Daemon *d, GenLane *given) {
        uint8_t rnd[6];
        int sv[2];

        /* Each one waiting has a slot among those told to go (warm_retire_one). */
        if (d->n_warm >= WARM_AHEAD_MAX || d->n_warm + warm_retiring(d) >= WARM_RETIRING_MAX ||
            getrandom(rnd, sizeof(rnd), 0) != (ssize_t) sizeof(rnd))
                return false;
        WarmChild w = {.sock = -EBADF};
        int n = snprintf(w.id, sizeof(w.id), "warm-");
        for (unsigned i = 0; i < sizeof(rnd); i++)
                n += snprintf(w.id + n, sizeof(w.id) - (size_t) n, "%02x", rnd[i]);
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return false;
        /* Like a job, the capsule's process never outlives the daemon. */
        pid_t pid;
        if (safe_fork(FORK_DEATHSIG, &pid) < 0) {
                safe_close(sv[0]);
                safe_close(sv[1]);
                return false;
        }
        if (pid == 0) {
                safe_close(sv[0]);
                warm_child(d, sv[1], w.id, given);
        }
        safe_close(sv[1]);
        own_child(d, pid);
        w.pid = pid;
        w.sock = sv[0];
        d->warm[d->n_warm++] = w;
        log_debug("warm capsule '%s': starting (pid %d)", w.id, (int) pid);
        return true;
}

/* The waiting child at index i out of d->warm, the others kept in their order. */
static WarmChild warm_remove(Daemon *d, unsigned i) {
        WarmChild w = d->warm[i];
        memmove(d->warm + i, d->warm + i + 1, (d->n_warm - i - 1) * sizeof(*d->warm));
        d->warm[--d->n_warm] = (WarmChild){.sock = -EBADF};
        return w;
}

/* Tell the waiting one at index i to go (its socket ends); it is reaped like any child. */
static void warm_retire_one(Daemon *d, unsigned i) {
        WarmChild w = warm_remove(d, i);
        (void) send(w.sock, WARM_RETIRE, strlen(WARM_RETIRE), MSG_NOSIGNAL | MSG_DONTWAIT);
        w.sock = safe_close(w.sock);
        for (unsigned k = 0; k < WARM_RETIRING_MAX; k++)
                if (!d->retiring[k].pid) {
                        d->retiring[k] = w;
                        return;
                }
        /* No slot (warm_spawn never lets those waiting and those told to go outnumber the
         * slots: a last resort). Ended here the hard way, like a killed job: its group killed,
         * it reaped (bounded), its capsule torn down. Never put over another one told to go,
         * which would then be forgotten: not waited for at the stop, its capsule left half
         * ended when the daemon's exit kills it (FORK_DEATHSIG), and its own failure to end
         * its capsule never torn down (warm_reaped). */
        (void) kill(-w.pid, SIGKILL);
        int status;
        if (process_kill_and_reap(w.pid, -EBADF, &status) < 0)
                worker_say(&d->w, LOG_ERR, "warm capsule '%s': its process (pid %d) did not end in time; left for the "
                           "next start's cleanup", w.id, (int) w.pid);
        else
                dirty_set_own(d->watch, w.pid, false);
        job_cleanup(&d->w, w.id);
}

/* Every waiting one told to go. */
static void warm_retire(Daemon *d) {
        while (d->n_warm > 0)
                warm_retire_one(d, d->n_warm - 1);
}

static bool warm_children_left(Daemon *d) {
        return d->n_warm > 0 || warm_retiring(d) > 0;
}

/* A warm child ended. One that did not exit cleanly may have left its capsule: torn down. */
static bool warm_reaped(Daemon *d, pid_t pid, int status) {
        WarmChild w = {.sock = -EBADF};
        bool waiting = false;
        for (unsigned i = 0; !w.pid && i < d->n_warm; i++)
                if (d->warm[i].pid == pid) {
                        w = warm_remove(d, i);
                        waiting = true;
                }
        for (unsigned i = 0; !w.pid && i < WARM_RETIRING_MAX; i++)
                if (d->retiring[i].pid == pid) {
                        w = d->retiring[i];
                        d->retiring[i] = (WarmChild){.sock = -EBADF};
                }
        if (!w.pid)
                return false;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                job_cleanup(&d->w, w.id);
                if (waiting)
                        /* It could not start one: not again before the next request. */
                        d->warm_until = 0;
        }
        safe_close(w.sock);
        return true;
}

/* The daemon leaves and a capsule's process did not end in time: killed with its group, its
 * capsule torn down, and said; what is left goes at the next start. */
static void warm_abandon(Daemon *d) {
        WarmChild *all[WARM_AHEAD_MAX + WARM_RETIRING_MAX];
        for (unsigned i = 0; i < WARM_AHEAD_MAX; i++)
                all[i] = &d->warm[i];
        for (unsigned i = 0; i < WARM_RETIRING_MAX; i++)
                all[WARM_AHEAD_MAX + i] = &d->retiring[i];
        for (unsigned i = 0; i < ELEMENTSOF(all); i++) {
                if (!all[i]->pid)
                        continue;
                (void) kill(-all[i]->pid, SIGKILL);
                (void) kill(all[i]->pid, SIGKILL);
                worker_say(&d->w, LOG_ERR, "warm capsule '%s': its process (pid %d) did not end in time; left for the "
                           "next start's cleanup", all[i]->id, (int) all[i]->pid);
                job_cleanup(&d->w, all[i]->id);
        }
}

/* Give the request to the capsule that has waited longest (the likeliest to have booted), its
 * own from then on; false when none is left to take it. One whose process is gone is told to go. */
static bool warm_take(Daemon *d, const RequestRecord *rec, Running *run, int view_fd) {
        size_t len = strlen(rec->id);
        while (d->n_warm > 0) {
                ssize_t n = watch_send_id(d->warm[0].sock, rec->id, len, view_fd);
                if (n != (ssize_t) len) {
                        warm_retire_one(d, 0);
                        continue;
                }
                WarmChild w = warm_remove(d, 0);
                run->cancel_fd = w.sock; /* the job's cancel channel from now on */
                run->pid = w.pid;
                snprintf(run->capsule, sizeof(run->capsule), "%s", w.id);
                return true;
        }
        return false;
}

/* Start queued requests in arrival order up to the concurrency. */
static int start_jobs(Daemon *d, TfwError *e) {
        while (!d->stopping && d->n_running < d->w.config->concurrency && d->n_queue > 0) {
                char id[REQUEST_ID_MAX + 1];
                RequestRecord rec;
                int r;

                memcpy(id, d->queue[0], sizeof(id));
                memmove(d->queue, d->queue + 1, (d->n_queue - 1) * sizeof(*d->queue));
                d->n_queue--;

                /* Its "started" audit line, then the record marked running (issue 11 item 9). */
                TfwError se = {0};
                r = job_mark_started(&d->w, id, &rec, &se);
                if (r == -ESTALE || r == -ENOENT)
                        continue;
                if (r < 0 && se.code && streq(se.code, "audit_failed")) {
                        /* Fail closed: it stays queued, and is tried again at the next reload. */
                        worker_say(&d->w, LOG_ERR, "job '%s': not started: %s", id, se.message);
                        continue;
                }
                if (r < 0) {
                        *e = se;
                        return r;
                }

                warm_note_request(d);
                Running *run = &d->running[d->n_running];
                *run = (Running){.cancel_fd = -EBADF};
                /* What the watch saw before the request came, for its walk. */
                _cleanup_close_ int view = watch_view(d->watch);
                if (warm_take(d, &rec, run, view)) {
                        d->n_running++;
                        memcpy(run->id, rec.id, sizeof(run->id));
                        worker_say(&d->w, LOG_INFO, "job '%s': started in capsule '%s' (pid %d)", rec.id, run->capsule, (int) run->pid);
                        continue;
                }
                /* A job never outlives the daemon: if the daemon dies, the job is published as
                 * interrupted at the next start and must not be running meanwhile (threat 10). */
                pid_t pid;
                int sv[2] = {-EBADF, -EBADF};
                if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                        worker_say(&d->w, LOG_WARNING, "job '%s': no cancel channel (%m): it cannot be cancelled", rec.id);
                if (safe_fork(FORK_DEATHSIG, &pid) < 0) {
                        safe_close(sv[0]);
                        safe_close(sv[1]);
                        TfwError e2 = {0};
                        (void) recover_finish_unpublished(&d->w, &rec, "error", "internal",
                                                          "the worker could not start a process for the job", &e2);
                        continue;
                }
                if (pid == 0) {
                        d->w.watch_view_fd = view; /* the child's: its walk reads it */
                        safe_close(sv[0]);
                        run_child(d, &rec, sv[1]);
                }
                safe_close(sv[1]);
                own_child(d, pid);
                d->n_running++;
                run->pid = pid;
                run->cancel_fd = sv[0];
                memcpy(run->id, rec.id, sizeof(run->id));
                worker_say(&d->w, LOG_INFO, "job '%s': started (pid %d)", rec.id, (int) pid);
        }
        /* Capsules wait for the next requests while they are wanted (the newest told to go when
         * fewer are, the others keep their boot); none otherwise. */
        if (warm_wanted(d)) {
                unsigned want = warm_target(d);
                while (d->n_warm > MAX(want, 1u))
                        warm_retire_one(d, d->n_warm - 1);
                /* While a job runs and a capsule still waits for the next request, the one for the
                 * request after it boots when that job has ended, not beside it: a boot takes
                 * about 0.3 s of CPU, which the job's run paid on 2 cores. */
                if (d->n_running > 0 && d->n_warm > 0)
                        want = MIN(want, d->n_warm);
                while (d->n_warm < want)
                        if (!warm_spawn(d, NULL))
                                break;
        } else
                warm_retire(d);
        status_notify(d);
        return 0;
}

/* A finished job's line: its status, exit code or signal, and how long it ran. */
static void say_job_end(Daemon *d, const RequestRecord *rec) {
        _cleanup_(json_decrefp) json_t *res = publish_load_result(&d->w.dirs, rec->id);
        json_t *ec = json_object_get(res, "exit_code"), *sig = json_object_get(res, "signal"),
               *ms = json_object_get(res, "duration_ms");
        char how[64] = "", took[48] = "";

        if (json_is_integer(ec))
                snprintf(how, sizeof(how), ", exit code %" JSON_INTEGER_FORMAT, json_integer_value(ec));
        else if (json_is_integer(sig))
                snprintf(how, sizeof(how), ", signal %" JSON_INTEGER_FORMAT, json_integer_value(sig));
        if (json_is_integer(ms))
                snprintf(took, sizeof(took), ", ran %" JSON_INTEGER_FORMAT ".%03" JSON_INTEGER_FORMAT " s",
                         json_integer_value(ms) / 1000, json_integer_value(ms) % 1000);
        worker_say(&d->w, LOG_INFO, "job '%s': %s%s%s", rec->id, rec->status[0] ? rec->status : "ended", how, took);
}

static void reap(Daemon *d) {
        /* The walks' own opens still queued are read while their pids are the daemon's. */
        if (d->watch)
                (void) dirty_set_read(d->watch);
        for (;;) {
                int status;
                pid_t pid = waitpid(-1, &status, WNOHANG);
                if (pid <= 0)
                        return;
                /* Before any event is read again: the pid may be another process's from now. */
                dirty_set_own(d->watch, pid, false);
                if (warm_reaped(d, pid, status) || notify_reaped(&d->w, pid))
                        continue;
                for (unsigned i = 0; i < d->n_running; i++) {
                        Running *run = &d->running[i];
                        RequestRecord rec;
                        TfwError e = {0};
                        if (run->pid != pid)
                                continue;
                        if (store_load(d->w.dirs.requests_fd, run->id, &rec, &e) >= 0 && rec.state != STATE_FINAL) {
                                char msg[200];
                                if (run->capsule[0])
                                        job_cleanup(&d->w, run->capsule);
                                job_cleanup(&d->w, run->id);
                                if (run->stop_killed)
                                        snprintf(msg, sizeof(msg), "the worker was stopped while the job ran");
                                else
                                        snprintf(msg, sizeof(msg), "the job's worker process ended without a result (%s %d)",
                                                 WIFSIGNALED(status) ? "signal" : "exit status",
                                                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
                                if (recover_finish_unpublished(&d->w, &rec, run->stop_killed ? "interrupted" : "error",
                                                               run->stop_killed ? "interrupted" : "internal", msg, &e) < 0)
                                        worker_say(&d->w, LOG_ERR, "job '%s': %s", run->id, e.message);
                        }
                        if (store_load(d->w.dirs.requests_fd, run->id, &rec, &e) >= 0)
                                say_job_end(d, &rec);
                        safe_close(run->cancel_fd);
                        d->running[i] = d->running[--d->n_running];
                        /* The window runs from the end of the last request. */
                        d->last_end = now_monotonic();
                        if (d->warm_until)
                                d->warm_until = MAX(d->warm_until,
                                                    now_monotonic() + d->w.config->warm_seconds * USEC_PER_SEC);
                        break;
                }
        }
}

/* A child of the daemon that ends by deadline (monotonic), reaped: its pid, 0 when none ended in
 * time, or a negative errno (-ECHILD: none left). Sleeps on the signalfd's SIGCHLD, whose
 * entries it drains (the daemon is leaving: no other signal is acted on any more). */
static pid_t reap_child_by(Daemon *d, usec_t deadline, int *ret_status) {
        for (;;) {
                pid_t pid = waitpid(-1, ret_status, WNOHANG);
                if (pid > 0)
                        dirty_set_own(d->watch, pid, false);
                if (pid != 0)
                        return pid < 0 ? -errno : pid;
                usec_t now = now_monotonic();
                if (now >= deadline)
                        return 0;
                struct pollfd p = {.fd = d->signal_fd, .events = POLLIN};
                (void) poll(&p, 1, (int) MIN((deadline - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC, (usec_t) 60000));
                struct signalfd_siginfo si;
                while (read(d->signal_fd, &si, sizeof(si)) == sizeof(si))
                        ;
        }
}

static void kill_running(Daemon *d) {
        for (unsigned i = 0; i < d->n_running; i++) {
                d->running[i].stop_killed = true;
                (void) kill(-d->running[i].pid, SIGKILL);
                (void) kill(d->running[i].pid, SIGKILL);
        }
        /* A waiting capsule's process too; its capsule is torn down when it is reaped. */
        warm_retire(d);
        for (unsigned i = 0; i < WARM_RETIRING_MAX; i++)
                if (d->retiring[i].pid) {
                        (void) kill(-d->retiring[i].pid, SIGKILL);
                        (void) kill(d->retiring[i].pid, SIGKILL);
                }
        d->killing = true;
}

static void handle_signals(Daemon *d) {
        struct signalfd_siginfo si;
        while (read(d->signal_fd, &si, sizeof(si)) == sizeof(si)) {
                if (si.ssi_signo == SIGCHLD)
                        reap(d);
                else if (si.ssi_signo == SIGHUP)
                        d->reload_config = true;
                else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
                        if (!d->stopping) {
                                d->stopping = true;
                                d->stop_deadline = now_monotonic() + d->o.stop_grace;
                                warm_retire(d);
                                (void) sd_notify(0, "STOPPING=1");
                                worker_say(&d->w, LOG_INFO, "stopping: %u job(s) may finish", d->n_running);
                        } else if (!d->killing) {
                                worker_say(&d->w, LOG_INFO, "second signal: killing %u job(s)", d->n_running);
                                kill_running(d);
                        }
                }
        }
}

/* The controller's cancel (orchestrator/cancel.h): a running job is told on its channel, and
 * ends cancelled, its capsule torn down, as at a timeout. */
static void take_cancel(Daemon *d, const char *name) {
        char id[REQUEST_ID_MAX + 1] = "";
        CancelOutcome o;
        TfwError e = {0};
        if (cancel_take(&d->w, name, &o, id, &e) < 0) {
                worker_say(&d->w, LOG_ERR, "inbox entry '%s': %s", name, e.message);
                return;
        }
        if (o != CANCEL_IGNORED)
                d->reload_queue = true; /* what it ended is neither queued nor pending any more */
        if (o != CANCEL_RUNNING)
                return;
        for (unsigned i = 0; i < d->n_running; i++)
                if (streq(d->running[i].id, id)) {
                        bool sent = d->running[i].cancel_fd >= 0 &&
                                    send(d->running[i].cancel_fd, (char[]){CANCEL_BYTE}, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1;
                        worker_say(&d->w, sent ? LOG_NOTICE : LOG_WARNING, "job '%s': cancelled by the controller: %s", id,
                                   sent ? "its capsule is being ended" : "its process cannot be told; it runs to its end");
                        return;
                }
        worker_say(&d->w, LOG_WARNING, "job '%s': cancelled by the controller, but no process of this worker runs it", id);
}

/* Cancels present now (at a start, after lost events), after their requests were taken. */
static void cancel_scan(Daemon *d) {
        _cleanup_closedir_ DIR *dir = opendir_fd(d->w.inbox_fd);
        for (struct dirent *de; dir && (de = readdir(dir));)
                if (cancel_name_to_id(de->d_name, NULL, 0))
                        take_cancel(d, de->d_name);
}

static int handle_inotify(Daemon *d, TfwError *e) {
        char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
        for (;;) {
                ssize_t n = read(d->inotify_fd, buf, sizeof(buf));
                if (n <= 0)
                        return 0;
                for (char *p = buf; p < buf + n;) {
                        struct inotify_event *ev = (struct inotify_event *) p;
                        p += sizeof(*ev) + ev->len;
                        if (ev->mask & IN_Q_OVERFLOW) {
                                d->rescan = true; /* events were lost: look at everything */
                                d->reload_queue = true;
                                continue;
                        }
                        if (ev->wd == d->state_wd) {
                                if (ev->len && streq(ev->name, WORKER_WAKE_FILE))
                                        d->reload_queue = true;
                                if (ev->len && streq(ev->name, WORKER_CACHE_CLEAR_FILE))
                                        d->clear_cache = true;
                                continue;
                        }
                        if (ev->wd != d->inbox_wd || !ev->len || d->stopping)
                                continue;
                        if (ev->mask & IN_CREATE) {
                                /* A regular file is taken when closed or renamed in; anything
                                 * else (FIFO, socket, symlink, directory) now. So is a hard
                                 * link: link() makes no IN_CLOSE_WRITE or IN_MOVED_TO, and
                                 * waiting for one would leave it in the inbox until a rescan. */
                                struct stat st;
                                if (fstatat(d->w.inbox_fd, ev->name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                                    (S_ISREG(st.st_mode) && st.st_nlink == 1))
                                        continue;
                        }
                        if (cancel_name_to_id(ev->name, NULL, 0)) {
                                take_cancel(d, ev->name);
                                continue;
                        }
                        CaptureOutcome o;
                        TfwError one = {0};
                        if (inbox_capture(&d->w, ev->name, &o, &one) < 0) {
                                /* The entry stays in the inbox for the next scan; the worker
                                 * goes on with the others. */
                                worker_say(&d->w, LOG_ERR, "inbox entry '%s': %s", ev->name, one.message);
                                continue;
                        }
                        if (o == CAPTURE_QUEUED) {
                                /* Arrival order is the order of capture. */
                                void *nq = realloc(d->queue, (d->n_queue + 1) * sizeof(*d->queue));
                                if (!nq)
                                        return tfw_error(e, ENOMEM, "internal", "out of memory");
                                d->queue = nq;
                                snprintf(d->queue[d->n_queue++], REQUEST_ID_MAX + 1, "%.*s",
                                         (int) (strlen(ev->name) - 5), ev->name);
                        } else if (o == CAPTURE_PENDING) {
                                d->n_pending++;
                                /* Captured just now: it expires one TTL from now. */
                                usec_t exp = now_realtime() + (usec_t) d->w.config->pending_ttl_hours * 3600 * USEC_PER_SEC;
                                if (d->next_expiry == 0 || exp < d->next_expiry)
                                        d->next_expiry = exp;
                        }
                }
        }
}

/* `cache clear` (WORKER_CACHE_CLEAR_FILE): the cache emptied, then the file removed, which tells
 * the command it is done. Jobs running meanwhile keep nothing (build-cache.h's epoch). */
static void clear_cache(Daemon *d) {
        char who[128] = "";
        d->clear_cache = false;
        _cleanup_close_ int fd = openat(d->w.dirs.state_fd, WORKER_CACHE_CLEAR_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return;
        ssize_t k = read(fd, who, sizeof(who) - 1);
        who[k > 0 ? k : 0] = 0;
        for (char *p = who; *p; p++)
                if ((unsigned char) *p < 0x20 || (unsigned char) *p >= 0x7f)
                        *p = 0;
        job_cache_clear(&d->w, who[0] ? who : "an operator");
        (void) unlinkat(d->w.dirs.state_fd, WORKER_CACHE_CLEAR_FILE, 0);
}

/* The wake file (approve/decide.h) says "the store has news"; whoever reloads the queue takes
 * it away, so that its presence alone means an approval nobody has picked up yet. */
static bool consume_wake(Daemon *d) {
        if (unlinkat(d->w.dirs.state_fd, WORKER_WAKE_FILE, 0) >= 0)
                return true;
        if (errno != ENOENT)
                worker_say(&d->w, LOG_WARNING, "cannot remove '%s/%s': %m", d->w.config->state_dir, WORKER_WAKE_FILE);
        return false;
}

static bool inbox_is_empty(Daemon *d) {
        _cleanup_closedir_ DIR *dir = opendir_fd(d->w.inbox_fd);
        if (!dir)
                return true;
        struct dirent *de;
        bool empty = true;
        while ((de = readdir(dir)))
                /* A mount point is rejected but cannot be unlinked while mounted: it does not
                 * keep `drain` waiting. */
                if (de->d_name[0] != '.' && mount_root_at(d->w.inbox_fd, de->d_name) <= 0) {
                        empty = false;
                        break;
                }
        return empty;
}

static void arm_timer(Daemon *d) {
        usec_t now_r = now_realtime(), now_m = now_monotonic(), next = 0;
        usec_t cand[2] = {d->next_expiry, d->next_retention};
        for (unsigned i = 0; i < 2; i++)
                if (cand[i] && (next == 0 || cand[i] < next))
                        next = cand[i];
        /* Convert the wall-clock deadline into the monotonic clock. */
        usec_t mono = 0;
        if (next)
                mono = now_m + (next > now_r ? next - now_r : 1);
        if (d->watchdog_usec && (mono == 0 || d->next_watchdog < mono))
                mono = d->next_watchdog;
        if (d->stopping && !d->killing && (mono == 0 || d->stop_deadline < mono))
                mono = d->stop_deadline;
        /* The end of the window of the capsule waiting for the next request (none while a job runs:
         * its end opens the window again). */
        if (d->n_warm && d->warm_until && d->n_running == 0 && (mono == 0 || d->warm_until < mono))
                mono = d->warm_until;
        /* ... and of the second one's (warm_pair). */
        usec_t pair = d->last_end + WARM_PAIR_USEC;
        if (d->n_warm > 1 && d->n_running == 0 && warm_pair(d, now_m) && (mono == 0 || pair < mono))
                mono = pair;
        struct itimerspec its = {};
        if (mono) {
                its.it_value.tv_sec = (time_t) (mono / USEC_PER_SEC);
                its.it_value.tv_nsec = (long) (mono % USEC_PER_SEC) * 1000;
                if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
                        its.it_value.tv_nsec = 1;
        }
        (void) timerfd_settime(d->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

static int handle_deadlines(Daemon *d, TfwError *e) {
        usec_t now_r = now_realtime(), now_m = now_monotonic();
        int r;

        if (d->next_expiry && d->next_expiry <= now_r) {
                r = expire_pending(&d->w, now_r, e);
                if (r < 0)
                        return r;
                d->reload_queue = true;
        }
        if (d->next_retention && d->next_retention <= now_r &&
            now_r >= d->last_retention + RETENTION_MIN_INTERVAL) {
                usec_t next = 0;
                r = retention_run(&d->w, now_r, false, &next, NULL, e);
                if (r < 0)
                        return r;
                d->last_retention = now_r;
                /* At most hourly, and only when something is waiting to expire. */
                d->next_retention = next ? MAX(next, now_r + RETENTION_MIN_INTERVAL) : 0;
        } else if (d->next_retention && d->next_retention <= now_r)
                d->next_retention = d->last_retention + RETENTION_MIN_INTERVAL;
        if (d->watchdog_usec && d->next_watchdog <= now_m) {
                (void) sd_notify(0, "WATCHDOG=1");
                d->next_watchdog = now_m + d->watchdog_usec / 2;
        }
        if (d->n_warm && !warm_wanted(d)) {
                log_debug("%u capsule(s) started ahead: no request for %u s, removed", d->n_warm, d->w.config->warm_seconds);
                warm_retire(d);
        }
        if (d->stopping && !d->killing && d->n_running > 0 && d->stop_deadline <= now_m) {
                worker_say(&d->w, LOG_INFO, "grace period over: killing %u job(s)", d->n_running);
                kill_running(d);
        }
        return 0;
}

static int setup_events(Daemon *d, TfwError *e) {
        sigset_t mask;
        char path[64];

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGCHLD);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return tfw_error(e, errno, "internal", "sigprocmask: %m");
        d->signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        d->inotify_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        d->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        if (d->signal_fd < 0 || d->inotify_fd < 0 || d->timer_fd < 0)
                return tfw_error(e, errno, "internal", "cannot create the event sources: %m");
        /* Watch the directories we hold open (never re-resolve agent-controlled paths). */
        snprintf(path, sizeof(path), "/proc/self/fd/%d", d->w.inbox_fd);
        d->inbox_wd = inotify_add_watch(d->inotify_fd, path, INBOX_EVENTS);
        snprintf(path, sizeof(path), "/proc/self/fd/%d", d->w.dirs.state_fd);
        d->state_wd = inotify_add_watch(d->inotify_fd, path, IN_MOVED_TO | IN_CLOSE_WRITE | IN_ONLYDIR);
        if (d->inbox_wd < 0 || d->state_wd < 0)
                return tfw_error(e, errno, "internal", "inotify: %m");
        return 0;
}

static void audit_worker(Daemon *d, const char *event, const char *outcome) {
        _cleanup_(json_decrefp) json_t *f = json_pack("{s:s, s:s, s:i}", "name", d->w.config->name, "outcome",
                                                      outcome, "pid", (int) getpid());
        (void) worker_audit_best_effort(&d->w, event, f);
}

/* At start: what locks the controller out of its inbox or results is said at once (doctor
 * shows the same lines). */
static void warn_view(void *userdata, const char *check, bool ok, const char *detail) {
        if (!ok)
                worker_say(userdata, LOG_WARNING, "%s: %s", check, detail);
}

/* The worker's own cgroup (tentaflake-worker-NAME, the parent of its jobs' cgroups) in every
 * hierarchy, once no job or capsule of this daemon is left: a worker started by hand leaves no
 * empty group behind (under systemd its unit's cgroup is removed by systemd anyway). */
static void release_cgroup_group(Daemon *d) {
        _cleanup_free_ char *group = NULL;
        unsigned busy = 0;
        if (d->n_running || warm_children_left(d) || cgroup_group_name(d->w.config->name, &group) < 0)
                return;
        if (cgroup_group_remove_empty(group, &busy) < 0 || busy)
                worker_say(&d->w, LOG_DEBUG, "cgroup '%s' is still in use in %u hierarchy(ies): left", group, busy);
}

/* The generation store's tmpfs in the host's namespace, before the daemon leaves it (unless
 * tentaflake-worker-store@NAME.service mounted it already): false when there is none. */
static bool store_mount(Daemon *d) {
        TfwError se = {0};
        bool made;
        if (store_tmpfs_mount(d->w.dirs.state_fd, d->w.config, &made, &se) < 0) {
                worker_say(&d->w, LOG_WARNING, "%s: no generation store, every workspace is streamed", se.message);
                return false;
        }
        /* Under systemd the unit's own namespace (PrivateMounts=) is no longer the host's. */
        if (made && getenv("INVOCATION_ID"))
                worker_say(&d->w, LOG_WARNING, "the generation store was not mounted by tentaflake-worker-store@%s.service: "
                           "mounted now, it goes with this process (docs/install.md)", d->w.config->name);
        else if (made)
                worker_say(&d->w, LOG_INFO, "the generation store is mounted on state_dir/" STORE_TMPFS_DIR);
        return true;
}

/* SIGHUP (reload.h): the configuration read again; what can change now applied, what needs a
 * restart named; said and audited either way. */
static void reload_config(Daemon *d) {
        ConfigReload rl;
        TfwError e = {0};
        d->reload_config = false;
        int r = d->o.config_path && d->config_raw
                        ? 0
                        : tfw_error(&e, ENOENT, "config_reload", "the configuration the worker started with is unknown "
                                    "(no file, or it could not be read then): restart it to change it");
        if (r >= 0)
                r = config_reload(d->o.config_path, d->config_raw, &rl, &e);
        _cleanup_(json_decrefp) json_t *f = NULL;
        if (r < 0) {
                f = json_pack("{s:s, s:s}", "outcome", "refused", "reason", e.message);
                (void) worker_audit_best_effort(&d->w, "config-reload", f);
                worker_say(&d->w, LOG_ERR, "configuration reload: %s: nothing changed", e.message);
                return;
        }
        Config **more = rl.next ? reallocarray(d->configs, d->n_configs + 1, sizeof(Config *)) : NULL;
        if (rl.next && !more) {
                config_free(rl.next);
                json_decref(rl.next_raw);
                worker_say(&d->w, LOG_ERR, "configuration reload: out of memory: nothing changed");
                return;
        }
        if (rl.next) {
                /* The one in use stays allocated: what was made from it may still point into it. */
                d->configs = more;
                d->configs[d->n_configs++] = rl.next;
                d->w.config = rl.next;
                config_request_policy(rl.next, &d->w.policy);
                json_decref(d->config_raw);
                d->config_raw = rl.next_raw;
                warm_retire(d); /* the next capsule started ahead is started with it */
        }
        /* Audited, then said: once said, it is in the audit log. */
        char keys[2 * CONFIG_RELOAD_KEYS_MAX + 64];
        snprintf(keys, sizeof(keys), "applied: %s; need a restart: %s", rl.applied[0] ? rl.applied : "none",
                 rl.restart[0] ? rl.restart : "none");
        f = json_pack("{s:s, s:s}", "outcome", rl.applied[0] ? "applied" : "unchanged", "message", keys);
        (void) worker_audit_best_effort(&d->w, "config-reload", f);
        worker_say(&d->w, rl.restart[0] ? LOG_WARNING : LOG_NOTICE, "configuration reload: %s%s%s%s",
                   rl.applied[0] ? "applied " : "nothing to apply", rl.applied,
                   rl.restart[0] ? "; these keys changed and need a restart (their old values stay until then): " : "",
                   rl.restart);
}

/* Absolute, so that the approve command it prints works from any directory; the
 * conventional path kept as it is (on NixOS it is a link into the store, whose target a
 * rebuild replaces), so that the command says --name. */
static void config_path_for_commands(Daemon *d) {
        char conventional[PATH_MAX];
        snprintf(conventional, sizeof(conventional), WORKER_CONFIG_DIR "/%s.json", d->w.config->name);
        d->config_abs = d->o.config_path ? realpath(d->o.config_path, NULL) : NULL;
        _cleanup_free_ char *conventional_abs = realpath(conventional, NULL);
        if (d->o.config_path && (streq(d->o.config_path, conventional) ||
                                 (d->config_abs && conventional_abs && streq(d->config_abs, conventional_abs))))
                d->w.config_path = NULL; /* worker_approve_command: --name */
        else
                d->w.config_path = d->config_abs ? d->config_abs : d->o.config_path;
}

/* The capsules' bundles on a tmpfs of the daemon's own namespace, and the generation store's,
 * which outlives it (mounted before the daemon leaves the host's namespace). */
static void enter_namespace(Daemon *d) {
        const Config *c = d->w.config;
        /* From here on the capsules' bundles are in memory of this daemon's own (what a
         * predecessor left on the disk below was removed just above). */
        const CapsuleDriverOps *ops = capsule_driver_ops(c->driver);
        if (ops && ops->local_paths) {
                TfwError se = {0};
                bool store = ops->binds_generations && store_mount(d);
                if (scratch_private_tmpfs(&d->w.dirs, c->state_dir, &se) < 0)
                        worker_say(&d->w, LOG_WARNING, "%s: the capsules' bundles stay on the disk in state_dir/scratch", se.message);
                else {
                        log_debug("scratch: a private tmpfs of %s on state_dir/scratch", SCRATCH_TMPFS_SIZE);
                        if (store && store_tmpfs_open(&d->w, &se) < 0)
                                worker_say(&d->w, LOG_WARNING, "%s: no generation store, every workspace is streamed",
                                           se.message);
                }
        }
}

/* The file system's mark hears every open on the workspace's file system, a job's walk's own
 * too (fan-mark.h): an event queued while the daemon waits on the descriptor wakes it, on the
 * other CPU, once an open (150 of the walk's 336 samples in openat2 were that wake-up, on 1,000
 * files read again). While a job runs, the daemon reads the queue at most every MARK_REST_USEC,
 * in one batch. Nothing waits on it in between: a job's view and a reap read every queued
 * event first, and a stamp read later only numbers the event later, which trusts less, never
 * more. The queue's bound (fs.fanotify.max_queued_events, 16,384 by default) is far from what a
 * walk opens in that time (about 40 files a millisecond when it copies everything). */
#define MARK_REST_USEC (20 * USEC_PER_MSEC)

/* Before READY=1: a lane kept from before the start is brought up to the workspace with the
 * new watch now, not by the first request (a drain runs one queue and goes). The worker was in
 * use before this start (a restart, a reload that needed one): a capsule waits for the next
 * request at once, as after a request, and it is started before the walk, on the lane walked:
 * it boots while the daemon walks (it waits on the lane's update lock for the walk to end).
 * A worker that finds no generation waits for its first request first. The capsule's cache
 * mount points are in a kept generation already (the store's stamp names the cache paths): one
 * it had to make races the walk, which may fail (the lane emptied) or keep it; either way no
 * stale byte, and a capsule whose mount point went missing does not fit its job (it runs cold). */
/* The walk of the start's lane, in a child of the daemon's: the daemon reads the file system's
 * mark meanwhile. Walked by the daemon itself, the walk's own 86k opens overflowed the mark's
 * queue (fs.fanotify.max_queued_events), which it could not read while it walked; the first
 * request after a restart then asked and probed every file again (727 of its 796 ms on the npm
 * tree). The child holds the lane's update lock (the daemon's copy closed), lets the lane go once
 * its index is written, and its opens are the daemon's own (own_child). */
static void walk_ahead_in_child(Daemon *d, GenLane *lane) {
        int view = d->watch ? watch_view(d->watch) : -EBADF;
        pid_t pid;
        if (view < 0)
                return;
        if (safe_fork(FORK_DEATHSIG, &pid) < 0) {
                /* No child: walked here, as before. */
                job_walk_ahead(&d->w, view, lane);
                return;
        }
        if (pid == 0) {
                job_walk_ahead(&d->w, view, lane);
                gen_lane_let_go(lane);
                _exit(0);
        }
        safe_close(view);
        own_child(d, pid);
        lane->update_fd = safe_close(lane->update_fd); /* the child's copy holds the lock */
        for (;;) {
                struct pollfd p = { .fd = dirty_set_mark_fd(d->watch), .events = POLLIN };
                (void) poll(&p, 1, (int) (MARK_REST_USEC / USEC_PER_MSEC));
                (void) dirty_set_read(d->watch);
                int status;
                pid_t r = waitpid(pid, &status, WNOHANG);
                if (r == pid || (r < 0 && errno != EINTR))
                        break;
        }
        (void) dirty_set_read(d->watch);
        dirty_set_own(d->watch, pid, false);
}

static void start_walk_ahead(Daemon *d) {
        GenLane *lane = d->o.drain ? NULL : job_lane_ahead(&d->w);
        if (!lane)
                return;
        d->warm_until = now_monotonic() + d->w.config->warm_seconds * USEC_PER_SEC;
        bool given = warm_wanted(d) && warm_spawn(d, lane);
        walk_ahead_in_child(d, lane);
        if (given)
                gen_lane_let_go(lane);
        else
                gen_lane_release(lane);
}


/* The mark's descriptor to poll now, or -1 while it rests (*rest_ms: when to read it again).
 * With no job running and no capsule waiting (idle, past the window), it is not polled at all:
 * the mark hears every open on the workspace's file system, other processes' too, and woke an
 * idle daemon about 35 times a second (tests/bench/orchestrator.sh's idle row). Its queue is
 * read whole when the next request comes (the job's view); a queue that overflowed meanwhile
 * (fs.fanotify.max_queued_events) makes that walk ask every file, as after any overflow. */
static int mark_polled(Daemon *d, int *rest_ms) {
        int fd = d->watch ? dirty_set_mark_fd(d->watch) : -1;
        usec_t now = now_monotonic();
        if (fd >= 0 && d->n_running == 0 && d->n_warm == 0)
                return -1;
        if (fd < 0 || d->n_running == 0 || now >= d->mark_rest_until)
                return fd; /* what queued meanwhile wakes the poll at once */
        *rest_ms = (int) ((d->mark_rest_until - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC);
        return -1;
}

/* The daemon's start, its worker open: its locks, the inbox, the event sources, recovery from the
 * last stop, the store; READY. */
static int daemon_start(Daemon *d, TfwError *e) {
        const Config *c = d->w.config;
        int r;

        d->w.report = d->o.report;
        d->w.report_userdata = d->o.report_userdata;
        config_path_for_commands(d);
        /* What a reload compares the file with (reload.h). */
        TfwError re = {0};
        if (d->o.config_path && config_reload_raw(d->o.config_path, &d->config_raw, &re) < 0)
                worker_say(&d->w, LOG_WARNING, "%s: a reload (SIGHUP) will change nothing", re.message);
        r = take_instance_lock(d, e);
        if (r < 0)
                return r;
        r = take_jobs_lock(d, e);
        if (r < 0)
                return r;
        r = inbox_open(&d->w, e);
        if (r < 0)
                return r;
        controller_view_check(c, d->w.use_openat2, warn_view, &d->w);
        if (capsule_config_egress(c)) {
                char why[256];
                if (egress_host_route_check(why, sizeof(why)) < 0)
                        worker_say(&d->w, LOG_WARNING,
                                   "network.allow is set, but the egress proxy can reach nothing from this worker: %s "
                                   "(docs/install.md, \"Network for jobs\"); every connection of a job will fail",
                                   why);
        }
        r = setup_events(d, e);
        if (r < 0)
                return r;
        {
                /* Informational for the controller's client; never read back (threat 14). */
                TfwError de = {0};
                if (discovery_publish(&d->w, d->o.config_path, &de) < 0)
                        worker_say(&d->w, LOG_WARNING, "%s", de.message);
        }
        audit_worker(d, "worker-start", d->o.drain ? "drain" : "run");

        job_cache_runtime_version(&d->w);

        /* Recovery before anything new happens: nothing that was running is ever re-run. */
        job_cleanup(&d->w, NULL);
        enter_namespace(d);
        /* Before any job (or capsule started ahead) is forked: they all add to it. */
        d->watch = watch_start(&d->w);
        r = recover_at_start(&d->w, e);
        if (r < 0)
                return r;
        if (r > 0)
                worker_say(&d->w, LOG_NOTICE, "%d job(s) were running when the worker last stopped: published as interrupted", r);
        start_walk_ahead(d);
        r = retention_run(&d->w, now_realtime(), false, &d->next_retention, NULL, e);
        if (r < 0)
                return r;
        d->last_retention = now_realtime();
        if (d->next_retention)
                d->next_retention = MAX(d->next_retention, d->last_retention + RETENTION_MIN_INTERVAL);
        r = expire_pending(&d->w, now_realtime(), e);
        if (r < 0)
                return r;
        d->rescan = true;
        d->reload_queue = true;
        d->clear_cache = true; /* a `cache clear` left from before: its file goes */

        uint64_t wd_usec = 0;
        if (sd_watchdog_enabled(0, &wd_usec) > 0) {
                d->watchdog_usec = wd_usec;
                d->next_watchdog = now_monotonic();
        }
        (void) sd_notify(0, "READY=1");
        worker_say(&d->w, LOG_INFO, "worker '%s' %s: watching '%s'", c->name, d->o.drain ? "draining" : "running", c->workspace);
        return 0;
}

/* The event loop: until stopped (and every job ended), or, draining, until idle. */
static int daemon_loop(Daemon *d, TfwError *e) {
        int r;
        for (;;) {
                if (d->reload_config)
                        reload_config(d);
                if (d->rescan && !d->stopping) {
                        d->rescan = false;
                        TfwError one = {0};
                        if (inbox_scan(&d->w, &one) < 0)
                                worker_say(&d->w, LOG_ERR, "inbox: %s", one.message);
                        cancel_scan(d);
                        d->reload_queue = true;
                }
                if (d->reload_queue) {
                        /* The wake file first, then the store: an approval saved before the
                         * unlink is in what load_queue reads; one saved after it leaves a new
                         * wake file, which starts `drain` again in path mode (the path unit
                         * watches it with PathExists=) and wakes this loop. */
                        (void) consume_wake(d);
                        r = load_queue(d, e);
                        if (r < 0)
                                return r;
                }
                if (d->clear_cache)
                        clear_cache(d);
                r = start_jobs(d, e);
                if (r < 0)
                        return r;
                if (d->stopping && d->n_running == 0 && !warm_children_left(d))
                        break;
                if (d->o.drain && d->n_running == 0 && d->n_queue == 0 && inbox_is_empty(d)) {
                        /* An approval that came after the last reload: take it now rather
                         * than leave it to the next activation. */
                        if (!d->stopping && consume_wake(d)) {
                                d->reload_queue = true;
                                continue;
                        }
                        warm_retire(d);
                        if (!warm_children_left(d))
                                break;
                }

                arm_timer(d);
                int rest_ms = -1;
                struct pollfd p[5] = {
                        {.fd = d->inotify_fd, .events = POLLIN},
                        {.fd = d->signal_fd, .events = POLLIN},
                        {.fd = d->timer_fd, .events = POLLIN},
                        {.fd = d->watch ? dirty_set_fd(d->watch) : -1, .events = POLLIN},
                        {.fd = mark_polled(d, &rest_ms), .events = POLLIN},
                };
                if (poll(p, 5, rest_ms) < 0 && errno != EINTR) {
                        r = tfw_error(e, errno, "internal", "poll: %m");
                        return r;
                }
                if (p[1].revents)
                        handle_signals(d);
                if (p[0].revents) {
                        r = handle_inotify(d, e);
                        if (r < 0)
                                return r;
                }
                if ((p[3].revents || p[4].revents) && dirty_set_read(d->watch) < 0)
                        log_debug("the workspace's watch: %m");
                if (p[4].revents)
                        d->mark_rest_until = now_monotonic() + MARK_REST_USEC;
                if (p[2].revents) {
                        uint64_t ticks;
                        if (read(d->timer_fd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
                                log_debug("timerfd: %m");
                }
                r = handle_deadlines(d, e);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The daemon's stop, whatever r its start or loop ended with: no job abandoned, no capsule
 * left waiting, its cgroup and descriptors given back. Returns r. */
static int daemon_stop(Daemon *d, int r) {
        if (d->n_running > 0) {
                /* Leaving on an error: never abandon a job silently. Each wait bounded (threat
                 * 13): a job process SIGKILLed dies at once unless the kernel holds it. */
                kill_running(d);
                usec_t deadline = now_monotonic() + PROCESS_REAP_AFTER_KILL_USEC;
                while (d->n_running > 0) {
                        int status;
                        pid_t pid = reap_child_by(d, deadline, &status);
                        if (pid == 0)
                                for (unsigned i = 0; i < d->n_running; i++) {
                                        worker_say(&d->w, LOG_ERR,
                                                   "job '%s': its process (pid %d) did not end within %u s of "
                                                   "SIGKILL; left, with its capsule, for the next start's recovery",
                                                   d->running[i].id, (int) d->running[i].pid,
                                                   (unsigned) (PROCESS_REAP_AFTER_KILL_USEC / USEC_PER_SEC));
                                        if (d->running[i].capsule[0])
                                                job_cleanup(&d->w, d->running[i].capsule);
                                        job_cleanup(&d->w, d->running[i].id);
                                }
                        if (pid <= 0)
                                break;
                        /* One started ahead, told to go by kill_running: its own end judged,
                         * as in the loop below (a status dropped here left its capsule). */
                        if (warm_reaped(d, pid, status))
                                continue;
                        for (unsigned i = 0; i < d->n_running; i++)
                                if (d->running[i].pid == pid) {
                                        RequestRecord rec;
                                        TfwError e2 = {0};
                                        if (d->running[i].capsule[0])
                                                job_cleanup(&d->w, d->running[i].capsule);
                                        job_cleanup(&d->w, d->running[i].id);
                                        if (store_load(d->w.dirs.requests_fd, d->running[i].id, &rec, &e2) >= 0 &&
                                            rec.state != STATE_FINAL)
                                                (void) recover_finish_unpublished(&d->w, &rec, "interrupted", "interrupted",
                                                                                  "the worker stopped while the job ran", &e2);
                                        d->running[i] = d->running[--d->n_running];
                                        break;
                                }
                }
        }
        /* A capsule still waiting (leaving on an error): ended, and its process reaped, within
         * the bound of its own end (capsule_warm_end) and of a SIGKILL. */
        warm_retire(d);
        usec_t warm_deadline = now_monotonic() + CAPSULE_WARM_END_MAX_USEC + PROCESS_REAP_AFTER_KILL_USEC;
        while (warm_children_left(d)) {
                int status;
                pid_t pid = reap_child_by(d, warm_deadline, &status);
                if (pid == 0)
                        warm_abandon(d);
                if (pid <= 0)
                        break;
                (void) warm_reaped(d, pid, status);
        }
        if (d->w.audit)
                audit_worker(d, "worker-stop", r < 0 ? "error" : "ok");
        (void) sd_notify(0, "STOPPING=1");
        release_cgroup_group(d);
        if (d->w.audit)
                worker_say(&d->w, LOG_INFO, "worker '%s' stopped%s", d->w.config->name, r < 0 ? " on an error" : "");
        free(d->queue);
        close_daemon_fds(d);
        d->watch = dirty_set_free(d->watch);
        d->w.jobs_lock_fd = safe_close(d->w.jobs_lock_fd);
        worker_close(&d->w);
        for (size_t i = 0; i < d->n_configs; i++)
                config_free(d->configs[i]);
        free(d->configs);
        json_decref(d->config_raw);
        free(d->config_abs);
        return r;
}


int daemon_run(const Config *c, const DaemonOptions *o, TfwError *e) {
        Daemon d = {.o = *o, .lock_fd = -EBADF, .inotify_fd = -EBADF, .signal_fd = -EBADF,
                    .timer_fd = -EBADF, .pid = getpid()};
        for (unsigned i = 0; i < WARM_AHEAD_MAX; i++)
                d.warm[i].sock = -EBADF;
        for (unsigned i = 0; i < WARM_RETIRING_MAX; i++)
                d.retiring[i].sock = -EBADF;

        /* runsc's root (orchestrator/dirs.h): a worker that cannot keep it refuses to start
         * rather than fail every job. */
        char root[PATH_MAX];
        int r = worker_runsc_root_open(c, root, sizeof(root), e);
        if (r < 0)
                return r;
        r = worker_open(&d.w, c, e);
        if (r < 0)
                return r;
        r = daemon_start(&d, e);
        if (r >= 0)
                r = daemon_loop(&d, e);
        return daemon_stop(&d, r);
}
