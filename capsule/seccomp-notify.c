/* SPDX-License-Identifier: MIT */
/* Which refusals of the runc allow-list notify the worker, and the answers (capsule/seccomp-notify.h). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "capsule/seccomp-notify.h"
#include "capsule/seccomp-profile.h"
#include "common/macro.h"

/* Threat 23's families, as tests/unit/test-seccomp-allowlist.c's must_refuse, less the probes
 * named in the header (and clone3, the NUMA calls, io_uring_setup); mount and umount2 apart. */
static const char *const notified[] = {
        "unshare", "setns", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick", "open_tree",
        "move_mount", "mount_setattr", "bpf", "perf_event_open", "keyctl", "add_key", "request_key",
        "io_uring_enter", "io_uring_register", "userfaultfd", "ptrace", "process_vm_readv",
        "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise", "kexec_load", "kexec_file_load",
        "init_module", "finit_module", "delete_module", "create_module", "open_by_handle_at",
        "name_to_handle_at", "syslog", "acct", "quotactl", "quotactl_fd", "swapon", "swapoff", "reboot",
        "chroot", "sethostname", "setdomainname", "clock_settime", "settimeofday", "adjtimex",
        "clock_adjtime", "lookup_dcookie", "fanotify_init", "iopl", "ioperm", "vhangup", "modify_ldt",
        "uselib", "nfsservctl", "_sysctl", "ustat", "sysfs",
};
static const char *const notified_no_layer[] = { "mount", "umount2" };

/* The namespace flags of clone, each a rule of its own (a rule's conditions are ANDed). */
static const uint64_t clone_ns_flags[] = {
        0x00020000 /* CLONE_NEWNS */, 0x02000000 /* CLONE_NEWCGROUP */, 0x04000000 /* CLONE_NEWUTS */,
        0x08000000 /* CLONE_NEWIPC */, 0x10000000 /* CLONE_NEWUSER */,  0x20000000 /* CLONE_NEWPID */,
        0x40000000 /* CLONE_NEWNET */,
};

static int append(json_t *rules, json_t *rule) {
        return rule && json_array_append_new(rules, rule) == 0 ? 0 : -ENOMEM;
}

static int append_names(json_t *rules, const char *const *names, size_t n) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < n; i++)
                if (seccomp_syscall_resolve_name_arch(SCMP_ARCH_NATIVE, names[i]) >= 0 &&
                    json_array_append_new(a, json_string(names[i])) < 0) {
                        json_decref(a);
                        return -ENOMEM;
                }
        return append(rules, a ? json_pack("{s:o, s:s}", "names", a, "action", "SCMP_ACT_NOTIFY") : NULL);
}

int capsule_seccomp_notify_rules(json_t *rules, bool layer) {
        int r = append_names(rules, notified, ELEMENTSOF(notified));
        if (r >= 0 && !layer)
                r = append_names(rules, notified_no_layer, ELEMENTSOF(notified_no_layer));
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(clone_ns_flags); i++)
                r = append(rules, json_pack("{s:[s], s:s, s:[{s:i, s:I, s:I, s:s}]}", "names", "clone", "action",
                                            "SCMP_ACT_NOTIFY", "args", "index", 0, "value",
                                            (json_int_t) clone_ns_flags[i], "valueTwo", (json_int_t) clone_ns_flags[i],
                                            "op", "SCMP_CMP_MASKED_EQ"));
        if (r >= 0)
                r = append(rules, json_pack("{s:[s], s:s}", "names", "connect", "action", "SCMP_ACT_NOTIFY"));
        /* sendto without an address (a connected socket's, the common case) stays allowed and
         * out of the listener's way. */
        if (r >= 0)
                r = append(rules, json_pack("{s:[s], s:s, s:[{s:i, s:i, s:i, s:s}]}", "names", "sendto", "action",
                                            "SCMP_ACT_ALLOW", "args", "index", 4, "value", 0, "valueTwo", 0, "op",
                                            "SCMP_CMP_EQ"));
        if (r >= 0)
                r = append(rules, json_pack("{s:[s], s:s, s:[{s:i, s:i, s:i, s:s}]}", "names", "sendto", "action",
                                            "SCMP_ACT_NOTIFY", "args", "index", 4, "value", 0, "valueTwo", 0, "op",
                                            "SCMP_CMP_NE"));
        return r;
}

bool capsule_seccomp_notify_address(const struct seccomp_notif *req, uint64_t *ret_ptr, size_t *ret_len) {
        unsigned ptr_arg, len_arg;
        if (req->data.nr == SYS_connect)
                ptr_arg = 1, len_arg = 2;
        else if (req->data.nr == SYS_sendto)
                ptr_arg = 4, len_arg = 5;
        else
                return false;
        if (req->data.args[ptr_arg] == 0)
                return false;
        *ret_ptr = req->data.args[ptr_arg];
        *ret_len = (size_t) MIN(req->data.args[len_arg], (uint64_t) CAPSULE_NOTIFY_ADDR_MAX);
        return true;
}

/* The destination as "address:port" ("[address]:port" for IPv6) when it is an IPv4 or IPv6
 * address the capsule's network namespace has no route to: anything but loopback (127/8,
 * ::1, ::ffff:127/104) and the unspecified address (0.0.0.0, ::, ::ffff:0.0.0.0; Linux
 * connects those to loopback). false for those, for another family, and for an address
 * shorter than its family's (the kernel refuses it with EINVAL itself). */
static bool unreachable(const void *addr, size_t len, uint64_t call_len, char *buf, size_t size) {
        char ip[INET6_ADDRSTRLEN];
        sa_family_t family;
        if (!addr || len < sizeof(family))
                return false;
        memcpy(&family, addr, sizeof(family));
        if (family == AF_INET && len >= sizeof(struct sockaddr_in) && call_len >= sizeof(struct sockaddr_in)) {
                struct sockaddr_in in;
                memcpy(&in, addr, sizeof(in));
                uint32_t a = ntohl(in.sin_addr.s_addr);
                if ((a >> 24) == 127 || a == 0)
                        return false;
                inet_ntop(AF_INET, &in.sin_addr, ip, sizeof(ip));
                snprintf(buf, size, "%s:%u", ip, (unsigned) ntohs(in.sin_port));
                return true;
        }
        if (family == AF_INET6 && len >= sizeof(struct sockaddr_in6) && call_len >= sizeof(struct sockaddr_in6)) {
                struct sockaddr_in6 in6;
                memcpy(&in6, addr, sizeof(in6));
                const struct in6_addr *a = &in6.sin6_addr;
                if (IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_UNSPECIFIED(a) ||
                    (IN6_IS_ADDR_V4MAPPED(a) && (a->s6_addr[12] == 127 ||
                                                 (a->s6_addr[12] | a->s6_addr[13] | a->s6_addr[14] | a->s6_addr[15]) == 0)))
                        return false;
                inet_ntop(AF_INET6, a, ip, sizeof(ip));
                snprintf(buf, size, "[%s]:%u", ip, (unsigned) ntohs(in6.sin6_port));
                return true;
        }
        return false;
}

static void judge_network(const struct seccomp_notif *req, const void *addr, size_t addr_len, SeccompVerdict *v) {
        bool connect = req->data.nr == SYS_connect;
        char to[INET6_ADDRSTRLEN + 16];
        uint64_t call_len = req->data.args[connect ? 2 : 5];

        v->cont = true;
        v->wall = NULL;
        if (!unreachable(addr, addr_len, call_len, to, sizeof(to)))
                return;
        v->wall = WALL_NETWORK;
        if (connect) {
                /* What the namespace answers, without the call. */
                v->cont = false;
                v->error = ENETUNREACH;
                snprintf(v->detail, sizeof(v->detail), "direct connection to %s (no route: only the proxy is reachable)", to);
        } else
                snprintf(v->detail, sizeof(v->detail), "datagram sent directly to %s (no route: only the proxy is reachable)", to);
}

void capsule_seccomp_notify_judge(const struct seccomp_notif *req, const void *addr, size_t addr_len,
                                  SeccompVerdict *ret) {
        SeccompVerdict v = { .error = EPERM, .wall = WALL_SYSCALL };

        if (req->data.nr == SYS_connect || req->data.nr == SYS_sendto) {
                judge_network(req, addr, addr_len, &v);
                *ret = v;
                return;
        }
        char *name = seccomp_syscall_resolve_num_arch(req->data.arch, req->data.nr);
        if (req->data.nr == SYS_clone)
                snprintf(v.detail, sizeof(v.detail), "clone with a namespace flag (new namespaces are refused)");
        else if (name)
                snprintf(v.detail, sizeof(v.detail), "%s", name);
        else
                snprintf(v.detail, sizeof(v.detail), "system call %d", req->data.nr);
        free(name);
        *ret = v;
}
