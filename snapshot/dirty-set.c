/* SPDX-License-Identifier: MIT */
/* The workspace's dirty set: the daemon's stamps of inotify events, and a job's view of them.
 * See dirty-set.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "common/stamp-table.h"
#include "dirty-set.h"
#include "fan-mark.h"
#include "stream.h"

/* "TFWDIRT" and a format version; then instance, seq, overflow seq, count; then the stamps; then
 * the file system mark's section (fan-mark.h: its device, 0 for none, its floor, its stamps). */
static const uint8_t view_magic[8] = { 'T', 'F', 'W', 'D', 'I', 'R', 'T', '2' };
#define VIEW_HEADER (8 + 8 + 8 + 8 + 8)
#define VIEW_STAMP (4 + 8)

struct DirtySet {
        int fd;
        uint64_t instance, seq, overflow_seq;
        StampTable stamps;   /* by wd, at most DIRTY_SET_TABLE_MAX */
        DirtyBudget *budget; /* a MAP_SHARED page */
        FanMark *mark;       /* the workspace's file system's mark, or NULL */
        /* The sequence numbers of the last keep_views views, the newest first (n_views of them):
         * where the walks to come most likely start from (dirty_set_keep_views). */
        uint64_t views[DIRTY_SET_VIEWS_MAX];
        unsigned n_views, keep_views;
        size_t keep_stamps;
};

int dirty_set_new(uint32_t max_watches, DirtySet **ret) {
        _cleanup_free_ DirtySet *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->fd = -EBADF;
        s->stamps = STAMP_TABLE_INIT(DIRTY_SET_TABLE_MAX);
        /* Shared with every process forked from here on: the walks count what they add. */
        void *page = mmap(NULL, sizeof(DirtyBudget), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (page == MAP_FAILED)
                return -errno;
        s->budget = page;
        s->budget->max = max_watches;
        /* 0 names "walked without a watch" in an index: never an instance's id. */
        do
                if (getrandom(&s->instance, sizeof(s->instance), 0) != (ssize_t) sizeof(s->instance)) {
                        int r = -errno ?: -EIO;
                        munmap(s->budget, sizeof(DirtyBudget));
                        return r;
                }
        while (s->instance == 0);
        s->fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        if (s->fd < 0) {
                int r = -errno;
                munmap(s->budget, sizeof(DirtyBudget));
                return r;
        }
        s->seq = 1;
        *ret = TAKE_PTR(s);
        return 0;
}

DirtySet *dirty_set_free(DirtySet *s) {
        if (s) {
                safe_close(s->fd);
                if (s->budget)
                        munmap(s->budget, sizeof(DirtyBudget));
                fan_mark_free(s->mark);
                stamp_table_done(&s->stamps);
                free(s);
        }
        return NULL;
}

int dirty_set_fd(const DirtySet *s) {
        return s->fd;
}

int dirty_set_mark(DirtySet *s, int dir_fd, char *why, size_t why_size) {
        if (s->mark)
                return 0;
        /* Nothing before the mark is vouched for: its floor is the next number. */
        return fan_mark_new(dir_fd, ++s->seq, &s->mark, why, why_size);
}

void dirty_set_keep_views(DirtySet *s, unsigned views, size_t stamps) {
        s->keep_views = MIN(views, (unsigned) DIRTY_SET_VIEWS_MAX);
        s->keep_stamps = stamps;
        s->n_views = 0;
}

/* The view about to be made is one more start; once keep_views of them are known and the mark
 * holds more than keep_stamps, it forgets what only a walk older than the oldest of them would
 * count (fan_mark_forget_upto: such a walk is then not vouched for). */
static void view_made(DirtySet *s) {
        if (!s->mark || s->keep_views == 0)
                return;
        unsigned kept = MIN(s->n_views, s->keep_views - 1);
        memmove(s->views + 1, s->views, kept * sizeof(s->views[0]));
        s->views[0] = s->seq;
        s->n_views = kept + 1;
        if (s->n_views == s->keep_views && fan_mark_stamps(s->mark) > s->keep_stamps)
                fan_mark_forget_upto(s->mark, s->views[s->n_views - 1]);
}

int dirty_set_mark_fd(const DirtySet *s) {
        return s->mark ? fan_mark_fd(s->mark) : -EBADF;
}

void dirty_set_own(DirtySet *s, pid_t pid, bool own) {
        if (s && s->mark)
                fan_mark_own(s->mark, pid, own);
}

DirtyBudget *dirty_set_budget(const DirtySet *s) {
        return s->budget;
}

/* One watch fewer held (never below none: a recount may have been lower already). */
static void budget_release(DirtyBudget *b) {
        uint32_t h = atomic_load(&b->held);
        while (h > 0 && !atomic_compare_exchange_weak(&b->held, &h, h - 1))
                ;
}

/* The watches an instance holds, as its fdinfo lists them ("inotify wd:%x ino:%lx sdev:%x ...",
 * sdev in the kernel's encoding), sorted by device and inode. */
typedef struct HeldWatch {
        uint64_t dev, ino;
        int32_t wd;
} HeldWatch;

static int held_cmp(const void *a, const void *b) {
        const HeldWatch *x = a, *y = b;
        if (x->dev != y->dev)
                return x->dev < y->dev ? -1 : 1;
        return (x->ino > y->ino) - (x->ino < y->ino);
}

static int held_watches(int inotify_fd, HeldWatch **ret, size_t *ret_n) {
        char path[64];
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ HeldWatch *v = NULL;
        size_t size = 0, n = 0, cap = 0;

        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", inotify_fd);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        /* A line of about 120 bytes per watch; never more watches than the table's bound. */
        int r = read_full_fd_bounded(fd, 4096 + (size_t) DIRTY_SET_TABLE_MAX * 200, &text, &size);
        if (r < 0)
                return r;
        for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
                unsigned wd, sdev;
                unsigned long ino;
                if (sscanf(p, "inotify wd:%x ino:%lx sdev:%x ", &wd, &ino, &sdev) != 3)
                        continue;
                if (n == cap) {
                        cap = MAX(cap * 2, (size_t) 64);
                        HeldWatch *nv = reallocarray(v, cap, sizeof(*v));
                        if (!nv)
                                return -ENOMEM;
                        v = nv;
                }
                v[n++] = (HeldWatch) { .dev = makedev(sdev >> 20, sdev & 0xfffff), .ino = ino, .wd = (int32_t) wd };
        }
        if (n > 0)
                qsort(v, n, sizeof(*v), held_cmp);
        *ret = TAKE_PTR(v);
        *ret_n = n;
        return 0;
}

int dirty_set_recount(DirtySet *s) {
        _cleanup_free_ HeldWatch *v = NULL;
        size_t n = 0;
        int r = held_watches(s->fd, &v, &n);
        if (r < 0)
                return r;
        atomic_store(&s->budget->held, (uint32_t) MIN(n, (size_t) UINT32_MAX));
        return 0;
}

/* Everything older than now is untrusted: the table starts again. */
static void overflow(DirtySet *s) {
        s->overflow_seq = ++s->seq;
        stamp_table_clear(&s->stamps);
}

static void stamp(DirtySet *s, int32_t wd) {
        /* The table full (DIRTY_SET_TABLE_MAX), or no memory for the stamp: nothing old is
         * trusted. */
        if (stamp_table_put(&s->stamps, &(Stamp) { .key = (uint64_t) wd, .seq = s->seq + 1 }) < 0) {
                overflow(s);
                return;
        }
        s->seq++;
}

static void event(DirtySet *s, const struct inotify_event *ev) {
        if (ev->mask & (IN_Q_OVERFLOW | IN_UNMOUNT)) {
                overflow(s);
                /* Watches the kernel dropped may have gone unsaid: count them again. */
                (void) dirty_set_recount(s);
                return;
        }
        if (ev->wd <= 0)
                return;
        if (ev->mask & IN_IGNORED) {
                /* A watch removed by the kernel (its directory deleted, or its filesystem
                 * unmounted, which IN_UNMOUNT says first) is forgotten: its parent had the event
                 * of the deletion. The wd is not given again before the instance has used up
                 * the positive integers. */
                stamp_table_forget(&s->stamps, (uint64_t) ev->wd);
                budget_release(s->budget);
                return;
        }
        stamp(s, ev->wd);
}

int dirty_set_read(DirtySet *s) {
        char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
        int n_events = 0;
        if (s->mark) {
                int r = fan_mark_read(s->mark, &s->seq);
                if (r < 0)
                        return r;
                n_events += r;
        }
        for (;;) {
                ssize_t n = read_available(s->fd, buf, sizeof(buf));
                if (n <= 0)
                        return n < 0 ? (int) n : n_events;
                for (char *p = buf; p < buf + n;) {
                        const struct inotify_event *ev = (const struct inotify_event *) p;
                        p += sizeof(*ev) + ev->len;
                        event(s, ev);
                        n_events++;
                }
        }
}

static int stamp_cmp(const void *a, const void *b) {
        int32_t x = ((const DirtyStamp *) a)->wd, y = ((const DirtyStamp *) b)->wd;
        return (x > y) - (x < y);
}

int dirty_set_export(DirtySet *s, int *ret_fd) {
        view_made(s);
        const StampTable *t = &s->stamps;
        size_t fan_at = VIEW_HEADER + t->n_used * VIEW_STAMP;
        size_t size = fan_at + (s->mark ? fan_mark_export_size(s->mark) : FAN_VIEW_NONE_SIZE);
        _cleanup_free_ DirtyStamp *v = malloc(MAX(t->n_used, (size_t) 1) * sizeof(*v));
        _cleanup_free_ uint8_t *b = malloc(size);
        if (!v || !b)
                return -ENOMEM;
        size_t n = 0;
        for (size_t i = 0; i < t->n_slots; i++)
                if (t->slots[i].seq)
                        v[n++] = (DirtyStamp) { .wd = (int32_t) t->slots[i].key, .seq = t->slots[i].seq };
        qsort(v, n, sizeof(*v), stamp_cmp);
        memcpy(b, view_magic, 8);
        snapshot_stream_put_le(b + 8, s->instance, 8);
        snapshot_stream_put_le(b + 16, s->seq, 8);
        snapshot_stream_put_le(b + 24, s->overflow_seq, 8);
        snapshot_stream_put_le(b + 32, n, 8);
        for (size_t i = 0; i < n; i++) {
                snapshot_stream_put_le(b + VIEW_HEADER + i * VIEW_STAMP, (uint32_t) v[i].wd, 4);
                snapshot_stream_put_le(b + VIEW_HEADER + i * VIEW_STAMP + 4, v[i].seq, 8);
        }
        if (s->mark)
                fan_mark_export(s->mark, b + fan_at);
        else
                memset(b + fan_at, 0, FAN_VIEW_NONE_SIZE);
        _cleanup_close_ int fd = memfd_create("tentaflake-dirty-view", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        int r = write_all(fd, b, size);
        if (r < 0)
                return r;
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int dirty_view_load(int view_fd, int watch_fd, DirtyBudget *budget, DirtyView **ret) {
        _cleanup_(dirty_view_freep) DirtyView *v = calloc(1, sizeof(*v));
        _cleanup_free_ char *data = NULL;
        size_t size = 0;
        if (!v)
                return -ENOMEM;
        if (lseek(view_fd, 0, SEEK_SET) < 0)
                return -errno;
        int r = read_full_fd_bounded(view_fd, VIEW_HEADER + (size_t) DIRTY_SET_TABLE_MAX * VIEW_STAMP + FAN_VIEW_SIZE_MAX,
                                     &data, &size);
        if (r < 0)
                return r;
        const uint8_t *p = (const uint8_t *) data;
        if (size < VIEW_HEADER || memcmp(p, view_magic, 8) != 0)
                return -EBADMSG;
        v->instance = snapshot_stream_get_le(p + 8, 8);
        v->seq = snapshot_stream_get_le(p + 16, 8);
        v->overflow_seq = snapshot_stream_get_le(p + 24, 8);
        uint64_t n = snapshot_stream_get_le(p + 32, 8);
        if (n > DIRTY_SET_TABLE_MAX || size < VIEW_HEADER + n * VIEW_STAMP || v->instance == 0)
                return -EBADMSG;
        v->v = calloc(MAX(n, (uint64_t) 1), sizeof(*v->v));
        if (!v->v)
                return -ENOMEM;
        for (uint64_t i = 0; i < n; i++) {
                const uint8_t *q = p + VIEW_HEADER + i * VIEW_STAMP;
                uint64_t wd = snapshot_stream_get_le(q, 4);
                v->v[i] = (DirtyStamp) { .wd = (int32_t) wd, .seq = snapshot_stream_get_le(q + 4, 8) };
                /* Sorted, positive, no stamp from the future. */
                if (wd == 0 || wd > INT32_MAX || v->v[i].seq > v->seq || (i > 0 && v->v[i].wd <= v->v[i - 1].wd))
                        return -EBADMSG;
        }
        size_t fan_at = VIEW_HEADER + n * VIEW_STAMP, used = 0;
        r = fan_view_parse(p + fan_at, size - fan_at, v->seq, &v->fan, &used);
        if (r < 0)
                return r;
        if (fan_at + used != size)
                return -EBADMSG;
        v->n = n;
        v->watch_fd = watch_fd;
        v->budget = budget;
        *ret = TAKE_PTR(v);
        return 0;
}

DirtyView *dirty_view_free(DirtyView *v) {
        if (v) {
                fan_view_done(&v->fan);
                free(v->held);
                free(v->v);
                free(v);
        }
        return NULL;
}

bool dirty_view_changed(const DirtyView *v, int32_t wd, uint64_t since) {
        size_t lo = 0, hi = v->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (v->v[mid].wd == wd)
                        return v->v[mid].seq > since;
                if (v->v[mid].wd < wd)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return false;
}

/* Past the budget: the watch the directory has already, if any (the instance's own list, read
 * once per view: a watch other walks add meanwhile is not seen, and the directory is then read
 * as one without a watch). */
static int32_t held_watch_of(DirtyView *v, int dir_fd) {
        struct stat st;
        if (!v->held_read) {
                v->held_read = true;
                if (held_watches(v->watch_fd, &v->held, &v->n_held) < 0)
                        v->n_held = 0;
        }
        if (fstat(dir_fd, &st) < 0)
                return DIRTY_WATCH_OVER_BUDGET;
        HeldWatch key = { .dev = st.st_dev, .ino = st.st_ino };
        const HeldWatch *h = v->n_held ? bsearch(&key, v->held, v->n_held, sizeof(key), held_cmp) : NULL;
        return h ? h->wd : DIRTY_WATCH_OVER_BUDGET;
}

int32_t dirty_view_watch(DirtyView *v, int dir_fd) {
        DirtyBudget *b = v->budget;
        char path[64];
        int wd;

        /* The directory the fd names, whatever its path is now: the magic link is followed to
         * the open directory itself, nothing is looked up by name. */
        snprintf(path, sizeof(path), "/proc/self/fd/%d", dir_fd);
        if (!b) {
                wd = inotify_add_watch(v->watch_fd, path, DIRTY_SET_EVENTS);
                return wd > 0 ? wd : 0;
        }
        /* A place in the budget first (walks of other lanes count too), then a new watch only:
         * one the directory has already (EEXIST) is asked for without taking a place. */
        if (atomic_fetch_add(&b->held, 1) < b->max) {
                wd = inotify_add_watch(v->watch_fd, path, DIRTY_SET_EVENTS | IN_MASK_CREATE);
                if (wd > 0)
                        return wd;
                int r = errno;
                budget_release(b);
                if (r != EEXIST)
                        return 0; /* ENOSPC: the host has none left for root */
        } else {
                budget_release(b);
                return held_watch_of(v, dir_fd);
        }
        wd = inotify_add_watch(v->watch_fd, path, DIRTY_SET_EVENTS);
        return wd > 0 ? wd : 0;
}

/* Mark d and below; returns d->subtree_clean. */
static bool mark_dir(const DirtyView *v, GenDir *d, uint64_t since) {
        d->clean = d->wd > 0 && !d->always && !dirty_view_changed(v, d->wd, since);
        bool all = d->clean, any = d->clean;
        for (size_t i = 0; i < d->n; i++) {
                if (!d->v[i].is_dir)
                        continue;
                if (!mark_dir(v, d->v[i].dir, since))
                        all = false;
                any = any || d->v[i].dir->any_clean;
        }
        d->subtree_clean = all;
        d->any_clean = any;
        return all;
}

const FanView *dirty_view_fan(const DirtyView *v) {
        return v && v->fan.dev ? &v->fan : NULL;
}

bool dirty_view_mark(const DirtyView *v, GenIndex *prev) {
        /* Walked through another instance, or without one, or an overflow since its walk
         * began: its watches say nothing. */
        if (!v || !prev || prev->watch_instance != v->instance || prev->watch_seq == 0 ||
            v->overflow_seq > prev->watch_seq || prev->watch_seq > v->seq)
                return false;
        (void) mark_dir(v, &prev->root, prev->watch_seq);
        return true;
}
