#!/usr/bin/env python3
# A TEST DOUBLE of the forge's validation-job server (contract section 8), for the tests and
# the benchmark of tentaflake-worker only. It is not a product and is never shipped or
# installed: no persistence, no real authorisation model, one repository.
#
# It implements the server half of section 8 faithfully enough to test against: a queue of
# jobs with leases that expire and are handed out again, an attempt limit (5), trees and blobs
# served from a real git repository made with `git init --object-format=sha256`, bearer-token
# checks, and per-job switches that make it misbehave:
#   wrong_blob      one blob's bytes are altered when served
#   wrong_manifest  one entry's blob id is altered in the manifest
#   dotdot          an entry "../escape" is added to the manifest
#   stale           heartbeats answer {"stale": true}
#   lease_lost      heartbeats, complete and fail answer 409
#   unauthorized    every worker call answers 401 with a message
#   huge_manifest   on the job's first attempt, the manifest is the job's "manifest_entries"
#                   (default 1,000,000) unique paths of "path_bytes" (default 115) bytes each:
#                   218 MB at the defaults, made as it is sent, whatever the tree (issue 33
#                   finding 7); later attempts get the tree's own
# (an outward symlink needs no switch: commit one in the repository).
#
# Only listens on 127.0.0.1. usage:
#   forge.py --repo DIR --repo-name acme/app --token-file F --port-file F [--lease-grace 0]
# Test control (no worker token; for the test script):
#   POST /test/jobs {"id","check","tree","run",...,"switches":[...]}   enqueue a job (and
#                                                                     manifest_entries, path_bytes
#                                                                     for huge_manifest)
#   GET  /test/state                                                  every job and its history, and
#                                                                     blob_gets: the blobs served so far
#   POST /test/switch {"job","switch","on":bool}                      change a switch
#   POST /test/expire {"job"}                                         expire a job's lease now
#   POST /test/synth {"entries","path_bytes"}                         make a tree of that many empty
#                                                                     files of paths of that length
#                                                                     (held in memory, not in the
#                                                                     repository): {"tree"}; with
#                                                                     "link_bytes": symlinks, each
#                                                                     to one target of that length
import argparse
import base64
import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ATTEMPT_LIMIT = 5
SERVER_WAIT_MAX = 30


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class Git:
    """A long-lived `git cat-file --batch` reader."""

    def __init__(self, repo):
        self.repo = repo
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(["git", "-C", repo, "cat-file", "--batch"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)

    def read(self, oid):
        with self.lock:
            self.proc.stdin.write(oid.encode() + b"\n")
            self.proc.stdin.flush()
            head = self.proc.stdout.readline().split()
            if len(head) < 3 or head[1] == b"missing":
                return None, None
            size = int(head[2])
            data = self.proc.stdout.read(size)
            self.proc.stdout.read(1)
            return head[1].decode(), data

    def manifest(self, tree):
        out = subprocess.run(["git", "-C", self.repo, "ls-tree", "-r", "-z", "--full-tree", tree],
                             capture_output=True)
        if out.returncode != 0:
            return None
        entries = []
        for rec in out.stdout.split(b"\0"):
            if not rec:
                continue
            meta, path = rec.split(b"\t", 1)
            mode, typ, oid = meta.decode().split()
            entries.append({"path": path.decode("utf-8", "surrogateescape"), "mode": mode, "blob": oid})
        return entries


class State:
    def __init__(self, args):
        self.args = args
        self.token = open(args.token_file).read().strip()
        self.git = Git(args.repo)
        self.cv = threading.Condition()
        self.jobs = {}      # id -> dict
        self.blob_gets = 0  # blobs served (GET /v1/repos/R/blobs/B answered 200)
        self.synth = {}     # tree -> (entries, path_bytes) of /test/synth
        self.order = []

    # -- queue ---------------------------------------------------------------------------
    def expire_leases(self, now):
        for j in self.jobs.values():
            if j["state"] == "claimed" and j["lease"]["expires"] < now:
                j["history"].append({"event": "expire", "lease": j["lease"]["id"], "worker": j["lease"]["worker"]})
                j["state"] = "queued"
                j["lease"] = None
                j["not_before"] = now

    def take(self, worker, lease_secs):
        now = time.time()
        self.expire_leases(now)
        for jid in self.order:
            j = self.jobs[jid]
            if j["state"] == "queued" and j["not_before"] <= now:
                j["attempt"] += 1
                j["state"] = "claimed"
                j["lease"] = {"id": "lease-" + uuid.uuid4().hex, "expires": now + lease_secs, "worker": worker,
                              "secs": lease_secs}
                j["history"].append({"event": "claim", "worker": worker, "lease": j["lease"]["id"],
                                     "attempt": j["attempt"]})
                return j
        return None

    def lease_ok(self, j, lease):
        now = time.time()
        self.expire_leases(now)
        return (j["state"] == "claimed" and j["lease"] and j["lease"]["id"] == lease and
                "lease_lost" not in j["switches"])


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "forge-test-double/1"

    def setup(self):
        super().setup()
        # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm
        # and the client's delayed ACK add 40 ms to every keep-alive answer.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, fmt, *a):
        if os.environ.get("FORGE_VERBOSE"):
            sys.stderr.write("forge: " + (fmt % a) + "\n")

    @property
    def st(self):
        return self.server.state

    def send_json(self, code, obj=None):
        body = b"" if obj is None else json.dumps(obj).encode()
        self.send_response(code)
        if obj is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_bytes(self, data):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        return json.loads(raw) if raw else {}

    def authorized(self, job=None):
        if job is not None and "unauthorized" in job["switches"]:
            self.send_json(401, {"error": "token revoked by the test server"})
            return False
        if self.headers.get("Authorization") != "Bearer " + self.st.token:
            self.send_json(401, {"error": "invalid token"})
            return False
        return True

    # -- routing ---------------------------------------------------------------------------
    def do_GET(self):
        parts = self.path.split("?")[0].strip("/").split("/")
        if parts == ["test", "state"]:
            with self.st.cv:
                out = [{k: v for k, v in self.st.jobs[i].items()} for i in self.st.order]
                gets = self.st.blob_gets
            return self.send_json(200, {"jobs": out, "blob_gets": gets})
        if len(parts) >= 6 and parts[:2] == ["v1", "repos"] and parts[-2] in ("trees", "blobs"):
            repo = "/".join(parts[2:-2])
            if not self.authorized():
                return
            if repo != self.st.args.repo_name:
                return self.send_json(404, {"error": "no such repository"})
            if parts[-2] == "trees":
                return self.tree(parts[-1])
            return self.blob(parts[-1])
        self.send_json(404, {"error": "not found"})

    def do_POST(self):
        parts = self.path.split("?")[0].strip("/").split("/")
        try:
            req = self.body()
        except ValueError:
            return self.send_json(400, {"error": "bad json"})
        if parts[0] == "test":
            return self.control(parts[1:], req)
        if parts == ["v1", "jobs", "claim"]:
            return self.claim(req)
        if len(parts) == 4 and parts[:2] == ["v1", "jobs"]:
            with self.st.cv:
                j = self.st.jobs.get(parts[2])
            if j is None:
                if not self.authorized():
                    return
                return self.send_json(404, {"error": "no such job"})
            if not self.authorized(j):
                return
            if parts[3] == "heartbeat":
                return self.heartbeat(j, req)
            if parts[3] == "complete":
                return self.complete(j, req)
            if parts[3] == "fail":
                return self.fail(j, req)
        self.send_json(404, {"error": "not found"})

    # -- the protocol ----------------------------------------------------------------------
    def claim(self, req):
        if not self.authorized():
            return
        worker = req.get("worker")
        wait = min(max(int(req.get("wait_secs", 20)), 0), SERVER_WAIT_MAX)
        lease_secs = max(int(req.get("lease_secs", 120)), 1)
        deadline = time.time() + wait
        with self.st.cv:
            self.st.claims = getattr(self.st, "claims", 0) + 1
            while True:
                j = self.st.take(worker, lease_secs)
                if j is not None:
                    if "unauthorized" in j["switches"]:
                        return self.send_json(401, {"error": "token revoked by the test server"})
                    job = {k: j[k] for k in ("id", "repo", "proposal", "check", "tree", "policy_version", "attempt",
                                             "run")}
                    return self.send_json(200, {"job": job, "lease": {"id": j["lease"]["id"],
                                                                      "expires_at": rfc3339(j["lease"]["expires"])}})
                left = deadline - time.time()
                if left <= 0:
                    return self.send_json(204)
                self.st.cv.wait(min(left, 0.2))

    def heartbeat(self, j, req):
        with self.st.cv:
            if not self.st.lease_ok(j, req.get("lease")):
                j["history"].append({"event": "heartbeat_conflict", "lease": req.get("lease")})
                return self.send_json(409, {"error": "lease lost"})
            j["lease"]["expires"] = time.time() + j["lease"]["secs"]
            j["heartbeats"] = j.get("heartbeats", 0) + 1
            return self.send_json(200, {"expires_at": rfc3339(j["lease"]["expires"]),
                                        "stale": "stale" in j["switches"]})

    def complete(self, j, req):
        with self.st.cv:
            if not self.st.lease_ok(j, req.get("lease")):
                j["history"].append({"event": "complete_conflict", "lease": req.get("lease"),
                                     "status": req.get("status")})
                return self.send_json(409, {"error": "lease lost"})
            status = req.get("status")
            att = req.get("attestation")
            if status not in ("pass", "fail", "stale") or (status != "stale") != (att is not None):
                return self.send_json(400, {"error": "bad completion"})
            j["history"].append({"event": "complete", "status": status, "attestation": att,
                                 "result": req.get("result"), "worker": j["lease"]["worker"]})
            j["state"] = "done"
            j["lease"] = None
            self.st.cv.notify_all()
            return self.send_json(200, {})

    def fail(self, j, req):
        with self.st.cv:
            if not self.st.lease_ok(j, req.get("lease")):
                j["history"].append({"event": "fail_conflict", "lease": req.get("lease")})
                return self.send_json(409, {"error": "lease lost"})
            permanent = bool(req.get("permanent"))
            j["history"].append({"event": "fail", "reason": req.get("reason"), "permanent": permanent,
                                 "retry_after_secs": req.get("retry_after_secs"), "worker": j["lease"]["worker"]})
            j["lease"] = None
            if permanent or j["attempt"] >= ATTEMPT_LIMIT:
                j["state"] = "failed"
            else:
                j["state"] = "queued"
                j["not_before"] = time.time() + float(req.get("retry_after_secs") or 0) * self.st.args.retry_scale
            self.st.cv.notify_all()
            return self.send_json(200, {})

    def tree(self, tree):
        with self.st.cv:
            sw = set()
            for j in self.st.jobs.values():
                if j["tree"] == tree and j["state"] == "claimed":
                    sw |= set(s for s in j["switches"] if s != "huge_manifest" or j["attempt"] == 1)
                    j["downloads"] = j.get("downloads", 0) + 1  # manifest fetches while claimed
        if "huge_manifest" in sw:
            return self.huge_manifest(tree, sw)
        if tree in self.st.synth:
            return self.synth_manifest(tree)
        entries = self.st.git.manifest(tree)
        if entries is None:
            return self.send_json(404, {"error": "no such tree"})
        if "wrong_manifest" in sw and entries:
            e = entries[0]
            e["blob"] = ("0" if e["blob"][0] != "0" else "1") + e["blob"][1:]
        if "dotdot" in sw:
            blob = entries[0]["blob"] if entries else "0" * 64
            entries.append({"path": "../escape", "mode": "100644", "blob": blob})
        self.send_json(200, {"tree": tree, "entries": entries})

    def huge_manifest(self, tree, sw):
        """n unique paths of equal length, generated as they are sent (the test server keeps
        none of it): its Content-Length is exact, and a worker that stops reading ends it."""
        with self.st.cv:
            job = next((j for j in self.st.jobs.values() if j["tree"] == tree and j["state"] == "claimed" and
                        "huge_manifest" in j["switches"]), {})
        n = int(job.get("manifest_entries", 1000000))
        plen = max(int(job.get("path_bytes", 115)), 9)
        blob = "ab" * 32
        head = ('{"tree":"%s","entries":[' % tree).encode()
        tail = b"]}"
        one = len('{"path":"","mode":"100644","blob":""}') + plen + 64
        length = len(head) + n * one + max(n - 1, 0) + len(tail)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(length))
        self.end_headers()
        pad = "p" * (plen - 9) + "/"
        try:
            self.wfile.write(head)
            for start in range(0, n, 4096):
                chunk = ",".join('{"path":"%s%08d","mode":"100644","blob":"%s"}' % (pad, i, blob)
                                 for i in range(start, min(start + 4096, n)))
                self.wfile.write(((b"," if start else b"") + chunk.encode()))
            self.wfile.write(tail)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def synth_manifest(self, tree):
        n, plen, link = self.st.synth[tree]
        mode, blob = ("120000", link_blob(link)) if link else ("100644", EMPTY_BLOB)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")  # no length: the end of the connection ends it
        self.end_headers()
        try:
            self.wfile.write(('{"tree":"%s","entries":[' % tree).encode())
            for start in range(0, n, 4096):
                chunk = ",".join('{"path":"%s","mode":"%s","blob":"%s"}' % (synth_path(i, plen), mode, blob)
                                 for i in range(start, min(start + 4096, n)))
                self.wfile.write((b"," if start else b"") + chunk.encode())
            self.wfile.write(b"]}")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def blob(self, oid):
        for tree, (_, _, link) in list(self.st.synth.items()):
            if link and oid == link_blob(link):
                with self.st.cv:
                    self.st.blob_gets += 1
                return self.send_bytes(link_target(link))
        if oid == EMPTY_BLOB:
            with self.st.cv:
                self.st.blob_gets += 1
            return self.send_bytes(b"")
        typ, data = self.st.git.read(oid)
        if typ != "blob":
            return self.send_json(404, {"error": "no such blob"})
        with self.st.cv:
            wrong = any("wrong_blob" in j["switches"] and j["state"] == "claimed" for j in self.st.jobs.values())
            self.st.blob_gets += 1
        if wrong:
            data = b"tampered:" + data
        self.send_bytes(data)

    # -- control -----------------------------------------------------------------------------
    def control(self, parts, req):
        st = self.st
        with st.cv:
            if parts == ["jobs"]:
                jid = req.get("id") or "job-" + uuid.uuid4().hex[:12]
                j = {"id": jid, "repo": st.args.repo_name, "proposal": req.get("proposal", "proposal-1"),
                     "check": req.get("check", "tests"), "tree": req["tree"],
                     "policy_version": req.get("policy_version", 1), "attempt": 0,
                     "run": req.get("run", {"argv": ["true"]}), "switches": list(req.get("switches", [])),
                     "state": "queued", "lease": None, "not_before": 0, "history": []}
                for k in ("manifest_entries", "path_bytes"):
                    if k in req:
                        j[k] = req[k]
                st.jobs[jid] = j
                st.order.append(jid)
                st.cv.notify_all()
                return self.send_json(200, {"id": jid})
            if parts == ["switch"]:
                j = st.jobs[req["job"]]
                if req.get("on", True):
                    if req["switch"] not in j["switches"]:
                        j["switches"].append(req["switch"])
                elif req["switch"] in j["switches"]:
                    j["switches"].remove(req["switch"])
                return self.send_json(200, {})
            if parts == ["synth"]:
                n, plen, link = int(req["entries"]), int(req.get("path_bytes", 20)), int(req.get("link_bytes", 0))
                tree = synth_tree(n, plen, link)
                st.synth[tree] = (n, plen, link)
                return self.send_json(200, {"tree": tree})
            if parts == ["expire"]:
                j = st.jobs[req["job"]]
                if j["lease"]:
                    j["lease"]["expires"] = 0
                st.cv.notify_all()
                return self.send_json(200, {})
        self.send_json(404, {"error": "not found"})


EMPTY_BLOB = hashlib.sha256(b"blob 0\0").hexdigest()
SYNTH_DIR_FILES = 1000


def synth_path(i, plen):
    """Entry i of a synthetic tree: "dNNNNNN/" and a name padded to plen bytes in all."""
    d = "d%06d/" % (i // SYNTH_DIR_FILES)
    name = "%08d" % i
    return d + "f" * max(plen - len(d) - len(name), 0) + name


def link_target(link):
    """The one target of a synthetic tree of symlinks: link bytes, inside the tree."""
    return b"x" * link


def link_blob(link):
    t = link_target(link)
    return hashlib.sha256(b"blob %d\0" % len(t) + t).hexdigest()


def synth_tree(n, plen, link=0):
    """git's SHA-256 tree id of n empty files (or symlinks to link_target(link)) at
    synth_path(i, plen): directories of SYNTH_DIR_FILES entries, each name sorting as git sorts
    (all alike, same length)."""
    def obj(kind, body):
        return hashlib.sha256(b"%s %d\0" % (kind, len(body)) + body).digest()
    blob = bytes.fromhex(link_blob(link) if link else EMPTY_BLOB)
    mode = b"120000 " if link else b"100644 "
    root = []
    for d in range(0, (n + SYNTH_DIR_FILES - 1) // SYNTH_DIR_FILES):
        body = b"".join(mode + synth_path(i, plen).split("/", 1)[1].encode() + b"\0" + blob
                        for i in range(d * SYNTH_DIR_FILES, min((d + 1) * SYNTH_DIR_FILES, n)))
        root.append(b"40000 " + (b"d%06d" % d) + b"\0" + obj(b"tree", body))
    return obj(b"tree", b"".join(root)).hex()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--repo-name", default="acme/app")
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--retry-scale", type=float, default=1.0,
                    help="multiply the worker's retry_after_secs (tests use 0 to retry at once)")
    args = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.state = State(args)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, args.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
