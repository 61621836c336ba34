/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
/* The controller's `shell` and `harness` verbs (contract section 9; docs/controller.md, "Make
 * the worker the agent's only shell"): parsing, the MCP pass-through's exec and exit statuses;
 * the work is in controller/shell.c and controller/harness.c. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/log.h"
#include "common/macro.h"
#include "controller/harness.h"
#include "controller/harness-prefix.h"
#include "controller/outcome.h"
#include "controller/shell-string.h"
#include "controller/shell.h"
#include "controller/terminal.h"

enum { OPT_WORKSPACE = 0x400, OPT_RESULTS, OPT_APPLY, OPT_TIMEOUT, OPT_DRY_RUN, OPT_REMOVE, OPT_PREFIX_PROGRAM };

/* --apply auto|review: 0 auto, 1 review, -1 neither. */
static int parse_apply(const char *s) {
        return streq(s, "auto") ? 0 : streq(s, "review") ? 1 : -1;
}

/* The worker's own `mcp`, started by a harness through its shell prefix: run here, unwrapped,
 * when the string is exactly this program's path and "mcp". */
static int exec_own_mcp(const char *exe) {
        char *const argv[] = {(char *) exe, (char *) "mcp", NULL};
        execv(exe, argv);
        log_error("shell: cannot run '%s mcp': %m", exe);
        return CONTROLLER_EXIT_NOT_RUN;
}

const struct option shell_options[] = {
        {"workspace", required_argument, NULL, OPT_WORKSPACE},
        {"results", required_argument, NULL, OPT_RESULTS},
        {"apply", required_argument, NULL, OPT_APPLY},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {},
};

int verb_shell(int argc, char **argv, const Config *config, const char *config_path) {
        ShellOptions o = {};
        int c;
        (void) config;
        (void) config_path;

        opterr = 0;
        optind = 0;
        while ((c = getopt_long(argc, argv, "+:c:", shell_options, NULL)) != -1) {
                if (c == OPT_WORKSPACE)
                        o.workspace = optarg;
                else if (c == OPT_RESULTS)
                        o.results = optarg;
                else if (c == OPT_TIMEOUT)
                        o.timeout = optarg;
                else if (c == 'c')
                        o.string = optarg;
                else if (c == OPT_APPLY) {
                        int a = parse_apply(optarg);
                        if (a < 0)
                                return cli_usage_error("shell", "--apply takes auto or review, not '%s'", optarg);
                        o.review = a == 1;
                } else if (c == ':')
                        return cli_usage_error("shell", "option '%s' needs a value", argv[optind - 1]);
                else
                        return cli_usage_error("shell", "unknown option '%s'", argv[optind - 1]);
        }
        if (o.string && optind < argc)
                return cli_usage_error("shell", "-c STRING takes no other argument ('%s')", argv[optind]);
        if (!o.string && optind >= argc)
                return cli_usage_error("shell", "missing the command (shell -c STRING, or shell -- ARGV...)");
        o.argv = argv + optind;
        o.argc = (size_t) (argc - optind);

        _cleanup_free_ char *exe = realpath("/proc/self/exe", NULL);
        if (o.string && shell_is_own_mcp(o.string, exe))
                return exec_own_mcp(exe);

        /* A harness that gives up on the command signals it: the job is cancelled (a signalfd,
         * polled beside the wait's inotify watch: none is missed between two looks). */
        sigset_t stop;
        sigemptyset(&stop);
        sigaddset(&stop, SIGTERM);
        sigaddset(&stop, SIGINT);
        sigaddset(&stop, SIGHUP);
        int stop_fd = sigprocmask(SIG_BLOCK, &stop, NULL) < 0 ? -1 : signalfd(-1, &stop, SFD_CLOEXEC | SFD_NONBLOCK);
        if (stop_fd >= 0)
                o.stop_fd = &stop_fd;
        else
                (void) sigprocmask(SIG_UNBLOCK, &stop, NULL); /* without the fd, a signal ends shell as before */
        TfwError e = {0};
        int status = 0;
        if (controller_shell_on_terminal(&o, stdout, stderr, &status, &e) < 0) {
                log_error("shell: %s%s%s%s", e.message, e.code ? " (" : "", e.code ? e.code : "", e.code ? ")" : "");
                return CONTROLLER_EXIT_NOT_RUN;
        }
        fflush(stdout);
        return status;
}

/* Run as tentaflake-worker-shell (a link to this program: cli/main.c), Claude Code's shell prefix
 * (controller/harness-prefix.h): `PREFIX STRING` is `shell --apply MODE -c STRING`, MODE from
 * TENTAFLAKE_SHELL_APPLY (auto when unset; anything else is refused: 125, nothing ran). */
int shell_prefix_main(int argc, char **argv) {
        const char *mode = getenv(HARNESS_APPLY_VAR) ?: "auto";
        if (parse_apply(mode) < 0) {
                log_error(HARNESS_PREFIX_NAME ": " HARNESS_APPLY_VAR " is auto or review, not '%s': nothing ran", mode);
                return CONTROLLER_EXIT_NOT_RUN;
        }
        _cleanup_free_ char **v = calloc((size_t) argc + 5, sizeof(char *));
        if (!v) {
                log_error(HARNESS_PREFIX_NAME ": out of memory");
                return CONTROLLER_EXIT_NOT_RUN;
        }
        size_t k = 0;
        v[k++] = (char *) "shell";
        v[k++] = (char *) "--apply";
        v[k++] = (char *) mode;
        if (argc > 1)
                v[k++] = (char *) "-c";
        for (int i = 1; i < argc; i++)
                v[k++] = argv[i];
        return verb_shell((int) k, v, NULL, NULL);
}

const struct option harness_options[] = {
        {"workspace", required_argument, NULL, OPT_WORKSPACE},
        {"apply", required_argument, NULL, OPT_APPLY},
        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
        {"remove", no_argument, NULL, OPT_REMOVE},
        {"prefix-program", required_argument, NULL, OPT_PREFIX_PROGRAM},
        {},
};

int verb_harness(int argc, char **argv, const Config *config, const char *config_path) {
        HarnessOptions o = {};
        bool apply_given = false;
        int c;
        (void) config;
        (void) config_path;

        opterr = 0;
        optind = 0;
        while ((c = getopt_long(argc, argv, ":", harness_options, NULL)) != -1) {
                if (c == OPT_WORKSPACE)
                        o.workspace = optarg;
                else if (c == OPT_DRY_RUN)
                        o.dry_run = true;
                else if (c == OPT_REMOVE)
                        o.remove = true;
                else if (c == OPT_PREFIX_PROGRAM)
                        o.prefix_program = optarg;
                else if (c == OPT_APPLY) {
                        int a = parse_apply(optarg);
                        if (a < 0)
                                return cli_usage_error("harness", "--apply takes auto or review, not '%s'", optarg);
                        o.review = a == 1;
                        apply_given = true;
                } else if (c == ':')
                        return cli_usage_error("harness", "option '%s' needs a value", argv[optind - 1]);
                else
                        return cli_usage_error("harness", "unknown option '%s'", argv[optind - 1]);
        }
        if (optind + 1 != argc)
                return cli_usage_error("harness", optind == argc ? "missing the harness (claude-code or codex)"
                                                                 : "unexpected argument '%s'",
                                       argv[optind + 1 < argc ? optind + 1 : optind]);
        if (streq(argv[optind], "claude-code"))
                o.kind = HARNESS_CLAUDE_CODE;
        else if (streq(argv[optind], "codex"))
                o.kind = HARNESS_CODEX;
        else
                return cli_usage_error("harness", "unknown harness '%s' (claude-code or codex)", argv[optind]);
        if (o.remove && apply_given)
                return cli_usage_error("harness", "--remove takes no --apply");
        if (o.prefix_program && (o.remove || o.kind == HARNESS_CODEX))
                return cli_usage_error("harness", "--prefix-program is for installing claude-code's shell prefix");
        if (o.kind == HARNESS_CODEX && apply_given)
                return cli_usage_error("harness", "codex: its shell is switched off, not routed: --apply has nothing to set "
                                                  "(the MCP run tool takes apply per call)");

        _cleanup_free_ char *exe = realpath("/proc/self/exe", NULL);
        if (!exe) {
                log_error("harness: cannot find this program's own path: %m");
                return 1;
        }
        o.exe = exe;
        TfwError e = {0};
        if (controller_harness(&o, stdout, &e) < 0) {
                log_error("harness %s: %s", argv[optind], e.message);
                return 1;
        }
        return 0;
}
