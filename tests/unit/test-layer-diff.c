/* SPDX-License-Identifier: MIT */
/* capsule/layer-diff.c against the kernel's own overlayfs (root): a job's every kind of change
 * made through a real overlay's merged view, then the upper, lower and merged directories read
 * back into events, compared with what was done. gVisor's overlay records changes the same way
 * (whiteouts as character devices 0:0; a directory made again over a removed one hides the
 * lower one), which docs/capsule.md checks inside a capsule. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capsule/layer-diff.h"
#include "common/fd-util.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"

typedef struct Seen {
        char lines[256][300];
        size_t n;
} Seen;

static int collect(const LayerEvent *ev, void *userdata) {
        Seen *s = userdata;
        static const char *const kinds[] = { "file", "dir", "deleted", "refused", "link" };
        if (s->n >= ELEMENTSOF(s->lines))
                return -E2BIG;
        snprintf(s->lines[s->n++], sizeof(s->lines[0]), "%s %s", kinds[ev->change], ev->path);
        return 0;
}

static int cmp(const void *a, const void *b) {
        return strcmp(a, b);
}

static void sh(const char *dir, const char *script) {
        char *cmd;
        assert_true(asprintf(&cmd, "cd '%s' && %s", dir, script) > 0);
        int st = system(cmd);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                fail_msg("failed: %s", cmd);
        free(cmd);
}

/* The lower tree, the job's changes through the merged view, and what the diff must say. */
static const char *const lower_tree =
        "mkdir -p keep/deep gone/sub again swap2 artifacts .tentaflake-worker build x &&"
        " echo same >keep/same && echo a >keep/edit && echo t >keep/touched && echo m >keep/mode &&"
        " echo g >keep/gmode && echo r >keep/renamed && echo d >keep/deep/d && echo 1 >gone/1 &&"
        " echo 2 >gone/sub/2 && echo o >again/old && echo f >swap1 && echo s >swap2/s &&"
        " echo a >artifacts/a && echo c >.tentaflake-worker/c && echo b >build/b && echo rm >x/rm";

static const char *const job =
        "echo more >>keep/edit && touch keep/touched && chmod +x keep/mode && chmod g+w keep/gmode &&"
        " mv keep/renamed keep/moved && rm keep/deep/d && rm -rf gone && rm -rf again && mkdir again &&"
        " echo n >again/new && rm swap1 && mkdir swap1 && echo in >swap1/in && rm -rf swap2 && echo f >swap2 &&"
        " mkdir -p newdir/empty && echo new >newdir/file && ln -s same keep/link && mkfifo keep/fifo &&"
        " echo x >\"$(printf 'bad\\377name')\" && echo art >artifacts/more && echo ctl >.tentaflake-worker/more &&"
        " echo b2 >build/b2 && rm x/rm && echo same >keep/same.copy";

static const char *const expected[] = {
        "deleted again/old",
        "deleted gone",
        "deleted gone/1",
        "deleted gone/sub",
        "deleted gone/sub/2",
        "deleted keep/deep/d",
        "deleted keep/renamed",
        "deleted swap1",
        "deleted swap2",
        "deleted swap2/s",
        "deleted x/rm",
        "dir newdir",
        "dir newdir/empty",
        "dir swap1",
        "file again/new",
        "file keep/edit",
        "file keep/mode",
        "file keep/moved",
        "file keep/same.copy",
        "file newdir/file",
        "file swap1/in",
        "file swap2",
        "refused bad\377name",
        "refused keep/fifo",
        "refused keep/link",
};

/* The same job read as the build cache reads it (LAYER_DIFF_CACHE): every copy, links carried,
 * any name, a removed directory once. */
static const char *const expected_cache[] = {
        "deleted again/old",
        "deleted gone",
        "deleted keep/deep/d",
        "deleted keep/renamed",
        "deleted swap1",
        "deleted swap2",
        "deleted x/rm",
        "dir again",
        "dir keep",
        "dir keep/deep",
        "dir newdir",
        "dir newdir/empty",
        "dir swap1",
        "dir x",
        "file again/new",
        "file bad\377name",
        "file keep/edit",
        "file keep/gmode",
        "file keep/mode",
        "file keep/moved",
        "file keep/same.copy",
        "file keep/touched",
        "file newdir/file",
        "file swap1/in",
        "file swap2",
        "link keep/link",
        "refused keep/fifo",
};

static int compare(int up, int lo, int me, unsigned flags, const char *const *want, size_t n_want) {
        static Seen seen;
        const char *const skip[] = { ".tentaflake-worker", "artifacts", "build", NULL };
        seen.n = 0;
        int r = layer_diff(up, lo, me, skip, flags, collect, &seen);
        if (r < 0) {
                fprintf(stderr, "layer_diff: %s\n", strerror(-r));
                return 15;
        }
        qsort(seen.lines, seen.n, sizeof(seen.lines[0]), cmp);
        int bad = seen.n != n_want;
        for (size_t i = 0; i < MAX(seen.n, n_want); i++) {
                const char *g = i < seen.n ? seen.lines[i] : "(none)", *x = i < n_want ? want[i] : "(none)";
                if (!streq(g, x))
                        bad = 1;
                fprintf(stderr, "%s %-28s %s\n", streq(g, x) ? " " : "!", x, g);
        }
        return bad ? 16 : 0;
}

static int in_namespace(void) {
        char base[] = "/tmp/tfw-layer-diff.XXXXXX", p[4][128];
        const char *sub[] = { "lower", "upper", "work", "merged" };
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 || !mkdtemp(base))
                return 10;
        /* A tmpfs of its own: overlayfs wants xattrs and whiteouts on the upper layer. */
        if (mount("tmpfs", base, "tmpfs", 0, "size=64m") < 0)
                return 11;
        for (int i = 0; i < 4; i++) {
                snprintf(p[i], sizeof(p[i]), "%s/%s", base, sub[i]);
                if (mkdir(p[i], 0755) < 0)
                        return 12;
        }
        sh(p[0], lower_tree);
        char opts[600];
        snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s", p[0], p[1], p[2]);
        if (mount("overlay", p[3], "overlay", 0, opts) < 0)
                return 13;
        sh(p[3], job);

        int up = open(p[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC), lo = open(p[0], O_RDONLY | O_DIRECTORY | O_CLOEXEC),
            me = open(p[3], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (up < 0 || lo < 0 || me < 0)
                return 14;
        int r = compare(up, lo, me, 0, expected, ELEMENTSOF(expected));
        int k = compare(up, lo, me, LAYER_DIFF_CACHE, expected_cache, ELEMENTSOF(expected_cache));
        return r ? r : k ? k + 10 : 0;
}

static void test_every_kind_of_change(void **state) {
        (void) state;
        if (geteuid() != 0)
                tfw_skip("needs root");
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                _exit(in_namespace());
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_portable_names(void **state) {
        (void) state;
        assert_true(layer_name_is_portable("plain"));
        assert_true(layer_name_is_portable("caf\xc3\xa9"));
        assert_false(layer_name_is_portable("bad\377"));
        assert_false(layer_name_is_portable("tab\there"));
        assert_false(layer_name_is_portable("del\x7f"));
        assert_false(layer_name_is_portable("\xed\xa0\x80")); /* a surrogate */
        assert_false(layer_name_is_portable("n\xc2\x9b" "2J.txt"));    /* C1 CSI as UTF-8 (issue 46) */
        assert_false(layer_name_is_portable("a\xc2\x85" "b"));          /* C1 NEL */
        assert_false(layer_name_is_portable("evil\xe2\x80\xaetxt")); /* RLO, a bidi override */
        assert_false(layer_name_is_portable("x\xe2\x81\xa9"));       /* PDI, a bidi isolate */
        assert_false(layer_name_is_portable("x\xd8\x9c"));           /* ALM */
        assert_true(layer_name_is_portable("nbsp\xc2\xa0ok"));       /* U+00A0 is text */
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_every_kind_of_change),
                cmocka_unit_test(test_portable_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
