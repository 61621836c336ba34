/* SPDX-License-Identifier: MIT */
/* The processes of the artifact import (import.h, docs/artifacts.md):
 *
 *   caller --fork--> writer (root) --fork--> parser (unprivileged, seccomp)
 *            verdict <-pipe--       <-frames pipe--       <- tar stream
 *
 * The writer is a process of its own so the caller can drain the job log meanwhile; the parser
 * holds nothing but the stream and the frames pipe. */
#define _GNU_SOURCE
#include <archive.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/process.h"
#include "artifacts/archive-dl.h"
#include "artifacts/import-internal.h"
#include "common/fd-util.h"
#include "common/macro.h"

#define PARSER_READ_SIZE ((size_t) 1 << 20)
#define WRITER_BUF_SIZE ((size_t) 2 << 20)
#define CHANNEL_PIPE_SIZE (1 << 20)
/* Headers an entry may legitimately carry: a pax header with a PATH_MAX name, GNU long-name
 * records, the ustar block itself. */
#define STREAM_BYTES_PER_ENTRY ((uint64_t) 16 << 10)

enum { VERDICT_OK, VERDICT_REJECTED, VERDICT_TOO_LARGE, VERDICT_FAILED };

/* What the writer tells the caller. Both run our code (the writer is a fork of the caller), so
 * a fixed binary struct is fine; the caller still checks it arrived whole. */
typedef struct Verdict {
        int32_t error; /* positive errno, 0 on success */
        int32_t code;
        ArtifactSummary summary;
        char message[sizeof(((TfwError *) NULL)->message)];
} Verdict;

struct ArtifactImport {
        pid_t pid;
        int result_fd;
        int staging_fd;
        bool cache; /* the profile, for messages */
};

static const char *verdict_code(int32_t c) {
        switch (c) {
        case VERDICT_REJECTED:
                return ARTIFACT_CODE_REJECTED;
        case VERDICT_TOO_LARGE:
                return ARTIFACT_CODE_TOO_LARGE;
        default:
                return ARTIFACT_CODE_FAILED;
        }
}

static int32_t code_verdict(const char *code) {
        if (code && streq(code, ARTIFACT_CODE_REJECTED))
                return VERDICT_REJECTED;
        if (code && streq(code, ARTIFACT_CODE_TOO_LARGE))
                return VERDICT_TOO_LARGE;
        return VERDICT_FAILED;
}

static uint64_t sat_add(uint64_t a, uint64_t b) {
        return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t stream_cap(const ArtifactLimits *l) {
        uint64_t per = l->max_entries > UINT64_MAX / STREAM_BYTES_PER_ENTRY
                               ? UINT64_MAX
                               : (l->max_entries + 1) * STREAM_BYTES_PER_ENTRY;
        return sat_add(sat_add(l->max_bytes, per), ARTIFACT_TRAILER_MAX);
}

static void reset_signals(void) {
        sigset_t all;

        for (int sig = 1; sig < NSIG; sig++)
                (void) signal(sig, SIG_DFL);
        sigemptyset(&all);
        (void) sigprocmask(SIG_SETMASK, &all, NULL);
}

/* ---- the parser --------------------------------------------------------------------------- */

typedef struct StreamIn {
        int fd;
        uint8_t *buf;
        uint64_t total, cap;
} StreamIn;

static ssize_t stream_read(struct archive *a, void *userdata, const void **ret) {
        StreamIn *s = userdata;

        for (;;) {
                ssize_t n = read(s->fd, s->buf, PARSER_READ_SIZE);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        sym_archive_set_error(a, errno, "reading the stream: %s", strerror(errno));
                        return -1;
                }
                s->total += (uint64_t) n;
                if (s->total > s->cap) {
                        sym_archive_set_error(a, E2BIG,
                                              "tar stream longer than %" PRIu64
                                              " bytes, more than the limits allow",
                                              s->cap);
                        return -1;
                }
                *ret = s->buf;
                return n;
        }
}

/* Consume what follows the end-of-archive marker (record padding) so the writer of the stream
 * sees a clean end, within a bound. */
static int drain_trailer(StreamIn *s) {
        uint64_t extra = 0;

        for (;;) {
                ssize_t n = read(s->fd, s->buf, PARSER_READ_SIZE);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return 0;
                extra += (uint64_t) n;
                if (extra > ARTIFACT_TRAILER_MAX)
                        return -E2BIG;
        }
}

static _noreturn_ void parser_main(int stream_fd, int chan_fd, const ArtifactLimits *limits,
                                   pid_t writer) {
        StreamIn in = { .fd = stream_fd, .cap = stream_cap(limits) };
        struct archive *a = NULL;
        char err[256];
        FrameOut o;
        int r;

        r = close_all_fds_except(0, (int[]) { stream_fd, chan_fd }, 2);
        if (r < 0 || frame_out_init(&o, frame_flush_fd, &chan_fd) < 0)
                _exit(3);
        in.buf = malloc(PARSER_READ_SIZE);
        if (!in.buf || artifact_archive_new(&a) < 0) {
                (void) frame_out_fail(&o, FRAME_FAIL_SETUP, "out of memory");
                (void) frame_out_flush(&o);
                _exit(3);
        }
        /* Names are kept as UTF-8 bytes whatever the caller's locale; then every lazy set-up
         * libarchive and libc do happens now, while files can still be opened. */
        (void) setlocale(LC_CTYPE, "C.UTF-8");
        artifact_parser_warm_up();

        r = artifact_parser_confine(limits, stream_fd, chan_fd, writer, err, sizeof(err));
        if (r < 0) {
                (void) frame_out_fail(&o, FRAME_FAIL_SETUP, "%s", err);
                (void) frame_out_flush(&o);
                _exit(3);
        }
        if (artifacts_test_parser_hook)
                artifacts_test_parser_hook();

        if (sym_archive_read_open(a, &in, NULL, stream_read, NULL) != ARCHIVE_OK) {
                const char *m = sym_archive_error_string(a);
                (void) frame_out_fail(&o,
                                      sym_archive_errno(a) == E2BIG ? FRAME_FAIL_TOO_LARGE
                                                                : FRAME_FAIL_REJECTED,
                                      "malformed tar stream: %s", m ? m : "unknown error");
                r = -EBADMSG;
        } else
                r = artifact_parse_tar(a, &o);
        if (r >= 0) {
                r = drain_trailer(&in);
                if (r == -E2BIG)
                        (void) frame_out_fail(&o, FRAME_FAIL_REJECTED,
                                              "more than %u bytes after the end of the archive",
                                              ARTIFACT_TRAILER_MAX);
                else if (r < 0)
                        (void) frame_out_fail(&o, FRAME_FAIL_REJECTED, "reading the stream: %s",
                                              strerror(-r));
                else
                        r = frame_out_put(&o, FRAME_DONE, NULL, 0, NULL, 0);
        }
        if (frame_out_flush(&o) < 0)
                _exit(4);
        /* No cleanup: exit_group is all the allow-list has, and the kernel frees the rest. */
        _exit(r < 0 ? 2 : 0);
}

/* ---- the writer --------------------------------------------------------------------------- */

/* Read frames until the parser closes the pipe. Returns -ECHILD with no error recorded when the
 * frames stopped before DONE: the parser's exit status then says why. */
static int run_writer(int chan_fd, int staging_fd, const ArtifactLimits *limits,
                      ArtifactSummary *ret, TfwError *e) {
        _cleanup_free_ uint8_t *buf = NULL;
        ArtifactWriter w;
        size_t start = 0, end = 0;
        int r;

        r = artifact_writer_init(&w, staging_fd, limits, limits->cache ? limits->owner : 0,
                                 limits->group, e);
        if (r < 0)
                return r;
        buf = malloc(WRITER_BUF_SIZE);
        if (!buf) {
                r = tfw_error(e, ENOMEM, ARTIFACT_CODE_FAILED, "%s writer: out of memory",
                              import_kind_word(limits->cache));
                goto finish;
        }
        for (;;) {
                ssize_t n = read(chan_fd, buf + end, WRITER_BUF_SIZE - end);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        r = tfw_error(e, errno, ARTIFACT_CODE_FAILED, "reading the frames: %m");
                        goto finish;
                }
                if (n == 0)
                        break;
                end += (size_t) n;
                size_t used = 0;
                r = artifact_writer_feed(&w, buf + start, end - start, &used, e);
                if (r < 0)
                        goto finish;
                start += used;
                if (start == end)
                        start = end = 0;
                else if (WRITER_BUF_SIZE - end < FRAME_HEADER_SIZE + FRAME_PAYLOAD_MAX) {
                        memmove(buf, buf + start, end - start);
                        end -= start;
                        start = 0;
                }
        }
        if (!w.done) {
                r = -ECHILD;
                goto finish;
        }
        if (start != end) {
                r = tfw_error(e, EBADMSG, ARTIFACT_CODE_REJECTED,
                              "the tar parser broke the frame protocol: data after the end");
                goto finish;
        }
        *ret = (ArtifactSummary) {
                .files = w.files, .dirs = w.dirs, .bytes = w.bytes, .links = w.links
        };
        r = 0;
finish:
        artifact_writer_done(&w);
        return r;
}

static int parser_fate(int status, bool cache, TfwError *e) {
        const char *what = import_stream_word(cache);

        if (WIFSIGNALED(status))
                return tfw_error(e, EBADMSG, ARTIFACT_CODE_REJECTED,
                                 "%s: the tar parser was killed by signal %d (%s)", what,
                                 WTERMSIG(status), strsignal(WTERMSIG(status)));
        if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
                return tfw_error(e, EIO, ARTIFACT_CODE_FAILED, "%s: the tar parser could not start",
                                 what);
        return tfw_error(e, EBADMSG, ARTIFACT_CODE_REJECTED,
                         "%s: the tar parser stopped (status %d) before the end", what,
                         WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

static _noreturn_ void writer_main(int stream_fd, int staging_fd, int result_fd,
                                   const ArtifactLimits *limits) {
        Verdict v = {};
        TfwError e = {};
        int chan[2] = { -EBADF, -EBADF }, status = 0, r;
        pid_t parser = -1;
        const char *kind = import_kind_word(limits->cache);

        reset_signals();
        /* Files are created 0640 and directories 0750 exactly; no chmod needed. */
        umask(0);
        /* Keep stderr (sanitizer reports); everything else of the caller goes. */
        r = close_all_fds_except(0, (int[]) { STDERR_FILENO, stream_fd, staging_fd, result_fd }, 4);
        if (r < 0) {
                r = tfw_error(&e, r, ARTIFACT_CODE_FAILED, "%s writer: close_range: %s",
                              kind, strerror(-r));
                goto report;
        }
        if (pipe2(chan, O_CLOEXEC) < 0) {
                r = tfw_error(&e, errno, ARTIFACT_CODE_FAILED, "%s writer: pipe: %m", kind);
                goto report;
        }
        (void) fcntl(chan[0], F_SETPIPE_SZ, CHANNEL_PIPE_SIZE);
        pid_t self = getpid();
        r = safe_fork(FORK_DEATHSIG, &parser);
        if (r < 0) {
                r = tfw_error(&e, -r, ARTIFACT_CODE_FAILED, "%s writer: fork: %s", kind,
                              strerror(-r));
                goto report;
        }
        if (parser == 0) {
                safe_close(chan[0]);
                parser_main(stream_fd, chan[1], limits, self);
        }
        /* Only the parser holds the stream now: when it stops, the stream's writer sees EPIPE
         * instead of blocking (once the caller closed its copy too). */
        safe_close(stream_fd);
        chan[1] = safe_close(chan[1]);

        r = run_writer(chan[0], staging_fd, limits, &v.summary, &e);
        if (r < 0)
                (void) kill(parser, SIGKILL);
        chan[0] = safe_close(chan[0]);
        while (waitpid(parser, &status, 0) < 0 && errno == EINTR)
                ;
        if (r == -ECHILD || (r >= 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)))
                r = parser_fate(status, limits->cache, &e);

report:
        if (r < 0) {
                int k = artifact_dir_empty(staging_fd);
                if (k < 0) {
                        tfw_error_prefix(&e, "emptying the staging directory failed (%s); ",
                                         strerror(-k));
                        e.code = ARTIFACT_CODE_FAILED;
                }
                v.error = e.error ? e.error : EIO;
                v.code = code_verdict(e.code);
                memcpy(v.message, e.message, sizeof(v.message));
                v.summary = (ArtifactSummary) {};
        }
        _exit(write_all(result_fd, &v, sizeof(v)) < 0 ? 1 : 0);
}

/* ---- the caller's side -------------------------------------------------------------------- */

static ArtifactImport *import_free(ArtifactImport *imp) {
        if (imp) {
                safe_close(imp->result_fd);
                safe_close(imp->staging_fd);
                free(imp);
        }
        return NULL;
}
static void import_freep(ArtifactImport **imp) {
        import_free(*imp);
}

static int dir_is_empty(int dir_fd) {
        _cleanup_closedir_ DIR *d = opendir_fd(dir_fd);
        if (!d)
                return -errno;
        struct dirent *de;
        int r = 1;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, "..")) {
                        r = 0;
                        break;
                }
        return r;
}

int artifacts_import_start(int stream_fd, int staging_dir_fd, const ArtifactLimits *limits,
                           ArtifactImport **ret, TfwError *e) {
        _cleanup_(import_freep) ArtifactImport *imp = NULL;
        int result[2];
        int r;

        if (!limits || !ret || stream_fd < 0 || staging_dir_fd < 0)
                return tfw_error(e, EINVAL, ARTIFACT_CODE_FAILED, "artifacts: invalid arguments");
        const char *what = import_stream_word(limits->cache);
        if (limits->unpriv_uid == 0 || limits->unpriv_gid == 0 ||
            limits->unpriv_uid == (uid_t) -1 || limits->unpriv_gid == (gid_t) -1)
                return tfw_error(e, EINVAL, ARTIFACT_CODE_FAILED,
                                 "%s: the tar parser must not run as root", what);
        if (limits->cache && limits->owner == (uid_t) -1)
                return tfw_error(e, EINVAL, ARTIFACT_CODE_FAILED,
                                 "cache: no owner for the cache (limits.owner)");
        /* Here, in the caller: the parser inherits the mapping and is confined before it could
         * open the library itself. */
        TfwError dl = {};
        r = dlopen_libarchive(&dl);
        if (r < 0)
                return tfw_error(e, -r, ARTIFACT_CODE_FAILED, "%s: %s", what, dl.message);
        imp = calloc(1, sizeof(*imp));
        if (!imp)
                return tfw_error(e, ENOMEM, ARTIFACT_CODE_FAILED, "%s: out of memory", what);
        imp->result_fd = -EBADF;
        imp->cache = limits->cache;
        /* Our own open file description: its offset and lifetime are independent of the
         * caller's fd. */
        imp->staging_fd = openat(staging_dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (imp->staging_fd < 0)
                return tfw_error(e, errno, ARTIFACT_CODE_FAILED, "%s: staging directory: %m",
                                 what);
        r = dir_is_empty(imp->staging_fd);
        if (r <= 0)
                return tfw_error(e, r < 0 ? -r : ENOTEMPTY, ARTIFACT_CODE_FAILED,
                                 "%s: staging directory: %s", what,
                                 r < 0 ? strerror(-r) : "not empty");
        if (pipe2(result, O_CLOEXEC) < 0)
                return tfw_error(e, errno, ARTIFACT_CODE_FAILED, "%s: pipe: %m", what);
        /* The writer child dies with its parent, like every other child (a job process killed
         * mid-import must not leave it writing into the staging directory). */
        pid_t pid;
        r = safe_fork(FORK_DEATHSIG, &pid);
        if (r < 0) {
                r = tfw_error(e, -r, ARTIFACT_CODE_FAILED, "%s: fork: %s", what, strerror(-r));
                safe_close(result[0]);
                safe_close(result[1]);
                return r;
        }
        if (pid == 0) {
                safe_close(result[0]);
                writer_main(stream_fd, imp->staging_fd, result[1], limits);
        }
        safe_close(result[1]);
        imp->pid = pid;
        imp->result_fd = result[0];
        *ret = TAKE_PTR(imp);
        return 0;
}

int artifacts_import_finish(ArtifactImport *imp_, ArtifactSummary *ret, TfwError *e) {
        _cleanup_(import_freep) ArtifactImport *imp = imp_;
        Verdict v;
        size_t got = 0;
        int status = 0;

        while (got < sizeof(v)) {
                ssize_t n = read(imp->result_fd, (char *) &v + got, sizeof(v) - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                got += (size_t) n;
        }
        while (waitpid(imp->pid, &status, 0) < 0)
                if (errno != EINTR) {
                        status = -1;
                        break;
                }
        if (got != sizeof(v) || status != 0) {
                /* The writer died: nothing it left can be trusted to be complete. */
                (void) artifact_dir_empty(imp->staging_fd);
                return tfw_error(e, EIO, ARTIFACT_CODE_FAILED,
                                 "%s: the importer died (wait status %d)",
                                 import_stream_word(imp->cache), status);
        }
        if (v.error != 0) {
                v.message[sizeof(v.message) - 1] = 0;
                return tfw_error(e, v.error, verdict_code(v.code), "%s", v.message);
        }
        if (ret)
                *ret = v.summary;
        return 0;
}

void artifacts_import_abort(ArtifactImport *imp) {
        /* The parser dies with the writer (FORK_DEATHSIG); finish reaps it and empties staging. */
        if (imp && imp->pid > 0)
                (void) kill(imp->pid, SIGKILL);
}

int artifacts_import(int stream_fd, int staging_dir_fd, const ArtifactLimits *limits,
                     ArtifactSummary *ret, TfwError *e) {
        ArtifactImport *imp = NULL;
        int r = artifacts_import_start(stream_fd, staging_dir_fd, limits, &imp, e);
        if (r < 0)
                return r;
        return artifacts_import_finish(imp, ret, e);
}

pid_t artifacts_import_pid(const ArtifactImport *imp) {
        return imp->pid;
}

/* ---- in process --------------------------------------------------------------------------- */

typedef struct FeedCtx {
        ArtifactWriter *w;
        TfwError *e;
} FeedCtx;

static int feed_writer(void *userdata, const uint8_t *buf, size_t len) {
        FeedCtx *c = userdata;
        size_t used = 0;
        int r = artifact_writer_feed(c->w, buf, len, &used, c->e);
        if (r < 0)
                return r;
        /* The encoder flushes whole frames only. */
        return used == len ? 0 : tfw_error(c->e, EPROTO, ARTIFACT_CODE_FAILED, "partial frame");
}

int artifacts_import_buffer(const void *buf, size_t len, int staging_dir_fd,
                            const ArtifactLimits *limits, ArtifactSummary *ret, TfwError *e) {
        struct archive *a = NULL;
        ArtifactWriter w;
        FrameOut o = {};
        TfwError local = {};
        int r;

        if (!e)
                e = &local;
        FeedCtx ctx = { .w = &w, .e = e };
        const char *what = import_stream_word(limits->cache);

        TfwError dl = {};
        r = dlopen_libarchive(&dl);
        if (r < 0)
                return tfw_error(e, -r, ARTIFACT_CODE_FAILED, "%s: %s", what, dl.message);
        r = artifact_writer_init(&w, staging_dir_fd, limits,
                                 limits->cache ? limits->owner : (uid_t) -1, limits->group, e);
        if (r < 0)
                return r;
        r = frame_out_init(&o, feed_writer, &ctx);
        if (r >= 0)
                r = artifact_archive_new(&a);
        if (r < 0) {
                r = tfw_error(e, r, ARTIFACT_CODE_FAILED, "%s: out of memory", what);
                goto finish;
        }
        /* A FAIL frame the parser emits becomes the writer's error through the same path. */
        if (sym_archive_read_open_memory(a, buf, len) != ARCHIVE_OK) {
                const char *m = sym_archive_error_string(a);
                r = frame_out_fail(&o, FRAME_FAIL_REJECTED, "malformed tar stream: %s",
                                   m ? m : "unknown error");
        } else {
                r = artifact_parse_tar(a, &o);
                if (r >= 0)
                        r = frame_out_put(&o, FRAME_DONE, NULL, 0, NULL, 0);
        }
        int k = frame_out_flush(&o);
        if (k < 0)
                r = k;
        else if (r >= 0 && !w.done)
                r = tfw_error(e, EBADMSG, ARTIFACT_CODE_REJECTED, "%s: no end of stream", what);
        else if (r < 0 && !e->code)
                r = tfw_error(e, r, ARTIFACT_CODE_REJECTED, "%s: malformed tar stream", what);
finish:
        if (a)
                sym_archive_read_free(a);
        frame_out_done(&o);
        artifact_writer_done(&w);
        if (r < 0) {
                (void) artifact_dir_empty(staging_dir_fd);
                return r;
        }
        if (ret)
                *ret = (ArtifactSummary) {
                        .files = w.files, .dirs = w.dirs, .bytes = w.bytes, .links = w.links
                };
        return 0;
}
