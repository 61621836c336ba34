/* SPDX-License-Identifier: MIT */
/* Take one snapshot and print its summary: the timed half of tests/bench/snapshot.sh.
 *
 *   bench-snapshot [--copy auto|rw|range] [--gid GID] WORKSPACE DEST_PARENT NAME
 *
 * Prints "bytes=N entries=N files=N dirs=N symlinks=N tree=HEX usec=N resolver=R". */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/macro.h"
#include "snapshot/snapshot.h"

int main(int argc, char **argv) {
        SnapshotLimits l = {
                .max_bytes = UINT64_MAX,
                .max_entries = UINT64_MAX,
                .group = (gid_t) -1,
                .copy = SNAPSHOT_COPY_AUTO,
        };
        _cleanup_close_ int parent = -EBADF;
        int i = 1;

        for (; i < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
                if (i + 1 >= argc)
                        goto usage;
                if (streq(argv[i], "--copy")) {
                        if (streq(argv[i + 1], "rw"))
                                l.copy = SNAPSHOT_COPY_READ_WRITE;
                        else if (streq(argv[i + 1], "range"))
                                l.copy = SNAPSHOT_COPY_FILE_RANGE;
                        else if (!streq(argv[i + 1], "auto"))
                                goto usage;
                } else if (streq(argv[i], "--gid"))
                        l.group = (gid_t) strtoul(argv[i + 1], NULL, 10);
                else
                        goto usage;
        }
        if (argc - i != 3)
                goto usage;

        parent = open(argv[i + 1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (parent < 0) {
                perror(argv[i + 1]);
                return 1;
        }
        SnapshotSummary s;
        TfwError e = {};
        if (snapshot_take(argv[i], parent, argv[i + 2], &l, &s, &e) < 0) {
                fprintf(stderr, "bench-snapshot: %s: %s\n", e.code ? e.code : "?", e.message);
                return 1;
        }
        printf("bytes=%" PRIu64 " entries=%" PRIu64 " files=%" PRIu64 " dirs=%" PRIu64
               " symlinks=%" PRIu64 " tree=%s usec=%" PRIu64 " resolver=%s\n",
               s.bytes, s.entries, s.files, s.dirs, s.skipped_symlinks, s.tree, s.duration,
               s.resolver == SNAPSHOT_RESOLVER_OPENAT2 ? "openat2" : "openat");
        return 0;
usage:
        fprintf(stderr, "usage: bench-snapshot [--copy auto|rw|range] [--gid GID] WORKSPACE DEST_PARENT NAME\n");
        return 2;
}
