/* SPDX-License-Identifier: MIT */
/* Plain driver for the libFuzzer targets: feeds every file of the given files or directories
 * to LLVMFuzzerTestOneInput once, so `make check` replays each corpus (and every past finding
 * saved into it) without clang. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(int dir_fd, const char *name, unsigned *count) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        _cleanup_free_ char *buf = NULL;
        size_t n = 0;
        int r;

        if (fd < 0) {
                fprintf(stderr, "replay: '%s': %s\n", name, strerror(errno));
                return -errno;
        }
        r = read_full_fd_bounded(fd, 16 << 20, &buf, &n);
        if (r < 0) {
                fprintf(stderr, "replay: '%s': %s\n", name, strerror(-r));
                return r;
        }
        (void) LLVMFuzzerTestOneInput((const uint8_t *) buf, n);
        (*count)++;
        return 0;
}

int main(int argc, char **argv) {
        unsigned count = 0;
        int failed = 0;

        for (int i = 1; i < argc; i++) {
                struct stat st;
                if (stat(argv[i], &st) < 0) {
                        fprintf(stderr, "replay: '%s': %s\n", argv[i], strerror(errno));
                        return 1;
                }
                if (!S_ISDIR(st.st_mode)) {
                        failed |= run_file(AT_FDCWD, argv[i], &count) < 0;
                        continue;
                }
                DIR *d = opendir(argv[i]);
                if (!d)
                        return 1;
                struct dirent *de;
                while ((de = readdir(d)))
                        if (de->d_name[0] != '.')
                                failed |= run_file(dirfd(d), de->d_name, &count) < 0;
                closedir(d);
        }
        if (count == 0) {
                fprintf(stderr, "replay: no corpus input found\n");
                return 1;
        }
        printf("replay: %u inputs, no crash\n", count);
        return failed;
}
