/* SPDX-License-Identifier: MIT */
/* The capsule, live: real runsc, real tentaflake-capsule-init, real jobs (issue 4).
 *
 * The jobs are this very binary, copied into the snapshot and run inside the capsule with
 * "probe MODE ...": it is dynamically linked against libraries under /usr, which the default
 * system mounts provide. Each probe asserts a wall from inside (threats 4-7) or attacks one
 * (the channels, pid 1, the limits of threat 5); the host side asserts the outcome. After
 * every test no container, cgroup or bundle may be left. Needs root and runsc; skips (77)
 * without them, which TENTAFLAKE_MUST_WORK=1 turns into a failure. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capsule/bundle.h"
#include "capsule/job.h"
#include "capsule/oci-spec.h"
#include "capsule/protocol.h"
#include "snapshot/snapshot.h"
#include "snapshot/stream.h"
#include "common/fd-util.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"

#define JOB_UID 12345
#define JOB_GID 12346
#define MEMORY (512ULL << 20)
#define WORK_TMPFS (64ULL << 20)
#define TMP_TMPFS (16ULL << 20)
#define MAX_LOG (1ULL << 20)
#define PIDS 64
#define UTF8_NAME "\xc3\xbcn\xc3\xaf" "code-\xe5\x90\x8d.txt"

/* ======================================================================================= */
/* Probes: run inside the capsule as the job.                                               */
/* ======================================================================================= */

static const char *errname(int ok, int err) {
        static char buf[64];
        if (ok)
                return "ok";
        snprintf(buf, sizeof(buf), "%s", strerrorname_np(err) ?: "?");
        return buf;
}

/* "ok" or the errno name of a test; the errno is read after the expression (argument
 * evaluation order would not guarantee it). */
#define TRY(expr)                                                                                \
        ({                                                                                       \
                int _ok = (expr);                                                                \
                errname(_ok, errno);                                                             \
        })

/* dir's descriptors as "N>target,..." into line; -errno when dir cannot be read. */
static int read_fds(const char *dir, char *line, size_t size) {
        DIR *d = opendir(dir);
        if (!d)
                return -errno;
        line[0] = 0;
        int self = dirfd(d);
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                if (streq(dir, "/proc/self/fd") && atoi(de->d_name) == self)
                        continue; /* the directory being read */
                char p[PATH_MAX], target[PATH_MAX];
                snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
                ssize_t n = readlink(p, target, sizeof(target) - 1);
                target[n < 0 ? 0 : n] = 0;
                size_t l = strlen(line);
                snprintf(line + l, size - l, "%s%s>%.200s", l ? "," : "", de->d_name, target);
        }
        closedir(d);
        return 0;
}

static void print_fds(const char *key, const char *dir) {
        char line[4096];
        int r = read_fds(dir, line, sizeof(line));
        printf("%s=%s\n", key, r < 0 ? errname(0, -r) : line);
}

/* Does one pipe appear twice in a read_fds line? */
static bool pipe_twice(const char *line) {
        for (const char *p = strstr(line, ">pipe:"); p; p = strstr(p + 1, ">pipe:")) {
                const char *end = strchr(p, ',');
                size_t n = end ? (size_t) (end - p) : strlen(p);
                for (const char *q = strstr(p + n, ">pipe:"); q; q = strstr(q + 1, ">pipe:"))
                        if (strncmp(p, q, n) == 0 && (q[n] == ',' || q[n] == 0))
                                return true;
        }
        return false;
}

/* init's descriptors once it has closed its end of the job's relay: it holds both ends from
 * the pipe until posix_spawn returns, and a job that a loaded machine runs first sees the
 * pipe twice (test_walls once counted 7 beside stress-ng). Bounded: after 10 s the line is
 * printed as it is, and a descriptor init keeps for good still fails the count. */
static void print_init_fds(void) {
        char line[4096];
        int r = read_fds("/proc/1/fd", line, sizeof(line));
        for (int i = 0; r >= 0 && pipe_twice(line) && i < 10000; i++) {
                nanosleep(&(struct timespec){.tv_nsec = 1000 * 1000}, NULL);
                r = read_fds("/proc/1/fd", line, sizeof(line));
        }
        printf("initfd=%s\n", r < 0 ? errname(0, -r) : line);
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static void probe_walls(char **args) {
        const char *port = args[0], *state_dir = args[1], *key_path = args[2];
        struct stat st;
        gid_t groups[64];
        int n, fd;

        printf("uid=%u\ngid=%u\n", (unsigned) getuid(), (unsigned) getgid());
        n = getgroups(64, groups);
        printf("ngroups_other=%d\n", n < 0 ? -1 : (int) (n - (n > 0 && groups[0] == getgid())));

        FILE *f = fopen("/proc/self/status", "re");
        char line[512];
        while (f && fgets(line, sizeof(line), f))
                if (strncmp(line, "Cap", 3) == 0) {
                        char *colon = strchr(line, ':');
                        *colon = 0;
                        char *v = colon + 1;
                        while (*v == ' ' || *v == '\t')
                                v++;
                        printf("%s=%s", line, v);
                }
        if (f)
                fclose(f);
        printf("nnp=%d\n", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));

        struct if_nameindex *ifs = if_nameindex(), *i;
        char names[256] = "";
        for (i = ifs; i && i->if_index; i++) {
                size_t l = strlen(names);
                snprintf(names + l, sizeof(names) - l, "%s%s", l ? "," : "", i->if_name);
        }
        if (ifs)
                if_freenameindex(ifs);
        printf("ifaces=%s\n", names);

        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t) atoi(port)),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int r = fd >= 0 ? connect(fd, (struct sockaddr *) &sa, sizeof(sa)) : -1;
        printf("connect_host=%s\n", TRY(r == 0));
        safe_close(fd);
        struct addrinfo *ai = NULL;
        r = getaddrinfo("deb.debian.org", "80", NULL, &ai);
        printf("dns=%s\n", r == 0 ? "ok" : "failed");
        if (ai)
                freeaddrinfo(ai);

        printf("shadow=%s\n", TRY(stat("/etc/shadow", &st) == 0));
        printf("root_home=%s\n", TRY(stat("/root", &st) == 0));
        printf("state_dir=%s\n", TRY(stat(state_dir, &st) == 0));
        printf("key=%s\n", TRY(stat(key_path, &st) == 0));

        fd = open("/snapshot/rwdir/new", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        printf("snapshot_create=%s\n", TRY(fd >= 0));
        safe_close(fd);
        fd = open("/snapshot/rw.txt", O_WRONLY | O_CLOEXEC);
        printf("snapshot_write=%s\n", TRY(fd >= 0));
        safe_close(fd);
        fd = open("/probe-created", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        printf("root_create=%s\n", TRY(fd >= 0));
        safe_close(fd);
        printf("root_mkdir=%s\n", TRY(mkdir("/probe-dir", 0755) == 0));
        fd = open("/usr/probe-created", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        printf("usr_create=%s\n", TRY(fd >= 0));
        safe_close(fd);
        fd = open("/work/probe-created", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        printf("work_create=%s\n", TRY(fd >= 0));
        safe_close(fd);
        /* The copy of the snapshot in /work belongs to the job, not to the host's owner. */
        printf("work_copy=%s\n", TRY(stat("/work/hello.txt", &st) == 0));
        printf("work_copy_owner=%u:%u\n", (unsigned) st.st_uid, (unsigned) st.st_gid);

        print_fds("selffd", "/proc/self/fd");
        print_init_fds();

        char env[4096] = "";
        fd = open("/proc/self/environ", O_RDONLY | O_CLOEXEC);
        ssize_t k = fd >= 0 ? read(fd, env, sizeof(env) - 1) : -1;
        safe_close(fd);
        /* Sorted: the runtime does not keep the spec's order. */
        char *vars[64];
        int nv = 0;
        for (ssize_t j = 0; j < k && nv < 64; j += (ssize_t) strlen(env + j) + 1)
                vars[nv++] = env + j;
        qsort(vars, (size_t) nv, sizeof(vars[0]), cmp_str);
        printf("environ=");
        for (int j = 0; j < nv; j++)
                printf("%s|", vars[j]);
        printf("\n");

        /* The synthetic passwd: the job user with HOME=/work, nothing of the host's. */
        struct passwd *pw = getpwuid(getuid());
        printf("pw_name=%s\npw_dir=%s\n", pw ? pw->pw_name : "-", pw ? pw->pw_dir : "-");
        printf("host_user_daemon=%s\n", getpwnam("daemon") ? "present" : "absent");
        struct group *gr = getgrgid(getgid());
        printf("gr_name=%s\n", gr ? gr->gr_name : "-");

        /* The memory limit as the job sees it (runsc reads it from the job's cgroup). */
        f = fopen("/proc/meminfo", "re");
        unsigned long long memtotal = 0;
        while (f && fgets(line, sizeof(line), f))
                if (sscanf(line, "MemTotal: %llu kB", &memtotal) == 1)
                        break;
        if (f)
                fclose(f);
        printf("memtotal_kb=%llu\n", memtotal);

        struct utsname u;
        uname(&u);
        printf("hostname=%s\n", u.nodename);

        fd = open("/proc/1/mem", O_RDONLY | O_CLOEXEC);
        printf("init_mem=%s\n", TRY(fd >= 0));
        safe_close(fd);
        r = (int) ptrace(PTRACE_ATTACH, 1, 0, 0);
        printf("init_ptrace=%s\n", TRY(r == 0));

        /* Read-write mounts of anything but the capsule's own tmpfs/proc/devpts/sysfs. */
        char rw[1024] = "";
        f = fopen("/proc/self/mounts", "re");
        while (f && fgets(line, sizeof(line), f)) {
                char dev[256], mnt[256], type[64], opts[256];
                if (sscanf(line, "%255s %255s %63s %255s", dev, mnt, type, opts) != 4)
                        continue;
                bool is_rw = strncmp(opts, "rw", 2) == 0 && (opts[2] == ',' || !opts[2]);
                if (is_rw && !streq(type, "tmpfs") && !streq(type, "proc") &&
                    !streq(type, "devpts") && !streq(type, "sysfs")) {
                        size_t l = strlen(rw);
                        snprintf(rw + l, sizeof(rw) - l, "%s%s:%s", l ? "," : "", mnt, type);
                }
        }
        if (f)
                fclose(f);
        printf("rw_mounts=%s\n", rw);
}

/* A tar whose entries the importer must never see: a symlink to a host secret and a file
 * through it (CVE-2021-31566 shape), and an absolute name. */
static size_t hostile_tar(uint8_t *out, size_t cap) {
        static const struct {
                const char *name, *link;
                char type;
                const char *data;
        } entries[] = {
                { "escape", "/etc/shadow", '2', NULL },
                { "escape/x", NULL, '0', "pwned\n" },
                { "/abs", NULL, '0', "abs\n" },
                { "../up", NULL, '0', "up\n" },
        };
        size_t n = 0;
        memset(out, 0, cap);
        for (size_t i = 0; i < ELEMENTSOF(entries); i++) {
                uint8_t *h = out + n;
                size_t dl = entries[i].data ? strlen(entries[i].data) : 0;
                snprintf((char *) h, 100, "%s", entries[i].name);
                snprintf((char *) h + 100, 8, "%07o", 0644);
                snprintf((char *) h + 108, 8, "%07o", 0);
                snprintf((char *) h + 116, 8, "%07o", 0);
                snprintf((char *) h + 124, 12, "%011o", (unsigned) dl);
                snprintf((char *) h + 136, 12, "%011o", 0);
                h[156] = (uint8_t) entries[i].type;
                if (entries[i].link)
                        snprintf((char *) h + 157, 100, "%s", entries[i].link);
                memcpy(h + 257, "ustar\0" "00", 8);
                memset(h + 148, ' ', 8);
                unsigned sum = 0;
                for (int b = 0; b < 512; b++)
                        sum += h[b];
                snprintf((char *) h + 148, 8, "%06o", sum);
                n += 512;
                if (dl) {
                        memcpy(out + n, entries[i].data, dl);
                        n += (dl + 511) / 512 * 512;
                }
        }
        return n + 1024; /* end-of-archive blocks */
}

static void forged_trailer(int fd, int exit_code) {
        /* The token is secret: guess one. A trailer without the right one is log text. */
        char buf[256];
        int n = snprintf(buf, sizeof(buf),
                         CAPSULE_TRAILER_TAG "%032x exit=%d signal=0 init_error=none errno=0 "
                                             "skipped=0 artifacts=ok cache=none full=none\n",
                         0, exit_code);
        (void) write_all(fd, buf, (size_t) n);
}

static int probe_forge(void) {
        static uint8_t tar[16384];
        size_t n = hostile_tar(tar, sizeof(tar));
        int ch = open("/proc/1/fd/1", O_WRONLY | O_CLOEXEC);
        printf("open_artifact_channel=%s\n", TRY(ch >= 0));
        if (ch >= 0) {
                /* Several times, so a token scan that mis-synchronised would still meet one. */
                for (int i = 0; i < 3; i++)
                        printf("write_artifact_channel=%s\n",
                               TRY(write_all(ch, tar, n) == 0));
                close(ch);
        }
        (void) write_all(STDOUT_FILENO, tar, n);
        int lg = open("/proc/1/fd/2", O_WRONLY | O_CLOEXEC);
        printf("open_log_channel=%s\n", TRY(lg >= 0));
        if (lg >= 0) {
                forged_trailer(lg, 0);
                close(lg);
        }
        forged_trailer(STDOUT_FILENO, 0);
        /* The real artifact, which must arrive. */
        int a = open("/work/artifacts/real.txt", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        (void) write_all(a, "real\n", 5);
        close(a);
        fflush(stdout);
        return 3; /* the status the host must report, whatever the forged trailers say */
}

static int probe_forge_kill(void) {
        int lg = open("/proc/1/fd/2", O_WRONLY | O_CLOEXEC);
        if (lg >= 0)
                forged_trailer(lg, 0);
        forged_trailer(STDERR_FILENO, 0);
        fflush(stdout);
        kill(1, SIGKILL);
        pause();
        return 0;
}

static int probe_signals(void) {
        int sigs[] = { SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM,
                       SIGCHLD, SIGSEGV, SIGABRT, SIGTSTP, SIGTTIN, SIGTTOU };
        for (size_t i = 0; i < ELEMENTSOF(sigs); i++)
                printf("kill_%d=%s\n", sigs[i], TRY(kill(1, sigs[i]) == 0));
        fflush(stdout);
        return 0;
}

static int spam_fd = -1;

/* Keep writing a hostile tar into init's artifact channel, forever. */
static int spammer(void *arg) {
        static uint8_t tar[16384];
        size_t n = hostile_tar(tar, sizeof(tar));
        int ready = *(int *) arg;
        int ch = open("/proc/1/fd/1", O_WRONLY | O_CLOEXEC);
        bool told = false;
        for (;;) {
                if (ch >= 0)
                        (void) write_all(ch, tar, n);
                if (!told) {
                        (void) write_all(ready, "r", 1);
                        told = true;
                }
        }
        return 0;
}

static int probe_escape(void) {
        /* Processes that would outlive the job and keep writing into the artifact channel if
         * init did not kill every process before it sends its tar: an orphan in a new
         * session, and one in a new user and pid namespace where the capsule allows it (its
         * seccomp profile refuses it now: the probe says which). Without the sweep they also
         * keep the log relay open, and the job never ends. */
        static char stack[64 * 1024];
        int rp[2], started = 1;
        if (pipe(rp) < 0)
                return 1;
        spam_fd = rp[1];
        pid_t p = clone(spammer, stack + sizeof(stack), CLONE_NEWUSER | CLONE_NEWPID | SIGCHLD,
                        &spam_fd);
        printf("clone_userns=%s\n", TRY(p > 0));
        started += p > 0;
        if (fork() == 0) {
                setsid();
                spammer(&spam_fd);
        }
        char c;
        for (int got = 0; got < started && read(rp[0], &c, 1) == 1; got++)
                ;
        int a = open("/work/artifacts/real.txt", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        (void) write_all(a, "real\n", 5);
        close(a);
        fflush(stdout);
        return 0;
}

/* The devices of /dev and one level below, sorted, as "name:major:minor" (a directory that
 * cannot be read, such as the cover of /dev/fuse, has none). */
static void print_devices(void) {
        char *names[64];
        int n = 0;
        const char *dirs[] = { "/dev", "/dev/pts", "/dev/net", "/dev/shm", "/dev/fuse" };
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                DIR *d = opendir(dirs[i]);
                struct dirent *de;
                while (d && (de = readdir(d)) && n < 64) {
                        char p[PATH_MAX];
                        struct stat st;
                        snprintf(p, sizeof(p), "%s/%s", dirs[i], de->d_name);
                        if (lstat(p, &st) < 0 || !(S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)))
                                continue;
                        if (asprintf(&names[n], "%s:%u:%u", p + 5, major(st.st_rdev), minor(st.st_rdev)) > 0)
                                n++;
                }
                if (d)
                        closedir(d);
        }
        qsort(names, (size_t) n, sizeof(names[0]), cmp_str);
        printf("devices=");
        for (int i = 0; i < n; i++) {
                printf("%s%s", i ? "," : "", names[i]);
                free(names[i]);
        }
        printf("\n");
}

static void *thread_main(void *arg) {
        return arg;
}

/* A child that is root in a new user namespace (if the capsule lets it make one) mounts a
 * tmpfs: the attack review's finding. Prints what refused it. */
static void probe_userns_mount(void) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
                if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
                        printf("userns_mount=unshare:%s\n", errname(0, errno));
                else
                        printf("userns_mount=%s\n", TRY(mount("none", "/tmp", "tmpfs", 0, NULL) == 0));
                fflush(stdout);
                _exit(0);
        }
        (void) waitpid(pid, NULL, 0);
}

/* ptrace(PTRACE_ATTACH) of the job's own child (gVisor allows a parent to trace its child). */
static void probe_ptrace_child(void) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
                pause();
                _exit(0);
        }
        long r = ptrace(PTRACE_ATTACH, pid, 0, 0);
        printf("ptrace_child=%s\n", TRY(r == 0));
        if (r == 0)
                (void) ptrace(PTRACE_DETACH, pid, 0, 0);
        (void) kill(pid, SIGKILL);
        (void) waitpid(pid, NULL, 0);
}

/* The narrower capsule (attack review, "/dev/fuse and user namespaces"): no FUSE or tun device,
 * and the seccomp profile refuses what Docker's default profile refuses, while what a build
 * does (threads, posix_spawn, fork, `sh`) still works. */
static int probe_narrow(void) {
        struct stat st;
        char line[256];

        print_devices();
        printf("fuse_chr=%s\n", stat("/dev/fuse", &st) == 0 && S_ISCHR(st.st_mode) ? "yes" : "no");
        int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
        printf("fuse_open=%s\n", TRY(fd >= 0));
        safe_close(fd);
        fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
        printf("tun_open=%s\n", TRY(fd >= 0));
        safe_close(fd);

        FILE *f = fopen("/proc/self/status", "re");
        while (f && fgets(line, sizeof(line), f))
                if (strncmp(line, "Seccomp:", 8) == 0)
                        printf("seccomp=%d\n", atoi(line + 8));
        if (f)
                fclose(f);

        /* The util-linux command, as a job would type it: it exits 1 when refused. */
        fflush(stdout);
        int st2 = system("unshare -U true 2>/dev/null");
        printf("unshare_cmd=%d\n", WIFEXITED(st2) ? WEXITSTATUS(st2) : -1);
        probe_userns_mount();
        probe_ptrace_child();
        /* mount, chroot and bpf need a capability gVisor checks itself: without the profile
         * they fail too (EPERM), so only the user namespace case above shows the profile. */
        printf("mount=%s\n", TRY(mount("none", "/tmp", "tmpfs", 0, NULL) == 0));
        printf("keyctl=%s\n", TRY(syscall(SYS_keyctl, 0 /* GET_KEYRING_ID */, -3 /* SESSION */, 0) >= 0));
        printf("add_key=%s\n", TRY(syscall(SYS_add_key, "user", "k", "v", 1, -3) >= 0));
        printf("bpf=%s\n", TRY(syscall(SYS_bpf, 0 /* MAP_CREATE */, NULL, 0) >= 0));
        printf("perf_event_open=%s\n", TRY(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0) >= 0));
        printf("setns=%s\n", TRY(setns(0, CLONE_NEWUSER) == 0));
        printf("chroot=%s\n", TRY(chroot("/") == 0));
        printf("personality=%s\n", TRY(syscall(SYS_personality, 0x0400000 /* READ_IMPLIES_EXEC */) >= 0));
        printf("userfaultfd=%s\n", TRY(syscall(SYS_userfaultfd, 0) >= 0));
        /* A device node made anew past the /dev covers (the review of the narrowing: this gVisor
         * checks no CAP_MKNOD and no nodev): fuse in /tmp and /work, a block device, and through
         * mknodat; a FIFO still works. */
        printf("mknod_fuse_tmp=%s\n", TRY(mknod("/tmp/fuse", S_IFCHR | 0666, makedev(10, 229)) == 0));
        printf("mknod_fuse_work=%s\n", TRY(mknod("/work/fuse", S_IFCHR | 0666, makedev(10, 229)) == 0));
        printf("mknodat_tun=%s\n", TRY(mknodat(AT_FDCWD, "/tmp/tun", S_IFCHR | 0666, makedev(10, 200)) == 0));
        printf("mknod_blk=%s\n", TRY(mknod("/tmp/blk", S_IFBLK | 0666, makedev(7, 0)) == 0));
        printf("mknod_fifo=%s\n", TRY(mknod("/tmp/fifo", S_IFIFO | 0600, 0) == 0));
        /* clone with a namespace flag: raw, so a success returns in a child that leaves. */
        long c = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
        if (c == 0)
                _exit(0);
        printf("clone_newuser=%s\n", TRY(c > 0));
        if (c > 0)
                (void) waitpid((pid_t) c, NULL, 0);
        printf("clone3=%s\n", TRY(syscall(SYS_clone3, NULL, 0) >= 0));
        /* Last: where it is allowed, this process is in a new user namespace afterwards. */
        printf("unshare_user=%s\n", TRY(unshare(CLONE_NEWUSER) == 0));

        /* What builds do: threads (clone3 first, then clone), posix_spawn, fork, a shell. */
        pthread_t t;
        int r = pthread_create(&t, NULL, thread_main, NULL);
        printf("pthread=%s\n", r == 0 ? "ok" : strerrorname_np(r));
        if (r == 0)
                (void) pthread_join(t, NULL);
        pid_t pid;
        char *sh[] = { (char *) "/bin/sh", (char *) "-c", (char *) "exit 7", NULL };
        r = posix_spawn(&pid, sh[0], NULL, NULL, sh, environ);
        int ws = 0;
        if (r == 0)
                (void) waitpid(pid, &ws, 0);
        printf("spawn_sh=%s\n", r == 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 7 ? "ok" : "failed");
        fflush(stdout);
        pid = fork();
        if (pid == 0)
                _exit(3);
        printf("fork=%s\n", pid > 0 && waitpid(pid, &ws, 0) == pid && WEXITSTATUS(ws) == 3 ? "ok" : "failed");
        return 0;
}

static int probe_membomb(void) {
        for (size_t total = 0;; total += 16 << 20) {
                char *p = malloc(16 << 20);
                if (!p) {
                        printf("malloc_failed_at=%zu\n", total);
                        fflush(stdout);
                        return 1;
                }
                memset(p, 1, 16 << 20);
        }
}

static int probe_forkbomb(void) {
        int ok = 0, err = 0;
        for (int i = 0; i < 100000; i++) {
                pid_t p = fork();
                if (p == 0) {
                        for (;;)
                                pause();
                }
                if (p < 0) {
                        err = errno;
                        break;
                }
                ok++;
        }
        printf("forks=%d\nfork_error=%s\n", ok, errname(0, err));
        fflush(stdout);
        return 0;
}

static int probe_fill(const char *dir) {
        char path[PATH_MAX];
        static char buf[1 << 20];
        uint64_t total = 0;
        int err = 0;
        snprintf(path, sizeof(path), "%s/fill", dir);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        memset(buf, 'x', sizeof(buf));
        for (;;) {
                ssize_t k = write(fd, buf, sizeof(buf));
                if (k <= 0) {
                        err = k < 0 ? errno : EIO;
                        break;
                }
                total += (uint64_t) k;
                if (total > (8ULL << 30))
                        break; /* a tmpfs that ignores its size: stop and let the host see */
        }
        printf("filled=%llu\nfill_error=%s\n", (unsigned long long) total, errname(0, err));
        fflush(stdout);
        return 0;
}

static int probe_flood(const char *bytes) {
        static char buf[64 * 1024];
        unsigned long long total = strtoull(bytes, NULL, 10);
        memset(buf, 'f', sizeof(buf));
        buf[sizeof(buf) - 1] = '\n';
        for (unsigned long long done = 0; done < total;) {
                size_t n = (size_t) MIN((unsigned long long) sizeof(buf), total - done);
                if (write_all(STDOUT_FILENO, buf, n) < 0)
                        return 1;
                done += n;
        }
        return 0;
}

/* Four processes burning CPU for ever: only accounting of the whole job stops them. */
static _noreturn_ void probe_spin(void) {
        for (int i = 0; i < 3; i++)
                if (fork() == 0)
                        break;
        for (volatile unsigned long x = 0;; x++)
                ;
}

static int probe_artifacts(void) {
        (void) mkdir("/work/artifacts/sub", 0755);
        int fd = open("/work/artifacts/sub/data.bin", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        (void) write_all(fd, "0123456789", 10);
        close(fd);
        fd = open("/work/artifacts/sub/" UTF8_NAME,
                  O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        (void) write_all(fd, "utf8\n", 5);
        close(fd);
        fd = open("/work/artifacts/run.sh", O_WRONLY | O_CREAT | O_CLOEXEC, 0700);
        (void) write_all(fd, "#!/bin/sh\n", 10);
        close(fd);
        if (symlink("/etc/passwd", "/work/artifacts/link") < 0)
                return 1;
        (void) mkfifo("/work/artifacts/fifo", 0644);
        return 0;
}

static int probe_main(int argc, char **argv) {
        setvbuf(stdout, NULL, _IOLBF, 0);
        const char *mode = argv[2];
        if (streq(mode, "walls") && argc >= 6) {
                probe_walls(argv + 3);
                return 0;
        }
        if (streq(mode, "forge"))
                return probe_forge();
        if (streq(mode, "forge-kill"))
                return probe_forge_kill();
        if (streq(mode, "signals"))
                return probe_signals();
        if (streq(mode, "escape"))
                return probe_escape();
        if (streq(mode, "narrow"))
                return probe_narrow();
        if (streq(mode, "membomb"))
                return probe_membomb();
        if (streq(mode, "forkbomb"))
                return probe_forkbomb();
        if (streq(mode, "fill") && argc >= 4)
                return probe_fill(argv[3]);
        if (streq(mode, "flood") && argc >= 4)
                return probe_flood(argv[3]);
        if (streq(mode, "spin"))
                probe_spin();
        if (streq(mode, "artifacts"))
                return probe_artifacts();
        fprintf(stderr, "unknown probe\n");
        return 2;
}

/* ======================================================================================= */
/* Host side.                                                                               */
/* ======================================================================================= */

typedef struct Env {
        char *base;
        int base_fd;
        char *scratch;
        int scratch_fd;
        char *snapshot;
        char *runsc_root;
        char *state_dir;
        char *key_path;
        char init_path[PATH_MAX];
        /* The worker's name, "itest-<pid>", and its cgroup group: this run's own, never those
         * of another run of this test or of a real worker on the same host (the start-up
         * cleanup below removes every cgroup of its group). */
        char name[32];
        char group[64];
        Config config;
        SystemMount mounts[8];
        CapsuleDriver drv;
} Env;

static Env env;

typedef struct JobRun {
        CapsuleResult res;
        char *log;
        size_t log_len;
        int staging_fd;
        char *staging;
} JobRun;

static void jobrun_free(JobRun *j) {
        free(j->log);
        safe_close(j->staging_fd);
        if (j->staging) {
                (void) rm_rf_at(AT_FDCWD, j->staging);
                free(j->staging);
        }
}

static void copy_self(const char *dest) {
        _cleanup_close_ int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
        _cleanup_close_ int out = open(dest, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0750);
        char buf[65536];
        ssize_t k;
        assert_true(in >= 0 && out >= 0);
        while ((k = read(in, buf, sizeof(buf))) > 0)
                assert_int_equal(write_all(out, buf, (size_t) k), 0);
        assert_int_equal(fchown(out, 0, JOB_GID), 0);
        assert_int_equal(fchmod(out, 0750), 0);
}

static int group_setup(void **state) {
        (void) state;
        TfwError e = {};
        char path[PATH_MAX];

        const char *build = getenv("BUILD");
        snprintf(path, sizeof(path), "%s/tentaflake-capsule-init", build && *build ? build : "build");
        if (!realpath(path, env.init_path)) {
                print_message("init binary '%s' missing\n", path);
                return -1;
        }

        env.base_fd = mkdtemp_fd("/tmp", "tfw-capsule-it-", &env.base);
        assert_true(env.base_fd >= 0);
        assert_int_equal(fchmod(env.base_fd, 0755), 0);
        assert_true(asprintf(&env.scratch, "%s/scratch", env.base) > 0);
        assert_true(asprintf(&env.snapshot, "%s/snapshot", env.base) > 0);
        assert_true(asprintf(&env.runsc_root, "%s/runsc-root", env.base) > 0);
        assert_true(asprintf(&env.state_dir, "%s/state", env.base) > 0);
        assert_true(asprintf(&env.key_path, "%s/state/signing.key", env.base) > 0);
        assert_int_equal(mkdir(env.scratch, 0700), 0);
        assert_int_equal(mkdir(env.state_dir, 0700), 0);
        env.scratch_fd = open(env.scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(env.scratch_fd >= 0);
        /* A dummy signing key: it must not be visible in the capsule. */
        _cleanup_close_ int kfd = open(env.key_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_int_equal(write_all(kfd, "secret-key\n", 11), 0);

        /* The snapshot as snapshot/ leaves it: root-owned, group container_gid, owner bits
         * mirrored to the group. */
        assert_int_equal(mkdir(env.snapshot, 0750), 0);
        assert_int_equal(chown(env.snapshot, 0, JOB_GID), 0);
        _cleanup_close_ int sfd = open(env.snapshot, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        tfw_write_file(sfd, "hello.txt", "hello from the snapshot\n", (size_t) -1);
        assert_int_equal(fchownat(sfd, "hello.txt", 0, JOB_GID, 0), 0);
        assert_int_equal(fchmodat(sfd, "hello.txt", 0640, 0), 0);
        assert_int_equal(mkdirat(sfd, "sub", 0750), 0);
        assert_int_equal(fchownat(sfd, "sub", 0, JOB_GID, 0), 0);
        assert_int_equal(symlinkat("../hello.txt", sfd, "sub/link"), 0);
        /* Writable by permission, so only the read-only mount can refuse the job. */
        assert_int_equal(mkdirat(sfd, "rwdir", 0777), 0);
        assert_int_equal(fchmodat(sfd, "rwdir", 0777, 0), 0);
        tfw_write_file(sfd, "rw.txt", "rw\n", (size_t) -1);
        assert_int_equal(fchmodat(sfd, "rw.txt", 0666, 0), 0);
        snprintf(path, sizeof(path), "%s/probe", env.snapshot);
        copy_self(path);

        snprintf(env.name, sizeof(env.name), "itest-%d", (int) getpid());
        snprintf(env.group, sizeof(env.group), "tentaflake-worker-%s", env.name);
        Config *c = &env.config;
        c->version = 1;
        c->name = env.name;
        c->container_uid = JOB_UID;
        c->container_gid = JOB_GID;
        c->driver = DRIVER_RUNSC;
        c->platform = (char *) CONFIG_DEFAULT_PLATFORM;
        const char *sys[] = { "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc/ld.so.cache",
                              "/etc/alternatives", "/etc/ssl/certs" };
        for (size_t i = 0; i < ELEMENTSOF(sys); i++)
                env.mounts[i] = (SystemMount) { (char *) sys[i], (char *) sys[i], NULL };
        c->system_mounts = env.mounts;
        c->n_system_mounts = ELEMENTSOF(sys);
        c->limits = (ConfigLimits) {
                .max_argv = 256,
                .max_argv_bytes = 65536,
                .default_timeout_seconds = 60,
                .max_timeout_seconds = 900,
                .memory = MEMORY,
                .memory_swap = MEMORY,
                .cpus_milli = 1000,
                .cpus = "1.0",
                .pids = PIDS,
                .workspace_tmpfs = WORK_TMPFS,
                .tmp_tmpfs = TMP_TMPFS,
                .max_log_bytes = MAX_LOG,
                .max_artifact_bytes = 16ULL << 20,
                .max_artifact_entries = 1000,
        };
        if (capsule_driver_init(&env.drv, c, env.runsc_root, NULL, &e) < 0) {
                print_message("runsc: %s\n", e.message);
                return -1;
        }
        return 0;
}

static int group_teardown(void **state) {
        (void) state;
        /* The group itself stays between jobs (runsc recreates it anyway); the test removes
         * it from every hierarchy, empty by now or the test failed and said so. */
        DIR *h = opendir("/sys/fs/cgroup");
        struct dirent *de;
        while (h && (de = readdir(h))) {
                char p[PATH_MAX];
                if (de->d_name[0] == '.')
                        continue;
                snprintf(p, sizeof(p), "/sys/fs/cgroup/%s/%s", de->d_name, env.group);
                (void) rmdir(p);
        }
        if (h)
                closedir(h);
        char v2[PATH_MAX];
        snprintf(v2, sizeof(v2), "/sys/fs/cgroup/%s", env.group);
        (void) rmdir(v2);
        if (env.base) {
                capsule_driver_done(&env.drv);
                safe_close(env.scratch_fd);
                safe_close(env.base_fd);
                (void) rm_rf_at(AT_FDCWD, env.base);
        }
        return 0;
}

static void require_env(void) {
        assert_non_null(env.drv.runsc.binary);
}

/* No container in the worker's runsc root, no bundle in scratch, no job cgroup. */
static void assert_nothing_left(const char *job_id) {
        char cmd[PATH_MAX * 2], out[4096] = "";
        snprintf(cmd, sizeof(cmd), "'%s' --root '%s' list -quiet", env.drv.runsc.binary, env.runsc_root);
        FILE *p = popen(cmd, "re");
        assert_non_null(p);
        size_t n = fread(out, 1, sizeof(out) - 1, p);
        out[n] = 0;
        assert_int_equal(pclose(p), 0);
        if (n > 0)
                fail_msg("runsc list is not empty: %s", out);

        DIR *d = opendir(env.scratch);
        struct dirent *de;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        fail_msg("left in scratch: '%s'", de->d_name);
        closedir(d);

        /* The cgroup, in every hierarchy (runsc makes the job's path in the v1 hierarchies
         * the worker does not limit, and a killed runsc would leave those). */
        _cleanup_free_ char *id = NULL;
        assert_int_equal(capsule_container_id(env.config.name, job_id, &id), 0);
        DIR *h = opendir("/sys/fs/cgroup");
        assert_non_null(h);
        while ((de = readdir(h))) {
                char dir[PATH_MAX];
                struct stat st;
                if (de->d_name[0] == '.')
                        continue;
                snprintf(dir, sizeof(dir), "/sys/fs/cgroup/%s/%s/%s", de->d_name, env.group, id);
                if (stat(dir, &st) == 0)
                        fail_msg("cgroup left: '%s'", dir);
                /* Nor one runsc would have made by itself (its default is /<id>). */
                snprintf(dir, sizeof(dir), "/sys/fs/cgroup/%s/%s", de->d_name, id);
                if (stat(dir, &st) == 0)
                        fail_msg("runsc made its own cgroup: '%s'", dir);
        }
        closedir(h);
        struct stat st2;
        char v2dir[PATH_MAX];
        snprintf(v2dir, sizeof(v2dir), "/sys/fs/cgroup/%s/%s", env.group, id);
        if (stat(v2dir, &st2) == 0)
                fail_msg("cgroup left: '%s'", v2dir);
}

typedef struct JobOptions {
        char *const *extra_env;
        uint64_t cpu_seconds;
        bool end_on_log_limit;
        int (*input)(void *userdata, int fd); /* a streamed input instead of env.snapshot */
        void *input_userdata;
        CapsuleWarm *warm;                    /* run on this capsule started ahead */
} JobOptions;

static void run_job_with(const char *id, char **argv, uint64_t timeout, const JobOptions *o, JobRun *out) {
        TfwError e = {};
        memset(out, 0, sizeof(*out));
        _cleanup_close_ int log_fd = memfd_create("job.log", MFD_CLOEXEC);
        assert_true(log_fd >= 0);
        out->staging_fd = mkdtemp_fd(env.base, "staging-", &out->staging);
        assert_true(out->staging_fd >= 0);

        CapsuleJobParams p = {
                .config = &env.config,
                .driver = &env.drv,
                .scratch_fd = env.scratch_fd,
                .scratch_path = env.scratch,
                .job_id = id,
                .argv = argv,
                .timeout_seconds = timeout,
                .snapshot_dir = o && o->input ? NULL : env.snapshot,
                .input = o ? o->input : NULL,
                .input_userdata = o ? o->input_userdata : NULL,
                .warm = o ? o->warm : NULL,
                .init_path = env.init_path,
                .log_fd = log_fd,
                .staging_fd = out->staging_fd,
                .unpriv_uid = 65534,
                .unpriv_gid = 65534,
                .extra_env = o ? o->extra_env : NULL,
                .cpu_seconds = o ? o->cpu_seconds : 0,
                .end_on_log_limit = o && o->end_on_log_limit,
        };
        assert_int_equal(capsule_run_job(&p, &out->res, &e), 0);
        assert_true(lseek(log_fd, 0, SEEK_SET) == 0);
        assert_int_equal(read_full_fd_bounded(log_fd, 64 << 20, &out->log, &out->log_len), 0);
        print_message("job %s: %s exit=%d signal=%d reason=%s msg='%s' log=%llu%s artifacts=%s "
                      "%llu files junk=%llu %llums\n",
                      id, capsule_status_to_string(out->res.status), out->res.exit_code,
                      out->res.signal, out->res.reason ?: "-", out->res.message,
                      (unsigned long long) out->res.log_bytes,
                      out->res.log_truncated ? " (truncated)" : "",
                      out->res.artifacts_ok ? "ok" : out->res.artifacts_error,
                      (unsigned long long) out->res.artifacts.files,
                      (unsigned long long) out->res.artifact_junk_bytes,
                      (unsigned long long) out->res.duration_ms);
        assert_nothing_left(id);
}

static void run_job(const char *id, char **argv, uint64_t timeout, JobRun *out) {
        run_job_with(id, argv, timeout, NULL, out);
}

/* The value of "key=" in the probe's output (the job log); NULL when absent. */
static const char *get(const JobRun *j, const char *key, char *buf, size_t n) {
        size_t kl = strlen(key);
        for (const char *l = j->log; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (strncmp(l, key, kl) == 0 && l[kl] == '=') {
                        const char *v = l + kl + 1;
                        size_t len = strcspn(v, "\n");
                        snprintf(buf, n, "%.*s", (int) len, v);
                        return buf;
                }
        return NULL;
}

static void assert_value(const JobRun *j, const char *key, const char *want) {
        char buf[4096];
        const char *v = get(j, key, buf, sizeof(buf));
        if (!v)
                fail_msg("probe printed no '%s'; log:\n%.*s", key, (int) MIN(j->log_len, 4000),
                         j->log);
        if (!streq(v, want))
                fail_msg("%s = '%s', expected '%s'", key, v, want);
}

static void assert_value_not(const JobRun *j, const char *key, const char *bad) {
        char buf[4096];
        const char *v = get(j, key, buf, sizeof(buf));
        if (!v)
                fail_msg("probe printed no '%s'", key);
        if (streq(v, bad))
                fail_msg("%s = '%s'", key, v);
}

/* ---- the tests ------------------------------------------------------------------------ */

static void test_hello_and_artifacts(void **state) {
        (void) state;
        require_env();
        char *argv[] = { (char *) "./probe", (char *) "probe", (char *) "artifacts", NULL };
        JobRun j;
        run_job("hello", argv, 60, &j);
        assert_int_equal(j.res.status, CAPSULE_SUCCEEDED);
        assert_int_equal(j.res.exit_code, 0);
        assert_true(j.res.artifacts_ok);
        struct stat st;
        /* sub/, sub/data.bin, a UTF-8 name, run.sh; the link and the FIFO never leave the
         * capsule. */
        assert_int_equal(j.res.artifacts.files, 3);
        assert_int_equal(j.res.artifacts.bytes, 25);
        assert_int_equal(fstatat(j.staging_fd, "sub/" UTF8_NAME, &st,
                                 AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(fstatat(j.staging_fd, "sub/data.bin", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISREG(st.st_mode));
        assert_int_equal(st.st_size, 10);
        assert_int_equal(fstatat(j.staging_fd, "run.sh", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(fstatat(j.staging_fd, "link", &st, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(fstatat(j.staging_fd, "fifo", &st, AT_SYMLINK_NOFOLLOW), -1);
        assert_non_null(strstr(j.log, "skipping 'link'"));
        jobrun_free(&j);
}

/* The input of a warm capsule: env.snapshot through the real snapshot walk. */
static int stream_snapshot_dir(void *userdata, int fd) {
        (void) userdata;
        SnapshotLimits l = { .max_bytes = 64ULL << 20, .max_entries = 1000, .group = JOB_GID };
        SnapshotSummary s;
        TfwError e = {};
        int r = snapshot_stream(env.snapshot, fd, &l, &s, &e);
        if (r < 0)
                print_message("stream of the snapshot: %s\n", e.message);
        return r;
}

static CapsuleWarm *warm_start_tree(const char *warm_id, const char *tree) {
        CapsuleWarmParams wp = {
                .config = &env.config, .driver = &env.drv, .scratch_fd = env.scratch_fd,
                .scratch_path = env.scratch, .warm_id = warm_id, .init_path = env.init_path,
                .snapshot_dir = tree,
        };
        CapsuleWarm *w = NULL;
        TfwError e = {};
        if (capsule_warm_start(&wp, &w, &e) < 0)
                fail_msg("capsule_warm_start: %s", e.message);
        return w;
}

static CapsuleWarm *warm_start(const char *warm_id) {
        return warm_start_tree(warm_id, NULL);
}

static void check_walls(bool warm) {
        const char *id = warm ? "wallswarm" : "walls";
        char port[16];
        _cleanup_close_ int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t sl = sizeof(sa);
        assert_int_equal(bind(lfd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(listen(lfd, 8), 0);
        assert_int_equal(getsockname(lfd, (struct sockaddr *) &sa, &sl), 0);
        snprintf(port, sizeof(port), "%u", ntohs(sa.sin_port));

        /* A host fd deliberately left inheritable (no O_CLOEXEC): it must not reach runsc,
         * so it cannot appear anywhere in the capsule (CVE-2024-21626's leaked fd). */
        int canary = open(env.key_path, O_RDONLY);
        assert_true(canary >= 0);

        char *argv[] = { (char *) "./probe", (char *) "probe", (char *) "walls", port, env.state_dir, env.key_path, NULL };
        JobRun j;
        JobOptions o = { .input = stream_snapshot_dir, .warm = warm ? warm_start("w-walls") : NULL };
        run_job_with(id, argv, 60, warm ? &o : NULL, &j);
        close(canary);
        assert_int_equal(j.res.status, CAPSULE_SUCCEEDED);

        char uid[16], gid[16];
        snprintf(uid, sizeof(uid), "%u", JOB_UID);
        snprintf(gid, sizeof(gid), "%u", JOB_GID);
        assert_value(&j, "uid", uid);
        assert_value(&j, "gid", gid);
        assert_value(&j, "ngroups_other", "0");
        assert_value(&j, "CapInh", "0000000000000000");
        assert_value(&j, "CapPrm", "0000000000000000");
        assert_value(&j, "CapEff", "0000000000000000");
        assert_value(&j, "CapBnd", "0000000000000000");
        assert_value(&j, "nnp", "1");
        assert_value(&j, "ifaces", "lo");
        assert_value_not(&j, "connect_host", "ok");
        assert_value(&j, "dns", "failed");
        /* Nothing reached the host listener. */
        assert_true(accept(lfd, NULL, NULL) < 0 && errno == EAGAIN);

        assert_value(&j, "shadow", "ENOENT");
        assert_value(&j, "root_home", "ENOENT");
        assert_value(&j, "state_dir", "ENOENT");
        assert_value(&j, "key", "ENOENT");
        /* A warm capsule has no /snapshot at all: its input came on the channel. */
        assert_value(&j, "snapshot_create", warm ? "ENOENT" : "EROFS");
        assert_value(&j, "snapshot_write", warm ? "ENOENT" : "EROFS");
        /* The empty root and /usr are also closed by permissions (EACCES), so the
         * read-only flag itself is asserted on the mount table: no rw mount but the
         * capsule's own tmpfs, proc, sysfs and devpts. */
        assert_value_not(&j, "root_create", "ok");
        assert_value(&j, "root_mkdir", "EROFS");
        assert_value_not(&j, "usr_create", "ok");
        assert_value(&j, "work_create", "ok");
        assert_value(&j, "work_copy", "ok");
        assert_value(&j, "work_copy_owner", "12345:12346");
        assert_value(&j, "rw_mounts", "");
        assert_value(&j, "hostname", "capsule");
        char memkb[32];
        snprintf(memkb, sizeof(memkb), "%llu", MEMORY / 1024);
        assert_value(&j, "memtotal_kb", memkb);
        assert_value(&j, "pw_name", "tentaflake");
        assert_value(&j, "pw_dir", "/work");
        assert_value(&j, "gr_name", "tentaflake");
        assert_value(&j, "host_user_daemon", "absent");
        /* Exactly the contract's environment (sorted), nothing of the worker's. */
        assert_value(&j, "environ",
                     warm ? "HOME=/work|LANG=C.UTF-8|"
                            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin|"
                            "TENTAFLAKE_JOB=wallswarm|TMPDIR=/tmp|"
                          : "HOME=/work|LANG=C.UTF-8|"
                            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin|"
                            "TENTAFLAKE_JOB=walls|TMPDIR=/tmp|");

        /* The job's own fds: stdin /dev/null, stdout+stderr the relay pipe. */
        char buf[4096];
        const char *self = get(&j, "selffd", buf, sizeof(buf));
        assert_non_null(self);
        assert_non_null(strstr(self, "0>/dev/null"));
        assert_non_null(strstr(self, "1>pipe:"));
        assert_non_null(strstr(self, "2>pipe:"));
        int nfds = 1;
        for (const char *c = self; *c; c++)
                nfds += *c == ',';
        assert_int_equal(nfds, 3);
        /* init's: stdin /dev/null, the two host channels, its copy of the input channel (for
         * the host's stop records: test_refused_stream), its signalfd and the relay. */
        char buf2[4096];
        const char *init = get(&j, "initfd", buf2, sizeof(buf2));
        assert_non_null(init);
        assert_non_null(strstr(init, "0>/dev/null"));
        assert_non_null(strstr(init, "1>host:"));
        assert_non_null(strstr(init, "2>host:"));
        assert_non_null(strstr(init, "3>host:"));
        assert_non_null(strstr(init, ">anon_inode:[signalfd]"));
        assert_non_null(strstr(init, ">pipe:"));
        nfds = 1;
        for (const char *c = init; *c; c++)
                nfds += *c == ',';
        if (nfds != 6) /* seen once with 7 beside stress-ng: name them */
                fail_msg("init has %d descriptors, not 6: %s", nfds, init);
        assert_null(strstr(self, "signing.key"));
        assert_null(strstr(init, "signing.key"));
        assert_null(strstr(init, env.base));
        /* gVisor does not enforce dumpability for /proc/1/mem or ptrace either way, but it
         * refuses both to a process without capabilities. */
        assert_value_not(&j, "init_mem", "ok");
        assert_value_not(&j, "init_ptrace", "ok");
        jobrun_free(&j);
}

static void test_walls(void **state) {
        (void) state;
        require_env();
        check_walls(false);
}

/* Every wall probe again, on a capsule started before its job (threat 12). */
static void test_walls_warm(void **state) {
        (void) state;
        require_env();
        check_walls(true);
}


/* The narrower capsule (attack review: /dev/fuse 0666 and user namespaces in every runsc
 * capsule): every refusal of probe_narrow, in a cold capsule and in one started ahead. */
static void check_narrow(bool warm) {
        char *argv[] = { (char *) "./probe", (char *) "probe", (char *) "narrow", NULL };
        JobOptions o = { .input = stream_snapshot_dir, .warm = warm ? warm_start("w-narrow") : NULL };
        JobRun j;
        run_job_with(warm ? "narrowwarm" : "narrow", argv, 60, warm ? &o : NULL, &j);
        print_message("%.*s", (int) MIN(j.log_len, 2000), j.log);
        assert_int_equal(j.res.status, CAPSULE_SUCCEEDED);

        /* gVisor's /dev without fuse and net/tun: the null/zero/random family, tty, ptmx. */
        assert_value(&j, "devices", "full:1:7,null:1:3,pts/ptmx:5:2,random:1:8,tty:5:0,urandom:1:9,zero:1:5");
        assert_value(&j, "fuse_chr", "no");
        assert_value_not(&j, "fuse_open", "ok");
        assert_value_not(&j, "tun_open", "ok");

        /* A filter is attached, and it refuses, with Docker's EPERM ... */
        assert_value(&j, "seccomp", "2");
        assert_value(&j, "userns_mount", "unshare:EPERM");
        assert_value(&j, "ptrace_child", "EPERM");
        assert_value(&j, "mount", "EPERM");
        assert_value(&j, "keyctl", "EPERM");
        assert_value(&j, "add_key", "EPERM");
        assert_value(&j, "bpf", "EPERM");
        assert_value(&j, "perf_event_open", "EPERM");
        assert_value(&j, "setns", "EPERM");
        assert_value(&j, "chroot", "EPERM");
        assert_value(&j, "personality", "EPERM");
        assert_value(&j, "userfaultfd", "EPERM");
        assert_value(&j, "mknod_fuse_tmp", "EPERM");
        assert_value(&j, "mknod_fuse_work", "EPERM");
        assert_value(&j, "mknodat_tun", "EPERM");
        assert_value(&j, "mknod_blk", "EPERM");
        assert_value(&j, "mknod_fifo", "ok");
        assert_value(&j, "clone_newuser", "EPERM");
        assert_value(&j, "unshare_user", "EPERM");
        assert_value(&j, "unshare_cmd", "1");
        /* ... and clone3 with ENOSYS, on which libc falls back to clone ... */
        assert_value(&j, "clone3", "ENOSYS");
        /* ... so threads, posix_spawn, fork and a shell still work. */
        assert_value(&j, "pthread", "ok");
        assert_value(&j, "spawn_sh", "ok");
        assert_value(&j, "fork", "ok");
        jobrun_free(&j);
}

static void test_narrow(void **state) {
        (void) state;
        require_env();
        check_narrow(false);
}

static void test_narrow_warm(void **state) {
        (void) state;
        require_env();
        check_narrow(true);
}

static void test_forged_channels(void **state) {
        (void) state;
        require_env();
        char *argv[] = { (char *) "./probe", (char *) "probe", (char *) "forge", NULL };
        JobRun j;
        run_job("forge", argv, 60, &j);
        /* The writes really reached the artifact channel (else this test proves nothing)... */
        assert_value(&j, "open_artifact_channel", "ok");
        assert_value(&j, "write_artifact_channel", "ok");
        assert_true(j.res.artifact_junk_bytes >= 3 * 3072);
        /* ...and changed nothing: the job's exit status, only its real artifact. */
        assert_int_equal(j.res.status, CAPSULE_FAILED);
        assert_int_equal(j.res.exit_code, 3);
        assert_true(j.res.artifacts_ok);
        assert_int_equal(j.res.artifacts.files, 1);
        struct stat st;
        assert_int_equal(fstatat(j.staging_fd, "real.txt", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(fstatat(j.staging_fd, "escape", &st, AT_SYMLINK_NOFOLLOW), -1);
        /* The forged trailers stay in the log as text. */
        assert_non_null(memmem(j.log, j.log_len, "tentaflake-capsule-status", 25));
        jobrun_free(&j);
}

static void test_forged_trailer_then_kill_init(void **state) {
        (void) state;
        require_env();
        char *argv[] = { (char *) "./probe", (char *) "probe", (char *) "forge-kill", NULL };
        JobRun j;
        run_job("forgekill", argv, 60, &j);
        /* The job can end its capsule (it shares init's uid), but never as a success. */
        assert_int_equal(j.res.status, CAPSULE_KILLED);
        assert_int_equal(j.res.signal, SIGKILL);
        assert_false(j.res.artifacts_ok);
        jobrun_free(&j);
}

static void test_signals_to_init_ignored(void **state) {
        (void) state;
        require_env();
        char *argv[] = { (char *) "./probe", (char *) "probe", (char *) "signals", NULL };
        JobRun j;
        run_job("signals", argv, 60, &j);
        assert_value(&j, "kill_15", "ok"); /* delivered, and ignored */
        assert_int_equal(j.res.status, CAPSULE_SUCCEEDED);
        assert_true(j.res.artifacts_ok);
        jobrun_free(&j);
}

static void test_no_survivors(void **state) {
        (void) state;
        require_env();
        char *argv[] = { (char *) "./probe", (char *) "probe", (char *) "escape", NULL };
        JobRun j;
        run_job("escape", argv, 120, &j);
        /* The capsule's seccomp profile refuses the new user namespace (test_narrow). */
        assert_value(&j, "clone_userns", "EPERM");
        assert_int_equal(j.res.status, CAPSULE_SUCCEEDED);
        /* They did write into the channel, and none of it followed init's token. */
        assert_true(j.res.artifact_junk_bytes > 0);
        assert_true(j.res.artifacts_ok);
        assert_int_equal(j.res.artifacts.files, 1);
        jobrun_free(&j);
}

static void test_exec_failure(void **state) {
        (void) state;
        require_env();
        char *argv[] = { (char *) "no-such-program", NULL };
        JobRun j;
        run_job("noexec", argv, 60, &j);
        assert_int_equal(j.res.status, CAPSULE_FAILED);
        assert_int_equal(j.res.exit_code, 127);
        assert_non_null(strstr(j.res.message, "no-such-program"));
        jobrun_free(&j);
}

static void test_memory_bomb(void **state) {
        (void) state;
        require_env();
        char *argv[] = { (char *) "./probe", (char *) "probe", (char *) "membomb", NULL };
        JobRun j;
        run_job("membomb", argv, 120, &j);
        assert_int_equal(j.res.status, CAPSULE_KILLED);
        assert_string_equal(j.res.reason, "memory_limit");
        assert_true(j.res.events.oom_kills > 0);
        jobrun_free(&j);
}

static void test_fork_bomb(void **state) {
        (void) state;
        require_env();
        char *argv[] = { (char *) "./probe", (char *) "probe", (char *) "forkbomb", NULL };
        JobRun j;
        run_job("forkbomb", argv, 120, &j);
        assert_int_equal(j.res.status, CAPSULE_SUCCEEDED);
        char buf[64];
        assert_non_null(get(&j, "forks", buf, sizeof(buf)));
        /* init and the probe count against the limit too. */
        assert_true(atoi(buf) <= PIDS - 2);
        assert_value(&j, "fork_error", "EAGAIN");
        jobrun_free(&j);
}

static void test_fill_work(void **state) {
        (void) state;
        require_env();
        char *argv[] = { (char *) "./probe", (char *) "probe", (char *) "fill", (char *) "/work", NULL };
        JobRun j;
        run_job("fillwork", argv, 120, &j);
        assert_int_equal(j.res.status, CAPSULE_SUCCEEDED);
        assert_value(&j, "fill_error", "ENOSPC");
        char buf[64];
        assert_non_null(get(&j, "filled", buf, sizeof(buf)));
        assert_true(strtoull(buf, NULL, 10) <= WORK_TMPFS);
        jobrun_free(&j);
}

/* ---- the streamed input (snapshot/stream.h, issue 12) ---------------------------------- */

typedef struct StreamFixture {
        bool abort;          /* end with 'A' instead of 'E' */
        bool cut;            /* fail in the middle of a file, writing nothing more (its end
                              * is the only word init gets) */
        uint64_t big;        /* > 0: one file of this many zero bytes (more than /work holds) */
        bool hold_reader;    /* a reader of the channel outside the capsule, which never reads */
        int reader;          /* ... its descriptor (the test closes it) */
        int write_error;     /* what the last write returned */
        uint64_t sent;
} StreamFixture;

static int put_record(int fd, uint8_t tag, const char *name, uint8_t flags, bool file, uint64_t size) {
        uint8_t h[SNAPSHOT_STREAM_HEADER_MAX];
        size_t n = 0, len = name ? strlen(name) : 0;
        h[n++] = tag;
        if (name) {
                snapshot_stream_put_le(h + n, len, 2);
                n += 2;
                memcpy(h + n, name, len);
                n += len;
                h[n++] = flags;
        }
        if (file) {
                snapshot_stream_put_le(h + n, size, 8);
                n += 8;
        }
        return write_all(fd, h, n);
}

static int stream_fixture(void *userdata, int fd) {
        StreamFixture *f = userdata;
        static const char content[] = "streamed content";
        static uint8_t zeros[1 << 16];
        if (f->hold_reader) {
                /* As a runtime process the kernel would not give back holds it. */
                char path[64];
                snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
                f->reader = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        }
        int r = put_record(fd, SNAPSHOT_STREAM_DIR, "d", 0, false, 0);
        if (r >= 0)
                r = put_record(fd, SNAPSHOT_STREAM_FILE, "x", 0, true, sizeof(content) - 1);
        if (r >= 0)
                r = write_all(fd, content, sizeof(content) - 1);
        if (r >= 0)
                r = put_record(fd, SNAPSHOT_STREAM_UP, NULL, 0, false, 0);
        if (r >= 0)
                r = put_record(fd, SNAPSHOT_STREAM_FILE, "run.sh", SNAPSHOT_STREAM_EXEC, true, 10);
        if (r >= 0)
                r = write_all(fd, "#!/bin/sh\n", 10);
        if (r >= 0 && f->big) {
                r = put_record(fd, SNAPSHOT_STREAM_FILE, "big", 0, true, f->big);
                for (uint64_t left = f->big; r >= 0 && left > 0;) {
                        size_t k = (size_t) MIN(left, (uint64_t) sizeof(zeros));
                        r = write_all(fd, zeros, k);
                        left -= k;
                        f->sent += k;
                }
        }
        if (r >= 0 && f->cut) {
                r = put_record(fd, SNAPSHOT_STREAM_FILE, "cut", 0, true, 1000);
                if (r >= 0)
                        r = write_all(fd, content, 10);
                f->write_error = r;
                return -EIO;
        }
        if (r >= 0)
                r = put_record(fd, f->abort ? SNAPSHOT_STREAM_ABORT : SNAPSHOT_STREAM_END, NULL, 0, false, 0);
        f->write_error = r;
        return r;
}

#define STREAM_PROBE                                                                              \
        "echo ran=yes; echo content=$(cat /work/d/x); [ -x /work/run.sh ] && echo exec=yes; "     \
        "[ -d /work/artifacts ] && echo artifacts_dir=yes; "                                      \
        "echo stdin=$(readlink /proc/self/fd/0); echo init_stdin=$(readlink /proc/1/fd/0 2>&1)"

/* The workspace arrives as a stream: /work holds it, with the modes init gives, and the channel
 * it came on is /dev/null for init and the job alike once the input was read. */
static void test_stream_input(void **state) {
        (void) state;
        require_env();
        StreamFixture f = {};
        JobOptions o = { .input = stream_fixture, .input_userdata = &f };
        char *argv[] = { (char *) "/bin/sh", (char *) "-c", (char *) STREAM_PROBE, NULL };
        JobRun j;
        run_job_with("stream", argv, 60, &o, &j);
        assert_int_equal(f.write_error, 0);
        assert_int_equal(j.res.status, CAPSULE_SUCCEEDED);
        assert_value(&j, "content", "streamed content");
        assert_value(&j, "exec", "yes");
        assert_value(&j, "artifacts_dir", "yes");
        assert_value(&j, "stdin", "/dev/null");
        assert_value(&j, "init_stdin", "/dev/null");
        jobrun_free(&j);
}

/* A stream the host aborts (its walk refused the workspace): nothing runs. */
static void test_stream_abort(void **state) {
        (void) state;
        require_env();
        StreamFixture f = { .abort = true };
        JobOptions o = { .input = stream_fixture, .input_userdata = &f };
        char *argv[] = { (char *) "/bin/sh", (char *) "-c", (char *) STREAM_PROBE, NULL };
        JobRun j;
        run_job_with("streamabort", argv, 60, &o, &j);
        assert_int_equal(j.res.status, CAPSULE_ERROR);
        assert_null(strstr(j.log, "ran=yes"));
        assert_non_null(strstr(j.res.message, CAPSULE_INIT_ERROR_INPUT));
        jobrun_free(&j);
}

/* A stream whose writer fails in the middle of a file: the end of the channel is the only word
 * init gets, and it must get it although the worker keeps the channel for stop records after
 * the input (the input thread's copy ends it). Nothing runs; the capsule ends at once, not at
 * its timeout. */
static void test_stream_cut(void **state) {
        (void) state;
        require_env();
        StreamFixture f = { .cut = true };
        JobOptions o = { .input = stream_fixture, .input_userdata = &f };
        char *argv[] = { (char *) "/bin/sh", (char *) "-c", (char *) STREAM_PROBE, NULL };
        JobRun j;
        run_job_with("streamcut", argv, 300, &o, &j);
        assert_int_equal(f.write_error, 0);
        assert_int_equal(j.res.status, CAPSULE_ERROR);
        assert_null(strstr(j.log, "ran=yes"));
        assert_non_null(strstr(j.res.message, CAPSULE_INIT_ERROR_INPUT));
        jobrun_free(&j);
}

/* A stream larger than /work: the init stops reading, the capsule ends, and the host's writer
 * is released by the closed channel (no hang), the job never ran. */
static void test_stream_too_big(void **state) {
        (void) state;
        require_env();
        StreamFixture f = { .big = WORK_TMPFS + (16ULL << 20) };
        JobOptions o = { .input = stream_fixture, .input_userdata = &f };
        char *argv[] = { (char *) "/bin/sh", (char *) "-c", (char *) STREAM_PROBE, NULL };
        JobRun j;
        run_job_with("streambig", argv, 120, &o, &j);
        assert_int_equal(j.res.status, CAPSULE_ERROR);
        assert_string_equal(j.res.reason, "snapshot_copy");
        assert_null(strstr(j.log, "ran=yes"));
        assert_int_equal(f.write_error, -EPIPE);
        assert_true(f.sent < f.big);
        jobrun_free(&j);
}

/* Issue 46 item 4: the same, with the channel's reader also held outside the capsule, as by a
 * runtime process that outlives its SIGKILL: the capsule ends, yet the writer, blocked on the
 * full pipe, is never released by the channel. The join of the input thread used to wait for
 * it forever (this test hung); now it cuts the write after its bound (EAGAIN), and the job
 * ends as above. */
static void test_stream_reader_left(void **state) {
        (void) state;
        require_env();
        StreamFixture f = { .big = WORK_TMPFS + (16ULL << 20), .hold_reader = true, .reader = -EBADF };
        JobOptions o = { .input = stream_fixture, .input_userdata = &f };
        char *argv[] = { (char *) "/bin/sh", (char *) "-c", (char *) STREAM_PROBE, NULL };
        JobRun j;
        run_job_with("streamheld", argv, 120, &o, &j);
        assert_true(f.reader >= 0);
        assert_true(fd_is_open(f.reader));
        assert_int_equal(j.res.status, CAPSULE_ERROR);
        assert_string_equal(j.res.reason, "snapshot_copy");
        assert_null(strstr(j.log, "ran=yes"));
        assert_int_equal(f.write_error, -EAGAIN);
        assert_true(f.sent < f.big);
        safe_close(f.reader);
        jobrun_free(&j);
}

/* Issue 33, finding 8: a stream the host refused is not drained to its end. Within bounds init
 * does not stop at (1 TiB), a directory whose name the importer refuses (a control character)
 * comes before a 100 GiB sparse file: the host tells init to stop the stream, and the job's own
 * ending is the result with the importer's reason, not a timeout. The input is streamed (the
 * input thread's channel is the one the stop record goes on). The job first tries to write
 * junk into init's copy of that channel (fd 3): gVisor opens it for the job, but its writes fail
 * (the host descriptor is read-only); init would drop such junk anyway once the job is dead. */
#define REFUSED_PROBE                                                                             \
        "for f in /proc/1/fd/*; do n=${f##*/}; [ \"$n\" -gt 2 ] || continue; "                       \
        "case $(readlink $f) in host:*) dd if=/dev/zero of=$f bs=4096 count=4 oflag=nonblock 2>/dev/null; " \
        "echo junk_$n=$?;; esac; done; "                                                          \
        "d=artifacts/$(printf 'b\\001'); mkdir -p \"$d\" && truncate -s 100G \"$d/s\" && echo exiting-0"

static void test_refused_stream(void **state) {
        (void) state;
        require_env();
        uint64_t bound = env.config.limits.max_artifact_bytes;
        env.config.limits.max_artifact_bytes = 1ULL << 40;
        StreamFixture f = {};
        JobOptions o = { .input = stream_fixture, .input_userdata = &f };
        char *argv[] = { (char *) "/bin/sh", (char *) "-c", (char *) REFUSED_PROBE, NULL };
        JobRun j;
        run_job_with("refused", argv, 300, &o, &j);
        env.config.limits.max_artifact_bytes = bound;
        print_message("%.*s", (int) MIN(j.log_len, 2000), j.log);
        assert_int_equal(f.write_error, 0);
        assert_int_equal(j.res.status, CAPSULE_SUCCEEDED);
        assert_int_equal(j.res.exit_code, 0);
        assert_non_null(strstr(j.log, "exiting-0"));
        /* The channel is reachable, but not writable, from the job. */
        assert_value(&j, "junk_3", "1");
        assert_false(j.res.artifacts_ok);
        assert_string_equal(j.res.artifacts_error_code, "artifact_rejected");
        assert_non_null(strstr(j.res.artifacts_error, "control character"));
        assert_non_null(strstr(j.log, "artifacts: the worker takes no more of them; the rest was not sent"));
        jobrun_free(&j);
}

/* Threat 12: two consecutive jobs, each on its own warm capsule. The first leaves files in
 * /work and /tmp and a process that would outlive it (new session, ignoring SIGTERM/SIGHUP);
 * the second sees none of them and no process of the first (found by the name the leftover
 * carries in its argv, which the first job does see while it runs); the first's container is
 * gone, its leftover process killed. */
#define WARM1 "echo leftover >/work/left.txt; echo leftover >/tmp/left.txt; " \
              "m=i12; setsid sh -c 'trap \"\" TERM HUP; while :; do sleep 1; done' ${m}leftover </dev/null >/dev/null 2>&1 & " \
              "echo bg=$!; " LEFTOVERS("mine")
#define LEFTOVERS(key) \
        "echo " key "=$(for p in /proc/[0-9]*; do tr '\\0' ' ' <$p/cmdline; echo; done 2>/dev/null | grep -c 'i12leftove[r]'); "
#define WARM2 "ls /work/left.txt /tmp/left.txt >/dev/null 2>&1 && echo leftovers=yes || echo leftovers=no; " \
              LEFTOVERS("leftover_procs") "echo job=$TENTAFLAKE_JOB"

static bool container_listed(const char *cid) {
        char cmd[PATH_MAX * 3];
        snprintf(cmd, sizeof(cmd), "'%s' --root '%s' list -quiet 2>/dev/null | grep -qx '%s'", env.drv.runsc.binary,
                 env.runsc_root, cid);
        return system(cmd) == 0;
}

/* runsc registers a container while it boots: wait for it (bounded), it is not instant. */
static bool container_exists(const char *cid) {
        for (unsigned i = 0; i < 200; i++) {
                if (container_listed(cid))
                        return true;
                usleep(50 * 1000);
        }
        return false;
}

static void test_warm_one_job_each(void **state) {
        (void) state;
        require_env();
        char *a1[] = { (char *) "/bin/sh", (char *) "-c", (char *) WARM1, NULL };
        char *a2[] = { (char *) "/bin/sh", (char *) "-c", (char *) WARM2, NULL };
        StreamFixture f = {};
        JobRun j1, j2;

        CapsuleWarm *w1 = warm_start("w-one");
        char c1[256];
        snprintf(c1, sizeof(c1), "%s", capsule_warm_container(w1));
        assert_true(container_exists(c1));
        JobOptions o1 = { .input = stream_fixture, .input_userdata = &f, .warm = w1 };
        run_job_with("warmfirst", a1, 60, &o1, &j1);
        assert_int_equal(j1.res.status, CAPSULE_SUCCEEDED);
        assert_non_null(strstr(j1.log, "bg="));
        /* The probe does see a process that would survive: the first job's own. */
        assert_value(&j1, "mine", "1");
        /* Its capsule is gone with its job: the leftover process with it. */
        assert_false(container_listed(c1));
        assert_nothing_left("w-one");

        CapsuleWarm *w2 = warm_start("w-two");
        JobOptions o2 = { .input = stream_fixture, .input_userdata = &f, .warm = w2 };
        run_job_with("warmsecond", a2, 60, &o2, &j2);
        assert_int_equal(j2.res.status, CAPSULE_SUCCEEDED);
        assert_value(&j2, "leftovers", "no");
        /* No process of the first job. */
        assert_value(&j2, "leftover_procs", "0");
        assert_value(&j2, "job", "warmsecond");
        assert_nothing_left("w-two");
        jobrun_free(&j1);
        jobrun_free(&j2);
}

/* A prepared tree (serve's checkout) on a warm capsule: the directory is bound at /snapshot
 * while it is still empty, and filled before the job is given; init copies what is there
 * then, symlinks included. */
static void test_warm_prepared_tree(void **state) {
        (void) state;
        require_env();
        char tree[PATH_MAX];
        snprintf(tree, sizeof(tree), "%s/warmtree", env.base);
        assert_int_equal(mkdir(tree, 0750), 0);
        assert_int_equal(chown(tree, 0, JOB_GID), 0);
        CapsuleWarm *w = warm_start_tree("w-tree", tree);
        char cid[256];
        snprintf(cid, sizeof(cid), "%s", capsule_warm_container(w));
        assert_true(container_exists(cid)); /* booted before the tree exists */
        _cleanup_close_ int t = open(tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(t >= 0);
        tfw_write_file(t, "late.txt", "filled after the boot\n", (size_t) -1);
        assert_int_equal(fchmodat(t, "late.txt", 0644, 0), 0);
        assert_int_equal(mkdirat(t, "sub", 0755), 0);
        tfw_write_file(t, "sub/inner.txt", "inner\n", (size_t) -1);
        assert_int_equal(fchmodat(t, "sub/inner.txt", 0644, 0), 0);
        assert_int_equal(symlinkat("late.txt", t, "link"), 0);
        char *argv[] = { (char *) "/bin/sh", (char *) "-c",
                         (char *) "echo late=$(cat /work/late.txt); echo inner=$(cat /work/sub/inner.txt); "
                                  "echo link=$(readlink /work/link)",
                         NULL };
        JobOptions o = { .warm = w };
        JobRun j;
        /* run_job_with binds env.snapshot for a cold job; this one runs on the warm tree. */
        TfwError e = {};
        _cleanup_close_ int log_fd = memfd_create("job.log", MFD_CLOEXEC);
        CapsuleJobParams p = {
                .config = &env.config, .driver = &env.drv, .scratch_fd = env.scratch_fd,
                .scratch_path = env.scratch, .job_id = "warmtree", .argv = argv, .timeout_seconds = 60,
                .snapshot_dir = tree, .warm = o.warm, .init_path = env.init_path, .log_fd = log_fd,
                .staging_fd = -1, .unpriv_uid = 65534, .unpriv_gid = 65534,
        };
        memset(&j, 0, sizeof(j));
        j.staging_fd = -EBADF;
        assert_int_equal(capsule_run_job(&p, &j.res, &e), 0);
        assert_true(lseek(log_fd, 0, SEEK_SET) == 0);
        assert_int_equal(read_full_fd_bounded(log_fd, 1 << 20, &j.log, &j.log_len), 0);
        assert_int_equal(j.res.status, CAPSULE_SUCCEEDED);
        assert_value(&j, "late", "filled after the boot");
        assert_value(&j, "inner", "inner");
        assert_value(&j, "link", "late.txt");
        assert_false(container_listed(cid));
        assert_nothing_left("w-tree");
        jobrun_free(&j);
        (void) rm_rf_at(AT_FDCWD, tree);
}

/* A warm capsule nobody used: discarded, nothing of it is left. */
static void test_warm_discarded(void **state) {
        (void) state;
        require_env();
        CapsuleWarm *w = warm_start("w-unused");
        char cid[256];
        snprintf(cid, sizeof(cid), "%s", capsule_warm_container(w));
        assert_true(container_exists(cid));
        capsule_warm_free(w);
        assert_false(container_listed(cid));
        assert_nothing_left("w-unused");
}

static void test_fill_tmp(void **state) {
        (void) state;
        require_env();
        char *argv[] = { (char *) "./probe", (char *) "probe", (char *) "fill", (char *) "/tmp", NULL };
        JobRun j;
        run_job("filltmp", argv, 120, &j);
        assert_int_equal(j.res.status, CAPSULE_SUCCEEDED);
        assert_value(&j, "fill_error", "ENOSPC");
        char buf[64];
        assert_non_null(get(&j, "filled", buf, sizeof(buf)));
        assert_true(strtoull(buf, NULL, 10) <= TMP_TMPFS);
        jobrun_free(&j);
}

static void test_log_flood(void **state) {
        (void) state;
        require_env();
        char *argv[] = { (char *) "./probe", (char *) "probe", (char *) "flood", (char *) "1073741824", NULL };
        JobRun j;
        run_job("flood", argv, 600, &j);
        assert_int_equal(j.res.status, CAPSULE_SUCCEEDED);
        assert_int_equal(j.res.log_bytes, 1073741824ULL);
        assert_true(j.res.log_truncated);
        assert_true(j.log_len <= MAX_LOG);
        assert_true(j.log_len >= MAX_LOG / 2);
        jobrun_free(&j);
}

/* The validation plane's rule: output beyond the cap ends the job (a signed fail). */
static void test_output_limit(void **state) {
        (void) state;
        require_env();
        char *argv[] = { (char *) "./probe", (char *) "probe", (char *) "flood", (char *) "1073741824", NULL };
        JobOptions o = { .end_on_log_limit = true };
        JobRun j;
        run_job_with("floodcut", argv, 600, &o, &j);
        assert_int_equal(j.res.status, CAPSULE_KILLED);
        assert_string_equal(j.res.reason, "output_limit");
        assert_non_null(strstr(j.res.message, "output"));
        /* Ended soon after the cap, not after the gigabyte. */
        assert_true(j.res.log_bytes > MAX_LOG);
        assert_true(j.res.log_bytes < (256ULL << 20));
        assert_true(j.log_len <= MAX_LOG);
        jobrun_free(&j);
}

/* CPU seconds of the whole capsule: four spinning processes under cpus 1.0 meet 2 s of CPU
 * in about 2 s of wall time; without the limit they would run into the 120 s timeout. */
static void test_cpu_limit(void **state) {
        (void) state;
        require_env();
        char *argv[] = { (char *) "./probe", (char *) "probe", (char *) "spin", NULL };
        JobOptions o = { .cpu_seconds = 2 };
        JobRun j;
        run_job_with("spinner", argv, 120, &o, &j);
        assert_int_equal(j.res.status, CAPSULE_KILLED);
        assert_string_equal(j.res.reason, "cpu_limit");
        assert_true(j.res.duration_ms >= 1500);
        assert_true(j.res.duration_ms < 60000);
        jobrun_free(&j);
}

static int unreadable_cpu(uint64_t *ret_usec) {
        (void) ret_usec;
        return -EIO;
}

/* A CPU limit that cannot be checked ends the job as an error after
 * CAPSULE_CPU_UNREADABLE_USEC; without that rule the spinner would run into its timeout. */
static void test_cpu_limit_unreadable(void **state) {
        (void) state;
        require_env();
        char *argv[] = { (char *) "./probe", (char *) "probe", (char *) "spin", NULL };
        JobOptions o = { .cpu_seconds = 600 };
        JobRun j;
        capsule_test_cpu_usage_hook = unreadable_cpu;
        run_job_with("cpublind", argv, 120, &o, &j);
        capsule_test_cpu_usage_hook = NULL;
        assert_int_equal(j.res.status, CAPSULE_ERROR);
        assert_string_equal(j.res.reason, "runtime_failed");
        assert_non_null(strstr(j.res.message, "CPU time could not be read"));
        assert_true(j.res.duration_ms < 60000);
        jobrun_free(&j);
}

/* A caller's variables reach the job after the constant environment, which they cannot
 * replace (capsule/env.h refuses the spec). */
static void test_extra_env(void **state) {
        (void) state;
        require_env();
        char *argv[] = { (char *) "/usr/bin/env", NULL };
        char *extra[] = { (char *) "RUST_BACKTRACE=1", (char *) "GREETING=hello world=yes", NULL };
        JobOptions o = { .extra_env = extra };
        JobRun j;
        run_job_with("envjob", argv, 60, &o, &j);
        assert_int_equal(j.res.status, CAPSULE_SUCCEEDED);
        assert_value(&j, "RUST_BACKTRACE", "1");
        assert_value(&j, "GREETING", "hello world=yes");
        assert_value(&j, "HOME", "/work");
        assert_value(&j, "TENTAFLAKE_JOB", "envjob");
        jobrun_free(&j);

        TfwError e = {};
        CapsuleResult r;
        char *bad[] = { (char *) "PATH=/tmp", NULL };
        CapsuleJobParams p = {
                .config = &env.config, .driver = &env.drv, .scratch_fd = env.scratch_fd,
                .scratch_path = env.scratch, .job_id = "envbad", .argv = argv, .extra_env = bad,
                .timeout_seconds = 60, .snapshot_dir = env.snapshot, .init_path = env.init_path,
                .log_fd = -1, .staging_fd = -1, .unpriv_uid = 65534, .unpriv_gid = 65534,
        };
        assert_int_equal(capsule_run_job(&p, &r, &e), 0);
        assert_int_equal(r.status, CAPSULE_ERROR);
        assert_string_equal(r.reason, "capsule_setup");
        assert_nothing_left("envbad");
}

static void test_timeout(void **state) {
        (void) state;
        require_env();
        char *argv[] = { (char *) "/bin/sleep", (char *) "1000", NULL };
        JobRun j;
        run_job("sleeper", argv, 2, &j);
        assert_int_equal(j.res.status, CAPSULE_TIMED_OUT);
        assert_string_equal(j.res.reason, "timeout");
        /* The capsule is gone (run_job checked runsc list, scratch and cgroup). */
        jobrun_free(&j);
}

static void test_startup_cleanup(void **state) {
        (void) state;
        require_env();
        TfwError e = {};
        _cleanup_free_ char *ours = NULL;
        assert_int_equal(capsule_container_id(env.config.name, "stale", &ours), 0);

        /* A worker killed in the middle of a job leaves its container running, its cgroup
         * and its bundle. */
        pid_t worker = fork();
        assert_true(worker >= 0);
        if (worker == 0) {
                char *argv[] = { (char *) "/bin/sleep", (char *) "1000", NULL };
                CapsuleJobParams p = {
                        .config = &env.config, .driver = &env.drv, .scratch_fd = env.scratch_fd,
                        .scratch_path = env.scratch, .job_id = "stale", .argv = argv,
                        .timeout_seconds = 600, .snapshot_dir = env.snapshot,
                        .init_path = env.init_path, .log_fd = -1, .staging_fd = -1,
                        .unpriv_uid = 65534, .unpriv_gid = 65534,
                };
                CapsuleResult r;
                (void) capsule_run_job(&p, &r, &e);
                _exit(0);
        }
        /* Wait for the event (runsc has saved the container's state, not only taken its lock:
         * a worker killed before that leaves runsc still creating it), bounded. */
        char state_file[PATH_MAX];
        snprintf(state_file, sizeof(state_file), "%s/%s_sandbox:%s.state", env.runsc_root, ours, ours);
        for (int i = 0; i < 600 && access(state_file, F_OK) < 0; i++)
                usleep(50 * 1000);
        assert_int_equal(access(state_file, F_OK), 0);
        assert_int_equal(kill(worker, SIGKILL), 0);
        assert_int_equal(waitpid(worker, NULL, 0), worker);

        /* Another worker's container in the same root: never touched. */
        Config other = env.config;
        other.name = (char *) "other";
        char *argv[] = { (char *) "/bin/true", NULL };
        CapsuleSpecParams sp = { .config = &other, .job_id = "foreign", .argv = argv,
                                 .timeout_seconds = 5, .snapshot_dir = env.snapshot,
                                 .init_path = env.init_path };
        CapsuleBundle *fb = NULL;
        assert_int_equal(capsule_bundle_create(env.base_fd, env.base, "tfw-other-foreign", &sp,
                                               &fb, &e),
                         0);
        char cmd[PATH_MAX * 3];
        snprintf(cmd, sizeof(cmd),
                 "'%s' --root '%s' --network=none --ignore-cgroups run --detach --bundle '%s' "
                 "tfw-other-foreign </dev/null >/dev/null 2>&1",
                 env.drv.runsc.binary, env.runsc_root, fb->path);
        assert_int_equal(system(cmd), 0);
        assert_int_equal(runsc_state_exists(&env.drv.runsc, "tfw-other-foreign"), 1);

        /* And a cgroup a worker made just before it was killed, with no bundle yet. */
        CgroupJob *orphan = NULL;
        CgroupLimits cl = { .memory = 64 << 20, .memory_swap = 64 << 20, .pids = 10 };
        _cleanup_free_ char *orphan_id = NULL;
        assert_int_equal(capsule_container_id(env.config.name, "orphan", &orphan_id), 0);
        assert_int_equal(cgroup_job_create(env.group, orphan_id, &cl, &orphan, &e), 0);
        orphan = NULL; /* leaked on purpose, as by a killed worker */

        unsigned removed = 0;
        assert_int_equal(capsule_cleanup_stale(&env.drv.runsc, env.scratch_fd, &removed, &e), 0);
        assert_true(removed >= 1);
        assert_int_equal(runsc_state_exists(&env.drv.runsc, ours), 0);
        assert_int_equal(runsc_state_exists(&env.drv.runsc, "tfw-other-foreign"), 1);

        assert_int_equal(runsc_delete_force(&env.drv.runsc, "tfw-other-foreign"), 0);
        assert_int_equal(capsule_bundle_remove(fb), 0);
        /* The killed worker's container, cgroup and bundle are gone. */
        assert_nothing_left("stale");
        assert_nothing_left("orphan");
}

int main(int argc, char **argv) {
        if (argc >= 3 && streq(argv[1], "probe"))
                return probe_main(argc, argv);
        /* Exit 77 is a skip for tests/run-tests (a failure under TENTAFLAKE_MUST_WORK=1). */
        if (geteuid() != 0) {
                printf("SKIP: the capsule tests need root\n");
                return 77;
        }
        if (access("/usr/bin/runsc", X_OK) < 0 && system("command -v runsc >/dev/null") != 0) {
                printf("SKIP: runsc is not installed\n");
                return 77;
        }

        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_hello_and_artifacts),
                cmocka_unit_test(test_walls),
                cmocka_unit_test(test_walls_warm),
                cmocka_unit_test(test_narrow),
                cmocka_unit_test(test_narrow_warm),
                cmocka_unit_test(test_warm_one_job_each),
                cmocka_unit_test(test_warm_discarded),
                cmocka_unit_test(test_warm_prepared_tree),
                cmocka_unit_test(test_forged_channels),
                cmocka_unit_test(test_forged_trailer_then_kill_init),
                cmocka_unit_test(test_signals_to_init_ignored),
                cmocka_unit_test(test_no_survivors),
                cmocka_unit_test(test_exec_failure),
                cmocka_unit_test(test_memory_bomb),
                cmocka_unit_test(test_fork_bomb),
                cmocka_unit_test(test_fill_work),
                cmocka_unit_test(test_fill_tmp),
                cmocka_unit_test(test_stream_input),
                cmocka_unit_test(test_stream_abort),
                cmocka_unit_test(test_stream_cut),
                cmocka_unit_test(test_stream_too_big),
                cmocka_unit_test(test_stream_reader_left),
                cmocka_unit_test(test_refused_stream),
                cmocka_unit_test(test_log_flood),
                cmocka_unit_test(test_output_limit),
                cmocka_unit_test(test_cpu_limit),
                cmocka_unit_test(test_cpu_limit_unreadable),
                cmocka_unit_test(test_extra_env),
                cmocka_unit_test(test_timeout),
                cmocka_unit_test(test_startup_cleanup),
        };
        /* TFW_TEST_FILTER=PATTERN: only the tests whose names match (cmocka's * and ?). */
        if (getenv("TFW_TEST_FILTER"))
                cmocka_set_test_filter(getenv("TFW_TEST_FILTER"));
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
