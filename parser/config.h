/* SPDX-License-Identifier: MIT */
/* The worker configuration file (contract section 2), parsed strictly.
 *
 * Accepts: one JSON object with the keys of contract section 2 (runtime.* and limits.* as
 * nested objects "runtime" and "limits"), each of the right type and range.
 * Refuses: unknown keys at any level, duplicate keys, wrong types, values out of range,
 * malformed sizes/paths/names, and inconsistent combinations (memory_swap below memory,
 * default timeout above the maximum, image with the runsc driver or missing for docker/podman,
 * rootfs with docker/podman, state or results directory inside the workspace, signing_key
 * without signing_identity, a cache with docker/podman or with paths that are not relative,
 * normalised, distinct and disjoint, or that name .tentaflake-worker or artifacts; a network
 * allowlist with docker/podman, empty, or with an entry parser/egress-allow.h refuses or given
 * twice; container_uid/gid or notify.uid/gid among the egress proxies' ids, CONFIG_EGRESS_ID_*).
 * Every message names the key as a dotted path ("limits.memory", "cache.paths[2]").
 * Guarantees: on success every field is set (defaults filled in) and consistent. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "parser/egress-allow.h"
#include "parser/request.h"

#define CONFIG_MAX_BYTES (1U << 20)
#define CONFIG_NAME_MAX 48
#define CONFIG_PATH_MAX 1024          /* bytes of any configured path */
/* The NixOS module mounts each store path of a toolchain's closure (nixos/logic.nix,
 * maxSystemMounts): a compiler, python and git come to a few hundred. */
#define CONFIG_MAX_SYSTEM_MOUNTS 1024
#define CONFIG_IDENTITY_MAX 256       /* a system mount's IDENTITY, signing_identity */
/* runtime.warm_seconds (contract section 2). */
#define CONFIG_DEFAULT_WARM_SECONDS 60
#define CONFIG_WARM_SECONDS_MAX 3600

/* cache (contract sections 2 and 6): the build cache of local-reversible jobs. */
#define CONFIG_CACHE_PATHS_MAX 16
#define CONFIG_CACHE_PATH_MAX 1024    /* bytes of one cache path: 16 of them and /work/ fit the
                                       * capsule's pipe buffer and PATH_MAX (capsule/protocol.h) */
#define CONFIG_DEFAULT_CACHE_MAX_BYTES (UINT64_C(2) << 30)
#define CONFIG_DEFAULT_CACHE_MAX_ENTRIES 200000
/* limits.max_watches: the workspace's watch holds at most this many inotify watches (and never
 * more than a quarter of the host's fs.inotify.max_user_watches: orchestrator/watch.c). */
#define CONFIG_DEFAULT_MAX_WATCHES 16384
#define CONFIG_MAX_WATCHES_MAX 1048576

/* runsc --platform when the config names none (contract section 2): systrap, which runsc has
 * had since 2023; ptrace stays accepted for a runsc without it. */
#define CONFIG_DEFAULT_PLATFORM "systrap"
#define CONFIG_DEFAULT_OPEN_FILES 1024
/* Each housekeeping call to docker/podman (inspect, rm, kill, version), unless serve's
 * --engine-timeout-secs says otherwise. */
#define CONFIG_DEFAULT_ENGINE_TIMEOUT_SECONDS 60

/* Where a worker's configuration conventionally lives: WORKER_CONFIG_DIR/NAME.json (what
 * `--name NAME` means on the command line, and the file the units of systemd/ give the worker
 * of instance NAME). */
#define WORKER_CONFIG_DIR "/etc/tentaflake/workers"

typedef enum RuntimeDriver {
        DRIVER_RUNSC,
        DRIVER_DOCKER,
        DRIVER_PODMAN,
        DRIVER_RUNC,
        _DRIVER_MAX,
} RuntimeDriver;

typedef struct SystemMount {
        char *host;      /* absolute, normalised */
        char *sandbox;   /* absolute, normalised; equals host when not given */
        char *identity;  /* NULL when not given */
} SystemMount;

typedef struct ConfigLimits {
        uint64_t max_request_bytes;
        uint64_t max_argv;
        uint64_t max_argv_bytes;
        uint64_t default_timeout_seconds;
        uint64_t max_timeout_seconds;
        uint64_t max_snapshot_bytes;
        uint64_t max_snapshot_entries;
        uint64_t memory;
        uint64_t memory_swap;
        uint64_t cpus_milli;     /* "2.0" -> 2000 */
        char cpus[16];           /* the decimal string as written */
        uint64_t pids;
        uint64_t workspace_tmpfs;
        uint64_t tmp_tmpfs;
        uint64_t max_log_bytes;
        uint64_t max_artifact_bytes;
        uint64_t max_artifact_entries;
        uint64_t max_changes_bytes;   /* a job's changeset: its files' bytes and entries */
        uint64_t max_changes_entries;
        uint64_t max_store_bytes; /* the generation store's tmpfs (docs/snapshot.md) */
        uint64_t max_watches;    /* inotify watches of the workspace's watch (0: none) */
        /* Not configuration keys (contract section 2): the inbox plane keeps the defaults,
         * serve sets them from --open-files and --file-size-mb. */
        uint64_t open_files;     /* RLIMIT_NOFILE inside the capsule */
        uint64_t file_size;      /* RLIMIT_FSIZE inside the capsule; 0: none */
} ConfigLimits;

/* The build cache: what a local-reversible job leaves under these workspace-relative paths
 * is shown to the next one there. */
typedef struct ConfigCache {
        char **paths;          /* NULL-terminated; NULL when the key is absent (no cache) */
        size_t n_paths;        /* 0 when absent */
        uint64_t max_bytes;    /* default 2g (CONFIG_DEFAULT_CACHE_MAX_BYTES) */
        uint64_t max_entries;  /* default 200000 (CONFIG_DEFAULT_CACHE_MAX_ENTRIES) */
} ConfigCache;

/* network (contract sections 2 and 6): egress through the worker's proxy (docs/egress.md). */
#define CONFIG_NETWORK_ALLOW_MAX 64
#define CONFIG_NETWORK_ENTRY_MAX (EGRESS_NAME_MAX + 2 + 6) /* "*." + name + ":" + port */
#define CONFIG_DEFAULT_MAX_UPLOAD_BYTES (UINT64_C(1) << 20)
#define CONFIG_DEFAULT_MAX_DOWNLOAD_BYTES (UINT64_C(2) << 30)
/* The egress proxies' identities (docs/egress.md, "Who the proxy runs as"): each proxy runs as a
 * uid of this range, with the gid of the same number, that no other process has while it runs
 * (capsule/egress-id.h). So no identity the configuration names may fall in it: container_uid,
 * container_gid, notify.uid and notify.gid are refused there. 0x7F000000..0x7F00FFFF: in what
 * systemd's UIDS-GIDS.md leaves unused (1879048192..2147483647), below 2^31 (devpts and setfsuid
 * take ids as signed), clear of adduser's, DynamicUser='s, homed's and nspawn's ranges and of
 * useradd's subordinate ids (100000..600100000). */
#define CONFIG_EGRESS_ID_FIRST UINT32_C(2130706432)
#define CONFIG_EGRESS_ID_COUNT UINT32_C(65536)
#define CONFIG_EGRESS_ID_LAST (CONFIG_EGRESS_ID_FIRST + CONFIG_EGRESS_ID_COUNT - 1)

static inline bool config_id_is_egress(uint64_t id) {
        return id >= CONFIG_EGRESS_ID_FIRST && id <= CONFIG_EGRESS_ID_LAST;
}

/* The host id the root of a runc capsule's user namespace maps to (uid and gid alike;
 * docs/capsule-engines.md): right after the egress proxies' range, in the same unused
 * stretch, owning nothing on the host but the empty root directories the worker gives its
 * capsules. No identity the configuration names may be it. */
#define CONFIG_CAPSULE_ROOT_ID (CONFIG_EGRESS_ID_LAST + 1)

/* Does the driver run the OCI bundle itself, on the worker's side (runsc, runc), rather than
 * through an engine's daemon? */
static inline bool config_driver_runs_bundle(RuntimeDriver driver) {
        return driver == DRIVER_RUNSC || driver == DRIVER_RUNC;
}

typedef struct ConfigNetwork {
        char **allow;              /* NULL-terminated entries as written; NULL: no network */
        EgressAllow *rules;        /* allow[i] parsed (parser/egress-allow.h) */
        size_t n_allow;            /* 0 when absent */
        uint64_t max_upload_bytes;   /* per job, default 1m */
        uint64_t max_download_bytes; /* per job, default 2g */
} ConfigNetwork;

/* The operator's hook (notify.*): run, as uid:gid (never root, never the controller), when a
 * request starts waiting for approval (orchestrator/notify.h). */
typedef struct ConfigNotify {
        char **command;            /* argv, command[0] absolute; NULL: no hook */
        uid_t uid;                 /* default 65534; never an egress proxy's (CONFIG_EGRESS_ID_*) */
        gid_t gid;                 /* default 65534; likewise */
        unsigned timeout_seconds;  /* default 10, at most 300 */
} ConfigNotify;

#define CONFIG_NOTIFY_ARGV_MAX 32
#define CONFIG_NOTIFY_DEFAULT_ID 65534
#define CONFIG_NOTIFY_DEFAULT_TIMEOUT 10
#define CONFIG_NOTIFY_TIMEOUT_MAX 300

typedef struct Config {
        int version;
        char *name;
        char *workspace;
        char *state_dir;
        char *results_dir;
        uid_t container_uid;
        gid_t container_gid;
        unsigned concurrency;
        unsigned retention_days;
        unsigned audit_generations;
        unsigned pending_ttl_hours;

        RuntimeDriver driver;
        char *runsc;             /* NULL: look up "runsc" on PATH when used */
        char *runc;              /* driver runc: NULL: "runc" on PATH; or crun's path */
        char *platform;          /* "systrap" (CONFIG_DEFAULT_PLATFORM), "ptrace" or "kvm" */
        char *rootfs;            /* NULL: host system mounts */
        SystemMount *system_mounts;
        size_t n_system_mounts;
        char *image;             /* NULL for runsc */
        unsigned warm_seconds;   /* keep one capsule started ahead this long after the last
                                  * request; 0: off (runsc driver only; the engines start cold) */

        ConfigLimits limits;
        uint64_t engine_timeout_seconds; /* not a key: CONFIG_DEFAULT_ENGINE_TIMEOUT_SECONDS */

        char *signing_key;       /* NULL when unset */
        char *signing_identity;

        ConfigCache cache;       /* paths NULL: no cache (runsc driver only) */
        ConfigNetwork network;   /* allow NULL: no network (runsc driver only) */
        ConfigNotify notify;
} Config;

/* Parse a config from its bytes / from an fd (at most CONFIG_MAX_BYTES). */
int config_parse_buffer(const char *buf, size_t len, Config **ret, TfwError *e);
int config_parse_fd(int fd, Config **ret, TfwError *e);
/* Open path (no symlink in the last component is required: the operator owns it), check it is
 * a regular file, parse it. Messages are prefixed "config 'PATH': ". */
int config_load(const char *path, Config **ret, TfwError *e);

Config *config_free(Config *c);
static inline void config_freep(Config **c) {
        config_free(*c);
}
#define _cleanup_config_ _cleanup_(config_freep)

/* Why p (len bytes, as JSON gave them) is not a cache path, NULL when it is one: relative to
 * the workspace and already normalised, each component a file name of 1..NAME_MAX bytes
 * without control characters, at most CONFIG_CACHE_PATH_MAX bytes in all. What cache.paths
 * refuses beyond that (reserved names, overlaps) is the config parser's alone. */
const char *config_cache_path_problem(const char *p, size_t len);

/* The request limits this config imposes. */
void config_request_policy(const Config *c, RequestPolicy *ret);

const char *driver_to_string(RuntimeDriver d);

/* The generation store's tmpfs: limits.max_store_bytes, plus, when there is a cache, room for
 * (2 * concurrency + 1) caches of cache.max_bytes: the current one, a take-in per running job,
 * and one older cache per running job that its lane's links still hold; UINT64_MAX if that
 * overflows. */
uint64_t config_store_tmpfs_bytes(const Config *c);
/* concurrency's range: 1..CONFIG_CONCURRENCY_MAX, so the store's lanes (concurrency + 1) fit
 * snapshot/gen-store.h's GEN_STORE_LANES_MAX (orchestrator/store-tmpfs.c asserts it). */
#define CONFIG_CONCURRENCY_MAX 64
/* The files of a cache's own beside its entries and its paths' roots: its directory (v/<n> or
 * in-<job>), data/, meta, oids, pin and the take-in's list of deletions (snapshot/build-cache.c). */
#define CONFIG_STORE_CACHE_OWN_INODES 6
/* Inodes the store's tmpfs needs for the cache (docs/config.md, "Sizing the store"):
 * (2 * concurrency + 1) * (cache.max_entries + its paths + CONFIG_STORE_CACHE_OWN_INODES) + 64 for
 * the cache's own files, + (concurrency + 1) lanes * the directories of the paths' mount points
 * (a directory per component); 0 without a cache. UINT64_MAX if that overflows. */
uint64_t config_store_cache_inodes(const Config *c);
/* All the inodes of the store's tmpfs (docs/config.md, "Sizing the store"): per lane
 * (concurrency + 1) a generation of limits.max_snapshot_entries and 8 of the lane's own, 1024 for
 * the store's own files, and config_store_cache_inodes(). UINT64_MAX if that overflows. */
uint64_t config_store_tmpfs_inodes(const Config *c);

/* The inbox worker's runsc root, fixed by its name: /run/tentaflake-worker-<name>/runsc
 * (orchestrator/dirs.h says why). No configured directory may overlap it. */
#define CONFIG_RUNTIME_DIR_PREFIX "/run/tentaflake-worker-"
int config_runsc_root(const Config *c, char *buf, size_t size);
bool config_name_is_valid(const char *name);
