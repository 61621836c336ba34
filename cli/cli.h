/* SPDX-License-Identifier: MIT */
/* The command line of contract section 1: a table of verbs, each with its own options and
 * --help. main() is the only place that prints errors and chooses the exit status:
 * 0 success, 1 the operation failed, 2 usage error. */
#pragma once

#include <getopt.h>
#include <stdbool.h>

#include "orchestrator/worker.h"
#include "parser/config.h"

#define EXIT_USAGE 2

/* Where --name NAME looks: CLI_CONFIG_DIR/NAME.json, the conventional place (docs/install.md). */
#define CLI_CONFIG_DIR WORKER_CONFIG_DIR

typedef struct Verb {
        const char *name;
        const char *synopsis;   /* one line for the overview */
        const char *help;       /* the verb's --help text */
        bool needs_config;
        /* argv[0] is the verb name; config is NULL for verbs that do not take --config.
         * Returns an exit status. */
        int (*run)(int argc, char **argv, const Config *config, const char *config_path);
        /* When not NULL: what the verb does for a caller that is not root and names no
         * configuration (--config, --name): the controller's own form (`list`; contract
         * section 9), with no configuration. Root's form is unchanged. */
        int (*controller_run)(int argc, char **argv);
        /* The options the verb's parser takes (getopt_long's table, the one run parses with), and
         * controller_run's; NULL: none. Besides --help and --config/--name (cli/main.c), these
         * are the flags its help names, no more and no fewer (tests/unit/test-cli-options.c;
         * tests/unit/test-man-help.sh holds the man page to the help). */
        const struct option *options;
        const struct option *controller_options;
} Verb;

const Verb *verb_find(const char *name);
/* The verb a mistyped name most likely meant, or NULL. */
const Verb *verb_suggest(const char *name);
extern const Verb verbs[];

/* Print the overview to stdout (--help) or stderr (usage errors). */
void cli_print_overview(bool to_stderr);

/* Report a usage error for verb (may be NULL) and return EXIT_USAGE. */
int cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* If the verb's arguments ask for --help (before any "--"), print the verb's help to stdout
 * and return true: the caller exits 0. */
bool cli_verb_help_requested(int argc, char **argv, const Verb *v);

/* The library's event lines (the daemon's, serve's), logged: stderr, with sd-daemon
 * priorities under systemd (cli/main.c). */
void cli_report_line(void *userdata, int level, const char *line);

/* `serve`'s command line (cli/serve.c): an exit status. */
int cli_serve(int argc, char **argv);

/* The option tables of the verbs parsed outside cli/verbs.c (Verb.options). */
extern const struct option serve_options[], submit_options[], apply_options[], mcp_options[],
        list_controller_options[], shell_options[], harness_options[];

/* The controller's verbs (cli/controller.c). */
int verb_submit(int argc, char **argv, const Config *config, const char *config_path);
int verb_apply(int argc, char **argv, const Config *config, const char *config_path);
int verb_mcp(int argc, char **argv, const Config *config, const char *config_path);
int verb_list_controller(int argc, char **argv);
/* `shell` and `harness` (cli/shell.c). */
int verb_shell(int argc, char **argv, const Config *config, const char *config_path);
int verb_harness(int argc, char **argv, const Config *config, const char *config_path);
/* main() as tentaflake-worker-shell, the harness's shell prefix: `shell --apply MODE -c ...`. */
int shell_prefix_main(int argc, char **argv);
