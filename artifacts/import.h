/* SPDX-License-Identifier: MIT */
/* Bounded import of the artifact tar stream a capsule writes (contract section 6 step 3).
 * Design and rationale: docs/artifacts.md.
 *
 * Accepts: a plain tar stream (v7, ustar, pax or GNU, read with libarchive; no compression)
 * of relative regular files and directories, or a stream of zero bytes (no artifacts). Names
 * are UTF-8 without control characters; one leading "./" and one trailing '/' are accepted
 * ("./" itself names the staging directory and is skipped). A directory may appear again, also
 * after its contents; missing parent directories are created.
 * Refuses (the whole import, with a message naming the entry): absolute names, any ".." or
 * other "." component, empty components, hard and symbolic links, devices, FIFOs, sockets, a
 * second regular file of the same name, an entry that changes a path's type (file <-> dir),
 * names over PATH_MAX - 1 bytes, components over NAME_MAX, more than 128 levels, more than
 * max_entries entries (headers plus directories created implicitly), more than max_bytes bytes
 * actually written (a file counts its logical size, sparse holes included; declared sizes are
 * never trusted), more than 1 MiB after the end-of-archive marker.
 * Guarantees: libarchive runs in a forked child that has dropped to unpriv_uid/unpriv_gid with
 * no groups and no capabilities, set no_new_privs and loaded a libseccomp allow-list (read the
 * stream, write to its parent, memory, exit; killed on anything else), holding only the stream
 * fd and a pipe. A second child, root, applies every rule again to what the parser reports and
 * is the only process that creates files: below staging_dir_fd only, component by component
 * through directory fds opened with O_NOFOLLOW, files with O_CREAT|O_EXCL|O_NOFOLLOW. Published
 * inodes are root-owned, group `group`, files 0640, directories 02750, whatever the stream
 * says (modes, owners, times, xattrs and ACLs in the stream are ignored). When the stream
 * breaks a rule or the import fails, the staging directory is emptied: no partial artifacts
 * survive. Nothing is fsynced; the caller syncs before publishing if it wants durability.
 *
 * Requirements on the caller: run as root (CAP_SETUID, CAP_SETGID, CAP_SETPCAP, CAP_KILL;
 * CAP_CHOWN unless staging is setgid `group`, see below); SIGCHLD not set to SIG_IGN (the
 * children are reaped with waitpid). staging_dir_fd must be an empty directory (a non-empty one
 * is refused with ENOTEMPTY, its contents untouched). When it is setgid with group `group`
 * (as results_dir is, 02750), new inodes inherit the group and the setgid bit, so the import
 * needs no chown or chmod at all and works under systemd's RestrictSUIDSGID=; otherwise each
 * inode is chowned and chmodded.
 *
 * The cache profile (limits->cache; contract section 6, the build cache; threat 15): what a job
 * left under its cache paths, imported into a root-private staging directory. The same
 * processes, confinement, bounds and refusals as above, except:
 *   names    every entry is a top-level component `<i>` (one per cache path, a decimal index;
 *            the importer does not care what the top-level names are) or below one; the
 *            top-level entry, when present, must be a directory (a file `0` is refused), and
 *            "." (the staging directory itself) is refused;
 *   types    regular files, directories and symbolic links; hard links, devices, FIFOs and
 *            sockets are refused;
 *   links    the target must be relative, non-empty, at most PATH_MAX - 1 bytes, without NUL,
 *            and, resolved lexically from the link's own directory (each ".." removes one
 *            component, "." and empty components do nothing), must never leave the link's
 *            top-level component: `0/a/l -> ../b` is fine, `0/l -> ../1/x`, `0/l -> ../../x`
 *            and `0/l -> /etc` are refused. A ".." after a named component (`0/l -> d/../x`)
 *            is refused too: `d` may itself be a link, and the kernel resolves `d/..` from
 *            where `d` points, not lexically. With every link so confined, resolving any link
 *            of the import never leaves its top-level directory;
 *   owners   every published inode is owner:group (symlinks with lchown); files 0640, or 0750
 *            when the stream's mode has u+x; directories 0750, never setgid; symlinks as they
 *            are. Nothing is inherited from a setgid staging directory;
 *   times    the mtime of every file, symlink and directory is the stream's, nanoseconds kept
 *            (atimes are left); directory mtimes are applied after all entries (adding
 *            children changes them), deepest first (every directory after all of its
 *            descendants), each opened component by component with O_NOFOLLOW;
 *   bounds   max_bytes counts file bytes plus symlink target bytes; max_entries as above;
 *   caller   CAP_CHOWN and CAP_FOWNER as well (inodes change owner, then get their times);
 *            limits->owner must be set (artifacts_import_start refuses (uid_t) -1);
 *   errors   the same codes, with messages naming "cache entry '...'" (and "cache: ...")
 *            instead of "artifact '...'" (and "artifacts: ..."), so a reader knows which
 *            stream a message is about. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

typedef struct ArtifactLimits {
        uint64_t max_bytes;   /* limits.max_artifact_bytes */
        uint64_t max_entries; /* limits.max_artifact_entries */
        uid_t unpriv_uid;   /* uid the parsing child drops to (e.g. 65534); never 0 */
        gid_t unpriv_gid;   /* never 0 */
        gid_t group;        /* group of the published files (container_gid) */
        bool cache;         /* the build-cache profile (above); false: artifacts */
        uid_t owner;        /* cache profile: owner of every published inode (container_uid);
                             * ignored for artifacts */
        /* Cache profile: the name of the one regular file the top level may hold beside the
         * directories (the list of what the job removed, capsule/protocol.h); NULL: none. */
        const char *top_file;
} ArtifactLimits;

typedef struct ArtifactSummary {
        uint64_t files;
        uint64_t dirs;  /* directories created, explicit or implicit */
        uint64_t bytes; /* sum of the files' logical sizes (cache: plus the links' targets) */
        uint64_t links; /* symbolic links (cache profile only) */
} ArtifactSummary;

/* Import the stream from stream_fd into staging_dir_fd, blocking until the stream ends.
 * Returns 0 and fills *ret, or a negative errno with e filled and staging_dir_fd empty:
 *   -EBADMSG  e->code "artifact_rejected"      the stream broke a rule or is malformed
 *   -E2BIG    e->code "artifact_too_large"     max_bytes or max_entries exceeded
 *   other     e->code "artifact_import_failed" a host-side failure (fork, ENOSPC, the
 *             confinement could not be set up, a non-empty staging directory, ...): a worker
 *             fault, not the job's.
 * The stream fd is neither closed nor moved; see artifacts_import_start about the writer. */
int artifacts_import(int stream_fd, int staging_dir_fd, const ArtifactLimits *limits,
                     ArtifactSummary *ret, TfwError *e);

/* The same, split so a caller can drain other channels (the job log) while the import runs:
 * start forks the importer, which reads the stream and writes the files on its own, and
 * returns a handle at once; finish waits for it, collects the verdict and frees the handle
 * (always, whatever it returns). The importer holds its own copy of stream_fd: the caller
 * should close its copy right after start returns, so that a stream the importer stops
 * reading (a rejection) gives its writer EPIPE at once instead of blocking in a full pipe
 * until the caller closes it. The importer never reads more than the limits justify
 * (max_bytes plus 16 KiB of headers per entry plus the trailer), then rejects. */
typedef struct ArtifactImport ArtifactImport;
int artifacts_import_start(int stream_fd, int staging_dir_fd, const ArtifactLimits *limits,
                           ArtifactImport **ret, TfwError *e);
int artifacts_import_finish(ArtifactImport *imp, ArtifactSummary *ret, TfwError *e);
/* The stream's writer gave up on it (a capsule's init ended it over the bounds): the import ends
 * now, whatever the stream held so far, and finish then fails (the importer died) with the
 * staging directory emptied. The caller has the reason to give. */
void artifacts_import_abort(ArtifactImport *imp);
