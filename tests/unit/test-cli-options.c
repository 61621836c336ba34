/* SPDX-License-Identifier: MIT */
/* The command line's flags in step (issue 47, item 3). For every verb of cli/'s table:
 *  - the options its parser takes (Verb.options, the getopt table it parses with, and
 *    controller_options for the controller's form) are exactly the --flags its --help names,
 *    less --help and the configuration's --config and --name (cli/main.c takes those);
 *  - its line of the overview (`tentaflake-worker --help`) names exactly its options too,
 *    unless it stands for them with [OPTIONS] or [flags] (then it names none that is not one).
 * tests/unit/test-man-help.sh holds the man page to --help, so a flag is in the parser, the
 * help and the page, or a test fails. Linked with cli/'s objects (main() renamed: the
 * Makefile's rule for this test). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"

#define FLAGS_MAX 128

typedef struct Flags {
        char *name[FLAGS_MAX];
        size_t n;
} Flags;

static void flags_done(Flags *f) {
        for (size_t i = 0; i < f->n; i++)
                free(f->name[i]);
        f->n = 0;
}

static bool flags_has(const Flags *f, const char *name) {
        for (size_t i = 0; i < f->n; i++)
                if (streq(f->name[i], name))
                        return true;
        return false;
}

static void flags_add(Flags *f, const char *name, size_t len) {
        char *s = strndup(name, len);
        assert_non_null(s);
        if (flags_has(f, s) || f->n == FLAGS_MAX) {
                assert_true(f->n < FLAGS_MAX);
                free(s);
                return;
        }
        f->name[f->n++] = s;
}

/* Every "--name" of text that starts a word (not the "--" before an argv), without the dashes. */
static void flags_of_text(const char *text, Flags *f) {
        for (const char *p = text; (p = strstr(p, "--")); p += 2) {
                if (p > text && (p[-1] == '-' || p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z') ||
                                 (p[-1] >= 'A' && p[-1] <= 'Z') || (p[-1] >= '0' && p[-1] <= '9')))
                        continue;
                size_t n = strspn(p + 2, "abcdefghijklmnopqrstuvwxyz0123456789-");
                while (n > 0 && p[2 + n - 1] == '-')
                        n--;
                if (n > 0)
                        flags_add(f, p + 2, n);
        }
}

static void flags_of_options(const struct option *o, Flags *f) {
        for (; o && o->name; o++)
                flags_add(f, o->name, strlen(o->name));
}

/* Options a parser takes only to refuse them with a better word than "unknown option", which
 * neither the help nor the completion offers: serve --token (the token never comes from argv). */
static bool option_is_refusal(const Verb *v, const char *name) {
        return streq(v->name, "serve") && streq(name, "token");
}

/* The flags every verb may name without taking them itself. */
static bool flag_is_global(const char *name) {
        return streq(name, "help") || streq(name, "config") || streq(name, "name") || streq(name, "version");
}

/* "in a, not in b" for the failure message. */
static void flags_missing(const Flags *a, const Flags *b, char *buf, size_t size) {
        size_t o = 0;
        buf[0] = 0;
        for (size_t i = 0; i < a->n && o + 1 < size; i++)
                if (!flags_has(b, a->name[i]) && !flag_is_global(a->name[i])) {
                        int k = snprintf(buf + o, size - o, " --%s", a->name[i]);
                        o = k > 0 ? MIN(o + (size_t) k, size - 1) : o;
                }
}

static void test_parser_and_help_agree(void **state) {
        (void) state;
        size_t n = 0, failed = 0;
        for (const Verb *v = verbs; v->name; v++, n++) {
                Flags parser = {}, help = {};
                char only_parser[1024], only_help[1024];
                flags_of_options(v->options, &parser);
                flags_of_options(v->controller_options, &parser);
                flags_of_text(v->help, &help);
                for (size_t i = 0; i < parser.n; i++)
                        if (option_is_refusal(v, parser.name[i]))
                                flags_add(&help, parser.name[i], strlen(parser.name[i]));
                flags_missing(&parser, &help, only_parser, sizeof(only_parser));
                flags_missing(&help, &parser, only_help, sizeof(only_help));
                if (only_parser[0] || only_help[0] ? ++failed : 0)
                        print_error("%s: its parser takes, and its --help does not name:%s; its --help names, and its "
                                 "parser does not take:%s\n", v->name, only_parser[0] ? only_parser : " (none)",
                                 only_help[0] ? only_help : " (none)");
                flags_done(&parser);
                flags_done(&help);
        }
        assert_true(n >= 17); /* the table was read */
        assert_int_equal(failed, 0);
}

static void test_overview_names_the_options(void **state) {
        (void) state;
        size_t failed = 0;
        for (const Verb *v = verbs; v->name; v++) {
                Flags parser = {}, line = {};
                char only_parser[1024], only_line[1024];
                flags_of_options(v->options, &parser);
                flags_of_text(v->synopsis, &line);
                for (size_t i = 0; i < parser.n; i++)
                        if (option_is_refusal(v, parser.name[i]))
                                flags_add(&line, parser.name[i], strlen(parser.name[i]));
                flags_missing(&parser, &line, only_parser, sizeof(only_parser));
                flags_missing(&line, &parser, only_line, sizeof(only_line));
                bool stands_for = strstr(v->synopsis, "[OPTIONS]") || strstr(v->synopsis, "[flags]");
                if (only_line[0] || (only_parser[0] && !stands_for) ? ++failed : 0)
                        print_error("%s: its line of the overview ('%s') leaves out:%s; names what it does not take:%s\n",
                                 v->name, v->synopsis, only_parser[0] ? only_parser : " (none)",
                                 only_line[0] ? only_line : " (none)");
                flags_done(&parser);
                flags_done(&line);
        }
        assert_int_equal(failed, 0);
}

/* The reader itself: what it takes for a flag, and what it leaves. */
static void test_flags_of_text(void **state) {
        (void) state;
        Flags f = {};
        flags_of_text("submit [--id ID] [--wait|--no-wait] -- ARGV... a--b, --x-; (--dry-run)", &f);
        assert_int_equal(f.n, 5);
        assert_true(flags_has(&f, "id") && flags_has(&f, "wait") && flags_has(&f, "no-wait") && flags_has(&f, "x") &&
                    flags_has(&f, "dry-run"));
        flags_done(&f);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_flags_of_text),
                cmocka_unit_test(test_parser_and_help_agree),
                cmocka_unit_test(test_overview_names_the_options),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
