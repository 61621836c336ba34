/* SPDX-License-Identifier: MIT */
/* What a job that changes one file of a large build cache costs on the host (snapshot/
 * build-cache.c, snapshot/cache-merge.c; issue 34): the timed half of tests/bench/cache-merge.sh.
 *
 *   bench-cache-merge TREE STORE ROUNDS
 *
 * Makes a store in STORE (an empty directory; the store's read-only mount of its versions in a
 * mount namespace of this process's own), seeds the cache with a copy of TREE, then ROUNDS jobs
 * each change one file of it. Prints one line a job: "commit_usec=N tree_usec=N free_usec=N
 * linked=N hashed=N": the take-in's commit (merge, tree id, publication), the tree id alone
 * (computed again on the new version, with the version before's blob ids), and the removal of
 * the version it replaced (after the result). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "snapshot/build-cache.h"

static char *const paths[] = { (char *) "node_modules", NULL };

static uint64_t now_usec(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (uint64_t) t.tv_sec * 1000000 + (uint64_t) t.tv_nsec / 1000;
}

static BuildCache *open_cache(int store_fd, const char *store) {
        BuildCacheParams p = { .paths = paths, .store_path = store, .max_bytes = UINT64_C(1) << 40,
                               .max_entries = 10000000, .uid = 4242, .gid = 4242 };
        BuildCache *c = NULL;
        TfwError e = {};
        if (build_cache_open(store_fd, &p, &c, &e) < 0) {
                fprintf(stderr, "bench-cache-merge: %s\n", e.message);
                exit(1);
        }
        return c;
}

/* A take-in whose root keeps the mode and times of the version handed out (nothing changed
 * there), and, when seed, a copy of tree below it. */
static int take_in(int store_fd, const char *store, BuildCache *c, const char *id, uint64_t version, const char *tree) {
        char base[64];
        struct stat st;
        int fd;
        TfwError e = {};
        snprintf(base, sizeof(base), "cache/v/%" PRIu64 "/data/0", version);
        if (build_cache_take_in_begin(c, id, &fd, &e) < 0 || fstatat(store_fd, base, &st, 0) < 0 || mkdirat(fd, "0", 0750) < 0) {
                fprintf(stderr, "bench-cache-merge: cannot begin a take-in: %s\n", e.message[0] ? e.message : strerror(errno));
                exit(1);
        }
        if (tree) {
                char *cmd;
                if (asprintf(&cmd, "cp -a '%s'/. '%s/cache/in-%s/data/0/' && chown -R 4242:4242 '%s/cache/in-%s/data/0'", tree, store,
                             id, store, id) < 0 ||
                    system(cmd) != 0)
                        exit(1);
                free(cmd);
        }
        struct timespec ts[2] = { st.st_atim, st.st_mtim };
        if (fchmodat(fd, "0", st.st_mode & 07777, 0) < 0 || utimensat(fd, "0", ts, 0) < 0)
                exit(1);
        return fd;
}

int main(int argc, char **argv) {
        if (argc != 4) {
                fprintf(stderr, "usage: bench-cache-merge TREE STORE ROUNDS\n");
                return 2;
        }
        int rounds = atoi(argv[3]);
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
                perror("bench-cache-merge: a mount namespace");
                return 1;
        }
        int store_fd = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (store_fd < 0) {
                perror(argv[2]);
                return 1;
        }
        TfwError e = {};
        BuildCacheState h, s;
        BuildCache *c = open_cache(store_fd, argv[2]);
        if (build_cache_hand_out(c, &h, &e) < 0)
                return 1;
        safe_close(take_in(store_fd, argv[2], c, "seed", h.version, argv[1]));
        if (build_cache_take_in_commit(c, "seed", h.epoch, &s, &e) < 0) {
                fprintf(stderr, "bench-cache-merge: the seed: %s\n", e.message);
                return 1;
        }
        build_cache_free(c);
        fprintf(stderr, "seeded: %" PRIu64 " entries, %" PRIu64 " files\n", s.entries, s.files);
        for (int i = 0; i < rounds; i++) {
                char id[32], data[64];
                snprintf(id, sizeof(id), "j%d", i);
                c = open_cache(store_fd, argv[2]);
                if (build_cache_hand_out(c, &h, &e) < 0)
                        return 1;
                int fd = take_in(store_fd, argv[2], c, id, h.version, NULL);
                _cleanup_close_ int zero = open_dir_at(fd, "0");
                struct stat st;
                if (zero < 0 || fstat(zero, &st) < 0)
                        return 1;
                if (write_file_replace_at(zero, ".bench-one", id, strlen(id), 0640, 0, 0) < 0)
                        return 1;
                struct timespec ts[2] = { st.st_atim, st.st_mtim };
                (void) futimens(zero, ts);
                safe_close(fd);
                uint64_t t0 = now_usec();
                if (build_cache_take_in_commit(c, id, h.epoch, &s, &e) < 0) {
                        fprintf(stderr, "bench-cache-merge: %s\n", e.message);
                        return 1;
                }
                uint64_t t1 = now_usec();
                build_cache_free(c);
                uint64_t t2 = now_usec();
                /* The tree id alone, again, as the commit computed it. */
                BuildCacheOids *prev = NULL;
                BuildCacheState again;
                snprintf(data, sizeof(data), "cache/v/%" PRIu64, s.version);
                _cleanup_close_ int v = open_dir_at(store_fd, data);
                _cleanup_close_ int vd = v >= 0 ? open_dir_at(v, "data") : -EBADF;
                (void) build_cache_oids_load(v, "oids", 20000000, &prev);
                uint64_t t3 = now_usec();
                if (vd < 0 || build_cache_tree_id(vd, paths, 10000000, prev, NULL, &again, &e) < 0)
                        return 1;
                uint64_t t4 = now_usec();
                build_cache_oids_free(prev);
                printf("commit_usec=%" PRIu64 " tree_usec=%" PRIu64 " free_usec=%" PRIu64 " linked=%" PRIu64 " hashed=%" PRIu64 "\n",
                       t1 - t0, t4 - t3, t2 - t1, s.files_unchanged, s.hashed);
                fflush(stdout);
        }
        return 0;
}
