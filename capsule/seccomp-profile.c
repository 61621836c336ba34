/* SPDX-License-Identifier: MIT */
/* The capsule's seccomp profile (capsule/seccomp-profile.h), as OCI's linux.seccomp.
 *
 * What runsc 0.0~20240729 does with it (runsc/specutils/seccomp): the filter is compiled in
 * the sandbox at every start and attached to the container's first process (init), so every
 * job process inherits it; SCMP_ACT_ERRNO always answers EPERM (errnoRet is ignored);
 * SCMP_ACT_TRACE without a tracer answers ENOSYS, as Linux does; the rules of one syscall are
 * tried in their order, the first that matches decides; names it does not know are skipped
 * with a warning in its log.
 *
 * Why a default of ALLOW and a list of refusals, not Docker's allow-list with a default of
 * EPERM: for this gVisor both refuse the same calls (every syscall its table implements that
 * Docker's allow-list leaves out is in refused[] below, or gVisor itself answers it ENOSYS or
 * EPERM: getpmsg, nfsservctl, sysfs, sysctl, ustat and the like), while Docker's 290 names make
 * a filter that runsc compiles at each start for 8 to 16 ms more per capsule (this list: no
 * measurable cost; docs/capsule.md), and they answer EPERM for the syscalls gVisor lacks
 * (openat2 ...) where gVisor answers ENOSYS, on which callers fall back.
 * The price: a syscall a later gVisor adds is allowed until it is named here. */
#define _GNU_SOURCE
#include <stdint.h>
#include <sys/stat.h>

#include "capsule/seccomp-profile.h"
#include "common/macro.h"

/* What Docker's default profile (moby profiles/seccomp/default.json) refuses to a container
 * without capabilities, answered EPERM as Docker answers: the calls it grants only with
 * CAP_SYS_ADMIN, SYS_BOOT, SYS_CHROOT, SYS_MODULE, SYS_PACCT, SYS_PTRACE (Docker allows ptrace
 * and process_vm_* on kernels >= 4.8; here a job must not read or steer another of its
 * processes, and clone3's ENOSYS below relies on there being no tracer), SYS_RAWIO, SYS_TIME,
 * SYS_TTY_CONFIG, SYS_NICE, SYSLOG, BPF, PERFMON or DAC_READ_SEARCH; then what none of its rules
 * allows (pivot_root, keyrings, kexec, swap, userfaultfd, the NUMA page moves, create_module,
 * gVisor's afs_syscall test hook); and io_uring (newer Docker refuses it: its requests are not
 * seen by seccomp) and name_to_handle_at (half of the file-handle pair whose other half,
 * open_by_handle_at, was the "shocker" escape). Names of x86_64 and arm64; those this gVisor
 * does not have (mount_setattr, quotactl_fd, pidfd_getfd, process_madvise,
 * set_mempolicy_home_node) it skips, and answers ENOSYS to. */
static const char *const refused[] = {
        "bpf", "fanotify_init", "fsconfig", "fsmount", "fsopen", "fspick", "lookup_dcookie",
        "mount", "mount_setattr", "move_mount", "open_tree", "perf_event_open", "quotactl",
        "quotactl_fd", "setdomainname", "sethostname", "setns", "syslog", "umount2", "unshare",
        "reboot", "chroot", "delete_module", "init_module", "finit_module", "acct", "kcmp",
        "pidfd_getfd", "process_madvise", "process_vm_readv", "process_vm_writev", "ptrace", "iopl",
        "ioperm", "settimeofday", "clock_settime", "vhangup", "get_mempolicy", "mbind",
        "set_mempolicy", "set_mempolicy_home_node", "open_by_handle_at", "pivot_root", "keyctl",
        "add_key", "request_key", "kexec_load", "kexec_file_load", "swapon", "swapoff",
        "userfaultfd", "name_to_handle_at", "io_uring_setup", "io_uring_enter", "io_uring_register",
        "migrate_pages", "move_pages", "create_module", "afs_syscall",
};

/* personality(2) with the values Docker allows: PER_LINUX, PER_LINUX32, UNAME26 and their
 * combination, and the query 0xffffffff. Any other persona (READ_IMPLIES_EXEC,
 * ADDR_NO_RANDOMIZE ...) is refused. */
static const uint64_t personas[] = { 0x0, 0x8, 0x20000, 0x20008, 0xffffffff };

#define AF_VSOCK_NUMBER 40

/* The file types of device nodes, as mknod's mode carries them. */
static const uint64_t device_types[] = { S_IFCHR, S_IFBLK };

static json_t *names_json(const char *const *names, size_t n) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < n; i++)
                if (json_array_append_new(a, json_string(names[i])) < 0) {
                        json_decref(a);
                        return NULL;
                }
        return a;
}

static json_t *rule_json(const char *name, const char *action) {
        return json_pack("{s:[s], s:s}", "names", name, "action", action);
}

/* One syscall, action when its argument index compares to value (value_two: for
 * SCMP_CMP_MASKED_EQ, where value is the mask). */
static json_t *arg_rule_json(const char *name, const char *action, unsigned index, uint64_t value,
                             uint64_t value_two, const char *op) {
        return json_pack("{s:[s], s:s, s:[{s:I, s:I, s:I, s:s}]}", "names", name, "action", action,
                         "args", "index", (json_int_t) index, "value", (json_int_t) value,
                         "valueTwo", (json_int_t) value_two, "op", op);
}

static int append(json_t *rules, json_t *rule) {
        return json_array_append_new(rules, rule) < 0 ? -1 : 0;
}

json_t *capsule_seccomp_json(bool layer) {
        json_t *rules = json_array();
        int r;

        if (!rules)
                return NULL;
        /* A thread or a process, never a namespace: allowed without any of the flags, else
         * EPERM. */
        r = append(rules, arg_rule_json("clone", "SCMP_ACT_ALLOW", 0, CAPSULE_CLONE_NS_MASK, 0,
                                        "SCMP_CMP_MASKED_EQ"));
        if (r >= 0)
                r = append(rules, rule_json("clone", "SCMP_ACT_ERRNO"));
        /* clone3's flags are in memory the filter cannot read: ENOSYS, on which glibc's
         * pthread_create and posix_spawn fall back to clone. */
        if (r >= 0)
                r = append(rules, rule_json("clone3", "SCMP_ACT_TRACE"));
        if (r >= 0)
                r = append(rules, arg_rule_json("socket", "SCMP_ACT_ERRNO", 0, AF_VSOCK_NUMBER, 0,
                                                "SCMP_CMP_EQ"));
        /* No device node: this gVisor checks no CAP_MKNOD and no nodev, so a job could make
         * fuse (10:229) or tun (10:200) anew in /tmp or /work and open it past the /dev
         * covers; Docker has that refusal from the kernel. FIFOs, sockets and files stay. */
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(device_types); i++) {
                r = append(rules, arg_rule_json("mknod", "SCMP_ACT_ERRNO", 1, S_IFMT, device_types[i],
                                                "SCMP_CMP_MASKED_EQ"));
                if (r >= 0)
                        r = append(rules, arg_rule_json("mknodat", "SCMP_ACT_ERRNO", 2, S_IFMT, device_types[i],
                                                        "SCMP_CMP_MASKED_EQ"));
        }
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(personas); i++)
                r = append(rules, arg_rule_json("personality", "SCMP_ACT_ALLOW", 0, personas[i], 0,
                                                "SCMP_CMP_EQ"));
        if (r >= 0)
                r = append(rules, rule_json("personality", "SCMP_ACT_ERRNO"));
        const char *names[ELEMENTSOF(refused)];
        size_t n = 0;
        static const char *const layer_calls[] = CAPSULE_SECCOMP_LAYER_CALLS;
        for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
                bool left = false;
                for (size_t k = 0; layer && k < ELEMENTSOF(layer_calls); k++)
                        left = left || streq(refused[i], layer_calls[k]);
                if (!left)
                        names[n++] = refused[i];
        }
        if (r >= 0)
                r = append(rules, json_pack("{s:o, s:s}", "names", names_json(names, n), "action",
                                            "SCMP_ACT_ERRNO"));
        if (r < 0) {
                json_decref(rules);
                return NULL;
        }
        /* The architectures are informational for runsc (it filters its own only). */
        return json_pack("{s:s, s:[s, s], s:o}", "defaultAction", "SCMP_ACT_ALLOW",
                         "architectures", "SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64", "syscalls",
                         rules);
}
