/* SPDX-License-Identifier: MIT */
/* What the files of tentaflake-capsule-init share (capsule-init.c, out-channel.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "capsule/protocol.h"
#include "common/macro.h"

#define PROG "tentaflake-capsule-init"
/* Each level of a tree walk holds two fds; RLIMIT_NOFILE is 1024. */
#define MAX_DEPTH 256
#define COPY_BUF (128 * 1024)

extern uint8_t secret[CAPSULE_SECRET_SIZE];
extern unsigned long long artifacts_skipped; /* artifacts left out */
extern bool locale_set;

void say(const char *fmt, ...) _printf_(1, 2);
/* Names are UTF-8: with a UTF-8 character type the pax writer stores them as they are. Set
 * before the first entry, only LC_CTYPE, and only when there is an entry: every locale file is
 * a gofer round trip, and loading all categories at start-up cost every job milliseconds. */
void init_utf8_names(void);

/* The build cache's paths the host gave (CAPSULE_CACHE_RECORD), relative to /work. */
extern char *cache_paths[CAPSULE_CACHE_PATHS_MAX];
extern size_t n_cache_paths;
extern uint64_t cache_version; /* the version handed out (CAPSULE_CACHE_LOWER_PATH/<version>) */

/* The changeset the host wants (CAPSULE_CHANGES_RECORD): its bounds, 0 entries when none; and
 * the layer's /work upper directory and the generation beneath, opened by layer_mount before
 * the overlay covered it (-1 without a layer). */
extern uint64_t changes_max_bytes, changes_max_entries;
extern int layer_upper_fd, layer_lower_fd;
/* The same for each cache path's overlay: its upper directory and the version beneath. */
extern int cache_upper_fd[CAPSULE_CACHE_PATHS_MAX], cache_lower_fd[CAPSULE_CACHE_PATHS_MAX];

/* The bounds the host's importers hold the outputs to (CAPSULE_BOUNDS_RECORD); without the
 * record, none. */
extern CapsuleBounds bounds;

/* Init's copy of the input channel, for the host's stop records (CAPSULE_STOP_RECORD), or -1
 * (stop-records.c). control_drain: the job is dead, drop what the channel holds (nothing of it
 * is the host's). control_stopped: whether the host asked for no more of the stream of that
 * chunk kind (looks at the channel without waiting). */
extern int control_fd;
void control_drain(void);
bool control_stopped(uint8_t kind);

typedef enum CacheOut {
        CACHE_OUT_NONE,   /* no cache record */
        CACHE_OUT_OK,     /* every cache path went out whole */
        CACHE_OUT_FAILED, /* something could not: nothing of it is to be kept */
} CacheOut;

/* Step 5: the artifact token, then the channel's chunks: /work/artifacts as one tar stream,
 * then (with cache paths) the cache as another. Returns < 0 when the artifacts could not all
 * be written; *ret_cache says how the cache went. */
int write_outputs(CacheOut *ret_cache);
/* What write_outputs would load on its first header, loaded now: a capsule started ahead does
 * it while it waits. Writes nothing anywhere. */
void outputs_warm_up(void);

/* The directory /work/<path>, each component opened with O_DIRECTORY|O_NOFOLLOW (no link
 * followed anywhere, nothing made); -ENOENT: not there, -ENOTDIR or -ELOOP: a file or a link in
 * the way (out-channel.c). */
int open_work_dir(const char *path);

/* The job's layer (layer.c): the overlays on /work and on each cache path (init is the
 * sandbox's root then), after which mount is refused (capsule_init_refuse_mount); a negative
 * errno, said. The ids and the drop are capsule/init-drop.h's. */
int layer_mount(void);

/* Egress (capsule/protocol.h, CAPSULE_EGRESS_*): listen on 127.0.0.1:CAPSULE_EGRESS_PORT and
 * relay each connection over the next unused stream, on a thread of its own (egress-relay.c);
 * pass (CAPSULE_EGRESS_PASS_ARG): pass the connection's socket over it instead. Called once,
 * before the job starts. */
int egress_relay_start(bool pass);
/* From now on the relay writes nothing to the log channel (before the status trailer). */
void egress_relay_quiet(void);

/* `--egress-probe ALLOWED UNLISTED HOST_ADDR HOST_PORT`: doctor's proof of the egress route, run as a job
 * (egress-probe.c). Returns the exit status. */
#define CAPSULE_EGRESS_PROBE_ARG "--egress-probe"
int egress_probe(int argc, char **argv);
