/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capsule/bundle.h"
#include "capsule/egress.h"
#include "capsule/seccomp-listen.h"
#include "capsule/job.h"
#include "snapshot/stream.h"
#include "capsule/log-cap.h"
#include "capsule/log-live.h"
#include "capsule/oci-spec.h"
#include "capsule/outputs.h"
#include "capsule/protocol.h"
#include "common/fd-util.h"
#include "common/macro.h"
#include "common/path-util.h"
#include "common/process.h"
#include "capsule/id.h"
#include "capsule/teardown.h"

#define CHUNK (64 * 1024)
/* After a timeout kill, how long runsc gets to notice and clean up before it is killed too. */
#define KILL_GRACE_USEC (5 * USEC_PER_SEC)
/* After runsc has exited, how long the channels may take to reach their end. */
#define DRAIN_GRACE_USEC (5 * USEC_PER_SEC)
/* A warm capsule's init is blocked reading the job record: it answers at once. */
#define JOB_ACK_USEC (10 * USEC_PER_SEC)
/* How long the front process may take to be reaped once killed by its pid; then the
 * container is torn down and it gets the driver's teardown bound once more, then it is left
 * (threat 13: no wait on a process is unbounded). */
#define RUNSC_REAP_USEC (5 * USEC_PER_SEC)

static void set_msg(CapsuleResult *r, const char *fmt, ...) _printf_(2, 3);
static void set_msg(CapsuleResult *r, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->message, sizeof(r->message), fmt, ap);
        va_end(ap);
}

/* ---- the run --------------------------------------------------------------------------- */

typedef struct Run {
        const CapsuleJobParams *p;
        CapsuleResult *res;
        const char *cid; /* the container's name */
        uint8_t secret[CAPSULE_SECRET_SIZE];

        LogCap *log;
        LogLive live;       /* the controller's live log (capsule/log-live.h) */
        TrailerSplitter splitter;
        Outputs out;

        int log_r, art_r, pidfd;
        pid_t runsc_pid;
        bool runsc_done;
        bool runsc_lost;    /* killed and torn down, yet not reaped in time: left (end_runsc) */
        int runsc_status;

        uint8_t *pending;   /* read buffers: the artifact channel's, then the log's */
        bool art_eof;

        bool timed_out;
        bool output_exceeded;
        bool cpu_exceeded;
        bool cpu_unreadable; /* the limit could not be checked: ended, never left unenforced */
        int cpu_error;
        uint64_t log_flushed; /* log_cap_seen() when job.log was last written */
        CapsuleCpuProbe cpu_probe; /* the driver's state for reading the CPU time */
        uint64_t cpu_base;  /* a warm capsule's CPU time before its job came */
} Run;

/* The worker is ending the capsule (timeout, output or CPU limit). */
static bool run_cut(const Run *run) {
        return run->timed_out || run->output_exceeded || run->cpu_exceeded || run->cpu_unreadable;
}

int (*capsule_test_cpu_usage_hook)(uint64_t *ret_usec) = NULL;

/* CPU time used so far by the capsule: our job cgroup (runsc), or the cgroup the engine made
 * for the container (found through its sandbox's pid, asked once it runs, and accepted only
 * when it names the container). -EAGAIN: the container does not run yet (nothing to count). */

static int capsule_cpu_usage(Run *run, CgroupJob *cg, uint64_t *ret_usec) {
        if (capsule_test_cpu_usage_hook)
                return capsule_test_cpu_usage_hook(ret_usec);
        return run->p->driver->ops->cpu_usage(run->p->driver, run->cid, cg, &run->cpu_probe, ret_usec);
}

static void log_sink(void *userdata, const void *data, size_t len) {
        Run *run = userdata;
        if (run->log)
                log_cap_feed(run->log, data, len);
}

static void art_error(Run *run, const char *code, const char *fmt, ...) _printf_(3, 4);
static void art_error(Run *run, const char *code, const char *fmt, ...) {
        va_list ap;
        if (run->res->artifacts_error_code)
                return; /* the first reason is the one to tell */
        run->res->artifacts_error_code = code;
        va_start(ap, fmt);
        vsnprintf(run->res->artifacts_error, sizeof(run->res->artifacts_error), fmt, ap);
        va_end(ap);
}

/* Does the job want its changeset (CapsuleJobParams.changes_staging_fd)? */
static bool wants_changes(const CapsuleJobParams *p) {
        return p->work_dir && p->changes_staging_fd > STDERR_FILENO && p->changes_max_entries > 0;
}

/* The importers of the artifact channel (capsule/outputs.h): the artifacts', with cache paths
 * the build cache's, and with a changeset the changes'. */
static void outputs_setup(Run *run) {
        const CapsuleJobParams *p = run->p;
        const ConfigLimits *l = &p->config->limits;
        ArtifactLimits al = {
                .max_bytes = l->max_artifact_bytes,
                .max_entries = l->max_artifact_entries,
                .unpriv_uid = p->unpriv_uid,
                .unpriv_gid = p->unpriv_gid,
                .group = p->config->container_gid,
        };
        ArtifactLimits cl = al;
        cl.cache = true;
        cl.max_bytes = p->cache_max_bytes;
        cl.max_entries = p->cache_max_entries;
        cl.owner = p->config->container_uid;
        cl.top_file = CAPSULE_CACHE_DELETED;
        /* The changes: the artifacts' rules (files and directories, names UTF-8), their own
         * bounds; the list is a file of the stream too, and the directories a file needs count
         * as entries. */
        ArtifactLimits hl = al;
        hl.max_bytes = p->changes_max_bytes + CAPSULE_CHANGES_LIST_MAX;
        hl.max_entries = 2 * p->changes_max_entries + 16;
        outputs_init(&run->out, run->secret, &al, p->staging_fd, &cl, p->cache_paths ? p->cache_staging_fd : -1, &hl,
                     wants_changes(p) ? p->changes_staging_fd : -1);
}

static void on_art_readable(Run *run) {
        if (outputs_blocked_fd(&run->out) >= 0)
                return; /* back-pressure: an importer has not taken the last chunk yet */
        ssize_t k = read(run->art_r, run->pending, CHUNK);
        if (k < 0) {
                if (errno == EINTR || errno == EAGAIN)
                        return;
                k = 0;
        }
        if (k == 0) {
                run->art_eof = true;
                run->art_r = safe_close(run->art_r);
                return;
        }
        outputs_feed(&run->out, run->pending, (size_t) k);
}

static void on_log_readable(Run *run) {
        ssize_t k = read(run->log_r, run->pending + CHUNK, CHUNK);
        if (k < 0) {
                if (errno == EINTR || errno == EAGAIN)
                        return;
                k = 0;
        }
        if (k == 0) {
                run->log_r = safe_close(run->log_r);
                return;
        }
        trailer_splitter_feed(&run->splitter, run->pending + CHUNK, (size_t) k);
        log_live_update(&run->live, run->log, &run->splitter);
}

/* Reap the front process if it ends within timeout (0: only look). */
static bool reap_runsc(Run *run, usec_t timeout) {
        int st;
        if (run->runsc_done)
                return true;
        if (process_wait(run->runsc_pid, run->pidfd, timeout, &st) < 0)
                return false;
        run->runsc_done = true;
        run->runsc_status = st;
        run->pidfd = safe_close(run->pidfd);
        return true;
}

/* job.log, rewritten whole from its start: the head, the marker and the tail as they are now. */
static int rewrite_log(const LogCap *log, int fd) {
        if (lseek(fd, 0, SEEK_SET) < 0 || ftruncate(fd, 0) < 0)
                return -errno;
        return log_cap_write(log, fd);
}

/* While the job runs: the same, plus the newest bytes the trailer splitter still holds back
 * (job output: init's trailer only comes after the job), when they fit in the cap. */
static void flush_running_log(Run *run) {
        if (rewrite_log(run->log, run->p->log_fd) < 0)
                return;
        if (run->splitter.n_tail > 0 && !log_cap_truncated(run->log) &&
            log_cap_size(run->log) + run->splitter.n_tail <= run->p->config->limits.max_log_bytes)
                (void) write_all(run->p->log_fd, run->splitter.tail, run->splitter.n_tail);
}

static uint64_t log_pending(const Run *run) {
        return log_cap_seen(run->log) + run->splitter.n_tail;
}

static int poll_timeout(usec_t now, usec_t deadline) {
        if (deadline <= now)
                return 0;
        usec_t ms = (deadline - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
        return (int) MIN(ms, (usec_t) 60000);
}

/* Stop the capsule: stage 0 at the timeout (spares the runtime's front process so it records
 * the end), 1 when that did not end it, 2 when something still holds a channel open after
 * the front process exited (capsule/driver.h). */
static void kill_capsule(Run *run, CgroupJob *cg, int stage) {
        run->p->driver->ops->kill(run->p->driver, run->cid, run->runsc_pid, cg, stage);
}

/* The capsule is to end now: its front process reaped, bounded in time. Killed by its pid and
 * through the cgroup (stage 1); one that has not ended RUNSC_REAP_USEC later gets the whole
 * teardown (capsule/teardown.h: every process of the container by its argv and its cgroup, which
 * stays: capsule_run_job removes it; an engine's `rm -f`) and the driver's teardown bound; one
 * that still has not ended is left, marked (runsc_lost), rather than waited for forever. */
static void end_runsc(Run *run, CgroupJob *cg) {
        const CapsuleDriver *d = run->p->driver;
        if (reap_runsc(run, 0))
                return;
        kill_capsule(run, cg, 1);
        if (reap_runsc(run, RUNSC_REAP_USEC))
                return;
        TfwError e = {0};
        (void) d->ops->teardown(d, run->cid, CAPSULE_TEARDOWN_KEEP_CGROUP, NULL, &e);
        if (!reap_runsc(run, d->ops->teardown_bound(d)))
                run->runsc_lost = true;
}

/* The descriptors the event loop waits on, and where each one is in pfd (-1: not there). */
static int poll_set(Run *run, struct pollfd pfd[static 4], int *i_pid, int *i_art, int *i_log, int *i_imp) {
        int n = 0;
        int blocked = outputs_blocked_fd(&run->out);
        if (!run->runsc_done && run->pidfd >= 0) {
                pfd[n] = (struct pollfd) { .fd = run->pidfd, .events = POLLIN };
                *i_pid = n++;
        }
        if (run->art_r >= 0 && blocked < 0) {
                pfd[n] = (struct pollfd) { .fd = run->art_r, .events = POLLIN };
                *i_art = n++;
        }
        if (run->log_r >= 0) {
                pfd[n] = (struct pollfd) { .fd = run->log_r, .events = POLLIN };
                *i_log = n++;
        }
        if (blocked >= 0) {
                pfd[n] = (struct pollfd) { .fd = blocked, .events = POLLOUT };
                *i_imp = n++;
        }
        return n;
}

/* The CPU-time limit checked: exceeded, or unreadable for too long (fail closed). */
static void check_cpu(Run *run, CgroupJob *cg, usec_t now, usec_t *cpu_failing_since) {
        uint64_t used;
        int cr = capsule_cpu_usage(run, cg, &used);
        if (cr >= 0) {
                *cpu_failing_since = 0;
                used -= MIN(used, run->cpu_base);
                if (used >= run->p->cpu_seconds * USEC_PER_SEC)
                        run->cpu_exceeded = true;
        } else if (cr == -EAGAIN)
                ; /* the engine has not started it: no CPU used */
        else if (!*cpu_failing_since)
                *cpu_failing_since = now;
        else if (now - *cpu_failing_since >= CAPSULE_CPU_UNREADABLE_USEC) {
                /* Fail closed: a limit that cannot be checked ends
                 * the job as the worker's fault. */
                run->cpu_unreadable = true;
                run->cpu_error = -cr;
        }
}

/* The event loop: both channels drained concurrently until runsc has exited and both
 * reached their end; the timeout and the grace periods enforced on the way. */
static void event_loop(Run *run, CgroupJob *cg) {
        usec_t deadline = now_monotonic() + run->p->timeout_seconds * USEC_PER_SEC;
        usec_t kill_deadline = 0, drain_deadline = 0;
        usec_t cpu_check = run->p->cpu_seconds ? now_monotonic() + CAPSULE_CPU_CHECK_USEC : 0;
        usec_t cpu_failing_since = 0;
        usec_t log_flush = now_monotonic() + CAPSULE_LOG_FLUSH_USEC;
        uint64_t max_log = run->p->config->limits.max_log_bytes;
        bool drain_killed = false;
        usec_t give_up = 0; /* set at the first kill of the front: the driver's teardown bound */

        for (;;) {
                bool art_open = run->art_r >= 0, log_open = run->log_r >= 0;
                if (run->runsc_done && !art_open && !log_open)
                        break;

                struct pollfd pfd[4];
                int i_pid = -1, i_art = -1, i_log = -1, i_imp = -1;
                int n = poll_set(run, pfd, &i_pid, &i_art, &i_log, &i_imp);

                usec_t now = now_monotonic(), next = deadline;
                if (cpu_check && cpu_check < next)
                        next = cpu_check;
                bool log_dirty = run->p->log_fd >= 0 && log_pending(run) != run->log_flushed;
                if (log_dirty && log_flush < next)
                        next = log_flush;
                if (run_cut(run))
                        next = run->runsc_done ? now + USEC_PER_SEC : kill_deadline;
                if (run->runsc_done)
                        next = drain_deadline;
                /* Without a pidfd, look for runsc's exit now and then. */
                int t = poll_timeout(now, next);
                if (run->pidfd < 0 && !run->runsc_done)
                        t = MIN(t, 20);
                int k = poll(pfd, (nfds_t) n, t);
                if (k < 0 && errno != EINTR)
                        break;
                if (k > 0) {
                        if (i_log >= 0 && pfd[i_log].revents)
                                on_log_readable(run);
                        if (i_art >= 0 && pfd[i_art].revents)
                                on_art_readable(run);
                        if (i_imp >= 0 && pfd[i_imp].revents)
                                outputs_writable(&run->out, pfd[i_imp].revents & (POLLERR | POLLHUP));
                }
                bool was_done = run->runsc_done;
                if (i_pid < 0 || (k > 0 && pfd[i_pid].revents))
                        (void) reap_runsc(run, 0);
                now = now_monotonic();
                if (run->runsc_done && !was_done)
                        drain_deadline = now + DRAIN_GRACE_USEC;

                /* The artifact channel ended: let the importers see the end. */
                if (run->art_eof && outputs_blocked_fd(&run->out) < 0)
                        outputs_end(&run->out);

                /* What the job wrote so far reaches job.log now and then: a worker that dies
                 * mid-job (its job processes die with it) leaves the output up to here. */
                if (log_dirty && now >= log_flush) {
                        flush_running_log(run);
                        run->log_flushed = log_pending(run);
                        log_flush = now + CAPSULE_LOG_FLUSH_USEC;
                }
                /* The worker's limits: time, output, CPU. The first one met ends the capsule;
                 * the kill spares runsc itself so it records the end and removes the
                 * container. */
                if (!run->runsc_done && !run_cut(run)) {
                        if (now >= deadline)
                                run->timed_out = true;
                        else if (run->p->end_on_log_limit && log_cap_seen(run->log) > max_log)
                                run->output_exceeded = true;
                        else if (cpu_check && now >= cpu_check) {
                                check_cpu(run, cg, now, &cpu_failing_since);
                                cpu_check = now_monotonic() + CAPSULE_CPU_CHECK_USEC;
                        }
                        if (run_cut(run)) {
                                kill_capsule(run, cg, 0);
                                kill_deadline = now + KILL_GRACE_USEC;
                        }
                }
                if (run_cut(run) && !run->runsc_done && now >= kill_deadline) {
                        /* Killed again and again and it still runs: no more rounds here, the
                         * bounded end (end_runsc) takes over. */
                        if (!give_up)
                                give_up = now + run->p->driver->ops->teardown_bound(run->p->driver);
                        else if (now >= give_up)
                                break;
                        kill_capsule(run, cg, 1);
                        kill_deadline = now + KILL_GRACE_USEC;
                }
                if (run->runsc_done && now >= drain_deadline) {
                        if (!drain_killed) {
                                /* Something of the sandbox still holds a channel open. */
                                kill_capsule(run, cg, 2);
                                drain_killed = true;
                                drain_deadline = now + DRAIN_GRACE_USEC;
                        } else {
                                run->art_r = safe_close(run->art_r);
                                run->log_r = safe_close(run->log_r);
                        }
                }
        }
        outputs_end(&run->out);
}

/* What came on the log channel before init's answer to the job record: runsc's own words,
 * part of the log, and kept for the message when the answer never comes. */
typedef struct PreAck {
        Run *run;
        char text[256];
        size_t n;
} PreAck;

static void pre_ack_sink(void *userdata, const void *data, size_t len) {
        PreAck *a = userdata;
        const char *b = data;
        trailer_splitter_feed(&a->run->splitter, data, len);
        for (size_t i = 0; i < len && a->n + 1 < sizeof(a->text); i++)
                a->text[a->n++] = (b[i] == '\n' || (unsigned char) b[i] < ' ') ? ' ' : b[i];
        a->text[a->n] = 0;
}

/* Wait for a warm capsule's init to answer the job record (capsule/protocol.h), reading the
 * log channel a byte at a time so nothing after the answer is taken here; s is kept across
 * calls (an answer may straddle a deadline). 1: it answered; 0: the channel ended first (init
 * never took the job: no job process ever existed); -ETIMEDOUT. */
static int await_job_ack(JobAckScanner *s, int fd, usec_t deadline) {
        for (;;) {
                struct pollfd pfd = { .fd = fd, .events = POLLIN };
                int k = poll(&pfd, 1, poll_timeout(now_monotonic(), deadline));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return -ETIMEDOUT;
                uint8_t c;
                ssize_t n = read(fd, &c, 1);
                if (n < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                if (n <= 0) {
                        job_ack_scanner_flush(s);
                        return 0;
                }
                if (job_ack_scanner_feed(s, c))
                        return 1;
        }
}

/* ---- the input thread ---------------------------------------------------------------- */

/* How long the join waits for the input thread once the capsule is gone, before it ends the
 * thread's write itself (a process the kernel would not give back may still hold the channel's
 * reader, and a write into a full pipe then never returns). */
#define FEEDER_JOIN_USEC (5 * USEC_PER_SEC)

typedef struct Feeder {
        int (*fn)(void *userdata, int fd);
        void *userdata;
        pthread_mutex_t lock; /* fd: closed by the thread, cut by the join (feeder_cut) */
        int fd;
        Outputs *out;       /* gets a copy of fd once the input went out whole */
        pthread_t thread;
        bool started;
} Feeder;

static void *feeder_main(void *arg) {
        Feeder *f = arg;
        int r = f->fn(f->userdata, f->fd);
        /* Whole: the channel carries the host's stop records from now on (capsule/protocol.h).
         * Cut: its end is init's only word that the input is over (a stream cut inside a file
         * has no abort mark it could read), so no copy may outlive this one. */
        pthread_mutex_lock(&f->lock);
        if (r >= 0 && f->out)
                outputs_control_handoff(f->out, fcntl(f->fd, F_DUPFD_CLOEXEC, 3));
        f->fd = safe_close(f->fd);
        pthread_mutex_unlock(&f->lock);
        return NULL;
}

/* Every signal blocked on the thread (SIGPIPE included: a write to a capsule that stopped
 * reading fails with EPIPE). */
static int feeder_start(Feeder *f) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        int r = pthread_create(&f->thread, NULL, feeder_main, f);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r != 0)
                return -r;
        f->started = true;
        return 0;
}

static bool feeder_joined_by(Feeder *f, usec_t usec) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        usec += (usec_t) ts.tv_nsec / 1000;
        ts.tv_sec += (time_t) (usec / USEC_PER_SEC);
        ts.tv_nsec = (long) (usec % USEC_PER_SEC) * 1000;
        return pthread_timedjoin_np(f->thread, NULL, &ts) == 0;
}

/* The thread's write ended from here: the channel made non-blocking, so its next write into a
 * full pipe fails (EAGAIN), and a reader of our own opened on it (its /proc/self/fd name) takes
 * what fills the pipe, which wakes a write that sleeps there. Returns that reader. */
static int feeder_cut(Feeder *f) {
        char path[64];
        int rd = -EBADF;
        pthread_mutex_lock(&f->lock);
        if (f->fd >= 0) {
                int fl = fcntl(f->fd, F_GETFL);
                if (fl >= 0)
                        (void) fcntl(f->fd, F_SETFL, fl | O_NONBLOCK);
                snprintf(path, sizeof(path), "/proc/self/fd/%d", f->fd);
                rd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
                if (rd < 0)
                        rd = -errno;
        }
        pthread_mutex_unlock(&f->lock);
        return rd;
}

/* Joined within FEEDER_JOIN_USEC, or its write is cut (feeder_cut): woken by one read of the
 * pipe, the write fills what that freed and fails at the next full pipe, and so does every
 * write after it; the thread ends as soon as its writer gives up (a reader of the workspace
 * that hangs would hold it, as it would hold the walk without a capsule). One more read each
 * 100 ms, for a writer that was between two writes. */
static void feeder_join(Feeder *f) {
        if (f->started && !feeder_joined_by(f, FEEDER_JOIN_USEC)) {
                _cleanup_close_ int rd = feeder_cut(f);
                uint8_t sink[16 * 1024];
                do {
                        ssize_t k = rd >= 0 ? read(rd, sink, sizeof(sink)) : 0;
                        (void) k; /* what it read is thrown away; nothing reads it any more */
                } while (!feeder_joined_by(f, 100 * USEC_PER_MSEC));
        }
        f->started = false;
        f->fd = safe_close(f->fd);
        pthread_mutex_destroy(&f->lock);
}

static int make_pipe(int fds[2]) {
        return pipe2(fds, O_CLOEXEC) < 0 ? -errno : 0;
}

/* ---- booting a capsule ------------------------------------------------------------------ */

/* What a started capsule holds: a cold one for its job, a warm one until its job comes. */
typedef struct Boot {
        char *id;                 /* the container's name */
        uint8_t secret[CAPSULE_SECRET_SIZE];
        CgroupJob *cg;
        CapsuleBundle *bundle;
        int in_w, art_r, log_r;   /* our ends of the three channels */
        pid_t runsc_pid;          /* the front process (`runsc run`); -1 once reaped */
        int pidfd;                /* ... and its pidfd, opened before it can have been reaped */
        bool started;             /* runsc was spawned */
        bool warm;                /* init waits for the job record */
        EgressProxy egress;       /* with network.allow: the capsule's proxy (capsule/egress.h) */
        SeccompListener *listener; /* a driver on the host's kernel: its seccomp listener */
} Boot;

/* A Boot that holds nothing. */
static Boot boot_empty(void) {
        Boot b = { .in_w = -EBADF, .art_r = -EBADF, .log_r = -EBADF, .pidfd = -EBADF };
        egress_proxy_init(&b.egress);
        return b;
}

struct CapsuleWarm {
        Boot boot;
        const CapsuleDriver *driver;
        const Config *config;
        ConfigLimits limits; /* the limits its walls were made from */
        char warm_id[CAPSULE_JOB_ID_MAX + 1];
        char *snapshot_dir;
        char *work_dir;
        bool binds_cache;
        bool egress;         /* booted with the egress streams and its proxy */
};

static void boot_fail(CapsuleResult *res, const char *reason, const char *fmt, ...) _printf_(3, 4);
static void boot_fail(CapsuleResult *res, const char *reason, const char *fmt, ...) {
        va_list ap;
        res->status = CAPSULE_ERROR;
        res->reason = reason;
        va_start(ap, fmt);
        vsnprintf(res->message, sizeof(res->message), fmt, ap);
        va_end(ap);
}

/* The front process of a boot that no run took over, killed by its pid and reaped (bounded).
 * By its pid, whatever else the teardown does: a child that has not yet exec'd runsc names no
 * container in its argv and is in no cgroup, so neither the teardown's search nor a cgroup kill
 * can see it. Missed that way, it went on to become `runsc run`, made the job cgroup again after
 * the teardown had removed it, booted its sandbox there and was waited for forever (issue 33
 * finding 5). SIGKILLed, it runs no more code of runsc even when it cannot be reaped in time. */
static int boot_end_front(Boot *b, const CapsuleDriver *d, TfwError *e) {
        int r = 0;
        if (b->runsc_pid <= 0)
                return 0;
        if (process_kill_and_reap(b->runsc_pid, b->pidfd, NULL) < 0)
                r = tfw_error(e, EBUSY, "teardown", "its %s (pid %d) did not end within %u s of SIGKILL", d->ops->name,
                              (int) b->runsc_pid, (unsigned) (PROCESS_REAP_AFTER_KILL_USEC / USEC_PER_SEC));
        /* Reaped, or left: never waited for or signalled again from here. */
        b->runsc_pid = -1;
        b->pidfd = safe_close(b->pidfd);
        return r;
}

/* Step 4 of the contract for whatever a boot made: the front process (when no run took it
 * over), the container, its cgroup and its bundle. Returns 0, or the first thing that could not
 * be removed (named in e, may be NULL); the rest is removed all the same. */
static int boot_destroy(Boot *b, const CapsuleDriver *d, char *defer_record, size_t defer_size, TfwError *e) {
        int r = boot_end_front(b, d, e), k;

        egress_proxy_kill(&b->egress);
        seccomp_listen_finish(b->listener, NULL);
        b->listener = NULL;
        b->in_w = safe_close(b->in_w);
        b->art_r = safe_close(b->art_r);
        b->log_r = safe_close(b->log_r);
        bool emptied = false;
        if (b->cg) {
                char path[PATH_MAX];
                snprintf(path, sizeof(path), "%s", cgroup_job_path(b->cg));
                k = cgroup_job_destroy(b->cg);
                if (k < 0 && r >= 0)
                        r = tfw_error(e, -k, "teardown", "cannot remove its cgroup '%s': %s", path, strerror(-k));
                emptied = k >= 0;
        }
        b->cg = NULL;
        /* The record is left for later only when the cgroup was found empty and removed:
         * nothing of the container runs any more (an engine that makes its own cgroup never). */
        bool defer = defer_record && emptied && r >= 0 && b->id && b->started && strlen(b->id) < defer_size;
        if (defer)
                snprintf(defer_record, defer_size, "%s", b->id);
        else if (b->id && b->started && (k = d->ops->remove(d, b->id)) < 0 && r >= 0)
                r = tfw_error(e, -k, "teardown", "%s still keeps its record: %s", d->ops->name, strerror(-k));
        if (b->bundle)
                (void) capsule_bundle_remove(b->bundle);
        b->bundle = NULL;
        free(b->id);
        b->id = NULL;
        b->started = false;
        explicit_bzero(b->secret, sizeof(b->secret));
        return r;
}

/* The capsule's cgroup, first, so nothing of the sandbox ever runs outside it (the engines make
 * their own); a capsule booted ahead yields the CPU meanwhile. */
static int boot_cgroup(const Config *config, const CapsuleDriverOps *ops, Boot *b, CapsuleResult *res,
                       bool low_cpu) {
        _cleanup_free_ char *group = NULL;
        int r;

        /* The cgroup first, so nothing of the sandbox ever runs outside it. A leftover of the
         * same name (a predecessor killed mid-job) is removed once. */
        const ConfigLimits *l = &config->limits;
        CgroupLimits cl = {
                .memory = l->memory,
                .memory_swap = l->memory_swap,
                /* Under gVisor the host counts the sandbox's threads, under runc the job's own
                 * processes (and init). */
                .pids = ops->host_kernel ? l->pids : capsule_host_pids_limit(l->pids),
                .cpu_quota_us = l->cpus_milli * (CAPSULE_CPU_PERIOD_US / 1000),
                .cpu_period_us = CAPSULE_CPU_PERIOD_US,
        };
        TfwError ce = {};
        r = cgroup_group_name(config->name, &group);
        if (!ops->worker_cgroup)
                r = 0; /* the engine makes and limits the container's cgroup */
        else if (r < 0)
                r = tfw_error(&ce, -r, "capsule_setup", "invalid cgroup group");
        if (r >= 0 && ops->worker_cgroup)
                r = cgroup_job_create(group, b->id, &cl, &b->cg, &ce);
        if (r == -EEXIST && cgroup_job_remove_stale(group, b->id) >= 0)
                r = cgroup_job_create(group, b->id, &cl, &b->cg, &ce);
        if (r < 0) {
                boot_fail(res, "capsule_setup", "%s", ce.message);
                return r;
        }
        /* A capsule booted ahead yields the CPU to the jobs running meanwhile; its job gets
         * the normal share back (capsule_run_job). */
        if (low_cpu && b->cg)
                (void) cgroup_job_set_cpu_weight(b->cg, true);
        return 0;
}

/* What the driver needs first, then the OCI bundle in the scratch (a leftover of the same id
 * removed once), and no leftover container of that id. */
static int boot_bundle(const Config *config, const CapsuleDriver *driver, int scratch_fd, const char *scratch_path,
                       CapsuleSpecParams *sp, Boot *b, CapsuleResult *res) {
        const CapsuleDriverOps *ops = driver->ops;
        int r;

        sp->cgroups_path = b->cg ? cgroup_job_path(b->cg) : NULL;
        TfwError be = {};
        /* What the driver needs first (the engines: the pinned image is local; never a pull). */
        if (ops->prepare(driver, config, &be) < 0) {
                boot_fail(res,
                          be.code && streq(be.code, "image_missing")   ? "image_missing"
                          : be.code && streq(be.code, "image_refused") ? "image_refused"
                                                                       : "runtime_failed",
                          "%s", be.message);
                return -EIO;
        }
        /* A driver on the host's kernel: its walls in the spec (capsule/oci-spec.h). */
        CapsuleKernelWalls walls;
        if (ops->kernel_walls) {
                r = ops->kernel_walls(driver, b->id, &walls);
                if (r < 0) {
                        boot_fail(res, "capsule_setup", "the capsule's root of '%s': %s", b->id, strerror(-r));
                        return r;
                }
        }
        sp->kernel = ops->kernel_walls ? &walls : NULL;
        r = capsule_bundle_create(scratch_fd, scratch_path, b->id, sp, &b->bundle, &be);
        if (r == -EEXIST && rm_rf_at(scratch_fd, b->id) >= 0)
                r = capsule_bundle_create(scratch_fd, scratch_path, b->id, sp, &b->bundle, &be);
        sp->kernel = NULL;
        if (r < 0) {
                boot_fail(res, "capsule_setup", "%s", be.message);
                return r;
        }
        /* The spec names it: it listens before the runtime exists (which connects once, as it
         * makes the container, and refuses to go on without it). */
        if (ops->kernel_walls && walls.listener_path[0] && (r = seccomp_listen_open(walls.listener_path, &b->listener)) < 0) {
                boot_fail(res, "capsule_setup", "the seccomp listener '%s': %s", walls.listener_path, strerror(-r));
                return r;
        }
        /* A leftover container of the same id would make the run fail. */
        if (ops->worker_cgroup)
                (void) ops->remove(driver, b->id);
        return 0;
}

/* Cgroup, bundle, channels, the secret (and for a cold job its prelude: the cache record and
 * the input's kind), runsc started.
 * sp: the spec's job part (argv, environment; warm: init waits for them on the channel). On
 * failure *res says why and b holds what must be destroyed. */
static int boot_capsule(const Config *config, const CapsuleDriver *driver, int scratch_fd,
                        const char *scratch_path, const char *job_id, CapsuleSpecParams *sp,
                        bool warm, const uint8_t *prelude, size_t prelude_len, Boot *b, CapsuleResult *res,
                        bool low_cpu) {
        int in[2] = { -EBADF, -EBADF }, art[2] = { -EBADF, -EBADF }, lg[2] = { -EBADF, -EBADF };
        const CapsuleDriverOps *ops = driver->ops;
        int r;

        *b = boot_empty();
        b->warm = warm;
        r = capsule_container_id(config->name, job_id, &b->id);
        if (r < 0) {
                boot_fail(res, "capsule_setup", "cannot prepare job '%s': %s", job_id, strerror(-r));
                return r;
        }
        if (getrandom(b->secret, sizeof(b->secret), 0) != (ssize_t) sizeof(b->secret)) {
                boot_fail(res, "capsule_setup", "getrandom: %s", strerror(errno));
                return -EIO;
        }

        r = boot_cgroup(config, ops, b, res, low_cpu);
        if (r < 0)
                return r;

        r = boot_bundle(config, driver, scratch_fd, scratch_path, sp, b, res);
        if (r < 0)
                return r;

        /* The capsule's only way out, when it has one: its streams and their proxy, before the
         * sandbox exists (docs/egress.md). Each connection is bounded by the longest job. */
        if (capsule_config_egress(config)) {
                TfwError ee = {};
                r = egress_proxy_start(config, config->limits.max_timeout_seconds, ops->host_kernel, &b->egress, &ee);
                if (r < 0) {
                        boot_fail(res, "capsule_setup", "%s", ee.message);
                        return r;
                }
        }
        if ((r = make_pipe(in)) < 0 || (r = make_pipe(art)) < 0 || (r = make_pipe(lg)) < 0) {
                boot_fail(res, "capsule_setup", "pipe: %s", strerror(-r));
                goto fail;
        }
        /* The secret (and a cold job's input kind) fit in the pipe buffer: written before
         * runsc exists. A warm capsule's job record, a streamed input, follow later. */
        r = write_all(in[1], b->secret, sizeof(b->secret));
        if (r >= 0 && !warm)
                r = write_all(in[1], prelude, prelude_len);
        if (r < 0) {
                boot_fail(res, "capsule_setup", "cannot pass the channel secret: %s", strerror(-r));
                goto fail;
        }
        /* A large stream goes in fewer round trips through the sandbox. */
        (void) fcntl(in[1], F_SETPIPE_SZ, CAPSULE_INPUT_PIPE_SIZE);
        /* Each of init's writes of the job's output goes in one piece (docs/capsule.md). */
        (void) fcntl(lg[0], F_SETPIPE_SZ, CAPSULE_LOG_PIPE_SIZE);

        CapsuleSpawn sp_run = {
                .config = config, .cid = b->id, .job_id = sp->job_id, .argv = sp->argv,
                .extra_env = sp->extra_env, .check = sp->check, .snapshot_dir = sp->snapshot_dir,
                .work_dir = sp->work_dir,
                .init_path = sp->init_path,
                .bundle_path = b->bundle->path, .log_path = b->bundle->log_path,
                .in_fd = in[0], .out_fd = art[1], .err_fd = lg[1],
                .egress_fds = b->egress.pid > 0 ? b->egress.inside : NULL,
                .n_egress_fds = b->egress.pid > 0 ? CAPSULE_EGRESS_STREAMS : 0,
        };
        r = ops->spawn(driver, &sp_run, &b->runsc_pid);
        /* The sandbox holds them now (or never will): the proxy sees their end with it. */
        egress_proxy_close_inside(&b->egress);
        in[0] = safe_close(in[0]);
        art[1] = safe_close(art[1]);
        lg[1] = safe_close(lg[1]);
        if (r < 0) {
                boot_fail(res, "runtime_failed", "cannot start %s: %s", ops->name, strerror(-r));
                goto fail;
        }
        b->started = true;
        /* Our child, not reaped before this: the pidfd can only ever name it. */
        b->pidfd = pidfd_open_pid(b->runsc_pid);
        if (b->pidfd < 0)
                b->pidfd = -EBADF;
        b->in_w = TAKE_FD(in[1]);
        b->art_r = TAKE_FD(art[0]);
        b->log_r = TAKE_FD(lg[0]);
        if (b->listener && (r = seccomp_listen_start(b->listener, b->runsc_pid)) < 0) {
                boot_fail(res, "capsule_setup", "cannot start the seccomp listener: %s", strerror(-r));
                return r;
        }
        return 0;
fail:
        safe_close(in[0]);
        safe_close(in[1]);
        safe_close(art[0]);
        safe_close(art[1]);
        safe_close(lg[0]);
        safe_close(lg[1]);
        return r < 0 ? r : -EIO;
}

/* The job record a warm capsule's init waits for (capsule/protocol.h): id, argv, the whole
 * environment the job gets, in the order a cold capsule's spec gives it (capsule/oci-spec.c):
 * the constant variables, the proxy's with egress, the caller's. */
static int write_job_record(int fd, const CapsuleJobParams *p) {
        _cleanup_free_ char *job_env = NULL, *check_env = NULL;
        _cleanup_free_ uint8_t *rec = NULL;
        size_t n = 0, cap = 1 + 4, argc = 0, envc = 0;

        if (asprintf(&job_env, "TENTAFLAKE_JOB=%s", p->job_id) < 0 ||
            (p->check && asprintf(&check_env, "TENTAFLAKE_CHECK=%s", p->check) < 0))
                return -ENOMEM;
        const char *fixed[] = { CAPSULE_ENV_PATH, CAPSULE_ENV_HOME, CAPSULE_ENV_TMPDIR, CAPSULE_ENV_LANG,
                                job_env, p->check ? CAPSULE_ENV_CI : NULL, check_env };
        cap += strlen(p->job_id) + 1 + 2 + 2 + 1;
        for (char *const *a = p->argv; *a; a++, argc++)
                cap += strlen(*a) + 1;
        for (size_t i = 0; i < ELEMENTSOF(fixed); i++)
                if (fixed[i]) {
                        cap += strlen(fixed[i]) + 1;
                        envc++;
                }
        bool egress = capsule_config_egress(p->config);
        for (const char *const *v = capsule_egress_env; egress && *v; v++, envc++)
                cap += strlen(*v) + 1;
        for (char *const *v = p->extra_env; v && *v; v++, envc++)
                cap += strlen(*v) + 1;
        if (cap > CAPSULE_JOB_RECORD_MAX || argc > UINT16_MAX || envc > UINT16_MAX)
                return -E2BIG;
        rec = malloc(cap);
        if (!rec)
                return -ENOMEM;
#define PUT_STR(str) do { size_t _l = strlen(str) + 1; memcpy(rec + n, (str), _l); n += _l; } while (0)
        rec[n++] = CAPSULE_JOB_RECORD;
        n += 4; /* the length, below */
        PUT_STR(p->job_id);
        rec[n++] = (uint8_t) (argc & 0xff);
        rec[n++] = (uint8_t) (argc >> 8);
        for (char *const *a = p->argv; *a; a++)
                PUT_STR(*a);
        rec[n++] = (uint8_t) (envc & 0xff);
        rec[n++] = (uint8_t) (envc >> 8);
        for (size_t i = 0; i < ELEMENTSOF(fixed); i++)
                if (fixed[i])
                        PUT_STR(fixed[i]);
        for (const char *const *v = capsule_egress_env; egress && *v; v++)
                PUT_STR(*v);
        for (char *const *v = p->extra_env; v && *v; v++)
                PUT_STR(*v);
#undef PUT_STR
        uint32_t len = (uint32_t) (n - 5);
        for (unsigned i = 0; i < 4; i++)
                rec[1 + i] = (uint8_t) (len >> (8 * i));
        return write_all(fd, rec, n);
}

/* Give a warm capsule its job (capsule/protocol.h): the record, init's answer, then the input
 * byte. 0: taken. Negative: not, with res saying why, the capsule killed and runsc reaped;
 * res->warm_lost when init never took it (nothing of the job can have started). */
static int give_job(Run *run, Boot *boot, const uint8_t *prelude, size_t prelude_len, CapsuleResult *res) {
        PreAck pre = { .run = run };
        JobAckScanner ack;
        int a;

        int r = write_job_record(boot->in_w, run->p);
        if (r < 0 && r != -EPIPE) {
                boot_fail(res, "capsule_setup", "cannot pass the job to its capsule: %s", strerror(-r));
                goto fail;
        }
        /* EPIPE: nothing reads the channel any more, init is gone. */
        job_ack_scanner_init(&ack, run->secret + CAPSULE_TOKEN_SIZE, pre_ack_sink, &pre);
        a = r < 0 ? 0 : await_job_ack(&ack, boot->log_r, now_monotonic() + JOB_ACK_USEC);
        if (a == -ETIMEDOUT) {
                /* Ended here; whether init took the job is what the channel holds up to its end. */
                kill_capsule(run, boot->cg, 1);
                a = await_job_ack(&ack, boot->log_r, now_monotonic() + DRAIN_GRACE_USEC);
                if (a != 0) {
                        job_ack_scanner_flush(&ack);
                        boot_fail(res, "runtime_failed",
                                  "the capsule started ahead did not answer the job record within %llu s",
                                  (unsigned long long) (JOB_ACK_USEC / USEC_PER_SEC));
                        goto fail;
                }
        }
        if (a == 0) {
                /* Its init never read the job: nothing of it ran, no input was sent, and the
                 * caller may run it in a capsule of its own. */
                boot_fail(res, "warm_lost", "the capsule started ahead ended before it took the job%s%s",
                          pre.n ? ": " : "", pre.text);
                res->warm_lost = true;
                goto fail;
        }
        if (a < 0) {
                boot_fail(res, "capsule_setup", "cannot read the capsule's answer to the job: %s", strerror(-a));
                goto fail;
        }
        /* Taken: only now the input, so an init that never answered has nothing to start a
         * job on. */
        r = write_all(boot->in_w, prelude, prelude_len);
        if (r < 0) {
                boot_fail(res, r == -EPIPE ? "runtime_failed" : "capsule_setup",
                          "cannot pass the input to its capsule: %s", strerror(-r));
                goto fail;
        }
        return 0;
fail:
        end_runsc(run, boot->cg);
        return -EIO;
}

int capsule_warm_start(const CapsuleWarmParams *p, CapsuleWarm **ret, TfwError *e) {
        char *const argv[] = { (char *) CAPSULE_WARM_ARG, NULL };
        CapsuleResult res = {};

        if (!p || !p->config || !p->driver || !p->driver->ops || !p->driver->ops->boots_ahead ||
            !p->warm_id || !capsule_job_id_is_valid(p->warm_id) || !p->init_path || !p->scratch_path)
                return tfw_error(e, EINVAL, "bad_capsule_spec", "invalid warm capsule parameters");
        CapsuleWarm *w = calloc(1, sizeof(*w));
        if (!w)
                return tfw_error(e, ENOMEM, "out_of_memory", "out of memory");
        w->driver = p->driver;
        w->config = p->config;
        w->limits = p->config->limits;
        snprintf(w->warm_id, sizeof(w->warm_id), "%s", p->warm_id);
        if ((p->snapshot_dir && !(w->snapshot_dir = strdup(p->snapshot_dir))) ||
            (p->work_dir && !(w->work_dir = strdup(p->work_dir)))) {
                free(w->snapshot_dir);
                free(w);
                return tfw_error(e, ENOMEM, "out_of_memory", "out of memory");
        }
        CapsuleSpecParams sp = {
                .config = p->config,
                .job_id = p->warm_id,
                .argv = argv,
                .warm = true,
                .timeout_seconds = 1,
                .init_path = p->init_path,
                .snapshot_dir = p->snapshot_dir,
                .work_dir = p->work_dir,
                .cache_paths = p->work_dir && p->cache_dir ? p->cache_paths : NULL,
                .cache_dir = p->work_dir ? p->cache_dir : NULL,
        };
        w->binds_cache = sp.cache_paths != NULL;
        w->egress = capsule_config_egress(p->config);
        int r = boot_capsule(p->config, p->driver, p->scratch_fd, p->scratch_path, p->warm_id, &sp, true, NULL, 0,
                             &w->boot, &res, true);
        if (r < 0) {
                (void) boot_destroy(&w->boot, p->driver, NULL, 0, NULL);
                free(w->snapshot_dir);
                free(w->work_dir);
                free(w);
                return tfw_error(e, -r, res.reason ? res.reason : "capsule_setup", "warm capsule: %s", res.message);
        }
        *ret = w;
        return 0;
}

/* An unused capsule (its init still waits for a job) ended, each step bounded: its front
 * process killed by its pid and reaped (boot_end_front), the rest of the container torn down
 * (capsule/teardown.h; a failure is tried once more), then its cgroup, runsc's record and its
 * bundle (boot_destroy). The first failure is reported, the later steps run all the same. */
static int warm_end(CapsuleWarm *w, TfwError *e) {
        Boot *b = &w->boot;
        const CapsuleDriver *d = w->driver;
        TfwError fe = {0}, te = {0}, de = {0};
        int rf = 0, rt = 0, rd;
        unsigned tries = 0;

        if (b->started) {
                rf = boot_end_front(b, d, &fe);
                /* The cgroup stays until boot_destroy: removed once, after the front is gone. */
                do {
                        tfw_error_clear(&te);
                        rt = d->ops->teardown(d, b->id, CAPSULE_TEARDOWN_KEEP_CGROUP, NULL, &te);
                        tries++;
                } while (rt < 0 && tries < CAPSULE_WARM_TEARDOWN_TRIES);
        }
        _cleanup_free_ char *id = strdup(b->id ? b->id : w->warm_id);
        rd = boot_destroy(b, d, NULL, 0, &de);
        const char *name = id ? id : w->warm_id;
        if (rf < 0)
                return tfw_error(e, fe.error, "teardown",
                                 "capsule '%s' (started ahead): %s; left for the next start's cleanup", name, fe.message);
        if (rt < 0)
                return tfw_error(e, te.error, "teardown",
                                 "capsule '%s' (started ahead): %u teardowns failed, the last: %s; left for the next "
                                 "start's cleanup", name, tries, te.message);
        if (rd < 0)
                return tfw_error(e, de.error, "teardown",
                                 "capsule '%s' (started ahead): %s; left for the next start's cleanup", name, de.message);
        return 0;
}

int capsule_warm_end(CapsuleWarm *w, TfwError *e) {
        if (!w)
                return 0;
        int r = warm_end(w, e);
        free(w->snapshot_dir);
        free(w->work_dir);
        free(w);
        return r;
}

void capsule_warm_free(CapsuleWarm *w) {
        (void) capsule_warm_end(w, NULL);
}

bool capsule_warm_alive(CapsuleWarm *w) {
        int st;
        if (!w || !w->boot.started)
                return false;
        if (w->boot.runsc_pid <= 0)
                return false;
        pid_t r = waitpid(w->boot.runsc_pid, &st, WNOHANG);
        if (r == w->boot.runsc_pid) {
                /* Reaped here: capsule_warm_end must not wait for it or signal it again. */
                w->boot.runsc_pid = -1;
                w->boot.pidfd = safe_close(w->boot.pidfd);
                return false;
        }
        return r == 0;
}

const char *capsule_warm_snapshot_dir(const CapsuleWarm *w) {
        return w ? w->snapshot_dir : NULL;
}

const char *capsule_warm_work_dir(const CapsuleWarm *w) {
        return w ? w->work_dir : NULL;
}

bool capsule_warm_binds_cache(const CapsuleWarm *w) {
        return w && w->binds_cache;
}

const char *capsule_warm_container(const CapsuleWarm *w) {
        return w ? w->boot.id : NULL;
}

const char *capsule_warm_id(const CapsuleWarm *w) {
        return w ? w->warm_id : NULL;
}

bool capsule_warm_fits(const CapsuleWarm *w, const Config *config) {
        const ConfigLimits *a = &w->limits, *b = &config->limits;
        /* The allowlist is the worker's: a job has it or has no network (serve's policies). */
        return (w->egress == capsule_config_egress(config) && a->memory == b->memory &&
                a->memory_swap == b->memory_swap && a->pids == b->pids && a->cpus_milli == b->cpus_milli && a->workspace_tmpfs == b->workspace_tmpfs &&
                a->tmp_tmpfs == b->tmp_tmpfs && a->open_files == b->open_files && a->file_size == b->file_size);
}

/* ---- one job, step by step (capsule_run_job) ------------------------------------------- */

/* What the steps of one job share, from its parameters to its result. Lives on
 * capsule_run_job's stack: run.res points into it. */
typedef struct Job {
        const CapsuleJobParams *p;
        uint8_t *buf;
        LogCap *log;
        CapsuleResult res;
        CapsuleEnding end;
        Boot boot;
        Feeder feeder;
        Run run;
        /* What follows the secret (a warm capsule: the job record): the outputs' bounds, the
         * cache record, then the input's kind (CAPSULE_INPUT_STREAM, _MOUNTED or _BOUND). */
        uint8_t prelude[1 + CAPSULE_BOUNDS_SIZE + 2 + 12 + CAPSULE_CACHE_PATHS_MAX * (2 + CAPSULE_CACHE_PATH_MAX) +
                        3 + CAPSULE_CWD_MAX + 1 + CAPSULE_CHANGES_RECORD_SIZE + 1];
        size_t prelude_len;
        char runsc_error[512];
        sigset_t pipe_set, old_set;
        usec_t t0;
} Job;

/* The bounds record, the cache record, the cwd record (capsule/protocol.h) and the input's
 * kind. */
static int job_prelude(Job *j) {
        const CapsuleJobParams *p = j->p;
        uint8_t *b = j->prelude;
        size_t n = 0;
        /* The importers' bounds (outputs_setup), so init ends a stream they would refuse
         * before it reads it. */
        CapsuleBounds bounds = {
                .art_bytes = p->config->limits.max_artifact_bytes,
                .art_entries = p->config->limits.max_artifact_entries,
                .cache_bytes = p->cache_max_bytes,
                .cache_entries = p->cache_max_entries,
        };
        b[n++] = CAPSULE_BOUNDS_RECORD;
        capsule_bounds_put(&bounds, b + n);
        n += CAPSULE_BOUNDS_SIZE;
        if (p->cache_paths) {
                size_t k = 0;
                while (p->cache_paths[k])
                        k++;
                if (k == 0 || k > CAPSULE_CACHE_PATHS_MAX)
                        return -EINVAL;
                b[n++] = CAPSULE_CACHE_RECORD;
                b[n++] = (uint8_t) k;
                if (p->cache_version > CAPSULE_CACHE_VERSION_MAX)
                        return -EINVAL;
                for (int i = 0; i < 8; i++)
                        b[n++] = (uint8_t) (p->cache_version >> (8 * i));
                for (size_t i = 0; i < k; i++) {
                        size_t len = strlen(p->cache_paths[i]);
                        if (len == 0 || len > CAPSULE_CACHE_PATH_MAX)
                                return -EINVAL;
                        b[n++] = (uint8_t) len;
                        b[n++] = (uint8_t) (len >> 8);
                        memcpy(b + n, p->cache_paths[i], len);
                        n += len;
                }
        }
        if (p->cwd) {
                size_t len = strlen(p->cwd);
                if (len == 0 || len > CAPSULE_CWD_MAX)
                        return -EINVAL;
                b[n++] = CAPSULE_CWD_RECORD;
                b[n++] = (uint8_t) len;
                b[n++] = (uint8_t) (len >> 8);
                memcpy(b + n, p->cwd, len);
                n += len;
        }
        if (wants_changes(p)) {
                b[n++] = CAPSULE_CHANGES_RECORD;
                snapshot_stream_put_le(b + n, p->changes_max_bytes, 8);
                snapshot_stream_put_le(b + n + 8, p->changes_max_entries, 8);
                n += CAPSULE_CHANGES_RECORD_SIZE;
        }
        b[n++] = p->input ? CAPSULE_INPUT_STREAM : p->work_dir ? CAPSULE_INPUT_BOUND : CAPSULE_INPUT_MOUNTED;
        j->prelude_len = n;
        return 0;
}

static void cache_error(CapsuleResult *res, const char *code, const char *fmt, ...) _printf_(3, 4);
static void cache_error(CapsuleResult *res, const char *code, const char *fmt, ...) {
        va_list ap;
        if (res->cache_error_code)
                return;
        res->cache_error_code = code;
        va_start(ap, fmt);
        vsnprintf(res->cache_error, sizeof(res->cache_error), fmt, ap);
        va_end(ap);
}

/* The cache may be kept only when its importer took it whole, init vouched for it in the
 * trailer (which only init can write, after the job is dead), and the job ended by itself. */
static void cache_verdict(Job *j, bool whole) {
        CapsuleResult *res = &j->res;
        const OutputSink *s = &j->run.out.cache;
        if (s->error_code)
                cache_error(res, s->error_code, "%s", s->error);
        else if (!j->end.have_trailer)
                cache_error(res, "cache_not_vouched", "the capsule ended without its status: nothing of the cache is kept");
        else if (!j->end.trailer.cache_ok)
                cache_error(res, "cache_stream_failed", "the capsule could not send the whole cache");
        else if (res->status != CAPSULE_SUCCEEDED && res->status != CAPSULE_FAILED)
                cache_error(res, "cache_job_ended", "the job ended %s%s%s: nothing of the cache is kept",
                            capsule_status_to_string(res->status), res->reason ? ", " : "", res->reason ? res->reason : "");
        res->cache_whole = whole && !res->cache_error_code;
}

static void changes_verdict(Job *j) {
        CapsuleResult *res = &j->res;
        const OutputSink *s = &j->run.out.changes;
        const char *code = s->error_code;
        if (!code && !j->end.have_trailer)
                code = "changes_not_vouched"; /* init did not end its work: the stream is not its whole */
        if (code) {
                res->changes_error_code = code;
                snprintf(res->changes_error, sizeof(res->changes_error), "%s",
                         s->error_code ? s->error : "the capsule ended without its status: its changes are not taken");
        }
        res->changes_imported = !res->changes_error_code;
}

static bool job_params_valid(const CapsuleJobParams *p) {
        return p && p->config && p->driver && p->driver->ops && p->job_id && capsule_job_id_is_valid(p->job_id) &&
               p->argv && p->argv[0] && p->timeout_seconds != 0 &&
               (!!p->snapshot_dir + !!p->input + !!p->work_dir) == 1 &&
               (!p->work_dir || p->driver->ops->binds_generations) && p->init_path && p->scratch_path &&
               (!p->cache_paths || (p->work_dir && p->cache_dir)) &&
               (!p->warm || (streq_ptr(p->snapshot_dir, p->warm->snapshot_dir) &&
                             streq_ptr(p->work_dir, p->warm->work_dir) &&
                             !!p->cache_paths == p->warm->binds_cache &&
                             p->warm->egress == capsule_config_egress(p->config)));
}

/* Step 1: SIGPIPE held, what the ending is judged against, the warm capsule taken over (every
 * wall in place, ours alone from here on), the buffers. */
static int job_begin(Job *j) {
        const CapsuleJobParams *p = j->p;
        int r;

        sigemptyset(&j->pipe_set);
        sigaddset(&j->pipe_set, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &j->pipe_set, &j->old_set);

        j->res.started_at = now_realtime();
        j->end.timeout_seconds = p->timeout_seconds;
        j->end.output_bytes = p->config->limits.max_log_bytes;
        j->end.cpu_seconds = p->cpu_seconds;
        j->end.memory = p->config->limits.memory;
        j->end.pids = p->config->limits.pids;
        j->end.argv0 = p->argv[0];
        j->end.cwd = p->cwd;

        if (p->warm) {
                j->boot = p->warm->boot;
                p->warm->boot = boot_empty();
        }
        j->buf = malloc(2 * CHUNK);
        r = j->buf ? log_cap_new(p->config->limits.max_log_bytes, &j->log) : -ENOMEM;
        if (r < 0) {
                boot_fail(&j->res, "capsule_setup", "cannot prepare job '%s': %s", p->job_id, strerror(-r));
                return r;
        }
        j->run.pending = j->buf;
        j->run.log = j->log;
        j->run.live = (LogLive) {.fd = p->live_fd};
        return 0;
}

/* Step 2, for a job without a warm capsule: the caller's gate, then cgroup, bundle, channels
 * and runsc (boot_capsule), then the gate again. */
static int job_boot_cold(Job *j) {
        const CapsuleJobParams *p = j->p;

        if (p->warm)
                return 0;
        CapsuleSpecParams sp = {
                .config = p->config,
                .job_id = p->job_id,
                .argv = p->argv,
                .extra_env = p->extra_env,
                .check = p->check,
                .timeout_seconds = p->timeout_seconds,
                .snapshot_dir = p->snapshot_dir,
                .work_dir = p->work_dir,
                .cache_paths = p->cache_paths,
                .cache_dir = p->cache_dir,
                .init_path = p->init_path,
        };
        if (p->gate && p->gate(p->gate_userdata, false, -EBADF) < 0) {
                j->res.status = CAPSULE_ERROR;
                j->res.reason = "cancelled";
                set_msg(&j->res, "cancelled before the capsule started");
                return -ECANCELED;
        }
        if (boot_capsule(p->config, p->driver, p->scratch_fd, p->scratch_path, p->job_id, &sp, false,
                         j->prelude, j->prelude_len, &j->boot, &j->res, false) < 0) {
                j->end.started = j->boot.started;
                return -EIO;
        }
        /* Cancelled while it was being started: the gate ended the container, and the front
         * process is killed here by its pid as well (it may not have exec'd runsc yet: then
         * nothing names the container). The run below sees it end like any killed capsule. */
        if (p->gate && p->gate(p->gate_userdata, true, j->boot.pidfd) < 0)
                p->driver->ops->kill(p->driver, j->boot.id, j->boot.runsc_pid, j->boot.cg, 1);
        return 0;
}

/* Step 3: the capsule's channels to the event loop; a warm capsule gets the job only now and
 * only here, after the secret, on the channel only the worker can write (threat 12); the input
 * thread starts streaming. */
static int job_hand_over(Job *j) {
        const CapsuleJobParams *p = j->p;
        Run *run = &j->run;
        int r;

        j->end.started = j->boot.started;
        run->cid = j->boot.id;
        memcpy(run->secret, j->boot.secret, sizeof(run->secret));
        /* The run waits for and reaps the front process from here on (end_runsc). */
        run->runsc_pid = j->boot.runsc_pid;
        run->pidfd = TAKE_FD(j->boot.pidfd);
        j->boot.runsc_pid = -1;
        outputs_setup(run);
        trailer_splitter_init(&run->splitter, run->secret + CAPSULE_TOKEN_SIZE, log_sink, run);

        j->t0 = now_monotonic();
        j->res.started_at = now_realtime();
        if (j->boot.warm && p->gate && p->gate(p->gate_userdata, true, run->pidfd) < 0) {
                /* Cancelled since the caller registered it: no job is given, it ends now. */
                boot_fail(&j->res, "cancelled", "cancelled before the capsule took the job");
                end_runsc(run, j->boot.cg);
                return -ECANCELED;
        }
        if (j->boot.warm) {
                if (j->boot.cg)
                        (void) cgroup_job_set_cpu_weight(j->boot.cg, false);
                if (p->cpu_seconds && j->boot.cg)
                        (void) cgroup_job_cpu_usage(j->boot.cg, &run->cpu_base);
                if (give_job(run, &j->boot, j->prelude, j->prelude_len, &j->res) < 0)
                        return -EIO;
        }
        /* Once the input is written whole, the same channel carries the stop records
         * (capsule/protocol.h): the input thread hands it over when it is done. */
        if (p->input) {
                j->feeder.fn = p->input;
                j->feeder.userdata = p->input_userdata;
                j->feeder.out = &run->out;
                j->feeder.fd = TAKE_FD(j->boot.in_w);
                r = feeder_start(&j->feeder);
                if (r < 0) {
                        j->feeder.fd = safe_close(j->feeder.fd);
                        boot_fail(&j->res, "capsule_setup", "cannot start the input thread: %s", strerror(-r));
                        end_runsc(run, j->boot.cg);
                        return r;
                }
        } else
                outputs_set_control(&run->out, TAKE_FD(j->boot.in_w));
        run->art_r = TAKE_FD(j->boot.art_r);
        run->log_r = TAKE_FD(j->boot.log_r);
        (void) fcntl(run->art_r, F_SETFL, O_NONBLOCK);
        (void) fcntl(run->log_r, F_SETFL, O_NONBLOCK);
        return 0;
}

/* Step 4: the event loop until the capsule ends, then what ended it: the limits checked once
 * more, the times, init's trailer, the kernel's record of limit kills (read before the cgroup
 * goes), runsc's error, classified (capsule/status.c). */
static void job_wait(Job *j) {
        const CapsuleJobParams *p = j->p;
        Run *run = &j->run;
        CgroupJob *cg = j->boot.cg;

        event_loop(run, cg);
        end_runsc(run, cg);
        /* The sandbox is gone and with it the capsule's ends of the streams: the proxy writes
         * its last records and ends. */
        egress_proxy_finish(&j->boot.egress, p->egress_log_fd, &j->res.egress);
        /* ... and every process of its filter: what the listener counted is whole. */
        seccomp_listen_finish(j->boot.listener, &j->res.seccomp_walls);
        j->boot.listener = NULL;
        /* A job that went past a limit between two checks and then ended by itself was not
         * within it either. */
        const ConfigLimits *l = &p->config->limits;
        if (p->end_on_log_limit && !run_cut(run) && log_cap_seen(j->log) > l->max_log_bytes)
                run->output_exceeded = true;
        if (p->cpu_seconds && cg && !run_cut(run) && !capsule_test_cpu_usage_hook) {
                uint64_t used;
                if (cgroup_job_cpu_usage(cg, &used) >= 0 && used - MIN(used, run->cpu_base) >= p->cpu_seconds * USEC_PER_SEC)
                        run->cpu_exceeded = true;
        }
        j->res.finished_at = now_realtime();
        j->res.duration_ms = (now_monotonic() - j->t0) / USEC_PER_MSEC;
        j->res.runsc_status = run->runsc_status;

        j->end.have_trailer = trailer_splitter_finish(&run->splitter, &j->end.trailer);
        if (cg) {
                (void) cgroup_job_events(cg, &j->res.events);
                if (cgroup_job_peak_memory(cg, &j->res.peak_memory_bytes) >= 0)
                        j->res.have_peak_memory = true;
        }
        else if (!j->end.have_trailer && p->driver->ops->oom_killed(p->driver, j->boot.id) > 0)
                j->res.events.oom_kills = 1; /* the engine's record of the kernel's kill; asked
                                              * only when init did not report (a host OOM kill
                                              * takes the whole sandbox) */
        j->end.runsc_status = run->runsc_status;
        j->end.timed_out = run->timed_out;
        j->end.output_exceeded = run->output_exceeded;
        j->end.cpu_exceeded = run->cpu_exceeded;
        j->end.cpu_unreadable = run->cpu_unreadable;
        j->end.cpu_error = run->cpu_error;
        j->end.events = j->res.events;
        capsule_bundle_runsc_error(j->boot.bundle, j->runsc_error, sizeof(j->runsc_error));
        j->end.runsc_error = j->runsc_error;
        j->end.runtime = j->p->driver->ops->name;
        capsule_classify(&j->end, &j->res);
}

/* Step 5, after every ending: step 4 of the contract (the container, its cgroup and its
 * bundle, always), the input thread joined, the artifacts' verdict, job.log. */
static void job_end(Job *j) {
        const CapsuleJobParams *p = j->p;
        Run *run = &j->run;
        int r;

        safe_close(run->art_r);
        safe_close(run->log_r);
        outputs_end(&run->out);
        safe_close(run->pidfd);
        if (run->runsc_lost) {
                /* The worker could not end its capsule: whatever the job did, this is the
                 * worker's fault (not a capsule to run it again cold in), and what is left goes at
                 * the next start (threat 13). */
                boot_fail(&j->res, "runtime_failed",
                          "%s (pid %d) of container '%s' did not end after SIGKILL and its teardown; it is "
                          "left for the next start's cleanup", p->driver->ops->name, (int) run->runsc_pid, run->cid);
                j->res.warm_lost = false;
        }

        /* What could not be removed is left to the next start's cleanup (nothing of it runs: the
         * front process was ended by end_runsc, the rest killed through the cgroup). */
        (void) boot_destroy(&j->boot, p->driver, p->defer_record ? j->res.record : NULL, sizeof(j->res.record), NULL);
        /* Every process of the capsule is gone, so is the channel's reader: the feeder's next
         * write fails if it had not finished. */
        feeder_join(&j->feeder);

        /* The artifacts and the cache: the importers' verdicts, or why there was no stream. */
        j->res.artifact_junk_bytes = outputs_junk_bytes(&run->out);
        bool cache_whole = outputs_finish(&run->out, &j->res.artifacts, &j->res.cache, &j->res.changes);
        if (run->out.changes_on)
                changes_verdict(j);
        if (run->out.art.error_code)
                art_error(run, run->out.art.error_code, "%s", run->out.art.error);
        else if (!run->out.found && j->end.started && p->staging_fd >= 0)
                art_error(run, "no_artifact_stream", "the capsule ended before it sent its artifacts");
        else if (j->end.have_trailer && !j->end.trailer.artifacts_ok)
                art_error(run, "artifact_stream_failed", "the capsule could not write all of /work/artifacts");
        if (p->cache_paths)
                cache_verdict(j, cache_whole);
        j->res.artifacts_ok = !j->res.artifacts_error_code;

        if (j->log) {
                j->res.log_bytes = log_cap_seen(j->log);
                j->res.log_truncated = log_cap_truncated(j->log);
                j->res.log_file_bytes = log_cap_size(j->log);
                if (p->log_fd >= 0 && (r = rewrite_log(j->log, p->log_fd)) < 0 &&
                    j->res.status != CAPSULE_ERROR) {
                        j->res.status = CAPSULE_ERROR;
                        j->res.reason = "capsule_setup";
                        set_msg(&j->res, "cannot write job.log: %s", strerror(-r));
                }
        }
        if (!j->res.finished_at)
                j->res.finished_at = now_realtime();
        capsule_walls_collect(p, &j->end, &j->res);

        /* A SIGPIPE raised while the importer went away must not outlive the mask. */
        struct timespec zero = {};
        while (sigtimedwait(&j->pipe_set, NULL, &zero) > 0)
                ;
        pthread_sigmask(SIG_SETMASK, &j->old_set, NULL);
        explicit_bzero(run->secret, sizeof(run->secret));
        if (p->warm) {
                /* Served its one job: what is left of it is freed here. */
                free(p->warm->snapshot_dir);
                free(p->warm->work_dir);
                free(p->warm);
        }
        log_cap_free(j->log);
        free(j->buf);
}

int capsule_run_job(const CapsuleJobParams *p, CapsuleResult *ret, TfwError *e) {
        if (!job_params_valid(p))
                return tfw_error(e, EINVAL, "bad_capsule_spec", "invalid job parameters");

        Job j = {
                .p = p,
                .res = { .exit_code = -1, .runsc_status = -1 },
                .boot = boot_empty(),
                .feeder = { .fd = -EBADF, .lock = PTHREAD_MUTEX_INITIALIZER },
        };
        if (job_prelude(&j) < 0)
                return tfw_error(e, EINVAL, "bad_capsule_spec", "invalid cache paths");
        j.run = (Run) { .p = p, .res = &j.res, .log_r = -EBADF, .art_r = -EBADF, .pidfd = -EBADF };
        /* Until the capsule's secret is known (outputs_setup): no importer, no descriptor. */
        j.run.out.art = j.run.out.cache = j.run.out.changes = (OutputSink) { .staging_fd = -1, .w = -EBADF };
        j.run.out.ctl_fd = -EBADF;
        atomic_store(&j.run.out.ctl_handoff, -EBADF);

        usec_t t0 = now_monotonic(), t1 = 0, t2 = 0;
        if (job_begin(&j) >= 0 && job_boot_cold(&j) >= 0 && job_hand_over(&j) >= 0) {
                t1 = now_monotonic();
                job_wait(&j);
        }
        t2 = now_monotonic();
        job_end(&j);
        j.res.setup_usec = (t1 ? t1 : t2) - t0;
        j.res.run_usec = t1 ? t2 - t1 : 0;
        j.res.end_usec = now_monotonic() - t2;
        *ret = j.res;
        return 0;
}

void capsule_remove_record(const CapsuleDriver *d, char *cid) {
        if (!cid[0])
                return;
        (void) d->ops->remove(d, cid);
        cid[0] = 0;
}

int capsule_cleanup_stale(const Runsc *rt, int scratch_fd, unsigned *ret_removed, TfwError *e) {
        _cleanup_free_ char *group = NULL;
        _cleanup_free_ RunscOwnContainer *own = NULL;
        unsigned removed = 0, cg_removed = 0;
        size_t n_own = 0;
        int r;

        /* First what the root's files say is ours, each ended whole with the bounded teardown
         * (threat 13): a predecessor SIGKILLed while a capsule booted can leave a `runsc run`
         * that hangs holding the container's lock (`runsc list` and `delete` would wait on it),
         * a creation cut half-way (no state file: runsc does not list it) with its sandbox and
         * gofer alive, or a stopped container. Its processes, its cgroup, runsc's record. */
        r = runsc_list_own(rt, NULL, &own, &n_own);
        if (r < 0)
                return tfw_error(e, -r, "runtime_unavailable", "cannot read the runsc root '%s': %s", rt->root,
                                 strerror(-r));
        for (size_t i = 0; i < n_own; i++) {
                TfwError te = {};
                if (capsule_teardown(rt, NULL, own[i].id, 0, NULL, &te) < 0)
                        return tfw_error(e, te.error ? te.error : EBUSY, "runtime_unavailable",
                                         "cannot remove stale container '%s' (%s): %s", own[i].id, own[i].state,
                                         te.message);
        }
        /* Then whatever runsc itself lists of ours (a root some other version of it laid out). */
        r = runsc_cleanup_stale(rt, &removed, e);
        if (r < 0)
                return r;
        removed += (unsigned) n_own;

        /* Bundles: a directory per container id in our private scratch. */
        _cleanup_closedir_ DIR *d = opendir_fd(scratch_fd);
        if (!d)
                return tfw_error(e, errno, "capsule_setup", "scratch: %s", strerror(errno));
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!capsule_container_id_is_workers(rt->worker_name, de->d_name))
                        continue;
                if (rm_rf_at(scratch_fd, de->d_name) >= 0)
                        removed++;
        }
        /* Every cgroup of this worker's group: none of its jobs runs yet. */
        if (cgroup_group_name(rt->worker_name, &group) >= 0)
                (void) cgroup_group_remove_stale(group, &cg_removed);
        removed += cg_removed;
        if (ret_removed)
                *ret_removed = removed;
        return 0;
}
