/* SPDX-License-Identifier: MIT */
/* doctor under a driver on the host's kernel (runc; threat 23): each wall of the spec's
 * CapsuleKernelWalls proved live from inside a probe capsule, beside what doctor.c proves for
 * every driver (ids, capabilities, no_new_privs, loopback only, the read-only root, /dev, the
 * seccomp refusals, the limits). The system calls are made through perl's syscall() (the host's
 * perl in the system mounts); numbers are this architecture's. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "orchestrator/doctor-internal.h"

#define DOCTOR_KERNEL_PROBE_SECONDS 60

static const char *const namespaces[] = {"user", "pid", "ipc", "uts", "mnt", "net", "cgroup"};

/* The refusals of threat 23 beyond doctor.c's (unshare, a mount in a new user namespace,
 * keyctl, bpf, ptrace): each must fail. */
static const struct {
        const char *key, *what;
        long nr;
} calls[] = {
        {"setns", "setns", SYS_setns},
        {"perf_event_open", "perf_event_open", SYS_perf_event_open},
        {"io_uring_setup", "io_uring_setup", SYS_io_uring_setup},
        {"userfaultfd", "userfaultfd", SYS_userfaultfd},
        {"init_module", "init_module", SYS_init_module},
        {"chroot", "chroot", SYS_chroot},
        {"sethostname", "sethostname", SYS_sethostname},
        {"mount", "mount", SYS_mount},
};

static int kernel_script(char *buf, size_t size) {
        int n = snprintf(buf, size,
                         "echo uid_map=$(awk '{printf \"%%s %%s %%s;\", $1, $2, $3}' /proc/self/uid_map);"
                         "echo gid_map=$(awk '{printf \"%%s %%s %%s;\", $1, $2, $3}' /proc/self/gid_map);"
                         "for n in user pid ipc uts mnt net cgroup; do echo ns_$n=$(readlink /proc/self/ns/$n); done;"
                         "echo cgroup=$(cut -d: -f3 /proc/self/cgroup | sort -u | tr '\\n' ' ');"
                         "printf shown=; for f in /proc/keys /proc/timer_list /proc/kallsyms /proc/kcore"
                         " /proc/sysrq-trigger /sys/firmware/*; do"
                         " [ \"$(head -c 64 \"$f\" 2>/dev/null | wc -c)\" -gt 0 ] && printf '%%s ' \"$f\"; done; echo;"
                         "(echo 1 >/proc/sys/kernel/ns_last_pid) 2>/dev/null && echo proc_sys=written || echo proc_sys=refused;"
                         "command -v perl >/dev/null 2>&1 || exit 0;"
                         "perl -e 'sub t { print $_[0], \"=\", ($_[1] >= 0 ? \"allowed\" : \"refused:\" . ($!+0)), \"\\n\" }");
        for (size_t i = 0; n > 0 && (size_t) n < size && i < ELEMENTSOF(calls); i++)
                n += snprintf(buf + n, size - (size_t) n, " t(\"%s\", syscall(%ld, 0, 0, 0, 0, 0));", calls[i].key,
                              calls[i].nr);
        if (n > 0 && (size_t) n < size)
                n += snprintf(buf + n, size - (size_t) n, "'; :");
        return n > 0 && (size_t) n < size ? 0 : -ENAMETOOLONG;
}

/* The job's ids: root is CONFIG_CAPSULE_ROOT_ID, the job its own, nothing else of the host. */
static void report_ids(Doctor *d, const Probe *p, const char *key, const char *check, unsigned job) {
        char want[128], buf[256];
        snprintf(want, sizeof(want), "0 %u 1;%u %u 1;", (unsigned) CONFIG_CAPSULE_ROOT_ID, job, job);
        const char *v = doctor_probe_get(p, key, buf, sizeof(buf));
        bool ok = v && streq(v, want);
        doctor_report(d, check, ok, "%s: %s%s", key, v && *v ? v : "(none)",
                      ok ? " (root is an id that owns nothing on the host, the job its own)" : " (must be exactly that)");
}

/* Every namespace the capsule's own: none is the worker's. */
static void report_namespaces(Doctor *d, const Probe *p) {
        char shared[256] = "", key[32], buf[128], host[128];
        bool ok = true;
        for (size_t i = 0; i < ELEMENTSOF(namespaces); i++) {
                char link[64];
                snprintf(key, sizeof(key), "ns_%s", namespaces[i]);
                snprintf(link, sizeof(link), "/proc/self/ns/%s", namespaces[i]);
                ssize_t k = readlink(link, host, sizeof(host) - 1);
                host[k > 0 ? k : 0] = 0;
                const char *v = doctor_probe_get(p, key, buf, sizeof(buf));
                if (v && *v && k > 0 && !streq(v, host))
                        continue;
                ok = false;
                size_t l = strlen(shared);
                snprintf(shared + l, sizeof(shared) - l, "%s%s", l ? ", " : "", namespaces[i]);
        }
        doctor_report(d, "probe_namespaces", ok, "%s%s", ok ? "user, pid, ipc, uts, mount, network and cgroup: each the capsule's own"
                                                            : "not the capsule's own: ", shared);
        const char *cg = doctor_probe_get(p, "cgroup", buf, sizeof(buf));
        doctor_report(d, "probe_cgroup_namespace", cg && streq(cg, "/"), "the job sees its cgroup as '%s'%s",
                      cg ? cg : "?", cg && streq(cg, "/") ? "" : " (must be /: the host's hierarchy hidden)");
}

static void report_proc_sys(Doctor *d, const Probe *p) {
        char buf[512], ps[32];
        const char *shown = doctor_probe_get(p, "shown", buf, sizeof(buf));
        const char *w = doctor_probe_get(p, "proc_sys", ps, sizeof(ps));
        bool ok = shown && !*shown && w && streq(w, "refused");
        doctor_report(d, "probe_masked_paths", ok, "%s; a write to /proc/sys %s",
                      !shown ? "the probe printed nothing" : *shown ? shown : "kcore, keys, timer_list, kallsyms, sysrq-trigger "
                                                                            "and /sys/firmware show nothing",
                      w ? w : "not tried");
}

/* Each call refused with EPERM (the filter's or the missing capability's answer): any other
 * error means it reached the kernel's code. */
static void report_calls(Doctor *d, const Probe *p) {
        char detail[1024] = "", v[64];
        bool ok = true, tried = false;
        for (size_t i = 0; i < ELEMENTSOF(calls); i++) {
                const char *r = doctor_probe_get(p, calls[i].key, v, sizeof(v));
                tried = tried || r;
                bool refused = r && streq(r, "refused:1");
                ok = ok && refused;
                size_t k = strlen(detail);
                snprintf(detail + k, sizeof(detail) - k, "%s%s %s", i ? ", " : "", calls[i].what,
                         refused ? "EPERM" : r ? r : "not tried");
        }
        if (!tried)
                doctor_report(d, "probe_kernel_calls", false, "cannot prove it: perl is not in the capsule");
        else
                doctor_report(d, "probe_kernel_calls", ok, "%s%s", detail, ok ? "" : " (each must be refused with EPERM)");
}

/* The worker's seccomp listener (capsule/seccomp-listen.h) told the probe's refused setns: it is
 * among the probe's walls, by name (docs/controller.md, "Walls in the result"). */
static void report_listener(Doctor *d, const Probe *p) {
        char v[64];
        if (!doctor_probe_get(p, "setns", v, sizeof(v))) {
                doctor_report(d, "probe_seccomp_listener", false, "cannot prove it: perl is not in the capsule");
                return;
        }
        const Walls *w = &p->res.walls;
        for (size_t i = 0; i < w->n; i++)
                if (streq(w->entry[i].wall, WALL_SYSCALL) && streq(w->entry[i].detail, "setns")) {
                        doctor_report(d, "probe_seccomp_listener", true,
                                      "the worker's seccomp listener named the probe's refused setns among its walls");
                        return;
                }
        doctor_report(d, "probe_seccomp_listener", false,
                      "the probe's refused setns is not among its walls: the seccomp listener did not tell it");
}

void doctor_probe_kernel_walls(Doctor *d) {
        char script[4096], buf[1200];
        char *argv[] = {(char *) "/bin/sh", (char *) "-c", script, NULL};
        Probe p;

        if (!d->driver.ops->host_kernel)
                return;
        if (kernel_script(script, sizeof(script)) < 0) {
                doctor_report(d, "probe_kernel_walls", false, "the probe's script does not fit");
                return;
        }
        int r = doctor_probe(d, d->config, "kernel", argv, DOCTOR_KERNEL_PROBE_SECONDS, &p);
        if (r < 0 || p.res.status != CAPSULE_SUCCEEDED) {
                doctor_report(d, "probe_kernel_walls", false, "the host kernel's walls probe did not complete: %s",
                              r < 0 ? strerror(-r) : doctor_probe_result(&p, buf, sizeof(buf)));
                if (r >= 0)
                        doctor_probe_free(&p);
                return;
        }
        report_ids(d, &p, "uid_map", "probe_user_namespace", (unsigned) d->config->container_uid);
        report_ids(d, &p, "gid_map", "probe_user_namespace_gid", (unsigned) d->config->container_gid);
        report_namespaces(d, &p);
        report_proc_sys(d, &p);
        report_calls(d, &p);
        report_listener(d, &p);
        /* Init refuses to run a job it could not confine (CAPSULE_LANDLOCK_ARG): that the probes
         * above ran is the proof that it did. */
        if (d->driver.ops->confines_writes && d->driver.ops->confines_writes(&d->driver))
                doctor_report(d, "probe_landlock", true,
                              "init confined every probe job's writes to /work and /tmp (it fails closed without Landlock)");
        else
                doctor_info(d, "probe_landlock", "the kernel has no Landlock: the job's writes are bounded by the read-only "
                                                 "root and mounts alone");
        doctor_probe_free(&p);
}

void doctor_isolation_line(Doctor *d) {
        _cleanup_(json_decrefp) json_t *iso = capsule_driver_isolation(&d->driver);
        char walls[512] = "";
        json_t *w;
        size_t i;
        json_array_foreach(json_object_get(iso, "walls"), i, w) {
                size_t k = strlen(walls);
                snprintf(walls + k, sizeof(walls) - k, "%s%s", i ? ", " : "", json_string_value(w));
        }
        doctor_info(d, "isolation", "engine %s, %s kernel; walls the probes below prove: %s", d->driver.ops->name,
                    streq(d->driver.ops->kernel, "host") ? "the host's" : "gVisor's", walls);
}
