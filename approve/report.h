/* SPDX-License-Identifier: MIT */
/* What the operator reads: list, show and the summary printed by approve --wait. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "orchestrator/worker.h"

int report_list(Worker *w, bool all, bool json, FILE *out, TfwError *e);
int report_show(Worker *w, const char *id, bool json, FILE *out, TfwError *e);

/* Wait until results/<id>/result.json exists (inotify, no polling), then print its summary. */
int report_wait_result(Worker *w, const char *id, FILE *out, TfwError *e);
