/* SPDX-License-Identifier: MIT */
/* The workspace stream: what snapshot_stream() writes while it walks the workspace, and what
 * the in-capsule init reads from its authenticated stdin (after the secret and
 * CAPSULE_INPUT_STREAM, capsule/protocol.h) and writes into /work. Header-only: the static
 * init includes it. docs/snapshot.md, "The stream". */
#pragma once

#include <stdint.h>

/* The workspace stream: records, integers little-endian.
 *   'D' u16 name length, name, u8 flags: a directory in the current one; it becomes the
 *       current directory until its 'U'
 *   'U' the current directory is complete; its parent is current again
 *   'F' u16 name length, name, u8 flags, u64 size, then exactly size bytes: a regular file
 *   'E' the whole tree was sent (only at the root): run the job
 *   'A' the walk failed (a ceiling, a special file, an error): run nothing
 * flags: SNAPSHOT_STREAM_EXEC when the source owner's x bit was set. Names are one component
 * (1..255 bytes, no '/' or NUL, not "." or ".."); no name appears twice in a directory. The
 * end of the channel before 'E' is the same as 'A'. */
#define SNAPSHOT_STREAM_DIR 'D'
#define SNAPSHOT_STREAM_UP 'U'
#define SNAPSHOT_STREAM_FILE 'F'
#define SNAPSHOT_STREAM_END 'E'
#define SNAPSHOT_STREAM_ABORT 'A'
#define SNAPSHOT_STREAM_EXEC 0x01
#define SNAPSHOT_STREAM_NAME_MAX 255
/* Longest record header: tag, length, name, flags, size. */
#define SNAPSHOT_STREAM_HEADER_MAX (1 + 2 + SNAPSHOT_STREAM_NAME_MAX + 1 + 8)

static inline void snapshot_stream_put_le(uint8_t *p, uint64_t v, unsigned n) {
        for (unsigned i = 0; i < n; i++)
                p[i] = (uint8_t) (v >> (8 * i));
}

static inline uint64_t snapshot_stream_get_le(const uint8_t *p, unsigned n) {
        uint64_t v = 0;
        for (unsigned i = 0; i < n; i++)
                v |= (uint64_t) p[i] << (8 * i);
        return v;
}
