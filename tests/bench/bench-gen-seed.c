/* SPDX-License-Identifier: MIT */
/* The first generation of a lane (a workspace copied into an empty store: snapshot_update()
 * without an index), as a new worker's first request makes it: the timed half of the copy's
 * cost in tests/bench/generations.sh and tests/bench/store-restart.sh.
 *
 *   bench-gen-seed [--threads N] WORKSPACE GEN_DIR ROUNDS
 *
 * GEN_DIR (a tmpfs, as the store) is emptied before each round. --threads N copies with N
 * threads (0, the default: as the worker does, a copier per online CPU; 1: the walk's thread
 * alone). Prints one line a round: "entries=N files=N dirs=N bytes=N usec=N cpu_usec=N
 * tree=HEX", cpu_usec the process's CPU time (all threads) over the walk. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "snapshot/snapshot.h"

static uint64_t cpu_usec(void) {
        struct rusage u;
        if (getrusage(RUSAGE_SELF, &u) < 0)
                return 0;
        return (uint64_t) (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000000 +
               (uint64_t) (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

int main(int argc, char **argv) {
        SnapshotLimits l = { .max_bytes = UINT64_MAX, .max_entries = UINT64_MAX, .group = 4242 };
        int i = 1;

        if (argc > 2 && streq(argv[1], "--threads")) {
                l.copiers = (unsigned) strtoul(argv[2], NULL, 10);
                i = 3;
        }
        if (argc - i != 3) {
                fprintf(stderr, "usage: bench-gen-seed [--threads N] WORKSPACE GEN_DIR ROUNDS\n");
                return 2;
        }
        _cleanup_close_ int gen_fd = open(argv[i + 1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (gen_fd < 0) {
                perror(argv[i + 1]);
                return 1;
        }
        int rounds = atoi(argv[i + 2]);
        for (int k = 0; k < rounds; k++) {
                GenIndex *next = NULL;
                SnapshotSummary s;
                TfwError e = {};
                int r = rm_rf_children(gen_fd);
                if (r < 0) {
                        fprintf(stderr, "bench-gen-seed: cannot empty %s: %s\n", argv[i + 1], strerror(-r));
                        return 1;
                }
                uint64_t c0 = cpu_usec();
                if (snapshot_update(argv[i], gen_fd, NULL, 4343, &l, &next, &s, &e) < 0) {
                        fprintf(stderr, "bench-gen-seed: %s: %s\n", e.code ? e.code : "?", e.message);
                        return 1;
                }
                printf("entries=%" PRIu64 " files=%" PRIu64 " dirs=%" PRIu64 " bytes=%" PRIu64 " usec=%" PRIu64
                       " cpu_usec=%" PRIu64 " tree=%s\n",
                       s.entries, s.files, s.dirs, s.bytes, (uint64_t) s.duration, cpu_usec() - c0, s.tree);
                fflush(stdout);
                gen_index_free(next);
        }
        return 0;
}
