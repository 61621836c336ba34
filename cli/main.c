/* SPDX-License-Identifier: MIT */
#include <stdio.h>
int main(void) {
        puts("tentaflake-worker " TFW_VERSION);
        return 0;
}
