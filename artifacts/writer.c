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
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "artifacts/import-internal.h"
#include "common/fd-util.h"
#include "common/macro.h"

#define FILE_MODE 0640
#define DIR_MODE 02750

const char *artifact_name_escape(const char *name, size_t len, char *buf, size_t size) {
        size_t o = 0;

        if (size == 0)
                return "";
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) name[i];
                char tmp[8];
                int n;

                if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'')
                        n = snprintf(tmp, sizeof(tmp), "%c", c);
                else
                        n = snprintf(tmp, sizeof(tmp), "\\x%02x", c);
                if (o + (size_t) n + 4 > size || o > 200) {
                        memcpy(buf + o, "...", MIN((size_t) 3, size - 1 - o));
                        o += MIN((size_t) 3, size - 1 - o);
                        break;
                }
                memcpy(buf + o, tmp, (size_t) n);
                o += (size_t) n;
        }
        buf[o] = 0;
        return buf;
}

static int reject(TfwError *e, const char *name, size_t len, const char *fmt, ...) _printf_(4, 5);
static int reject(TfwError *e, const char *name, size_t len, const char *fmt, ...) {
        char esc[256], why[512];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        return tfw_error(e, EBADMSG, ARTIFACT_CODE_REJECTED, "artifact '%s': %s",
                         artifact_name_escape(name, len, esc, sizeof(esc)), why);
}

static int protocol_error(TfwError *e, const char *what) {
        return tfw_error(e, EBADMSG, ARTIFACT_CODE_REJECTED,
                         "the tar parser broke the frame protocol: %s", what);
}

static int host_error(TfwError *e, int err, const char *name, const char *what) {
        char esc[256];
        return tfw_error(e, err, ARTIFACT_CODE_FAILED, "artifact '%s': %s: %s",
                         artifact_name_escape(name, strlen(name), esc, sizeof(esc)), what,
                         strerror(err < 0 ? -err : err));
}

/* Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. Names end up in
 * JSON (attestations, listings), which only carries valid UTF-8. */
static bool utf8_is_valid(const unsigned char *s, size_t len) {
        for (size_t i = 0; i < len;) {
                unsigned char c = s[i];
                size_t n;
                uint32_t cp;

                if (c < 0x80) {
                        i++;
                        continue;
                } else if ((c & 0xe0) == 0xc0) {
                        n = 2;
                        cp = c & 0x1f;
                } else if ((c & 0xf0) == 0xe0) {
                        n = 3;
                        cp = c & 0x0f;
                } else if ((c & 0xf8) == 0xf0) {
                        n = 4;
                        cp = c & 0x07;
                } else
                        return false;
                if (len - i < n)
                        return false;
                for (size_t k = 1; k < n; k++) {
                        if ((s[i + k] & 0xc0) != 0x80)
                                return false;
                        cp = (cp << 6) | (s[i + k] & 0x3f);
                }
                if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
                    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                        return false;
                i += n;
        }
        return true;
}

/* Contract: accepts a relative name of valid UTF-8 without control characters, at most
 * ARTIFACT_NAME_MAX bytes and ARTIFACT_DEPTH_MAX components of at most NAME_MAX bytes, with
 * one optional leading "./" (bsdtar writes it) and one optional trailing '/'. Refuses
 * absolute names, empty components ("a//b"), "." and ".." anywhere else. Guarantees: out
 * holds the name without the "./" and the '/', made only of real components, or "" for
 * "." / "./" (the staging directory itself). */
int artifact_name_normalise(const char *name, size_t len, char *out, bool *ret_trailing_slash,
                            TfwError *e) {
        const char *p = name;
        size_t n = len, depth = 0;
        bool trailing = false;

        if (len == 0)
                return reject(e, name, len, "empty name");
        if (len > ARTIFACT_NAME_MAX)
                return reject(e, name, MIN(len, (size_t) 64),
                              "name longer than %d bytes", ARTIFACT_NAME_MAX);
        if (memchr(name, 0, len))
                return reject(e, name, len, "NUL byte in the name");
        for (size_t i = 0; i < len; i++)
                if ((unsigned char) name[i] < 0x20 || name[i] == 0x7f)
                        return reject(e, name, len, "control character in the name");
        if (!utf8_is_valid((const unsigned char *) name, len))
                return reject(e, name, len, "name is not valid UTF-8");
        if (name[0] == '/')
                return reject(e, name, len, "absolute name");

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
                        return reject(e, name, len, "empty component");
        }
        for (size_t i = 0; i < n;) {
                const char *c = p + i;
                const char *slash = memchr(c, '/', n - i);
                size_t m = slash ? (size_t) (slash - c) : n - i;

                if (m == 0)
                        return reject(e, name, len, "empty component");
                if (m == 1 && c[0] == '.')
                        return reject(e, name, len, "'.' component");
                if (m == 2 && c[0] == '.' && c[1] == '.')
                        return reject(e, name, len, "'..' component");
                if (m > NAME_MAX)
                        return reject(e, name, len, "component longer than %d bytes", NAME_MAX);
                if (++depth > ARTIFACT_DEPTH_MAX)
                        return reject(e, name, len, "more than %u levels deep",
                                      ARTIFACT_DEPTH_MAX);
                i += m + 1;
                if (slash && i == n)
                        return reject(e, name, len, "empty component");
        }
        memcpy(out, p, n);
        out[n] = 0;
        *ret_trailing_slash = trailing;
        return 0;
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
                .file_fd = -EBADF,
                .cache_fd = -EBADF,
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
        return 0;
}

void artifact_writer_done(ArtifactWriter *w) {
        w->file_fd = safe_close(w->file_fd);
        w->cache_fd = safe_close(w->cache_fd);
        w->cache_path[0] = 0;
}

static int normalise_inode(ArtifactWriter *w, int fd, bool dir, const char *name, TfwError *e) {
        if (!w->inherit && fchown(fd, w->owner, w->group) < 0)
                return host_error(e, -errno, name, "chown");
        if (dir && (!w->inherit || w->fix_file_mode) && w->group != (gid_t) -1 &&
            fchmod(fd, DIR_MODE) < 0)
                return host_error(e, -errno, name, "chmod");
        if (!dir && w->fix_file_mode && fchmod(fd, FILE_MODE) < 0)
                return host_error(e, -errno, name, "chmod");
        return 0;
}

static int count_entry(ArtifactWriter *w, const char *name, size_t len, TfwError *e) {
        char esc[256];

        if (w->entries >= w->max_entries)
                return tfw_error(e, E2BIG, ARTIFACT_CODE_TOO_LARGE,
                                 "artifacts: more than %" PRIu64 " entries (at '%s')",
                                 w->max_entries, artifact_name_escape(name, len, esc, sizeof(esc)));
        w->entries++;
        return 0;
}

/* Contract: opens the directory path (normalised, relative, non-empty) below the staging
 * directory one component at a time with O_DIRECTORY|O_NOFOLLOW, creating missing components
 * (each counted as an entry, except the last when it is the entry being imported). Refuses a
 * component that exists and is not a directory (a type change). Returns an owned fd. */
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
                                return host_error(e, -errno, path, "mkdir");
                        fd = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (fd < 0)
                                return host_error(e, -errno, path, "open");
                        w->dirs++;
                        int r = normalise_inode(w, fd, true, path, e);
                        if (r < 0) {
                                safe_close(fd);
                                return r;
                        }
                } else if (fd < 0 && (errno == ENOTDIR || errno == ELOOP))
                        return reject(e, path, i + m,
                                      "changes type (a regular file, then a directory)");
                else if (fd < 0)
                        return host_error(e, -errno, path, "open");
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

/* Contract: accepts a regular file (not a hard link) or a directory with a name
 * artifact_name_normalise accepts. Refuses links, devices, FIFOs, sockets, a file where
 * anything already exists (a duplicate, or a directory turning into a file), a directory where
 * a file exists, more than max_entries entries. Guarantees: the inode is created below
 * root_fd only, through directory fds opened with O_NOFOLLOW, the file with
 * O_CREAT|O_EXCL|O_NOFOLLOW, and published as owner:group 0640 / 02750. */
int artifact_writer_begin(ArtifactWriter *w, uint32_t filetype, uint32_t flags, const char *name,
                          size_t len, TfwError *e) {
        bool trailing;
        int r;

        if (w->done || w->in_entry)
                return protocol_error(e, "entry out of order");
        r = count_entry(w, name, MIN(len, (size_t) 64), e);
        if (r < 0)
                return r;
        r = artifact_name_normalise(name, len, w->name, &trailing, e);
        if (r < 0)
                return r;
        if (flags & ENTRY_FLAG_HARDLINK)
                return reject(e, name, len, "hard link (only regular files and directories)");
        if ((flags & ENTRY_FLAG_SYMLINK) || (filetype != AE_IFREG && filetype != AE_IFDIR))
                return reject(e, name, len, "%s (only regular files and directories)",
                              (flags & ENTRY_FLAG_SYMLINK) ? "symbolic link" : type_name(filetype));

        if (filetype == AE_IFDIR) {
                if (w->name[0] != 0) {
                        int fd = open_dir_path(w, w->name, true, e);
                        if (fd < 0)
                                return fd;
                        safe_close(fd);
                }
                w->in_entry = true;
                w->entry_is_file = false;
                return 0;
        }

        if (trailing)
                return reject(e, name, len, "a regular file named as a directory");
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

        int fd = openat(dfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, FILE_MODE);
        if (fd < 0) {
                struct stat st;
                if (errno != EEXIST)
                        return host_error(e, -errno, w->name, "create");
                if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISDIR(st.st_mode))
                        return reject(e, name, len,
                                      "changes type (a directory, then a regular file)");
                return reject(e, name, len, "duplicate entry");
        }
        w->file_fd = fd;
        w->file_end = 0;
        w->files++;
        w->in_entry = true;
        w->entry_is_file = true;
        return normalise_inode(w, fd, false, w->name, e);
}

static int add_bytes(ArtifactWriter *w, uint64_t grow, TfwError *e) {
        char esc[256];

        if (grow > w->max_bytes - w->bytes)
                return tfw_error(e, E2BIG, ARTIFACT_CODE_TOO_LARGE,
                                 "artifacts: more than %" PRIu64 " bytes (at '%s')", w->max_bytes,
                                 artifact_name_escape(w->name, strlen(w->name), esc, sizeof(esc)));
        w->bytes += grow;
        return 0;
}

/* Contract: accepts 1.. bytes for the current regular file at an offset at or past what was
 * written so far (a gap is a sparse hole). Counts the growth of the file's logical size,
 * holes included, against max_bytes before writing anything. */
int artifact_writer_data(ArtifactWriter *w, uint64_t offset, const void *buf, size_t len,
                         TfwError *e) {
        if (!w->in_entry || !w->entry_is_file || len == 0)
                return protocol_error(e, "data outside a regular file");
        if (offset < w->file_end)
                return reject(e, w->name, strlen(w->name), "data out of order");
        if (offset > UINT64_MAX - len)
                return reject(e, w->name, strlen(w->name), "offset out of range");
        int r = add_bytes(w, offset + len - w->file_end, e);
        if (r < 0)
                return r;
        const uint8_t *p = buf;
        while (len > 0) {
                ssize_t k = pwrite(w->file_fd, p, len, (off_t) offset);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return host_error(e, k < 0 ? -errno : -EIO, w->name, "write");
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
                        return reject(e, w->name, strlen(w->name),
                                      "size smaller than its data");
                if (size > w->file_end) {
                        /* A trailing hole: the logical size counts, as a reader sees it. */
                        int r = add_bytes(w, size - w->file_end, e);
                        if (r < 0)
                                return r;
                        if (ftruncate(w->file_fd, (off_t) size) < 0)
                                return host_error(e, -errno, w->name, "truncate");
                }
                w->file_fd = safe_close(w->file_fd);
        }
        w->in_entry = false;
        return 0;
}

static int fail_frame(const uint8_t *p, size_t len, TfwError *e) {
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
                return tfw_error(e, E2BIG, ARTIFACT_CODE_TOO_LARGE, "artifacts: %s", msg);
        case FRAME_FAIL_SETUP:
                return tfw_error(e, EPERM, ARTIFACT_CODE_FAILED, "artifact parser: %s", msg);
        default:
                return tfw_error(e, EBADMSG, ARTIFACT_CODE_REJECTED, "artifacts: %s", msg);
        }
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
                        /* Nothing an artifact keeps; still a frame the parser must get right. */
                        if (n < FRAME_ATTR_FIXED || n - FRAME_ATTR_FIXED > ARTIFACT_LINK_MAX + 1)
                                return protocol_error(e, "bad attribute frame");
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
                        if (n != 0 || w->in_entry)
                                return protocol_error(e, "end of stream inside an entry");
                        w->done = true;
                        break;
                case FRAME_FAIL:
                        return fail_frame(p, n, e);
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
