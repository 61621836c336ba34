/* SPDX-License-Identifier: MIT */
/* tentaflake-capsule-init: pid 1 of every capsule, running as the job's uid with no
 * capability. Static, so it runs in any root filesystem. See capsule/protocol.h and
 * docs/capsule.md for the channels and why the job can neither forge the artifact stream nor
 * the status.
 *
 *   tentaflake-capsule-init [--landlock] [--layer=UID:GID] [--egress|--egress-pass] -- ARGV...
 *   tentaflake-capsule-init [--landlock] [--layer=UID:GID] [--egress|--egress-pass] --warm
 *                                                  (started ahead: the job record comes on stdin)
 *   tentaflake-capsule-init --egress-probe ...     (doctor's probe, run as a job: egress-probe.c)
 *
 * 1. make itself non-dumpable, ignore every signal it can (a job of the same uid may signal
 *    pid 1), read the per-run secret from stdin (started ahead, --warm: then wait there for
 *    the job record, capsule/protocol.h);
 * 2. write the workspace stream that follows the secret into /work (snapshot/stream.h), or
 *    copy /snapshot into /work (a prepared tree: fd-relative, never following a symlink,
 *    without the host's ownership; files 0644 or 0755, directories 0755, symlinks recreated
 *    as symlinks); then put /dev/null on stdin;
 *    with --egress, listen on the proxy's loopback port and relay to the worker's proxy
 *    (egress-relay.c); with --egress-pass, hand each connection to the proxy instead;
 * 3. run ARGV in /work (PATH lookup, no shell) with stdin /dev/null and stdout+stderr on a pipe
 *    that init relays to its own stderr (the log channel), in batches (relay_pause); with
 *    --landlock, under a Landlock ruleset taken just before (landlock.c), or not at all;
 * 4. when ARGV's process ends, SIGKILL every other process (kill(-1)) and reap until none is
 *    left, then drain the relay;
 * 5. write the artifact token and a tar stream of /work/artifacts (regular files and
 *    directories only, opened with O_NOFOLLOW) to stdout (the artifact channel), and, when the
 *    host gave cache paths, a tar stream of what the job left there (out-channel.c), each ended
 *    early when it would pass the host's bounds or the host asks for no more of it
 *    (stop-records.c);
 * 6. write the status trailer to stderr and exit with the job's status (128+N for signal N). */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capsule/init-drop.h"
#include "capsule-init/init-internal.h"
#include "capsule-init/landlock.h"
#include "capsule/protocol.h"
#include "common/fd-util.h"
#include "snapshot/stream.h"
#include "common/macro.h"

/* The job's output pipe (the most an unprivileged F_SETPIPE_SZ may ask for), and the pause
 * between two turns of the relay that moved bytes (relay_pause). */
#define RELAY_PIPE_SIZE (1024 * 1024)
#define RELAY_BATCH_NSEC (1000 * 1000)

uint8_t secret[CAPSULE_SECRET_SIZE];
unsigned long long artifacts_skipped;
bool locale_set;
char *cache_paths[CAPSULE_CACHE_PATHS_MAX];
size_t n_cache_paths;
uint64_t cache_version;
CapsuleBounds bounds = { UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX };

void init_utf8_names(void) {
        if (!locale_set) {
                (void) setlocale(LC_CTYPE, "C.UTF-8");
                locale_set = true;
        }
}

void say(const char *fmt, ...) {
        char buf[1024];
        va_list ap;
        int n = snprintf(buf, sizeof(buf), PROG ": ");
        va_start(ap, fmt);
        n += vsnprintf(buf + n, sizeof(buf) - (size_t) n - 1, fmt, ap);
        va_end(ap);
        if (n > (int) sizeof(buf) - 2)
                n = (int) sizeof(buf) - 2;
        buf[n++] = '\n';
        (void) write_all(STDERR_FILENO, buf, (size_t) n);
}

/* The job shares our uid, so it may signal us: ignore everything that can be ignored.
 * SIGCHLD stays blocked and is read from a signalfd (ignoring it would auto-reap). */
static void ignore_signals(void) {
        struct sigaction sa = { .sa_handler = SIG_IGN };
        for (int s = 1; s < NSIG; s++)
                if (s != SIGKILL && s != SIGSTOP && s != SIGCHLD)
                        (void) sigaction(s, &sa, NULL);
}

static int read_secret(void) {
        size_t n = 0;
        while (n < sizeof(secret)) {
                ssize_t k = read(STDIN_FILENO, secret + n, sizeof(secret) - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? -errno : -EBADMSG;
                n += (size_t) k;
        }
        return 0;
}

/* The channel stays open in nobody's hands but ours until the input is read: replace it with
 * /dev/null before any job process exists. */
static int close_input(void) {
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null < 0)
                return -errno;
        if (dup2(null, STDIN_FILENO) < 0) {
                int r = -errno;
                close(null);
                return r;
        }
        close(null);
        return 0;
}

/* ---- step 2: snapshot -> /work ----------------------------------------------------------- */

static int copy_data(int in, int out) {
        static char buf[COPY_BUF];
        for (;;) {
                ssize_t k = read(in, buf, sizeof(buf));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return 0;
                int r = write_all(out, buf, (size_t) k);
                if (r < 0)
                        return r;
        }
}

static int copy_tree(int src, int dst, unsigned depth);

static int copy_entry(int src, int dst, const char *name, unsigned depth) {
        struct stat st;
        int r;

        if (fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (S_ISDIR(st.st_mode)) {
                if (mkdirat(dst, name, 0700) < 0 && errno != EEXIST)
                        return -errno;
                int s = openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (s < 0)
                        return -errno;
                int d = openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (d < 0) {
                        r = -errno;
                        close(s);
                        return r;
                }
                r = copy_tree(s, d, depth + 1);
                if (r >= 0 && fchmod(d, 0755) < 0)
                        r = -errno;
                if (r >= 0) {
                        struct timespec ts[2] = { st.st_atim, st.st_mtim };
                        (void) futimens(d, ts);
                }
                close(s);
                close(d);
                return r;
        }
        if (S_ISREG(st.st_mode)) {
                mode_t mode = (st.st_mode & S_IXUSR) ? 0755 : 0644;
                int s = openat(src, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
                if (s < 0)
                        return -errno;
                int d = openat(dst, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                               0600);
                if (d < 0) {
                        r = -errno;
                        close(s);
                        return r;
                }
                r = copy_data(s, d);
                if (r >= 0 && fchmod(d, mode) < 0)
                        r = -errno;
                if (r >= 0) {
                        struct timespec ts[2] = { st.st_atim, st.st_mtim };
                        (void) futimens(d, ts);
                }
                close(s);
                close(d);
                return r;
        }
        if (S_ISLNK(st.st_mode)) {
                char target[PATH_MAX];
                ssize_t n = readlinkat(src, name, target, sizeof(target) - 1);
                if (n < 0)
                        return -errno;
                target[n] = 0;
                /* A link is only a link inside the capsule; the job could make it anyway. */
                if (symlinkat(target, dst, name) < 0)
                        return -errno;
                return 0;
        }
        say("snapshot: skipping '%s' (not a file, directory or symlink)", name);
        artifacts_skipped++;
        return 0;
}

static int copy_tree(int src, int dst, unsigned depth) {
        int r = 0;

        if (depth > MAX_DEPTH)
                return -ELOOP;
        DIR *d = opendir_fd(src);
        if (!d)
                return -errno;
        struct dirent *de;
        while ((errno = 0, de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                r = copy_entry(src, dst, de->d_name, depth);
                if (r < 0) {
                        say("snapshot: cannot copy '%s': %s", de->d_name, strerror(-r));
                        break;
                }
        }
        if (r >= 0 && errno != 0)
                r = -errno;
        closedir(d);
        return r;
}

static int copy_snapshot(void) {
        int r;
        int src = open(CAPSULE_SNAPSHOT_PATH, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (src < 0)
                return -errno;
        int dst = open(CAPSULE_WORK_PATH, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dst < 0) {
                r = -errno;
                close(src);
                return r;
        }
        r = copy_tree(src, dst, 0);
        /* A place for artifacts, so `cp out artifacts/` works without a mkdir. */
        if (r >= 0 && mkdirat(dst, CAPSULE_ARTIFACTS_DIR, 0755) < 0 && errno != EEXIST)
                r = -errno;
        close(src);
        close(dst);
        return r;
}

/* ---- step 2, streamed: the workspace stream on stdin -> /work ---------------------------- */

/* What the host's snapshot walk read (snapshot/stream.h). The channel is the host's alone:
 * only it holds the write end, and this runs before any job process exists. It is still
 * parsed strictly: single-component names, a bounded depth, exact sizes. */

static uint8_t inbuf[256 * 1024];
static size_t in_off, in_len;

/* Refill the channel buffer when it is empty; -ECANCELED at the channel's end (the host
 * aborted). */
static int in_fill(void) {
        while (in_off == in_len) {
                ssize_t k = read(STDIN_FILENO, inbuf, sizeof(inbuf));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return -ECANCELED;
                in_off = 0;
                in_len = (size_t) k;
        }
        return 0;
}

/* Exactly n bytes from the channel; -ECANCELED at its end. */
static int in_read(void *dst, size_t n) {
        uint8_t *d = dst;
        while (n > 0) {
                int r = in_fill();
                if (r < 0)
                        return r;
                size_t m = MIN(n, in_len - in_off);
                memcpy(d, inbuf + in_off, m);
                in_off += m;
                d += m;
                n -= m;
        }
        return 0;
}

/* size bytes of file content from the channel into out. */
static int in_copy(int out, uint64_t size) {
        while (size > 0) {
                int r = in_fill();
                if (r < 0)
                        return r;
                size_t m = (size_t) MIN(size, (uint64_t) (in_len - in_off));
                r = write_all(out, inbuf + in_off, m);
                if (r < 0)
                        return r;
                in_off += m;
                size -= m;
        }
        return 0;
}

/* A record's name and flags; -ECANCELED for anything the host never sends. */
static int in_name(char name[static SNAPSHOT_STREAM_NAME_MAX + 1], uint8_t *ret_flags) {
        uint8_t h[2];
        int r = in_read(h, 2);
        if (r < 0)
                return r;
        size_t len = (size_t) snapshot_stream_get_le(h, 2);
        if (len == 0 || len > SNAPSHOT_STREAM_NAME_MAX)
                return -ECANCELED;
        r = in_read(name, len);
        if (r < 0)
                return r;
        name[len] = 0;
        if (memchr(name, '/', len) || memchr(name, 0, len) || streq(name, ".") || streq(name, ".."))
                return -ECANCELED;
        return in_read(ret_flags, 1);
}

/* -ECANCELED: the stream was aborted, ended early or malformed (nothing runs); another
 * negative errno: /work could not be written (ENOSPC: it does not fit). */
static int receive_stream(void) {
        static int fds[MAX_DEPTH + 2];
        char name[SNAPSHOT_STREAM_NAME_MAX + 1] = "";
        unsigned depth = 0;
        uint8_t tag, flags, sz[8];
        int r;

        fds[0] = open(CAPSULE_WORK_PATH, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fds[0] < 0)
                return -errno;
        /* The modes are given at creation: 0755 directories, 0644 or 0755 files. */
        mode_t old_umask = umask(0);
        for (;;) {
                r = in_read(&tag, 1);
                if (r < 0)
                        break;
                if (tag == SNAPSHOT_STREAM_END) {
                        r = depth == 0 ? 0 : -ECANCELED;
                        break;
                }
                if (tag == SNAPSHOT_STREAM_UP) {
                        if (depth == 0) {
                                r = -ECANCELED;
                                break;
                        }
                        close(fds[depth--]);
                        continue;
                }
                if (tag != SNAPSHOT_STREAM_DIR && tag != SNAPSHOT_STREAM_FILE) {
                        r = -ECANCELED; /* 'A', or anything else */
                        break;
                }
                if ((r = in_name(name, &flags)) < 0)
                        break;
                if (tag == SNAPSHOT_STREAM_DIR) {
                        if (depth + 1 > MAX_DEPTH + 1) {
                                r = -ECANCELED;
                                break;
                        }
                        if (mkdirat(fds[depth], name, 0755) < 0 && !(errno == EEXIST && streq(name, CAPSULE_ARTIFACTS_DIR))) {
                                r = -errno;
                                break;
                        }
                        int d = openat(fds[depth], name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (d < 0) {
                                r = -errno;
                                break;
                        }
                        fds[++depth] = d;
                        continue;
                }
                if ((r = in_read(sz, 8)) < 0)
                        break;
                int f = openat(fds[depth], name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                               (flags & SNAPSHOT_STREAM_EXEC) ? 0755 : 0644);
                if (f < 0) {
                        r = -errno;
                        break;
                }
                r = in_copy(f, snapshot_stream_get_le(sz, 8));
                close(f);
                if (r < 0)
                        break;
        }
        umask(old_umask);
        for (unsigned i = 0; i <= depth; i++)
                close(fds[i]);
        if (r < 0 && r != -ECANCELED)
                say("cannot write the workspace into " CAPSULE_WORK_PATH " at '%s': %s", name, strerror(-r));
        if (r >= 0) {
                int w = open(CAPSULE_WORK_PATH, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (w < 0)
                        return -errno;
                if (mkdirat(w, CAPSULE_ARTIFACTS_DIR, 0755) < 0 && errno != EEXIST)
                        r = -errno;
                close(w);
        }
        return r;
}

/* ---- a warm capsule: the job record (capsule/protocol.h) -------------------------------- */

/* The bounds of the outputs (capsule/protocol.h), when the host sends them: then *kind becomes
 * the byte that follows. */
static int read_bounds_record(uint8_t *kind) {
        uint8_t b[CAPSULE_BOUNDS_SIZE];
        if (*kind != CAPSULE_BOUNDS_RECORD)
                return 0;
        int r = in_read(b, sizeof(b));
        if (r < 0)
                return r;
        capsule_bounds_get(b, &bounds);
        return in_read(kind, 1);
}

/* The build cache's paths (capsule/protocol.h), when the host sends them: 1 when it did (and
 * *ret_kind is the input byte that follows), 0 when kind already is the input byte. */
static int read_cache_record(uint8_t *kind) {
        uint8_t n;
        if (*kind != CAPSULE_CACHE_RECORD)
                return 0;
        int r = in_read(&n, 1);
        if (r < 0)
                return r;
        if (n == 0 || n > CAPSULE_CACHE_PATHS_MAX)
                return -EBADMSG;
        uint8_t t[8];
        r = in_read(t, sizeof(t));
        if (r < 0)
                return r;
        cache_version = 0;
        for (int i = 0; i < 8; i++)
                cache_version |= (uint64_t) t[i] << (8 * i);
        if (cache_version > CAPSULE_CACHE_VERSION_MAX)
                return -EBADMSG;
        for (size_t i = 0; i < n; i++) {
                uint8_t l[2];
                r = in_read(l, 2);
                if (r < 0)
                        return r;
                size_t len = (size_t) l[0] | ((size_t) l[1] << 8);
                if (len == 0 || len > CAPSULE_CACHE_PATH_MAX)
                        return -EBADMSG;
                char *p = malloc(len + 1);
                if (!p)
                        return -ENOMEM;
                r = in_read(p, len);
                if (r < 0) {
                        free(p);
                        return r;
                }
                p[len] = 0;
                /* The host checked them; a path that would leave /work is refused anyway. */
                if (!capsule_cache_path_is_valid(p, len)) {
                        free(p);
                        return -EBADMSG;
                }
                cache_paths[n_cache_paths++] = p;
        }
        r = in_read(kind, 1);
        return r < 0 ? r : 1;
}

/* The job's working directory below /work (capsule/protocol.h), when the host sends it. */
static char job_cwd[CAPSULE_CWD_MAX + 1];

static int read_cwd_record(uint8_t *kind) {
        uint8_t l[2];
        if (*kind != CAPSULE_CWD_RECORD)
                return 0;
        int r = in_read(l, sizeof(l));
        if (r < 0)
                return r;
        size_t len = (size_t) l[0] | ((size_t) l[1] << 8);
        if (len == 0 || len > CAPSULE_CWD_MAX)
                return -EBADMSG;
        if ((r = in_read(job_cwd, len)) < 0)
                return r;
        job_cwd[len] = 0;
        if (memchr(job_cwd, 0, len))
                return -EBADMSG;
        return in_read(kind, 1);
}

uint64_t changes_max_bytes, changes_max_entries;

/* The changeset's bounds (capsule/protocol.h), when the host wants one. */
static int read_changes_record(uint8_t *kind) {
        uint8_t b[CAPSULE_CHANGES_RECORD_SIZE];
        if (*kind != CAPSULE_CHANGES_RECORD)
                return 0;
        int r = in_read(b, sizeof(b));
        if (r < 0)
                return r;
        changes_max_bytes = snapshot_stream_get_le(b, 8);
        changes_max_entries = snapshot_stream_get_le(b + 8, 8);
        return in_read(kind, 1);
}

/* Into /work/<cwd>, one component at a time, never through a link (open_work_dir): the job
 * starts there. */
static int enter_cwd(void) {
        if (!job_cwd[0])
                return 0;
        int fd = open_work_dir(job_cwd);
        if (fd < 0)
                return fd;
        int r = fchdir(fd) < 0 ? -errno : 0;
        close(fd);
        return r;
}

static char *rec_next(char **p, char *end) {
        char *s = *p, *z = s < end ? memchr(s, 0, (size_t) (end - s)) : NULL;
        if (!z)
                return NULL;
        *p = z + 1;
        return s;
}

/* Wait for the job: its argv and its whole environment. -ECANCELED when the channel ends first
 * (the worker discarded the capsule) or the record is malformed. */
static int read_job_record(char ***ret_argv, char ***ret_env) {
        uint8_t h[5];
        int r = in_read(h, sizeof(h));
        if (r < 0)
                return r;
        uint32_t len = (uint32_t) snapshot_stream_get_le(h + 1, 4);
        if (h[0] != CAPSULE_JOB_RECORD || len < 6 || len > CAPSULE_JOB_RECORD_MAX)
                return -ECANCELED;
        char *rec = malloc(len), *p = rec, *end = rec + len;
        if (!rec)
                return -ENOMEM;
        if ((r = in_read(rec, len)) < 0)
                return r;
        if (!rec_next(&p, end) || end - p < 2) /* the id: the environment carries it */
                return -ECANCELED;
        size_t argc = (size_t) snapshot_stream_get_le((uint8_t *) p, 2);
        p += 2;
        char **av = calloc(argc + 1, sizeof(char *));
        if (!av)
                return -ENOMEM;
        for (size_t i = 0; i < argc; i++)
                if (!(av[i] = rec_next(&p, end)))
                        return -ECANCELED;
        if (argc == 0 || end - p < 2)
                return -ECANCELED;
        size_t envc = (size_t) snapshot_stream_get_le((uint8_t *) p, 2);
        p += 2;
        char **ev = calloc(envc + 1, sizeof(char *));
        if (!ev)
                return -ENOMEM;
        for (size_t i = 0; i < envc; i++)
                if (!(ev[i] = rec_next(&p, end)) || !strchr(ev[i], '='))
                        return -ECANCELED;
        if (p != end)
                return -ECANCELED;
        *ret_argv = av;
        *ret_env = ev;
        return 0;
}

/* Taken: the answer the worker waits for before it sends the input (capsule/protocol.h). */
static int write_job_ack(void) {
        char hex[2 * CAPSULE_TOKEN_SIZE + 1], buf[sizeof(CAPSULE_JOB_ACK_TAG) + sizeof(hex) + 1];
        capsule_token_hex(secret + CAPSULE_TOKEN_SIZE, hex);
        int n = snprintf(buf, sizeof(buf), CAPSULE_JOB_ACK_TAG "%s\n", hex);
        if (n <= 0 || n >= (int) sizeof(buf))
                return -EINVAL;
        return write_all(STDERR_FILENO, buf, (size_t) n);
}

/* ---- step 3: run the job ---------------------------------------------------------------- */

/* Start argv with stdin /dev/null (ours), stdout and stderr on the relay, every other fd
 * closed, default signal dispositions and an empty mask. posix_spawn (clone with CLONE_VM
 * and CLONE_VFORK) rather than fork: under gVisor's ptrace platform a fork builds a new
 * address space for a child that only calls exec, measured at several milliseconds. */
static int spawn_job(char **argv, int relay_w, pid_t *ret_pid) {
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        sigset_t all, none;
        int r;

        sigfillset(&all);
        sigemptyset(&none);
        if ((r = posix_spawn_file_actions_init(&fa)) != 0)
                return -r;
        if ((r = posix_spawnattr_init(&attr)) != 0) {
                posix_spawn_file_actions_destroy(&fa);
                return -r;
        }
        if ((r = posix_spawn_file_actions_adddup2(&fa, relay_w, STDOUT_FILENO)) == 0 &&
            (r = posix_spawn_file_actions_adddup2(&fa, relay_w, STDERR_FILENO)) == 0 &&
            (r = posix_spawn_file_actions_addclosefrom_np(&fa, 3)) == 0 &&
            (r = posix_spawnattr_setsigdefault(&attr, &all)) == 0 &&
            (r = posix_spawnattr_setsigmask(&attr, &none)) == 0 &&
            (r = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK)) ==
                    0)
                r = posix_spawnp(ret_pid, argv[0], &fa, &attr, argv, environ);
        posix_spawnattr_destroy(&attr);
        posix_spawn_file_actions_destroy(&fa);
        return -r;
}

/* Move what the relay holds to the log channel, in writes of up to RELAY_PIPE_SIZE: the bytes
 * moved (0: the pipe was empty or is at its end, *open_ false then), or -errno. */
static ssize_t relay_some(int relay_r, bool *open_) {
        static char buf[RELAY_PIPE_SIZE];
        ssize_t moved = 0;
        for (;;) {
                ssize_t k = read(relay_r, buf, sizeof(buf));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return errno == EAGAIN ? moved : -errno;
                if (k == 0) {
                        *open_ = false;
                        return moved;
                }
                moved += k;
                /* A host that stopped reading makes this fail; the job keeps running and is
                 * ended by the timeout. */
                (void) write_all(STDERR_FILENO, buf, (size_t) k);
                if ((size_t) k < sizeof(buf))
                        return moved;
        }
}

/* After a turn that moved bytes, let the job's next writes gather in the pipe before the next
 * turn. In gVisor a job's write that wakes a reader costs several times one that does not: a
 * job printing 100 MB in 4 KiB writes took 4x its time with output discarded when init woke
 * at each write, 2x with this pause (docs/capsule.md, "Log channel"). The pause bounds what
 * it adds to the live output's latency; a pipe of RELAY_PIPE_SIZE holds what a fast writer
 * writes meanwhile. An idle job costs nothing: init waits in poll until its next write. */
static void relay_pause(void) {
        (void) nanosleep(&(struct timespec) { .tv_nsec = RELAY_BATCH_NSEC }, NULL);
}

typedef struct JobOutcome {
        int wstatus;
        const char *init_error;
        int error;
        bool work_full, tmp_full; /* left full by the job (note_full) */
} JobOutcome;

static void run_job(char **argv, JobOutcome *out) {
        sigset_t mask;
        int relay[2], sfd;
        pid_t pid;

        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        (void) sigprocmask(SIG_BLOCK, &mask, NULL);
        sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sfd < 0 || pipe2(relay, O_CLOEXEC) < 0) {
                out->init_error = CAPSULE_INIT_ERROR_SPAWN;
                out->error = errno;
                return;
        }
        int r = spawn_job(argv, relay[1], &pid);
        close(relay[1]);
        if (r < 0) {
                close(relay[0]);
                close(sfd);
                /* glibc reports a failed exec here (the child is gone). */
                bool exec_error = r == -ENOENT || r == -EACCES || r == -ENOEXEC ||
                                  r == -ENOTDIR || r == -ELOOP || r == -ENAMETOOLONG ||
                                  r == -ETXTBSY || r == -EISDIR || r == -E2BIG;
                say("cannot execute '%s': %s", argv[0], strerror(-r));
                out->init_error = exec_error ? CAPSULE_INIT_ERROR_EXEC : CAPSULE_INIT_ERROR_SPAWN;
                out->error = -r;
                return;
        }

        (void) fcntl(relay[0], F_SETFL, O_NONBLOCK);
        (void) fcntl(relay[0], F_SETPIPE_SZ, RELAY_PIPE_SIZE);
        bool relay_open = true, done = false;
        while (!done) {
                struct pollfd p[2] = { { .fd = sfd, .events = POLLIN },
                                       { .fd = relay[0], .events = POLLIN } };
                /* The timeout is a fallback: the job can open our signalfd through
                 * /proc/1/fd and steal the wake-ups. */
                int n = poll(p, relay_open ? 2 : 1, 1000);
                if (n < 0 && errno != EINTR)
                        break;
                if (relay_open && (p[1].revents & (POLLIN | POLLHUP | POLLERR)) &&
                    relay_some(relay[0], &relay_open) > 0)
                        relay_pause();
                if (p[0].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        while (read(sfd, &si, sizeof(si)) > 0)
                                ;
                }
                for (;;) {
                        int st;
                        pid_t w = waitpid(-1, &st, WNOHANG);
                        if (w <= 0)
                                break;
                        if (w == pid) {
                                out->wstatus = st;
                                done = true;
                        }
                }
        }

        /* Step 4: nothing of the job survives its main process. kill(-1) reaches every
         * process we may signal, that is every process of our uid but us; repeat until no
         * process is left, so one forked during the sweep is caught by the next. */
        for (;;) {
                int k = kill(-1, SIGKILL);
                int saved = errno;
                while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
                        ;
                if (k < 0 && saved == ESRCH)
                        break;
        }
        /* Every writer of the relay is dead now: drain it to its end. */
        (void) fcntl(relay[0], F_SETFL, 0);
        while (relay_open)
                if (relay_some(relay[0], &relay_open) < 0)
                        break;
        close(relay[0]);
        close(sfd);
}

/* ---- step 2, a generation: the job's layer (layer.c) ------------------------------------ */

/* With a generation, the overlays are mounted and root given up here, before anything of the
 * input is written and before any job process exists; a generation comes only with the layer,
 * and the layer only with a generation. */
static int take_layer(bool layer, uint8_t kind, uid_t uid, gid_t gid) {
        int r;
        if (layer != (kind == CAPSULE_INPUT_BOUND)) {
                say("the input (%c) does not match how init was started (%s)", kind,
                    layer ? "with the layer" : "without the layer");
                return -EPROTO;
        }
        if (!layer)
                return 0;
        if ((r = layer_mount()) < 0)
                return r;
        if ((r = capsule_init_drop(uid, gid)) < 0)
                say("cannot drop to uid %u gid %u: %s", (unsigned) uid, (unsigned) gid, strerror(-r));
        return r;
}

/* ---- step 6 ---------------------------------------------------------------------------- */

/* Whether a filesystem has less than CAPSULE_FULL_BYTES left for the job: ENOSPC was its last
 * answer, or close to it (the "disk" wall, capsule/walls.h). Asked once every job process is
 * dead, so the job cannot change the answer; statfs is the sandbox kernel's, not the job's word. */
static bool is_full(const char *path) {
        struct statfs st;
        if (statfs(path, &st) < 0 || st.f_blocks == 0)
                return false;
        return (uint64_t) st.f_bavail * (uint64_t) st.f_bsize < CAPSULE_FULL_BYTES;
}

static void note_full(JobOutcome *o) {
        o->work_full = is_full(CAPSULE_WORK_PATH);
        o->tmp_full = is_full(CAPSULE_TMP_PATH);
}

static void write_trailer(const JobOutcome *o, int exit_code, int sig, bool artifacts_ok, CacheOut cache) {
        char hex[2 * CAPSULE_TOKEN_SIZE + 1], buf[CAPSULE_TRAILER_MAX];
        capsule_token_hex(secret + CAPSULE_TOKEN_SIZE, hex);
        int n = snprintf(buf, sizeof(buf),
                         CAPSULE_TRAILER_TAG "%s exit=%d signal=%d init_error=%s errno=%d "
                                             "skipped=%llu artifacts=%s cache=%s full=%s\n",
                         hex, exit_code, sig, o->init_error, o->error, artifacts_skipped,
                         artifacts_ok ? "ok" : "failed",
                         cache == CACHE_OUT_OK ? "ok" : cache == CACHE_OUT_FAILED ? "failed" : "none",
                         o->work_full ? (o->tmp_full ? "work_tmp" : "work") : o->tmp_full ? "tmp" : "none");
        if (n > 0 && n < (int) sizeof(buf))
                (void) write_all(STDERR_FILENO, buf, (size_t) n);
}

/* A warm capsule's job: every wall is in place; this waits, with no job process, until the
 * worker gives the job (or ends the capsule), then answers it. */
static int take_warm_job(char ***ret_argv) {
        char **job_env = NULL;
        int r = read_job_record(ret_argv, &job_env);
        if (r < 0) {
                (void) close_input();
                return -EIO;
        }
        environ = job_env;
        /* Unanswered, the worker takes the job for never started and may run it
         * elsewhere: nothing of it may start here then. */
        if (write_job_ack() < 0)
                return -EIO;
        return 0;
}

/* The input records (bounds, cache, cwd, changes), the layer taken, /work written from the
 * input; the channel kept for the stop records. *ret_layer_error: the layer's failure, if any. */
static int read_input(bool layer, uid_t job_uid, gid_t job_gid, int *ret_layer_error) {
        int r;

        uint8_t kind = 0;
        r = in_read(&kind, 1);
        if (r >= 0)
                r = read_bounds_record(&kind);
        if (r >= 0)
                r = read_cache_record(&kind);
        if (r >= 0)
                r = read_cwd_record(&kind);
        if (r >= 0)
                r = read_changes_record(&kind);
        int lr = r >= 0 ? take_layer(layer, kind, job_uid, job_gid) : 0;
        *ret_layer_error = lr;
        if (lr < 0)
                r = lr;
        else if (r >= 0 && kind == CAPSULE_INPUT_STREAM)
                r = receive_stream();
        else if (r >= 0 && kind == CAPSULE_INPUT_MOUNTED)
                r = copy_snapshot();
        else if (r >= 0 && kind == CAPSULE_INPUT_BOUND)
                r = 0; /* a generation is /work already (the layer holds the job's writes) */
        else
                r = -ECANCELED;
        /* The channel stays ours for the host's stop records once the input was read whole (not
         * after a cut one: the host may still be writing it). */
        if (r >= 0)
                control_fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
        int cr = close_input();
        if (r >= 0 && cr < 0)
                r = cr;
        return r;
}

/* The job's Landlock ruleset (CAPSULE_LANDLOCK_ARG), on this thread, which starts the job: 0, or
 * a negative errno said on the log channel (nothing of the job may run then). */
static int confine_job(void) {
        static const char *const writable[] = { CAPSULE_WORK_PATH, CAPSULE_TMP_PATH };
        char err[256] = "";
        /* The cache's versions init diffs after the job (out-channel.c): detached, so granted
         * by their descriptors. */
        int r = capsule_landlock_apply(writable, ELEMENTSOF(writable), cache_lower_fd, n_cache_paths, err, sizeof(err));
        if (r < 0) {
                say("refusing to run the job without Landlock: %s: %s", err, strerror(-r));
                return r;
        }
        return 0;
}

/* The status init reports for the job it ran, and the signal that ended it (*ret_sig). */
static int job_exit_code(const JobOutcome *o, int *ret_sig) {
        if (streq(o->init_error, CAPSULE_INIT_ERROR_SPAWN))
                return CAPSULE_EXIT_INIT_FAILED;
        else if (streq(o->init_error, CAPSULE_INIT_ERROR_EXEC))
                return o->error == ENOENT ? CAPSULE_EXIT_NOT_FOUND : CAPSULE_EXIT_CANNOT_EXEC;
        else if (WIFEXITED(o->wstatus))
                return WEXITSTATUS(o->wstatus);
        else if (WIFSIGNALED(o->wstatus)) {
                *ret_sig = WTERMSIG(o->wstatus);
                return 128 + *ret_sig;
        } else
                return CAPSULE_EXIT_INIT_FAILED;
}

int main(int argc, char **argv) {
        JobOutcome o = { .init_error = CAPSULE_INIT_ERROR_NONE };
        int exit_code = 0, sig = 0, r;

        /* Not init at all: doctor's egress probe, run as a job (egress-probe.c). */
        if (argc >= 2 && streq(argv[1], CAPSULE_EGRESS_PROBE_ARG))
                return egress_probe(argc, argv);

        /* Not dumpable: on Linux this keeps same-uid processes out of /proc/1 and ptrace.
         * gVisor (checked with 20221219) does not honour it for /proc/1/fd, which is why the
         * channels are authenticated by the secret (protocol.h). */
        (void) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        (void) prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        ignore_signals();

        /* runc's capsule: Landlock before the job (landlock.c), first of all arguments. */
        bool landlock = argc >= 2 && streq(argv[1], CAPSULE_LANDLOCK_ARG);
        if (landlock) {
                argv++;
                argc--;
        }

        /* With a generation, init is the sandbox's root until the layer is mounted (layer.c);
         * without one it must never be: no job runs as root. */
        uid_t job_uid = 0;
        gid_t job_gid = 0;
        bool layer = argc >= 2 && strncmp(argv[1], CAPSULE_LAYER_ARG, strlen(CAPSULE_LAYER_ARG)) == 0;
        if (layer && capsule_init_parse_layer_arg(argv[1], &job_uid, &job_gid) < 0) {
                say("invalid argument '%s'", argv[1]);
                return CAPSULE_EXIT_INIT_FAILED;
        }
        if (layer) {
                argv++;
                argc--;
                /* The bounding and ambient sets now, and the filter that refuses mount once the
                 * layer is mounted built, while a capsule started ahead waits for its request
                 * (nothing runs here before the job but init itself, which keeps its own
                 * capabilities for the layer's mounts). A failure is left to capsule_init_drop
                 * and capsule_init_refuse_mount, which do it again and fail closed as the
                 * layer's error. */
                (void) capsule_init_drop_ahead();
                (void) capsule_init_prepare_refuse_mount();
        } else if (geteuid() == 0 || getuid() == 0) {
                say("refusing to run as root without " CAPSULE_LAYER_ARG "UID:GID to drop to");
                return CAPSULE_EXIT_INIT_FAILED;
        }

        bool egress_pass = argc >= 2 && streq(argv[1], CAPSULE_EGRESS_PASS_ARG);
        bool egress = egress_pass || (argc >= 2 && streq(argv[1], CAPSULE_EGRESS_ARG));
        if (egress) {
                argv++;
                argc--;
        }
        bool warm = argc == 2 && streq(argv[1], CAPSULE_WARM_ARG);
        if (!warm && (argc < 3 || !streq(argv[1], "--"))) {
                say("usage: " PROG " [" CAPSULE_LANDLOCK_ARG "] [" CAPSULE_LAYER_ARG "UID:GID] [" CAPSULE_EGRESS_ARG "|" CAPSULE_EGRESS_PASS_ARG "] -- ARGV... | ... " CAPSULE_WARM_ARG);
                return CAPSULE_EXIT_INIT_FAILED;
        }
        r = read_secret();
        if (r < 0) {
                say("cannot read the channel secret on stdin: %s", strerror(-r));
                return CAPSULE_EXIT_INIT_FAILED;
        }
        char **job_argv = argv + 2;
        /* Before it waits: what the outputs' first header loads (out-channel.c). */
        if (warm)
                outputs_warm_up();
        if (warm && take_warm_job(&job_argv) < 0)
                return CAPSULE_EXIT_INIT_FAILED;

        int lr = 0;
        r = read_input(layer, job_uid, job_gid, &lr);
        if (lr < 0) {
                o.init_error = CAPSULE_INIT_ERROR_LAYER;
                o.error = -lr;
                exit_code = CAPSULE_EXIT_INIT_FAILED;
        } else if (r == -ECANCELED) {
                /* The host's walk refused the workspace or failed: it says why. */
                o.init_error = CAPSULE_INIT_ERROR_INPUT;
                o.error = ECANCELED;
                exit_code = CAPSULE_EXIT_INIT_FAILED;
        } else if (r < 0) {
                say("cannot write the input into " CAPSULE_WORK_PATH ": %s", strerror(-r));
                o.init_error = CAPSULE_INIT_ERROR_SNAPSHOT;
                o.error = -r;
                exit_code = CAPSULE_EXIT_INIT_FAILED;
        } else if ((r = enter_cwd()) < 0) {
                say("cannot start the job in " CAPSULE_WORK_PATH "/%s: %s", job_cwd, strerror(-r));
                o.init_error = CAPSULE_INIT_ERROR_CWD;
                o.error = -r;
                exit_code = CAPSULE_EXIT_INIT_FAILED;
        } else if (egress && (r = egress_relay_start(egress_pass)) < 0) {
                say("cannot start the egress relay on 127.0.0.1:%d: %s", CAPSULE_EGRESS_PORT, strerror(-r));
                o.init_error = CAPSULE_INIT_ERROR_EGRESS;
                o.error = -r;
                exit_code = CAPSULE_EXIT_INIT_FAILED;
        } else if (landlock && (r = confine_job()) < 0) {
                o.init_error = CAPSULE_INIT_ERROR_LANDLOCK;
                o.error = -r;
                exit_code = CAPSULE_EXIT_INIT_FAILED;
        } else {
                run_job(job_argv, &o);
                exit_code = job_exit_code(&o, &sig);
                note_full(&o);
        }

        /* Root never reaches the outputs: a layer that failed left init root, and it gives
         * that up now or writes nothing but the trailer. */
        if (layer && (geteuid() == 0 || getuid() == 0) && capsule_init_drop(job_uid, job_gid) < 0) {
                close(STDOUT_FILENO);
                write_trailer(&o, exit_code, sig, false, CACHE_OUT_NONE);
                return exit_code;
        }

        CacheOut cache = CACHE_OUT_NONE;
        if (egress)
                egress_relay_quiet();
        r = write_outputs(&cache);
        close(STDOUT_FILENO);
        /* A job that never ran left nothing to keep. */
        if (cache == CACHE_OUT_OK && !streq(o.init_error, CAPSULE_INIT_ERROR_NONE))
                cache = CACHE_OUT_FAILED;
        write_trailer(&o, exit_code, sig, r >= 0, cache);
        return exit_code;
}
