/* SPDX-License-Identifier: MIT */
/* What doctor's files share (orchestrator/doctor.c, the checks and the probes; doctor-egress.c,
 * the egress route's proof): the run's state, its report line and the probe jobs. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "capsule/driver.h"
#include "capsule/job.h"
#include "common/macro.h"
#include "parser/config.h"

typedef struct Doctor {
        const Config *config;
        bool json;
        FILE *out;
        json_t *checks; /* the array of {"check","ok","detail"} */
        bool failed;

        /* the probe environment */
        char *base;
        int scratch_fd;
        char scratch[PATH_MAX], snapshot[PATH_MAX], runsc_root[PATH_MAX], init_path[PATH_MAX];
        CapsuleDriver driver;
        bool have_runtime;
} Doctor;

/* One check's line ("✓ name: detail" or "✗ name: reason"; an entry of the JSON array). A failed
 * one fails doctor. */
void doctor_report(Doctor *d, const char *check, bool ok, const char *fmt, ...) _printf_(4, 5);

/* A probe job's ending and what it printed. */
typedef struct Probe {
        CapsuleResult res;
        char *log;
        size_t log_len;
} Probe;
void doctor_probe_free(Probe *p);
/* Run argv in a capsule of c's walls with doctor's probe directory at /snapshot, bounded by
 * timeout; what it printed in ret->log. */
int doctor_probe(Doctor *d, const Config *c, const char *what, char **argv, uint64_t timeout, Probe *ret);
/* The value of the last "key=value" line the probe printed, or NULL. */
const char *doctor_probe_get(const Probe *p, const char *key, char *buf, size_t n);
/* "status (reason): message" of a probe that did not end as expected. */
const char *doctor_probe_result(const Probe *p, char *buf, size_t n);

/* An informational line ("· name: detail"; "ok": null in the JSON): it never fails doctor. */
void doctor_info(Doctor *d, const char *check, const char *fmt, ...) _printf_(3, 4);

/* The workspace's watch: its budget and, as the daemon last reported, its use (doctor-watch.c). */
void doctor_check_watch(Doctor *d);

/* With network in c: the egress route proved live (doctor-egress.c). */
void doctor_probe_egress(Doctor *d, const Config *c);

/* Under a driver on the host's kernel (runc): its walls proved live (doctor-kernel.c); nothing
 * under the others. */
void doctor_probe_kernel_walls(Doctor *d);
/* The engine, its kernel and its walls, as every result names them (one informational line). */
void doctor_isolation_line(Doctor *d);
