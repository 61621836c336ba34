/* SPDX-License-Identifier: MIT */
/* Benchmark of the capsule drivers: a bare `runsc run` of /bin/true against the driver
 * running the same command through cgroup and bundle creation, the in-capsule init (snapshot
 * copy, relay, empty artifact tar, trailer), the confined importer and cleanup (issue 4);
 * or, with an engine, `ENGINE run -i` with every wall in the locally built busybox test image
 * (tests/integration/docker-image.sh), the image check and the OOM record (issue 6).
 *
 *   bench-capsule RUNS                      the runsc driver (target ratio <= 1.15)
 *   bench-capsule RUNS docker|podman IMAGE  an engine driver (target ratio <= 2.5)
 *
 * Runs alternate (bare, driver, bare, driver, ...) after one untimed warm-up of each, so
 * drift hits both alike. Prints every sample, the medians and the ratio driver/bare. Needs
 * root and runsc. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capsule/docker.h"
#include "capsule/job.h"
#include "capsule/protocol.h"
#include "common/fd-util.h"
#include "common/macro.h"
#include "common/time-util.h"

static Engine en;
static bool use_engine;
static char base[256], scratch[PATH_MAX], snapshot[PATH_MAX], root[PATH_MAX],
        bare_bundle[PATH_MAX], init_path[PATH_MAX];
static Config config;
static SystemMount mounts[8];
static Runsc rt;
static CapsuleDriver driver;

static int die(const char *what, int err) {
        fprintf(stderr, "bench-capsule: %s: %s\n", what, strerror(err));
        exit(1);
}

/* A plain bundle as one would write by hand for runsc: read-only empty root, the same
 * system mounts, /bin/true as an unprivileged user, no capabilities. */
static void write_bare_bundle(void) {
        char p[PATH_MAX + 32];
        FILE *f;

        snprintf(bare_bundle, sizeof(bare_bundle), "%s/bare", base);
        snprintf(p, sizeof(p), "%s/rootfs", bare_bundle);
        if (mkdir(bare_bundle, 0700) < 0 || mkdir(p, 0555) < 0)
                die("bare bundle", errno);
        snprintf(p, sizeof(p), "%s/config.json", bare_bundle);
        f = fopen(p, "we");
        if (!f)
                die("bare config.json", errno);
        fprintf(f,
                "{\"ociVersion\":\"1.0.2\",\"process\":{\"user\":{\"uid\":12345,\"gid\":12345},"
                "\"args\":[\"/bin/true\"],\"env\":[\"PATH=/usr/bin:/bin\"],\"cwd\":\"/\","
                "\"capabilities\":{},\"noNewPrivileges\":true},"
                "\"root\":{\"path\":\"rootfs\",\"readonly\":true},\"hostname\":\"bare\","
                "\"mounts\":[{\"destination\":\"/proc\",\"type\":\"proc\",\"source\":\"proc\"}");
        for (size_t i = 0; i < config.n_system_mounts; i++)
                fprintf(f,
                        ",{\"destination\":\"%s\",\"type\":\"bind\",\"source\":\"%s\","
                        "\"options\":[\"rbind\",\"ro\"]}",
                        mounts[i].sandbox, mounts[i].host);
        fprintf(f, "],\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"ipc\"},"
                   "{\"type\":\"uts\"},{\"type\":\"mount\"},{\"type\":\"network\"}]}}\n");
        fclose(f);
}

static usec_t run_bare(unsigned i) {
        char id[64], rootflag[PATH_MAX + 16];
        int st;
        snprintf(id, sizeof(id), "tfw-bench-bare-%u", i);
        snprintf(rootflag, sizeof(rootflag), "--root=%s", root);
        usec_t t0 = now_monotonic();
        pid_t pid = fork();
        if (pid == 0) {
                int null = open("/dev/null", O_RDWR);
                dup2(null, 0);
                dup2(null, 1);
                dup2(null, 2);
                execl(rt.binary, rt.binary, rootflag, "--network=none", "--platform=" CONFIG_DEFAULT_PLATFORM,
                      "run", "--bundle", bare_bundle, id, (char *) NULL);
                _exit(127);
        }
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                die("bare runsc run", pid < 0 ? errno : EIO);
        return now_monotonic() - t0;
}

static usec_t run_driver(unsigned i) {
        char id[64], staging[PATH_MAX];
        TfwError e = {};
        CapsuleResult res;
        char *argv[] = { (char *) "/bin/true", NULL };
        int scratch_fd = open(scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int log_fd = memfd_create("log", MFD_CLOEXEC);
        snprintf(id, sizeof(id), "b%u", i);
        snprintf(staging, sizeof(staging), "%s/staging-%u", base, i);
        if (mkdir(staging, 0700) < 0)
                die("staging", errno);
        int staging_fd = open(staging, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CapsuleJobParams p = {
                .config = &config, .driver = &driver, .scratch_fd = scratch_fd,
                .scratch_path = scratch, .job_id = id, .argv = argv, .timeout_seconds = 60,
                .snapshot_dir = snapshot, .init_path = init_path, .log_fd = log_fd,
                .staging_fd = staging_fd, .unpriv_uid = 65534, .unpriv_gid = 65534,
        };
        usec_t t0 = now_monotonic();
        if (capsule_run_job(&p, &res, &e) < 0 || res.status != CAPSULE_SUCCEEDED ||
            !res.artifacts_ok)
                die(res.message[0] ? res.message : "driver run", EIO);
        usec_t t = now_monotonic() - t0;
        close(scratch_fd);
        close(log_fd);
        close(staging_fd);
        (void) rm_rf_at(AT_FDCWD, staging);
        return t;
}

static int cmp(const void *a, const void *b) {
        usec_t x = *(const usec_t *) a, y = *(const usec_t *) b;
        return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
        unsigned runs = argc > 1 ? (unsigned) atoi(argv[1]) : 11;
        const char *label = "capsule", *target = "1.15";
        if (argc > 2) {
                if (argc != 4 || (!streq(argv[2], "docker") && !streq(argv[2], "podman"))) {
                        fprintf(stderr, "usage: bench-capsule RUNS [docker|podman IMAGE]\n");
                        return 2;
                }
                use_engine = true;
                label = argv[2];
                target = "2.5";
        }
        const char *build = getenv("BUILD");
        char p[PATH_MAX];
        TfwError e = {};

        if (runs < 1 || runs > 1000)
                runs = 11;
        snprintf(p, sizeof(p), "%s/tentaflake-capsule-init", build && *build ? build : "build");
        if (!realpath(p, init_path))
                die(p, errno);
        snprintf(base, sizeof(base), "/tmp/tfw-bench-capsule-XXXXXX");
        if (!mkdtemp(base))
                die("mkdtemp", errno);
        chmod(base, 0755);
        snprintf(scratch, sizeof(scratch), "%s/scratch", base);
        snprintf(snapshot, sizeof(snapshot), "%s/snapshot", base);
        snprintf(root, sizeof(root), "%s/runsc-root", base);
        if (mkdir(scratch, 0700) < 0 || mkdir(snapshot, 0755) < 0)
                die("mkdir", errno);

        const char *sys[] = { "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc/ld.so.cache",
                              "/etc/alternatives", "/etc/ssl/certs" };
        for (size_t i = 0; i < ELEMENTSOF(sys); i++)
                mounts[i] = (SystemMount) { (char *) sys[i], (char *) sys[i], NULL };
        config = (Config) { .version = 1, .name = (char *) "bench", .container_uid = 12345,
                            .container_gid = 12345, .platform = (char *) CONFIG_DEFAULT_PLATFORM,
                            .system_mounts = mounts, .n_system_mounts = ELEMENTSOF(sys) };
        config.limits = (ConfigLimits) { .memory = 2ULL << 30, .memory_swap = 2ULL << 30,
                                         .cpus_milli = 2000, .cpus = "2.0", .pids = 512,
                                         .workspace_tmpfs = 2ULL << 30,
                                         .tmp_tmpfs = 256ULL << 20, .max_log_bytes = 8 << 20,
                                         .max_artifact_bytes = 1ULL << 30,
                                         .max_artifact_entries = 200000 };
        if (runsc_init(&rt, &config, root, &e) < 0)
                die(e.message, e.error);
        if (use_engine) {
                config.driver = streq(label, "docker") ? DRIVER_DOCKER : DRIVER_PODMAN;
                config.image = argv[3];
                if (engine_init(&en, &config, NULL, &e) < 0)
                        die(e.message, e.error);
        }
        if (capsule_driver_init(&driver, &config, root, NULL, &e) < 0)
                die(e.message, e.error);
        write_bare_bundle();

        usec_t *bare = calloc(runs, sizeof(usec_t)), *drv = calloc(runs, sizeof(usec_t));
        (void) run_bare(1000);
        (void) run_driver(1000);
        for (unsigned i = 0; i < runs; i++) {
                if (i % 2 == 0) {
                        bare[i] = run_bare(i);
                        drv[i] = run_driver(i);
                } else {
                        drv[i] = run_driver(i);
                        bare[i] = run_bare(i);
                }
                printf("run %2u: bare %7.1f ms  driver %7.1f ms\n", i,
                       (double) bare[i] / 1000.0, (double) drv[i] / 1000.0);
        }
        qsort(bare, runs, sizeof(usec_t), cmp);
        qsort(drv, runs, sizeof(usec_t), cmp);
        double mb = (double) bare[runs / 2] / 1000.0, md = (double) drv[runs / 2] / 1000.0;
        printf("%s: bare runsc run median %.1f ms, driver median %.1f ms, ratio %.3f "
               "(target <= %s), %u runs each\n",
               label, mb, md, md / mb, target, runs);
        runsc_done(&rt);
        capsule_driver_done(&driver);
        if (use_engine)
                engine_done(&en);
        (void) rm_rf_at(AT_FDCWD, base);
        /* The worker's cgroup group (empty now) in every hierarchy, and the one runsc made
         * for the bare runs' ids is removed by runsc itself. */
        DIR *h = opendir("/sys/fs/cgroup");
        struct dirent *de;
        while (h && (de = readdir(h))) {
                char g[PATH_MAX];
                if (de->d_name[0] == '.')
                        continue;
                snprintf(g, sizeof(g), "/sys/fs/cgroup/%s/tentaflake-worker-bench", de->d_name);
                (void) rmdir(g);
        }
        if (h)
                closedir(h);
        (void) rmdir("/sys/fs/cgroup/tentaflake-worker-bench");
        return 0;
}
