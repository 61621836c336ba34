/* SPDX-License-Identifier: MIT */
/* A hostile job for test-runc-walls.sh (threat 23): from inside a runc capsule it tries each way
 * out of the host kernel's walls and prints one line per attempt,
 *   PROBE <name> ok <what stopped it>     or     PROBE <name> BREACH <what it got>.
 * Built static by the test (the capsule has the host's /usr, but nothing is assumed of it).
 * argv[1]: a TCP port the test listens on at the host's 127.0.0.1; argv[2]: the name of an
 * abstract unix socket the test listens on in the host's network namespace. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

static int breaches;

static void report(const char *name, int r, int err) {
        if (r < 0)
                printf("PROBE %s ok %s\n", name, strerror(err));
        else {
                printf("PROBE %s BREACH succeeded\n", name);
                breaches++;
        }
}

/* A system call refused: r < 0. */
#define TRY(name, call)                        \
        do {                                   \
                errno = 0;                     \
                long r_ = (long) (call);       \
                report(name, r_ < 0 ? -1 : 0, errno); \
        } while (0)

static void namespaces(void) {
        static const struct { const char *name; int flag; } ns[] = {
                {"unshare_user", CLONE_NEWUSER}, {"unshare_mount", CLONE_NEWNS}, {"unshare_pid", CLONE_NEWPID},
                {"unshare_net", CLONE_NEWNET},   {"unshare_uts", CLONE_NEWUTS},  {"unshare_ipc", CLONE_NEWIPC},
                {"unshare_cgroup", CLONE_NEWCGROUP},
        };
        for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
                TRY(ns[i].name, unshare(ns[i].flag));
        int fd = open("/proc/1/ns/mnt", O_RDONLY | O_CLOEXEC);
        TRY("setns", fd < 0 ? (errno = EACCES, -1) : setns(fd, 0));
}

static void kernel_calls(void) {
        union bpf_attr a;
        memset(&a, 0, sizeof(a));
        a.map_type = BPF_MAP_TYPE_ARRAY;
        a.key_size = 4;
        a.value_size = 4;
        a.max_entries = 1;
        TRY("bpf", syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof(a)));
        struct perf_event_attr pe;
        memset(&pe, 0, sizeof(pe));
        pe.type = PERF_TYPE_SOFTWARE;
        pe.size = sizeof(pe);
        pe.config = PERF_COUNT_SW_CPU_CLOCK;
        TRY("perf_event_open", syscall(SYS_perf_event_open, &pe, 0, -1, -1, 0));
        TRY("keyctl", syscall(SYS_keyctl, 1 /* KEYCTL_JOIN_SESSION_KEYRING */, "tfw-probe"));
        TRY("add_key", syscall(SYS_add_key, "user", "tfw-probe", "x", 1, -3 /* session */));
        char params[120] = {0};
        TRY("io_uring_setup", syscall(SYS_io_uring_setup, 4, params));
        TRY("userfaultfd", syscall(SYS_userfaultfd, 0));
        TRY("ptrace_pid1", ptrace(PTRACE_ATTACH, 1, 0, 0));
        TRY("init_module", syscall(SYS_init_module, "", 0, ""));
        TRY("finit_module", syscall(SYS_finit_module, 0, "", 0));
        TRY("mount", mount("none", "/tmp", "tmpfs", 0, NULL));
        TRY("umount", umount2("/proc", MNT_DETACH));
        TRY("chroot", chroot("/tmp"));
        TRY("sethostname", sethostname("escaped", 7));
        TRY("setuid0", setuid(0));
        TRY("setgid0", setgid(0));
        TRY("mknod_null", mknod("/tmp/tfw-null", S_IFCHR | 0666, makedev(1, 3)));
        TRY("mknod_disk", mknod("/tmp/tfw-sda", S_IFBLK | 0666, makedev(8, 0)));
}

static void sockets(const char *port, const char *abstract) {
        TRY("raw_socket", socket(AF_INET, SOCK_RAW, IPPROTO_ICMP));
        TRY("packet_socket", socket(AF_PACKET, SOCK_RAW, 0));
        struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons((uint16_t) atoi(port)),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        TRY("host_loopback", s < 0 ? -1 : connect(s, (struct sockaddr *) &in, sizeof(in)));
        struct sockaddr_un un = {.sun_family = AF_UNIX};
        size_t n = strlen(abstract);
        memcpy(un.sun_path + 1, abstract, n);
        int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        TRY("host_abstract_socket", u < 0 ? -1 : connect(u, (struct sockaddr *) &un, (socklen_t) (sizeof(sa_family_t) + 1 + n)));
}

/* A write that reaches the file: the open and the write both succeed. */
static int write_file(const char *path, const char *text) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        ssize_t k = write(fd, text, strlen(text));
        int e = errno;
        close(fd);
        errno = e;
        return k < 0 ? -1 : 0;
}

/* Something of the host's kernel read: at least one byte. */
static int read_some(const char *path) {
        char c;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        ssize_t k = read(fd, &c, 1);
        int e = errno;
        close(fd);
        errno = k == 0 ? ENODATA : e;
        return k == 1 ? 0 : -1;
}

/* A directory of the host's shown: it lists an entry. */
static int dir_has_entries(const char *path) {
        DIR *d = opendir(path);
        struct dirent *de;
        int n = 0;
        while (d && (de = readdir(d)))
                n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
        if (d)
                closedir(d);
        errno = d ? ENOENT : errno;
        return n ? 0 : -1;
}

static void proc_sys(void) {
        TRY("proc_sys_write", write_file("/proc/sys/kernel/core_pattern", "|/tmp/escape"));
        TRY("proc_sys_hostname", write_file("/proc/sys/kernel/hostname", "escaped"));
        TRY("sysrq_trigger", write_file("/proc/sysrq-trigger", "h"));
        TRY("proc_kcore", read_some("/proc/kcore"));
        TRY("proc_keys", read_some("/proc/keys"));
        TRY("proc_timer_list", read_some("/proc/timer_list"));
        TRY("proc_kallsyms", read_some("/proc/kallsyms"));
        TRY("sys_firmware", dir_has_entries("/sys/firmware"));
        TRY("sys_write", write_file("/sys/kernel/mm/transparent_hugepage/enabled", "always"));
        TRY("root_write", write_file("/etc/passwd", "x"));
        TRY("root_create", open("/tfw-escape", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
}

/* /dev: nothing but null, zero, full, random, urandom and tty as devices. */
static void devices(void) {
        static const char *const ok[] = {"null", "zero", "full", "random", "urandom", "tty", NULL};
        DIR *d = opendir("/dev");
        struct dirent *de;
        int extra = 0;
        while (d && (de = readdir(d))) {
                struct stat st;
                char p[300];
                snprintf(p, sizeof(p), "/dev/%s", de->d_name);
                if (lstat(p, &st) < 0 || !(S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)))
                        continue;
                int known = 0;
                for (const char *const *k = ok; *k; k++)
                        known = known || strcmp(*k, de->d_name) == 0;
                if (!known) {
                        printf("PROBE dev_%s BREACH a device\n", de->d_name);
                        extra++;
                }
        }
        if (d)
                closedir(d);
        report("dev_contents", extra || !d ? 0 : -1, ENODEV);
}

/* /proc/self/status: no capability in any set, no_new_privs. */
static void creds(void) {
        FILE *f = fopen("/proc/self/status", "re");
        char line[256];
        int bad = 0, nnp = 0;
        while (f && fgets(line, sizeof(line), f)) {
                if (!strncmp(line, "Cap", 3) && strstr(line, "0000000000000000") == NULL) {
                        printf("PROBE caps BREACH %s", line);
                        bad++;
                }
                if (!strncmp(line, "NoNewPrivs:\t1", 13))
                        nnp = 1;
        }
        if (f)
                fclose(f);
        report("capabilities", bad || !f ? 0 : -1, EPERM);
        report("no_new_privs", nnp ? -1 : 0, EPERM);
}

/* "mem": touch memory until the cgroup kills the job (a job that ends this way was not stopped). */
static int eat_memory(void) {
        for (size_t mb = 16;; mb += 16) {
                char *p = malloc(16 << 20);
                if (!p)
                        break;
                memset(p, 1, 16 << 20);
                printf("PROBE memory_touched %zu MiB\n", mb);
                if (mb >= 4096)
                        break;
        }
        printf("PROBE memory BREACH never stopped\n");
        return 0;
}

/* "pids": processes until fork fails; how many it got. */
static int fork_many(void) {
        static pid_t kids[100000];
        int n = 0;
        for (; n < 100000; n++) {
                pid_t p = fork();
                if (p == 0) {
                        pause();
                        _exit(0);
                }
                if (p < 0)
                        break;
                kids[n] = p;
        }
        printf("PROBE pids_forked %d\n", n);
        for (int i = 0; i < n; i++)
                kill(kids[i], SIGKILL);
        return 0;
}

int main(int argc, char **argv) {
        setvbuf(stdout, NULL, _IOLBF, 0);
        if (argc == 2 && strcmp(argv[1], "mem") == 0)
                return eat_memory();
        if (argc == 2 && strcmp(argv[1], "pids") == 0)
                return fork_many();
        if (argc != 3) {
                fprintf(stderr, "usage: %s PORT ABSTRACT | mem | pids\n", argv[0]);
                return 2;
        }
        namespaces();
        kernel_calls();
        sockets(argv[1], argv[2]);
        proc_sys();
        devices();
        creds();
        printf("PROBE done %d breaches\n", breaches);
        return 0;
}
