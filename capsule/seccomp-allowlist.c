/* SPDX-License-Identifier: MIT */
/* The runc capsule's seccomp allow-list (capsule/seccomp-allowlist.h), as OCI's linux.seccomp.
 *
 * What runc 1.1 does with it (libcontainer/seccomp): it compiles the rules with libseccomp on
 * the host's kernel and loads the filter in the container's first process just before its
 * execve (noNewPrivileges is set), so init and everything it starts run under it; errnoRet and
 * defaultErrnoRet are honoured; rules of one syscall are ORed, the conditions of one rule ANDed
 * (different arguments only); a name libseccomp does not know is skipped. So every name below
 * is resolved with libseccomp by tests/unit/test-seccomp-allowlist.c, on the build's
 * architecture, and none of the names that test must see refused may appear here.
 *
 * Why the build's architecture only, where Docker adds x86 and x32 to x86_64: the jobs run the
 * host's 64-bit toolchains, and the compat entry points are a second syscall table with a
 * history of their own (int 0x80 from a 64-bit process, CVE-2009-2698, CVE-2010-3081); a
 * filter that names one architecture sends every other to libseccomp's bad-architecture
 * action, which kills the caller. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "capsule/seccomp-allowlist.h"
#include "capsule/seccomp-notify.h"
#include "capsule/seccomp-profile.h"
#include "common/macro.h"

/* Allowed with any argument, on every architecture: Docker's default allow-list
 * (moby profiles/seccomp/default.json) for a container without capabilities, without io_uring,
 * userfaultfd (not in Docker's either), ptrace, process_vm_readv/writev, name_to_handle_at,
 * fanotify_mark (its fanotify_init is refused), adjtimex and clock_adjtime (a job reads the
 * clock, it never steers it), and without the names of 32-bit ABIs. */
static const char *const allowed[] = {
        /* processes, threads, signals */
        "execve", "execveat", "exit", "exit_group", "wait4", "waitid", "kill", "tkill", "tgkill",
        "getpid", "getppid", "gettid", "getpgid", "setpgid", "getsid", "setsid", "set_tid_address",
        "set_robust_list", "get_robust_list", "rseq", "futex", "futex_waitv", "restart_syscall",
        "rt_sigaction", "rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn",
        "rt_sigsuspend", "rt_sigtimedwait", "rt_tgsigqueueinfo", "sigaltstack", "pidfd_open",
        "pidfd_send_signal", "prctl", "seccomp", "landlock_create_ruleset", "landlock_add_rule",
        "landlock_restrict_self", "sched_getaffinity", "sched_setaffinity", "sched_getattr",
        "sched_setattr", "sched_getparam", "sched_setparam", "sched_getscheduler",
        "sched_setscheduler", "sched_get_priority_max", "sched_get_priority_min",
        "sched_rr_get_interval", "sched_yield", "getpriority", "setpriority", "ioprio_get",
        "ioprio_set", "getrlimit", "setrlimit", "prlimit64", "getrusage", "times", "sysinfo", "uname",
        "getcpu", "membarrier", "getrandom",
        /* credentials (inside the user namespace, with no capability) */
        "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups", "setuid",
        "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid",
        "setgroups", "capget", "capset",
        /* memory */
        "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync", "mlock",
        "mlock2", "mlockall", "munlock", "munlockall", "remap_file_pages", "memfd_create",
        "memfd_secret", "pkey_alloc", "pkey_free", "pkey_mprotect", "process_mrelease",
        /* time (reading it, sleeping, timers) */
        "clock_gettime", "clock_getres", "clock_nanosleep", "gettimeofday", "nanosleep", "getitimer",
        "setitimer", "timer_create", "timer_delete", "timer_getoverrun", "timer_gettime",
        "timer_settime", "timerfd_create", "timerfd_gettime", "timerfd_settime",
        /* files and directories */
        "openat", "openat2", "close", "close_range", "read", "write", "readv", "writev", "pread64",
        "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2", "lseek", "dup", "dup3", "fcntl",
        "flock", "ioctl", "fstat", "newfstatat", "statx", "statfs", "fstatfs", "faccessat",
        "faccessat2", "getcwd", "chdir", "fchdir", "getdents64", "mkdirat", "unlinkat", "renameat",
        "renameat2", "linkat", "symlinkat", "readlinkat", "fchmod", "fchmodat", "fchown", "fchownat",
        "utimensat", "truncate", "ftruncate", "fallocate", "fadvise64", "readahead", "fsync",
        "fdatasync", "sync", "syncfs", "sync_file_range", "umask", "copy_file_range", "sendfile",
        "splice", "tee", "vmsplice", "getxattr", "lgetxattr", "fgetxattr", "setxattr", "lsetxattr",
        "fsetxattr", "listxattr", "llistxattr", "flistxattr", "removexattr", "lremovexattr",
        "fremovexattr", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
        /* descriptors that wait */
        "pipe2", "eventfd2", "signalfd4", "epoll_create1", "epoll_ctl", "epoll_pwait", "epoll_pwait2",
        "ppoll", "pselect6", "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents",
        "io_pgetevents",
        /* sockets (socket itself: socket_rules below; connect and sendto: rules_json) */
        "socketpair", "bind", "listen", "accept", "accept4", "getsockname", "getpeername",
        "getsockopt", "setsockopt", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg",
        "shutdown",
        /* System V and POSIX IPC (the capsule's own ipc namespace) */
        "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semtimedop", "semctl", "shmget",
        "shmat", "shmdt", "shmctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive",
        "mq_notify", "mq_getsetattr",
};

#if defined(__x86_64__)
#define NATIVE_ARCH "SCMP_ARCH_X86_64"
/* x86_64's older entry points of the same calls (aarch64 has only the *at and *2 forms), and
 * arch_prctl, which sets the thread pointer. Not modify_ldt, get/set_thread_area: 16- and
 * 32-bit segments a 64-bit job has no use for. */
static const char *const allowed_arch[] = {
        "arch_prctl", "open", "creat", "stat", "lstat", "access", "mkdir", "rmdir", "unlink", "rename",
        "link", "symlink", "readlink", "chmod", "chown", "lchown", "utime", "utimes", "futimesat",
        "getdents", "pipe", "dup2", "poll", "select", "epoll_create", "epoll_wait", "eventfd",
        "signalfd", "inotify_init", "fork", "vfork", "alarm", "pause", "time", "getpgrp", NULL,
};
#elif defined(__aarch64__)
#define NATIVE_ARCH "SCMP_ARCH_AARCH64"
static const char *const allowed_arch[] = { NULL };
#else
#error "capsule/seccomp-allowlist.c: no allow-list for this architecture"
#endif

typedef struct ArgCmp {
        unsigned index;
        uint64_t value, value_two; /* SCMP_CMP_MASKED_EQ: (arg & value) == value_two */
        const char *op;
} ArgCmp;

/* One rule: ALLOW when every one of its comparisons holds (at most three, on different
 * arguments). */
typedef struct ArgRule {
        const char *name;
        ArgCmp args[3];
} ArgRule;

#define EQ(i, v) { (i), (v), 0, "SCMP_CMP_EQ" }
#define MASKED(i, m, v) { (i), (m), (v), "SCMP_CMP_MASKED_EQ" }
#define SOCK_TYPE_MASK 0xf
/* mknod's and mknodat's mode: a file (0 or S_IFREG), a FIFO or a socket; never a device. */
#define MKNOD_RULES(name, i)                                                                       \
        { name, { MASKED(i, S_IFMT, 0) } }, { name, { MASKED(i, S_IFMT, S_IFREG) } },              \
        { name, { MASKED(i, S_IFMT, S_IFIFO) } }, { name, { MASKED(i, S_IFMT, S_IFSOCK) } }

static const ArgRule arg_rules[] = {
        /* A thread or a process, never a namespace. */
        { "clone", { MASKED(0, CAPSULE_CLONE_NS_MASK, 0) } },
        /* Local sockets, TCP, UDP and ping over the capsule's own loopback, and the routing
         * table that getaddrinfo reads: no packet, raw, vsock, SCTP, DCCP, other netlink
         * families, whose kernel code (and module autoloading) a job has no need of. */
        { "socket", { EQ(0, AF_UNIX) } },
        { "socket", { EQ(0, AF_INET), MASKED(1, SOCK_TYPE_MASK, SOCK_STREAM), EQ(2, 0) } },
        { "socket", { EQ(0, AF_INET), MASKED(1, SOCK_TYPE_MASK, SOCK_STREAM), EQ(2, IPPROTO_TCP) } },
        { "socket", { EQ(0, AF_INET), MASKED(1, SOCK_TYPE_MASK, SOCK_DGRAM), EQ(2, 0) } },
        { "socket", { EQ(0, AF_INET), MASKED(1, SOCK_TYPE_MASK, SOCK_DGRAM), EQ(2, IPPROTO_UDP) } },
        { "socket", { EQ(0, AF_INET), MASKED(1, SOCK_TYPE_MASK, SOCK_DGRAM), EQ(2, IPPROTO_ICMP) } },
        { "socket", { EQ(0, AF_INET6), MASKED(1, SOCK_TYPE_MASK, SOCK_STREAM), EQ(2, 0) } },
        { "socket", { EQ(0, AF_INET6), MASKED(1, SOCK_TYPE_MASK, SOCK_STREAM), EQ(2, IPPROTO_TCP) } },
        { "socket", { EQ(0, AF_INET6), MASKED(1, SOCK_TYPE_MASK, SOCK_DGRAM), EQ(2, 0) } },
        { "socket", { EQ(0, AF_INET6), MASKED(1, SOCK_TYPE_MASK, SOCK_DGRAM), EQ(2, IPPROTO_UDP) } },
        { "socket", { EQ(0, AF_INET6), MASKED(1, SOCK_TYPE_MASK, SOCK_DGRAM), EQ(2, IPPROTO_ICMPV6) } },
        { "socket", { EQ(0, AF_NETLINK), EQ(2, NETLINK_ROUTE) } },
        /* Docker's personas: PER_LINUX, PER_LINUX32, UNAME26, both, and the query. */
        { "personality", { EQ(0, 0x0) } },
        { "personality", { EQ(0, 0x8) } },
        { "personality", { EQ(0, 0x20000) } },
        { "personality", { EQ(0, 0x20008) } },
        { "personality", { EQ(0, 0xffffffff) } },
        MKNOD_RULES("mknodat", 2),
#if defined(__x86_64__)
        MKNOD_RULES("mknod", 1),
#endif
};

static json_t *names_json(const char *const *names, size_t n) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < n && names[i]; i++)
                if (json_array_append_new(a, json_string(names[i])) < 0) {
                        json_decref(a);
                        return NULL;
                }
        return a;
}

static json_t *arg_rule_json(const ArgRule *rule) {
        json_t *args = json_array();
        for (size_t i = 0; args && i < ELEMENTSOF(rule->args) && rule->args[i].op; i++) {
                const ArgCmp *c = &rule->args[i];
                if (json_array_append_new(args, json_pack("{s:I, s:I, s:I, s:s}", "index", (json_int_t) c->index,
                                                          "value", (json_int_t) c->value, "valueTwo",
                                                          (json_int_t) c->value_two, "op", c->op)) < 0) {
                        json_decref(args);
                        return NULL;
                }
        }
        return json_pack("{s:[s], s:s, s:o}", "names", rule->name, "action", "SCMP_ACT_ALLOW", "args", args);
}

static int append(json_t *rules, json_t *rule) {
        return json_array_append_new(rules, rule) < 0 ? -ENOMEM : 0;
}

static json_t *rules_json(bool layer, bool notify) {
        static const char *const layer_calls[] = CAPSULE_SECCOMP_LAYER_CALLS;
        json_t *rules = json_array();
        if (!rules)
                return NULL;
        int r = append(rules, json_pack("{s:o, s:s}", "names", names_json(allowed, ELEMENTSOF(allowed)),
                                        "action", "SCMP_ACT_ALLOW"));
        if (r >= 0 && allowed_arch[0])
                r = append(rules, json_pack("{s:o, s:s}", "names",
                                            names_json(allowed_arch, ELEMENTSOF(allowed_arch)), "action",
                                            "SCMP_ACT_ALLOW"));
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(arg_rules); i++)
                r = append(rules, arg_rule_json(&arg_rules[i]));
        /* clone3's flags are behind a pointer: ENOSYS, on which glibc's pthread_create, fork and
         * posix_spawn call clone, whose flags the filter reads. */
        if (r >= 0)
                r = append(rules, json_pack("{s:[s], s:s, s:i}", "names", "clone3", "action", "SCMP_ACT_ERRNO",
                                            "errnoRet", ENOSYS));
        /* connect and sendto: allowed, or told to the listener (which lets them on to the
         * kernel, or answers what the network namespace would), with the refusals it reports
         * (capsule/seccomp-notify.h). */
        if (r >= 0 && !notify)
                r = append(rules, json_pack("{s:[s, s], s:s}", "names", "connect", "sendto", "action", "SCMP_ACT_ALLOW"));
        if (r >= 0 && notify)
                r = capsule_seccomp_notify_rules(rules, layer);
        if (r >= 0 && layer)
                r = append(rules, json_pack("{s:o, s:s}", "names", names_json(layer_calls, ELEMENTSOF(layer_calls)),
                                            "action", "SCMP_ACT_ALLOW"));
        if (r < 0) {
                json_decref(rules);
                return NULL;
        }
        return rules;
}

json_t *capsule_seccomp_allowlist_json(bool layer, bool notify) {
        json_t *rules = rules_json(layer, notify);
        if (!rules)
                return NULL;
        return json_pack("{s:s, s:i, s:[s], s:o}", "defaultAction", "SCMP_ACT_ERRNO", "defaultErrnoRet", EPERM,
                         "architectures", NATIVE_ARCH, "syscalls", rules);
}
