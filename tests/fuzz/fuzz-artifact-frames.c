/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the artifact writer's frame decoder, the root process's only input from the
 * tar parser. The parser may be under a hostile stream's control (threat 8), so arbitrary
 * frames must end in success within the limits or a coded refusal; never a crash, undefined
 * behaviour or a file outside the scratch directory. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "artifacts/import-internal.h"
#include "common/fd-util.h"
#include "common/macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *root_path;
static int root_fd = -EBADF, staging_fd = -EBADF;

static void cleanup(void) {
        safe_close(staging_fd);
        safe_close(root_fd);
        if (root_path)
                (void) rm_rf_at(AT_FDCWD, root_path);
        free(root_path);
}

static unsigned entries_in(int dir_fd) {
        int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const ArtifactLimits l = { .max_bytes = 1u << 20, .max_entries = 64 };
        ArtifactWriter w;
        TfwError e = {};
        size_t used = 0;

        if (root_fd < 0) {
                struct stat st;
                const char *base =
                        stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
                root_fd = mkdtemp_fd(base, "tfw-fuzz-frames-", &root_path);
                if (root_fd < 0 || mkdirat(root_fd, "staging", 0700) < 0)
                        abort();
                staging_fd = open_dir_at(root_fd, "staging");
                if (staging_fd < 0)
                        abort();
                atexit(cleanup);
        }
        if (artifact_writer_init(&w, staging_fd, &l, (uid_t) -1, (gid_t) -1, &e) < 0)
                abort();
        int r = artifact_writer_feed(&w, data, size, &used, &e);
        if (r >= 0) {
                if (used > size || w.bytes > l.max_bytes || w.entries > l.max_entries)
                        abort();
        } else if (!e.code)
                abort();
        artifact_writer_done(&w);
        if (entries_in(root_fd) != 1 || artifact_dir_empty(staging_fd) < 0)
                abort();
        return 0;
}
