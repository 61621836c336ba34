#!/usr/bin/env python3
"""The egress tests' upstream (tests/integration/test-egress.sh, tests/bench/egress.sh): one
HTTP/1.1 server on ADDR:PORT that a job reaches through the worker's proxy.

    egress-server.py ADDR PORT LOGDIR

  GET /bytes/N     N bytes of 'x' (Content-Length), for downloads
  GET /pattern/N   N bytes that repeat only every 1,000,003 (a prime: no buffer or pipe size
                   divides it), the same on every request: a download cut, doubled or shuffled
                   anywhere gives another digest
  POST /upload     reads the body as it comes and answers with how many bytes arrived
  GET /hello       "hello from ADDR:PORT"
  GET /hold        answers its status line alone (once the whole request head has arrived:
                   a client that sees it knows its request went through), then nothing
                   more, and never closes, not even at the client's end of file
  GET /wait/NAME   answers "released" once LOGDIR/NAME exists (the test's word), within 300 s
Every accepted connection appends a line to LOGDIR/connections and every byte of a request
body read is counted in LOGDIR/received (rewritten after each read), so a test can say that a
connection never arrived or that no more than N bytes did. Prints "ready" once it listens."""
import os
import socket
import sys
import threading
import time

addr, port, logdir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lock = threading.Lock()
received = 0
PATTERN = bytes((i * 7 + i // 251) % 256 for i in range(1000003))


def note(name, text, mode="a"):
    with lock:
        with open(os.path.join(logdir, name), mode) as f:
            f.write(text)


def count(n):
    global received
    with lock:
        received += n
        with open(os.path.join(logdir, "received"), "w") as f:
            f.write("%d\n" % received)


def serve(c, peer):
    note("connections", "%s:%d\n" % peer)
    f = c.makefile("rb")
    try:
        line = f.readline(65536).decode("latin-1")
        parts = line.split()
        headers = {}
        while True:
            h = f.readline(65536).decode("latin-1")
            if h in ("\r\n", "\n", ""):
                break
            k, _, v = h.partition(":")
            headers[k.strip().lower()] = v.strip()
        note("heads", line.strip() + " host=" + headers.get("host", "") + "\n")
        if len(parts) < 2:
            return
        method, target = parts[0], parts[1]
        if method == "GET" and target == "/hold":
            c.sendall(b"HTTP/1.1 200 OK\r\n")
            while c.recv(65536):
                pass
            time.sleep(3600)
            return
        if method == "GET" and target.startswith("/wait/"):
            flag = os.path.join(logdir, os.path.basename(target[len("/wait/"):]))
            deadline = time.monotonic() + 300
            while not os.path.exists(flag) and time.monotonic() < deadline:
                time.sleep(0.05)
            body = b"released\n" if os.path.exists(flag) else b"not released\n"
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
        elif method == "GET" and target.startswith("/bytes/"):
            n = int(target[len("/bytes/"):])
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % n)
            chunk = b"x" * 65536
            while n > 0:
                k = min(n, len(chunk))
                c.sendall(chunk[:k])
                n -= k
        elif method == "GET" and target.startswith("/pattern/"):
            n = int(target[len("/pattern/"):])
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % n)
            while n > 0:
                k = min(n, len(PATTERN))
                c.sendall(PATTERN[:k])
                n -= k
        elif method == "POST" and target == "/upload":
            want = int(headers.get("content-length", "0"))
            got = 0
            while got < want:
                b = f.read1(min(65536, want - got))
                if not b:
                    break
                got += len(b)
                count(len(b))
            body = b"%d\n" % got
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
        else:
            body = ("hello from %s:%d\n" % (addr, port)).encode()
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
    except OSError:
        pass
    finally:
        try:
            c.close()
        except OSError:
            pass


def main():
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(256)
    note("received", "0\n", "w")
    note("connections", "", "w")
    print("ready", flush=True)
    while True:
        c, peer = s.accept()
        threading.Thread(target=serve, args=(c, peer[:2]), daemon=True).start()


main()
