/* SPDX-License-Identifier: MIT */
/* A hostile job for tests/integration/test-runc-seccomp.sh: built static by the test and run
 * as the only process of a runc capsule whose linux.seccomp is capsule/seccomp-allowlist.c's.
 * It tries each family threat 23 names and checks it is refused (EPERM, clone3 ENOSYS), then
 * that ordinary work still runs. Where the kernel itself would refuse a call (no capability),
 * the call is made with arguments the kernel answers otherwise (EFAULT, EINVAL, EBADF, or
 * success), so only the filter can give EPERM: those lines say "filter". One line a check,
 * "ok ..." or "FAIL ...", then "probe: N ok, M failed"; the exit status is M != 0.
 * `runc-probe --child` exits 42 (the fork and exec check); `runc-probe --landlock` checks the
 * Landlock ruleset of tentaflake-capsule-init --landlock instead (landlock()). Not part of the
 * worker. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/timex.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int oks, fails;

static void result(bool good, const char *name, const char *fmt, long r, int e) {
        if (good)
                oks++;
        else
                fails++;
        printf("%s %s: ", good ? "ok" : "FAIL", name);
        printf(fmt, r, strerror(e));
        printf("\n");
        fflush(stdout);
}

/* r, errno of a call that must be refused with want. */
static void refused(const char *name, long r, int want) {
        int e = errno;
        result(r == -1 && e == want, name, "returned %ld (%s)", r, r == -1 ? e : 0);
}

/* Run fn in a child (a call that would change the probe, or succeed and go on): the child
 * exits with the call's errno, 0 when it was allowed. */
static void refused_in_child(const char *name, int (*fn)(void), int want) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0)
                _exit(fn() < 0 ? errno : 0);
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) {
                result(false, name, "no child or it died (%ld): %s", st, errno);
                return;
        }
        errno = WEXITSTATUS(st);
        refused(name, WEXITSTATUS(st) ? -1 : 0, want);
}

static int do_unshare_user(void) { return unshare(CLONE_NEWUSER); }
static int do_unshare_user_ns(void) { return unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET); }
static int do_ptrace_traceme(void) { return (int) syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0); }
static int do_personality(void) { return personality(ADDR_NO_RANDOMIZE) < 0 ? -1 : 0; }
static int do_clone_user(void) {
        long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
        if (r == 0)
                _exit(0);
        return r < 0 ? -1 : 0;
}
static int do_clone3(void) {
        struct clone_args a = { .exit_signal = SIGCHLD };
        long r = syscall(SYS_clone3, &a, sizeof(a));
        if (r == 0)
                _exit(0);
        return r < 0 ? -1 : 0;
}

/* Namespaces: the kernel lets anyone make a user namespace, and with it the others. */
static void namespaces(void) {
        refused_in_child("unshare(CLONE_NEWUSER) filter", do_unshare_user, EPERM);
        refused_in_child("unshare(NEWUSER|NEWNS|NEWNET) filter", do_unshare_user_ns, EPERM);
        refused_in_child("clone(CLONE_NEWUSER) filter", do_clone_user, EPERM);
        const int flags[] = { CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP };
        for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
                char name[64];
                snprintf(name, sizeof(name), "clone(0x%x)", flags[i]);
                errno = 0;
                long r = syscall(SYS_clone, flags[i] | SIGCHLD, 0, 0, 0, 0);
                if (r == 0)
                        _exit(0);
                refused(name, r, EPERM);
                snprintf(name, sizeof(name), "unshare(0x%x)", flags[i]);
                refused(name, unshare(flags[i]), EPERM);
        }
        refused_in_child("clone3 ENOSYS filter", do_clone3, ENOSYS);
        refused("setns(-1) filter", setns(-1, 0), EPERM);
}

/* The mount API: flags the kernel refuses EINVAL, or a NULL it answers EFAULT. */
static void mounts(void) {
        refused("mount(NULL) filter", mount(NULL, NULL, NULL, 0, NULL), EPERM);
        refused("umount2(bad flags) filter", umount2("/", 0xffff), EPERM);
        refused("pivot_root", syscall(SYS_pivot_root, ".", "."), EPERM);
        refused("fsopen", syscall(SYS_fsopen, "tmpfs", 0), EPERM);
        refused("fsconfig(-1) filter", syscall(SYS_fsconfig, -1, 0xffff, NULL, NULL, 0), EPERM);
        refused("fsmount", syscall(SYS_fsmount, -1, 0, 0), EPERM);
        refused("fspick", syscall(SYS_fspick, -1, "", 0xffff), EPERM);
        refused("open_tree(bad flags) filter", syscall(SYS_open_tree, -1, "/", 0xffffffffu), EPERM);
        refused("move_mount(bad flags)", syscall(SYS_move_mount, -1, "", -1, "", 0xffffffffu), EPERM);
        refused("mount_setattr(bad flags) filter", syscall(SYS_mount_setattr, -1, "", 0xffffffffu, NULL, 0), EPERM);
        refused("chroot", chroot("/"), EPERM);
}

static void kernel_surfaces(void) {
        refused("bpf", syscall(SYS_bpf, 0, NULL, 0), EPERM);
        refused("perf_event_open(NULL) filter", syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0), EPERM);
        refused("keyctl(GET_KEYRING_ID) filter", syscall(SYS_keyctl, 0, -3 /* session */, 0), EPERM);
        refused("add_key(NULL) filter", syscall(SYS_add_key, NULL, NULL, NULL, 0, 0), EPERM);
        refused("request_key(NULL) filter", syscall(SYS_request_key, NULL, NULL, NULL, 0), EPERM);
        char params[120] = { 0 };
        refused("io_uring_setup filter", syscall(SYS_io_uring_setup, 1, params), EPERM);
        refused("io_uring_enter(-1) filter", syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0), EPERM);
        refused("io_uring_register(-1) filter", syscall(SYS_io_uring_register, -1, 0, NULL, 0), EPERM);
        refused("userfaultfd(USER_MODE_ONLY) filter", syscall(SYS_userfaultfd, 1 /* UFFD_USER_MODE_ONLY */), EPERM);
        refused_in_child("ptrace(TRACEME) filter", do_ptrace_traceme, EPERM);
        char buf[8], src[8] = "secret";
        struct iovec l = { buf, sizeof(buf) }, rm = { src, sizeof(src) };
        refused("process_vm_readv(self) filter", syscall(SYS_process_vm_readv, getpid(), &l, 1, &rm, 1, 0), EPERM);
        refused("process_vm_writev(self) filter", syscall(SYS_process_vm_writev, getpid(), &rm, 1, &l, 1, 0), EPERM);
        refused("kcmp(self) filter", syscall(SYS_kcmp, getpid(), getpid(), 1 /* KCMP_VM */, 0, 0), EPERM);
        refused("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0), EPERM);
        refused("kexec_file_load", syscall(SYS_kexec_file_load, -1, -1, 0, NULL, 0), EPERM);
        refused("init_module", syscall(SYS_init_module, NULL, 0, ""), EPERM);
        refused("finit_module", syscall(SYS_finit_module, -1, "", 0), EPERM);
        refused("delete_module", syscall(SYS_delete_module, "none", 0), EPERM);
        refused("open_by_handle_at", syscall(SYS_open_by_handle_at, -1, NULL, 0), EPERM);
        refused("name_to_handle_at(NULL) filter", syscall(SYS_name_to_handle_at, AT_FDCWD, "/", NULL, NULL, 0), EPERM);
        refused("syslog", syscall(SYS_syslog, 10 /* SIZE_BUFFER */, NULL, 0), EPERM);
        refused("acct", syscall(SYS_acct, NULL), EPERM);
        refused("quotactl(bad type) filter", syscall(SYS_quotactl, -1, NULL, 0, NULL), EPERM);
        refused("quotactl_fd(-1) filter", syscall(SYS_quotactl_fd, -1, 0, 0, NULL), EPERM);
        refused("swapon", syscall(SYS_swapon, "/none", 0), EPERM);
        refused("swapoff", syscall(SYS_swapoff, "/none"), EPERM);
        refused("reboot(bad magic)", syscall(SYS_reboot, 0, 0, 0, NULL), EPERM);
        refused_in_child("personality(ADDR_NO_RANDOMIZE) filter", do_personality, EPERM);
        refused("sethostname", sethostname("x", 1), EPERM);
        refused("setdomainname", setdomainname("x", 1), EPERM);
}

static void clocks_devices_sockets(void) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        refused("clock_settime", clock_settime(CLOCK_REALTIME, &now), EPERM);
        refused("settimeofday(NULL) filter", syscall(SYS_settimeofday, NULL, NULL), EPERM);
        struct timex tx = { .modes = 0 };
        refused("adjtimex(read) filter", syscall(SYS_adjtimex, &tx), EPERM);
        refused("clock_adjtime(read) filter", syscall(SYS_clock_adjtime, CLOCK_REALTIME, &tx), EPERM);
        refused("mknod(char device)", mknod("/tmp/null2", S_IFCHR | 0600, makedev(1, 3)), EPERM);
        refused("mknodat(block device)", mknodat(AT_FDCWD, "/tmp/sda2", S_IFBLK | 0600, makedev(8, 0)), EPERM);
        refused("socket(AF_PACKET)", socket(AF_PACKET, SOCK_RAW, 0), EPERM);
        refused("socket(AF_INET, SOCK_RAW)", socket(AF_INET, SOCK_RAW, IPPROTO_ICMP), EPERM);
        refused("socket(AF_VSOCK)", socket(40 /* AF_VSOCK */, SOCK_STREAM, 0), EPERM);
        refused("socket(SCTP)", socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP), EPERM);
        refused("socket(NETLINK_KOBJECT_UEVENT) filter", socket(AF_NETLINK, SOCK_RAW, NETLINK_KOBJECT_UEVENT), EPERM);
}

/* i386's entry point from a 64-bit process: not an architecture of the filter. */
static void compat_abi(void) {
#if defined(__x86_64__)
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
                long r = 20; /* i386 getpid */
                __asm__ volatile("int $0x80" : "+a"(r) : : "memory");
                _exit(r == getpid() ? 0 : 1);
        }
        int st = 0;
        bool good = pid > 0 && waitpid(pid, &st, 0) == pid && !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        result(good, "int 0x80 (i386 ABI) getpid", "wait status %#lx%.0s", st, 0);
#endif
}

/* Ordinary work: good, or the errno of the step that failed. */
static void works(bool good, const char *name) {
        int e = errno;
        if (good)
                oks++;
        else
                fails++;
        if (good)
                printf("ok %s: works\n", name);
        else
                printf("FAIL %s: %s\n", name, strerror(e));
        fflush(stdout);
}

static void *thread_main(void *arg) {
        return arg;
}

static void ordinary(const char *self) {
        pid_t pid = fork();
        if (pid == 0) {
                execl(self, self, "--child", (char *) NULL);
                _exit(1);
        }
        int st = 0;
        works(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 42, "fork and exec");
        char *argv[] = { (char *) self, (char *) "--child", NULL };
        pid_t sp = -1;
        int r = posix_spawn(&sp, self, NULL, NULL, argv, NULL);
        errno = r;
        works(r == 0 && waitpid(sp, &st, 0) == sp && WIFEXITED(st) && WEXITSTATUS(st) == 42, "posix_spawn");
        pthread_t t;
        void *ret = NULL;
        r = pthread_create(&t, NULL, thread_main, (void *) 7);
        errno = r;
        works(r == 0 && pthread_join(t, &ret) == 0 && ret == (void *) 7, "a thread");

        int fd = open("/tmp/probe-file", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        char buf[16] = "";
        bool io = fd >= 0 && write(fd, "hello", 5) == 5 && pread(fd, buf, sizeof(buf), 0) == 5 &&
                  memcmp(buf, "hello", 5) == 0 && rename("/tmp/probe-file", "/tmp/probe-file2") == 0 &&
                  mkdir("/tmp/probe-dir", 0700) == 0 && rmdir("/tmp/probe-dir") == 0 &&
                  unlink("/tmp/probe-file2") == 0;
        works(io, "file I/O in /tmp");
        if (fd >= 0)
                close(fd);
        works(mknod("/tmp/fifo", S_IFIFO | 0600, 0) == 0, "mknod(FIFO)");
        works(open("/probe-write", O_WRONLY | O_CREAT | O_CLOEXEC, 0600) < 0 && errno == EROFS, "the root is read-only");

        int p[2];
        io = pipe2(p, O_CLOEXEC) == 0 && write(p[1], "x", 1) == 1 && read(p[0], buf, 1) == 1 && buf[0] == 'x';
        works(io, "a pipe");

        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t al = sizeof(a);
        int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), cs = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int as = -1;
        io = ls >= 0 && cs >= 0 && bind(ls, (struct sockaddr *) &a, sizeof(a)) == 0 && listen(ls, 1) == 0 &&
             getsockname(ls, (struct sockaddr *) &a, &al) == 0 && connect(cs, (struct sockaddr *) &a, sizeof(a)) == 0 &&
             (as = accept4(ls, NULL, NULL, SOCK_CLOEXEC)) >= 0 && send(cs, "ping", 4, 0) == 4 &&
             recv(as, buf, sizeof(buf), 0) == 4 && memcmp(buf, "ping", 4) == 0;
        works(io, "TCP over loopback");
        int us = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), xs = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        works(us >= 0 && xs >= 0, "UDP and unix sockets");
        works(personality(0xffffffff) >= 0, "personality query");
}

/* `--landlock`: run as the job of tentaflake-capsule-init --landlock (test-runc-landlock.sh),
 * where /work, /tmp and /scratch are all tmpfs anyone may write: Landlock leaves the first two
 * and /dev/null, and refuses /scratch EACCES; reads and exec everywhere. */
static void landlock(const char *self) {
        const char *writable[] = { "/work/landlock-file", "/tmp/landlock-file" };
        for (size_t i = 0; i < sizeof(writable) / sizeof(writable[0]); i++) {
                int fd = open(writable[i], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                works(fd >= 0 && write(fd, "x", 1) == 1, writable[i]);
        }
        int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        works(fd >= 0 && write(fd, "x", 1) == 1, "write /dev/null");
        refused("create in /scratch", open("/scratch/landlock-file", O_WRONLY | O_CREAT | O_CLOEXEC, 0600), EACCES);
        refused("mkdir in /scratch", mkdir("/scratch/landlock-dir", 0700), EACCES);
        refused("a FIFO in /scratch", mknod("/scratch/landlock-fifo", S_IFIFO | 0600, 0), EACCES);
        char buf[4];
        fd = open(self, O_RDONLY | O_CLOEXEC);
        works(fd >= 0 && read(fd, buf, sizeof(buf)) == 4 && memcmp(buf, "\177ELF", 4) == 0, "read /probe");
        pid_t pid = fork();
        if (pid == 0) {
                execl(self, self, "--child", (char *) NULL);
                _exit(1);
        }
        int st = 0;
        works(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 42, "exec /probe");
}

int main(int argc, char **argv) {
        if (argc == 2 && strcmp(argv[1], "--child") == 0)
                return 42;
        if (argc == 2 && strcmp(argv[1], "--landlock") == 0) {
                setvbuf(stdout, NULL, _IOLBF, 0);
                landlock(argv[0]);
                printf("probe: %d ok, %d failed\n", oks, fails);
                return fails != 0;
        }
        setvbuf(stdout, NULL, _IOLBF, 0);
        namespaces();
        mounts();
        kernel_surfaces();
        clocks_devices_sockets();
        compat_abi();
        ordinary(argv[0]);
        printf("probe: %d ok, %d failed\n", oks, fails);
        return fails != 0;
}
