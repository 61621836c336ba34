/* SPDX-License-Identifier: MIT */
/* The audit log: one JSON line per event below <state_dir>/audit/, each line carrying the
 * sha256 of the line before it, so that `audit verify` finds an edited, removed, inserted or
 * reordered line (contract sections 1 and 3; docs/audit.md describes the format for operators).
 *
 * Security contract
 *  - Files: <state_dir>/audit/ (created 0700, must be owned by the caller's euid), the current
 *    file audit.jsonl, rotated files audit-YYYYMMDD.jsonl (audit-YYYYMMDD.N.jsonl, N = 1..999,
 *    for a second rotation the same day), and the lock file audit.lock. Files are created 0600;
 *    nothing is opened through a symlink (O_NOFOLLOW) and only regular files are read or
 *    written. Other names in the directory are ignored.
 *  - A line is the canonical JSON (compact, keys sorted) of an object with "time" (RFC 3339
 *    UTC), "event" (one of a fixed list), "seq" (1 for the first line ever, then +1 per line,
 *    across files) and "prev" (lowercase hex sha256 of the previous line's exact bytes without
 *    its newline; 64 zeros for seq 1), plus only the whitelisted fields of audit_append(). No
 *    request body, file content or environment can be written: any other key is refused.
 *  - Every line is at most AUDIT_LINE_MAX bytes. Strings are cut (on a UTF-8 boundary) to fixed
 *    budgets and argv loses its tail rather than the line growing; a cut field is named in
 *    "truncated". Newlines and control characters inside values are JSON-escaped, so a value
 *    can never start a line of its own.
 *  - Appends from several processes (the daemon and the operator's CLI) are serialised by
 *    flock(LOCK_EX) on audit.lock, taken on a fresh open file description for every append (so
 *    it also excludes a forked child that inherited the Audit). Under the lock: read the last
 *    line by seeking back from the end (bounded by AUDIT_LINE_MAX), append the new line with a
 *    single write() on an O_APPEND fd, fdatasync. A failed write is truncated away.
 *  - A torn last line (no newline: a crash mid-write, or a cut file) is not chained to: the
 *    next append truncates it and first writes an "audit-repaired" line recording the size and
 *    sha256 of the discarded bytes, so the repair itself is in the chain. A complete last line
 *    that is not a valid record makes appends fail (-EBADMSG) until an operator looks.
 *  - Limits of any hash chain kept next to the data: removing whole lines at the end, or the
 *    oldest files, and rewriting every line after an edit are not detectable from the log
 *    alone; audit_verify() reports where the chain starts and the sha256 of its head so the
 *    operator can compare with a copy kept elsewhere. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/sha256.h"
#include "common/time-util.h"

#define AUDIT_LINE_MAX ((size_t) 65536)   /* bytes of one line, without its newline */
#define AUDIT_FILE_NAME_MAX 64
#define AUDIT_ROTATED_MAX 100000          /* rotated files considered in one directory */

typedef struct Audit Audit;

/* Where "now" comes from (tests move it across days). */
typedef usec_t (*AuditClock)(void *userdata);

/* Open (creating audit/ and audit.lock when missing) the audit log below state_dir_fd.
 * generations (>= 1) is how many rotated files are kept. Does not take the lock. */
int audit_open(int state_dir_fd, unsigned generations, Audit **ret, TfwError *e);
void audit_close(Audit *a);
static inline void audit_closep(Audit **a) {
        if (*a)
                audit_close(*a);
}

/* Replace the clock (default: now_realtime). */
void audit_set_clock(Audit *a, AuditClock clock, void *userdata);

/* Is event one of the names audit_append() accepts? */
bool audit_event_is_valid(const char *event);

/* Append one line for event with the given fields (borrowed, may be NULL). Accepted fields:
 *   strings: id, name (an inbox entry name), action_class, outcome, error (a stable code),
 *            approver, reason, message; request_sha256 (64 lowercase hex);
 *   integers: exit_code, signal, duration_ms, count, pid;
 *   argv: an array of strings.
 * A JSON null value is dropped. Anything else (another key, a wrong type, "time", "seq",
 * "prev", "event") is refused with -EINVAL and writes nothing. Rotates first when the current
 * file's first line is from another UTC day than now. */
int audit_append(Audit *a, const char *event, json_t *fields, TfwError *e);

/* Rotate audit.jsonl when its first line is from another UTC day than now, or always when
 * force (gc). An empty current file is never rotated, nor one with a torn last line (the next
 * append repairs it first). Then delete the oldest rotated files beyond generations. */
typedef struct AuditRotation {
        bool rotated;                    /* audit.jsonl was renamed ... */
        char name[AUDIT_FILE_NAME_MAX];  /* ... to this rotated file */
        unsigned pruned;                 /* rotated files deleted beyond generations */
} AuditRotation;

/* ret (may be NULL) says what was done. */
int audit_rotate(Audit *a, usec_t now, bool force, AuditRotation *ret, TfwError *e);

typedef struct AuditVerifyReport {
        bool intact;
        unsigned n_files;         /* files read */
        uint64_t n_lines;         /* lines that passed every check */
        uint64_t first_seq;       /* seq of the oldest kept line (1: the chain starts at its
                                   * beginning; more: older files were rotated away); 0 if empty */
        uint64_t last_seq;
        char head_sha256[SHA256_HEX_SIZE]; /* sha256 of the newest line; "" if empty */
        uint64_t n_repairs;       /* audit-repaired lines met */
        char break_file[AUDIT_FILE_NAME_MAX]; /* where the first break is ("" when intact) */
        uint64_t break_line;      /* 1-based line number in break_file (0 when intact) */
        char message[1024];       /* one readable sentence: the summary, or the break */
} AuditVerifyReport;

/* Check the whole chain below state_dir_fd/audit: rotated files oldest first, then
 * audit.jsonl. Takes audit.lock shared (when it exists), so appends wait meanwhile.
 * Returns 0 when intact, -EBADMSG when broken (report names the first break, e carries the
 * same message), another negative errno when the check itself could not run (e says why).
 * The report is filled in the first two cases. A missing audit directory is an empty log.
 * A caller prints report->message on 0 (exit 0) and e->message otherwise (exit 1). */
int audit_verify(int state_dir_fd, AuditVerifyReport *report, TfwError *e);

/* Is there a line for request id (with this request_sha256 when the line names one, and not
 * older than since, the request's capture) whose event is one of events (NULL-terminated),
 * below state_dir_fd/audit? 1 yes, 0 no (or no audit directory yet), a negative errno when the
 * files cannot be read (e says why). Reads, under audit.lock shared, the files from since's
 * UTC day on: for recovery, which asks it only of a request whose ending may not have been
 * recorded. */
int audit_find(int state_dir_fd, const char *id, const char *sha256, usec_t since, const char *const *events,
               TfwError *e);
