/* SPDX-License-Identifier: MIT */
/* File descriptor helpers. Every fd the project opens is O_CLOEXEC from birth. */
#pragma once

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Read everything from fd, refusing more than max bytes: at most max+1 bytes are ever read,
 * whatever size the file claims. On success *ret is NUL-terminated (the NUL is not counted in
 * *ret_size). Returns -E2BIG when the input is longer than max. */
int read_full_fd_bounded(int fd, size_t max, char **ret, size_t *ret_size);

/* Read what the non-blocking fd holds now, at most size bytes: the count read; 0 when it holds
 * nothing more (EAGAIN) or is at its end; a negative errno. EINTR is retried. For draining an
 * event queue (inotify, fanotify) until it is empty. */
ssize_t read_available(int fd, void *buf, size_t size);

/* Write all of buf, retrying on EINTR and short writes. */
int write_all(int fd, const void *buf, size_t len);

/* fsync a directory given by fd. */
int fsync_fd(int fd);

/* An exclusive flock on fd, waited for at most bound_usec (tried every 10 ms): 0, -ETIMEDOUT
 * when another open file description still holds it then, or the negative errno of flock. */
int flock_exclusive_within(int fd, uint64_t bound_usec);

/* Write data to dir_fd/name atomically: a hidden temporary in the same directory, fsync,
 * fchown/fchmod, rename over name, fsync the directory. uid/gid (uid_t)-1 keeps the creator. */
int write_file_atomic_at(int dir_fd, const char *name, const void *data, size_t len, mode_t mode,
                         uid_t uid, gid_t gid);

/* Replace dir_fd/name atomically (a temporary file renamed over it; readers see the old or
 * the new content, never a mix) WITHOUT fsync: after a power loss the file may be missing,
 * old or empty. Only for files the worker rebuilds from its durable store at start-up (the
 * <id>.state.json hints) or that are no more durable than what they describe (a result's
 * changes.json: its staged files are not fsynced either, and apply refuses what is missing or
 * cut short); anything a guarantee rests on uses write_file_atomic_at(). */
int write_file_replace_at(int dir_fd, const char *name, const void *data, size_t len, mode_t mode,
                          uid_t uid, gid_t gid);

/* A hidden temporary file beside dir_fd/name for a replacement written piece by piece (tmp: its
 * name, NAME_MAX + 1 bytes), created 0600, O_WRONLY|O_CLOEXEC: the fd, or a negative errno.
 * tmp_file_commit_at() renames it over name (no fsync, as write_file_replace_at); on any error
 * both remove it. */
int tmp_file_open_at(int dir_fd, const char *name, char *tmp);
/* Only the hidden temporary name for name (tmp: NAME_MAX + 1 bytes), as tmp_file_open_at gives. */
int tmp_file_name(const char *name, char *tmp);
int tmp_file_commit_at(int dir_fd, const char *tmp, const char *name, int r);

/* A DIR stream over dir_fd's directory from its first entry, on a copy of the descriptor: dir_fd
 * stays open. NULL with errno set on failure. */
DIR *opendir_fd(int dir_fd);
static inline void closedirp(DIR **d) {
        if (*d)
                (void) closedir(*d);
}
#define _cleanup_closedir_ _cleanup_(closedirp)

/* Open a directory relative to dir_fd without following a symlink in the last component. */
int open_dir_at(int dir_fd, const char *name);
/* The directory at the relative path below dir_fd, each component opened with
 * O_DIRECTORY|O_NOFOLLOW (no symlink followed anywhere in it, nothing made); "" is dir_fd itself
 * (a new fd). -EINVAL for an absolute path or an empty, "." or ".." component. */
int open_dir_components(int dir_fd, const char *path);

/* Create a fresh private temporary directory under base (for example "/tmp"); returns its
 * path in *ret_path (caller frees) and an O_DIRECTORY fd. */
int mkdtemp_fd(const char *base, const char *prefix, char **ret_path);

/* Is something mounted on dir_fd/name (the root of a mount)? From statx's attribute, asking for
 * no field and without syncing, so a FUSE server behind it is never called. 1 yes, 0 no (or a
 * kernel before 5.8 that cannot tell), negative errno. */
int mount_root_at(int dir_fd, const char *name);

/* Remove everything below dir_fd/name and the entry itself, fd-relative, never following
 * symlinks and never entering a mount point (-EXDEV, what is mounted is left untouched); a
 * missing entry is success. Depth is bounded. */
int rm_rf_at(int dir_fd, const char *name);
/* Everything below the directory open at dir_fd, with rm_rf_at()'s rules (no symlink followed,
 * no mount point entered); the directory itself stays. The first error is returned, the other
 * entries are still removed. */
int rm_rf_children(int dir_fd);

/* Make fd's owner and mode exactly uid:gid mode, calling fchown/fchmod only when they differ
 * (a setgid directory that inherited the right group and bit needs neither, which matters
 * where chmod of a setgid mode is forbidden, as under systemd's RestrictSUIDSGID=). */
int ensure_owner_mode(int fd, uid_t uid, gid_t gid, mode_t mode);

/* Is fd an already-open descriptor? */
bool fd_is_open(int fd);

/* Close every fd >= first except those listed (close_range where available). */
int close_all_fds_except(int first, const int *keep, size_t n_keep);
