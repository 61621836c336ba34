/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "common/sha256.h"
#include "common/shell-word.h"
#include "controller/harness-edit.h"
#include "controller/harness.h"
#include "controller/harness-prefix.h"
#include "controller/site.h"

#define STATE_DIR "harness" /* below .tentaflake-worker/ */
#define PREFIX_SCRIPT "claude-code-shell" /* earlier versions' prefix, a script the agent could edit: removed */

typedef struct Slot {
        const char *key;  /* names its state files: <key>.orig, <key>.absent, <key>.written */
        const char *dir;  /* below the workspace, "" for its root */
        const char *name;
        HarnessEdit set, unset;
} Slot;

static const Slot claude_slots[] = {
        {"claude-code.mcp", "", ".mcp.json", harness_mcp_json_set, harness_mcp_json_unset},
        {"claude-code.settings", ".claude", "settings.json", harness_settings_set, harness_settings_unset},
        {},
};
static const Slot codex_slots[] = {
        {"codex.config", ".codex", "config.toml", harness_codex_set, harness_codex_unset},
        {},
};

typedef struct Site {
        const HarnessOptions *o;
        const char *verb;   /* "claude-code" or "codex", for messages */
        const char *ws;     /* the workspace's path */
        int ws_fd, state_fd;
        HarnessArgs args;   /* what the edits write */
        FILE *out;
} Site;

/* dir/name's bytes: 1 with *ret (NUL-ended), *ret_n and *ret_mode; 0 when there is none; a
 * link or anything but a regular file is refused. */
static int read_at(int dfd, const char *name, char **ret, size_t *ret_n, mode_t *ret_mode) {
        if (dfd < 0)
                return 0;
        _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EPERM;
        int r = read_full_fd_bounded(fd, HARNESS_FILE_MAX, ret, ret_n);
        if (r < 0)
                return r;
        if (ret_mode)
                *ret_mode = st.st_mode & 07777;
        return 1;
}

static int digest_hex(const char *s, size_t n, char hex[static SHA256_HEX_SIZE]) {
        return sha256_buffer_hex(s, n, hex);
}

static int state_name(char *buf, size_t size, const Slot *s, const char *what) {
        return snprintf(buf, size, "%s.%s", s->key, what) < (int) size ? 0 : -ENAMETOOLONG;
}

/* Does dir/name (cur, n) still hold what harness wrote last? */
static bool as_written(Site *h, const Slot *s, const char *cur, size_t n) {
        char written[128], hex[SHA256_HEX_SIZE];
        _cleanup_free_ char *wrote = NULL;
        size_t k;
        return cur && state_name(written, sizeof(written), s, "written") >= 0 &&
               read_at(h->state_fd, written, &wrote, &k, NULL) > 0 && digest_hex(cur, n, hex) >= 0 && streq(wrote, hex);
}

/* The first write keeps what was there: the bytes and mode, or that nothing was (and whether
 * the directory was missing too). A later run keeps that, unless the file changed since harness
 * wrote it: then what remove gives back is the file as it is now without harness's settings
 * (or nothing, when it was removed). */
static int keep_original(Site *h, const Slot *s, const char *cur, size_t n, mode_t mode, bool dir_absent, TfwError *e) {
        char orig[128], absent[128];
        _cleanup_free_ char *without = NULL;
        if (state_name(orig, sizeof(orig), s, "orig") < 0 || state_name(absent, sizeof(absent), s, "absent") < 0)
                return tfw_error(e, ENAMETOOLONG, "internal", "state name too long");
        bool kept = faccessat(h->state_fd, orig, F_OK, AT_SYMLINK_NOFOLLOW) == 0 ||
                    faccessat(h->state_fd, absent, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
        if (kept && as_written(h, s, cur, n))
                return 0; /* as harness left it: the original kept stays the one remove restores */
        if (kept && cur) {
                int k = s->unset(cur, n, &h->args, &without, e);
                if (k < 0)
                        return k;
                cur = without;
                n = strlen(without);
        }
        (void) unlinkat(h->state_fd, cur ? absent : orig, 0);
        int r = cur ? write_file_atomic_at(h->state_fd, orig, cur, n, mode, (uid_t) -1, (gid_t) -1)
                    : write_file_atomic_at(h->state_fd, absent, dir_absent ? "dir\n" : "file\n", dir_absent ? 4 : 5, 0600,
                                           (uid_t) -1, (gid_t) -1);
        if (r < 0)
                return tfw_error(e, -r, "write_failed", "cannot keep the original of '%s%s%s' in '%s/%s/%s/': %s", s->dir,
                                 *s->dir ? "/" : "", s->name, h->ws, CONTROL_DIR_NAME, STATE_DIR, strerror(-r));
        return 0;
}

static int open_slot_dir(Site *h, const Slot *s, bool make, bool *ret_absent) {
        if (!*s->dir) {
                int fd = fcntl(h->ws_fd, F_DUPFD_CLOEXEC, 3);
                return fd < 0 ? -errno : fd;
        }
        int fd = open_dir_at(h->ws_fd, s->dir);
        if (ret_absent)
                *ret_absent = fd == -ENOENT;
        if (fd == -ENOENT && make) {
                if (mkdirat(h->ws_fd, s->dir, 0755) < 0 && errno != EEXIST)
                        return -errno;
                fd = open_dir_at(h->ws_fd, s->dir);
        }
        return fd;
}

static int install_slot(Site *h, const Slot *s, TfwError *e) {
        _cleanup_free_ char *cur = NULL, *next = NULL;
        bool dir_absent = false;
        size_t n = 0;
        mode_t mode = 0644;
        _cleanup_close_ int dfd = open_slot_dir(h, s, false, &dir_absent);
        if (dfd < 0 && dfd != -ENOENT)
                return tfw_error(e, -dfd, "read_failed", "cannot open '%s' (never through a link): %s", s->dir, strerror(-dfd));
        int r = read_at(dfd, s->name, &cur, &n, &mode);
        if (r < 0)
                return tfw_error(e, -r, "read_failed", "cannot read '%s%s%s' (a regular file, never through a link): %s",
                                 s->dir, *s->dir ? "/" : "", s->name, strerror(-r));
        r = s->set(cur, n, &h->args, &next, e);
        if (r < 0)
                return r;
        if (h->o->dry_run) {
                fprintf(h->out, "harness %s: would write '%s%s%s':\n%s", h->verb, s->dir, *s->dir ? "/" : "", s->name, next);
                return 0;
        }
        r = keep_original(h, s, cur, n, mode, dir_absent, e);
        if (r < 0)
                return r;
        if (dfd < 0 && (dfd = open_slot_dir(h, s, true, NULL)) < 0)
                return tfw_error(e, -dfd, "write_failed", "cannot make '%s': %s", s->dir, strerror(-dfd));
        char written[128], hex[SHA256_HEX_SIZE];
        if (state_name(written, sizeof(written), s, "written") < 0 || digest_hex(next, strlen(next), hex) < 0)
                return tfw_error(e, EINVAL, "internal", "cannot name or digest the state");
        r = write_file_atomic_at(dfd, s->name, next, strlen(next), mode, (uid_t) -1, (gid_t) -1);
        if (r >= 0)
                r = write_file_atomic_at(h->state_fd, written, hex, strlen(hex), 0600, (uid_t) -1, (gid_t) -1);
        if (r < 0)
                return tfw_error(e, -r, "write_failed", "cannot write '%s%s%s': %s", s->dir, *s->dir ? "/" : "", s->name,
                                 strerror(-r));
        fprintf(h->out, "harness %s: wrote '%s%s%s'\n", h->verb, s->dir, *s->dir ? "/" : "", s->name);
        return 0;
}

/* Put the original back when the file still holds what was written; else take out only what
 * this wrote. The state files go either way. */
static int remove_slot(Site *h, const Slot *s, TfwError *e) {
        char orig[128], absent[128], written[128];
        _cleanup_free_ char *cur = NULL, *was = NULL, *kind = NULL, *next = NULL;
        size_t n = 0, was_n = 0, k = 0;
        mode_t mode = 0644, was_mode = 0644;
        if (state_name(orig, sizeof(orig), s, "orig") < 0 || state_name(absent, sizeof(absent), s, "absent") < 0 ||
            state_name(written, sizeof(written), s, "written") < 0)
                return tfw_error(e, ENAMETOOLONG, "internal", "state name too long");
        int had = read_at(h->state_fd, orig, &was, &was_n, &was_mode);
        int gone = had > 0 ? 0 : read_at(h->state_fd, absent, &kind, &k, NULL);
        if (had < 0 || gone < 0 || (had == 0 && gone == 0)) {
                fprintf(h->out, "harness %s: '%s%s%s': nothing of harness to take out\n", h->verb, s->dir, *s->dir ? "/" : "",
                        s->name);
                return 0;
        }
        _cleanup_close_ int dfd = open_slot_dir(h, s, false, NULL);
        int r = read_at(dfd, s->name, &cur, &n, &mode);
        if (r < 0)
                return tfw_error(e, -r, "read_failed", "cannot read '%s%s%s': %s", s->dir, *s->dir ? "/" : "", s->name,
                                 strerror(-r));
        bool same = r > 0 && as_written(h, s, cur, n);
        if (same && had > 0)
                r = write_file_atomic_at(dfd, s->name, was, was_n, was_mode, (uid_t) -1, (gid_t) -1);
        else if (same) {
                r = unlinkat(dfd, s->name, 0) < 0 ? -errno : 0;
                if (r >= 0 && streq(kind, "dir\n"))
                        (void) unlinkat(h->ws_fd, s->dir, AT_REMOVEDIR); /* only when empty */
        } else if (r > 0 && (r = s->unset(cur, n, &h->args, &next, e)) >= 0)
                r = write_file_atomic_at(dfd, s->name, next, strlen(next), mode, (uid_t) -1, (gid_t) -1);
        if (r < 0)
                return e->message[0] ? r : tfw_error(e, -r, "write_failed", "cannot restore '%s%s%s': %s", s->dir,
                                                     *s->dir ? "/" : "", s->name, strerror(-r));
        fprintf(h->out, same ? "harness %s: '%s%s%s' is as it was before\n"
                             : "harness %s: '%s%s%s' changed since harness wrote it: took out only its own settings\n",
                h->verb, s->dir, *s->dir ? "/" : "", s->name);
        (void) unlinkat(h->state_fd, orig, 0);
        (void) unlinkat(h->state_fd, absent, 0);
        (void) unlinkat(h->state_fd, written, 0);
        return 0;
}

/* The prefix (claude-code, not --remove): a program only root can change, one path without " -"
 * (Claude Code splits its prefix at the last " -"). */
static int find_prefix(Site *h, char **ret, TfwError *e) {
        int r = harness_prefix_program(h->o->prefix_program, h->o->exe, ret, e);
        if (r < 0)
                return r;
        if (strstr(*ret, " -"))
                return tfw_error(e, EINVAL, "bad_path", "the prefix '%s' holds \" -\", where Claude Code splits a prefix",
                                 *ret);
        fprintf(h->out, "harness %s: the shell prefix is '%s' (only root can change it): shell --apply %s\n", h->verb,
                *ret, h->o->review ? "review" : "auto");
        return 0;
}

/* The script earlier versions wrote as the prefix: gone, whether installing or removing. */
static int remove_old_script(Site *h, TfwError *e) {
        if (h->o->dry_run || h->state_fd < 0 || unlinkat(h->state_fd, PREFIX_SCRIPT, 0) == 0 || errno == ENOENT)
                return 0;
        return tfw_error(e, errno, "write_failed", "cannot remove '%s/%s/%s/%s': %m", h->ws, CONTROL_DIR_NAME, STATE_DIR,
                         PREFIX_SCRIPT);
}

static int open_state(Site *h, TfwError *e) {
        _cleanup_close_ int ctl = open_dir_at(h->ws_fd, CONTROL_DIR_NAME);
        if (ctl < 0)
                return tfw_error(e, -ctl, "no_workspace", "'%s/%s' cannot be opened: %s", h->ws, CONTROL_DIR_NAME,
                                 strerror(-ctl));
        if (h->o->dry_run) { /* writes nothing: reads what an earlier run kept, if any */
                h->state_fd = open_dir_at(ctl, STATE_DIR);
                return 0;
        }
        if (mkdirat(ctl, STATE_DIR, 0700) < 0 && errno != EEXIST)
                return tfw_error(e, errno, "write_failed", "cannot make '%s/%s/%s': %m", h->ws, CONTROL_DIR_NAME, STATE_DIR);
        h->state_fd = open_dir_at(ctl, STATE_DIR);
        if (h->state_fd < 0)
                return tfw_error(e, -h->state_fd, "write_failed", "cannot open '%s/%s/%s': %s", h->ws, CONTROL_DIR_NAME,
                                 STATE_DIR, strerror(-h->state_fd));
        return 0;
}

int controller_harness(const HarnessOptions *o, FILE *out, TfwError *e) {
        _cleanup_(controller_site_close) ControllerSite site = CONTROLLER_SITE_NULL;
        _cleanup_free_ char *prefix = NULL;
        Site h = {.o = o, .verb = o->kind == HARNESS_CODEX ? "codex" : "claude-code", .ws_fd = -EBADF,
                  .state_fd = -EBADF, .out = out, .args = {.exe = o->exe, .review = o->review}};
        const Slot *slots = o->kind == HARNESS_CODEX ? codex_slots : claude_slots;
        int r = controller_site_open(o->workspace, NULL, &site, e);
        if (r < 0)
                return r;
        h.ws = site.workspace;
        if (o->kind == HARNESS_CLAUDE_CODE && !o->remove && (r = find_prefix(&h, &prefix, e)) < 0)
                return r;
        h.args.prefix = prefix;
        h.ws_fd = open(h.ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        r = h.ws_fd < 0 ? tfw_error(e, errno, "no_workspace", "cannot open '%s': %m", h.ws) : open_state(&h, e);
        for (const Slot *s = slots; r >= 0 && s->key; s++)
                r = o->remove ? remove_slot(&h, s, e) : install_slot(&h, s, e);
        if (r >= 0 && o->kind == HARNESS_CLAUDE_CODE)
                r = remove_old_script(&h, e);
        if (r >= 0 && !o->remove && !o->dry_run)
                fprintf(out, "harness %s: the originals are kept in '%s/%s/%s/'; 'tentaflake-worker harness %s --remove' "
                             "puts them back\n", h.verb, h.ws, CONTROL_DIR_NAME, STATE_DIR, h.verb);
        if (h.ws_fd >= 0)
                close(h.ws_fd);
        if (h.state_fd >= 0)
                close(h.state_fd);
        return r;
}
