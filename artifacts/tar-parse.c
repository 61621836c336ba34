/* SPDX-License-Identifier: MIT */
/* The libarchive loop of the confined parser: tar stream in, frames out (import-internal.h). */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <string.h>

#include "artifacts/archive-dl.h"
#include "artifacts/import-internal.h"
#include "common/macro.h"

static void archive_read_freep(struct archive **a) {
        if (*a)
                sym_archive_read_free(*a);
}
#define _cleanup_archive_read_ _cleanup_(archive_read_freep)

int artifact_archive_new(struct archive **ret) {
        int r = dlopen_libarchive(NULL);
        if (r < 0)
                return r;

        struct archive *a = sym_archive_read_new();
        if (!a)
                return -ENOMEM;
        /* The tar reader covers v7, ustar, pax and GNU tar. No compression filter is enabled:
         * the channel is local, and every decompressor is more parser and a bomb to bound. */
        /* "empty" accepts a stream of zero bytes only: no artifacts. */
        if (sym_archive_read_support_format_tar(a) != ARCHIVE_OK ||
            sym_archive_read_support_format_empty(a) != ARCHIVE_OK) {
                sym_archive_read_free(a);
                return -EIO;
        }
        *ret = a;
        return 0;
}

static int emit_data(FrameOut *o, int64_t offset, const uint8_t *p, size_t size) {
        while (size > 0) {
                size_t n = MIN(size, FRAME_DATA_MAX);
                uint64_t off = (uint64_t) offset;
                int r = frame_out_put(o, FRAME_DATA, &off, sizeof(off), p, n);
                if (r < 0)
                        return r;
                p += n;
                size -= n;
                offset += (int64_t) n;
        }
        return 0;
}

/* ATTR: what the cache profile keeps of an entry (the artifact profile ignores it). A negative
 * nanosecond count becomes a large one, which the writer refuses. */
static int emit_attr(FrameOut *o, struct archive_entry *ae) {
        uint8_t fixed[FRAME_ATTR_FIXED];
        int64_t sec = (int64_t) sym_archive_entry_mtime(ae);
        uint32_t nsec = (uint32_t) sym_archive_entry_mtime_nsec(ae);
        uint32_t perm = (uint32_t) sym_archive_entry_perm(ae);
        const char *target = sym_archive_entry_symlink(ae);
        /* As for names: one byte more than the writer accepts, so it can name the refusal. */
        size_t n = target ? strnlen(target, ARTIFACT_LINK_MAX + 1) : 0;

        memcpy(fixed, &sec, sizeof(sec));
        memcpy(fixed + 8, &nsec, sizeof(nsec));
        memcpy(fixed + 12, &perm, sizeof(perm));
        return frame_out_put(o, FRAME_ATTR, fixed, sizeof(fixed), target, n);
}

static int fail_archive(FrameOut *o, struct archive *a, const char *what) {
        const char *msg = sym_archive_error_string(a);
        int r;

        /* E2BIG is what the parser's read callback says when the stream outgrows the limits. */
        if (sym_archive_errno(a) == E2BIG)
                r = frame_out_fail(o, FRAME_FAIL_TOO_LARGE, "%s", msg ? msg : "stream too long");
        else
                r = frame_out_fail(o, FRAME_FAIL_REJECTED, "malformed tar stream (%s): %s", what,
                                   msg ? msg : "unknown error");
        return r < 0 ? r : -EBADMSG;
}

int artifact_parse_tar(struct archive *a, FrameOut *o) {
        int r;

        for (;;) {
                struct archive_entry *ae;

                r = sym_archive_read_next_header(a, &ae);
                if (r == ARCHIVE_EOF)
                        return 0;
                /* A warning means libarchive dropped or mangled something (a name it could not
                 * convert, a malformed pax record): the stream is not what it claims. */
                if (r != ARCHIVE_OK)
                        return fail_archive(o, a, "header");

                const char *name = sym_archive_entry_pathname(ae);
                if (!name)
                        name = "";
                /* Send one byte more than the writer accepts so it can name the refusal. */
                size_t len = strnlen(name, ARTIFACT_NAME_MAX + 1);
                uint32_t head[2] = { (uint32_t) sym_archive_entry_filetype(ae), 0 };
                if (sym_archive_entry_hardlink(ae))
                        head[1] |= ENTRY_FLAG_HARDLINK;
                if (sym_archive_entry_symlink(ae))
                        head[1] |= ENTRY_FLAG_SYMLINK;
                r = emit_attr(o, ae);
                if (r >= 0)
                        r = frame_out_put(o, FRAME_ENTRY, head, sizeof(head), name, len);
                if (r < 0)
                        return r;

                uint64_t size = 0;
                if (head[0] == AE_IFREG && head[1] == 0)
                        for (;;) {
                                const void *buf;
                                size_t n;
                                int64_t off;

                                r = sym_archive_read_data_block(a, &buf, &n, &off);
                                if (r == ARCHIVE_EOF) {
                                        /* libarchive reports the entry's logical size here
                                         * (a sparse entry can end in a hole). */
                                        size = off > 0 ? (uint64_t) off : 0;
                                        break;
                                }
                                if (r != ARCHIVE_OK)
                                        return fail_archive(o, a, "data");
                                if (off < 0)
                                        return fail_archive(o, a, "negative offset");
                                r = emit_data(o, off, buf, n);
                                if (r < 0)
                                        return r;
                        }
                r = frame_out_put(o, FRAME_END, &size, sizeof(size), NULL, 0);
                if (r < 0)
                        return r;
        }
}

static int discard(void *userdata _unused_, const uint8_t *buf _unused_, size_t len _unused_) {
        return 0;
}

static void archive_write_freep(struct archive **a) {
        if (*a)
                sym_archive_write_free(*a);
}

void artifact_parser_warm_up(void) {
        if (dlopen_libarchive(NULL) < 0)
                return;
        _cleanup_(archive_write_freep) struct archive *w = sym_archive_write_new();
        _cleanup_archive_read_ struct archive *a = NULL;
        static char buf[16384];
        size_t used = 0;
        FrameOut o;

        if (!w || sym_archive_write_set_format_pax(w) != ARCHIVE_OK ||
            sym_archive_write_open_memory(w, buf, sizeof(buf), &used) != ARCHIVE_OK)
                return;
        /* A non-ASCII name and a pax header: the paths that set up charset conversion. */
        static const char *const names[] = { "warm-up/\xc3\xa9t\xc3\xa9", "warm-up/plain" };
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                struct archive_entry *ae = sym_archive_entry_new();
                if (!ae)
                        return;
                sym_archive_entry_copy_pathname(ae, names[i]);
                sym_archive_entry_set_filetype(ae, AE_IFREG);
                sym_archive_entry_set_perm(ae, 0644);
                sym_archive_entry_set_size(ae, 1);
                if (sym_archive_write_header(w, ae) == ARCHIVE_OK)
                        (void) sym_archive_write_data(w, "x", 1);
                sym_archive_entry_free(ae);
        }
        if (sym_archive_write_close(w) != ARCHIVE_OK)
                return;

        if (artifact_archive_new(&a) < 0 || sym_archive_read_open_memory(a, buf, used) != ARCHIVE_OK)
                return;
        if (frame_out_init(&o, discard, NULL) < 0)
                return;
        (void) artifact_parse_tar(a, &o);
        frame_out_done(&o);
}
