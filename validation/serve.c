/* SPDX-License-Identifier: MIT */
#include "common/log.h"
#include "validation/serve.h"

int serve_main(int argc, char **argv) {
        (void) argc;
        log_error("%s: not available in this build yet (the validation worker loop is not built yet)", argv[0]);
        return 1;
}
