/* SPDX-License-Identifier: MIT */
/* The root side of the artifact import: the rules, and the only code that creates files.
 * Everything it is told comes from the parser, which a hostile stream may have taken over, so
 * every frame is checked here as if it were the raw attacker input it may be. */
#define _GNU_SOURCE
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "artifacts/import-internal.h"
#include "common/fd-util.h"
#include "common/path-util.h"
#include "common/macro.h"
#include "common/term-escape.h"

#define FILE_MODE 0640
#define DIR_MODE 02750
/* The cache profile: the owner (the job's uid) reads, writes and runs; the group reads. */
#define CACHE_FILE_MODE 0640
#define CACHE_EXEC_MODE 0750
#define CACHE_DIR_MODE 0750

_Static_assert(sizeof(time_t) >= sizeof(int64_t), "an ATTR mtime fits a time_t");

/* cache: the profile, which names the stream in the message ("artifact '...'" or "cache entry
 * '...'"). */
static int reject(TfwError *e, bool cache, const char *name, size_t len, const char *fmt, ...)
        _printf_(5, 6);
static int reject(TfwError *e, bool cache, const char *name, size_t len, const char *fmt, ...) {
        char esc[256], why[512];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        return tfw_error(e, EBADMSG, ARTIFACT_CODE_REJECTED, "%s '%s': %s",
                         import_entry_word(cache),
                         term_escape(name, len, TERM_ESCAPE_NAME | TERM_ESCAPE_ASCII, esc, sizeof(esc)), why);
}

static int protocol_error(TfwError *e, const char *what) {
        return tfw_error(e, EBADMSG, ARTIFACT_CODE_REJECTED,
                         "the tar parser broke the frame protocol: %s", what);
}

static int host_error(TfwError *e, bool cache, int err, const char *name, const char *what) {
        char esc[256];
        return tfw_error(e, err, ARTIFACT_CODE_FAILED, "%s '%s': %s: %s", import_entry_word(cache),
                         term_escape(name, strlen(name), TERM_ESCAPE_NAME | TERM_ESCAPE_ASCII, esc, sizeof(esc)), what,
                         strerror(err < 0 ? -err : err));
}

/* Contract: accepts a relative name of valid UTF-8 without control characters, at most
 * ARTIFACT_NAME_MAX bytes and ARTIFACT_DEPTH_MAX components of at most NAME_MAX bytes, with
 * one optional leading "./" (bsdtar writes it) and one optional trailing '/'. Refuses
 * absolute names, empty components ("a//b"), "." and ".." anywhere else. Guarantees: out
 * holds the name without the "./" and the '/', made only of real components, or "" for
 * "." / "./" (the staging directory itself). */
static int name_normalise(bool cache, const char *name, size_t len, char *out,
                          bool *ret_trailing_slash, TfwError *e) {
        const char *p = name;
        size_t n = len, depth = 0;
        bool trailing = false;

        if (len == 0)
                return reject(e, cache, name, len, "empty name");
        if (len > ARTIFACT_NAME_MAX)
                return reject(e, cache, name, MIN(len, (size_t) 64),
                              "name longer than %d bytes", ARTIFACT_NAME_MAX);
        if (memchr(name, 0, len))
                return reject(e, cache, name, len, "NUL byte in the name");
        if (!utf8_is_valid((const unsigned char *) name, len))
                return reject(e, cache, name, len, "name is not valid UTF-8");
        /* C0, DEL, C1 and the bidirectional controls: a name that would act on, or reorder,
         * the terminal of whoever reads the artifact list (docs/threats.md row 18). */
        if (!utf8_is_plain_text(name, len))
                return reject(e, cache, name, len, "control character in the name");
        if (name[0] == '/')
                return reject(e, cache, name, len, "absolute name");

        if (n == 1 && p[0] == '.') {
                n = 0;
                trailing = true;
        } else if (n >= 2 && p[0] == '.' && p[1] == '/') {
                p += 2;
                n -= 2;
                trailing = n == 0;
        }
        if (n > 0 && p[n - 1] == '/') {
                n--;
                trailing = true;
                if (n == 0)
                        return reject(e, cache, name, len, "empty component");
        }
        for (size_t i = 0; i < n;) {
                const char *c = p + i;
                const char *slash = memchr(c, '/', n - i);
                size_t m = slash ? (size_t) (slash - c) : n - i;

                if (m == 0)
                        return reject(e, cache, name, len, "empty component");
                if (m == 1 && c[0] == '.')
                        return reject(e, cache, name, len, "'.' component");
                if (m == 2 && c[0] == '.' && c[1] == '.')
                        return reject(e, cache, name, len, "'..' component");
                if (m > NAME_MAX)
                        return reject(e, cache, name, len, "component longer than %d bytes",
                                      NAME_MAX);
                if (++depth > ARTIFACT_DEPTH_MAX)
                        return reject(e, cache, name, len, "more than %u levels deep",
                                      ARTIFACT_DEPTH_MAX);
                i += m + 1;
                if (slash && i == n)
                        return reject(e, cache, name, len, "empty component");
        }
        memcpy(out, p, n);
        out[n] = 0;
        *ret_trailing_slash = trailing;
        return 0;
}

int artifact_name_normalise(const char *name, size_t len, char *out, bool *ret_trailing_slash,
                            TfwError *e) {
        return name_normalise(false, name, len, out, ret_trailing_slash, e);
}

int artifact_writer_init(ArtifactWriter *w, int root_fd, const ArtifactLimits *limits,
                         uid_t owner, gid_t group, TfwError *e) {
        struct stat st;

        *w = (ArtifactWriter) {
                .root_fd = root_fd,
                .max_bytes = limits->max_bytes,
                .max_entries = limits->max_entries,
                .owner = owner,
                .group = group,
                .cache = limits->cache,
                .file_fd = -EBADF,
                .cache_fd = -EBADF,
                .top_file = limits->cache ? limits->top_file : NULL,
        };
        if (fstat(root_fd, &st) < 0)
                return tfw_error(e, errno, ARTIFACT_CODE_FAILED, "staging directory: %m");
        if (!S_ISDIR(st.st_mode))
                return tfw_error(e, ENOTDIR, ARTIFACT_CODE_FAILED,
                                 "staging directory: not a directory");
        /* Below a setgid directory of the right group every new inode gets that group and
         * every new directory the setgid bit: nothing to chown or chmod, which also keeps the
         * import working under systemd's RestrictSUIDSGID=. */
        w->inherit = group == (gid_t) -1 || ((st.st_mode & S_ISGID) && st.st_gid == group);
        mode_t um = umask(0);
        umask(um);
        w->fix_file_mode = (um & FILE_MODE) != 0;
        if (owner != (uid_t) -1 && owner != geteuid())
                w->inherit = false;
        /* The cache profile sets owner and mode on every inode: the modes differ from what a
         * setgid staging directory would pass on. */
        if (w->cache)
                w->inherit = false;
        return 0;
}

void artifact_writer_done(ArtifactWriter *w) {
        w->file_fd = safe_close(w->file_fd);
        w->cache_fd = safe_close(w->cache_fd);
        w->cache_path[0] = 0;
        free(w->dir_times);
        w->dir_times = NULL;
        w->n_dir_times = w->cap_dir_times = 0;
}

/* Cache profile: owner:group and exactly mode, whatever the umask and the staging directory. */
static int cache_normalise(ArtifactWriter *w, int fd, mode_t mode, const char *name,
                           TfwError *e) {
        if ((w->owner != (uid_t) -1 || w->group != (gid_t) -1) &&
            fchown(fd, w->owner, w->group) < 0)
                return host_error(e, true, -errno, name, "chown");
        if (fchmod(fd, mode) < 0)
                return host_error(e, true, -errno, name, "chmod");
        return 0;
}

static int normalise_inode(ArtifactWriter *w, int fd, bool dir, const char *name, TfwError *e) {
        if (w->cache) {
                mode_t mode = (w->perm & S_IXUSR) ? CACHE_EXEC_MODE : CACHE_FILE_MODE;
                return cache_normalise(w, fd, dir ? CACHE_DIR_MODE : mode, name, e);
        }
        if (!w->inherit && fchown(fd, w->owner, w->group) < 0)
                return host_error(e, false, -errno, name, "chown");
        if (dir && (!w->inherit || w->fix_file_mode) && w->group != (gid_t) -1 &&
            fchmod(fd, DIR_MODE) < 0)
                return host_error(e, false, -errno, name, "chmod");
        if (!dir && w->fix_file_mode && fchmod(fd, FILE_MODE) < 0)
                return host_error(e, false, -errno, name, "chmod");
        return 0;
}

static int count_entry(ArtifactWriter *w, const char *name, size_t len, TfwError *e) {
        char esc[256];

        if (w->entries >= w->max_entries)
                return tfw_error(e, E2BIG, ARTIFACT_CODE_TOO_LARGE,
                                 "%s: more than %" PRIu64 " entries (at '%s')",
                                 import_stream_word(w->cache), w->max_entries,
                                 term_escape(name, len, TERM_ESCAPE_NAME | TERM_ESCAPE_ASCII, esc, sizeof(esc)));
        w->entries++;
        return 0;
}

/* Contract: opens the directory path (normalised, relative, non-empty) below the staging
 * directory one component at a time with O_DIRECTORY|O_NOFOLLOW, creating missing components
 * (each counted as an entry, except the last when it is the entry being imported). Refuses a
 * component that exists and is not a directory (a type change; a symbolic link is one too).
 * Returns an owned fd. */
static int open_dir_path(ArtifactWriter *w, const char *path, bool explicit_last, TfwError *e) {
        _cleanup_close_ int cur = -EBADF;
        char comp[NAME_MAX + 1];
        size_t len = strlen(path);

        for (size_t i = 0; i < len;) {
                const char *slash = memchr(path + i, '/', len - i);
                size_t m = slash ? (size_t) (slash - (path + i)) : len - i;
                bool last = !slash;
                int dfd = cur >= 0 ? cur : w->root_fd;

                memcpy(comp, path + i, m);
                comp[m] = 0;
                int fd = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 && errno == ENOENT) {
                        if (!(last && explicit_last)) {
                                int r = count_entry(w, path, i + m, e);
                                if (r < 0)
                                        return r;
                        }
                        if (mkdirat(dfd, comp, 0750) < 0)
                                return host_error(e, w->cache, -errno, path, "mkdir");
                        fd = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (fd < 0)
                                return host_error(e, w->cache, -errno, path, "open");
                        w->dirs++;
                        int r = normalise_inode(w, fd, true, path, e);
                        if (r < 0) {
                                safe_close(fd);
                                return r;
                        }
                } else if (fd < 0 && (errno == ENOTDIR || errno == ELOOP)) {
                        struct stat st;
                        bool link = w->cache &&
                                    fstatat(dfd, comp, &st, AT_SYMLINK_NOFOLLOW) >= 0 &&
                                    S_ISLNK(st.st_mode);
                        return reject(e, w->cache, path, i + m,
                                      "changes type (a %s, then a directory)",
                                      link ? "symbolic link" : "regular file");
                } else if (fd < 0)
                        return host_error(e, w->cache, -errno, path, "open");
                safe_close(cur);
                cur = fd;
                i += m + 1;
        }
        return TAKE_FD(cur);
}

/* The directory that will hold a file; the last one is cached, since tar streams list a
 * directory's files together. */
static int parent_dir(ArtifactWriter *w, const char *parent, TfwError *e) {
        if (parent[0] == 0)
                return w->root_fd;
        if (w->cache_fd >= 0 && streq(w->cache_path, parent))
                return w->cache_fd;
        w->cache_fd = safe_close(w->cache_fd);
        w->cache_path[0] = 0;
        int fd = open_dir_path(w, parent, false, e);
        if (fd < 0)
                return fd;
        w->cache_fd = fd;
        strcpy(w->cache_path, parent);
        return fd;
}

static const char *type_name(uint32_t filetype) {
        switch (filetype) {
        case AE_IFREG:
                return "regular file";
        case AE_IFDIR:
                return "directory";
        case AE_IFLNK:
                return "symbolic link";
        case AE_IFCHR:
                return "character device";
        case AE_IFBLK:
                return "block device";
        case AE_IFIFO:
                return "FIFO";
        case AE_IFSOCK:
                return "socket";
        default:
                return "entry of unknown type";
        }
}

static int add_bytes(ArtifactWriter *w, uint64_t grow, TfwError *e) {
        char esc[256];

        if (grow > w->max_bytes - w->bytes)
                return tfw_error(e, E2BIG, ARTIFACT_CODE_TOO_LARGE,
                                 "%s: more than %" PRIu64 " bytes (at '%s')",
                                 import_stream_word(w->cache), w->max_bytes,
                                 term_escape(w->name, strlen(w->name), TERM_ESCAPE_NAME | TERM_ESCAPE_ASCII, esc, sizeof(esc)));
        w->bytes += grow;
        return 0;
}

int artifact_writer_attr(ArtifactWriter *w, int64_t mtime_sec, uint32_t mtime_nsec, uint32_t perm,
                         const char *target, size_t target_len, TfwError *e) {
        if (target_len > ARTIFACT_LINK_MAX + 1)
                return protocol_error(e, "oversized link target");
        if (!w->cache)
                return 0;
        if (w->done || w->in_entry)
                return protocol_error(e, "attributes out of order");
        if (w->have_attr)
                return protocol_error(e, "two attribute frames for one entry");
        w->mtime_sec = mtime_sec;
        w->mtime_nsec = mtime_nsec;
        w->perm = perm;
        if (target_len > 0)
                memcpy(w->target, target, target_len);
        w->target[target_len] = 0;
        w->target_len = target_len;
        w->have_attr = true;
        return 0;
}

/* Contract (cache profile): accepts a symbolic link target that is relative, non-empty, at most
 * ARTIFACT_LINK_MAX bytes, without NUL, and that, resolved lexically from the link's directory,
 * never leaves the link's top-level component; a ".." may only come before every named
 * component. Guarantees: since every directory above an entry is a real directory (open_dir_path
 * refuses links on the way), the kernel resolves the leading ".." as this check does, and
 * every named component after them is a directory or a link of this import, itself confined:
 * following any link of the import never leaves its top-level directory. */
static int check_link_target(ArtifactWriter *w, const char *name, size_t len, TfwError *e) {
        const char *t = w->target;
        size_t n = w->target_len;
        char esc[256];
        long depth = -1; /* of the link's directory below its top-level component */
        bool named = false;

        if (n == 0)
                return reject(e, true, name, len, "symbolic link with an empty target");
        if (n > ARTIFACT_LINK_MAX)
                return reject(e, true, name, len, "link target longer than %d bytes",
                              ARTIFACT_LINK_MAX);
        if (memchr(t, 0, n))
                return reject(e, true, name, len, "NUL byte in the link target");
        term_escape(t, n, TERM_ESCAPE_NAME | TERM_ESCAPE_ASCII, esc, sizeof(esc));
        if (t[0] == '/')
                return reject(e, true, name, len, "absolute link target '%s'", esc);
        for (const char *c = w->name; *c; c++)
                depth += *c == '/';
        for (size_t i = 0; i < n;) {
                const char *slash = memchr(t + i, '/', n - i);
                size_t m = slash ? (size_t) (slash - (t + i)) : n - i;
                const char *c = t + i;

                i += m + 1;
                if (m == 0 || (m == 1 && c[0] == '.'))
                        continue;
                if (m == 2 && c[0] == '.' && c[1] == '.') {
                        if (named)
                                return reject(e, true, name, len,
                                              "link target '%s' has '..' after a name (which "
                                              "may be a link)",
                                              esc);
                        if (--depth < 0)
                                return reject(e, true, name, len,
                                              "link target '%s' leaves its top-level directory",
                                              esc);
                        continue;
                }
                named = true;
                depth++;
        }
        return 0;
}

/* The profile's rules on an entry's type (name already normalised into w->name). */
static int check_type(ArtifactWriter *w, uint32_t filetype, uint32_t flags, const char *name,
                      size_t len, TfwError *e) {
        if (!w->cache) {
                if (flags & ENTRY_FLAG_HARDLINK)
                        return reject(e, false, name, len,
                                      "hard link (only regular files and directories)");
                if ((flags & ENTRY_FLAG_SYMLINK) || (filetype != AE_IFREG && filetype != AE_IFDIR))
                        return reject(e, false, name, len,
                                      "%s (only regular files and directories)",
                                      (flags & ENTRY_FLAG_SYMLINK) ? "symbolic link"
                                                                   : type_name(filetype));
                return 0;
        }
        if (flags & ENTRY_FLAG_HARDLINK)
                return reject(e, true, name, len, "hard link (only regular files, directories and symbolic links)");
        if (filetype != AE_IFREG && filetype != AE_IFDIR && filetype != AE_IFLNK)
                return reject(e, true, name, len,
                              "%s (only regular files, directories and symbolic links)",
                              type_name(filetype));
        if ((flags & ENTRY_FLAG_SYMLINK) && filetype != AE_IFLNK)
                return reject(e, true, name, len, "a %s with a link target", type_name(filetype));
        if (filetype != AE_IFLNK && w->target_len > 0)
                return protocol_error(e, "a link target for an entry that is not a link");
        if (w->name[0] == 0)
                return reject(e, true, name, len,
                              "the staging directory itself (cache entries are below a top-level "
                              "directory)");
        if (!strchr(w->name, '/') && filetype != AE_IFDIR && !(filetype == AE_IFREG && w->top_file && streq(w->name, w->top_file)))
                return reject(e, true, name, len,
                              "a top-level %s (a top-level cache entry is a directory)",
                              type_name(filetype));
        if (w->mtime_nsec >= 1000000000u)
                return reject(e, true, name, len, "mtime nanoseconds out of range");
        return filetype == AE_IFLNK ? check_link_target(w, name, len, e) : 0;
}

/* Cache profile: remember the mtime of the directory open at fd, applied once every entry is
 * in (artifact_writer_finish). At most one record per directory entry: <= max_entries. */
static int record_dir_time(ArtifactWriter *w, int fd, TfwError *e) {
        struct stat st;

        if (fstat(fd, &st) < 0)
                return host_error(e, true, -errno, w->name, "stat");
        if (w->n_dir_times >= w->max_entries)
                return host_error(e, true, -E2BIG, w->name, "directory times");
        if (w->n_dir_times == w->cap_dir_times) {
                size_t cap = w->cap_dir_times ? 2 * w->cap_dir_times : 64;
                if (cap > w->max_entries)
                        cap = (size_t) w->max_entries;
                DirTime *p = reallocarray(w->dir_times, cap, sizeof(*p));
                if (!p)
                        return host_error(e, true, -ENOMEM, w->name, "directory times");
                w->dir_times = p;
                w->cap_dir_times = cap;
        }
        w->dir_times[w->n_dir_times++] = (DirTime) {
                .dev = st.st_dev,
                .ino = st.st_ino,
                .seq = w->entries,
                .sec = w->mtime_sec,
                .nsec = w->mtime_nsec,
        };
        return 0;
}

static int begin_dir(ArtifactWriter *w, TfwError *e) {
        if (w->name[0] != 0) {
                int fd = open_dir_path(w, w->name, true, e);
                if (fd < 0)
                        return fd;
                int r = w->cache ? record_dir_time(w, fd, e) : 0;
                safe_close(fd);
                if (r < 0)
                        return r;
        }
        w->in_entry = true;
        w->entry_is_file = false;
        return 0;
}

/* EEXIST at leaf: which rule the entry broke. */
static int reject_existing(ArtifactWriter *w, int dfd, const char *leaf, uint32_t filetype,
                           const char *name, size_t len, TfwError *e) {
        struct stat st;

        if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return reject(e, w->cache, name, len, "duplicate entry");
        if (S_ISDIR(st.st_mode))
                return reject(e, w->cache, name, len, "changes type (a directory, then a %s)",
                              type_name(filetype));
        if (S_ISLNK(st.st_mode) && filetype != AE_IFLNK)
                return reject(e, w->cache, name, len, "changes type (a symbolic link, then a %s)",
                              type_name(filetype));
        if (S_ISREG(st.st_mode) && filetype != AE_IFREG)
                return reject(e, w->cache, name, len, "changes type (a regular file, then a %s)",
                              type_name(filetype));
        return reject(e, w->cache, name, len, "duplicate entry");
}

static int begin_file(ArtifactWriter *w, int dfd, const char *leaf, const char *name, size_t len,
                      TfwError *e) {
        mode_t mode = FILE_MODE;

        if (w->cache && (w->perm & S_IXUSR))
                mode = CACHE_EXEC_MODE;
        int fd = openat(dfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0) {
                if (errno != EEXIST)
                        return host_error(e, w->cache, -errno, w->name, "create");
                return reject_existing(w, dfd, leaf, AE_IFREG, name, len, e);
        }
        w->file_fd = fd;
        w->file_end = 0;
        w->files++;
        w->in_entry = true;
        w->entry_is_file = true;
        return normalise_inode(w, fd, false, w->name, e);
}

static struct timespec *entry_times(const ArtifactWriter *w, struct timespec ts[2]) {
        ts[0] = (struct timespec) { .tv_nsec = UTIME_OMIT };
        ts[1] = (struct timespec) { .tv_sec = (time_t) w->mtime_sec, .tv_nsec = w->mtime_nsec };
        return ts;
}

/* Cache profile. Contract: a symbolic link (its target checked by check_link_target) is
 * created with symlinkat in its parent's fd (opened component by component with O_NOFOLLOW),
 * never over anything; it gets owner:group with lchown and the stream's mtime, both without
 * following it. Its target's bytes count against max_bytes. */
static int begin_link(ArtifactWriter *w, int dfd, const char *leaf, const char *name, size_t len,
                      TfwError *e) {
        struct timespec ts[2];

        int r = add_bytes(w, w->target_len, e);
        if (r < 0)
                return r;
        if (symlinkat(w->target, dfd, leaf) < 0) {
                if (errno != EEXIST)
                        return host_error(e, true, -errno, w->name, "symlink");
                return reject_existing(w, dfd, leaf, AE_IFLNK, name, len, e);
        }
        w->links++;
        if ((w->owner != (uid_t) -1 || w->group != (gid_t) -1) &&
            fchownat(dfd, leaf, w->owner, w->group, AT_SYMLINK_NOFOLLOW) < 0)
                return host_error(e, true, -errno, w->name, "chown");
        if (utimensat(dfd, leaf, entry_times(w, ts), AT_SYMLINK_NOFOLLOW) < 0)
                return host_error(e, true, -errno, w->name, "set times");
        w->in_entry = true;
        w->entry_is_file = false;
        return 0;
}

/* Contract: accepts a regular file (not a hard link) or a directory with a name
 * artifact_name_normalise accepts, and in the cache profile a symbolic link (check_type).
 * Refuses links (artifacts), devices, FIFOs, sockets, a file or link where anything already
 * exists (a duplicate, or a type change), a directory where something else exists, more than
 * max_entries entries. Guarantees: the inode is created below root_fd only, through directory
 * fds opened with O_NOFOLLOW, the file with O_CREAT|O_EXCL|O_NOFOLLOW, and published as
 * owner:group 0640 / 02750 (cache profile: import.h). */
int artifact_writer_begin(ArtifactWriter *w, uint32_t filetype, uint32_t flags, const char *name,
                          size_t len, TfwError *e) {
        bool trailing;
        int r;

        if (w->done || w->in_entry)
                return protocol_error(e, "entry out of order");
        if (w->cache) {
                if (!w->have_attr)
                        return protocol_error(e, "entry without attributes");
                w->have_attr = false; /* consumed: the fields now describe this entry */
        }
        r = count_entry(w, name, MIN(len, (size_t) 64), e);
        if (r < 0)
                return r;
        r = name_normalise(w->cache, name, len, w->name, &trailing, e);
        if (r < 0)
                return r;
        r = check_type(w, filetype, flags, name, len, e);
        if (r < 0)
                return r;
        if (filetype == AE_IFDIR)
                return begin_dir(w, e);

        if (trailing)
                return reject(e, w->cache, name, len, "a %s named as a directory",
                              type_name(filetype));
        char *slash = strrchr(w->name, '/');
        const char *leaf = w->name;
        int dfd;
        if (slash) {
                *slash = 0;
                dfd = parent_dir(w, w->name, e);
                *slash = '/';
                leaf = slash + 1;
        } else
                dfd = w->root_fd;
        if (dfd < 0)
                return dfd;
        if (filetype == AE_IFLNK)
                return begin_link(w, dfd, leaf, name, len, e);
        return begin_file(w, dfd, leaf, name, len, e);
}

/* Contract: accepts 1.. bytes for the current regular file at an offset at or past what was
 * written so far (a gap is a sparse hole). Counts the growth of the file's logical size,
 * holes included, against max_bytes before writing anything. */
int artifact_writer_data(ArtifactWriter *w, uint64_t offset, const void *buf, size_t len,
                         TfwError *e) {
        if (!w->in_entry || !w->entry_is_file || len == 0)
                return protocol_error(e, "data outside a regular file");
        if (offset < w->file_end)
                return reject(e, w->cache, w->name, strlen(w->name), "data out of order");
        if (offset > UINT64_MAX - len)
                return reject(e, w->cache, w->name, strlen(w->name), "offset out of range");
        int r = add_bytes(w, offset + len - w->file_end, e);
        if (r < 0)
                return r;
        const uint8_t *p = buf;
        while (len > 0) {
                ssize_t k = pwrite(w->file_fd, p, len, (off_t) offset);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return host_error(e, w->cache, k < 0 ? -errno : -EIO, w->name, "write");
                p += k;
                len -= (size_t) k;
                offset += (uint64_t) k;
        }
        w->file_end = offset;
        return 0;
}

int artifact_writer_end(ArtifactWriter *w, uint64_t size, TfwError *e) {
        if (!w->in_entry)
                return protocol_error(e, "end outside an entry");
        if (w->entry_is_file) {
                if (size < w->file_end)
                        return reject(e, w->cache, w->name, strlen(w->name),
                                      "size smaller than its data");
                if (size > w->file_end) {
                        /* A trailing hole: the logical size counts, as a reader sees it. */
                        int r = add_bytes(w, size - w->file_end, e);
                        if (r < 0)
                                return r;
                        if (ftruncate(w->file_fd, (off_t) size) < 0)
                                return host_error(e, w->cache, -errno, w->name, "truncate");
                }
                /* Last, after every write and the truncate, which would each change it. */
                struct timespec ts[2];
                if (w->cache && futimens(w->file_fd, entry_times(w, ts)) < 0)
                        return host_error(e, true, -errno, w->name, "set times");
                w->file_fd = safe_close(w->file_fd);
        }
        w->in_entry = false;
        return 0;
}

static int dir_time_cmp(const void *a, const void *b) {
        const DirTime *x = a, *y = b;
        if (x->dev != y->dev)
                return x->dev < y->dev ? -1 : 1;
        if (x->ino != y->ino)
                return x->ino < y->ino ? -1 : 1;
        return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int dir_key_cmp(const void *a, const void *b) {
        const DirTime *x = a, *y = b;
        if (x->dev != y->dev)
                return x->dev < y->dev ? -1 : 1;
        return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static int set_dir_time(ArtifactWriter *w, int fd, const char *path, TfwError *e) {
        struct stat st;

        if (fstat(fd, &st) < 0)
                return host_error(e, true, -errno, path, "stat");
        const DirTime key = { .dev = st.st_dev, .ino = st.st_ino };
        const DirTime *t = bsearch(&key, w->dir_times, w->n_dir_times, sizeof(key), dir_key_cmp);
        if (!t)
                return 0; /* created implicitly: no time in the stream */
        const struct timespec ts[2] = {
                { .tv_nsec = UTIME_OMIT },
                { .tv_sec = (time_t) t->sec, .tv_nsec = t->nsec },
        };
        if (futimens(fd, ts) < 0)
                return host_error(e, true, -errno, path, "set times");
        return 0;
}

/* Contract: below dir_fd (a directory of the import, depth levels below the staging directory,
 * named path[0..plen)), opens every subdirectory relative to its parent's fd with
 * O_DIRECTORY|O_NOFOLLOW (a symbolic link is skipped, never followed), applies the times of
 * its subdirectories after their own subtrees: every directory after all of its descendants,
 * the deepest first. Depth is bounded as names are. */
static int times_walk(ArtifactWriter *w, int dir_fd, char *path, size_t plen, unsigned depth,
                      TfwError *e) {
        _cleanup_closedir_ DIR *d = opendir_fd(dir_fd);
        struct dirent *de;

        if (!d)
                return host_error(e, true, -errno, plen ? path : ".", "open");
        while ((errno = 0, de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
                        continue;
                _cleanup_close_ int fd = openat(dirfd(d), de->d_name,
                                                O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                int err = fd < 0 ? errno : 0;
                if (err == ENOTDIR || err == ELOOP)
                        continue; /* DT_UNKNOWN: not a directory after all */
                size_t n = strlen(de->d_name), len = plen + (plen > 0) + n;
                if (len > ARTIFACT_NAME_MAX || depth + 1 > ARTIFACT_DEPTH_MAX)
                        return host_error(e, true, -ELOOP, path, "deeper than any entry");
                if (plen > 0)
                        path[plen] = '/';
                memcpy(path + len - n, de->d_name, n + 1);
                if (fd < 0)
                        return host_error(e, true, -err, path, "open");
                int r = times_walk(w, fd, path, len, depth + 1, e);
                if (r >= 0)
                        r = set_dir_time(w, fd, path, e);
                if (r < 0)
                        return r;
                path[plen] = 0;
        }
        if (errno != 0)
                return host_error(e, true, -errno, plen ? path : ".", "readdir");
        return 0;
}

int artifact_writer_finish(ArtifactWriter *w, TfwError *e) {
        if (w->done || w->in_entry)
                return protocol_error(e, "end of stream inside an entry");
        if (w->cache && w->have_attr)
                return protocol_error(e, "attributes without an entry");
        if (w->cache && w->n_dir_times > 0) {
                char path[ARTIFACT_NAME_MAX + 1] = "";
                size_t n = 0;

                /* Keep the last time of each directory (a repeated entry overrides). */
                qsort(w->dir_times, w->n_dir_times, sizeof(DirTime), dir_time_cmp);
                for (size_t i = 0; i < w->n_dir_times; i++)
                        if (i + 1 == w->n_dir_times ||
                            dir_key_cmp(&w->dir_times[i], &w->dir_times[i + 1]) != 0)
                                w->dir_times[n++] = w->dir_times[i];
                w->n_dir_times = n;
                int r = times_walk(w, w->root_fd, path, 0, 0, e);
                if (r < 0)
                        return r;
        }
        w->done = true;
        return 0;
}

static int fail_frame(const ArtifactWriter *w, const uint8_t *p, size_t len, TfwError *e) {
        uint32_t kind;
        char msg[FRAME_MESSAGE_MAX + 1];

        if (len < sizeof(kind))
                return protocol_error(e, "short failure frame");
        memcpy(&kind, p, sizeof(kind));
        len = MIN(len - sizeof(kind), (size_t) FRAME_MESSAGE_MAX);
        for (size_t i = 0; i < len; i++) {
                unsigned char c = p[sizeof(kind) + i];
                msg[i] = c >= 0x20 && c < 0x7f ? (char) c : '?';
        }
        msg[len] = 0;
        switch (kind) {
        case FRAME_FAIL_TOO_LARGE:
                return tfw_error(e, E2BIG, ARTIFACT_CODE_TOO_LARGE, "%s: %s",
                                 import_stream_word(w->cache), msg);
        case FRAME_FAIL_SETUP:
                return tfw_error(e, EPERM, ARTIFACT_CODE_FAILED, "%s parser: %s",
                                 import_kind_word(w->cache), msg);
        default:
                return tfw_error(e, EBADMSG, ARTIFACT_CODE_REJECTED, "%s: %s",
                                 import_stream_word(w->cache), msg);
        }
}

static int attr_frame(ArtifactWriter *w, const uint8_t *p, size_t n, TfwError *e) {
        int64_t sec;
        uint32_t nsec, perm;

        if (n < FRAME_ATTR_FIXED || n - FRAME_ATTR_FIXED > ARTIFACT_LINK_MAX + 1)
                return protocol_error(e, "bad attribute frame");
        memcpy(&sec, p, sizeof(sec));
        memcpy(&nsec, p + 8, sizeof(nsec));
        memcpy(&perm, p + 12, sizeof(perm));
        return artifact_writer_attr(w, sec, nsec, perm, (const char *) p + FRAME_ATTR_FIXED,
                                    n - FRAME_ATTR_FIXED, e);
}

int artifact_writer_feed(ArtifactWriter *w, const uint8_t *buf, size_t len, size_t *ret_consumed,
                         TfwError *e) {
        size_t pos = 0;
        int r = 0;

        while (r >= 0 && pos < len) {
                uint32_t h[2];
                uint64_t u64;

                if (w->done)
                        return protocol_error(e, "frame after the end");
                if (len - pos < FRAME_HEADER_SIZE)
                        break;
                memcpy(h, buf + pos, sizeof(h));
                if (h[1] > FRAME_PAYLOAD_MAX)
                        return protocol_error(e, "oversized frame");
                if (len - pos - FRAME_HEADER_SIZE < h[1])
                        break;
                const uint8_t *p = buf + pos + FRAME_HEADER_SIZE;
                size_t n = h[1];
                pos += FRAME_HEADER_SIZE + n;

                switch (h[0]) {
                case FRAME_ATTR:
                        r = attr_frame(w, p, n, e);
                        break;
                case FRAME_ENTRY:
                        if (n < 2 * sizeof(uint32_t))
                                return protocol_error(e, "short entry frame");
                        uint32_t head[2];
                        memcpy(head, p, sizeof(head));
                        r = artifact_writer_begin(w, head[0], head[1], (const char *) p + 8, n - 8,
                                                  e);
                        break;
                case FRAME_DATA:
                        if (n <= sizeof(u64))
                                return protocol_error(e, "short data frame");
                        memcpy(&u64, p, sizeof(u64));
                        r = artifact_writer_data(w, u64, p + 8, n - 8, e);
                        break;
                case FRAME_END:
                        if (n != sizeof(u64))
                                return protocol_error(e, "bad end frame");
                        memcpy(&u64, p, sizeof(u64));
                        r = artifact_writer_end(w, u64, e);
                        break;
                case FRAME_DONE:
                        if (n != 0)
                                return protocol_error(e, "end of stream inside an entry");
                        r = artifact_writer_finish(w, e);
                        break;
                case FRAME_FAIL:
                        return fail_frame(w, p, n, e);
                default:
                        return protocol_error(e, "unknown frame");
                }
        }
        if (r < 0)
                return r;
        *ret_consumed = pos;
        return 0;
}

int artifact_dir_empty(int dir_fd) {
        int r = 0;

        /* Removing entries while reading the directory may make readdir skip some: repeat
         * until a pass finds nothing (each pass removes what it sees). */
        for (unsigned pass = 0; pass < 8; pass++) {
                _cleanup_closedir_ DIR *d = opendir_fd(dir_fd);
                if (!d)
                        return -errno;
                struct dirent *de;
                unsigned seen = 0;
                r = 0;
                while ((de = readdir(d))) {
                        if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                                continue;
                        seen++;
                        int k = rm_rf_at(dir_fd, de->d_name);
                        if (k < 0)
                                r = k;
                }
                if (seen == 0)
                        return 0;
                if (r < 0)
                        return r;
        }
        return -ENOTEMPTY;
}
