/* SPDX-License-Identifier: MIT */
/* An identity of its own for each egress proxy (docs/egress.md, "Who the proxy runs as"): a uid
 * of CONFIG_EGRESS_ID_FIRST..LAST (parser/config.h), with the gid of the same number, that no
 * other proxy of the host holds, that names no user and no group, and that no process the proxy
 * can see runs as (the proxy itself checks that last one after it dropped to it and before it
 * reads a byte: egress-proxy/egress-proxy.c). A proxy taken over through its parser then shares
 * its uid with nothing: not a notify hook, not the artifact parser, not another capsule's proxy,
 * so there is no process whose /proc/PID/environ or memory it may read.
 *
 * The uids are taken much as systemd's DynamicUser= takes its own, a random candidate locked
 * and checked against the user database, but with one lock file for all of them: an
 * open-file-description lock (F_OFD_SETLK) on byte uid - first of EGRESS_ID_LOCK in a directory
 * of root's that every worker of the host shares (EGRESS_ID_DIR), held for as long as the proxy
 * lives. A worker that dies drops its locks with it, and its proxies die with it
 * (PR_SET_PDEATHSIG). Nothing is ever unlinked, so no lock can land on a file that lost its
 * name, and the directory holds one empty file whatever the number of ids. Nothing is written
 * to /etc/passwd or /etc/group: the uids are nobody's. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

/* Made root:root 0700 when missing; the systemd units give it to every worker that may start a
 * proxy (RuntimeDirectory=, systemd/controller-network.conf.in). */
#define EGRESS_ID_DIR "/run/tentaflake-egress-ids"
#define EGRESS_ID_LOCK "ids.lock"
/* Random candidates tried before giving up: with 65536 uids, failing them all means the range is
 * full or the user database answers for all of it. */
#define EGRESS_ID_TRIES 64

typedef struct EgressId {
        uid_t uid;     /* and the gid; meaningful while lock_fd >= 0 */
        int lock_fd;   /* our own open of the lock file, holding the byte of uid; -EBADF: none */
} EgressId;

void egress_id_init(EgressId *id);

/* egress_id_take_at() contract:
 *  - tries at most EGRESS_ID_TRIES candidates of first..first+count-1 (count >= 1), each once: a
 *    random one, then those after it in turn, wrapping (a range of at most EGRESS_ID_TRIES ids
 *    is tried whole);
 *  - a candidate is taken only when byte (candidate - first) of dir_fd/EGRESS_ID_LOCK (a regular
 *    file, opened or created 0600, O_NOFOLLOW, once per call: its own open file description) is
 *    write-locked with F_OFD_SETLK, which any other holder's lock refuses, in this process or
 *    another, and neither getpwuid_r nor getgrgid_r finds the candidate; a candidate a user or
 *    group has, or whose lookup fails (the database cannot say), is unlocked and left;
 *  - on success *ret holds that lock until egress_id_release();
 *  - otherwise -EBUSY (every candidate held or named) or the first system error, with code
 *    "capsule_setup" and a message naming the range and why, and *ret untouched.
 * egress_id_take() is the same on EGRESS_ID_DIR (a chain of root's directories, root_dir_open;
 * the directory itself must be root's alone) and the range of parser/config.h. */
int egress_id_take_at(int dir_fd, uint32_t first, uint32_t count, EgressId *ret, TfwError *e);
int egress_id_take(EgressId *ret, TfwError *e);

/* Only once no process runs as id->uid any more (the proxy reaped): the lock dropped (its file
 * description closed). Idempotent. */
void egress_id_release(EgressId *id);
/* The proxy could not be reaped (the kernel holds it past SIGKILL): its lock stays held for as
 * long as this process lives, whatever releases id later (it forgets the lock's descriptor, on
 * purpose). The proxy's own check (no process it can see shares its id) covers the rest. */
void egress_id_abandon(EgressId *id);
