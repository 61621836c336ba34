#!/usr/bin/env python3
# An independent verifier of tentaflake-worker attestations, for the tests only: the DSSE
# pre-authentication encoding is rebuilt here in Python from the DSSE specification
# (github.com/secure-systems-lab/dsse, "DSSEv1 SP LEN(type) SP type SP LEN(body) SP body")
# and the ed25519 signature is checked by OpenSSL's command line
# (`openssl pkeyutl -verify -rawin`), so neither the encoding nor the signature check shares
# code with the worker (which uses libsodium).
#
# usage: verify_attestation.py PUBLIC_KEY_BASE64 ENVELOPE.json [--expect KEY=VALUE ...]
# Prints the verified in-toto Statement as JSON on stdout; exit 0 verified, 1 not.
# --expect checks a field of the Statement: "subject.gitTree=<hex>" or "predicate.<key>=<value>".
import base64
import json
import os
import subprocess
import sys
import tempfile

ED25519_SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")


def pae(payload_type: bytes, body: bytes) -> bytes:
    return b"DSSEv1 %d %s %d %s" % (len(payload_type), payload_type, len(body), body)


def openssl_verify(pub: bytes, msg: bytes, sig: bytes) -> bool:
    with tempfile.TemporaryDirectory() as d:
        der = os.path.join(d, "pub.der")
        with open(der, "wb") as f:
            f.write(ED25519_SPKI_PREFIX + pub)
        pem = os.path.join(d, "pub.pem")
        subprocess.run(["openssl", "pkey", "-pubin", "-inform", "DER", "-in", der, "-out", pem],
                       check=True, capture_output=True)
        m = os.path.join(d, "msg")
        s = os.path.join(d, "sig")
        with open(m, "wb") as f:
            f.write(msg)
        with open(s, "wb") as f:
            f.write(sig)
        r = subprocess.run(["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", pem, "-rawin",
                            "-in", m, "-sigfile", s], capture_output=True)
        return r.returncode == 0 and b"Verified Successfully" in r.stdout


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    pub = base64.b64decode(sys.argv[1], validate=True)
    if len(pub) != 32:
        print("verify: public key is not 32 bytes", file=sys.stderr)
        return 1
    with open(sys.argv[2], "rb") as f:
        env = json.load(f)
    if set(env) != {"payloadType", "payload", "signatures"}:
        print("verify: envelope keys %r" % sorted(env), file=sys.stderr)
        return 1
    body = base64.b64decode(env["payload"], validate=True)
    msg = pae(env["payloadType"].encode(), body)
    ok = any(openssl_verify(pub, msg, base64.b64decode(s["sig"], validate=True))
             for s in env["signatures"])
    if not ok:
        print("verify: no signature verifies", file=sys.stderr)
        return 1
    if env["payloadType"] != "application/vnd.in-toto+json":
        print("verify: payloadType %r" % env["payloadType"], file=sys.stderr)
        return 1
    st = json.loads(body)
    if st.get("_type") != "https://in-toto.io/Statement/v1":
        print("verify: _type %r" % st.get("_type"), file=sys.stderr)
        return 1
    args = sys.argv[3:]
    while args:
        if args[0] != "--expect" or len(args) < 2:
            print("verify: bad arguments", file=sys.stderr)
            return 2
        key, _, want = args[1].partition("=")
        args = args[2:]
        if key == "subject.gitTree":
            got = st["subject"][0]["digest"].get("gitTree")
        elif key.startswith("predicate."):
            got = st["predicate"].get(key[len("predicate."):])
            got = "null" if got is None else (json.dumps(got) if isinstance(got, bool) else str(got))
        else:
            print("verify: unknown field %r" % key, file=sys.stderr)
            return 2
        if got != want:
            print("verify: %s is %r, expected %r" % (key, got, want), file=sys.stderr)
            return 1
    json.dump(st, sys.stdout, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
