/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the artifact tar import (threats 3 and 8). Arbitrary bytes go through the
 * same pipeline as a capsule's stream (libarchive, the frames, the writer's rules and file
 * creation), in process and into a scratch directory. Any input must end in success with only
 * regular files and directories within the limits, or in a coded refusal with the staging
 * directory empty; never a crash, leak, undefined behaviour or a file outside staging. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "artifacts/import-internal.h"
#include "common/fd-util.h"
#include "common/macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_BYTES (256u << 10)
#define MAX_ENTRIES 64u

static char *root_path;
static int root_fd = -EBADF, staging_fd = -EBADF;

static void cleanup(void) {
        safe_close(staging_fd);
        safe_close(root_fd);
        if (root_path)
                (void) rm_rf_at(AT_FDCWD, root_path);
        free(root_path);
}

static void setup(void) {
        struct stat st;
        /* tmpfs when there is one: the target creates and removes files on every input. */
        const char *base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
        root_fd = mkdtemp_fd(base, "tfw-fuzz-tar-", &root_path);
        if (root_fd < 0 || mkdirat(root_fd, "staging", 0700) < 0)
                abort();
        staging_fd = open_dir_at(root_fd, "staging");
        if (staging_fd < 0)
                abort();
        atexit(cleanup);
}

static unsigned entries_in(int dir_fd) {
        int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                abort();
        DIR *d = fdopendir(fd);
        if (!d)
                abort();
        unsigned n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        n++;
        closedir(d);
        return n;
}

/* Only regular files (one link each) and directories; sizes and counts within the limits. */
static void check_tree(int dir_fd, unsigned depth, uint64_t *bytes, uint64_t *count) {
        int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;

        if (!d || depth > ARTIFACT_DEPTH_MAX)
                abort();
        while ((de = readdir(d))) {
                struct stat st;
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        abort();
                (*count)++;
                if (S_ISREG(st.st_mode)) {
                        if (st.st_nlink != 1)
                                abort();
                        *bytes += (uint64_t) st.st_size;
                } else if (S_ISDIR(st.st_mode)) {
                        int sub = open_dir_at(dir_fd, de->d_name);
                        if (sub < 0)
                                abort();
                        check_tree(sub, depth + 1, bytes, count);
                        safe_close(sub);
                } else
                        abort();
        }
        closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        ArtifactLimits l = {
                .max_bytes = MAX_BYTES,
                .max_entries = MAX_ENTRIES,
                .unpriv_uid = 65534,
                .unpriv_gid = 65534,
                .group = (gid_t) -1,
        };
        ArtifactSummary s = {};
        TfwError e = {};

        if (root_fd < 0)
                setup();
        int r = artifacts_import_buffer(size ? (const void *) data : "", size, staging_fd, &l, &s,
                                        &e);
        if (r >= 0) {
                uint64_t bytes = 0, count = 0;
                check_tree(staging_fd, 0, &bytes, &count);
                if (bytes != s.bytes || bytes > MAX_BYTES || count > MAX_ENTRIES ||
                    count != s.files + s.dirs)
                        abort();
                if (artifact_dir_empty(staging_fd) < 0)
                        abort();
        } else if (!e.code || (!streq(e.code, ARTIFACT_CODE_REJECTED) &&
                               !streq(e.code, ARTIFACT_CODE_TOO_LARGE)))
                abort();
        /* Nothing beside staging, nothing left in it. */
        if (entries_in(root_fd) != 1 || entries_in(staging_fd) != 0)
                abort();
        return 0;
}
