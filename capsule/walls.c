/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "capsule/walls.h"
#include "common/term-escape.h"

/* Each wall's name, and how a line about it starts and ends: the sandbox's decision, said as
 * such (a model otherwise reads a refused connection as a broken network), and the way out. */
static const struct {
        const char *name, *lead, *advice;
} words[] = {
        { WALL_MEMORY, "stopped by the sandbox: ",
          ": use less memory (fewer parallel jobs) or ask the operator to raise limits.memory" },
        { WALL_PIDS, "blocked by the sandbox: ",
          ": use fewer processes or threads (e.g. make -j2) or ask the operator to raise limits.pids" },
        { WALL_TIME, "stopped by the sandbox: ", ": ask for a longer timeout_seconds or do less in one job" },
        { WALL_DISK, "blocked by the sandbox: ",
          ": write less there (or elsewhere) or ask the operator to raise the limit named" },
        { WALL_OUTPUT, "cut by the sandbox: ", ": keep less, or ask the operator to raise the limit named" },
        { WALL_NETWORK, "blocked by the sandbox: ",
          ": the worker's network policy refused it, the network itself is not broken; do without it "
          "or ask the operator to allow it" },
        { WALL_SYSCALL, "blocked by the sandbox: ", ": the sandbox does not allow this system call" },
        { WALL_READ_ONLY, "blocked by the sandbox: ", ": this path is read-only in the sandbox; write under /work or /tmp" },
};

static int wall_index(const char *wall) {
        for (size_t i = 0; wall && i < ELEMENTSOF(words); i++)
                if (streq(words[i].name, wall))
                        return (int) i;
        return -1;
}

bool wall_name_is_valid(const char *wall) {
        return wall_index(wall) >= 0;
}

static void walls_put(Walls *w, const char *wall, uint64_t count, const char *detail) {
        for (size_t i = 0; i < w->n; i++)
                if (streq(w->entry[i].wall, wall) && streq(w->entry[i].detail, detail)) {
                        w->entry[i].count += count;
                        return;
                }
        if (w->n == WALLS_MAX) {
                /* Full: the last entry counts the rest (it became WALLS_FURTHER with the first). */
                WallEntry *last = &w->entry[WALLS_MAX - 1];
                if (!streq(last->detail, WALLS_FURTHER)) {
                        snprintf(last->detail, sizeof(last->detail), "%s", WALLS_FURTHER);
                }
                last->count += count;
                return;
        }
        WallEntry *e = &w->entry[w->n++];
        e->wall = words[wall_index(wall)].name;
        snprintf(e->detail, sizeof(e->detail), "%s", detail);
        e->count = count;
}

void walls_add(Walls *w, const char *wall, uint64_t count, const char *fmt, ...) {
        char detail[WALL_DETAIL_MAX + 1];
        va_list ap;

        if (count == 0 || wall_index(wall) < 0)
                return;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof(detail), fmt, ap);
        va_end(ap);
        walls_put(w, wall, count, detail);
}

void walls_merge(Walls *w, const Walls *from) {
        for (size_t i = 0; i < from->n; i++)
                if (from->entry[i].count > 0 && wall_index(from->entry[i].wall) >= 0)
                        walls_put(w, from->entry[i].wall, from->entry[i].count, from->entry[i].detail);
}

json_t *walls_json(const Walls *w) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < w->n; i++) {
                json_t *o = json_pack("{s:s, s:s, s:I}", "wall", w->entry[i].wall, "detail", w->entry[i].detail, "count",
                                      (json_int_t) w->entry[i].count);
                if (!o || json_array_append_new(a, o) < 0) {
                        json_decref(a);
                        return NULL;
                }
        }
        return a;
}

bool walls_sentence(const json_t *entry, char *buf, size_t size) {
        const char *wall = json_string_value(json_object_get(entry, "wall"));
        const char *detail = json_string_value(json_object_get(entry, "detail"));
        const json_t *count = json_object_get(entry, "count");
        int i = wall_index(wall);
        char safe[4 * WALL_DETAIL_MAX + 1], times[48] = "";

        if (i < 0 || !detail || !json_is_integer(count) || json_integer_value(count) < 1 || size == 0)
                return false;
        /* A host name or a path the job chose: through the one escaper, as ASCII on one line. */
        term_escape(detail, strlen(detail), TERM_ESCAPE_NAME | TERM_ESCAPE_ASCII, safe, sizeof(safe));
        if (json_integer_value(count) > 1)
                snprintf(times, sizeof(times), " (%lld times)", (long long) json_integer_value(count));
        snprintf(buf, size, "%s%s%s%s", words[i].lead, safe, times, words[i].advice);
        return true;
}
