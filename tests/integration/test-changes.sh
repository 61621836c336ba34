#!/usr/bin/env bash
# A job's changes come back as a changeset (issue 34 item 2; contract sections 6 and 7;
# docs/controller.md, "Changes"), with the real daemon and runsc, cold and through capsules
# started ahead:
#   - every kind of change is listed in changes.json (added, modified, an x bit changed,
#     deleted files and directories, a directory made over a removed one, directories made)
#     and nothing the job did not change (a file only touched, or chmod'ed without its x bit);
#   - each new content is staged at its path under the result's changes/, readable by the
#     controller; its id is git's SHA-256 blob id of those bytes, and each base id is the blob
#     id of the workspace's file the job was given;
#   - links, FIFOs and names that are not UTF-8 or hold a C0, C1 or bidi control are listed as
#     refused and not carried; apply shows every name and --diff every content escaped;
#     artifacts/, the cache's paths and the control directory are never part of it;
#   - result.json's "changes" counts them; a request with "changes": false gets none;
#   - past the bound (limits.max_changes_entries) the changeset says it is incomplete;
#   - the workspace itself is never written.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_runsc_worker

dir=$(test_dir tfw-it-changes)
chmod 0755 "$dir"
trap 'stop_daemon KILL >/dev/null 2>&1; worker_cleanup "$dir"' EXIT
as_ctl() { setpriv --reuid 10000 --regid 10000 --clear-groups "$@"; }
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
# blob FILE: git's SHA-256 blob id of a file's bytes.
blob() { python3 -c 'import hashlib,sys; b=open(sys.argv[1],"rb").read(); print(hashlib.sha256(b"blob %d\0" % len(b) + b).hexdigest())' "$1"; }
host_list() { (cd "$dir/ws" && find . -path ./.tentaflake-worker -prune -o -print0 | sort -z | xargs -0 stat -c '%n %s %Y %a' ); }

JOB='echo more >>keep/edit && echo new >added.txt && touch keep/touched && chmod g+w keep/gmode &&
 chmod +x keep/mode && rm keep/gone && rm -rf tree && rm -rf again && mkdir again && echo n >again/new &&
 mkdir -p made/empty && ln -s added.txt link && mkfifo fifo && echo x >"$(printf "bad\377name")" &&
 mkdir -p artifacts && echo a >artifacts/a && echo b >build/b && echo done'

phase() { # phase NAME WARM_SECONDS PREFIX
        local name=$1 warm=$2 p=$3 res
        echo "-- [$SECONDS s] $name"
        new_worker "$dir" ", \"runtime\": {\"warm_seconds\": $warm}, \"cache\": {\"paths\": [\"build\"]},
 \"limits\": {\"max_changes_entries\": 20}"
        res=$dir/results
        rm -rf "${dir:?}/ws/"* "$dir/ws/.tentaflake-worker"
        as_ctl sh -c "cd '$dir/ws' && mkdir -p keep tree/sub again &&
                printf 'edit\n' >keep/edit && echo t >keep/touched && echo g >keep/gmode && echo m >keep/mode &&
                echo gone >keep/gone && echo 1 >tree/1 && echo 2 >tree/sub/2 && echo o >again/old"
        start_daemon "$dir" || return 1
        before=$(host_list)
        submit "$dir" "${p}1" local-reversible "$(python3 -c 'import json,sys; print(json.dumps(["sh","-c",sys.argv[1]]))' "$JOB")"
        check "$name: the job ended" wait_result "$dir" "${p}1"
        check "$name: ... and succeeded" test "$(result_field "$dir" "${p}1" status)" = succeeded
        local m=$res/${p}1/changes.json
        kinds=$(json "$m" '" ".join(sorted(c["kind"] + ":" + c["path"] for c in d["changes"]))')
        want="added:added.txt deleted:again/old deleted:keep/gone deleted:tree deleted:tree/1 deleted:tree/sub deleted:tree/sub/2 directory:made directory:made/empty mode:keep/mode modified:keep/edit added:again/new refused:bad\\xffname refused:fifo refused:link"
        want=$(echo "$want" | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/ $//')
        check "$name: changes.json lists every change and nothing else" test "$kinds" = "$want" || echo "got:  $kinds"
        check "$name: complete" test "$(json "$m" 'd["complete"]')" = True
        check "$name: the new content is staged at its path" test "$(cat "$res/${p}1/changes/keep/edit")" = "$(printf 'edit\nmore')"
        check "$name: ... readable by the controller" quiet as_ctl cat "$res/${p}1/changes/added.txt"
        check "$name: its id is git's blob id of those bytes" \
                test "$(json "$m" '[c["id"] for c in d["changes"] if c["path"] == "keep/edit"][0]')" = "$(blob "$res/${p}1/changes/keep/edit")"
        check "$name: the base is the blob id of the workspace's file" \
                test "$(json "$m" '[c["base"] for c in d["changes"] if c["path"] == "keep/edit"][0]')" = "$(blob "$dir/ws/keep/edit")"
        check "$name: a deleted file names its base" \
                test "$(json "$m" '[c["base"] for c in d["changes"] if c["path"] == "keep/gone"][0]')" = "$(blob "$dir/ws/keep/gone")"
        check "$name: the x bit's change: mode 100755, the same id as its base" \
                test "$(json "$m" '[(c["mode"], c["id"] == c["base"]) for c in d["changes"] if c["path"] == "keep/mode"][0]')" = "('100755', True)"
        check "$name: nothing refused was carried" test ! -e "$res/${p}1/changes/link" -a ! -e "$res/${p}1/changes/fifo"
        check "$name: no artifact, cache entry or control file in it" \
                test ! -e "$res/${p}1/changes/artifacts" -a ! -e "$res/${p}1/changes/build" -a ! -e "$res/${p}1/changes/.tentaflake-worker"
        check "$name: result.json counts them" \
                test "$(json "$res/${p}1/result.json" '(lambda c: (c["added"], c["modified"], c["deleted"], c["directories"], c["refused"], c["truncated"]))(d["changes"])')" = "(2, 2, 6, 2, 3, False)"
        check "$name: the workspace was not written" test "$(host_list)" = "$before"

        printf '{"version":1,"id":"%s","action_class":"local-reversible","argv":["sh","-c","echo x >nochange.txt"],"changes":false}' "${p}2" \
                >"$dir/ws/.tentaflake-worker/inbox/.${p}2.json"
        mv "$dir/ws/.tentaflake-worker/inbox/.${p}2.json" "$dir/ws/.tentaflake-worker/inbox/${p}2.json"
        check "$name: \"changes\": false" wait_result "$dir" "${p}2"
        check "$name: ... gets none" test "$(result_field "$dir" "${p}2" changes)" = null -a ! -e "$res/${p}2/changes" -a ! -e "$res/${p}2/changes.json"

        submit "$dir" "${p}3" local-reversible '["sh","-c","for i in $(seq 1 30); do echo $i >f$i; done"]'
        check "$name: 30 files against a bound of 20" wait_result "$dir" "${p}3"
        check "$name: ... the changeset says it is incomplete" \
                test "$(json "$res/${p}3/changes.json" '(d["complete"], len(d["changes"]), "more than 20 changes" in d["incomplete"])')" = "(False, 20, True)"
        check "$name: ... and result.json that it is truncated" test "$(json "$res/${p}3/result.json" 'd["changes"]["truncated"]')" = True

        submit "$dir" "${p}4" irreversible '["sh","-c","echo approved >approved.txt"]'
        wait_file "$dir/results/${p}4.state.json" 30
        quiet tfw "$dir" approve "${p}4"
        check "$name: an approved job" wait_result "$dir" "${p}4"
        check "$name: ... returns its changes too" test "$(cat "$res/${p}4/changes/approved.txt")" = approved
        stop_daemon || true
        worker_cleanup "$dir" >/dev/null 2>&1
        dir=$(test_dir tfw-it-changes); chmod 0755 "$dir"
}

# apply (contract section 9): as the controller, the whole changeset or nothing.
apply_phase() {
        echo "-- [$SECONDS s] apply, as the controller"
        new_worker "$dir" ', "runtime": {"warm_seconds": 0}'
        local ws=$dir/ws res=$dir/results
        rm -rf "${ws:?}/"* "$ws/.tentaflake-worker"
        as_ctl sh -c "cd '$ws' && mkdir -p src old && printf 'a\n' >src/a.c && echo keep >src/keep && echo o >old/o && git init -q ."
        start_daemon "$dir" || return 1
        app() { (cd "$ws" && as_ctl env HOME=/tmp "$BIN" apply "$@"); }
        submit "$dir" a1 local-reversible '["sh","-c","printf \"a\\nb\\n\" >src/a.c && echo new >src/new.c && chmod +x src/keep && rm -rf old && mkdir -p gen/x && echo g >gen/x/g && printf \"\\033[2Jcleared\\n\" >esc.txt"]'
        check "apply: the job ended" wait_result "$dir" a1
        check "apply: --dry-run lists the changes" sh -c "cd '$ws' && setpriv --reuid 10000 --regid 10000 --clear-groups '$BIN' apply --dry-run a1 | grep -qx 'modified src/a.c'"
        check "apply: ... and writes nothing" test ! -e "$ws/src/new.c"
        check "apply: --diff shows a unified diff" sh -c "cd '$ws' && setpriv --reuid 10000 --regid 10000 --clear-groups '$BIN' apply --dry-run --diff a1 2>/dev/null | grep -qx '+b'"
        (cd "$ws" && setpriv --reuid 10000 --regid 10000 --clear-groups "$BIN" apply --dry-run --diff a1 >"$dir/a1.diff" 2>/dev/null)
        check "apply: --diff shows a job's control characters made visible" grep -qF '+\x1b[2Jcleared' "$dir/a1.diff"
        check "apply: ... never raw" sh -c "! grep -q \"\$(printf '\\033')\" '$dir/a1.diff'"
        check "apply: applied" quiet app a1
        check "apply: the modified file" test "$(cat "$ws/src/a.c")" = "$(printf 'a\nb')"
        check "apply: the added file, the controller's own" test "$(stat -c '%u %a' "$ws/src/new.c" 2>/dev/null)" = "10000 644" -a "$(cat "$ws/src/new.c")" = new
        check "apply: the x bit" test -x "$ws/src/keep"
        check "apply: the deleted directory" test ! -e "$ws/old"
        check "apply: the directories made" test "$(cat "$ws/gen/x/g")" = g
        check "apply: its staging directory is gone" sh -c "! ls -A '$ws' | grep -q '^.tfw-apply'"
        check "apply: a second time: a conflict, exit 1" sh -c "! (cd '$ws' && setpriv --reuid 10000 --regid 10000 --clear-groups '$BIN' apply a1 2>'$dir/a1.err')"
        check "apply: ... naming the path" grep -q "conflict: 'src/new.c' (added)" "$dir/a1.err"

        # A base that moved on: the whole set is refused, nothing written.
        submit "$dir" a2 local-reversible '["sh","-c","echo two >src/a.c && echo more >src/more.c"]'
        check "apply: a second job" wait_result "$dir" a2
        as_ctl sh -c "echo edited-meanwhile >'$ws/src/a.c'"
        check "apply: a conflicting base refuses everything" sh -c "! (cd '$ws' && setpriv --reuid 10000 --regid 10000 --clear-groups '$BIN' apply a2 2>'$dir/a2.err')"
        check "apply: ... names the conflict" grep -q "conflict: 'src/a.c' (modified): it changed since the job was given it" "$dir/a2.err"
        check "apply: ... and wrote nothing" test ! -e "$ws/src/more.c" -a "$(cat "$ws/src/a.c")" = edited-meanwhile

        # A directory the job removed that gained a file since: refused before anything is removed.
        as_ctl sh -c "mkdir -p '$ws/rm/sub' && echo r >'$ws/rm/sub/r' && echo k >'$ws/rm/k'"
        submit "$dir" a5 local-reversible '["sh","-c","rm -rf rm && echo side >side.txt"]'
        check "apply: a job removing a directory" wait_result "$dir" a5
        as_ctl sh -c "echo new >'$ws/rm/sub/new'"
        check "apply: it gained a file since: refused" sh -c "! (cd '$ws' && setpriv --reuid 10000 --regid 10000 --clear-groups '$BIN' apply a5 2>'$dir/a5.err')"
        check "apply: ... naming what it holds" grep -q "conflict: 'rm/sub' (deleted): it holds 'new', which the job did not remove" "$dir/a5.err"
        check "apply: ... and nothing was removed or written" test -e "$ws/rm/sub/r" -a -e "$ws/rm/k" -a ! -e "$ws/side.txt"

        # A file turned into a directory and a directory into a file, at the same names: the
        # changeset deletes each, then makes what replaced it; apply takes both.
        as_ctl sh -c "echo f >'$ws/swapf' && mkdir -p '$ws/swapd/deep' && echo in >'$ws/swapd/deep/in' && echo t >'$ws/swapd/t'"
        submit "$dir" a8 local-reversible '["sh","-c","rm swapf && mkdir swapf && echo inside >swapf/in && rm -rf swapd && echo now-a-file >swapd"]'
        check "apply: a job replacing a file by a directory and a directory by a file" wait_result "$dir" a8
        check "apply: ... its changeset is whole" test "$(json "$res/a8/changes.json" '(d["complete"], sorted((c["kind"], c["path"]) for c in d["changes"] if c["path"].startswith("swap")))')" = "(True, [('added', 'swapd'), ('added', 'swapf/in'), ('deleted', 'swapd'), ('deleted', 'swapd/deep'), ('deleted', 'swapd/deep/in'), ('deleted', 'swapd/t'), ('deleted', 'swapf'), ('directory', 'swapf')])"
        check "apply: ... applied" quiet app a8
        check "apply: ... the directory where the file was" test "$(cat "$ws/swapf/in")" = inside
        check "apply: ... the file where the directory was" test "$(cat "$ws/swapd")" = now-a-file

        # The same pair of type changes when a base moved on since (issue 46 item 4): refused
        # whole, nothing removed or made; applied once every base is again what the job was given.
        as_ctl sh -c "echo f >'$ws/tcf' && mkdir -p '$ws/tcd/deep' && echo in >'$ws/tcd/deep/in' && echo t >'$ws/tcd/t'"
        submit "$dir" a9 local-reversible '["sh","-c","rm tcf && mkdir tcf && echo inside >tcf/in && rm -rf tcd && echo now-a-file >tcd && echo side >side9.txt"]'
        check "apply: a job replacing a file by a directory and a directory by a file, again" wait_result "$dir" a9
        untouched9() { # untouched9 TCF_CONTENT: nothing of a9 was applied
                test "$(cat "$ws/tcf")" = "$1" -a -f "$ws/tcd/deep/in" -a -f "$ws/tcd/t" -a ! -e "$ws/side9.txt"
        }
        refused9() { ! app a9 2>"$dir/a9.err"; }
        as_ctl sh -c "echo edited >'$ws/tcf'"
        check "apply: the file made a directory changed since: refused" refused9
        check "  ... naming it" grep -q "conflict: 'tcf' (deleted): it changed since the job was given it" "$dir/a9.err"
        check "  ... and nothing was removed or made" untouched9 edited
        as_ctl sh -c "echo f >'$ws/tcf' && echo new >'$ws/tcd/deep/new'"
        check "apply: the directory made a file gained a file since: refused" refused9
        check "  ... naming what it holds" grep -q "conflict: 'tcd/deep' (deleted): it holds 'new', which the job did not remove" "$dir/a9.err"
        check "  ... and nothing was removed or made" untouched9 f
        check "  ... the new file kept" test -f "$ws/tcd/deep/new"
        as_ctl sh -c "rm '$ws/tcd/deep/new' && echo changed >'$ws/tcd/deep/in'"
        check "apply: a file in the directory made a file changed since: refused" refused9
        check "  ... naming it" grep -q "conflict: 'tcd/deep/in' (deleted): it changed since the job was given it" "$dir/a9.err"
        check "  ... and nothing was removed or made" untouched9 f
        as_ctl sh -c "echo in >'$ws/tcd/deep/in'"
        check "apply: every base as the job was given it: applied" quiet app a9
        check "  ... the directory where the file was" test "$(cat "$ws/tcf/in")" = inside
        check "  ... the file where the directory was" test "$(cat "$ws/tcd")" = now-a-file
        check "  ... and the rest" test "$(cat "$ws/side9.txt")" = side

        # A file replaced by a symbolic link: the link is refused (never carried), and the
        # deletion it shadows is not applied: the workspace keeps its file (nothing lost).
        as_ctl sh -c "echo l >'$ws/tol'"
        submit "$dir" a10 local-reversible '["sh","-c","rm tol && ln -s elsewhere tol && echo side >side10.txt"]'
        check "apply: a job replacing a file by a link" wait_result "$dir" a10
        check "  ... the changeset deletes the file and refuses the link" \
                test "$(json "$res/a10/changes.json" 'sorted((c["kind"], c.get("why", "")) for c in d["changes"] if c["path"] == "tol")')" = "[('deleted', ''), ('refused', 'a symbolic link')]"
        check "  ... applied" sh -c "cd '$ws' && setpriv --reuid 10000 --regid 10000 --clear-groups '$BIN' apply a10 2>'$dir/a10.err'"
        check "  ... saying the link was not carried" grep -q "not carried: 'tol': a symbolic link" "$dir/a10.err"
        check "  ... saying the file is kept" grep -q "kept: 'tol': the job replaced it with what is not carried" "$dir/a10.err"
        check "  ... no link made, the file kept, the rest applied" \
                test ! -L "$ws/tol" -a "$(cat "$ws/tol")" = l -a "$(cat "$ws/side10.txt")" = side

        # A hook planted in .git/: refused unless told.
        submit "$dir" a3 local-reversible '["sh","-c","mkdir -p .git/hooks && printf \"#!/bin/sh\\necho pwned\\n\" >.git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo x >x.txt"]'
        check "apply: a job planting a git hook" wait_result "$dir" a3
        check "apply: .git/ is refused" sh -c "! (cd '$ws' && setpriv --reuid 10000 --regid 10000 --clear-groups '$BIN' apply a3 2>'$dir/a3.err')"
        check "apply: ... saying why" grep -q "refused: '.git/hooks/pre-commit': the job changed a .git" "$dir/a3.err"
        check "apply: ... and nothing was written" test ! -e "$ws/.git/hooks/pre-commit" -a ! -e "$ws/x.txt"

        # A directory this user cannot write: found by the checks, nothing written.
        as_ctl sh -c "mkdir -p '$ws/ro' && echo r >'$ws/ro/f' && chmod 0555 '$ws/ro'"
        submit "$dir" a7 local-reversible '["sh","-c","echo changed >ro/f; echo top >top.txt"]'
        check "apply: a job changing a file in a read-only directory" wait_result "$dir" a7
        check "apply: refused" sh -c "! (cd '$ws' && setpriv --reuid 10000 --regid 10000 --clear-groups '$BIN' apply a7 2>'$dir/a7.err')"
        check "apply: ... naming it" grep -q "conflict: 'ro/f' (modified): its directory cannot be written by this user" "$dir/a7.err"
        check "apply: ... and nothing was written" test ! -e "$ws/top.txt" -a "$(cat "$ws/ro/f")" = r
        as_ctl chmod 0755 "$ws/ro"

        # A .git at any depth: a submodule's gitdir file, a nested repository's hook.
        as_ctl sh -c "mkdir -p '$ws/lib' '$ws/tools/.git/hooks' && echo 'gitdir: ../.git/modules/lib' >'$ws/lib/.git'"
        submit "$dir" a6 local-reversible '["sh","-c","echo gitdir: ../evil >lib/.git && echo x >tools/.git/hooks/pre-commit && echo ok >ok.txt"]'
        check "apply: a job changing nested .git entries" wait_result "$dir" a6
        check "apply: they are refused" sh -c "! (cd '$ws' && setpriv --reuid 10000 --regid 10000 --clear-groups '$BIN' apply a6 2>'$dir/a6.err')"
        check "apply: ... the submodule's gitdir file, named" grep -q "refused: 'lib/.git'" "$dir/a6.err"
        check "apply: ... the nested repository's hook, named" grep -q "refused: 'tools/.git/hooks/pre-commit'" "$dir/a6.err"
        check "apply: ... and nothing was written" test ! -e "$ws/ok.txt" -a ! -e "$ws/tools/.git/hooks/pre-commit" -a "$(cat "$ws/lib/.git")" = "gitdir: ../.git/modules/lib"

        # A path through a link: the workspace's directory replaced by a symbolic link since.
        submit "$dir" a4 local-reversible '["sh","-c","echo through >gen/x/through"]'
        check "apply: a job writing below gen/x" wait_result "$dir" a4
        mkdir -p "$dir/outside" && chown 10000:10000 "$dir/outside"
        as_ctl sh -c "rm -rf '$ws/gen/x' && ln -s '$dir/outside' '$ws/gen/x'"
        check "apply: a link in the way refuses the set" sh -c "! (cd '$ws' && setpriv --reuid 10000 --regid 10000 --clear-groups '$BIN' apply a4 2>'$dir/a4.err')"
        check "apply: ... and nothing was written through it (a directory the controller can write)" test ! -e "$dir/outside/through"
        check "apply: ... naming it" grep -q "conflict: 'gen/x/through'" "$dir/a4.err"
        hostile_names_phase
        stop_daemon || true
}

# apply's git rules (issue 46 item 1): a job makes a directory that git takes for a repository,
# or a link to one, with no component named .git in any path. Each vector is its own job and
# its own refusal, naming the path and the rule, with nothing written; --allow-git takes the
# git rules, never the control directory.
apply_git_phase() {
        echo "-- [$SECONDS s] apply: git's repositories without a .git"
        stop_daemon >/dev/null 2>&1; worker_cleanup "$dir" >/dev/null 2>&1
        dir=$(test_dir tfw-it-changes); chmod 0755 "$dir"
        new_worker "$dir" ', "runtime": {"warm_seconds": 0}'
        local ws=$dir/ws
        # What the workspace holds already: halves of repositories, a bare repository (a test
        # fixture), a linked worktree's commondir, a .gitmodules of the workspace's repository.
        as_ctl sh -c "cd '$ws' && git init -q . && mkdir -p src half/objects half/refs half2/refs wt2 &&
                echo 'ref: refs/heads/main' >half2/HEAD && echo ../.git >wt2/commondir && git init -q --bare fix.git &&
                printf '[submodule \"lib\"]\n\tpath = lib\n\turl = ../lib\n' >.gitmodules"
        start_daemon "$dir" || return 1
        # plant ID SCRIPT: the job runs SCRIPT in the workspace and ends
        plant() {
                submit "$dir" "$1" local-reversible "$(python3 -c 'import json,sys; print(json.dumps(["sh","-c",sys.argv[1]]))' "$2")"
                check "git $1: the job ended" wait_result "$dir" "$1"
        }
        # refused ID RULE PATH...: apply refuses the whole changeset, its message names RULE
        # (a pattern holding the path), and no PATH exists afterwards (ok-ID.txt, the job's
        # innocent file, among them)
        refused() {
                local id=$1 rule=$2 p; shift 2
                check "git $id: refused whole" sh -c "! (cd '$ws' && setpriv --reuid 10000 --regid 10000 --clear-groups '$BIN' apply $id 2>'$dir/$id.err')"
                check "git $id: ... naming the path and the rule" grep -q -- "$rule" "$dir/$id.err" || cat "$dir/$id.err"
                for p in "ok-$id.txt" "$@"; do
                        check "git $id: ... nothing written: '$p'" test ! -e "$ws/$p"
                done
        }
        local fsm='printf "[core]\n\tbare = false\n\tworktree = .\n\tfsmonitor = \"touch pwned\"\n"'
        plant g1 "mkdir -p src/objects src/refs && echo 'ref: refs/heads/main' >src/HEAD && $fsm >src/config && echo ok >ok-g1.txt"
        refused g1 "refused: 'src': git would take this directory for a repository after the changeset (a HEAD beside objects/ and refs/)" \
                src/HEAD src/config src/objects
        plant g2 "echo 'ref: refs/heads/main' >half/HEAD && echo ok >ok-g2.txt"
        refused g2 "refused: 'half': git would take this directory for a repository after the changeset (a HEAD beside objects/ and refs/)" half/HEAD
        plant g3 "mkdir half2/objects && echo ok >ok-g3.txt"
        refused g3 "refused: 'half2': git would take this directory for a repository after the changeset (a HEAD beside objects/ and refs/)" half2/objects
        plant g4 "$fsm >>fix.git/config && echo ok >ok-g4.txt"
        refused g4 "refused: 'fix.git': git would take this directory for a repository after the changeset"
        check "git g4: ... its config as it was" sh -c "! grep -q fsmonitor '$ws/fix.git/config'"
        plant g5 "mkdir wt && echo ../.git >wt/commondir && echo ok >ok-g5.txt"
        refused g5 "refused: 'wt/commondir': a commondir file" wt
        plant g6 "echo 'ref: refs/heads/main' >wt2/HEAD && echo ok >ok-g6.txt"
        refused g6 "refused: 'wt2': git would take this directory for a repository after the changeset (a HEAD beside a commondir)" wt2/HEAD
        plant g7 "mkdir lib2 && echo 'gitdir: ../evil' >lib2/gitdir && echo ok >ok-g7.txt"
        refused g7 "refused: 'lib2/gitdir': a gitdir file" lib2
        plant g8 "printf '[submodule \"lib\"]\n\tpath = lib\n\turl = ssh://evil.example/lib\n' >.gitmodules && echo ok >ok-g8.txt"
        refused g8 "refused: '.gitmodules': the job changed a .gitmodules"
        check "git g8: ... .gitmodules as it was" grep -q 'url = ../lib' "$ws/.gitmodules"
        # Names a folding file system takes for .git: a hook below .GIT, .git. and .g<U+200C>it.
        plant g9 "mkdir -p sub/.GIT/hooks sub2/.git. \"sub3/.g$(printf '\342\200\214')it\" && echo x >sub/.GIT/hooks/pre-commit &&
                echo x >sub2/.git./config && echo x >\"sub3/.g$(printf '\342\200\214')it/config\" && echo ok >ok-g9.txt"
        refused g9 "refused: 'sub/.GIT/hooks/pre-commit': the job changed a .git: a name that a case-insensitive or normalising file system takes for .git" sub/.GIT sub2
        check "git g9: ... .git. named" grep -q "refused: 'sub2/.git./config': the job changed a .git: a name" "$dir/g9.err"
        check "git g9: ... .g<U+200C>it named" grep -q "refused: 'sub3/.g$(printf '\342\200\214')it/config': the job changed a .git: a name" "$dir/g9.err"
        check "git g9: ... nothing written below them" test ! -e "$ws/sub2" -a ! -e "$ws/sub3/.g$(printf '\342\200\214')it"
        # --allow-git takes the git rules (g1 whole), never the control directory, folded or not.
        check "git g1: --allow-git takes it" quiet sh -c "cd '$ws' && setpriv --reuid 10000 --regid 10000 --clear-groups '$BIN' apply --allow-git g1 2>/dev/null"
        check "git g1: ... written" test -f "$ws/src/HEAD" -a -d "$ws/src/objects" -a -f "$ws/ok-g1.txt"
        plant g10 "mkdir -p .TENTAFLAKE-WORKER && echo x >.TENTAFLAKE-WORKER/inbox && echo ok >ok-g10.txt"
        check "git g10: a folded control directory, even with --allow-git" \
                sh -c "! (cd '$ws' && setpriv --reuid 10000 --regid 10000 --clear-groups '$BIN' apply --allow-git g10 2>'$dir/g10.err')"
        check "git g10: ... naming it" grep -q "refused: '.TENTAFLAKE-WORKER/inbox': a control directory of tentaflake-worker" "$dir/g10.err"
        check "git g10: ... nothing written" test ! -e "$ws/ok-g10.txt" -a ! -e "$ws/.TENTAFLAKE-WORKER"
        stop_daemon || true
}

# C0, C1, bidi controls and invalid UTF-8 shown to the reviewer (issue 46 item 2; threat 18): a
# name with a C1 CSI or a bidi override is refused at the layer, not carried, and named escaped;
# contents reach --diff's reader escaped; a path that would still hold them (a changes.json
# forged after the fact) is printed escaped by --dry-run and by a conflict.
hostile_names_phase() {
        local ws=$dir/ws res=$dir/results
        local job='touch "$(printf "n\302\2332J.txt")" "$(printf "evil\342\200\256txt.exe")" &&
 printf "c1 \302\2332J bidi \342\200\256drow esc \033[8m bad \377 cut \342\200\n" >hostile.txt && echo p >plain.txt'
        submit "$dir" h9 local-reversible "$(python3 -c 'import json,sys; print(json.dumps(["sh","-c",sys.argv[1]]))' "$job")"
        check "hostile names: the job ended" wait_result "$dir" h9
        check "hostile names: a C1 name and a bidi name are listed as refused, printable" \
                test "$(json "$res/h9/changes.json" '" ".join(sorted(c["path"] for c in d["changes"] if c["kind"] == "refused"))')" = 'evil\xe2\x80\xaetxt.exe n\xc2\x9b2J.txt'
        check "hostile names: ... and not carried" test ! -e "$res/h9/changes/$(printf 'n\302\2332J.txt')" -a ! -e "$res/h9/changes/$(printf 'evil\342\200\256txt.exe')"
        (cd "$ws" && as_ctl "$BIN" apply --dry-run --diff h9 >"$dir/h9.out" 2>"$dir/h9.err")
        check "hostile names: apply names what was not carried, escaped" grep -qF "not carried: 'n\xc2\x9b2J.txt'" "$dir/h9.err"
        check "hostile names: --diff shows C1, bidi, ESC and invalid UTF-8 as text" \
                grep -qxF '+c1 \u009b2J bidi \u202edrow esc \x1b[8m bad \xff cut \xe2\x80' "$dir/h9.out"
        check "hostile names: nothing raw reaches the reviewer" python3 -c '
import sys
b = open(sys.argv[1], "rb").read() + open(sys.argv[2], "rb").read()
sys.exit(any(x in b for x in (b"\x1b", b"\xc2\x9b", b"\xe2\x80\xae", b"\xff")))' "$dir/h9.out" "$dir/h9.err"
        # changes.json forged after the fact (root's file): plain.txt renamed to a hostile name.
        local bad; bad=$(printf 'p\302\233\342\200\256\033[2J.txt')
        python3 - "$res/h9/changes.json" "$bad" <<'PY'
import json, os, sys
d = json.load(open(sys.argv[1]))
bad = os.fsdecode(os.fsencode(sys.argv[2]))
for c in d["changes"]:
    if c["path"] == "plain.txt":
        c["path"] = bad
json.dump(d, open(sys.argv[1], "w"))
PY
        mv "$res/h9/changes/plain.txt" "$res/h9/changes/$bad"
        (cd "$ws" && as_ctl "$BIN" apply --dry-run h9 >"$dir/h9f.out" 2>"$dir/h9f.err")
        check "hostile names: --dry-run prints a hostile path escaped" grep -qxF 'added p\u009b\u202e\x1b[2J.txt' "$dir/h9f.out"
        as_ctl sh -c "echo here >'$ws/$bad'"
        check "hostile names: a conflict on it" sh -c "! (cd '$ws' && setpriv --reuid 10000 --regid 10000 --clear-groups '$BIN' apply h9 2>'$dir/h9c.err')"
        check "hostile names: ... names it escaped" grep -qF "conflict: 'p\u009b\u202e\x1b[2J.txt' (added)" "$dir/h9c.err"
        check "hostile names: ... nothing raw" python3 -c '
import sys
b = open(sys.argv[1], "rb").read() + open(sys.argv[2], "rb").read()
sys.exit(any(x in b for x in (b"\x1b", b"\xc2\x9b", b"\xe2\x80\xae")))' "$dir/h9f.out" "$dir/h9c.err"
        rm -f "$ws/$bad"
        # approve's show, on the operator's terminal: an agent's argv with a bidi override, a C1
        # CSI and DEL is shown escaped, not reordered.
        submit "$dir" h10 irreversible '["echo","rm -rf ~ \u202e \u009b2J \u007f"]'
        wait_file "$res/h10.state.json" 30
        tfw "$dir" show h10 >"$dir/h10.show" 2>&1
        check "show: an agent's bidi override, C1 CSI and DEL shown as text" grep -qF 'rm -rf ~ \u202e \u009b2J \x7f' "$dir/h10.show"
        check "show: ... nothing raw" python3 -c '
import sys
b = open(sys.argv[1], "rb").read()
sys.exit(any(x in b for x in (b"\x1b", b"\x7f", b"\xc2\x9b", b"\xe2\x80\xae")))' "$dir/h10.show"
        quiet tfw "$dir" deny h10
}

phase "capsules started for their job" 0 c
phase "capsules started ahead" 30 w
apply_phase
apply_git_phase
finish
