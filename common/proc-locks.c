/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "common/macro.h"
#include "common/proc-locks.h"

/* The field "MAJ:MIN:INO" (major and minor in hex): ino's, and dev's when match_dev. */
static bool lock_names(const char *field, bool match_dev, dev_t dev, ino_t ino) {
        unsigned maj, min;
        unsigned long long i;
        if (!match_dev) {
                const char *colon = strrchr(field, ':');
                return colon && strtoull(colon + 1, NULL, 10) == (unsigned long long) ino;
        }
        return sscanf(field, "%x:%x:%llu", &maj, &min, &i) == 3 && i == (unsigned long long) ino &&
               makedev(maj, min) == dev;
}

static int held(bool match_dev, dev_t dev, ino_t ino) {
        FILE *f = fopen("/proc/locks", "re");
        char line[256];
        int found = 0;

        if (!f)
                return -errno;
        while (!found && fgets(line, sizeof(line), f)) {
                char kind[16], field[64];
                if (sscanf(line, "%*s %15s %*s %*s %*s %63s", kind, field) != 2 || !streq(kind, "FLOCK"))
                        continue;
                found = lock_names(field, match_dev, dev, ino);
        }
        fclose(f);
        return found;
}

int flock_held(ino_t ino) {
        return held(false, 0, ino);
}

int flock_held_on(dev_t dev, ino_t ino) {
        return held(true, dev, ino);
}
