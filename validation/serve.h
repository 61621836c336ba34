/* SPDX-License-Identifier: MIT */
/* `tentaflake-worker serve`: the validation plane's worker loop (contract section 8). */
#pragma once

/* Parse serve's flags (argv[0] is "serve") and run until stopped. Returns an exit status:
 * 0 after a clean shutdown, 1 when the worker stops on an error (401/403, bad key, no
 * sandbox), 2 on a usage error. */
int serve_main(int argc, char **argv);
