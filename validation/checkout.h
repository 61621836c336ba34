/* SPDX-License-Identifier: MIT */
/* Fetch a verified candidate tree and materialise it (threat 11).
 *
 * Security contract of checkout_materialise(): the manifest must already have passed
 * vmanifest_check_paths() and vmanifest_verify_tree() (the caller's order: refuse before
 * download, verify the tree id before any blob). Every blob is downloaded once, counted
 * against max_bytes while it arrives (not on a declared size) and its git blob id recomputed
 * and compared with the manifest's; a mismatch fails the checkout (code blob_mismatch) before
 * the capsule ever sees it. Files are created below dir_fd only, one component at a time,
 * with O_NOFOLLOW|O_EXCL: directories 0750, files 0640 (0750 for 100755), root-owned with
 * group `group` (the snapshot's rules: the job's group may read, nobody else). Symlinks are
 * created last and only when every target resolves inside the checkout (vmanifest_check_
 * symlinks; code symlink_escape otherwise); a target with a NUL byte, empty or longer than
 * PATH_MAX-1 is refused (code bad_symlink). Nothing on the host ever follows them.
 *
 * Error codes and what the worker does with them (see docs/validation.md):
 *   symlink_escape, bad_symlink         the tree can never be materialised: permanent fail
 *   blob_mismatch, server, http         the server or the network: fail, retry later
 *   checkout_too_large                  above --max-checkout-mb: fail, retry (another worker)
 *   checkout_io                         the worker's disk: fail, retry
 *   unauthorized                        401/403: the worker stops */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "validation/http.h"
#include "validation/job.h"

typedef struct CheckoutSummary {
        uint64_t bytes;                /* of the whole tree */
        uint64_t files, symlinks;      /* of the whole tree */
        uint64_t dirs;                 /* made */
        uint64_t downloaded;           /* blobs downloaded (files and symlinks) */
        uint64_t download_bytes;       /* and their bytes */
        uint64_t kept;                 /* checkout_update(): entries kept from the last checkout */
} CheckoutSummary;

/* The lane's checkout kept between jobs (issue 18 item 3; docs/validation.md, "Checkouts kept
 * between jobs"): lane_fd/checkout becomes m's tree, lane_fd/checkout.index records it. When the
 * index names the same repository, an entry whose path, mode and blob equal the last
 * checkout's, and whose file is still the one written then (size, inode, ctime), is kept
 * without a download (a kept symlink's target is read back and its blob id recomputed);
 * everything else the last checkout had goes, and the rest is downloaded and verified as
 * checkout_materialise() does. The index is removed first and written only after a complete
 * checkout; any failure empties the checkout. Same error codes. */
int checkout_update(Http *http, const char *repo, const VManifest *m, int lane_fd, gid_t group, uint64_t max_bytes,
                    CheckoutSummary *ret, TfwError *e);

int checkout_materialise(Http *http, const char *repo, const VManifest *m, int dir_fd, gid_t group,
                         uint64_t max_bytes, CheckoutSummary *ret, TfwError *e);
