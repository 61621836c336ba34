/* SPDX-License-Identifier: MIT */
/* capsule/seccomp-listen.c (issue 49, threat 25): the runc capsule's seccomp listener, with a
 * real notification descriptor. A child stands in for runc and its container: it connects to
 * the listener, loads a filter that notifies unshare, connect and sendto (libseccomp, as runc
 * does), sends the descriptor as runc does and makes the calls:
 *   - from the runtime's pid: unshare answered EPERM and named, connect to 203.0.113.1:443
 *     answered ENETUNREACH and named, connect to a closed loopback port left to the kernel
 *     (ECONNREFUSED), unreported;
 *   - from another pid: the descriptor is refused, and with no listener the kernel answers the
 *     notified calls ENOSYS: refused all the same (fails closed), no wall;
 *   - a descriptor that is not a notification descriptor is refused, the next connection's
 *     taken;
 *   - a listener stopped before any runtime connected ends without touching another descriptor.
 * Needs root: the listener takes the descriptor from uid 0 only. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capsule/seccomp-listen.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"

#define CHILD_WAIT_MS 20000

static char sock_path[108];

static int setup(void **state) {
        (void) state;
        char dir[] = "/tmp/tfw-listen-XXXXXX";
        if (!mkdtemp(dir))
                return -1;
        snprintf(sock_path, sizeof(sock_path), "%s/l.sock", dir);
        return 0;
}

static int teardown(void **state) {
        (void) state;
        (void) unlink(sock_path);
        char *slash = strrchr(sock_path, '/');
        *slash = '\0';
        return rmdir(sock_path);
}

static int connect_listener(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -1;
        return fd;
}

static int send_fd(int sock, int fd) {
        char state[] = "{\"ociVersion\":\"1.0.2\",\"fds\":[\"seccompFd\"]}";
        union {
                struct cmsghdr h;
                char space[CMSG_SPACE(sizeof(int))];
        } ctl = {};
        struct iovec iov = { .iov_base = state, .iov_len = sizeof(state) - 1 };
        struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl, .msg_controllen = sizeof(ctl) };
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
        return sendmsg(sock, &m, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

static int connect_to(const char *ip, unsigned port) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
        inet_pton(AF_INET, ip, &a.sin_addr);
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int r = connect(s, (struct sockaddr *) &a, sizeof(a)) < 0 ? errno : 0;
        close(s);
        return r;
}

/* The child: (a /dev/null first, when junk_first), the filter, its descriptor sent, then the
 * calls. Exits with the step that went wrong, 0 when each call got want_* (errno values). */
static void child(bool junk_first, int want_unshare, int want_far, int want_near) {
        if (junk_first) {
                int s = connect_listener(), n = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (s < 0 || n < 0 || send_fd(s, n) < 0)
                        _exit(10);
                close(s);
        }
        int s = connect_listener(); /* before the filter: connect is one of its calls */
        if (s < 0)
                _exit(11);
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
            seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(unshare), 0) < 0 ||
            seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(connect), 0) < 0 || seccomp_load(ctx) < 0)
                _exit(12);
        /* A listener that refuses the connection may close it before the message is sent
         * (EPIPE: runc gives up there); either way the descriptor reaches no listener. */
        int fd = seccomp_notify_fd(ctx);
        if (fd < 0 || (send_fd(s, fd) < 0 && want_unshare != ENOSYS))
                _exit(13);
        close(fd);
        close(s);
        if ((unshare(CLONE_NEWUSER) < 0 ? errno : 0) != want_unshare)
                _exit(14);
        if (connect_to("203.0.113.1", 443) != want_far)
                _exit(15);
        if (connect_to("127.0.0.1", 1) != want_near)
                _exit(16);
        _exit(0);
}

static void need_root(void) {
        if (geteuid() != 0)
                tfw_skip("the listener takes its descriptor from uid 0 only: needs root");
}

/* Run the child against a listener that expects the runtime's pid to be the child's (or, with
 * wrong_pid, another); the walls it counted into ret. The child's exit status. */
static int run(bool wrong_pid, bool junk_first, int want_unshare, int want_far, int want_near, Walls *ret) {
        SeccompListener *l = NULL;
        assert_int_equal(seccomp_listen_open(sock_path, &l), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                child(junk_first, want_unshare, want_far, want_near);
        assert_int_equal(seccomp_listen_start(l, wrong_pid ? getpid() : pid), 0);
        /* Bounded: a child left waiting for an answer that never comes is a failure. */
        int st, pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        struct pollfd p = { .fd = pidfd, .events = POLLIN };
        assert_true(pidfd >= 0);
        if (poll(&p, 1, CHILD_WAIT_MS) != 1) {
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                fail_msg("the child is still waiting for an answer after %d ms", CHILD_WAIT_MS);
        }
        close(pidfd);
        assert_int_equal(waitpid(pid, &st, 0), pid);
        *ret = (Walls) {};
        seccomp_listen_finish(l, ret);
        assert_true(WIFEXITED(st));
        return WEXITSTATUS(st);
}

static void test_answers(void **state) {
        (void) state;
        need_root();
        Walls w;
        assert_int_equal(run(false, false, EPERM, ENETUNREACH, ECONNREFUSED, &w), 0);
        assert_int_equal(w.n, 2);
        assert_string_equal(w.entry[0].wall, WALL_SYSCALL);
        assert_string_equal(w.entry[0].detail, "unshare");
        assert_string_equal(w.entry[1].wall, WALL_NETWORK);
        assert_string_equal(w.entry[1].detail, "direct connection to 203.0.113.1:443 (no route: only the proxy is reachable)");
        /* the socket is gone once the descriptor was taken */
        assert_int_equal(access(sock_path, F_OK), -1);
}

static void test_other_peer_fails_closed(void **state) {
        (void) state;
        need_root();
        Walls w;
        assert_int_equal(run(true, false, ENOSYS, ENOSYS, ENOSYS, &w), 0);
        assert_int_equal(w.n, 0);
}

static void test_not_a_notify_fd(void **state) {
        (void) state;
        need_root();
        Walls w;
        assert_int_equal(run(false, true, EPERM, ENETUNREACH, ECONNREFUSED, &w), 0);
        assert_int_equal(w.n, 2);
}

/* Stopped before any runtime connected (a capsule destroyed early): nothing counted, the socket
 * removed, and no descriptor of the worker's closed on the way (stdin stands for them). */
static void test_stopped_before_runtime(void **state) {
        (void) state;
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_true(null >= 0);
        assert_int_equal(dup2(null, 0), 0);
        close(null);
        SeccompListener *l = NULL;
        Walls w = {};
        assert_int_equal(seccomp_listen_open(sock_path, &l), 0);
        assert_int_equal(seccomp_listen_start(l, getpid()), 0);
        seccomp_listen_finish(l, &w);
        assert_int_equal(w.n, 0);
        assert_true(fcntl(0, F_GETFD) >= 0);
        assert_int_equal(access(sock_path, F_OK), -1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_answers),
                cmocka_unit_test(test_other_peer_fails_closed),
                cmocka_unit_test(test_not_a_notify_fd),
                cmocka_unit_test(test_stopped_before_runtime),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
