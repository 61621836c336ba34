# Shared helpers for the integration tests (sourced). Root, real runsc.
BIN=${BIN:-${BUILD:-build}/tentaflake-worker}
passes=0 fails=0

check() { # check DESCRIPTION COMMAND...: the command must succeed
        local what=$1; shift
        if "$@"; then passes=$((passes + 1)); else echo "FAIL: $what"; fails=$((fails + 1)); fi
}

require_root() {
        if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root"; exit 77; fi
}

# new_worker DIR [EXTRA_JSON]: a config for a worker in DIR (workspace DIR/ws, uid/gid 10000).
new_worker() {
        local dir=$1 extra=${2:-}
        mkdir -p "$dir/ws"
        chown 10000:10000 "$dir/ws"
        cat >"$dir/config.json" <<JSON
{"version": 1, "name": "it-$(basename "$dir" | tr -cd 'a-z0-9' | head -c 20)",
 "workspace": "$dir/ws", "container_uid": 10000, "container_gid": 10000,
 "state_dir": "$dir/state", "results_dir": "$dir/results"$extra}
JSON
}

# submit DIR ID CLASS ARGV_JSON: write atomically as a controller would
submit() {
        local dir=$1 id=$2 cls=$3 argv=$4 inbox="$1/ws/.tentaflake-worker/inbox"
        printf '{"version":1,"id":"%s","action_class":"%s","argv":%s}' "$id" "$cls" "$argv" >"$inbox/.$id.tmp"
        mv "$inbox/.$id.tmp" "$inbox/$id.json"
}

# wait_file PATH [SECONDS]: wait for a path to appear (inotifywait-free: bounded poll of the
# file system, used only as a test harness timeout, never as a timing assertion)
wait_file() {
        local path=$1 limit=${2:-120} i=0
        while [ ! -e "$path" ]; do
                i=$((i + 1))
                [ $i -gt $((limit * 10)) ] && return 1
                sleep 0.1
        done
}

result_field() { # result_field DIR ID FIELD
        python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print("null" if v is None else v)' \
                "$1/results/$2/result.json" "$3"
}

finish() {
        echo "$(basename "$0"): $passes passed, $fails failed"
        [ "$fails" -eq 0 ]
}
