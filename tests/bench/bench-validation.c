/* SPDX-License-Identifier: MIT */
/* One verified checkout from a validation server, as `serve` does it before running a
 * check: manifest (strict parse, path rules, git SHA-256 tree id recomputed), then every blob
 * downloaded, hash-checked and written below DEST. Prints "bytes files seconds downloaded kept".
 * With --kept, DEST is a lane directory and the checkout is serve's kept one (checkout_update:
 * only what changed since the last checkout in DEST is downloaded).
 * usage: bench-validation URL REPO TREE DEST [--kept] (token in TENTAFLAKE_TOKEN) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/time-util.h"
#include "validation/checkout.h"
#include "validation/http.h"
#include "validation/job.h"

int main(int argc, char **argv) {
        TfwError e = {0};
        Http *h = NULL;
        VManifest *m = NULL;
        char *body = NULL, path[1024];
        size_t len = 0;
        long status = 0;
        CheckoutSummary cs = {};

        bool kept = argc == 6 && strcmp(argv[5], "--kept") == 0;
        if ((argc != 5 && !kept) || !getenv("TENTAFLAKE_TOKEN")) {
                fprintf(stderr, "usage: TENTAFLAKE_TOKEN=… %s URL REPO TREE DEST [--kept]\n", argv[0]);
                return 2;
        }
        usec_t t0 = now_monotonic();
        if (http_global_init(&e) < 0 || http_new(argv[1], getenv("TENTAFLAKE_TOKEN"), 120, &h, &e) < 0)
                goto fail;
        snprintf(path, sizeof(path), "/v1/repos/%s/trees/%s", argv[2], argv[3]);
        if (http_call(h, false, path, NULL, VMANIFEST_MAX_BYTES, 0, &status, &body, &len, &e) < 0)
                goto fail;
        if (status != 200) {
                fprintf(stderr, "manifest: HTTP %ld\n", status);
                return 1;
        }
        if (vmanifest_parse(body, len, &m, &e) < 0 || vmanifest_check_paths(m, &e) < 0 ||
            vmanifest_verify_tree(m, argv[3], &e) < 0)
                goto fail;
        if (mkdir(argv[4], 0750) < 0 && errno != EEXIST) {
                perror("mkdir");
                return 1;
        }
        int dfd = open(argv[4], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || (kept ? checkout_update(h, argv[2], m, dfd, getgid(), (uint64_t) 4 << 30, &cs, &e)
                             : checkout_materialise(h, argv[2], m, dfd, getgid(), (uint64_t) 4 << 30, &cs, &e)) < 0)
                goto fail;
        usec_t t1 = now_monotonic();
        printf("%llu %llu %.3f %llu %llu\n", (unsigned long long) cs.bytes, (unsigned long long) cs.files,
               (double) (t1 - t0) / 1e6, (unsigned long long) cs.downloaded, (unsigned long long) cs.kept);
        close(dfd);
        free(body);
        vmanifest_free(m);
        http_free(h);
        return 0;
fail:
        fprintf(stderr, "bench-validation: %s\n", e.message);
        return 1;
}
