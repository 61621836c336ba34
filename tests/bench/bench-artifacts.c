/* SPDX-License-Identifier: MIT */
/* Benchmark driver: import one tar stream into an empty directory through the real,
 * confined artifact import (fork, unprivileged parser, root writer), as the worker does.
 * Usage: bench-artifacts STREAM DIR [GID]. Prints "files=N dirs=N bytes=N". Needs root. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "artifacts/import.h"
#include "common/macro.h"

int main(int argc, char **argv) {
        ArtifactLimits l = {
                .max_bytes = UINT64_C(1) << 34,
                .max_entries = 10000000,
                .unpriv_uid = 65534,
                .unpriv_gid = 65534,
                .group = argc > 3 ? (gid_t) strtoul(argv[3], NULL, 10) : getgid(),
        };
        ArtifactSummary s;
        TfwError e = {};

        if (argc < 3) {
                fprintf(stderr, "usage: bench-artifacts STREAM DIR [GID]\n");
                return 2;
        }
        _cleanup_close_ int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
        _cleanup_close_ int dir = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || dir < 0) {
                perror("bench-artifacts: open");
                return 1;
        }
        if (artifacts_import(fd, dir, &l, &s, &e) < 0) {
                fprintf(stderr, "bench-artifacts: %s: %s\n", e.code, e.message);
                return 1;
        }
        printf("files=%" PRIu64 " dirs=%" PRIu64 " bytes=%" PRIu64 "\n", s.files, s.dirs, s.bytes);
        return 0;
}
