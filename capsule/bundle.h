/* SPDX-License-Identifier: MIT */
/* The OCI bundle of one capsule, in a private directory of the worker's scratch space:
 *
 *   <scratch>/<container id>/config.json   the spec (capsule/oci-spec.h), 0600
 *   <scratch>/<container id>/passwd, group the synthetic /etc files, 0644 (read by the job),
 *                                          bound over /etc of an image root
 *   <scratch>/<container id>/root/         the read-only root when rootfs is null: empty but
 *                                          for its etc (capsule/etc-files.h: passwd, group,
 *                                          hosts, nsswitch.conf, host.conf, localtime,
 *                                          timezone)
 *   <scratch>/<container id>/runsc.log     runsc's own log (--log), read for error messages
 *
 * Removed with everything in it after every ending (capsule_bundle_remove). */
#pragma once

#include <stddef.h>

#include "capsule/oci-spec.h"
#include "common/error.h"

typedef struct CapsuleBundle {
        int scratch_fd;
        int dir_fd;
        char *name;     /* the container id, the directory's name below scratch */
        char *path;     /* absolute path of the bundle directory */
        char *log_path; /* absolute path of runsc.log */
} CapsuleBundle;

/* Create the bundle for params (whose root_dir, passwd_path and group_path are filled in
 * here). Refuses an existing directory of that name (EEXIST). Nothing is left on failure. */
int capsule_bundle_create(int scratch_fd, const char *scratch_path, const char *container_id,
                          const CapsuleSpecParams *params, CapsuleBundle **ret, TfwError *e);

/* The last error runsc logged (its "msg" field, or the last line), control characters
 * replaced, into buf; empty when there is none. */
void capsule_bundle_runsc_error(const CapsuleBundle *b, char *buf, size_t n);

/* Remove the directory and everything in it, free b. */
int capsule_bundle_remove(CapsuleBundle *b);
static inline void capsule_bundle_removep(CapsuleBundle **b) {
        if (*b)
                (void) capsule_bundle_remove(*b);
}
