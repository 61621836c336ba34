/* SPDX-License-Identifier: MIT */
/* A file name as a case-insensitive or normalising file system takes it: which ASCII name a
 * name stands for there, so that a check for ".git" cannot be passed with ".GIT", ".git. ",
 * "GIT~1" or ".g\u200cit" (git's own is_hfs_dotgit and is_ntfs_dotgit, issue 46 item 1).
 *
 * name_fold(): accepts a name of at most NAME_MAX bytes (no '/'); writes into out what it
 * folds to: ASCII letters in lowercase; the code points that some file system ignores
 * (Unicode's Default_Ignorable_Code_Point, which holds HFS+'s U+200C..U+200F, U+202A..U+202E,
 * U+206A..U+206F and U+FEFF) dropped; those that case folding or canonical decomposition turns
 * into ASCII letters (KELVIN SIGN, LONG S, the Latin ligatures, the dotted and dotless I, sharp
 * s) as those letters; then, as NTFS does, cut at a ':' (a stream) and trailing dots and spaces
 * removed. False when the name is not UTF-8, holds a NUL or any other non-ASCII code point:
 * then it stands for no ASCII name anywhere.
 * name_folded_is(): does a name that name_fold() gave folded stand for target, as below.
 * name_folds_to(): does name stand for target (lowercase ASCII: ".git", "head") on some such
 * file system: its fold is target, or, for a target that is no 8.3 name (a leading dot or more
 * than 8 characters), one of NTFS's short names for it (".git": "git~1"; ".gitmodules":
 * "gitmod~1", "gitmo~12", and the hashed form "gi" and four hex digits "~1".."~9").
 * path_component_folds_to(): any '/'-separated component of path. Conservative on purpose: a
 * name some file system may take for target counts, on every file system. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#define NAME_FOLD_MAX (NAME_MAX + 1)

bool name_fold(const char *name, size_t len, char out[static NAME_FOLD_MAX]);
bool name_folded_is(const char *folded, const char *target);
bool name_folds_to(const char *name, size_t len, const char *target);
bool path_component_folds_to(const char *path, const char *target);
