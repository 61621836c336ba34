/* SPDX-License-Identifier: MIT */
/* The walls a job met (issue 49; contract section 7, result.json's "walls"; threat 24): a bounded
 * list of {"wall","detail","count"}, so an agent is told why its command failed instead of
 * guessing (a refused connection, the memory limit, a full /work, ...).
 *
 * Filled only from the worker's own sources (capsule/job-walls.c: the cgroup's events, init's
 * authenticated trailer, the proxy's checked records, the worker's own bounds), never from
 * anything the job printed. At most WALLS_MAX entries, one per (wall, detail), each detail at
 * most WALL_DETAIL_MAX bytes; once the list is full, every further distinct entry is counted in
 * its last one ("further walls not listed"), so the counts stay whole.
 *
 * walls_sentence() words one entry of a result for an agent (submit, mcp, list, show): the
 * sandbox's decision and what to do about it, the detail with anything not printable ASCII
 * escaped. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/macro.h"

#define WALLS_MAX 32
#define WALL_DETAIL_MAX 200
/* The detail of the last entry once more distinct walls were met than the list holds. */
#define WALLS_FURTHER "further walls not listed"

/* The walls' names (result.json's words). */
#define WALL_MEMORY "memory"
#define WALL_PIDS "pids"
#define WALL_TIME "time"
#define WALL_DISK "disk"
#define WALL_OUTPUT "output"
#define WALL_NETWORK "network"
#define WALL_SYSCALL "syscall"
#define WALL_READ_ONLY "read-only"

typedef struct WallEntry {
        const char *wall;                   /* one of WALL_* (static) */
        char detail[WALL_DETAIL_MAX + 1];
        uint64_t count;
} WallEntry;

typedef struct Walls {
        WallEntry entry[WALLS_MAX];
        size_t n;
} Walls;

/* Is this one of the WALL_* words? */
bool wall_name_is_valid(const char *wall);

/* Count one more meeting (count times) of wall with the detail (formatted, cut at
 * WALL_DETAIL_MAX bytes). Nothing happens for count 0 or a wall that is not a WALL_* word. */
void walls_add(Walls *w, const char *wall, uint64_t count, const char *fmt, ...) _printf_(4, 5);
/* Every entry of from added to w. */
void walls_merge(Walls *w, const Walls *from);

/* result.json's array (possibly empty); NULL when out of memory. */
json_t *walls_json(const Walls *w);

/* One entry of a result's "walls" as one line for an agent, without a newline: NULL-free,
 * printable ASCII only (anything else of the detail escaped as \xHH), at most size - 1 bytes.
 * An entry that is not {"wall": WALL_*, "detail": string, "count": integer} gives false. */
bool walls_sentence(const json_t *entry, char *buf, size_t size);
