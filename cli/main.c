/* SPDX-License-Identifier: MIT */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli/cli.h"
#include "controller/harness-prefix.h"
#include "common/log.h"

void cli_print_overview(bool to_stderr) {
        FILE *f = to_stderr ? stderr : stdout;

        fputs("Usage: tentaflake-worker [--config FILE | --name NAME] COMMAND [ARGS]\n"
              "\n"
              "Runs untrusted commands from an agent's inbox in disposable gVisor capsules,\n"
              "and serves server-dispatched validation jobs with signed attestations.\n"
              "\n"
              "Commands:\n",
              f);
        for (const Verb *v = verbs; v->name; v++)
                fprintf(f, "  %s\n", v->synopsis);
        fputs("\n"
              "Options:\n"
              "  --config FILE   the worker configuration (JSON, one per controller); before or\n"
              "                  after the command; default $TENTAFLAKE_WORKER_CONFIG\n"
              "  --name NAME     the configuration " CLI_CONFIG_DIR "/NAME.json\n"
              "  --version       print the version and exit (also: version)\n"
              "  -h, --help      print this help and exit (also: help [COMMAND]); COMMAND --help\n"
              "                  for one command\n"
              "\n"
              "The commands that take a configuration must be run as root.\n"
              "Exit status: 0 success, 1 the operation failed, 2 usage error.\n",
              f);
}

int cli_usage_error(const char *verb, const char *fmt, ...) {
        char msg[1024];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (verb)
                log_error("%s: %s (see 'tentaflake-worker %s --help')", verb, msg, verb);
        else
                log_error("%s (see 'tentaflake-worker --help')", msg);
        return EXIT_USAGE;
}

void cli_report_line(void *userdata, int level, const char *line) {
        (void) userdata;
        log_internal(level, 0, "%s", line);
}

const Verb *verb_find(const char *name) {
        for (const Verb *v = verbs; v->name; v++)
                if (streq(v->name, name))
                        return v;
        return NULL;
}

/* Levenshtein distance of two short words, capped: enough to suggest a verb for a typo. */
static size_t edit_distance(const char *a, const char *b) {
        size_t la = strlen(a), lb = strlen(b), row[33];
        if (la > 32 || lb > 32)
                return SIZE_MAX;
        for (size_t j = 0; j <= lb; j++)
                row[j] = j;
        for (size_t i = 1; i <= la; i++) {
                size_t diag = row[0];
                row[0] = i;
                for (size_t j = 1; j <= lb; j++) {
                        size_t up = row[j];
                        size_t best = diag + (a[i - 1] != b[j - 1]);
                        best = MIN(best, up + 1);
                        best = MIN(best, row[j - 1] + 1);
                        row[j] = best;
                        diag = up;
                }
        }
        return row[lb];
}

/* The verb a mistyped name most likely meant: the closest within two edits, else the one verb
 * it is the start of; NULL when nothing is near. */
const Verb *verb_suggest(const char *name) {
        const Verb *best = NULL, *prefix_of = NULL;
        size_t best_d = 3, n = strlen(name), n_prefix = 0;
        for (const Verb *v = verbs; v->name; v++) {
                size_t d = edit_distance(name, v->name);
                if (d < best_d) {
                        best = v;
                        best_d = d;
                }
                if (n >= 2 && strncmp(v->name, name, n) == 0) {
                        prefix_of = v;
                        n_prefix++;
                }
        }
        return best ? best : n_prefix == 1 ? prefix_of : NULL;
}

/* Where the configuration comes from: --config FILE, --name NAME (the conventional
 * CLI_CONFIG_DIR/NAME.json), or $TENTAFLAKE_WORKER_CONFIG; at most one of the first two. */
typedef struct ConfigChoice {
        const char *path, *name;
        char buf[sizeof(CLI_CONFIG_DIR) + 64];
} ConfigChoice;

static int choose_config(ConfigChoice *c, const char *verb, const char *opt, const char *value) {
        if (c->path || c->name)
                return cli_usage_error(verb, "give one of --config and --name, once");
        if (streq(opt, "--name")) {
                if (!config_name_is_valid(value))
                        return cli_usage_error(verb, "--name '%s' is not a worker name (^[a-z0-9][a-z0-9-]{0,47}$)",
                                               value);
                c->name = value;
        } else
                c->path = value;
        return 0;
}

/* A verb that takes a configuration accepts --config and --name after its name too: take them
 * out of its argv (up to a "--") before the verb parses the rest. */
static int take_config_options(int *argc, char **argv, ConfigChoice *c) {
        int out = 1;
        for (int i = 1; i < *argc; i++) {
                const char *a = argv[i];
                if (streq(a, "--")) {
                        while (i < *argc)
                                argv[out++] = argv[i++];
                        break;
                }
                const char *opt = strncmp(a, "--config", 8) == 0 ? "--config"
                                  : strncmp(a, "--name", 6) == 0 ? "--name"
                                                                 : NULL;
                const char *rest = opt ? a + strlen(opt) : NULL;
                if (!opt || (*rest && *rest != '=')) {
                        argv[out++] = argv[i];
                        continue;
                }
                const char *value = *rest ? rest + 1 : i + 1 < *argc ? argv[++i] : NULL;
                if (!value || !*value)
                        return cli_usage_error(argv[0], "option '%s' needs a value", opt);
                int r = choose_config(c, argv[0], opt, value);
                if (r)
                        return r;
        }
        argv[out] = NULL;
        *argc = out;
        return 0;
}

static const char *config_path_of(ConfigChoice *c) {
        if (c->name) {
                snprintf(c->buf, sizeof(c->buf), CLI_CONFIG_DIR "/%s.json", c->name);
                return c->buf;
        }
        if (c->path)
                return c->path;
        const char *env = getenv("TENTAFLAKE_WORKER_CONFIG");
        return env && *env ? env : NULL;
}

/* `help [COMMAND]` and `version`: the same as --help and --version. */
static int run_builtin(int argc, char **argv) {
        if (streq(argv[0], "version")) {
                if (argc > 1 && (streq(argv[1], "--help") || streq(argv[1], "-h"))) {
                        fputs("Usage: tentaflake-worker version\n\nPrint the version and exit (as --version).\n", stdout);
                        return 0;
                }
                if (argc > 1)
                        return cli_usage_error("version", "unexpected argument '%s'", argv[1]);
                printf("tentaflake-worker %s\n", TFW_VERSION);
                return 0;
        }
        if (argc > 2)
                return cli_usage_error("help", "unexpected argument '%s'", argv[2]);
        if (argc == 1 || streq(argv[1], "--help") || streq(argv[1], "-h")) {
                cli_print_overview(false);
                return 0;
        }
        const Verb *v = verb_find(argv[1]);
        if (!v) {
                const Verb *s = verb_suggest(argv[1]);
                return s ? cli_usage_error("help", "unknown command '%s'; did you mean '%s'?", argv[1], s->name)
                         : cli_usage_error("help", "unknown command '%s'", argv[1]);
        }
        fputs(v->help, stdout);
        return 0;
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                {"config", required_argument, NULL, 'c'},
                {"name", required_argument, NULL, 'n'},
                {"version", no_argument, NULL, 'V'},
                {"help", no_argument, NULL, 'h'},
                {},
        };
        ConfigChoice choice = {};
        _cleanup_config_ Config *config = NULL;
        int c, r;

        /* Every mode the worker creates is chosen in the code (results are group-readable by
         * design); never "other" bits, whatever umask the caller or a unit's UMask= gave. */
        (void) umask(0027);
        /* The soft descriptor limit up to the hard one (systemd's services start at 1024): a
         * capsule with egress holds 256 socket ends while it boots, and serve's lanes boot at
         * once. Every fd is close-on-exec, and runsc and the capsule set their own limits. */
        struct rlimit nofile;
        if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
                nofile.rlim_cur = MIN(nofile.rlim_max, (rlim_t) 65536);
                (void) setrlimit(RLIMIT_NOFILE, &nofile);
        }

        /* Run as Claude Code's shell prefix (controller/harness-prefix.h): `shell`, nothing else. */
        const char *base = argv[0] ? strrchr(argv[0], '/') : NULL;
        if (argv[0] && streq(base ? base + 1 : argv[0], HARNESS_PREFIX_NAME))
                return shell_prefix_main(argc, argv);

        /* '+': stop at the verb, whose own options are parsed by the verb. */
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
                switch (c) {
                case 'c':
                case 'n':
                        if ((r = choose_config(&choice, NULL, c == 'c' ? "--config" : "--name", optarg)))
                                return r;
                        break;
                case 'V':
                        printf("tentaflake-worker %s\n", TFW_VERSION);
                        return 0;
                case 'h':
                        cli_print_overview(false);
                        return 0;
                case ':':
                        return cli_usage_error(NULL, "option '%s' needs a value", argv[optind - 1]);
                default:
                        return cli_usage_error(NULL, "unknown option '%s'", argv[optind - 1]);
                }
        }
        if (optind >= argc) {
                cli_print_overview(true);
                return EXIT_USAGE;
        }

        const char *name = argv[optind];
        int vargc = argc - optind;
        char **vargv = argv + optind;
        if (streq(name, "help") || streq(name, "version"))
                return run_builtin(vargc, vargv);
        const Verb *v = verb_find(name);
        if (!v) {
                const Verb *s = verb_suggest(name);
                return s ? cli_usage_error(NULL, "unknown command '%s'; did you mean '%s'?", name, s->name)
                         : cli_usage_error(NULL, "unknown command '%s'", name);
        }

        if (cli_verb_help_requested(vargc, vargv, v))
                return 0;

        if (!v->needs_config) {
                if (choice.path || choice.name)
                        return cli_usage_error(name, "this command does not take --config or --name");
                return v->run(vargc, vargv, NULL, NULL);
        }
        if ((r = take_config_options(&vargc, vargv, &choice)))
                return r;
        /* The controller's own form of the verb: not root and no configuration named. */
        if (v->controller_run && geteuid() != 0 && !choice.path && !choice.name)
                return v->controller_run(vargc, vargv);
        /* Before anything else: a non-root caller would otherwise meet the first directory it
         * cannot open, named as if it were the problem. */
        if (geteuid() != 0) {
                log_error("%s: must be run as root (the worker's state and its capsules are root's)", name);
                return EXIT_FAILURE;
        }
        const char *config_path = config_path_of(&choice);
        if (!config_path)
                return cli_usage_error(name, "no configuration: give --config FILE or --name NAME, or set "
                                             "TENTAFLAKE_WORKER_CONFIG");
        TfwError e = {0};
        if (config_load(config_path, &config, &e) < 0) {
                log_error("%s", e.message);
                return EXIT_FAILURE;
        }
        return v->run(vargc, vargv, config, config_path);
}
