/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "capsule/id.h"

bool capsule_job_id_is_valid(const char *id) {
        size_t n = id ? strlen(id) : 0;

        if (n == 0 || n > CAPSULE_JOB_ID_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = id[i];
                bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
                if (!alnum && (i == 0 || (c != '_' && c != '-' && c != '.')))
                        return false;
        }
        return true;
}

bool capsule_container_id_is_workers(const char *worker_name, const char *name) {
        size_t n = strlen(worker_name);
        return strncmp(name, "tfw-", 4) == 0 && strncmp(name + 4, worker_name, n) == 0 && name[4 + n] == '-' &&
               capsule_job_id_is_valid(name + 4 + n + 1);
}

int capsule_container_id(const char *worker_name, const char *job_id, char **ret) {
        char *s;

        if (!capsule_job_id_is_valid(job_id))
                return -EINVAL;
        if (asprintf(&s, "tfw-%s-%s", worker_name, job_id) < 0)
                return -ENOMEM;
        *ret = s;
        return 0;
}
