/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "common/proc-locks.h"

int flock_held(ino_t ino) {
        FILE *f = fopen("/proc/locks", "re");
        char line[256];
        int held = 0;

        if (!f)
                return -errno;
        while (!held && fgets(line, sizeof(line), f)) {
                char kind[16], dev[64];
                if (sscanf(line, "%*s %15s %*s %*s %*s %63s", kind, dev) != 2 || !streq(kind, "FLOCK"))
                        continue;
                const char *colon = strrchr(dev, ':');
                if (colon && strtoull(colon + 1, NULL, 10) == (unsigned long long) ino)
                        held = 1;
        }
        fclose(f);
        return held;
}
