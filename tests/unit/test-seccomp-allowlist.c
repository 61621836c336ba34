/* SPDX-License-Identifier: MIT */
/* capsule/seccomp-allowlist.c: the runc capsule's linux.seccomp. Its shape (default EPERM, the
 * build's architecture only, clone3 ENOSYS); every name it holds is a syscall of this
 * architecture that libseccomp knows (runc skips a name it does not: a typo would drop a rule
 * silently); none of the families threat 23 names is allowed, read through a small evaluator of
 * the rules as runc compiles them (a rule's conditions ANDed, a syscall's rules ORed) so the
 * rules with arguments (clone, socket, personality, mknod) are judged on the arguments a job
 * would pass; the layer's profile adds mount and umount2 and nothing else.
 * `test-seccomp-allowlist --print plain|layer` prints the profile (for
 * tests/integration/test-runc-seccomp.sh). */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "capsule/seccomp-allowlist.h"
#include "capsule/seccomp-notify.h"
#include "capsule/seccomp-profile.h"
#include "common/json-util.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"

/* What no job may call, whatever its arguments (threat 23); clone3 answers ENOSYS (checked
 * apart). A name here that libseccomp does not know fails the test too. */
static const char *const must_refuse[] = {
        "unshare", "setns", "mount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount",
        "fspick", "open_tree", "move_mount", "mount_setattr", "bpf", "perf_event_open", "keyctl",
        "add_key", "request_key", "io_uring_setup", "io_uring_enter", "io_uring_register",
        "userfaultfd", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
        "process_madvise", "kexec_load", "kexec_file_load", "init_module", "finit_module",
        "delete_module", "create_module", "open_by_handle_at", "name_to_handle_at", "syslog", "acct",
        "quotactl", "quotactl_fd", "swapon", "swapoff", "reboot", "chroot", "sethostname",
        "setdomainname", "clock_settime", "settimeofday", "adjtimex", "clock_adjtime",
        "lookup_dcookie", "fanotify_init", "iopl", "ioperm", "vhangup", "mbind", "set_mempolicy",
        "get_mempolicy", "migrate_pages", "move_pages", "modify_ldt", "uselib", "nfsservctl",
        "_sysctl", "ustat", "sysfs", "umount", "vm86", "vm86old", "stime", "socketcall",
};

/* Each test runs on the profile without a listener, then on the one that notifies the
 * worker's listener (capsule/seccomp-notify.h; the groups' setups set this). */
static bool notify_variant;

static int group_plain(void **state) {
        (void) state;
        notify_variant = false;
        return 0;
}

static int group_notify(void **state) {
        (void) state;
        notify_variant = true;
        return 0;
}

static json_t *profile(bool layer) {
        json_t *p = capsule_seccomp_allowlist_json(layer, notify_variant);
        assert_non_null(p);
        return p;
}

static bool rule_names(json_t *rule, const char *name) {
        size_t i;
        json_t *n;
        json_array_foreach(json_object_get(rule, "names"), i, n)
                if (streq(json_string_value(n), name))
                        return true;
        return false;
}

/* Whether every condition of rule holds for args. */
static bool rule_holds(json_t *rule, const uint64_t args[6]) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(rule, "args"), i, c) {
                uint64_t idx = (uint64_t) json_integer_value(json_object_get(c, "index"));
                uint64_t v = (uint64_t) json_integer_value(json_object_get(c, "value"));
                uint64_t v2 = (uint64_t) json_integer_value(json_object_get(c, "valueTwo"));
                const char *op = json_string_value(json_object_get(c, "op"));
                assert_true(idx < 6);
                bool eq = streq(op, "SCMP_CMP_EQ"), masked = streq(op, "SCMP_CMP_MASKED_EQ");
                bool ne = streq(op, "SCMP_CMP_NE");
                if (!eq && !masked && !ne)
                        fail_msg("unexpected op %s", op);
                if (ne ? args[idx] == v : eq ? args[idx] != v : (args[idx] & v) != v2)
                        return false;
        }
        return true;
}

/* What the listener answers a notification of name(args) (capsule_seccomp_notify_judge, with
 * nothing read at an address: connect and sendto go on to the kernel), as verdict's value. */
static int listener_answer(const char *name, const uint64_t args[6]) {
        struct seccomp_notif req = { .data = { .arch = SCMP_ARCH_NATIVE } };
        SeccompVerdict v;
        req.data.nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_NATIVE, name);
        memcpy(req.data.args, args, sizeof(req.data.args));
        capsule_seccomp_notify_judge(&req, NULL, 0, &v);
        return v.cont ? 0 : v.error;
}

/* The errno the profile answers name(args) with, 0 when it allows it (a notifying rule: what
 * the listener answers). Two matching rules of different actions would be libseccomp's to
 * settle: the profile has none (asserted). ret_notified (may be NULL): a notifying rule
 * matched. */
static int verdict_notified(json_t *p, const char *name, const uint64_t args[6], bool *ret_notified) {
        size_t i;
        json_t *rule;
        int found = -1;
        if (ret_notified)
                *ret_notified = false;
        json_array_foreach(json_object_get(p, "syscalls"), i, rule) {
                if (!rule_names(rule, name) || !rule_holds(rule, args))
                        continue;
                const char *action = json_string_value(json_object_get(rule, "action"));
                bool notify = streq(action, "SCMP_ACT_NOTIFY");
                if (notify && ret_notified)
                        *ret_notified = true;
                int v = streq(action, "SCMP_ACT_ALLOW") ? 0
                        : notify                        ? 1000 + listener_answer(name, args)
                                                        : (int) json_integer_value(json_object_get(rule, "errnoRet"));
                if (found >= 0 && found != v)
                        fail_msg("%s: rules of different actions match", name);
                found = v;
        }
        if (found >= 1000)
                return found - 1000;
        return found >= 0 ? found : (int) json_integer_value(json_object_get(p, "defaultErrnoRet"));
}

static int verdict(json_t *p, const char *name, const uint64_t args[6]) {
        return verdict_notified(p, name, args, NULL);
}

#define ARGS(...) ((const uint64_t[6]) { __VA_ARGS__ })
static const char *const CAPSULE_LAYER_CALLS_FOR_TEST[] = CAPSULE_SECCOMP_LAYER_CALLS;

static void test_shape(void **state) {
        (void) state;
        _cleanup_(json_decrefp) json_t *p = profile(false);
        assert_string_equal(json_string_value(json_object_get(p, "defaultAction")), "SCMP_ACT_ERRNO");
        assert_int_equal(json_integer_value(json_object_get(p, "defaultErrnoRet")), EPERM);
        json_t *arch = json_object_get(p, "architectures");
        assert_int_equal(json_array_size(arch), 1);
        /* SCMP_ARCH_X86_64 is libseccomp's "x86_64", SCMP_ARCH_AARCH64 its "aarch64" */
        const char *a = json_string_value(json_array_get(arch, 0));
        char lower[32] = "";
        assert_non_null(a);
        assert_true(strncmp(a, "SCMP_ARCH_", strlen("SCMP_ARCH_")) == 0 && strlen(a) < sizeof(lower) + 10);
        for (size_t k = 0; a[10 + k]; k++)
                lower[k] = (char) tolower((unsigned char) a[10 + k]);
        assert_int_equal(seccomp_arch_resolve_name(lower), seccomp_arch_native());
        size_t i;
        json_t *rule;
        assert_true(json_array_size(json_object_get(p, "syscalls")) > 10);
        json_array_foreach(json_object_get(p, "syscalls"), i, rule) {
                const char *action = json_string_value(json_object_get(rule, "action"));
                assert_non_null(action);
                assert_true(json_array_size(json_object_get(rule, "names")) > 0);
                if (streq(action, "SCMP_ACT_ERRNO"))
                        assert_true(json_integer_value(json_object_get(rule, "errnoRet")) > 0);
                else if (notify_variant && streq(action, "SCMP_ACT_NOTIFY"))
                        /* runc refuses to notify write: it writes the descriptor's number with it */
                        assert_false(rule_names(rule, "write"));
                else
                        assert_string_equal(action, "SCMP_ACT_ALLOW");
        }
        /* clone3: ENOSYS and nothing else, so libc falls back to clone. */
        assert_int_equal(verdict(p, "clone3", ARGS(0)), ENOSYS);
}

/* Every name a syscall of this architecture as libseccomp (runc's) knows it. */
static void test_names_resolve(void **state) {
        (void) state;
        for (int layer = 0; layer < 2; layer++) {
                _cleanup_(json_decrefp) json_t *p = profile(layer);
                size_t i, k;
                json_t *rule, *n;
                json_array_foreach(json_object_get(p, "syscalls"), i, rule)
                        json_array_foreach(json_object_get(rule, "names"), k, n) {
                                const char *name = json_string_value(n);
                                if (seccomp_syscall_resolve_name_arch(SCMP_ARCH_NATIVE, name) < 0)
                                        fail_msg("'%s' is no syscall of this architecture", name);
                        }
        }
        for (size_t i = 0; i < ELEMENTSOF(must_refuse); i++)
                if (seccomp_syscall_resolve_name(must_refuse[i]) == __NR_SCMP_ERROR)
                        fail_msg("'%s' (refused) is no syscall libseccomp knows", must_refuse[i]);
}

static void test_refused(void **state) {
        (void) state;
        _cleanup_(json_decrefp) json_t *p = profile(false);
        size_t i, k;
        json_t *rule, *n;
        /* Not named in any rule with any argument, but to be told to the listener ... */
        json_array_foreach(json_object_get(p, "syscalls"), i, rule) {
                if (streq(json_string_value(json_object_get(rule, "action")), "SCMP_ACT_NOTIFY"))
                        continue;
                json_array_foreach(json_object_get(rule, "names"), k, n)
                        for (size_t r = 0; r < ELEMENTSOF(must_refuse); r++)
                                if (streq(json_string_value(n), must_refuse[r]))
                                        fail_msg("'%s' is in the allow-list", must_refuse[r]);
        }
        /* ... so the default, or the listener, answers them EPERM. */
        for (size_t r = 0; r < ELEMENTSOF(must_refuse); r++)
                assert_int_equal(verdict(p, must_refuse[r], ARGS(0)), EPERM);
}

static void test_clone(void **state) {
        (void) state;
        _cleanup_(json_decrefp) json_t *p = profile(false);
        const uint64_t ns[] = { CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
                                CLONE_NEWPID, CLONE_NEWNET };
        for (size_t i = 0; i < ELEMENTSOF(ns); i++) {
                assert_int_equal(verdict(p, "clone", ARGS(ns[i] | SIGCHLD)), EPERM);
                assert_int_equal(verdict(p, "clone", ARGS(ns[i] | CLONE_VM | CLONE_THREAD | CLONE_SIGHAND)), EPERM);
        }
        /* fork, a thread, posix_spawn */
        assert_int_equal(verdict(p, "clone", ARGS(SIGCHLD)), 0);
        assert_int_equal(verdict(p, "clone", ARGS(CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
                                                  CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID |
                                                  CLONE_CHILD_CLEARTID)),
                         0);
        assert_int_equal(verdict(p, "clone", ARGS(CLONE_VM | CLONE_VFORK | SIGCHLD)), 0);
}

static void test_socket(void **state) {
        (void) state;
        _cleanup_(json_decrefp) json_t *p = profile(false);
        const uint64_t cloexec = SOCK_CLOEXEC | SOCK_NONBLOCK;
        /* raw, packet, vsock, other protocols and netlink families */
        const uint64_t refused[][3] = {
                { AF_INET, SOCK_RAW, IPPROTO_ICMP }, { AF_INET6, SOCK_RAW, IPPROTO_RAW }, { AF_PACKET, SOCK_RAW, 0 },
                { AF_PACKET, SOCK_DGRAM, 0 }, { AF_VSOCK, SOCK_STREAM, 0 }, { AF_INET, SOCK_STREAM, IPPROTO_SCTP },
                { AF_INET, SOCK_SEQPACKET, IPPROTO_SCTP }, { AF_INET, SOCK_DCCP, 0 }, { AF_INET, SOCK_DGRAM, IPPROTO_UDPLITE },
                { AF_NETLINK, SOCK_RAW, NETLINK_KOBJECT_UEVENT }, { AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER },
                { AF_NETLINK, SOCK_RAW, NETLINK_AUDIT }, { AF_KEY, SOCK_RAW, 2 }, { AF_ALG, SOCK_SEQPACKET, 0 },
                { AF_BLUETOOTH, SOCK_RAW, 0 }, { AF_CAN, SOCK_RAW, 1 }, { AF_XDP, SOCK_RAW, 0 },
                { AF_RDS, SOCK_SEQPACKET, 0 }, { AF_TIPC, SOCK_STREAM, 0 }, { AF_INET | (1ULL << 32), SOCK_STREAM, 0 },
        };
        for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
                assert_int_equal(verdict(p, "socket", ARGS(refused[i][0], refused[i][1], refused[i][2])), EPERM);
                assert_int_equal(verdict(p, "socket", ARGS(refused[i][0], refused[i][1] | cloexec, refused[i][2])), EPERM);
        }
        const uint64_t allowed[][3] = {
                { AF_UNIX, SOCK_STREAM, 0 }, { AF_UNIX, SOCK_DGRAM, 0 }, { AF_UNIX, SOCK_SEQPACKET, 0 },
                { AF_INET, SOCK_STREAM, 0 }, { AF_INET, SOCK_STREAM, IPPROTO_TCP }, { AF_INET, SOCK_DGRAM, 0 },
                { AF_INET, SOCK_DGRAM, IPPROTO_UDP }, { AF_INET, SOCK_DGRAM, IPPROTO_ICMP }, { AF_INET6, SOCK_STREAM, 0 },
                { AF_INET6, SOCK_DGRAM, IPPROTO_UDP }, { AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6 },
                { AF_NETLINK, SOCK_RAW, NETLINK_ROUTE }, { AF_NETLINK, SOCK_DGRAM, NETLINK_ROUTE },
        };
        for (size_t i = 0; i < ELEMENTSOF(allowed); i++) {
                assert_int_equal(verdict(p, "socket", ARGS(allowed[i][0], allowed[i][1], allowed[i][2])), 0);
                assert_int_equal(verdict(p, "socket", ARGS(allowed[i][0], allowed[i][1] | cloexec, allowed[i][2])), 0);
        }
}

static void test_personality_mknod(void **state) {
        (void) state;
        _cleanup_(json_decrefp) json_t *p = profile(false);
        const uint64_t ok[] = { 0, 0x8, 0x20000, 0x20008, 0xffffffff };
        for (size_t i = 0; i < ELEMENTSOF(ok); i++)
                assert_int_equal(verdict(p, "personality", ARGS(ok[i])), 0);
        /* READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE, MMAP_PAGE_ZERO, PER_BSD */
        const uint64_t no[] = { 0x0400000, 0x0040000, 0x0100000, 0x6, 0x20000 | 0x0040000 };
        for (size_t i = 0; i < ELEMENTSOF(no); i++)
                assert_int_equal(verdict(p, "personality", ARGS(no[i])), EPERM);
        const char *calls[] = { "mknodat", "mknod" };
        for (size_t c = 0; c < ELEMENTSOF(calls); c++) {
                if (seccomp_syscall_resolve_name_arch(SCMP_ARCH_NATIVE, calls[c]) < 0)
                        continue; /* aarch64 has no mknod */
                unsigned mode = streq(calls[c], "mknod") ? 1 : 2;
                uint64_t a[6] = { 0 };
                a[mode] = S_IFCHR | 0600;
                assert_int_equal(verdict(p, calls[c], a), EPERM);
                a[mode] = S_IFBLK | 0600;
                assert_int_equal(verdict(p, calls[c], a), EPERM);
                a[mode] = S_IFIFO | 0600;
                assert_int_equal(verdict(p, calls[c], a), 0);
                a[mode] = S_IFREG | 0600;
                assert_int_equal(verdict(p, calls[c], a), 0);
                a[mode] = S_IFSOCK | 0600;
                assert_int_equal(verdict(p, calls[c], a), 0);
        }
}

/* What ordinary work needs is there (a sample: a profile that lost one of these would break
 * every job, which the integration test would show too). */
static void test_ordinary(void **state) {
        (void) state;
        _cleanup_(json_decrefp) json_t *p = profile(false);
        const char *need[] = { "execve", "openat", "read", "write", "mmap", "futex", "wait4", "pipe2",
                               "rt_sigaction", "exit_group", "bind", "connect", "accept4", "statx", "getdents64",
                               "prctl", "seccomp", "landlock_restrict_self", "capset", "setresuid" };
        for (size_t i = 0; i < ELEMENTSOF(need); i++)
                assert_int_equal(verdict(p, need[i], ARGS(0)), 0);
}

/* Every call Docker's default profile allows a container without capabilities on x86_64 is
 * allowed here too, but for those this profile refuses on purpose (docs/capsule-engines.md, "The
 * runc engine's walls": adjtimex and clock_adjtime, fanotify_mark, io_uring, name_to_handle_at,
 * the thread-area calls and modify_ldt; epoll_ctl_old, epoll_wait_old and ipc have no x86_64
 * entry). A profile that lost one of them breaks jobs that Docker runs: getrandom was missing
 * once, and node aborted at start (its CSPRNG) in every runc capsule. */
static void test_docker_default(void **state) {
        (void) state;
        _cleanup_(json_decrefp) json_t *p = profile(false);
        const char *const docker[] = {
        "accept", "accept4", "access", "alarm", "bind", "brk", "capget", "capset", "chdir", "chmod", "chown",
        "clock_getres", "clock_gettime", "clock_nanosleep", "close", "close_range", "connect",
        "copy_file_range", "creat", "dup", "dup2", "dup3", "epoll_create", "epoll_create1", "epoll_ctl",
        "epoll_pwait", "epoll_pwait2", "epoll_wait", "eventfd", "eventfd2", "execve", "execveat", "exit",
        "exit_group", "faccessat", "faccessat2", "fadvise64", "fallocate", "fchdir", "fchmod", "fchmodat",
        "fchown", "fchownat", "fcntl", "fdatasync", "fgetxattr", "flistxattr", "flock", "fork",
        "fremovexattr", "fsetxattr", "fstat", "fstatfs", "fsync", "ftruncate", "futex", "futex_waitv",
        "futimesat", "getcpu", "getcwd", "getdents", "getdents64", "getegid", "geteuid", "getgid",
        "getgroups", "getitimer", "getpeername", "getpgid", "getpgrp", "getpid", "getppid", "getpriority",
        "getrandom", "getresgid", "getresuid", "getrlimit", "get_robust_list", "getrusage", "getsid",
        "getsockname", "getsockopt", "gettid", "gettimeofday", "getuid", "getxattr", "inotify_add_watch",
        "inotify_init", "inotify_init1", "inotify_rm_watch", "io_cancel", "ioctl", "io_destroy",
        "io_getevents", "io_pgetevents", "ioprio_get", "ioprio_set", "io_setup", "io_submit", "kill",
        "landlock_add_rule", "landlock_create_ruleset", "landlock_restrict_self", "lchown", "lgetxattr",
        "link", "linkat", "listen", "listxattr", "llistxattr", "lremovexattr", "lseek", "lsetxattr", "lstat",
        "madvise", "membarrier", "memfd_create", "memfd_secret", "mincore", "mkdir", "mkdirat", "mknod",
        "mknodat", "mlock", "mlock2", "mlockall", "mmap", "mprotect", "mq_getsetattr", "mq_notify",
        "mq_open", "mq_timedreceive", "mq_timedsend", "mq_unlink", "mremap", "msgctl", "msgget", "msgrcv",
        "msgsnd", "msync", "munlock", "munlockall", "munmap", "nanosleep", "newfstatat", "open", "openat",
        "openat2", "pause", "pidfd_open", "pidfd_send_signal", "pipe", "pipe2", "pkey_alloc", "pkey_free",
        "pkey_mprotect", "poll", "ppoll", "prctl", "pread64", "preadv", "preadv2", "prlimit64",
        "process_mrelease", "pselect6", "pwrite64", "pwritev", "pwritev2", "read", "readahead", "readlink",
        "readlinkat", "readv", "recvfrom", "recvmmsg", "recvmsg", "remap_file_pages", "removexattr",
        "rename", "renameat", "renameat2", "restart_syscall", "rmdir", "rseq", "rt_sigaction",
        "rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend",
        "rt_sigtimedwait", "rt_tgsigqueueinfo", "sched_getaffinity", "sched_getattr", "sched_getparam",
        "sched_get_priority_max", "sched_get_priority_min", "sched_getscheduler", "sched_rr_get_interval",
        "sched_setaffinity", "sched_setattr", "sched_setparam", "sched_setscheduler", "sched_yield",
        "seccomp", "select", "semctl", "semget", "semop", "semtimedop", "sendfile", "sendmmsg", "sendmsg",
        "sendto", "setfsgid", "setfsuid", "setgid", "setgroups", "setitimer", "setpgid", "setpriority",
        "setregid", "setresgid", "setresuid", "setreuid", "setrlimit", "set_robust_list", "setsid",
        "setsockopt", "set_tid_address", "setuid", "setxattr", "shmat", "shmctl", "shmdt", "shmget",
        "shutdown", "sigaltstack", "signalfd", "signalfd4", "socketpair", "splice", "stat", "statfs",
        "statx", "symlink", "symlinkat", "sync", "sync_file_range", "syncfs", "sysinfo", "tee", "tgkill",
        "time", "timer_create", "timer_delete", "timer_getoverrun", "timer_gettime", "timer_settime",
        "timerfd_create", "timerfd_gettime", "timerfd_settime", "times", "tkill", "truncate", "umask",
        "uname", "unlink", "unlinkat", "utime", "utimensat", "utimes", "vfork", "vmsplice", "wait4",
        "waitid", "write", "writev", "arch_prctl",
        };
        for (size_t i = 0; i < ELEMENTSOF(docker); i++)
                if (seccomp_syscall_resolve_name(docker[i]) != __NR_SCMP_ERROR && verdict(p, docker[i], ARGS(0)) != 0)
                        fail_msg("'%s' is allowed by Docker's default profile and not here", docker[i]);
}

/* The notifying profile's rule for the layer's calls: init's own filter refuses those to the
 * job (an ERRNO filter wins over a notifying one), so the layer's profile has none. */
static void drop_layer_notify(json_t *p) {
        json_t *rules = json_object_get(p, "syscalls"), *rule;
        size_t i;
        json_array_foreach(rules, i, rule)
                if (streq(json_string_value(json_object_get(rule, "action")), "SCMP_ACT_NOTIFY") &&
                    json_array_size(json_object_get(rule, "names")) == 2 && rule_names(rule, "mount") &&
                    rule_names(rule, "umount2")) {
                        assert_int_equal(json_array_remove(rules, i), 0);
                        return;
                }
        fail_msg("the notifying profile has no rule of its own for mount and umount2");
}

/* The layer's profile: the plain one plus mount and umount2, nothing else. */
static void test_layer(void **state) {
        (void) state;
        _cleanup_(json_decrefp) json_t *plain = profile(false);
        _cleanup_(json_decrefp) json_t *layer = profile(true);
        const char *const extra[] = CAPSULE_SECCOMP_LAYER_CALLS;
        if (notify_variant)
                drop_layer_notify(plain);
        assert_int_equal(json_array_size(json_object_get(layer, "syscalls")),
                         json_array_size(json_object_get(plain, "syscalls")) + 1);
        for (size_t i = 0; i < json_array_size(json_object_get(plain, "syscalls")); i++)
                assert_true(json_equal(json_array_get(json_object_get(plain, "syscalls"), i),
                                       json_array_get(json_object_get(layer, "syscalls"), i)));
        json_t *last = json_array_get(json_object_get(layer, "syscalls"), json_array_size(json_object_get(layer, "syscalls")) - 1);
        assert_string_equal(json_string_value(json_object_get(last, "action")), "SCMP_ACT_ALLOW");
        assert_null(json_object_get(last, "args"));
        assert_int_equal(json_array_size(json_object_get(last, "names")), ELEMENTSOF(extra));
        for (size_t i = 0; i < ELEMENTSOF(extra); i++) {
                assert_true(rule_names(last, extra[i]));
                assert_int_equal(verdict(layer, extra[i], ARGS(0)), 0);
                assert_int_equal(verdict(plain, extra[i], ARGS(0)), EPERM);
        }
        if (notify_variant) {
                _cleanup_(json_decrefp) json_t *whole = profile(false);
                bool notified = false;
                assert_int_equal(verdict_notified(whole, "mount", ARGS(0), &notified), EPERM);
                assert_true(notified);
        }
        /* the rest of the profile is the plain one's */
        json_t *pl = json_deep_copy(layer);
        assert_non_null(pl);
        json_array_remove(json_object_get(pl, "syscalls"), json_array_size(json_object_get(pl, "syscalls")) - 1);
        assert_true(json_equal(pl, plain));
        json_decref(pl);
}

/* Which refusals reach the listener (capsule/seccomp-notify.h): every family of must_refuse but
 * the probes ordinary jobs make (clone3's ENOSYS, the NUMA calls, io_uring_setup), each still
 * answered as without the listener; mount and umount2 only without the layer. */
static void test_notified(void **state) {
        (void) state;
        const char *const probes[] = { "clone3", "mbind", "set_mempolicy", "get_mempolicy", "migrate_pages",
                                       "move_pages", "io_uring_setup" };
        _cleanup_(json_decrefp) json_t *p = profile(false);
        _cleanup_(json_decrefp) json_t *layer = profile(true);
        for (size_t r = 0; r < ELEMENTSOF(must_refuse); r++) {
                bool probe = false, notified;
                for (size_t k = 0; k < ELEMENTSOF(probes); k++)
                        probe = probe || streq(must_refuse[r], probes[k]);
                if (seccomp_syscall_resolve_name_arch(SCMP_ARCH_NATIVE, must_refuse[r]) < 0)
                        continue; /* not this architecture's: the filter's architecture check */
                assert_int_equal(verdict_notified(p, must_refuse[r], ARGS(0), &notified), EPERM);
                if (notified == probe)
                        fail_msg("'%s' is %s", must_refuse[r], probe ? "a probe, notified" : "not notified");
        }
        bool notified;
        assert_int_equal(verdict_notified(p, "clone3", ARGS(0), &notified), ENOSYS);
        assert_false(notified);
        for (size_t i = 0; i < ELEMENTSOF(CAPSULE_LAYER_CALLS_FOR_TEST); i++) {
                assert_int_equal(verdict_notified(layer, CAPSULE_LAYER_CALLS_FOR_TEST[i], ARGS(0), &notified), 0);
                assert_false(notified);
        }
        /* clone: a namespace flag notifies, a fork or a thread does not */
        assert_int_equal(verdict_notified(p, "clone", ARGS(CLONE_NEWUSER | SIGCHLD), &notified), EPERM);
        assert_true(notified);
        assert_int_equal(verdict_notified(p, "clone", ARGS(CLONE_NEWNET | CLONE_NEWNS), &notified), EPERM);
        assert_true(notified);
        assert_int_equal(verdict_notified(p, "clone", ARGS(SIGCHLD), &notified), 0);
        assert_false(notified);
        /* What every job calls all the time never waits for the listener. */
        const char *hot[] = { "read", "write", "openat", "mmap", "futex", "sendmsg", "recvfrom", "execve", "wait4" };
        for (size_t i = 0; i < ELEMENTSOF(hot); i++) {
                assert_int_equal(verdict_notified(p, hot[i], ARGS(0), &notified), 0);
                assert_false(notified);
        }
}

/* connect always notifies (the listener reads the destination); sendto only with an address. */
static void test_notify_network(void **state) {
        (void) state;
        _cleanup_(json_decrefp) json_t *p = profile(false);
        bool notified;
        assert_int_equal(verdict_notified(p, "connect", ARGS(3, 0x1000, 16), &notified), 0);
        assert_true(notified);
        assert_int_equal(verdict_notified(p, "sendto", ARGS(3, 0x1000, 10, 0, 0, 0), &notified), 0);
        assert_false(notified);
        assert_int_equal(verdict_notified(p, "sendto", ARGS(3, 0x1000, 10, 0, 0x2000, 16), &notified), 0);
        assert_true(notified);
}

int main(int argc, char **argv) {
        if (argc == 3 && streq(argv[1], "--print") && (streq(argv[2], "plain") || streq(argv[2], "layer"))) {
                _cleanup_(json_decrefp) json_t *p = capsule_seccomp_allowlist_json(streq(argv[2], "layer"), false);
                return p && json_dumpf(p, stdout, JSON_INDENT(1)) == 0 && putchar('\n') != EOF ? 0 : 1;
        }
        const struct CMUnitTest notify_tests[] = {
                cmocka_unit_test(test_notified),
                cmocka_unit_test(test_notify_network),
        };
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_shape),
                cmocka_unit_test(test_names_resolve),
                cmocka_unit_test(test_refused),
                cmocka_unit_test(test_clone),
                cmocka_unit_test(test_socket),
                cmocka_unit_test(test_personality_mknod),
                cmocka_unit_test(test_ordinary),
                cmocka_unit_test(test_docker_default),
                cmocka_unit_test(test_layer),
        };
        int failed = cmocka_run_group_tests_name("without a listener", tests, group_plain, NULL);
        failed += cmocka_run_group_tests_name("notifying the listener", tests, group_notify, NULL);
        return failed + cmocka_run_group_tests_name("what notifies", notify_tests, group_notify, NULL);
}
