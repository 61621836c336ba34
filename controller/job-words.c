/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "controller/job-words.h"
#include "controller/no-worker.h"

/* "2 GiB", "512 MiB", "3000 bytes": exact, in the largest unit that divides v. */
static const char *bytes_words(uint64_t v, char buf[static 32]) {
        static const struct {
                uint64_t unit;
                const char *name;
        } units[] = {{UINT64_C(1) << 40, "TiB"}, {UINT64_C(1) << 30, "GiB"}, {UINT64_C(1) << 20, "MiB"}, {1024, "KiB"}};
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
                if (v >= units[i].unit && v % units[i].unit == 0) {
                        snprintf(buf, 32, "%" PRIu64 " %s", v / units[i].unit, units[i].name);
                        return buf;
                }
        snprintf(buf, 32, "%" PRIu64 " bytes", v);
        return buf;
}

/* "2", "1.5", "0.25": thousandths of a CPU as a decimal. */
static const char *cpus_words(uint64_t milli, char buf[static 32]) {
        snprintf(buf, 32, "%" PRIu64 ".%03" PRIu64, milli / 1000, milli % 1000);
        size_t n = strlen(buf);
        while (buf[n - 1] == '0')
                buf[--n] = 0;
        if (buf[n - 1] == '.')
                buf[n - 1] = 0;
        return buf;
}

/* A JSON array of strings as "a, b, c". */
static void say_list(FILE *f, const json_t *a) {
        size_t i;
        json_t *v;
        json_array_foreach(a, i, v)
                fprintf(f, "%s%s", i ? ", " : "", json_string_value(v));
}

static void say_cwd(FILE *f, const ControllerSite *s) {
        if (s->cwd)
                fprintf(f, " A command starts in /work/<cwd>, cwd being run's directory relative to the workspace; by "
                           "default the directory this server was started in, '%s' (/work/%s).",
                        s->cwd, s->cwd);
        else
                fputs(" A command starts in /work/<cwd>, cwd being run's directory relative to the workspace; by default "
                      "the workspace's root, /work.",
                      f);
}

static void say_network(FILE *f, const WorkerJobInfo *j) {
        char up[32], down[32];
        if (!j->network_allow) {
                fputs(" Network: none. The capsule has only loopback: a command that needs a package registry or any "
                      "other host fails (vendor what it needs into the workspace, or use offline modes).",
                      f);
                return;
        }
        fputs(" Network: only these host:port pairs, through the worker's proxy (http_proxy and https_proxy are set; a "
              "tool that ignores them reaches nothing): ",
              f);
        say_list(f, j->network_allow);
        fprintf(f, ". Any other host is refused (403 not_allowed): do not look for a way around it; ask the operator to "
                   "add the exact host:port. Per command: at most %" PRIu64 " connections, %s sent and %s received.",
                j->max_connections, bytes_words(j->max_upload_bytes, up), bytes_words(j->max_download_bytes, down));
}

static void say_limits(FILE *f, const ControllerSite *s) {
        const WorkerJobInfo *j = &s->info.job;
        char mem[32], cpus[32], log[32], art[32];
        fprintf(f, " Limits of each command: %s of memory, %s CPUs, %" PRIu64 " processes, a "
                   "timeout of %" PRIu64 " s unless timeout_seconds asks for another (at most %" PRIu64 " s); its "
                   "output is kept up to %s (the first and last halves), its artifacts (files it leaves under "
                   "/work/artifacts) up to %s and %" PRIu64 " entries.",
                bytes_words(j->memory_bytes, mem), cpus_words(j->cpus_milli, cpus), j->pids,
                s->policy.default_timeout_seconds, s->policy.max_timeout_seconds, bytes_words(j->max_log_bytes, log),
                bytes_words(j->max_artifact_bytes, art), j->max_artifact_entries);
}

static void say_cache_and_changes(FILE *f, const WorkerJobInfo *j) {
        if (j->cache_paths) {
                fputs(" Build cache: what a local-reversible command leaves under ", f);
                say_list(f, j->cache_paths);
                fputs(" (paths of /work) is what the next one finds there, not this workspace's own copy.", f);
        }
        if (j->changes)
                fputs(" Changes: what a command changes under /work does not reach this workspace by itself: it comes "
                      "back as a changeset, listed in run's answer, and is applied only with the apply tool (or run's "
                      "apply: true), whole or not at all.",
                      f);
        else
                fputs(" Changes: what a command changes under /work is lost when it ends (this worker returns no "
                      "changeset); only its log and its artifacts come back.",
                      f);
}

/* Everything worker.json says a command gets, or that it is not known. */
static void say_job(FILE *f, const ControllerSite *s) {
        say_cwd(f, s);
        if (!s->info_json || !s->info.has_job) {
                fprintf(f, " What the worker gives a command (network, limits, build cache, changes) is not known: %s. "
                           "Assume no network, and that what it changes under /work does not reach this workspace by "
                           "itself.",
                        s->info_json ? "worker.json does not say (a worker older than this client)"
                                     : "there is no usable worker.json (no worker has started for this workspace)");
                return;
        }
        say_network(f, &s->info.job);
        say_limits(f, s);
        say_cache_and_changes(f, &s->info.job);
}

/* The capsule the worker's engine makes (worker.json's job.isolation; an older worker's is
 * gVisor's). */
static const char *capsule_words(const ControllerSite *s) {
        const char *kernel = s->info_json && s->info.has_job ? s->info.job.kernel : NULL;
        if (kernel && streq(kernel, "host"))
                return "capsule on the host's kernel (runc: its own user namespace, a seccomp filter, no capabilities, "
                       "Landlock)";
        return "gVisor capsule";
}

char *controller_job_words(const ControllerSite *s, JobWordsFor what) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return NULL;
        const char *capsule = capsule_words(s);
        if (what == JOB_WORDS_INSTRUCTIONS)
                fprintf(f, "Run builds, tests and any untrusted command with the run tool instead of running them yourself: "
                           "each runs as your own numeric user on a snapshot of this workspace, at /work, in a disposable "
                           "%s.",
                        capsule);
        else
                fprintf(f, "Run a command (argv, no shell) on a snapshot of this workspace, at /work, in a disposable "
                           "%s, and answer with its outcome: status, exit code, the end of its log, the "
                           "paths of its artifacts and the changes it made. A request whose action class needs an "
                           "operator answers at once with status pending and the command that approves it; one that no "
                           "worker takes within %d s answers so, naming the worker. Ask for either's outcome later "
                           "with the result tool.",
                        capsule, CONTROLLER_NO_WORKER_SECONDS);
        say_job(f, s);
        if (fclose(f) != 0) {
                free(text);
                return NULL;
        }
        return text;
}
