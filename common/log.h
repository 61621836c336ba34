/* SPDX-License-Identifier: MIT */
/* Logging to stderr. Under systemd (JOURNAL_STREAM set) every line carries an sd-daemon
 * priority prefix ("<3>") so journald keeps the level; on a terminal the line starts with the
 * program name instead. Library code logs at debug at most; main() logs errors, once. */
#pragma once

#include <stdbool.h>
#include <syslog.h>

#include "macro.h"

void log_set_max_level(int level);  /* LOG_ERR .. LOG_DEBUG; default LOG_INFO */
int log_get_max_level(void);
void log_set_prefix_mode(bool sd_prefix);  /* force the "<N>" form on or off */

/* Returns -err when err != 0 (so `return log_error_errno(r, ...)` works), else 0. */
int log_internal(int level, int err, const char *fmt, ...) _printf_(3, 4);

#define log_debug(...) log_internal(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...) log_internal(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...) log_internal(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) log_internal(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...) log_internal(LOG_ERR, 0, __VA_ARGS__)
#define log_error_errno(err, ...) log_internal(LOG_ERR, (err), __VA_ARGS__)
