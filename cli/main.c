/* SPDX-License-Identifier: MIT */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "common/log.h"

void cli_print_overview(bool to_stderr) {
        FILE *f = to_stderr ? stderr : stdout;

        fputs("Usage: tentaflake-worker [--config FILE] COMMAND [ARGS]\n"
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
              "  --config FILE   the worker configuration (JSON, one per controller)\n"
              "  --version       print the version and exit\n"
              "  --help          print this help and exit; COMMAND --help for one command\n"
              "\n"
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

int main(int argc, char **argv) {
        static const struct option opts[] = {
                {"config", required_argument, NULL, 'c'},
                {"version", no_argument, NULL, 'V'},
                {"help", no_argument, NULL, 'h'},
                {},
        };
        const char *config_path = NULL;
        _cleanup_config_ Config *config = NULL;
        int c;

        /* Every mode the worker creates is chosen in the code (results are group-readable by
         * design); never "other" bits, whatever umask the caller or a unit's UMask= gave. */
        (void) umask(0027);

        /* '+': stop at the verb, whose own options are parsed by the verb. */
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+:", opts, NULL)) != -1) {
                switch (c) {
                case 'c':
                        config_path = optarg;
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
        const Verb *v = verb_find(name);
        if (!v)
                return cli_usage_error(NULL, "unknown command '%s'", name);

        int vargc = argc - optind;
        char **vargv = argv + optind;
        if (cli_verb_help_requested(vargc, vargv, v))
                return 0;

        if (v->needs_config) {
                TfwError e = {0};
                if (!config_path)
                        return cli_usage_error(name, "--config FILE is required");
                if (config_load(config_path, &config, &e) < 0) {
                        log_error("%s", e.message);
                        return EXIT_FAILURE;
                }
        } else if (config_path)
                return cli_usage_error(name, "this command does not take --config");

        return v->run(vargc, vargv, config, config_path);
}
