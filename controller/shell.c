/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/macro.h"
#include "controller/cancel.h"
#include "controller/outcome.h"
#include "controller/request.h"
#include "controller/shell-string.h"
#include "controller/shell.h"
#include "controller/site.h"
#include "controller/submit.h"

/* The capsule's own last step, in place of Claude's `pwd -P >| /tmp/claude-XXXX-cwd`: the
 * directory leaves as an artifact (artifacts/ is made when the job did not make it). */
#define CWD_STEP " && { mkdir -p /work/artifacts && pwd -P >| /work/artifacts/" SHELL_CWD_ARTIFACT "; }"

/* A fresh id: shell-<16 hex>; the id is needed after the job, to read its record. */
static int fresh_id(char buf[static 32], TfwError *e) {
        uint64_t rnd;
        if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
                return tfw_error(e, EIO, "internal", "getrandom failed");
        snprintf(buf, 32, "shell-%016" PRIx64, rnd);
        return 0;
}

/* Write host_dir into Claude's cwd file: by name in its directory, never through a link, only
 * into this user's regular file (or a new one); opened without blocking, so that a FIFO planted
 * at the name (with fs.protected_fifos=0) is refused by the check below, not waited on. */
static int write_cwd_file(const char *cwd_file, const char *host_dir, TfwError *e) {
        const char *slash = strrchr(cwd_file, '/');
        _cleanup_free_ char *dir = strndup(cwd_file, (size_t) (slash - cwd_file));
        if (!dir)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return tfw_error(e, errno, "cwd_file", "cannot open '%s': %m", dir);
        _cleanup_close_ int fd = openat(dfd, slash + 1, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC, 0600);
        if (fd < 0)
                return tfw_error(e, errno, "cwd_file", "cannot open '%s' (a link is never followed): %m", cwd_file);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return tfw_error(e, errno, "cwd_file", "cannot stat '%s': %m", cwd_file);
        if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
                return tfw_error(e, EPERM, "cwd_file", "'%s' is not this user's regular file: not written", cwd_file);
        int r = ftruncate(fd, 0) < 0 ? -errno : write_all(fd, host_dir, strlen(host_dir));
        if (r >= 0)
                r = write_all(fd, "\n", 1);
        if (r < 0)
                return tfw_error(e, -r, "cwd_file", "cannot write '%s': %s", cwd_file, strerror(-r));
        return 0;
}

/* The directory job id ended in, as the host's path: its record (none when the string stopped
 * before its last step: Claude then keeps its directory, as it would natively), a directory the
 * workspace holds, opened one component at a time without following a link. 1 with *ret, 0 when
 * there is no record, or a negative errno with e set. */
static int ended_in(const ControllerSite *site, const char *id, char **ret, TfwError *e) {
        char art[96];
        snprintf(art, sizeof(art), "%s/artifacts", id);
        _cleanup_close_ int adir = open_dir_components(site->results_fd, art);
        _cleanup_close_ int fd = adir < 0 ? -EBADF : openat(adir, SHELL_CWD_ARTIFACT, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return 0;
        _cleanup_free_ char *buf = NULL, *rel = NULL;
        size_t n;
        int r = read_full_fd_bounded(fd, SHELL_CWD_RECORD_MAX, &buf, &n);
        if (r >= 0)
                r = shell_cwd_record_parse(buf, n, &rel);
        if (r < 0)
                return tfw_error(e, -r, "cwd_record", "the job's record of its directory is not a directory of /work");
        _cleanup_close_ int ws = open(site->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int d = ws < 0 ? -errno : open_dir_components(ws, rel);
        if (d < 0)
                return tfw_error(e, -d, "cwd_gone", "the job ended in '/work/%s', which the workspace '%s' does not hold "
                                 "(without following a link): the harness keeps its directory", rel, site->workspace);
        char *p = NULL;
        if (asprintf(&p, "%s%s%s", site->workspace, *rel && !streq(site->workspace, "/") ? "/" : "", rel) < 0)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        *ret = p;
        return 1;
}

/* After the job: Claude's cwd file gets the host's path of the directory it ended in. */
static void take_cwd(const ShellOptions *o, const char *id, const char *cwd_file, FILE *err) {
        _cleanup_(controller_site_close) ControllerSite site = CONTROLLER_SITE_NULL;
        _cleanup_free_ char *dir = NULL;
        TfwError e = {};
        int r = controller_site_open(o->workspace, o->results, &site, &e);
        if (r >= 0)
                r = controller_site_need_results(&site, &e);
        if (r >= 0)
                r = ended_in(&site, id, &dir, &e);
        if (r > 0)
                r = write_cwd_file(cwd_file, dir, &e);
        if (r < 0)
                fprintf(err, "shell '%s': %s\n", id, e.message);
}

/* The request's argv: -c STRING as `sh -c` (Claude's Bash string as `bash -c`, with its last
 * step rewritten), or ARGV. *ret_cwd_file: Claude's cwd file, or NULL. */
static int shell_argv(const ShellOptions *o, char ***ret, size_t *ret_n, char **ret_cwd_file, TfwError *e) {
        _cleanup_free_ char *body = NULL, *cwd_file = NULL, *step = NULL;
        if (!o->string) {
                *ret = (char **) o->argv;
                *ret_n = o->argc;
                *ret_cwd_file = NULL;
                return 0;
        }
        const char *tmpdir = getenv("CLAUDE_CODE_TMPDIR") ?: getenv("TMPDIR");
        int r = shell_claude_bash_split(o->string, tmpdir, &body, &cwd_file);
        if (r < 0 && r != -ENOMSG)
                return tfw_error(e, -r, "internal", "out of memory");
        if (r >= 0 && asprintf(&step, "%s" CWD_STEP, body) < 0) {
                step = NULL; /* undefined after a failure: not to be freed */
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        }
        char **v = calloc(4, sizeof(char *));
        if (!v)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        v[0] = step ? (char *) "bash" : (char *) "sh";
        v[1] = (char *) "-c";
        v[2] = step ? TAKE_PTR(step) : (char *) o->string;
        *ret = v;
        *ret_n = 3;
        *ret_cwd_file = TAKE_PTR(cwd_file);
        return 0;
}

/* The harness gave up on the command (a signal on stop_fd): its job is cancelled, not left to
 * run on to its timeout. */
static void stop_job(const ShellOptions *o, const char *id, FILE *err, int *ret_status) {
        _cleanup_(controller_site_close) ControllerSite site = CONTROLLER_SITE_NULL;
        struct signalfd_siginfo si = {};
        TfwError e = {};
        usec_t at;
        int sig = read(*o->stop_fd, &si, sizeof(si)) == (ssize_t) sizeof(si) ? (int) si.ssi_signo : SIGTERM;
        int r = controller_site_open(o->workspace, o->results, &site, &e);
        if (r >= 0)
                r = controller_cancel_send(&site, id, &at, &e);
        if (r >= 0)
                fprintf(err, "shell '%s': %s: its job is cancelled\n", id, strsignal(sig));
        else
                fprintf(err, "shell '%s': %s: its job could not be cancelled: %s\n", id, strsignal(sig), e.message);
        *ret_status = 128 + sig;
}

int controller_shell(const ShellOptions *o, FILE *out, FILE *err, int *ret_status, TfwError *e) {
        _cleanup_(json_decrefp) json_t *fields = NULL;
        _cleanup_free_ char *cwd_file = NULL;
        char **argv = NULL, id[32];
        size_t argc = 0;
        int r;

        r = fresh_id(id, e);
        if (r < 0)
                return r;
        r = shell_argv(o, &argv, &argc, &cwd_file, e);
        if (r < 0)
                return r;
        r = controller_fields_from_strings(argv, argc, NULL, o->timeout, NULL, id, &fields, e);
        if (o->string) {
                if (cwd_file)
                        free(argv[2]);
                free(argv);
        }
        if (r < 0)
                return r;
        SubmitOptions so = {
                .workspace = o->workspace,
                .results = o->results,
                .fields = fields,
                .wait = true,
                .apply = !o->review,
                .unlisted_artifact = SHELL_CWD_ARTIFACT,
                .stop_fd = o->stop_fd,
        };
        r = controller_submit(&so, out, err, ret_status, e);
        if (r == -EINTR && o->stop_fd) {
                fflush(out);
                stop_job(o, id, err, ret_status);
                return 0;
        }
        if (r < 0)
                return r;
        fflush(out);
        if (cwd_file)
                take_cwd(o, id, cwd_file, err);
        return 0;
}
