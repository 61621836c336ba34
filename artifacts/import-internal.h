/* SPDX-License-Identifier: MIT */
/* The pieces of the artifact importer (see import.h and docs/artifacts.md), shared by its two
 * processes, its unit tests and its fuzz targets. Not for other components.
 *
 * Three parties:
 *   the parser   an unprivileged, seccomp-confined child that runs libarchive over the stream
 *                and sends what it read as frames on a pipe (tar-parse.c, confine.c);
 *   the writer   a root child of the caller that reads the frames, applies every rule and
 *                creates the files below the staging directory (writer.c);
 *   the caller   artifacts_import_start/finish (import.c).
 * The writer trusts nothing the parser says: a parser taken over by a hostile stream can send
 * any bytes, and the writer's checks are the ones that hold. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "artifacts/import.h"
#include "common/error.h"

struct archive;

#define ARTIFACT_CODE_REJECTED "artifact_rejected"
#define ARTIFACT_CODE_TOO_LARGE "artifact_too_large"
#define ARTIFACT_CODE_FAILED "artifact_import_failed"

#define ARTIFACT_NAME_MAX (PATH_MAX - 1) /* bytes of an entry name, as the stream spells it */
#define ARTIFACT_LINK_MAX (PATH_MAX - 1) /* bytes of a symbolic link's target (cache profile) */
#define ARTIFACT_DEPTH_MAX 128u          /* components of an entry name */
#define ARTIFACT_TRAILER_MAX (1u << 20)  /* bytes tolerated after the end-of-archive marker */
#define ARTIFACT_PARSER_CPU_SECONDS 600  /* RLIMIT_CPU of the parser */
#define ARTIFACT_PARSER_AS_MAX (1ULL << 30) /* RLIMIT_AS of the parser (not under sanitizers) */

/* ---- frames: parser -> writer --------------------------------------------------------------
 * Each frame is a header {u32 type, u32 len} in host byte order followed by len payload bytes.
 *   ATTR   i64 mtime seconds, u32 mtime nanoseconds, u32 permission bits (libarchive's perm),
 *          then, for a symbolic link, the target bytes (0..ARTIFACT_LINK_MAX + 1: one more than
 *          the writer accepts, so it can name the refusal); sent right before every ENTRY
 *   ENTRY  u32 filetype (AE_IF* as libarchive reports it), u32 flags, the name bytes
 *   DATA   u64 offset, 1..FRAME_DATA_MAX bytes of the current entry's contents
 *   END    u64 logical size of the entry (libarchive's offset at the end of its data)
 *   DONE   empty: the stream ended cleanly, trailer included
 *   FAIL   u32 kind (FRAME_FAIL_*), a printable message
 * ATTR came later than the others (the cache profile): ENTRY keeps its layout, so a stream of
 * frames without ATTR means what it always meant to the artifact profile, which checks an ATTR's
 * size and otherwise ignores it. The cache profile requires exactly one ATTR before each ENTRY
 * and none elsewhere. */
enum {
        FRAME_ENTRY = 1,
        FRAME_DATA = 2,
        FRAME_END = 3,
        FRAME_DONE = 4,
        FRAME_FAIL = 5,
        FRAME_ATTR = 6,
};
enum {
        FRAME_FAIL_REJECTED = 0,  /* the stream is malformed */
        FRAME_FAIL_TOO_LARGE = 1, /* the stream is longer than any stream within the limits */
        FRAME_FAIL_SETUP = 2,     /* the parser could not confine itself: a worker fault */
};
#define ENTRY_FLAG_HARDLINK 1u
#define ENTRY_FLAG_SYMLINK 2u

#define FRAME_ATTR_FIXED 16u /* the ATTR payload before the link target */

#define FRAME_HEADER_SIZE 8u
#define FRAME_DATA_MAX ((size_t) 256 << 10)
#define FRAME_MESSAGE_MAX 512u
#define FRAME_PAYLOAD_MAX (FRAME_DATA_MAX + 8u) /* the largest valid payload (DATA) */
_Static_assert(FRAME_ATTR_FIXED + ARTIFACT_LINK_MAX + 1 <= FRAME_PAYLOAD_MAX, "ATTR fits a frame");

/* A buffered frame encoder. Whole frames are handed to flush, never split, so an in-process
 * consumer can decode each flushed buffer completely. */
typedef int (*frame_flush_t)(void *userdata, const uint8_t *buf, size_t len);
typedef struct FrameOut {
        frame_flush_t flush;
        void *userdata;
        uint8_t *buf;
        size_t len, cap; /* cap >= FRAME_HEADER_SIZE + FRAME_PAYLOAD_MAX */
} FrameOut;

int frame_out_init(FrameOut *o, frame_flush_t flush, void *userdata);
void frame_out_done(FrameOut *o);
int frame_out_put(FrameOut *o, uint32_t type, const void *p1, size_t n1, const void *p2,
                  size_t n2);
int frame_out_flush(FrameOut *o);
/* FAIL with a message sanitised to printable ASCII and at most FRAME_MESSAGE_MAX bytes. */
int frame_out_fail(FrameOut *o, uint32_t kind, const char *fmt, ...) _printf_(3, 4);
/* flush callback writing to the fd in userdata (an int *). */
int frame_flush_fd(void *userdata, const uint8_t *buf, size_t len);

/* ---- the parser ------------------------------------------------------------------------- */

/* A libarchive reader for the tar formats only (ustar, pax, GNU; no compression filter). */
int artifact_archive_new(struct archive **ret);

/* Read every entry of a and emit ATTR/ENTRY/DATA/END frames, then nothing (the caller sends DONE
 * after checking the trailer) on a clean end of archive. On a malformed stream emits FAIL and
 * returns -EBADMSG; on an encoder failure returns its error. Applies no policy beyond what the
 * frames can carry: the writer decides. */
int artifact_parse_tar(struct archive *a, FrameOut *o);

/* Run once before confinement: parse a small built-in archive so libarchive and libc finish
 * their lazy set-up (locale, charset conversions) while files can still be opened. */
void artifact_parser_warm_up(void);

/* Drop to limits->unpriv_uid/gid with no groups and no capabilities (bounding set included),
 * die with parent (the writer), make the process non-dumpable, set no_new_privs and load the
 * seccomp allow-list that lets it only read(stream_fd), write(chan_fd), manage memory and
 * exit. Every other fd must already be closed. On failure returns a negative errno with a
 * message in err. */
int artifact_parser_confine(const ArtifactLimits *limits, int stream_fd, int chan_fd,
                            pid_t parent, char *err, size_t err_size);

/* Test hook: when set, the parser calls it right after confining itself (the tests use it to
 * attempt what a hostile stream that took over the parser would try). NULL in production. */
extern void (*artifacts_test_parser_hook)(void);

/* ---- the writer ------------------------------------------------------------------------- */

/* A directory's mtime from the stream, applied when the stream is done (cache profile). The
 * directory is known by its inode, so that applying needs no path (and no memory for one). */
typedef struct DirTime {
        dev_t dev;
        ino_t ino;
        uint64_t seq; /* order of arrival: a repeated directory entry's last mtime wins */
        int64_t sec;
        uint32_t nsec;
} DirTime;

typedef struct ArtifactWriter {
        int root_fd;             /* the staging directory (not owned) */
        uint64_t max_bytes, max_entries;
        uid_t owner;             /* (uid_t) -1: leave the creator's */
        gid_t group;             /* (gid_t) -1: leave the inherited group */
        bool inherit;            /* root is setgid with the right group: nothing to chown */
        bool fix_file_mode;      /* the umask would strip bits from 0640 */
        bool cache;              /* the build-cache profile (import.h) */

        uint64_t entries, bytes, files, dirs, links, frames;

        bool in_entry, entry_is_file, done;
        int file_fd;
        uint64_t file_end;
        char name[ARTIFACT_NAME_MAX + 1]; /* the current entry, normalised */

        /* Cache profile: the last ATTR, pending until its ENTRY, then the current entry's. */
        bool have_attr;
        int64_t mtime_sec;
        uint32_t mtime_nsec, perm;
        size_t target_len;
        char target[ARTIFACT_LINK_MAX + 2]; /* one byte over the limit, and a NUL */
        const char *top_file;    /* cache profile: limits->top_file */

        DirTime *dir_times; /* cache profile: one per directory entry, so <= max_entries */
        size_t n_dir_times, cap_dir_times;

        char cache_path[ARTIFACT_NAME_MAX + 1]; /* last parent directory looked up */
        int cache_fd;
} ArtifactWriter;

/* owner/group: what published inodes get; (uid_t)-1/(gid_t)-1 leave them (fuzzing). The
 * profile is limits->cache (limits->owner is not used: owner is). */
int artifact_writer_init(ArtifactWriter *w, int root_fd, const ArtifactLimits *limits,
                         uid_t owner, gid_t group, TfwError *e);
void artifact_writer_done(ArtifactWriter *w);

/* The rules, one call per frame's content. Each returns a negative errno with e filled:
 * EBADMSG/artifact_rejected, E2BIG/artifact_too_large, or another errno/artifact_import_failed
 * for a host-side failure. */
/* An ATTR frame's content; target is target_len bytes (not NUL-terminated, at most
 * ARTIFACT_LINK_MAX + 1). Ignored in the artifact profile. */
int artifact_writer_attr(ArtifactWriter *w, int64_t mtime_sec, uint32_t mtime_nsec, uint32_t perm,
                         const char *target, size_t target_len, TfwError *e);
int artifact_writer_begin(ArtifactWriter *w, uint32_t filetype, uint32_t flags, const char *name,
                          size_t len, TfwError *e);
int artifact_writer_data(ArtifactWriter *w, uint64_t offset, const void *buf, size_t len,
                         TfwError *e);
int artifact_writer_end(ArtifactWriter *w, uint64_t size, TfwError *e);
/* DONE: the stream ended. The cache profile applies the directories' mtimes now. */
int artifact_writer_finish(ArtifactWriter *w, TfwError *e);

/* Decode and apply the complete frames at the start of buf; *ret_consumed says how many bytes
 * they took (a trailing partial frame is left). Sets w->done on DONE; any frame after DONE,
 * an unknown or oversized frame, or a frame out of order is refused. */
int artifact_writer_feed(ArtifactWriter *w, const uint8_t *buf, size_t len, size_t *ret_consumed,
                         TfwError *e);

/* Is name (len bytes, not NUL-terminated) acceptable? On success writes the normalised form
 * (no "./" prefix, no trailing '/'; "" for the staging directory itself) to out
 * (ARTIFACT_NAME_MAX + 1 bytes) and sets *ret_trailing_slash. Refuses with EBADMSG and a
 * reason in e. */
int artifact_name_normalise(const char *name, size_t len, char *out, bool *ret_trailing_slash,
                            TfwError *e);

/* Words for messages, so that a reader knows which stream a message is about: "artifact" /
 * "cache entry" before a quoted name, "artifacts" / "cache" before a colon, "artifact" /
 * "cache" before "parser" or "writer". */
static inline const char *import_entry_word(bool cache) {
        return cache ? "cache entry" : "artifact";
}
static inline const char *import_stream_word(bool cache) {
        return cache ? "cache" : "artifacts";
}
static inline const char *import_kind_word(bool cache) {
        return cache ? "cache" : "artifact";
}

/* Remove everything below dir_fd, fd-relative, never following a symlink. */
int artifact_dir_empty(int dir_fd);

/* ---- in-process and test entry points ---------------------------------------------------- */

/* The whole pipeline in this process, without fork or confinement: libarchive over buf,
 * frames, writer. For the fuzz target and the rule tests; staging is emptied on failure. */
int artifacts_import_buffer(const void *buf, size_t len, int staging_dir_fd,
                            const ArtifactLimits *limits, ArtifactSummary *ret, TfwError *e);

/* The pid of the writer process of a running import (the parser is its only child). */
pid_t artifacts_import_pid(const ArtifactImport *imp);
