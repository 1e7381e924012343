#!/usr/bin/env bash
#
# The coordination file as real hosts share it, through the built programs:
#   - with Flink's own script (tests/fixtures/flink-script/flink-coordination-pattern.sh does to
#     the file exactly what it does), in both orders and racing;
#   - when the answer cannot be written (stdout closed, full, a pipe without a reader);
#   - by workers of two Unix users (as root, through setpriv);
#   - by workers in two pid namespaces (as root, through unshare).
#
#     bash tests/host/coordination/shared_file_test.sh BUILD_DIR
#
# Prints "ok - NAME", "skip - NAME: WHY" or "not ok - NAME: DETAILS" per case, then
# "N passed, M failed"; exits non-zero if any case failed.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:?usage: shared_file_test.sh BUILD_DIR}" && pwd)
program=$build/plugins/external-resource-gpu/nvidia-gpu-discovery
cli=$build/bin/flink-gpu
flink=$here/../../fixtures/flink-script/flink-coordination-pattern.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/shared_file_test.XXXXXX") || exit 2
chmod 0755 "$work"
# The folders of exec's allocation files go here, not in /tmp: an exec killed here (SIGKILL) leaves
# its own behind. Sticky and open to all, as /tmp, for the other user's execs too.
mkdir -m 1777 "$work/tmp"
export TMPDIR=$work/tmp
unset XDG_RUNTIME_DIR
export FLINK_GPU_NVML_LIBRARY=$work/no-nvml/libnvidia-ml.so.1

owners=()
cleanup() {
    local pid
    # SIGKILL: unshare's parent ignores SIGTERM while it waits for its child.
    for pid in ${owners[@]+"${owners[@]}"}; do kill -KILL "$pid" 2> /dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT

passed=0 failed=0
pass() { passed=$((passed + 1)); printf 'ok - %s\n' "$1"; }
fail_case() { failed=$((failed + 1)); printf 'not ok - %s: %s\n' "$1" "$2"; }
skip() { printf 'skip - %s: %s\n' "$1" "$2"; }
expect() {  # expect NAME CONDITION-TEXT RESULT(0=ok)
    if [[ $3 -eq 0 ]]; then pass "$1"; else fail_case "$1" "$2"; fi
}

# start_owner: a live process to own GPUs; sets owner_pid.
start_owner() {
    sleep 300 > /dev/null 2>&1 &
    owner_pid=$!
    owners+=("$owner_pid")
}

# ours FILE AMOUNT OWNER GPUS: our discovery in coordination mode; sets out, rc.
ours() {
    out=$("$program" "$2" --gpus "$4" --enable-coordination-mode --coordination-file "$1" \
        --owner-pid "$3" 2> "$work/err")
    rc=$?
}

# owners_of FILE GPU: the pids recorded for GPU (field 2 of lines starting "GPU ").
owners_of() { awk -v gpu="$2" '$1 == gpu {print $2}' "$1" | sort | tr '\n' ' '; }

# --- Flink's script on the same file ----------------------------------------------------------

file=$work/flink-then-ours
start_owner; live=$owner_pid
ours "$file" 1 "$live" 0,1
# A dead owner's GPU whose number is how the live pid ends: Flink's `sed "/<gpu> /d"` would
# have matched our old `0 <pid> <start time>` line there.
# (Not GPU 0 or 1, which the case itself hands out: a longer ending where the pid ends in 000 or 001.)
for modulus in 1000 10000 100000 1000000 10000000; do
    gpu=$((live % modulus))
    ((gpu >= 2)) && break
done
dead=$(sh -c 'echo $$')
echo "$gpu $dead" >> "$file"
start_owner
taken=$("$flink" "$file" 1 "$owner_pid" "$gpu")
expect "Flink's script takes back a dead owner's GPU $gpu without deleting our record of GPU 0" \
    "took '$taken'; GPU 0 is now held by '$(owners_of "$file" 0)'" \
    "$([[ $taken == "$gpu" && $(owners_of "$file" 0) == "$live " ]]; echo $?)"
start_owner
taken=$("$flink" "$file" 1 "$owner_pid" 0 1)
expect "Flink's script reads our record's owner with grep and awk and passes GPU 0 over" \
    "took '$taken'" "$([[ $taken == 1 ]]; echo $?)"

file=$work/ours-then-flink
start_owner; flinks=$owner_pid
"$flink" "$file" 2 "$flinks" 0 1 > /dev/null
start_owner
ours "$file" 1 "$owner_pid" 0,1,2
expect "our discovery reads Flink's records and passes its GPUs over" "got '$out' ($rc)" \
    "$([[ $rc -eq 0 && $out == 2 ]]; echo $?)"
kill "$flinks"; wait "$flinks" 2> /dev/null
start_owner
ours "$file" 2 "$owner_pid" 0,1,2
expect "our discovery takes back a dead Flink owner's GPUs" "got '$out' ($rc)" \
    "$([[ $rc -eq 0 && $out == 0,1 ]]; echo $?)"

# Racing: in each round four of ours and, one after another, two Flink scripts ask for one of
# six GPUs, every owner alive. Nothing may be lost and no GPU may have two owners.
file=$work/race
problems=
for round in $(seq 1 12); do
    : > "$file"
    pids=() expected=()
    for i in 1 2 3 4; do
        start_owner; expected+=("$owner_pid")
        "$program" 1 --gpus 0,1,2,3,4,5 --enable-coordination-mode --coordination-file "$file" \
            --owner-pid "$owner_pid" > "$work/race.$i" 2>&1 &
        pids+=($!)
    done
    start_owner; f1=$owner_pid
    start_owner; f2=$owner_pid
    expected+=("$f1" "$f2")
    { "$flink" "$file" 1 "$f1" 0 1 2 3 4 5; "$flink" "$file" 1 "$f2" 0 1 2 3 4 5; } > /dev/null 2>&1 &
    pids+=($!)
    wait "${pids[@]}"
    for pid in "${expected[@]}"; do
        [[ $(awk -v p="$pid" '$2 == p' "$file" | wc -l) -eq 1 ]] ||
            problems+="round $round: owner $pid has $(awk -v p="$pid" '$2 == p' "$file" | wc -l) records; "
    done
    dupes=$(awk 'NF {print $1}' "$file" | sort | uniq -d | tr '\n' ' ')
    [[ -z $dupes ]] || problems+="round $round: GPUs with two owners: $dupes; "
    for pid in "${expected[@]}"; do kill "$pid" 2> /dev/null; done
done
expect "Flink's script and ours racing on one file: every owner has its one record, no GPU two" \
    "$problems" "$([[ -z $problems ]]; echo $?)"

# --- an answer that cannot be written ---------------------------------------------------------

start_owner
for how in closed full pipe; do
    file=$work/answer-$how
    case $how in
        closed) "$program" 1 --gpus 0,1 --enable-coordination-mode --coordination-file "$file" \
                    --owner-pid "$owner_pid" >&- 2> "$work/err"; rc=$? ;;
        full) "$program" 1 --gpus 0,1 --enable-coordination-mode --coordination-file "$file" \
                  --owner-pid "$owner_pid" > /dev/full 2> "$work/err"; rc=$? ;;
        # The reader is gone long before the program writes.
        pipe) { sleep 0.3; "$program" 1 --gpus 0,1 --enable-coordination-mode \
                    --coordination-file "$file" --owner-pid "$owner_pid" 2> "$work/err";
                echo $? > "$work/rc"; } | true
              rc=$(cat "$work/rc") ;;
    esac
    records=$(grep -c . "$file" 2> /dev/null)
    expect "stdout $how: exit 1, the error names the program, no record is left" \
        "exit $rc, $records record(s), stderr: $(cat "$work/err")" \
        "$([[ $rc -eq 1 && ${records:-0} -eq 0 ]] &&
            grep -q '^nvidia-gpu-discovery: cannot write the answer: ' "$work/err"; echo $?)"
done

# --- two Unix users ---------------------------------------------------------------------------

if [[ $(id -u) -ne 0 ]] || ! command -v setpriv > /dev/null; then
    skip "workers of two users" "needs root and setpriv"
else
    as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
    # The other users run a copy of the install layout in $work: the build tree may lie in a folder
    # they cannot search (a clone in a `mktemp -d` folder is 0700).
    tree=$work/tree
    mkdir -p "$tree/bin" "$tree/plugins/external-resource-gpu"
    cp "$cli" "$tree/bin/"
    cp "$build"/plugins/external-resource-gpu/{nvidia-gpu-discovery,nvidia-gpu-discovery.sh,gpu-discovery-common.sh} \
        "$tree/plugins/external-resource-gpu/"
    # A sanitizer build's flink-gpu loads the shared library through $ORIGIN/../lib.
    mkdir -p "$tree/lib"
    cp -P "$build"/lib/libflink-external-resource-gpu.so* "$tree/lib/" 2> /dev/null || true
    cli=$tree/bin/flink-gpu
    program=$tree/plugins/external-resource-gpu/nvidia-gpu-discovery
    shared=$work/users
    mkdir -m 0755 "$shared"
    start_owner
    "$program" 1 --gpus 0,1 --enable-coordination-mode --coordination-file "$shared/file" \
        --owner-pid "$owner_pid" > /dev/null
    chmod 0644 "$shared/file"
    as_nobody "$program" 1 --gpus 0,1 --enable-coordination-mode \
        --coordination-file "$shared/file" --owner-pid "$owner_pid" > /dev/null 2> "$work/err"
    rc=$?
    expect "a file another user may not write: its owner, group, mode and the fix" \
        "exit $rc, stderr: $(cat "$work/err")" \
        "$([[ $rc -eq 1 ]] && grep -q 'cannot open it for writing.*owner root, group root, mode 0644.*chmod g+rw' "$work/err"; echo $?)"
    # Shared as docs/coordination-file.md says: a sticky folder everyone may write (like /var/tmp), the file
    # writable by all. With fs.protected_regular, opening another user's file there with O_CREAT
    # fails even so: we must not ask for it.
    chmod 1777 "$shared"
    chmod 0666 "$shared/file"
    rm -f "$shared/file.journal"
    out=$(as_nobody "$program" 1 --gpus 0,1 --enable-coordination-mode \
        --coordination-file "$shared/file" --owner-pid "$owner_pid" 2> "$work/err")
    rc=$?
    expect "a second user allocates from a shared file in a sticky folder" \
        "exit $rc, out '$out', stderr: $(cat "$work/err")" "$([[ $rc -eq 0 && $out == 1 ]]; echo $?)"
    expect "the journal that user made is as writable as the file" \
        "$(stat -c '%A %U' "$shared/file.journal" 2>&1)" \
        "$([[ $(stat -c %a "$shared/file.journal") == 666 ]]; echo $?)"

    # The group set-up of docs/coordination-file.md in a sticky folder: the file of group `users`, g+rw. After root's
    # first exec (journal, lease folder and lease file made by root), a member of the group must
    # still get a free GPU, through exec and through an in-process worker.
    as_member() { setpriv --reuid=nobody --regid=nogroup --groups=100 "$@"; }
    group=$work/group
    mkdir -m 1777 "$group"
    : > "$group/file"
    chgrp users "$group/file" && chmod 0660 "$group/file"
    (umask 077; exec "$cli" exec --amount 1 --gpus 0,1,2 --coordination-file "$group/file" \
        -- sleep 300) > /dev/null 2>&1 &
    owners+=($!)
    for _ in $(seq 1 400); do [[ -s $group/file ]] && break; sleep 0.05; done  # 20 s
    out=$(as_member "$cli" exec --amount 1 --gpus 0,1,2 --coordination-file "$group/file" \
        -- sh -c 'echo $CUDA_VISIBLE_DEVICES' 2> "$work/err")
    rc=$?
    expect "a group member's exec gets a free GPU after root's first exec, whatever root's umask" \
        "exit $rc, out '$out', stderr: $(cat "$work/err"); $(ls -la "$group" "$group/file.leases" 2>&1)" \
        "$([[ $rc -eq 0 && $out == 1 ]]; echo $?)"
    out=$(as_member "$cli" discover --amount 1 --discovery-args \
        "--gpus 0,1,2 --enable-coordination-mode --coordination-file $group/file" 2> "$work/err")
    rc=$?
    expect "and so does a group member's in-process worker" \
        "exit $rc, out '$out', stderr: $(cat "$work/err")" "$([[ $rc -eq 0 && $out == 'GPU Device('[12]')' ]]; echo $?)"
    expect "what root made beside the file has the file's mode and group" \
        "$(stat -c '%a %G %n' "$group/file.journal" "$group/file.leases" "$group/file.leases"/* 2>&1)" \
        "$([[ $(stat -c '%a %G' "$group/file.journal") == '660 users' &&
              $(stat -c '%a %G' "$group/file.leases") == '3770 users' ]]; echo $?)"

    # A lease file this user may not open passes its GPU over; it is never fatal.
    "$cli" release --gpu 1 --coordination-file "$group/file" > /dev/null
    "$cli" release --gpu 2 --coordination-file "$group/file" > /dev/null
    rm -f "$group/file.leases/index-1"
    : > "$group/file.leases/index-1"
    chmod 0600 "$group/file.leases/index-1"
    out=$(as_member "$cli" exec --amount 1 --gpus 0,1,2 --coordination-file "$group/file" \
        -- sh -c 'echo $CUDA_VISIBLE_DEVICES' 2> "$work/err")
    rc=$?
    expect "a lease file this user cannot open is passed over for the next free GPU" \
        "exit $rc, out '$out', stderr: $(cat "$work/err")" \
        "$([[ $rc -eq 0 && $out == 2 ]] && grep -q 'GPU 1 is passed over' "$work/err"; echo $?)"

    # /proc mounted hidepid=2 (systemd's ProtectProc=invisible): another user's worker cannot
    # be seen there, and must not be taken for gone.
    hidden=$work/hidden
    mkdir -m 1777 "$hidden"
    : > "$hidden/file"
    chmod 0666 "$hidden/file"
    setpriv --reuid=daemon --regid=daemon --clear-groups sleep 300 > /dev/null 2>&1 &
    daemon_pid=$!
    owners+=("$daemon_pid")
    "$program" 1 --gpus 0,1 --enable-coordination-mode --coordination-file "$hidden/file" \
        --owner-pid "$daemon_pid" > /dev/null 2>&1
    if unshare --mount sh -c 'mount -t proc -o hidepid=2 proc /proc' 2> /dev/null; then
        out=$(unshare --mount sh -c "mount -t proc -o hidepid=2 proc /proc && \
            setpriv --reuid=nobody --regid=nogroup --clear-groups \
            \"$program\" 1 --gpus 0 --enable-coordination-mode \
            --coordination-file \"$hidden/file\" --owner-pid \$\$" 2> "$work/err")
        rc=$?
        expect "a worker /proc hides from this user (hidepid=2) still holds its GPU" \
            "exit $rc, out '$out', stderr: $(cat "$work/err")" \
            "$([[ $rc -eq 1 && -z $out ]] && ! grep -q 'took back' "$work/err"; echo $?)"
    else
        skip "a worker /proc hides from this user" "cannot mount proc with hidepid=2"
    fi

    # Another user plants a journal and a lease folder before root's first write, in a sticky
    # folder everyone may write: root's allocator never uses them. Root may move them aside: it
    # does, keeps them, names them in a warning, and goes on. (A user who may not move them aside
    # is refused: promise_test.sh.)
    planted=$work/planted
    mkdir -m 1777 "$planted"
    as_nobody sh -c "printf 'flink-gpu journal 1\\n' > '$planted/file.journal'; mkdir '$planted/file.leases'; touch '$planted/file.leases/kept'"
    "$program" 1 --gpus 0,1 --enable-coordination-mode --coordination-file "$planted/file" \
        --owner-pid "$owner_pid" > /dev/null 2> "$work/err"
    rc=$?
    aside=$(ls -d "$planted"/file.journal.untrusted-* 2> /dev/null)
    expect "a journal another user planted is moved aside by root: named, with its owner and mode, and kept" \
        "exit $rc, stderr: $(cat "$work/err")" \
        "$([[ $rc -eq 0 && -n $aside && $(stat -c %U "$aside") == nobody ]] &&
            grep -q "warning: coordination file $planted/file: its journal $planted/file.journal failed the trust rules (its owner nobody may not write the coordination file; owner nobody, group nogroup, mode 0644): moved aside to $aside, kept" "$work/err"; echo $?)"
    aside=$(ls -d "$planted"/file.leases.untrusted-* 2> /dev/null)
    expect "a lease folder another user planted is moved aside by root too, and kept" \
        "stderr: $(cat "$work/err")" \
        "$([[ -n $aside && $(ls -A "$aside") == kept ]] &&
            grep -q "warning: lease folder $planted/file.leases failed the trust rules (its owner nobody" "$work/err"; echo $?)"
    "$cli" exec --amount 1 --gpus 0,1 --coordination-file "$planted/file" -- true \
        > /dev/null 2> "$work/err"
    rc=$?
    expect "and the leases are taken in a folder of root's own" \
        "exit $rc, stderr: $(cat "$work/err")" \
        "$([[ $rc -eq 0 && $(stat -c %U "$planted/file.leases") == root && $(ls -A "$aside") == kept ]]; echo $?)"
fi

# --- two pid namespaces -----------------------------------------------------------------------

if [[ $(id -u) -ne 0 ]] || ! unshare --pid --fork --mount-proc true 2> /dev/null; then
    skip "workers in two pid namespaces" "needs root and unshare --pid"
else
    file=$work/namespaces
    # A worker in its own pid namespace holds GPU 0 for a process that is pid 2 or so there.
    unshare --pid --fork --kill-child --mount-proc sh -c "sleep 300 & \"$program\" 1 --gpus 0,1 \
        --enable-coordination-mode --coordination-file \"$file\" --owner-pid \$! > \"$work/ns.out\"; \
        touch \"$work/ns.ready\"; wait" > /dev/null 2>&1 &
    owners+=($!)
    for _ in $(seq 1 400); do [[ -e $work/ns.ready ]] && break; sleep 0.05; done  # 20 s
    inner_pid=$(awk '{print $2}' "$file")
    start_owner
    ours "$file" 2 "$owner_pid" 0,1
    expect "a record of another pid namespace is never judged by its pid here" \
        "namespace got '$(cat "$work/ns.out")' (pid $inner_pid there); we got '$out' ($rc)" \
        "$([[ $(cat "$work/ns.out") == 0 && $rc -eq 1 ]]; echo $?)"
    ours "$file" 1 "$owner_pid" 0,1
    expect "the other GPU is still ours to take" "got '$out' ($rc)" "$([[ $rc -eq 0 && $out == 1 ]]; echo $?)"
    status=$("$cli" status --coordination-file "$file")
    expect "status shows the record as of another pid namespace" "$status" \
        "$(grep -q '^0 .*other pid namespace' <<< "$status"; echo $?)"

    # exec leases its GPUs: a record of another namespace then blocks nobody once its holder is
    # gone, however its pid looks from here.
    file=$work/namespace-leases
    unshare --pid --fork --kill-child --mount-proc "$cli" exec --amount 1 --gpus 0,1 \
        --coordination-file "$file" -- sleep 300 > /dev/null 2>&1 &
    holder=$!
    owners+=("$holder")
    for _ in $(seq 1 400); do [[ -s $file ]] && break; sleep 0.05; done  # 20 s
    start_owner
    ours "$file" 2 "$owner_pid" 0,1
    expect "a leased GPU of another pid namespace is held while its command runs" \
        "got '$out' ($rc); file: $(tr '\t' ' ' < "$file")" "$([[ $rc -eq 1 ]]; echo $?)"
    # unshare ignores SIGTERM while it waits; its child dies just after it (--kill-child): allow
    # it a moment. Judged by its pid, the record would stay held for ever.
    kill -KILL "$holder"; wait "$holder" 2> /dev/null
    for _ in $(seq 1 50); do
        ours "$file" 2 "$owner_pid" 0,1
        [[ $rc -eq 0 ]] && break
        sleep 0.1
    done
    expect "and comes back the moment that namespace is gone" "got '$out' ($rc)" \
        "$([[ $rc -eq 0 && $out == 0,1 ]]; echo $?)"
fi

# --- a time namespace of its own ------------------------------------------------------------

if [[ $(id -u) -ne 0 ]] || ! unshare --time --boottime 86400 true 2> /dev/null; then
    skip "a worker in a time namespace of its own" "needs root and unshare --time"
else
    # /proc/<pid>/stat counts start times from boot as the reader's time namespace has it: a
    # record made in one whose boot-time offset is a day must still name its running owner here.
    file=$work/time-namespace
    start_owner
    unshare --time --boottime 86400 "$program" 1 --gpus 0,1 --enable-coordination-mode \
        --coordination-file "$file" --owner-pid "$owner_pid" > /dev/null 2> "$work/err"
    start_owner
    ours "$file" 2 "$owner_pid" 0,1
    expect "a record made in a time namespace of its own names its running owner here" \
        "got '$out' ($rc); file: $(tr '\t' ' ' < "$file")" "$([[ $rc -eq 1 ]]; echo $?)"
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
