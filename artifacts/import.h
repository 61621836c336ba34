/* SPDX-License-Identifier: MIT */
/* Bounded import of the artifact tar stream a capsule writes (contract section 6 step 3).
 *
 * Accepts: a tar stream (read with libarchive) of relative regular files and directories.
 * Refuses (the whole import, with a message naming the entry): absolute names, any ".."
 * component, empty components, hard and symbolic links, devices, FIFOs, sockets, a second
 * entry for a path that changes its type, more than max_entries entries, more than max_bytes
 * bytes actually written (declared sizes are never trusted), names longer than PATH_MAX.
 * Guarantees: the parsing runs in a forked child that has dropped to an unprivileged uid, set
 * no_new_privs and loaded a libseccomp allow-list, holding only the stream fd and the staging
 * directory fd; files are created only below staging_dir_fd, fd-relative, with O_NOFOLLOW;
 * modes are normalised (files 0640, directories 02750, group gid). When the stream breaks a
 * rule, the staging directory is emptied: no partial artifacts survive. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

typedef struct ArtifactLimits {
        uint64_t max_bytes;
        uint64_t max_entries;
        uid_t unpriv_uid;   /* uid the parsing child drops to (e.g. 65534) */
        gid_t unpriv_gid;
        gid_t group;        /* group of the published files (container_gid) */
} ArtifactLimits;

typedef struct ArtifactSummary {
        uint64_t files;
        uint64_t dirs;
        uint64_t bytes;
} ArtifactSummary;

/* Import the stream from stream_fd into staging_dir_fd (an empty directory), blocking until
 * the stream ends. On a rule violation returns a negative errno with e->code
 * "artifact_rejected" (or "artifact_too_large") and leaves staging_dir_fd empty. */
int artifacts_import(int stream_fd, int staging_dir_fd, const ArtifactLimits *limits,
                     ArtifactSummary *ret, TfwError *e);

/* The same, split so a caller can drain other channels (the job log) while the child reads:
 * start forks the confined child (which takes over stream_fd; the caller should close its
 * copy) and returns a handle; finish waits for it and collects the verdict. A stream the
 * child stops reading early is never left blocking the writer: the child drains to EOF or
 * the caller closes. */
typedef struct ArtifactImport ArtifactImport;
int artifacts_import_start(int stream_fd, int staging_dir_fd, const ArtifactLimits *limits,
                           ArtifactImport **ret, TfwError *e);
int artifacts_import_finish(ArtifactImport *imp, ArtifactSummary *ret, TfwError *e);
