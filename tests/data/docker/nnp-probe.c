/* SPDX-License-Identifier: MIT */
/* Built statically into the docker/podman test image by tests/integration/docker-image.sh:
 * gVisor's /proc/self/status has no NoNewPrivs line, so the flag is read with prctl. */
#include <stdio.h>
#include <sys/prctl.h>

int main(void) {
        printf("NoNewPrivs=%d\n", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
        return 0;
}
