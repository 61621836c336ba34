/* SPDX-License-Identifier: MIT */
/* The workspace's file-system mark: a fanotify group with file ids, its events stamped by inode,
 * and a job's view of them. See fan-mark.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "fan-mark.h"
#include "stream.h"

/* The events asked for (see fan-mark.h); FAN_ONDIR is not: directories are the watch's. */
#define FAN_MARK_EVENTS (FAN_OPEN | FAN_MODIFY | FAN_ATTRIB | FAN_MOVE_SELF | FAN_CLOSE_WRITE)
/* The file handle the decoder knows: a 32-bit inode number, then its generation (the kernel's
 * FILEID_INO32_GEN: ext2/3/4, f2fs). */
#define FAN_HANDLE_INO32_GEN 1
#define FAN_EXT_MAGIC 0xEF53
#define FAN_F2FS_MAGIC 0xF2F52010
#define EXPORT_HEADER (8 + 8 + 8)
#define EXPORT_STAMP (8 + 8 + 8)

struct FanMark {
        int fd;
        int mounts_fd; /* /proc/self/mountinfo: POLLPRI when the mount table changed */
        int ws_fd;     /* the workspace (O_PATH): where it is now, for the mounts beneath it */
        char *ws_mounts; /* mountinfo's lines of the mounts at or beneath it, when last looked */
        uint64_t dev;
        fsid_t fsid;
        uint64_t floor;
        StampTable stamps; /* by inode number, at most FAN_MARK_TABLE_MAX */
        pid_t own[FAN_MARK_OWN_MAX];
        size_t n_own;
};

/* The inode number in a handle of the kind the mark was checked for, or false. */
static bool handle_ino(const struct file_handle *h, uint64_t *ino) {
        uint32_t v;
        if (h->handle_type != FAN_HANDLE_INO32_GEN || h->handle_bytes < 8)
                return false;
        memcpy(&v, h->f_handle, 4);
        *ino = v;
        return true;
}

/* Can the file system of dir_fd be marked, its handles read as inode numbers? */
static int mark_fs_check(int dir_fd, FanMark *m, char *why, size_t why_size) {
        struct statfs sf;
        struct stat st;
        union {
                struct file_handle h;
                char buf[sizeof(struct file_handle) + MAX_HANDLE_SZ];
        } fh = {.h.handle_bytes = MAX_HANDLE_SZ};
        int mount_id;
        uint64_t ino;

        if (fstatfs(dir_fd, &sf) < 0 || fstat(dir_fd, &st) < 0) {
                int r = -errno;
                snprintf(why, why_size, "statfs: %s", strerror(-r));
                return r;
        }
        if ((unsigned long) sf.f_type != FAN_EXT_MAGIC && (unsigned long) sf.f_type != FAN_F2FS_MAGIC) {
                snprintf(why, why_size, "its file system (0x%lx) is neither ext2/3/4 nor f2fs, whose file handles "
                         "name inode numbers", (unsigned long) sf.f_type);
                return -EOPNOTSUPP;
        }
        if (name_to_handle_at(dir_fd, "", &fh.h, &mount_id, AT_EMPTY_PATH) < 0 || !handle_ino(&fh.h, &ino) ||
            ino != (uint64_t) st.st_ino) {
                snprintf(why, why_size, "its file handles do not name inode numbers");
                return -EOPNOTSUPP;
        }
        m->dev = st.st_dev;
        m->fsid = sf.f_fsid;
        return 0;
}

static int workspace_mounts(const FanMark *m, char **ret);

int fan_mark_new(int dir_fd, uint64_t start_seq, FanMark **ret, char *why, size_t why_size) {
        _cleanup_free_ FanMark *m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->stamps = STAMP_TABLE_INIT(FAN_MARK_TABLE_MAX);
        int r = mark_fs_check(dir_fd, m, why, why_size);
        if (r < 0)
                return r;
        /* The queue keeps the kernel's bound (fs.fanotify.max_queued_events): past it an
         * overflow, and every file is asked once. */
        m->fd = fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_FID,
                              O_RDONLY | O_LARGEFILE | O_CLOEXEC);
        if (m->fd < 0) {
                r = -errno;
                snprintf(why, why_size, "fanotify_init: %s", strerror(-r));
                return r;
        }
        if (fanotify_mark(m->fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, FAN_MARK_EVENTS, dir_fd, NULL) < 0) {
                r = -errno;
                snprintf(why, why_size, "fanotify_mark: %s", strerror(-r));
                safe_close(m->fd);
                return r;
        }
        /* A mount over a directory of the workspace (or its removal) raises no event, neither to
         * the mark (the files beneath are other inodes, or another file system's) nor to the
         * directories' watches: a walk on the mark's word opens no directory it reported nothing
         * in, and would carry what the mount hides. A change of the mounts at or beneath the
         * workspace is an overflow (fan_mark_read). The daemon's mount namespace, the one its
         * walks run in. */
        m->mounts_fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
        if (m->mounts_fd < 0) {
                r = -errno;
                snprintf(why, why_size, "/proc/self/mountinfo: %s", strerror(-r));
                safe_close(m->fd);
                return r;
        }
        m->ws_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        if (m->ws_fd < 0 || (r = workspace_mounts(m, &m->ws_mounts)) < 0) {
                r = m->ws_fd < 0 ? -errno : r;
                snprintf(why, why_size, "the mounts beneath the workspace: %s", strerror(-r));
                safe_close(m->ws_fd);
                safe_close(m->mounts_fd);
                safe_close(m->fd);
                return r;
        }
        m->floor = start_seq;
        *ret = TAKE_PTR(m);
        return 0;
}

FanMark *fan_mark_free(FanMark *m) {
        if (m) {
                safe_close(m->fd);
                safe_close(m->mounts_fd);
                safe_close(m->ws_fd);
                free(m->ws_mounts);
                stamp_table_done(&m->stamps);
                free(m);
        }
        return NULL;
}

int fan_mark_fd(const FanMark *m) {
        return m->fd;
}

uint64_t fan_mark_floor(const FanMark *m) {
        return m->floor;
}

void fan_mark_forget_upto(FanMark *m, uint64_t seq) {
        /* The floor first in words, the table in deed: a table that cannot shrink keeps its
         * stamps and its floor, which is what it vouched for before. */
        if (seq <= m->floor || stamp_table_forget_upto(&m->stamps, seq) < 0)
                return;
        m->floor = seq;
}

size_t fan_mark_stamps(const FanMark *m) {
        return m->stamps.n_used;
}

void fan_mark_own(FanMark *m, pid_t pid, bool own) {
        for (size_t i = 0; i < m->n_own; i++)
                if (m->own[i] == pid) {
                        if (!own)
                                m->own[i] = m->own[--m->n_own];
                        return;
                }
        if (own && m->n_own < FAN_MARK_OWN_MAX)
                m->own[m->n_own++] = pid; /* past the bound: its opens are stamped, which costs a probe */
}

static bool is_own(const FanMark *m, pid_t pid) {
        for (size_t i = 0; i < m->n_own; i++)
                if (m->own[i] == pid)
                        return true;
        return false;
}

/* Nothing older than now is vouched for: the table starts again. */
static void overflow(FanMark *m, uint64_t *seq) {
        m->floor = ++*seq;
        stamp_table_clear(&m->stamps);
}

static void stamp(FanMark *m, uint64_t ino, bool closed, uint64_t *seq) {
        const Stamp *old = stamp_table_get(&m->stamps, ino);
        uint64_t n = *seq + 1;
        Stamp s = { .key = ino, .seq = n, .closed_seq = closed ? n : old ? old->closed_seq : 0 };
        /* The table full (FAN_MARK_TABLE_MAX), or no memory for the stamp: nothing is vouched
         * for, and the next walk asks every file. */
        if (stamp_table_put(&m->stamps, &s) < 0) {
                overflow(m, seq);
                return;
        }
        *seq = n;
}

/* The inode a file id record at p (len bytes, no alignment assumed) names, on the marked file
 * system: 1 and *ino; 0 another file system's; -1 one the mark cannot name. */
static int record_ino(const FanMark *m, const char *p, size_t len, uint64_t *ino) {
        struct fanotify_event_info_fid fid;
        struct file_handle fh;
        uint32_t v;
        if (len < sizeof(fid) + sizeof(fh))
                return -1;
        memcpy(&fid, p, sizeof(fid));
        memcpy(&fh, p + sizeof(fid), sizeof(fh));
        if (memcmp(&fid.fsid, &m->fsid, sizeof(m->fsid)) != 0)
                return 0;
        if (fh.handle_type != FAN_HANDLE_INO32_GEN || fh.handle_bytes < 8 ||
            fh.handle_bytes > len - sizeof(fid) - sizeof(fh))
                return -1;
        memcpy(&v, p + sizeof(fid) + sizeof(fh), 4);
        *ino = v;
        return 1;
}

/* One event (ev, its metadata copied; p its bytes): its file id records, the inode stamped. */
static void event(FanMark *m, const struct fanotify_event_metadata *ev, const char *p, uint64_t *seq) {
        if (ev->mask & FAN_Q_OVERFLOW) {
                overflow(m, seq);
                return;
        }
        /* The walks' own reads and probes: an open alone, by the daemon or a walk it forked. */
        if ((ev->mask & ~(uint64_t) FAN_OPEN) == 0 && is_own(m, ev->pid))
                return;
        bool closed = ev->mask & FAN_CLOSE_WRITE, stamped = false;
        const char *end = p + ev->event_len;
        for (p += ev->metadata_len; end - p >= (ptrdiff_t) sizeof(struct fanotify_event_info_header);) {
                struct fanotify_event_info_header h;
                uint64_t ino;
                memcpy(&h, p, sizeof(h));
                if (h.len < sizeof(h) || h.len > (size_t) (end - p))
                        break;
                if (h.info_type == FAN_EVENT_INFO_TYPE_FID) {
                        int r = record_ino(m, p, h.len, &ino);
                        if (r == 0)
                                return; /* another file system's: not the workspace's */
                        if (r < 0) {
                                overflow(m, seq); /* an inode it cannot name: nothing is vouched for */
                                return;
                        }
                        stamp(m, ino, closed, seq);
                        stamped = true;
                }
                p += h.len;
        }
        if (!stamped)
                overflow(m, seq); /* an event without a file id on the marked file system */
}

/* The mount point of a mountinfo line (its fifth field), unescaped (the kernel writes space, tab,
 * newline and backslash as \ooo) into out; false for a line it cannot read. */
static bool mount_point(const char *line, char *out, size_t size) {
        const char *p = line;
        for (int field = 0; field < 4; field++) {
                p = strchr(p, ' ');
                if (!p)
                        return false;
                p++;
        }
        size_t n = 0;
        for (; *p && *p != ' ' && *p != '\n'; p++) {
                char c = *p;
                if (c == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' && p[3] >= '0' && p[3] <= '7') {
                        c = (char) ((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
                        p += 3;
                }
                if (n + 1 >= size)
                        return false;
                out[n++] = c;
        }
        out[n] = '\0';
        return true;
}

/* The lines of the daemon's mount table whose mount point is the workspace or beneath it, where
 * the workspace is now (it may have been moved), in *ret (malloc'd); a mount elsewhere (a
 * capsule's, the store's, the host's) hides nothing of the workspace from a walk. */
static int workspace_mounts(const FanMark *m, char **ret) {
        char link[64], ws[PATH_MAX], mp[PATH_MAX];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", m->ws_fd);
        ssize_t len = readlink(link, ws, sizeof(ws) - 1);
        if (len <= 0 || (size_t) len >= sizeof(ws) - 1)
                return len < 0 ? -errno : -ENAMETOOLONG;
        ws[len] = '\0';
        if (ws[0] != '/' || strstr(ws, " (deleted)"))
                return -ENOENT;
        _cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
        if (!f)
                return -errno;
        char *buf = NULL;
        size_t buf_size = 0;
        _cleanup_fclose_ FILE *out = open_memstream(&buf, &buf_size);
        if (!out)
                return -ENOMEM;
        _cleanup_free_ char *line = NULL;
        size_t line_size = 0;
        size_t ws_len = (size_t) len;
        bool root = ws_len == 1;
        while (getline(&line, &line_size, f) > 0) {
                if (!mount_point(line, mp, sizeof(mp))) {
                        fputs(line, out); /* unreadable: counted, so a change in it is seen */
                        continue;
                }
                if (root || (strncmp(mp, ws, ws_len) == 0 && (mp[ws_len] == '\0' || mp[ws_len] == '/')))
                        fputs(line, out);
        }
        int r = ferror(f) || fflush(out) ? -EIO : 0;
        fclose(TAKE_PTR(out));
        if (r < 0) {
                free(buf);
                return r;
        }
        *ret = buf;
        return 0;
}

/* Has the mount table changed since the last look (each look re-arms it)? An error answers yes. */
static bool mounts_changed(const FanMark *m) {
        struct pollfd p = { .fd = m->mounts_fd, .events = POLLPRI };
        int n;
        while ((n = poll(&p, 1, 0)) < 0 && errno == EINTR)
                ;
        return n < 0 || (p.revents & (POLLPRI | POLLERR | POLLNVAL));
}

int fan_mark_read(FanMark *m, uint64_t *seq) {
        char buf[16384] __attribute__((aligned(8)));
        int n_events = 0;
        if (mounts_changed(m)) {
                /* Only a change of the mounts at or beneath the workspace is an overflow: the
                 * capsules' and the host's mounts elsewhere change on every request under some
                 * engines (runc), and would make every walk ask every file. */
                char *now = NULL;
                if (workspace_mounts(m, &now) < 0 || !m->ws_mounts || strcmp(now, m->ws_mounts) != 0)
                        overflow(m, seq);
                free(m->ws_mounts);
                m->ws_mounts = now;
        }
        for (;;) {
                ssize_t n = read_available(m->fd, buf, sizeof(buf));
                if (n <= 0)
                        return n < 0 ? (int) n : n_events;
                /* Records are packed: each copied out before it is read, whatever its alignment. */
                for (size_t off = 0; (size_t) n - off >= FAN_EVENT_METADATA_LEN;) {
                        struct fanotify_event_metadata ev;
                        memcpy(&ev, buf + off, sizeof(ev));
                        if (ev.event_len < FAN_EVENT_METADATA_LEN || ev.event_len > (size_t) n - off ||
                            ev.metadata_len < FAN_EVENT_METADATA_LEN || ev.metadata_len > ev.event_len)
                                break;
                        if (ev.vers != FANOTIFY_METADATA_VERSION)
                                overflow(m, seq);
                        else {
                                if (ev.fd >= 0)
                                        safe_close(ev.fd); /* never with file ids; closed all the same */
                                event(m, &ev, buf + off, seq);
                        }
                        n_events++;
                        off += ev.event_len;
                }
        }
}

size_t fan_mark_export_size(const FanMark *m) {
        return EXPORT_HEADER + m->stamps.n_used * EXPORT_STAMP;
}

void fan_mark_export(const FanMark *m, uint8_t *out) {
        const StampTable *t = &m->stamps;
        size_t n = 0;
        snapshot_stream_put_le(out, m->dev, 8);
        snapshot_stream_put_le(out + 8, m->floor, 8);
        snapshot_stream_put_le(out + 16, t->n_used, 8);
        for (size_t i = 0; i < t->n_slots; i++) {
                if (!t->slots[i].seq)
                        continue;
                uint8_t *q = out + EXPORT_HEADER + n++ * EXPORT_STAMP;
                snapshot_stream_put_le(q, t->slots[i].key, 8);
                snapshot_stream_put_le(q + 8, t->slots[i].seq, 8);
                snapshot_stream_put_le(q + 16, t->slots[i].closed_seq, 8);
        }
}

/* ---- the job's side --------------------------------------------------------------------- */

int fan_view_parse(const uint8_t *p, size_t size, uint64_t max_seq, FanView *v, size_t *used) {
        *v = (FanView) { .stamps = STAMP_TABLE_INIT(FAN_MARK_TABLE_MAX) };
        if (size < EXPORT_HEADER)
                return -EBADMSG;
        uint64_t dev = snapshot_stream_get_le(p, 8), floor = snapshot_stream_get_le(p + 8, 8),
                 n = snapshot_stream_get_le(p + 16, 8);
        if (n > FAN_MARK_TABLE_MAX || size - EXPORT_HEADER < n * EXPORT_STAMP || floor > max_seq || (dev == 0 && n > 0))
                return -EBADMSG;
        /* Room for all n at once: a put below never grows the table, nor finds it full. */
        int r = stamp_table_reserve(&v->stamps, n);
        if (r < 0)
                return r;
        for (uint64_t i = 0; i < n; i++) {
                const uint8_t *q = p + EXPORT_HEADER + i * EXPORT_STAMP;
                Stamp s = { .key = snapshot_stream_get_le(q, 8), .seq = snapshot_stream_get_le(q + 8, 8),
                            .closed_seq = snapshot_stream_get_le(q + 16, 8) };
                /* No stamp from the future, none twice. */
                if (s.seq == 0 || s.seq > max_seq || s.closed_seq > s.seq || stamp_table_get(&v->stamps, s.key)) {
                        fan_view_done(v);
                        return -EBADMSG;
                }
                r = stamp_table_put(&v->stamps, &s);
                if (r < 0) {
                        fan_view_done(v);
                        return r;
                }
        }
        v->dev = dev;
        v->floor = floor;
        *used = EXPORT_HEADER + n * EXPORT_STAMP;
        return 0;
}

void fan_view_done(FanView *v) {
        stamp_table_done(&v->stamps);
        *v = (FanView) {};
}

const Stamp *fan_view_after(const FanView *v, uint64_t ino, uint64_t since) {
        const Stamp *s = stamp_table_get(&v->stamps, ino);
        return s && s->seq > since ? s : NULL;
}

int fan_probe(int dfd, const char *name, const struct stat *st) {
        struct stat now;
        _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &now) < 0)
                return -errno;
        if (!S_ISREG(now.st_mode) || now.st_dev != st->st_dev || now.st_ino != st->st_ino)
                return -ESTALE;
        /* A read lease is refused (EAGAIN) exactly when the file is open for writing, a writable
         * shared mapping included; a break in between comes as SIGURG, ignored (snapshot.c
         * open_for_writing asks the same). Any other refusal vouches for nothing either. */
        if (fcntl(fd, F_SETSIG, SIGURG) < 0 || fcntl(fd, F_SETLEASE, F_RDLCK) < 0)
                return 1;
        (void) fcntl(fd, F_SETLEASE, F_UNLCK);
        return 0;
}
