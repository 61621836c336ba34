/* SPDX-License-Identifier: MIT */
#include "artifacts/archive-dl.h"

static void *archive_dl;

DLSYM_PROTOTYPE(archive_entry_copy_pathname) = NULL;
DLSYM_PROTOTYPE(archive_entry_filetype) = NULL;
DLSYM_PROTOTYPE(archive_entry_free) = NULL;
DLSYM_PROTOTYPE(archive_entry_hardlink) = NULL;
DLSYM_PROTOTYPE(archive_entry_mtime) = NULL;
DLSYM_PROTOTYPE(archive_entry_mtime_nsec) = NULL;
DLSYM_PROTOTYPE(archive_entry_new) = NULL;
DLSYM_PROTOTYPE(archive_entry_pathname) = NULL;
DLSYM_PROTOTYPE(archive_entry_perm) = NULL;
DLSYM_PROTOTYPE(archive_entry_set_filetype) = NULL;
DLSYM_PROTOTYPE(archive_entry_set_perm) = NULL;
DLSYM_PROTOTYPE(archive_entry_set_size) = NULL;
DLSYM_PROTOTYPE(archive_entry_symlink) = NULL;
DLSYM_PROTOTYPE(archive_errno) = NULL;
DLSYM_PROTOTYPE(archive_error_string) = NULL;
DLSYM_PROTOTYPE(archive_read_data_block) = NULL;
DLSYM_PROTOTYPE(archive_read_free) = NULL;
DLSYM_PROTOTYPE(archive_read_new) = NULL;
DLSYM_PROTOTYPE(archive_read_next_header) = NULL;
DLSYM_PROTOTYPE(archive_read_open) = NULL;
DLSYM_PROTOTYPE(archive_read_open_memory) = NULL;
DLSYM_PROTOTYPE(archive_read_support_format_empty) = NULL;
DLSYM_PROTOTYPE(archive_read_support_format_tar) = NULL;
DLSYM_PROTOTYPE(archive_set_error) = NULL;
DLSYM_PROTOTYPE(archive_write_close) = NULL;
DLSYM_PROTOTYPE(archive_write_data) = NULL;
DLSYM_PROTOTYPE(archive_write_free) = NULL;
DLSYM_PROTOTYPE(archive_write_header) = NULL;
DLSYM_PROTOTYPE(archive_write_new) = NULL;
DLSYM_PROTOTYPE(archive_write_open_memory) = NULL;
DLSYM_PROTOTYPE(archive_write_set_format_pax) = NULL;

int dlopen_libarchive(TfwError *e) {
        return dlopen_many_sym(&archive_dl, TFW_LIBARCHIVE, e,
                               DLSYM_ARG(archive_entry_copy_pathname),
                               DLSYM_ARG(archive_entry_filetype),
                               DLSYM_ARG(archive_entry_free),
                               DLSYM_ARG(archive_entry_hardlink),
                               DLSYM_ARG(archive_entry_mtime),
                               DLSYM_ARG(archive_entry_mtime_nsec),
                               DLSYM_ARG(archive_entry_new),
                               DLSYM_ARG(archive_entry_pathname),
                               DLSYM_ARG(archive_entry_perm),
                               DLSYM_ARG(archive_entry_set_filetype),
                               DLSYM_ARG(archive_entry_set_perm),
                               DLSYM_ARG(archive_entry_set_size),
                               DLSYM_ARG(archive_entry_symlink),
                               DLSYM_ARG(archive_errno),
                               DLSYM_ARG(archive_error_string),
                               DLSYM_ARG(archive_read_data_block),
                               DLSYM_ARG(archive_read_free),
                               DLSYM_ARG(archive_read_new),
                               DLSYM_ARG(archive_read_next_header),
                               DLSYM_ARG(archive_read_open),
                               DLSYM_ARG(archive_read_open_memory),
                               DLSYM_ARG(archive_read_support_format_empty),
                               DLSYM_ARG(archive_read_support_format_tar),
                               DLSYM_ARG(archive_set_error),
                               DLSYM_ARG(archive_write_close),
                               DLSYM_ARG(archive_write_data),
                               DLSYM_ARG(archive_write_free),
                               DLSYM_ARG(archive_write_header),
                               DLSYM_ARG(archive_write_new),
                               DLSYM_ARG(archive_write_open_memory),
                               DLSYM_ARG(archive_write_set_format_pax));
}
