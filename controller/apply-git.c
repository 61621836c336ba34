/* SPDX-License-Identifier: MIT */
/* The git rules of `apply` (controller/apply-git.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/macro.h"
#include "common/name-fold.h"
#include "common/term-escape.h"
#include "controller/apply-git.h"
#include "controller/site.h"

static bool has_component(const char *path, const char *name) {
        size_t n = strlen(name);
        for (const char *c = path;;) {
                size_t k = strcspn(c, "/");
                if (k == n && strncmp(c, name, n) == 0)
                        return true;
                if (!c[k])
                        return false;
                c += k + 1;
        }
}

bool apply_path_is_control(const char *path) {
        return path_component_folds_to(path, CONTROL_DIR_NAME);
}

static bool writes_file(const ChangeEntry *c) {
        return c->kind == CHANGE_ADDED || c->kind == CHANGE_MODIFIED || c->kind == CHANGE_MODE;
}

static bool is_dot_git(const char *path) {
        return path_component_folds_to(path, ".git");
}

/* The rule that refuses c alone, or NULL. */
static const char *change_rule(const ChangeEntry *c) {
        const char *leaf = strrchr(c->path, '/');
        leaf = leaf ? leaf + 1 : c->path;
        if (is_dot_git(c->path))
                return has_component(c->path, ".git")
                        ? "the job changed a .git (a hook, a config or a gitdir there runs on the host the next time git runs; "
                          "--allow-git takes it)"
                        : "the job changed a .git: a name that a case-insensitive or normalising file system takes for .git "
                          "(a hook, a config or a gitdir there runs on the host the next time git runs; --allow-git takes it)";
        if (path_component_folds_to(c->path, ".gitmodules"))
                return "the job changed a .gitmodules (git fetches submodules from where it says; --allow-git takes it)";
        if (writes_file(c) && name_folds_to(leaf, strlen(leaf), "gitdir"))
                return "a gitdir file (git follows it from one repository directory to another; --allow-git takes it)";
        if (writes_file(c) && name_folds_to(leaf, strlen(leaf), "commondir"))
                return "a commondir file (git takes a HEAD beside it for a repository whose objects, refs and config are where "
                       "it points; --allow-git takes it)";
        return NULL;
}

bool apply_git_refuses_change(const ChangeEntry *c, FILE *err) {
        const char *why = change_rule(c);
        if (why) {
                _cleanup_free_ char *shown = term_escape_strdup(c->path, TERM_ESCAPE_NAME);
                fprintf(err, "apply: refused: '%s': %s\n", shown ? shown : "?", why);
        }
        return why != NULL;
}

/* What git's is_git_directory() looks for in a directory. */
enum { HAS_HEAD = 1 << 0, HAS_OBJECTS = 1 << 1, HAS_REFS = 1 << 2, HAS_COMMONDIR = 1 << 3 };
static const char *const layout_names[] = { "HEAD", "objects", "refs", "commondir" };
static const char *const layout_folded[] = { "head", "objects", "refs", "commondir" };

static unsigned layout_bit(const char *name, size_t len) {
        char folded[NAME_FOLD_MAX];
        if (!name_fold(name, len, folded))
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(layout_folded); i++)
                if (name_folded_is(folded, layout_folded[i]))
                        return 1u << i;
        return 0;
}

/* dirs[dir] |= bits (dir: a directory of the workspace, "" its root). */
static int mark(json_t *dirs, const char *dir, unsigned bits) {
        json_t *v = json_object_get(dirs, dir);
        if (v)
                return json_integer_set(v, json_integer_value(v) | (json_int_t) bits) < 0 ? -ENOMEM : 0;
        return json_object_set_new(dirs, dir, json_integer(bits)) < 0 ? -ENOMEM : 0;
}

/* Every directory c is in or below, marked with the layout names the changeset leaves there
 * (each component names an entry of its directory after the changeset, but a deletion's last);
 * a directory made is marked itself; a layout name deleted goes into deleted. */
static int add_change(json_t *dirs, json_t *deleted, const ChangeEntry *c) {
        _cleanup_free_ char *p = strdup(c->path);
        int r = 0;
        if (!p)
                return -ENOMEM;
        for (size_t start = 0; r >= 0;) {
                size_t k = strcspn(p + start, "/");
                bool last = !p[start + k];
                unsigned bit = layout_bit(p + start, k);
                if (start)
                        p[start - 1] = 0; /* p is now the component's directory */
                if (last && c->kind == CHANGE_DELETED) {
                        r = mark(dirs, start ? p : "", 0);
                        if (r >= 0 && bit)
                                r = json_object_set_new(deleted, c->path, json_true()) < 0 ? -ENOMEM : 0;
                } else
                        r = mark(dirs, start ? p : "", bit);
                if (start)
                        p[start - 1] = '/';
                if (last)
                        break;
                start += k + 1;
        }
        return r >= 0 && c->kind == CHANGE_DIRECTORY ? mark(dirs, c->path, 0) : r;
}

/* The layout names the workspace holds in dir now and the changeset does not delete, by their
 * exact names (the workspace's file system folds them as it folds git's own lookups). A
 * directory that is not there (the changeset makes it) or not one to walk into (a link: a
 * conflict of its own) holds none; a name that cannot be looked at counts as there. */
static unsigned workspace_bits(int ws_fd, const char *dir, json_t *deleted) {
        _cleanup_close_ int fd = open_dir_components(ws_fd, dir);
        unsigned bits = 0;
        if (fd < 0)
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(layout_names); i++) {
                struct stat st;
                _cleanup_free_ char *path = malloc(strlen(dir) + 16);
                if (fstatat(fd, layout_names[i], &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
                        continue;
                if (path)
                        sprintf(path, "%s%s%s", dir, *dir ? "/" : "", layout_names[i]);
                if (!path || !json_object_get(deleted, path))
                        bits |= 1u << i;
        }
        return bits;
}

static const char *layout_rule(unsigned bits) {
        if (!(bits & HAS_HEAD))
                return NULL;
        if ((bits & HAS_OBJECTS) && (bits & HAS_REFS))
                return "a HEAD beside objects/ and refs/";
        if (bits & HAS_COMMONDIR)
                return "a HEAD beside a commondir";
        return NULL;
}

int apply_git_repositories(int ws_fd, const ChangesManifest *m, FILE *err) {
        _cleanup_json_ json_t *dirs = json_object(), *deleted = json_object();
        const char *dir;
        json_t *v;
        int n = 0;
        if (!dirs || !deleted)
                return -ENOMEM;
        for (size_t i = 0; i < m->n; i++) {
                const ChangeEntry *c = &m->v[i];
                if (c->kind == CHANGE_REFUSED || apply_path_is_control(c->path) || is_dot_git(c->path))
                        continue; /* not carried, or refused already */
                int r = add_change(dirs, deleted, c);
                if (r < 0)
                        return r;
        }
        json_object_foreach(dirs, dir, v) {
                const char *why = layout_rule((unsigned) json_integer_value(v) | workspace_bits(ws_fd, dir, deleted));
                if (!why)
                        continue;
                n++;
                _cleanup_free_ char *shown = term_escape_strdup(*dir ? dir : ".", TERM_ESCAPE_NAME);
                fprintf(err, "apply: refused: '%s': git would take this directory for a repository after the changeset (%s): "
                             "its config and hooks would run on the host the next time git runs in it; --allow-git takes it\n",
                        shown ? shown : "?", why);
        }
        return n;
}
