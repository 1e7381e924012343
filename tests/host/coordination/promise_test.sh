#!/usr/bin/env bash
#
# The promise - a GPU is never held by two running workers - at the edges where issue 28's
# break-it round found it broken (D1-D7), through the built programs, each as root and as another
# user (setpriv, in a sticky folder) where that applies, in containers (unshare -p), without /proc
# of one's own, and in a time namespace whose offset is no whole number of clock ticks:
#
#   D1  an exec in a container whose command closes the descriptors it inherited keeps its GPU
#   D2  start times read in a time namespace with a fractional offset agree with the host's
#   D3  a worker without /proc of its own pid namespace judges no host record by its pids
#   D4  a held lease keeps its GPU from a worker that names the GPU another way (NVML or not)
#   D5  a writer waits for Flink's script, which writes the file it replaced with `sed -i`
#   D7  another user's drain or share against a file it may not write is refused, creating
#       nothing; a planted file that this user may not move aside is refused, naming the fix
# (D6, fork, is tests/flink/externalresource/gpu/GPUDriverInProcessTest.cpp's: it needs no user
# or namespace.)
#
#     bash tests/host/coordination/promise_test.sh BUILD_DIR TIMENS_HELPER FAKE_NVML FIXTURES
#
# Prints "ok - NAME", "skip - NAME: WHY" or "not ok - NAME: DETAILS" per case, then
# "N passed, M failed"; exits non-zero if any case failed. Most cases need root (namespaces,
# setpriv): as another user they are skipped, saying so.
set -u

build=$(cd "${1:?usage: promise_test.sh BUILD_DIR TIMENS_HELPER FAKE_NVML FIXTURES}" && pwd)
timens=${2:?}
fake_nvml=${3:?}
fixtures=$(cd "${4:?}" && pwd)
program=$build/plugins/external-resource-gpu/nvidia-gpu-discovery
cli=$build/bin/flink-gpu
flink=$fixtures/flink-script/flink-coordination-pattern.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/promise_test.XXXXXX") || exit 2
chmod 0755 "$work"
# The folders of exec's allocation files go here, not in /tmp: an exec killed here (SIGKILL) leaves
# its own behind. Sticky and open to all, as /tmp, for the other user's execs too.
mkdir -m 1777 "$work/tmp"
export TMPDIR=$work/tmp
unset XDG_RUNTIME_DIR
# No NVML unless a case asks for the stand-in, and no inherited mask.
export FLINK_GPU_NVML_LIBRARY=$work/no-nvml/libnvidia-ml.so.1
unset CUDA_VISIBLE_DEVICES

background=()
cleanup() {
    local pid
    for pid in ${background[@]+"${background[@]}"}; do kill -KILL "$pid" 2> /dev/null; done
    wait 2> /dev/null
    rm -rf "$work"
}
trap cleanup EXIT

passed=0 failed=0
pass() { passed=$((passed + 1)); printf 'ok - %s\n' "$1"; }
fail_case() { failed=$((failed + 1)); printf 'not ok - %s: %s\n' "$1" "$2"; }
skip() { printf 'skip - %s: %s\n' "$1" "$2"; }
expect() {  # expect NAME DETAILS RESULT(0=ok)
    if [[ $3 -eq 0 ]]; then pass "$1"; else fail_case "$1" "$2"; fi
}

root=false
[[ $(id -u) -eq 0 ]] && root=true
# The other user runs a copy of what it runs in $work: the build tree may lie in a folder it
# cannot search (a clone in a `mktemp -d` folder is 0700).
if $root; then
    tree=$work/tree
    mkdir -p "$tree/bin" "$tree/lib" "$tree/plugins/external-resource-gpu" "$tree/nvml" "$tree/flink"
    cp "$cli" "$timens" "$tree/bin/"
    cp "$build"/plugins/external-resource-gpu/{nvidia-gpu-discovery,nvidia-gpu-discovery.sh,gpu-discovery-common.sh} \
        "$tree/plugins/external-resource-gpu/"
    # A sanitizer build's flink-gpu loads the shared library through $ORIGIN/../lib.
    cp -P "$build"/lib/libflink-external-resource-gpu.so* "$tree/lib/" 2> /dev/null || true
    cp "$fake_nvml" "$tree/nvml/"
    cp "$flink" "$tree/flink/"
    chmod -R a+rX "$tree"
    cli=$tree/bin/flink-gpu
    timens=$tree/bin/$(basename "$timens")
    program=$tree/plugins/external-resource-gpu/nvidia-gpu-discovery
    fake_nvml=$tree/nvml/$(basename "$fake_nvml")
    flink=$tree/flink/$(basename "$flink")
fi
# The other user: nobody, with no group of root's.
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
# `as USER cmd...`: this user runs it as itself, nobody through setpriv.
me=$(id -un)
as() {
    local user=$1
    shift
    if [[ $user == "$me" ]]; then "$@"; else as_nobody "$@"; fi
}
# `spawn USER cmd... &`: as `as`, but the command replaces the subshell, so that $! is its pid.
spawn() {
    local user=$1
    shift
    if [[ $user == "$me" ]]; then exec "$@"; else exec setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; fi
}
users=("$me")
if $root && as_nobody true 2> /dev/null; then users+=(nobody); fi

# wait_for FILE: until it exists (10 s at most).
wait_for() { for _ in $(seq 1 200); do [[ -e $1 ]] && return 0; sleep 0.05; done; return 1; }

# A folder for one case and user: sticky and writable by everyone, as /var/tmp is.
folder() {
    local dir=$work/$1-$2
    mkdir -m 1777 "$dir"
    echo "$dir"
}

# The stand-in NVML's host of four GPUs, readable by every user.
cat > "$work/host.json" << 'EOF'
{"devices": [
  {"uuid": "GPU-00000000-1111-2222-3333-444444444444", "pci_bus_id": "00000000:19:00.0"},
  {"uuid": "GPU-11111111-1111-2222-3333-444444444444", "pci_bus_id": "00000000:3B:00.0"},
  {"uuid": "GPU-22222222-1111-2222-3333-444444444444", "pci_bus_id": "00000000:5D:00.0"},
  {"uuid": "GPU-33333333-1111-2222-3333-444444444444", "pci_bus_id": "00000000:9A:00.0"}
]}
EOF
chmod 0644 "$work/host.json"
with_nvml=(env "FLINK_GPU_NVML_LIBRARY=$fake_nvml" "FAKE_NVML_DEVICES=$work/host.json")

# A command that closes every descriptor it inherited (as sudo's closefrom and Python's
# os.closerange do), says it is up, and runs on: `bash -c "$(closer READY)"` (bash: dash takes
# `exec 10>&-` for a syntax error and exits).
closer() {
    echo "for fd in /proc/self/fd/*; do n=\${fd##*/}; [ \"\$n\" -gt 2 ] && eval \"exec \$n>&-\"; done 2> /dev/null; touch '$1'; exec sleep 60"
}

can_unshare_pid=false
$root && unshare --pid --fork --mount-proc true 2> /dev/null && can_unshare_pid=true

# --- D1: exec in a container whose command closes its descriptors -----------------------------

if ! $can_unshare_pid; then
    skip "D1: an exec in a container keeps its GPU while its command runs" "needs root and unshare --pid"
else
    for user in "${users[@]}"; do
        dir=$(folder d1 "$user")
        file=$dir/coordination
        ready=$dir/ready
        unshare --pid --fork --mount-proc --kill-child \
            setpriv $([[ $user == nobody ]] && echo --reuid=nobody --regid=nogroup --clear-groups) \
            "$cli" exec --amount 1 --gpus 0 --coordination-file "$file" -- \
            bash -c "$(closer "$ready")" > "$dir/out" 2>&1 &
        background+=($!)
        container=$!
        wait_for "$ready"
        as "$user" "$cli" exec --amount 1 --gpus 0 --coordination-file "$file" -- true \
            > "$dir/host.out" 2>&1
        rc=$?
        expect "D1 ($user): an exec in a container whose command closed its descriptors keeps its GPU from the host's exec" \
            "host exec exit $rc: $(cat "$dir/host.out"); container: $(cat "$dir/out")" \
            "$([[ $rc -eq 1 ]]; echo $?)"
        # The container ends (its init, exec, is killed: setpriv's change of user cleared the
        # parent-death signal unshare --kill-child set), and with it exec's lease.
        pkill -KILL -P "$container"
        kill -KILL "$container" 2> /dev/null
        wait "$container" 2> /dev/null
        rc=1
        for _ in $(seq 1 100); do
            as "$user" "$cli" exec --amount 1 --gpus 0 --coordination-file "$file" -- true \
                > "$dir/host.out" 2>&1 && { rc=0; break; }
            sleep 0.05
        done
        expect "D1 ($user): once the container is gone, the GPU comes back" \
            "exit $rc: $(cat "$dir/host.out")" "$([[ $rc -eq 0 ]]; echo $?)"
    done
fi

# --- D2: a time namespace whose boot-time offset is no whole number of ticks ------------------

if ! $root || ! "$timens" 0 9999999 true 2> /dev/null; then
    skip "D2: start times read in a time namespace agree with the host's" "needs root and time namespaces"
else
    for user in "${users[@]}"; do
        dir=$(folder d2 "$user")
        file=$dir/coordination
        # An offset of 9.999999 ms: a reader there rounds a start time up a tick, unless the
        # process started in the last nanosecond of a tick. Ten owners, so that all cannot.
        owners=()
        for _ in $(seq 1 10); do
            spawn "$user" sleep 60 &
            background+=($!)
            owners+=($!)
        done
        # Recorded from within the namespace, judged on the host...
        for owner in "${owners[@]:0:5}"; do
            "$timens" 0 9999999 setpriv $([[ $user == nobody ]] && echo --reuid=nobody --regid=nogroup --clear-groups) \
                "$program" 1 --gpus 0,1,2,3,4,5,6,7,8,9 --enable-coordination-mode \
                --coordination-file "$file" --owner-pid "$owner" > /dev/null 2> "$dir/err"
        done
        # ... and recorded on the host, judged from within it.
        for owner in "${owners[@]:5:5}"; do
            as "$user" "$program" 1 --gpus 0,1,2,3,4,5,6,7,8,9 --enable-coordination-mode \
                --coordination-file "$file" --owner-pid "$owner" > /dev/null 2> "$dir/err"
        done
        spawn "$user" sleep 60 &
        background+=($!)
        as "$user" "$program" 1 --gpus 0,1,2,3,4,5,6,7,8,9 --enable-coordination-mode \
            --coordination-file "$file" --owner-pid $! > "$dir/host.out" 2> "$dir/host.err"
        rc=$?
        expect "D2 ($user): the host judges the owners a time namespace recorded running" \
            "exit $rc, got '$(cat "$dir/host.out")': $(cat "$dir/host.err")" \
            "$([[ $rc -eq 1 ]] && ! grep -q 'took back' "$dir/host.err"; echo $?)"
        "$timens" 0 9999999 setpriv $([[ $user == nobody ]] && echo --reuid=nobody --regid=nogroup --clear-groups) \
            sh -c "sleep 60 & owner=\$!; '$program' 1 --gpus 0,1,2,3,4,5,6,7,8,9 --enable-coordination-mode --coordination-file '$file' --owner-pid \$owner; status=\$?; kill \$owner; exit \$status" \
            > "$dir/ns.out" 2> "$dir/ns.err"
        rc=$?
        expect "D2 ($user): a worker in the time namespace judges the host's owners running" \
            "exit $rc, got '$(cat "$dir/ns.out")': $(cat "$dir/ns.err")" \
            "$([[ $rc -eq 1 ]] && ! grep -q 'took back' "$dir/ns.err"; echo $?)"
    done
fi

# --- D3: a worker without /proc of its own pid namespace ----------------------------------------

if ! $can_unshare_pid || ! unshare --mount --pid --fork sh -c 'umount -l /proc' 2> /dev/null; then
    skip "D3: a worker without its own /proc judges no host record by its pids" "needs root, unshare --pid and umount"
else
    for user in "${users[@]}"; do
        dir=$(folder d3 "$user")
        file=$dir/coordination
        spawn "$user" sleep 60 &
        background+=($!)
        host_owner=$!
        as "$user" "$program" 1 --gpus 0,1 --enable-coordination-mode --coordination-file "$file" \
            --owner-pid "$host_owner" > /dev/null
        drop=$([[ $user == nobody ]] && echo "setpriv --reuid=nobody --regid=nogroup --clear-groups")
        for how in "the host's /proc" "no /proc at all"; do
            prefix=""
            [[ $how == "no /proc at all" ]] && prefix="umount -l /proc &&"
            unshare --mount --pid --fork sh -c "$prefix sleep 60 & owner=\$!; \
                $drop '$program' 2 --gpus 0,1 --enable-coordination-mode --coordination-file '$file' \
                --owner-pid \$owner; status=\$?; kill \$owner; exit \$status" \
                > "$dir/ns.out" 2> "$dir/ns.err"
            rc=$?
            expect "D3 ($user, $how): a worker in a pid namespace does not take a live host owner's GPU" \
                "exit $rc, got '$(cat "$dir/ns.out")': $(cat "$dir/ns.err")" \
                "$([[ $rc -eq 1 ]] && ! grep -q 'took back' "$dir/ns.err"; echo $?)"
        done
        kill "$host_owner" 2> /dev/null
    done
fi

# --- D4: a held lease, named another way ------------------------------------------------------

if ! $root; then
    skip "D4 (as another user)" "needs root for setpriv; tests/cli/RealHostCliTest.cpp runs it as this user"
fi
for user in "${users[@]}"; do
    for holder in nvml index; do
        dir=$(folder "d4-$holder" "$user")
        file=$dir/coordination
        ready=$dir/ready
        holding=()
        [[ $holder == nvml ]] && holding=("${with_nvml[@]}")
        spawn "$user" ${holding[@]+"${holding[@]}"} "$cli" exec --amount 1 --gpus 0 \
            --coordination-file "$file" -- sh -c "touch '$ready'; exec sleep 60" > "$dir/out" 2>&1 &
        background+=($!)
        wait_for "$ready"
        as "$user" ${holding[@]+"${holding[@]}"} "$cli" release --coordination-file "$file" \
            --gpu 0 --force > /dev/null 2>&1
        if [[ $holder == nvml ]]; then
            as "$user" "$cli" exec --amount 1 --gpus 0 --coordination-file "$file" -- true \
                > "$dir/other.out" 2>&1
        else
            as "$user" "${with_nvml[@]}" "$cli" exec --amount 4 --coordination-file "$file" -- true \
                > "$dir/other.out" 2>&1
        fi
        rc=$?
        expect "D4 ($user, held by $holder): after release --force the lease keeps GPU 0 from a worker that names it the other way" \
            "exit $rc: $(cat "$dir/other.out")" \
            "$([[ $rc -eq 1 ]] && grep -q 'GPU 0 is held by a lease of another process' "$dir/other.out"; echo $?)"
    done
done

# --- D5: Flink's script writes the file it replaced with sed -i -------------------------------

if ! command -v flock > /dev/null; then
    skip "D5: a writer waits for Flink's script" "flock(1) is missing"
else
    # Flink's `sed -i` as it is, then a pause: the script descheduled between its rename and its
    # append, holding the lock of the file it replaced.
    mkdir -p "$work/slow-sed"
    cat > "$work/slow-sed/sed" << EOF
#!/bin/sh
$(command -v sed) "\$@"; status=\$?
touch "\$(dirname "\$3")/renamed"
sleep 2
exit \$status
EOF
    chmod 0755 "$work/slow-sed" "$work/slow-sed/sed"
    for user in "${users[@]}"; do
        dir=$(folder d5 "$user")
        file=$dir/coordination
        owners=()
        for _ in 1 2 3 4; do
            spawn "$user" sleep 60 &
            background+=($!)
            owners+=($!)
        done
        gone=$(as "$user" sh -c 'echo $$')
        # GPU 0 is a gone owner's: Flink's script takes it back with sed -i; 1-3 are held.
        as "$user" sh -c "printf '0 %s\n1 %s\n2 %s\n3 %s\n' $gone ${owners[0]} ${owners[1]} ${owners[2]} > '$file'"
        spawn "$user" env PATH="$work/slow-sed:$PATH" bash "$flink" "$file" 1 "${owners[3]}" 0 1 2 3 \
            > "$dir/flink.out" 2> "$dir/flink.err" &
        background+=($!)
        flink_run=$!
        wait_for "$dir/renamed"
        as "$user" "$cli" exec --amount 1 --gpus 0,1,2,3 --coordination-file "$file" -- \
            sh -c 'echo "$CUDA_VISIBLE_DEVICES"' > "$dir/ours.out" 2> "$dir/ours.err"
        rc=$?
        wait "$flink_run"
        records=$(grep -c '^0[[:space:]]' "$file")
        expect "D5 ($user): one of ours waits for Flink's script on the file it replaced, and GPU 0 goes once" \
            "ours: exit $rc, '$(cat "$dir/ours.out")' $(cat "$dir/ours.err"); Flink: '$(cat "$dir/flink.out")'; GPU 0's lines: $records; $(cat "$file" | tr '\t\n' ' |')" \
            "$([[ $rc -eq 1 && $(cat "$dir/flink.out") == 0 && $records -eq 1 ]]; echo $?)"
    done
fi

# --- D7: a user who may not write the coordination file writes nothing beside it ---------------

if ! $root || ! as_nobody true 2> /dev/null; then
    skip "D7: another user's drain and share" "needs root and setpriv"
else
    dir=$(folder d7 root)
    file=$dir/coordination
    : > "$file"
    chmod 0644 "$file"
    for command in "drain --gpu 0" "share --gpu 0 --replicas 2"; do
        # shellcheck disable=SC2086
        as_nobody "${with_nvml[@]}" "$cli" $command --coordination-file "$file" > "$work/d7.out" 2>&1
        rc=$?
        left=$(cd "$dir" && ls -A | grep -v '^coordination$' | tr '\n' ' ')
        expect "D7: another user's '$command' against root's file (0644, sticky folder) is refused and creates nothing" \
            "exit $rc: $(cat "$work/d7.out"); left: $left" \
            "$([[ $rc -eq 1 && -z $left ]] && grep -q "may not write the coordination file (owner root, group root, mode 0644)" "$work/d7.out"; echo $?)"
    done
    "${with_nvml[@]}" "$cli" drain --gpu 0 --coordination-file "$file" > "$dir/out" 2>&1
    rc=$?
    "${with_nvml[@]}" "$cli" discover --amount 1 --discovery-args \
        "--enable-coordination-mode --coordination-file $file --owner-pid $$" > "$dir/got" 2>&1
    expect "D7: root's own drain then works, and the drained GPU is not handed out" \
        "drain exit $rc: $(cat "$dir/out"); discover: $(cat "$dir/got")" \
        "$([[ $rc -eq 0 && $(head -1 "$dir/got") == 'GPU Device(1)' ]]; echo $?)"
    # Undrain of a GPU that is drained: refused too, the drain kept. (Of one that is not, it is
    # a no-op that writes nothing, whoever asks.)
    before=$(cd "$dir" && ls -A | tr '\n' ' '; cat "$file.health")
    as_nobody "${with_nvml[@]}" "$cli" undrain --gpu 0 --coordination-file "$file" > "$work/d7.out" 2>&1
    rc=$?
    after=$(cd "$dir" && ls -A | tr '\n' ' '; cat "$file.health")
    expect "D7: another user's 'undrain --gpu 0' of root's drained GPU is refused and changes nothing" \
        "exit $rc: $(cat "$work/d7.out"); before: $before; after: $after" \
        "$([[ $rc -eq 1 && $before == "$after" ]] && grep -q "may not write the coordination file (owner root, group root, mode 0644)" "$work/d7.out"; echo $?)"

    # A planted file that this user may not move aside (it may write the coordination file by its
    # group, but the folder is sticky and the file another user's): refused, naming the fix;
    # nothing handed out. Root moves it aside.
    dir=$(folder d7-planted root)
    file=$dir/coordination
    : > "$file"
    chgrp 4242 "$file"
    chmod 0664 "$file"
    as_nobody sh -c "printf 'drained\tgpu=1\tsince=1\n' > '$dir/coordination.health'"
    setpriv --reuid=4243 --regid=4242 --clear-groups "${with_nvml[@]}" "$program" 1 \
        --enable-coordination-mode --coordination-file "$file" --owner-pid $$ \
        > "$dir/out" 2> "$dir/err"
    rc=$?
    expect "D7: a planted health file that this user may not move aside is refused, naming the fix, and nothing goes out" \
        "exit $rc, out '$(cat "$dir/out")': $(cat "$dir/err")" \
        "$([[ $rc -eq 1 && ! -s $dir/out ]] && grep -q "Move it aside as root (\`sudo mv -- $dir/coordination.health" "$dir/err"; echo $?)"
    "${with_nvml[@]}" "$program" 1 --enable-coordination-mode --coordination-file "$file" \
        --owner-pid $$ > "$dir/out" 2> "$dir/err"
    rc=$?
    expect "D7: root moves it aside, keeps it, and says so" \
        "exit $rc, out '$(cat "$dir/out")': $(cat "$dir/err")" \
        "$([[ $rc -eq 0 && -n $(ls -d "$dir"/coordination.health.untrusted-* 2> /dev/null) ]] &&
            grep -q 'failed the trust rules' "$dir/err"; echo $?)"

    # A writer whose group may write the file, given at run time (a pod's supplementalGroups,
    # systemd's SupplementaryGroups=: no name service lists it) is no user who may not write it.
    dir=$(folder d7-runtime-group root)
    file=$dir/coordination
    : > "$file"
    chgrp 4242 "$file"
    chmod 0664 "$file"
    setpriv --reuid=4243 --regid=4244 --groups=4242 "${with_nvml[@]}" "$cli" drain --gpu 0 \
        --coordination-file "$file" > "$dir/out" 2>&1
    rc=$?
    "${with_nvml[@]}" "$cli" discover --amount 1 --discovery-args \
        "--enable-coordination-mode --coordination-file $file --owner-pid $$" > "$dir/got" 2>&1
    expect "D7: a writer whose group is given at run time drains, and every reader honours it" \
        "drain exit $rc: $(cat "$dir/out"); discover: $(cat "$dir/got")" \
        "$([[ $rc -eq 0 && $(head -1 "$dir/got") == 'GPU Device(1)' ]]; echo $?)"
fi

printf '%d passed, %d failed\n' "$passed" "$failed"
[[ $failed -eq 0 ]]
