/* SPDX-License-Identifier: MIT */
/* Writing <workspace>/.tentaflake-worker/worker.json at every start of the daemon (`run` and
 * `drain`; contract section 3, threat 14).
 *
 * The directory is the controller's: the file is written through a fresh O_EXCL|O_NOFOLLOW
 * temporary renamed over the name, so whatever the controller left there (a symlink to a root
 * file, a FIFO, a hard link) is replaced, never opened, followed or written through; the file
 * is root-owned, group container_gid, 0640 (readable, not writable, by the controller). Nothing
 * in the worker ever reads it back. Failing to write it (the controller made the name a
 * directory, say) costs the controller its discovery only: the caller warns and goes on. */
#pragma once

#include "orchestrator/worker.h"

int discovery_publish(Worker *w, const char *config_path, TfwError *e);
