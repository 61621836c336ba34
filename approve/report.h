/* SPDX-License-Identifier: MIT */
/* What the operator reads: list, show and the summary printed by approve --wait. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "orchestrator/worker.h"

int report_list(Worker *w, bool all, bool json, FILE *out, TfwError *e);
int report_show(Worker *w, const char *id, bool json, FILE *out, TfwError *e);

/* A result's status line (and message line), as approve --wait and show print it. */
void report_print_summary(json_t *res, FILE *out);
