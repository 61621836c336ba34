/* SPDX-License-Identifier: MIT */
/* libarchive, loaded by artifact import (job processes) only: see common/dlopen-util.h. */
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include "common/dlopen-util.h"

extern DLSYM_PROTOTYPE(archive_entry_copy_pathname);
extern DLSYM_PROTOTYPE(archive_entry_filetype);
extern DLSYM_PROTOTYPE(archive_entry_free);
extern DLSYM_PROTOTYPE(archive_entry_hardlink);
extern DLSYM_PROTOTYPE(archive_entry_mtime);
extern DLSYM_PROTOTYPE(archive_entry_mtime_nsec);
extern DLSYM_PROTOTYPE(archive_entry_new);
extern DLSYM_PROTOTYPE(archive_entry_pathname);
extern DLSYM_PROTOTYPE(archive_entry_perm);
extern DLSYM_PROTOTYPE(archive_entry_set_filetype);
extern DLSYM_PROTOTYPE(archive_entry_set_perm);
extern DLSYM_PROTOTYPE(archive_entry_set_size);
extern DLSYM_PROTOTYPE(archive_entry_symlink);
extern DLSYM_PROTOTYPE(archive_errno);
extern DLSYM_PROTOTYPE(archive_error_string);
extern DLSYM_PROTOTYPE(archive_read_data_block);
extern DLSYM_PROTOTYPE(archive_read_free);
extern DLSYM_PROTOTYPE(archive_read_new);
extern DLSYM_PROTOTYPE(archive_read_next_header);
extern DLSYM_PROTOTYPE(archive_read_open);
extern DLSYM_PROTOTYPE(archive_read_open_memory);
extern DLSYM_PROTOTYPE(archive_read_support_format_empty);
extern DLSYM_PROTOTYPE(archive_read_support_format_tar);
extern DLSYM_PROTOTYPE(archive_set_error);
extern DLSYM_PROTOTYPE(archive_write_close);
extern DLSYM_PROTOTYPE(archive_write_data);
extern DLSYM_PROTOTYPE(archive_write_free);
extern DLSYM_PROTOTYPE(archive_write_header);
extern DLSYM_PROTOTYPE(archive_write_new);
extern DLSYM_PROTOTYPE(archive_write_open_memory);
extern DLSYM_PROTOTYPE(archive_write_set_format_pax);

/* Load libarchive (TFW_LIBARCHIVE) and every sym_ above; 0 when already loaded. Call before
 * anything confines the process (the parser's seccomp filter forbids mmap of new files). */
int dlopen_libarchive(TfwError *e);
