#!/usr/bin/env python3
"""Sum a runsc boot log written with `--strace --debug` (docs/performance.md, "Breakdown").

Reads the sentry's exit lines ("[ tid: tid] comm X name(args) = ret (...) (duration)") and prints
the system calls by kind: count, total time inside the sentry, failures; then by program (comm),
and the process-creation figures (execve, clone/fork/vfork, the loader's opens and mmaps).
Usage: strace-summary.py BOOT_LOG [TOP]
"""
import collections
import re
import sys

EXIT = re.compile(r"\] (?P<comm>\S+) X (?P<name>\w+)\((?P<args>.*)\) = (?P<ret>-?\d+|0x[0-9a-f]+)?"
                  r".*\((?P<dur>[\d.]+)(?P<unit>ns|µs|us|ms|s)\)\s*$")
ERR = re.compile(r"errno=(\d+) \(([^)]*)\)")
SCALE = {"ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    count, usec, fails = collections.Counter(), collections.Counter(), collections.Counter()
    by_comm, errs = collections.Counter(), collections.Counter()
    loader_opens = 0
    with open(path, errors="replace") as f:
        for line in f:
            if " X " not in line:
                continue
            m = EXIT.search(line)
            if not m:
                continue
            name = m["name"]
            count[name] += 1
            usec[name] += float(m["dur"]) * SCALE[m["unit"]]
            by_comm[m["comm"]] += 1
            e = ERR.search(line)
            if e:
                fails[name] += 1
                errs[(name, e.group(2))] += 1
            if name in ("openat", "open") and (".so" in m["args"] or "ld.so.cache" in m["args"]):
                loader_opens += 1
    total_n = sum(count.values())
    total_t = sum(usec.values())
    print(f"{total_n} system calls, {total_t / 1e3:.0f} ms inside the sentry (strace's own timing)")
    print(f"{'syscall':<18}{'count':>9}{'ms':>10}{'µs/call':>9}{'failed':>8}")
    for name, n in count.most_common(top):
        print(f"{name:<18}{n:>9}{usec[name] / 1e3:>10.1f}{usec[name] / n:>9.1f}{fails[name]:>8}")
    print("by time:", ", ".join(f"{k} {v / 1e3:.0f} ms" for k, v in usec.most_common(8)))
    print("by program:", ", ".join(f"{k} {v}" for k, v in by_comm.most_common(12)))
    print("failures:", ", ".join(f"{k[0]} {k[1]} {v}" for k, v in errs.most_common(8)))
    forks = sum(count[k] for k in ("clone", "clone3", "fork", "vfork"))
    mm = count["mmap"] + count["mprotect"] + count["munmap"]
    print(f"process creation: {count['execve']} execve, {forks} clone/fork/vfork, "
          f"{loader_opens} opens of shared objects or ld.so.cache, {mm} mmap/mprotect/munmap")


if __name__ == "__main__":
    main()
