/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the artifact writer's frame decoder, the root process's only input from the
 * tar parser. The parser may be under a hostile stream's control (threat 8), so arbitrary
 * frames must end in success within the limits or a coded refusal; never a crash, undefined
 * behaviour or a file outside the scratch directory. fuzz-cache-frames.c is this target in
 * the cache profile (FRAMES_CACHE_PROFILE): there, every link left must resolve inside its
 * top-level directory, as the kernel judges it (openat2 RESOLVE_BENEATH); in the artifact
 * profile no link may exist at all. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "artifacts/import-internal.h"
#include "common/fd-util.h"
#include "common/macro.h"

#ifndef FRAMES_CACHE_PROFILE
#define FRAMES_CACHE_PROFILE false
#define FRAMES_SCRATCH "tfw-fuzz-frames-"
#endif

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

static DIR *dir_stream(int dir_fd) {
        int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d)
                abort();
        return d;
}

static unsigned entries_in(int dir_fd) {
        DIR *d = dir_stream(dir_fd);
        unsigned n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        n++;
        closedir(d);
        return n;
}

/* Every link below dir_fd (rel[0..len) below top_fd) resolves inside top_fd; with top_fd < 0
 * (the artifact profile) no link may exist. Depth is bounded by the writer's rules. */
static void check_links(int top_fd, int dir_fd, char *rel, size_t len) {
        DIR *d = dir_stream(dir_fd);
        struct dirent *de;

        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                size_t n = strlen(de->d_name);
                if (len + n + 2 > PATH_MAX)
                        abort();
                snprintf(rel + len, PATH_MAX - len, "%s%s", len ? "/" : "", de->d_name);
                if (de->d_type == DT_LNK) {
                        struct open_how how = { .flags = O_PATH | O_CLOEXEC,
                                                .resolve = RESOLVE_BENEATH };
                        if (top_fd < 0)
                                abort();
                        long k = syscall(SYS_openat2, top_fd, rel, &how, sizeof(how));
                        if (k < 0 && errno == EXDEV)
                                abort();
                        if (k >= 0)
                                close((int) k);
                } else if (de->d_type == DT_DIR) {
                        int sub = open_dir_at(dirfd(d), de->d_name);
                        if (sub < 0)
                                abort();
                        check_links(top_fd, sub, rel, len + (len ? 1 : 0) + n);
                        safe_close(sub);
                }
                rel[len] = 0;
        }
        closedir(d);
}

/* The cache profile: only directories at the top, each the boundary of its links. */
static void check_staging(void) {
        char rel[PATH_MAX] = "";

        if (!FRAMES_CACHE_PROFILE) {
                check_links(-EBADF, staging_fd, rel, 0);
                return;
        }
        DIR *d = dir_stream(staging_fd);
        struct dirent *de;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (de->d_type != DT_DIR)
                        abort();
                int top = open_dir_at(dirfd(d), de->d_name);
                if (top < 0)
                        abort();
                check_links(top, top, rel, 0);
                safe_close(top);
        }
        closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const ArtifactLimits l = {
                .max_bytes = 1u << 20, .max_entries = 64, .cache = FRAMES_CACHE_PROFILE
        };
        ArtifactWriter w;
        TfwError e = {};
        size_t used = 0;

        if (root_fd < 0) {
                struct stat st;
                const char *base =
                        stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
                root_fd = mkdtemp_fd(base, FRAMES_SCRATCH, &root_path);
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
        /* What a refused stream left is emptied by the caller; until then, it obeys the rules
         * too. */
        check_staging();
        if (entries_in(root_fd) != 1 || artifact_dir_empty(staging_fd) < 0)
                abort();
        return 0;
}
