/* SPDX-License-Identifier: MIT */
/* A word a shell reads back as exactly s, for the commands the worker prints for a person to
 * paste (the approve command): s itself when it has only characters no shell treats
 * specially, else s in single quotes (each ' written as '\\''). NULL when out of memory. */
#pragma once

char *shell_word(const char *s);
