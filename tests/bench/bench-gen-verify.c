/* SPDX-License-Identifier: MIT */
/* The cost of asking every kept file by fstatat (snapshot/gen-verify.c, issue 33), one thread
 * against a thread per CPU: the timed half of tests/bench/gen-verify.sh.
 *
 *   bench-gen-verify WORKSPACE GEN_DIR ROUNDS
 *
 * Walks WORKSPACE into a generation in GEN_DIR (empty) twice with a watch (the first walk
 * watches every directory, the second is on the watch's word), then ROUNDS walks more on the
 * watch's word with nothing changed, alternating one thread and the threaded question. Prints
 * one line a walk: "mode=single|threaded usec=N files_checked=N entries_unread=N". */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "snapshot/dirty-set.h"
#include "snapshot/gen-verify.h"
#include "snapshot/snapshot.h"

static uint64_t now_usec(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (uint64_t) t.tv_sec * 1000000 + (uint64_t) t.tv_nsec / 1000;
}

static int walk(const char *ws, int gen_fd, DirtySet *set, GenIndex **index, SnapshotSummary *s) {
        SnapshotLimits l = { .max_bytes = UINT64_MAX, .max_entries = UINT64_MAX, .group = 4242 };
        _cleanup_close_ int view = -EBADF;
        DirtyView *v = NULL;
        GenIndex *next = NULL;
        TfwError e = {};

        if (dirty_set_read(set) < 0 || dirty_set_export(set, &view) < 0 ||
            dirty_view_load(view, dirty_set_fd(set), dirty_set_budget(set), &v) < 0) {
                fprintf(stderr, "bench-gen-verify: the watch could not be read\n");
                return -1;
        }
        l.watch = v;
        int r = snapshot_update(ws, gen_fd, *index, 4343, &l, &next, s, &e);
        dirty_view_free(v);
        if (r < 0) {
                fprintf(stderr, "bench-gen-verify: %s: %s\n", e.code ? e.code : "?", e.message);
                return -1;
        }
        gen_index_free(*index);
        *index = next;
        return 0;
}

int main(int argc, char **argv) {
        if (argc != 4) {
                fprintf(stderr, "usage: bench-gen-verify WORKSPACE GEN_DIR ROUNDS\n");
                return 2;
        }
        _cleanup_close_ int gen_fd = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (gen_fd < 0) {
                perror(argv[2]);
                return 1;
        }
        DirtySet *set = NULL;
        if (dirty_set_new(1U << 20, &set) < 0) {
                fprintf(stderr, "bench-gen-verify: no inotify instance\n");
                return 1;
        }
        GenIndex *index = NULL;
        SnapshotSummary s;
        int rounds = atoi(argv[3]);
        uint64_t threaded_min = gen_verify_test_threaded_min_files;

        /* Past the racy window of the last write, so the walks may keep what they read. */
        sleep(2);
        for (int i = 0; i < 2; i++)
                if (walk(argv[1], gen_fd, set, &index, &s) < 0)
                        return 1;
        for (int i = 0; i < 2 * rounds; i++) {
                bool single = i % 2 == 0;
                gen_verify_test_threaded_min_files = single ? UINT64_MAX : threaded_min;
                uint64_t t0 = now_usec();
                if (walk(argv[1], gen_fd, set, &index, &s) < 0)
                        return 1;
                printf("mode=%s usec=%" PRIu64 " files_checked=%" PRIu64 " entries_unread=%" PRIu64 "\n",
                       single ? "single" : "threaded", now_usec() - t0, s.files_checked, s.entries_unread);
        }
        gen_index_free(index);
        dirty_set_free(set);
        return 0;
}
