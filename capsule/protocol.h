/* SPDX-License-Identifier: MIT */
/* The wire protocol between the host driver and tentaflake-capsule-init (docs/capsule.md).
 * Header-only so the static init binary needs nothing else from the library.
 *
 * The capsule has three host pipes: stdin, stdout (the artifact channel) and stderr (the log
 * channel). gVisor lets any process of the job's uid open /proc/1/fd/N of init, whatever init's
 * dumpability, so the job can write into both output channels. The host therefore trusts only
 * what carries a per-run secret the job never sees:
 *
 *   stdin   the host writes CAPSULE_SECRET_SIZE random bytes, then the input: one byte
 *           CAPSULE_INPUT_MOUNTED (the tree is bound read-only at /snapshot: init copies it),
 *           CAPSULE_INPUT_BOUND (a generation is /work already) or CAPSULE_INPUT_STREAM followed by the workspace stream (snapshot/stream.h), which the host's
 *           snapshot walk writes as it reads the workspace (no copy on the host's disk).
 *           Init reads all of it before any job process exists and then replaces fd 0 with
 *           /dev/null, so nothing of the job ever reads the input. When the input was read
 *           whole, init keeps a copy of the channel at another fd for the host's stop records
 *           (CAPSULE_STOP_RECORD): the host writes there only after the job is dead.
 *   stdout  whatever the job wrote, then (after init has killed and reaped every job process)
 *           the artifact token (first half of the secret) followed by chunks (below) carrying
 *           the artifacts' tar stream and the build cache's. The host discards everything
 *           before the token.
 *   stderr  the job's combined output, relayed by init, then the trailer line
 *           CAPSULE_TRAILER_TAG <hex of the log token (second half)> <fields>\n, written after
 *           the job is dead, so it is the last thing on the channel. A trailer without the
 *           right token is just log text. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where the driver mounts the pieces inside the capsule. */
#define CAPSULE_INIT_PATH "/.tentaflake/init"
#define CAPSULE_SNAPSHOT_PATH "/snapshot"
#define CAPSULE_WORK_PATH "/work"
#define CAPSULE_TMP_PATH "/tmp"
#define CAPSULE_ARTIFACTS_DIR "artifacts" /* below /work */
/* With a generation at /work (CAPSULE_INPUT_BOUND): the job's writes as a layer of their own
 * (docs/capsule.md, "The job's writes as a layer"). The spec mounts a tmpfs of
 * limits.workspace_tmpfs at CAPSULE_LAYER_PATH (root's, 0700) and binds the build cache's
 * versions read-only at CAPSULE_CACHE_LOWER_PATH (cache path i of version v is <v>/data/<i>
 * there, v given by CAPSULE_CACHE_RECORD); init, started as root with
 * CAPSULE_LAYER_CAPS only and CAPSULE_LAYER_ARG<uid>:<gid> as its first argument, mounts an
 * overlay on /work (lower: the generation bound there) and one on each /work/<cache path>,
 * their upper and work directories on that tmpfs, detaches CAPSULE_CACHE_LOWER_PATH (the job
 * sees only its version, through the overlays), then drops to uid:gid with no capability
 * before anything of the input or the job is handled. */
/* The runc capsule, where the job shares the host's kernel (docs/capsule.md, "The runc engine's
 * walls"): init given CAPSULE_LANDLOCK_ARG as its FIRST argument (before CAPSULE_LAYER_ARG,
 * CAPSULE_EGRESS_ARG, CAPSULE_WARM_ARG or "--") confines the job with Landlock
 * (capsule-init/landlock.h): after the layer's mounts and the drop to the job's ids, after the
 * input is in /work and the egress relay listens, just before it starts the job, its own
 * thread takes a ruleset that leaves reading and executing everywhere and grants writing only
 * beneath CAPSULE_WORK_PATH and CAPSULE_TMP_PATH (the cache paths are beneath /work) and to
 * the harmless devices; the job inherits it. Init's own later work (reading /work for the
 * artifacts, the changes and the cache; the channels it holds open) needs no more. Fails
 * closed: where the kernel has no Landlock or a step fails, init says why on the log channel
 * and runs nothing (CAPSULE_INIT_ERROR_LANDLOCK). Without it nothing changes (runsc's capsule:
 * gVisor's own kernel is the wall there). */
#define CAPSULE_LANDLOCK_ARG "--landlock"
#define CAPSULE_LAYER_PATH "/.tentaflake/layer"
#define CAPSULE_CACHE_LOWER_PATH "/.tentaflake/cache"
#define CAPSULE_LAYER_ARG "--layer="
#define CAPSULE_LAYER_CAPS                                                                        \
        { "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_SETGID",    \
          "CAP_SETUID", "CAP_SETPCAP", "CAP_SYS_ADMIN", NULL }

#define CAPSULE_TOKEN_SIZE 16
#define CAPSULE_SECRET_SIZE (2 * CAPSULE_TOKEN_SIZE) /* artifact token || log token */

#define CAPSULE_TRAILER_TAG "\n\036tentaflake-capsule-status "
/* The trailer's full= field: /work and /tmp that had less than this left once the job had
 * ended ("none", "work", "tmp", "work_tmp"; the "disk" wall, capsule/walls.h). */
#define CAPSULE_FULL_BYTES (64 * 1024)
/* Longest trailer init writes; the host holds back this many bytes of the log channel. */
#define CAPSULE_TRAILER_MAX 256

/* A capsule started ahead of its job (runtime.warm_seconds) runs `init --warm`: its spec
 * holds no argv and no job environment. After the secret, init waits for the job record,
 *   'J' u32 length (little-endian), then that many bytes: the job id NUL, u16 argc, argc
 *       NUL-terminated strings, u16 envc, envc NUL-terminated "NAME=VALUE" strings,
 * then (after init's answer below) the input byte, and, for a stream, the stream. Only the worker holds the write
 * end, no job process exists before the record is read, and each capsule takes exactly one
 * record (threat 12). */
#define CAPSULE_WARM_ARG "--warm"
/* Init's answer to the job record, on the log channel right after it read the record and
 * before anything else of the job happens: CAPSULE_JOB_ACK_TAG <hex of the log token>\n. No
 * job process exists yet, so nothing else can forge it; the host sends the input byte only
 * after it has read it, and init that cannot write it exits without reading further. So a
 * channel that ends without it means no job process ever existed and nothing of the input
 * was sent (its sandbox died while it waited): the job may run in another capsule. */
#define CAPSULE_JOB_ACK_TAG "\036tentaflake-capsule-job "
#define CAPSULE_JOB_RECORD 'J'
#define CAPSULE_JOB_RECORD_MAX (512 * 1024)

/* Before the input byte (and before the cache record), the host gives the bounds its importers
 * hold the outputs to (docs/artifacts.md, docs/cache.md): 'L', then four u64 (little-endian):
 * max_artifact_bytes, max_artifact_entries, the cache's max_bytes and max_entries. Init counts
 * its entries and bytes as the importer does (a header is an entry; a file counts its size,
 * holes included, sent or kept; a symbolic link its target) and ends a stream before an entry
 * that would pass its bound, without reading it (the chunks 'a' and 'c' below). The importer
 * enforces the bounds either way: this only spares sending what would be refused. */
#define CAPSULE_BOUNDS_RECORD 'L'
#define CAPSULE_BOUNDS_SIZE (4 * 8)

typedef struct CapsuleBounds {
        uint64_t art_bytes, art_entries, cache_bytes, cache_entries;
} CapsuleBounds;

static inline void capsule_bounds_put(const CapsuleBounds *b, uint8_t out[static CAPSULE_BOUNDS_SIZE]) {
        const uint64_t v[4] = { b->art_bytes, b->art_entries, b->cache_bytes, b->cache_entries };
        for (unsigned i = 0; i < 4; i++)
                for (unsigned k = 0; k < 8; k++)
                        out[8 * i + k] = (uint8_t) (v[i] >> (8 * k));
}

static inline void capsule_bounds_get(const uint8_t in[static CAPSULE_BOUNDS_SIZE], CapsuleBounds *ret) {
        uint64_t v[4] = {};
        for (unsigned i = 0; i < 4; i++)
                for (unsigned k = 0; k < 8; k++)
                        v[i] |= (uint64_t) in[8 * i + k] << (8 * k);
        *ret = (CapsuleBounds) { .art_bytes = v[0], .art_entries = v[1], .cache_bytes = v[2], .cache_entries = v[3] };
}

#define CAPSULE_CACHE_VERSION_MAX UINT64_C(999999999999)
/* Before the input byte, the host may give the build cache's paths (docs/cache.md): 'C', u8 n
 * (1..CAPSULE_CACHE_PATHS_MAX), the version handed out (u64, little-endian: the lower layers are
 * CAPSULE_CACHE_LOWER_PATH/<version>/data/<i>), then n times u16 length (little-endian,
 * 1..CAPSULE_CACHE_PATH_MAX) and the path, relative to /work and normalised. Init then sends
 * what the job changed there, read from each cache overlay's upper directory: never what it
 * left untouched (CAPSULE_CHUNK_CACHE). */
#define CAPSULE_CACHE_RECORD 'C'
#define CAPSULE_CACHE_PATHS_MAX 16
#define CAPSULE_CACHE_PATH_MAX 1024 /* 16 of them fit the pipe buffer with the secret */

/* The artifact channel after the artifact token: chunks of {u8 kind, u32 length (little-endian,
 * at most CAPSULE_CHUNK_MAX), that many bytes}, up to the channel's end:
 *   'A'  the next bytes of the artifacts' tar stream (/work/artifacts)
 *   'C'  the next bytes of the cache's tar stream, the job's changes to the version it was
 *        handed (docs/cache.md): for cache path i, "<i>" itself (a directory entry, its mode
 *        and times) first, then "<i>/..." for every directory, regular file and symbolic link
 *        the job wrote, made, or changed the mode or times of (whole, with its times), and
 *        last CAPSULE_CACHE_DELETED: a regular file listing, one a line, "<i>/PATH" of each
 *        entry of the version the job removed or replaced by another type (a directory once,
 *        for everything below it; PATH escaped as the changes' list, 'H' below), at most
 *        CAPSULE_CHANGES_LIST_MAX bytes
 *   'X'  the cache could not be sent whole (a special file, an unreadable one, a cache path
 *        that is not a directory): a printable message; nothing of the cache is to be kept
 *   'a'  the artifacts' stream ends here, refused by init: its next entry would pass the
 *        bounds (CAPSULE_BOUNDS_RECORD); a printable message. Nothing of the artifacts is to
 *        be kept, and no more of them follows
 *   'c'  the same for the cache's stream (nothing of the cache is to be kept)
 *   'H'  the next bytes of the changes' tar stream (CAPSULE_CHANGES_RECORD): each regular file
 *        the job wrote, at its path below /work (mode 0644 or 0755), then CAPSULE_CHANGES_LIST
 *        (a path no change can have: the control directory is never one), the list of every
 *        change, one a line, tab-separated: "file MODE SIZE PATH", "dir PATH", "deleted PATH",
 *        "refused PATH WHY", and last "end complete" or "end incomplete WHY" (the bounds were
 *        met: what follows them is not listed); at most CAPSULE_CHANGES_LIST_MAX bytes. PATH:
 *        bytes 0x21..0x7e but backslash, and 0x80..0xff, as they are, every other byte \xHH.
 * The artifacts come first, then the cache, then the changes. The trailer's cache= field
 * vouches for the cache stream. */
#define CAPSULE_CHUNK_ARTIFACTS 'A'
#define CAPSULE_CHUNK_CACHE 'C'
#define CAPSULE_CHUNK_CACHE_REFUSED 'X'
#define CAPSULE_CHUNK_ARTIFACTS_OVER 'a'
#define CAPSULE_CHUNK_CACHE_OVER 'c'
#define CAPSULE_CHUNK_CHANGES 'H'
#define CAPSULE_CACHE_DELETED "deleted"
#define CAPSULE_CHANGES_LIST ".tentaflake-worker/changes"
/* The list's largest size, whatever the entries: past it the list ends incomplete (init), and
 * the host reads no more (exec/changeset.c). */
#define CAPSULE_CHANGES_LIST_MAX (64u << 20)
#define CAPSULE_CHUNK_HEADER 5
#define CAPSULE_CHUNK_MAX (1u << 20)

/* The host's word back, on the input channel once the token came: when an importer stops
 * taking its stream (it broke a rule or passed a bound: the importer's verdict says which), or
 * the host takes nothing of it (no importer), the host writes CAPSULE_STOP_RECORD, the stream's
 * chunk kind ('A' or 'C') and the artifact token. Init then sends no more of that stream, reads
 * no more of its files, and goes on with the next stream and the trailer, so the job's own
 * ending is what the host reports, with the output's error. A job process may have written
 * into this channel while it ran (gVisor opens /proc/1/fd/N for it); it can never read what the
 * host sends, which comes only after the token, when no job process exists. So init discards
 * whatever the channel holds once the job is dead, before it writes the token, and stops reading
 * the channel at the first record that is not a stop record with the token. A stop for a stream
 * already sent whole, or not being sent, is ignored. */
#define CAPSULE_STOP_RECORD 'R'
#define CAPSULE_STOP_RECORD_SIZE (2 + CAPSULE_TOKEN_SIZE)

static inline void capsule_stop_record(uint8_t kind, const uint8_t token[static CAPSULE_TOKEN_SIZE],
                                       uint8_t out[static CAPSULE_STOP_RECORD_SIZE]) {
        out[0] = CAPSULE_STOP_RECORD;
        out[1] = kind;
        for (unsigned i = 0; i < CAPSULE_TOKEN_SIZE; i++)
                out[2 + i] = token[i];
}

/* The stream kind a stop record names ('A', 'C' or 'H'), or -1 for anything else. */
static inline int capsule_stop_record_parse(const uint8_t rec[static CAPSULE_STOP_RECORD_SIZE],
                                            const uint8_t token[static CAPSULE_TOKEN_SIZE]) {
        uint8_t diff = 0;
        for (unsigned i = 0; i < CAPSULE_TOKEN_SIZE; i++)
                diff |= rec[2 + i] ^ token[i];
        if (rec[0] != CAPSULE_STOP_RECORD || diff != 0 ||
            (rec[1] != CAPSULE_CHUNK_ARTIFACTS && rec[1] != CAPSULE_CHUNK_CACHE && rec[1] != CAPSULE_CHUNK_CHANGES))
                return -1;
        return rec[1];
}

/* The job's working directory below /work (the request's cwd), when it is not /work itself:
 * CAPSULE_CWD_RECORD, 2 bytes little-endian length (1..CAPSULE_CWD_MAX), the relative path
 * (no empty, "." or ".." component). It follows the cache record. Init enters it once the
 * input is in /work, one component at a time and never through a link; one the input does
 * not hold as a directory ends the capsule before any job process (CAPSULE_INIT_ERROR_CWD). */
#define CAPSULE_CWD_RECORD 'D'
#define CAPSULE_CWD_MAX 1024

/* The host wants what the job changed under /work as a changeset (docs/capsule.md, "Changes";
 * only with a generation, whose layer says it): CAPSULE_CHANGES_RECORD, u64 bytes and u64
 * entries (little-endian), the changeset's bounds. It follows the cwd record. */
#define CAPSULE_CHANGES_RECORD 'W'
#define CAPSULE_CHANGES_RECORD_SIZE 16

/* The input after the secret (docs/snapshot.md, "The stream"). */
#define CAPSULE_INPUT_MOUNTED 'M'
#define CAPSULE_INPUT_STREAM 'S'
/* /work is already the job's tree: a generation bound read-only at /work (the driver's
 * work_dir), under the overlay init mounts (CAPSULE_LAYER_PATH); nothing to copy or receive. */
#define CAPSULE_INPUT_BOUND 'B'

/* The workspace stream itself: snapshot/stream.h. */

/* Egress (only with network.allow; docs/egress.md). The capsule keeps --network=none: its only
 * way out is CAPSULE_EGRESS_STREAMS connected unix stream sockets the worker passes in at guest
 * fds CAPSULE_EGRESS_FD_BASE.. (runsc run --pass-fd), whose other ends the worker's proxy
 * (egress-proxy/) holds. Init, started with CAPSULE_EGRESS_ARG before "--" or CAPSULE_WARM_ARG,
 * listens on 127.0.0.1:CAPSULE_EGRESS_PORT before the job starts and relays each TCP connection
 * it accepts over the next unused stream, one connection a stream, so the number of connections
 * a job can open is bounded by construction. A stream carries the connection's bytes as they
 * are: its end of file (shutdown) is the connection's half-close. Started with
 * CAPSULE_EGRESS_PASS_ARG instead (runc: the capsule's sockets are the host kernel's), init
 * passes the accepted TCP socket itself over the stream, as one byte with the fd attached
 * (SCM_RIGHTS), and closes its own copy: the proxy then reads and writes the job's connection
 * directly (egress-wire.h, --stream-carries socket), no relay in between, and closes the stream
 * when the connection has ended, which is init's sign to let the next waiting one go. */
#define CAPSULE_EGRESS_ARG "--egress"
#define CAPSULE_EGRESS_PASS_ARG "--egress-pass"
#define CAPSULE_EGRESS_STREAMS 128   /* runsc passes its own fds and these in one SCM_RIGHTS
                                      * message of at most 253: measured, 230 still start */
#define CAPSULE_EGRESS_FD_BASE 10
/* Of them, at most this many relayed at once (init keeps the others waiting, accepted, in the
 * capsule), so the host never holds the buffers of more: npm keeps about 15 connections. */
#define CAPSULE_EGRESS_LIVE_MAX 32
#define CAPSULE_EGRESS_PORT 3128
#define CAPSULE_EGRESS_PROXY_URL "http://127.0.0.1:3128"

/* Exit codes of init for its own failures (the trailer says which). 125 and up follow the
 * convention of env(1) and shells: 126 cannot execute, 127 not found. */
#define CAPSULE_EXIT_INIT_FAILED 125
#define CAPSULE_EXIT_CANNOT_EXEC 126
#define CAPSULE_EXIT_NOT_FOUND 127

/* Reasons init reports in the trailer's init_error field. */
#define CAPSULE_INIT_ERROR_NONE "none"
#define CAPSULE_INIT_ERROR_SNAPSHOT "snapshot_copy" /* /snapshot or the stream could not be
                                                     * written to /work */
#define CAPSULE_INIT_ERROR_INPUT "input_aborted"   /* the host aborted the stream (or it
                                                     * ended early): nothing ran */
#define CAPSULE_INIT_ERROR_SPAWN "spawn"            /* fork/pipe failed */
#define CAPSULE_INIT_ERROR_EXEC "exec"              /* argv[0] could not be executed */
#define CAPSULE_INIT_ERROR_EGRESS "egress"          /* the egress relay could not start */
#define CAPSULE_INIT_ERROR_CWD "cwd"                /* the job's cwd is no directory of the
                                                     * input (CAPSULE_CWD_RECORD) */
#define CAPSULE_INIT_ERROR_LAYER "layer"            /* the job's layer could not be mounted,
                                                     * or init could not drop to the job's
                                                     * ids (CAPSULE_LAYER_ARG) */
#define CAPSULE_INIT_ERROR_LANDLOCK "landlock"      /* the job could not be confined with
                                                     * Landlock (CAPSULE_LANDLOCK_ARG): it
                                                     * never started */

/* A cache path as init and the spec take it: 1..CAPSULE_CACHE_PATH_MAX bytes, no NUL, relative,
 * components neither empty nor "." nor "..". (The configuration checks more.) */
static inline bool capsule_cache_path_is_valid(const char *p, size_t len) {
        if (len == 0 || len > CAPSULE_CACHE_PATH_MAX || p[0] == '/')
                return false;
        for (size_t i = 0; i <= len; i++)
                if (i < len && p[i] == 0)
                        return false;
        for (size_t i = 0; i < len;) {
                size_t j = i;
                while (j < len && p[j] != '/')
                        j++;
                size_t n = j - i;
                if (n == 0 || (n == 1 && p[i] == '.') || (n == 2 && p[i] == '.' && p[i + 1] == '.'))
                        return false;
                i = j + 1;
                if (j + 1 == len)
                        return false; /* a trailing '/' */
        }
        return true;
}

static inline char capsule_hexdigit(unsigned v) {
        return "0123456789abcdef"[v & 15];
}

/* Lowercase hex of a token into out (2*CAPSULE_TOKEN_SIZE+1 bytes). */
static inline void capsule_token_hex(const uint8_t *token, char *out) {
        for (unsigned i = 0; i < CAPSULE_TOKEN_SIZE; i++) {
                out[2 * i] = capsule_hexdigit(token[i] >> 4);
                out[2 * i + 1] = capsule_hexdigit(token[i]);
        }
        out[2 * CAPSULE_TOKEN_SIZE] = 0;
}
