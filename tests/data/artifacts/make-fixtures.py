#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Regenerates the small hostile tar fixtures of threat 3 used by tests/unit/test-artifacts.c
# (and seeded into tests/fuzz/corpus/tar-import/). Deterministic: fixed times, owners and
# names, so running it again gives byte-identical files. Usage: make-fixtures.py [OUTDIR]
import io
import os
import sys
import tarfile

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))


def info(name, type_=tarfile.REGTYPE, data=b"", linkname="", pax=None):
    ti = tarfile.TarInfo(name)
    ti.type = type_
    ti.mtime = 0
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    ti.mode = 0o755 if type_ == tarfile.DIRTYPE else 0o644
    ti.linkname = linkname
    if type_ in (tarfile.CHRTYPE, tarfile.BLKTYPE):
        ti.devmajor, ti.devminor = 1, 3
    if pax:
        ti.pax_headers = dict(pax)
    ti.size = len(data) if type_ == tarfile.REGTYPE else 0
    return ti, (io.BytesIO(data) if type_ == tarfile.REGTYPE else None)


def write(name, entries, fmt=tarfile.PAX_FORMAT):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for e in entries:
            tf.addfile(*e)
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(buf.getvalue())


# CVE-2007-4559: a ".." name.
write("dotdot.tar", [info("../outside/pwned", data=b"x")])
# An absolute name.
write("absolute.tar", [info("/tmp/tfw-fixture-pwned", data=b"x")])
# zip-slip through a symlink.
write("symlink-then-file.tar", [info("link", tarfile.SYMTYPE, linkname="/tmp"),
                                info("link/tfw-fixture-pwned", data=b"x")])
# A hard link to a host secret.
write("hardlink.tar", [info("h", tarfile.LNKTYPE, linkname="/etc/shadow")])
write("chardev.tar", [info("null", tarfile.CHRTYPE)])
write("fifo.tar", [info("fifo", tarfile.FIFOTYPE)])
# libarchive CVE-2021-31566 class: a directory replaced by a symlink, then written through.
write("dir-then-symlink.tar", [info("d", tarfile.DIRTYPE),
                               info("d", tarfile.SYMTYPE, linkname="/tmp"),
                               info("d/tfw-fixture-pwned", data=b"x")])
write("file-then-dir.tar", [info("x", data=b"file"), info("x", tarfile.DIRTYPE)])
# The ".." hidden in a GNU long-name record (names over 100 bytes).
write("gnu-longname-dotdot.tar", [info("a" * 120 + "/../../outside/pwned", data=b"x")],
      fmt=tarfile.GNU_FORMAT)
# A harmless ustar name overridden by a pax path record.
write("pax-path-override.tar", [info("innocent", data=b"x", pax={"path": "../outside/pwned"})])
# The happy path: three files, nested directories.
write("ok-nested.tar", [info("docs", tarfile.DIRTYPE),
                        info("docs/report.txt", data=b"report\n"),
                        info("docs/sub", tarfile.DIRTYPE),
                        info("docs/sub/data.bin", data=bytes(range(256))),
                        info("top.txt", data=b"")])
