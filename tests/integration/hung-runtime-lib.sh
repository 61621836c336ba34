# A runtime that hangs (threat 13; sourced by test-hung-runtime*.sh after lib.sh): a wrapper of
# the real runsc, configured as the worker's runsc, that stops the job's sandbox with SIGSTOP,
# as a sandbox that hangs at boot (seen with --platform=kvm) or in the middle of a job does.
#
#   make_hung_runsc CTL   writes CTL/runsc. For `runsc ... run ...` it starts a watcher that
#                         finds the sandbox (the front process's child with "boot" in its argv)
#                         and stops it: CTL/mode "boot": as soon as it exists, before it has
#                         started the job; "run": once CTL/stop-now exists. The stopped pid
#                         is appended to CTL/stopped. Without CTL/mode it is plain runsc.
#                         Two more modes, for issue 33 finding 5 (the worker waited forever on a
#                         capsule started ahead whose teardown had missed its front process):
#                         "unnamed": `run` stays a process whose argv names no container and
#                         that is in no cgroup (as the worker's child is between fork and the
#                         exec of runsc) until the job cgroup the worker made for it is gone,
#                         or for 300 s, then becomes runsc with its arguments; its pid and the
#                         container id are appended to CTL/unnamed. "delete-fails": `delete`
#                         fails (exit 1) and deletes nothing, every other command is runsc's.
#                         And "linger" (issue 46: a runtime process that outlives its worker, as
#                         one in an uninterruptible wait does, which no kill ends): `run` leaves
#                         behind a process holding every descriptor the front was given but its
#                         stdout and stderr (the input channel's reader, and the lock the worker
#                         hands its runtime processes), which reads nothing, names no container
#                         and leaves the job's cgroups (so no teardown finds it), until
#                         CTL/let-go exists (or 300 s); its pid is appended to CTL/lingering.
#                         The front itself is runsc. "linger-boot": the same, and the sandbox
#                         stopped at boot as in "boot".
#   runsc_procs ROOT      the test's processes (pid and argv) whose argv names the runsc root
#                         ROOT: the front `runsc run`, the gofer, the sandbox, any `runsc delete`
#   job_cgroups GROUP     the job cgroups left in GROUP (tentaflake-worker-<name>), in every
#                         hierarchy
#   kill_leftovers ROOT CTL  the EXIT trap's part: SIGKILL what a failed run left (a stopped
#                         process dies of SIGKILL too), the watchers and lingering processes
#                         included: the test's own processes only
REAL_RUNSC=$(command -v runsc)

make_hung_runsc() {
        local ctl=$1
        {
                printf '#!/bin/bash\n# i11t: runsc whose sandbox is stopped (tests/integration/hung-runtime-lib.sh)\n'
                printf 'ctl=%q\nreal=%q\n' "$ctl" "$REAL_RUNSC"
                cat <<'EOF'
mode=
[ -e "$ctl/mode" ] && mode=$(<"$ctl/mode")
if [[ $mode = delete-fails && " $* " == *" delete "* ]]; then
        echo "i33t: delete refused (hung-runtime-lib.sh)" >&2
        exit 1
fi
if [[ $mode = unnamed && " $* " == *" run "* ]]; then
        echo "$$ ${!#}" >>"$ctl/unnamed"
        # The arguments travel in the environment, which the worker's teardown does not read.
        I33T_REAL=$real I33T_ARGS=$(printf '%s\n' "$@") exec python3 -c '
import json, os, time
real, args = os.environ.pop("I33T_REAL"), os.environ.pop("I33T_ARGS").split("\n")
bundle = args[args.index("--bundle") + 1]
group = json.load(open(bundle + "/config.json"))["linux"]["cgroupsPath"]
dirs = ["/sys/fs/cgroup/memory" + group, "/sys/fs/cgroup" + group]
end = time.monotonic() + 300
while any(os.path.isdir(d) for d in dirs) and time.monotonic() < end:
    time.sleep(0.01)
os.execv(real, [real] + args)'
fi
if [[ ( $mode = linger || $mode = linger-boot ) && " $* " == *" run "* ]]; then
        python3 -c '
import glob, os, sys, time
ctl, pid = sys.argv[1], os.getpid()
for procs in ["/sys/fs/cgroup/cgroup.procs"] + glob.glob("/sys/fs/cgroup/*/cgroup.procs"):
    try:
        with open(procs, "w") as f:
            f.write(str(pid))
    except OSError:
        pass
with open(ctl + "/lingering", "a") as f:
    f.write("%d\n" % pid)
end = time.monotonic() + 300
while not os.path.exists(ctl + "/let-go") and time.monotonic() < end:
    time.sleep(0.05)' "$ctl" <&0 >/dev/null 2>&1 &  # its stdin: the channel, not the /dev/null of &
        [ $mode = linger-boot ] && mode=boot
fi
if [[ ( $mode = boot || $mode = run ) && " $* " == *" run "* ]]; then
        front=$$
        (
                # Not one of the capsule's channels: the worker must see them end.
                exec </dev/null >/dev/null 2>&1
                sandbox= n=0
                while [ -z "$sandbox" ]; do
                        [ -d "/proc/$front" ] && [ $n -lt 60000 ] || exit 0
                        for t in /proc/$front/task/*/children; do
                                kids=()
                                read -r -a kids <"$t" 2>/dev/null # no newline at its end
                                for c in "${kids[@]}"; do
                                        mapfile -d '' argv <"/proc/$c/cmdline" 2>/dev/null || continue
                                        for a in "${argv[@]}"; do [ "$a" = boot ] && sandbox=$c; done
                                done
                        done
                        n=$((n + 1))
                        [ -n "$sandbox" ] || sleep 0.002
                done
                if [ "$mode" = run ]; then
                        n=0
                        while [ ! -e "$ctl/stop-now" ]; do
                                [ -d "/proc/$sandbox" ] && [ $n -lt 12000 ] || exit 0
                                n=$((n + 1))
                                sleep 0.05
                        done
                fi
                kill -STOP "$sandbox" && echo "$sandbox" >>"$ctl/stopped"
        ) &
fi
exec "$real" "$@"
EOF
        } >"$ctl/runsc"
        chmod 755 "$ctl/runsc"
}

_procs_naming() { # _procs_naming STRING: pid and argv of every process of the test's whose argv
        # contains STRING (lib.sh own_procs: never another worker's)
        own_procs "argv=$1" | cut -d' ' -f1,4-
}

runsc_procs() { _procs_naming "$1"; }

job_cgroups() {
        local group=$1 g
        for g in "/sys/fs/cgroup/$group" /sys/fs/cgroup/*/"$group"; do
                [ -d "$g" ] && find "$g" -mindepth 1 -maxdepth 1 -type d
        done
        return 0
}

kill_leftovers() {
        local root=$1 ctl=$2 p
        for p in $(cat "$ctl/lingering" 2>/dev/null) $(_procs_naming "$ctl/runsc" | cut -d' ' -f1) \
                $(_procs_naming "$root" | cut -d' ' -f1); do
                kill -KILL "$p" 2>/dev/null
        done
}
