/* SPDX-License-Identifier: MIT */
/* Git object ids in the SHA-256 object format (`git init --object-format=sha256`).
 *
 * A blob id is sha256("blob <decimal length>\0" + bytes). A tree object is the concatenation,
 * in git's order, of "<octal mode> <name>\0<32-byte id>" for each entry, and its id is
 * sha256("tree <length>\0" + that). Git's order compares names bytewise as if every
 * directory's name ended in '/' (so "a.c" sorts before the directory "a", and the directory
 * "a" before "a0"). Modes are written without leading zeros: 100644, 100755, 120000, 40000.
 *
 * The snapshot walker uses the tree builder directory by directory; the validation plane uses
 * git_tree_id_from_paths() to recompute a tree id from a flat manifest and compare it with
 * the id the server claims. Both only ever see bounded, validated names. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/sha256.h"

#define GIT_OID_SIZE SHA256_DIGEST_SIZE
#define GIT_OID_HEX_SIZE SHA256_HEX_SIZE

#define GIT_MODE_FILE 0100644U
#define GIT_MODE_EXECUTABLE 0100755U
#define GIT_MODE_SYMLINK 0120000U
#define GIT_MODE_TREE 040000U

/* Longest entry name accepted: a name must be creatable on Linux. */
#define GIT_NAME_MAX 255
/* Deepest path accepted by git_tree_id_from_paths(), in components, and its longest path. */
#define GIT_PATH_DEPTH_MAX 256
#define GIT_PATH_MAX 4096

/* "blob 123\0" fits in this (type, space, 20 digits, NUL). */
#define GIT_OBJECT_HEADER_MAX 32

/* Write the object header "<type> <len>\0" into buf; returns its length including the NUL. */
size_t git_object_header(const char *type, uint64_t len, char buf[static GIT_OBJECT_HEADER_MAX]);

/* Reset h and feed it the header of a blob of len bytes; the caller then feeds exactly len
 * bytes and calls sha256_final(). */
int git_blob_hash_start(Sha256 *h, uint64_t len);

/* The blob id of a buffer. */
int git_blob_id(const void *data, size_t len, uint8_t ret[static GIT_OID_SIZE]);

/* The blob id of exactly size bytes read from fd (from its offset), with h and buf[buf_size]
 * as work space; -EIO when fd ends first. */
int git_blob_id_fd(Sha256 *h, int fd, uint64_t size, uint8_t *buf, size_t buf_size, uint8_t ret[static GIT_OID_SIZE]);

/* Is name acceptable as one tree entry name: 1..GIT_NAME_MAX bytes, no '/', no NUL, not "."
 * or ".."? */
bool git_entry_name_is_valid(const char *name, size_t len);

/* Is mode one of the four modes a tree may hold here (gitlinks 160000 are refused)? */
bool git_mode_is_valid(uint32_t mode);

typedef struct GitTreeEntry {
        size_t name_offset; /* into GitTreeBuilder.names */
        uint16_t name_len;
        uint32_t mode;
        uint8_t oid[GIT_OID_SIZE];
} GitTreeEntry;

/* Collects the entries of one tree. Zero-initialise it (GIT_TREE_BUILDER_INIT) and release it
 * with git_tree_builder_done(). */
typedef struct GitTreeBuilder {
        GitTreeEntry *entries;
        size_t n_entries, n_allocated;
        char *names; /* the names, back to back, not NUL-terminated */
        size_t names_size, names_allocated;
} GitTreeBuilder;
#define GIT_TREE_BUILDER_INIT ((GitTreeBuilder) {})

/* Add one entry. Returns -EINVAL for an invalid name or mode (nothing is added), -ENOMEM. */
int git_tree_builder_add(GitTreeBuilder *b, const char *name, size_t name_len, uint32_t mode,
                         const uint8_t oid[static GIT_OID_SIZE]);

static inline size_t git_tree_builder_size(const GitTreeBuilder *b) {
        return b->n_entries;
}

/* Sort the entries the way git does, serialise the tree and hash it into ret. h is a scratch
 * context (NULL: one is allocated). Returns -EBADMSG when two entries share a name (whatever
 * their types): such a tree cannot exist on disk. The builder is emptied either way and can
 * be reused. An empty builder yields the empty tree's id. */
int git_tree_builder_finish(GitTreeBuilder *b, Sha256 *h, uint8_t ret[static GIT_OID_SIZE]);

void git_tree_builder_done(GitTreeBuilder *b);

/* One entry of a flat manifest: a slash-separated relative path, its mode and its object id. */
typedef struct GitPathEntry {
        const char *path;
        uint32_t mode;
        uint8_t oid[GIT_OID_SIZE];
} GitPathEntry;

/* Recompute the root tree id of a flat list of non-tree entries (files, executables,
 * symlinks), in any order, building every intermediate tree as git would.
 *
 * Security contract: entries come from a server and are untrusted. Refused with -EBADMSG:
 * an empty path, a leading or trailing '/', an empty, "." or ".." component, a component
 * longer than GIT_NAME_MAX, a path longer than GIT_PATH_MAX or deeper than
 * GIT_PATH_DEPTH_MAX, a mode other than 100644/100755/120000, the same path twice, and a path
 * that is both a file and a directory ("a" and "a/b"). Work and memory are linear in the
 * input (plus the sort). No entries at all gives the empty tree's id. */
int git_tree_id_from_paths(const GitPathEntry *entries, size_t n,
                           uint8_t ret[static GIT_OID_SIZE]);
