#!/usr/bin/env bash
# The GPU host check bundle (make gpu-check-bundle) as a GPU host would run it, on a machine
# without GPUs: the bundle copied to a clean folder, run from there by its own
# gpu-machine-check.sh --bundle, with an environment of PATH alone, and PATH reduced to a folder
# of the basic tools (no compiler, CMake, Python). The stand-ins: the stand-in libnvidia-ml.so.1
# of tests/fixtures/nvml playing a host of tests/fixtures/nvml/hosts/, and
# tests/fixtures/gpu-check/nvidia-smi answering for the same GPUs.
#
#   gpu_machine_check_test.sh CASE BUNDLE FAKE_NVML HOSTS_DIR REPORT_READER SMI_STAND_IN FAKE_CUDA
#   gpu_machine_check_test.sh size_limit DIR -- STAGING_COMMAND...
#
# Cases (each asserts the exact verdict of every check, in the JSON report and in the text
# report's summary, that the run ended within its limits, and that it left nothing behind: its
# folder, a process started from it, an owner of the coordination check):
#   stand_in_host       islands-8: every check passes (MIG and MPS skipped); the programs need
#                       glibc alone (readelf -d, ldd); every command is in both reports; odd bytes
#                       in nvidia-smi's output are valid JSON and reach no terminal; usage errors;
#                       every discovery, exec, share, status, check and watch names a coordination
#                       file in the run's folder; the MANIFEST names the source's commit
#   mig_host            2 GPUs, one in MIG mode with two instances: the mig check runs and passes
#   disagreeing_smi     nvidia-smi names another UUID and bus id: compare fails, naming both
#   missing_nvidia_smi  no nvidia-smi anywhere: host, compare and topology fail, the checks that
#                       need its count are skipped, the others pass (77, skipped, where a real
#                       nvidia-smi is installed)
#   broken_nvml         a libnvidia-ml.so.1 that cannot be loaded: compare, topology, check and
#                       watch fail, the discovery falls back on nvidia-smi and passes
#   hanging_step        nvidia-smi topo -m hangs: topology times out after its step's limit
#                       (GPU_CHECK_STEP_TIMEOUT=8), every other check runs and passes; watch,
#                       asked for 30 s, runs 4 s (half the limit: time to stop it on a loaded
#                       machine)
#   run_limit           nvidia-smi -L hangs past the run's limit (GPU_CHECK_TOTAL_TIMEOUT=12):
#                       host times out, every later check is reported not run (timeout)
#   full_mode           without --bundle, cmake and ctest standing in: a failing ctest fails
#                       tests and every check still runs; a failing build skips every other check
#   mps_host            the stand-in nvidia-cuda-mps-control (tests/fixtures/gpu-check/mps/) on
#                       PATH and the stand-in libcuda.so.1 (FAKE_CUDA) on LD_LIBRARY_PATH: the mps
#                       check's whole body runs and passes (two clients allocate, a third
#                       exec -n 1 --share is refused, the client beyond its share exits 3)
#   closed_stdout       stdout into head -1, then stdout and stderr into a pipe nobody reads (ssh
#                       dropped): the run completes, with its report, and cleans up; the stand-in
#                       nvidia-smi used as the docs give it (its folder, no gpus.csv)
#   hung_smi_ignoring_term
#                       an nvidia-smi that ignores SIGTERM and never ends: no process of it is left
#                       after the run (our programs stop it after NVIDIA_SMI_TIMEOUT)
#   as_nobody           root only (77 otherwise): the whole run as nobody skips the nobody check,
#                       saying why; as root with a private TMPDIR (0700) the run's folder goes
#                       under /tmp and the nobody check passes
#   host_state          root with mount namespaces only (77 otherwise): a drain, a sharing
#                       declaration and a record in /var/tmp/flink-gpu-coordination (a tmpfs of
#                       the test's own mount namespace) change no verdict, and the run writes
#                       nothing there
#   failed_start        a setting too large for the shell, a report that cannot be written: exit 2,
#                       no report file and no run's folder left
#   size_limit          the staging command with a limit of 1 MiB fails, naming the limit, and
#                       leaves no bundle
set -uo pipefail

case_name=${1:?usage: gpu_machine_check_test.sh CASE ...}
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
finish() {
  [[ -z ${work:-} ]] || expect_no_leftovers
  if [[ $failures -ne 0 ]]; then
    # What the report says of each failure, for the reader of ctest's output.
    if [[ -f ${work:-}/report.txt ]]; then
      echo "--- from the report:" >&2
      grep -B 12 '^  \(FAILED\|TIMED OUT\): ' "$work/report.txt" | cut -c 1-400 >&2
    fi
    echo "$case_name: $failures check(s) failed" >&2
    exit 1
  fi
  echo "$case_name: all checks passed"
  exit 0
}

if [[ $case_name == size_limit ]]; then
  dir=$2
  [[ $3 == -- ]] || { echo "usage: size_limit DIR -- COMMAND..." >&2; exit 2; }
  shift 3
  output=$("$@" 2>&1)
  status=$?
  [[ $status -ne 0 ]] || fail "staging with a limit of 1 MiB succeeded"
  [[ $output == *"over the limit of 1 MiB"* ]] || fail "the failure does not name the limit: $output"
  [[ ! -e $dir && ! -e $dir.staging ]] || fail "a bundle was left at $dir"
  finish
fi

bundle=$2 fake_nvml=$3 hosts=$4 reader=$5 smi_stand_in=$6 fake_cuda=${7:-}
[[ -x $bundle/gpu-machine-check.sh ]] || { echo "no bundle at $bundle" >&2; exit 2; }

# host_state: the case again, in a mount namespace of its own where /var/tmp is a tmpfs.
if [[ $case_name == host_state ]]; then
  if [[ $(id -u) -ne 0 ]] || ! unshare --mount --propagation private true 2>/dev/null; then
    echo "skipped: needs root and mount namespaces (unshare --mount)"
    exit 77
  fi
  exec unshare --mount --propagation private -- bash "$0" host_state_inside "${@:2}"
fi
if [[ $case_name == host_state_inside ]]; then
  mount -t tmpfs flink-gpu-test-var-tmp /var/tmp || exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-test.XXXXXX")
# Processes a failed case left (found by expect_no_leftovers) are ended by their ids.
leftover_pids=()
# KEEP=1 keeps the case's folder, to look at its reports.
trap 'kill -KILL "${leftover_pids[@]}" 2>/dev/null; [[ -n ${KEEP:-} ]] || rm -rf "$work"' EXIT
# Open to nobody, whose check runs the tools of PATH, which are here.
chmod 755 "$work"
# TMPDIR of the runs: their folders go here, for expect_no_leftovers (open to nobody, and
# writable by nobody for as_nobody).
mkdir -m 1777 "$work/tmp"

# The clean folder: the bundle alone.
cp -R "$bundle" "$work/bundle"

# The stand-ins the runs load, copied beside it: the source and build folders may be in a folder
# that nobody cannot enter (a clone under a 0700 mktemp folder), and as_nobody runs as nobody.
mkdir "$work/stand-in"
cp "$fake_nvml" "$work/stand-in/libnvidia-ml.so.1"
cp -R "$hosts" "$work/stand-in/hosts"
cp -R "$(dirname "$smi_stand_in")" "$work/stand-in/gpu-check"
fake_nvml=$work/stand-in/libnvidia-ml.so.1 hosts=$work/stand-in/hosts
smi_stand_in=$work/stand-in/gpu-check/$(basename "$smi_stand_in")

# The basic tools, and nothing else, on PATH.
mkdir "$work/tools"
for name in sh awk sed grep cat head tail tr wc date mktemp rm mkdir mv cp chmod ls dirname \
  timeout sleep uname id env ldd setpriv runuser; do
  found=$(command -v "$name") && ln -s "$found" "$work/tools/$name"
done

# A stand-in nvidia-smi for a host JSON of the fixtures (one device a line), in folder $2.
make_smi() {
  local host=$1 dir=$2
  mkdir -p "$dir"
  cp "$smi_stand_in" "$dir/nvidia-smi"
  sed -n 's/.*"uuid": "\([^"]*\)", "name": "\([^"]*\)", "pci_bus_id": "\([^"]*\)", "memory_total_mib": \([0-9]*\), "minor_number": [0-9]*, "mig_enabled": \(true\|false\).*/\1,\2,\3,\4,\5/p' \
    "$host" | awk -F, '{ printf "%d,%s,%s,%s,%s,550.54.15,%s\n", NR - 1, $1, $2, $3, $4,
                          ($5 == "true" ? "Enabled" : "Disabled") }' >"$dir/gpus.csv"
  [[ -s $dir/gpus.csv ]] || { echo "no GPU read from $host" >&2; exit 2; }
}

# run_check [VAR=value...] -- [script args...]: the bundle's script, as a GPU host runs it, with
# an environment of PATH, HOME and the given variables; sets status, elapsed_s.
run_check() {
  local env_vars=()
  while [[ $1 != -- ]]; do
    env_vars+=("$1")
    shift
  done
  shift
  local start=$SECONDS
  (cd "$work" && env -i PATH="$work/tools" HOME="$work" TMPDIR="$work/tmp" \
    GPU_CHECK_WATCH_SECONDS=2 NVML_CHECK_RUNS=3 "${env_vars[@]}" "$work/bundle/gpu-machine-check.sh" \
    --bundle "$work/bundle" --report "$work/report.txt" "$@" >"$work/stdout" 2>"$work/stderr")
  status=$?
  elapsed_s=$((SECONDS - start))
}

# Nothing of the last run is left, within 5 s (what was sent SIGTERM may take a moment): no
# folder in $work/tmp, no process whose command line names $work/tmp/ (the stand-ins' copies
# run from the run's folder), no owner of the coordination check (the --owner-pid of the text
# report) still a sleep. Processes found are ended at exit.
expect_no_leftovers() {
  local tries=0 folders processes owners pid
  while :; do
    folders=$(ls -A "$work/tmp")
    processes=$(pgrep -f "$work/tmp/" 2>/dev/null)
    owners=
    for pid in $(grep -o -- '--owner-pid [0-9]*' "$work/report.txt" 2>/dev/null | cut -d' ' -f2); do
      # A zombie (state Z, not yet reaped by an init that does not reap) is gone.
      if [[ -r /proc/$pid/cmdline && $(tr '\0' ' ' </proc/$pid/cmdline) == sleep* ]] &&
        ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; then
        owners="$owners $pid"
      fi
    done
    [[ -n $folders$processes$owners ]] || return 0
    ((tries++ < 50)) || break
    sleep 0.1
  done
  [[ -z $folders ]] || fail "the run left its folder: $folders"
  [[ -z $processes ]] || fail "the run left processes: $(ps -o pid=,args= -p "$(echo $processes | tr ' ' ,)")"
  [[ -z $owners ]] || fail "the run left owners:$owners"
  # shellcheck disable=SC2206 # pids
  leftover_pids+=($processes $owners)
}

# The run's folder, as the host check's note names it.
run_folder() {
  "$reader" "$work/report.txt.json" check host notes | grep -o "the run's folder: [^ \"]*" |
    head -n 1 | cut -d' ' -f4
}

with_stand_ins() {
  echo --stand-in-nvml "$fake_nvml" --stand-in-host "$1" --stand-in-smi "$2"
}

# The verdicts, exactly: "<verdict> <id>" a line, in order, in the JSON and in the text summary.
expect_verdicts() {
  local expected=$1 json text
  if ! json=$("$reader" "$work/report.txt.json" verdicts); then
    fail "the JSON report is not valid: $json"
    return
  fi
  [[ $json == "$expected" ]] || fail "verdicts (JSON):"$'\n'"$json"$'\n'"expected:"$'\n'"$expected"
  text=$(sed -n '/^== summary$/,/^result: /p' "$work/report.txt" | sed '1d;$d' | awk '{ print $1, $2 }')
  [[ $text == "$expected" ]] || fail "verdicts (text):"$'\n'"$text"$'\n'"expected:"$'\n'"$expected"
}

expect_status() {
  [[ $status -eq $1 ]] || fail "exit $status, expected $1; stderr: $(cat "$work/stderr")"
}

expect_within() {
  [[ $elapsed_s -le $1 ]] || fail "the run took $elapsed_s s, more than $1 s"
}

# The reason of a check in the JSON report holds $2.
expect_reason() {
  local reason
  reason=$("$reader" "$work/report.txt.json" check "$1" reason)
  [[ $reason == *"$2"* ]] || fail "$1's reason '$reason' lacks '$2'"
}

# nobody's check runs where the test runs as root with setpriv or runuser.
nobody=skipped
if [[ $(id -u) -eq 0 && ( -e $work/tools/setpriv || -e $work/tools/runuser ) ]]; then
  nobody=pass
fi

case $case_name in
  stand_in_host)
    make_smi "$hosts/islands-8.json" "$work/smi"
    # A driver's odd bytes: quotes, a backslash, a tab, escapes, a control character, a NUL,
    # bytes that are not UTF-8 beside some that are.
    printf 'quote " backslash \\ tab\tend\n\033[1mbold\033[0m \001\nbad: \377 ok: \302\260C overlong: \300\257 cut: \342\202\nnul:\000:end\n' \
      >"$work/smi/banner.txt"
    # shellcheck disable=SC2046
    run_check -- $(with_stand_ins "$hosts/islands-8.json" "$work/smi")
    expect_status 0
    expect_within 60
    expect_verdicts "pass host
pass links
pass compare
pass discovery
pass coordination
pass all-gpus
$nobody nobody
skipped mig
pass mask
pass topology
pass check
pass status
pass watch
skipped mps"
    # Every command in the JSON is in the text report, as run.
    "$reader" "$work/report.txt.json" commands >"$work/commands"
    [[ $(wc -l <"$work/commands") -ge 30 ]] || fail "only $(wc -l <"$work/commands") commands reported"
    while IFS= read -r line; do
      grep -qxF -- "$line" "$work/report.txt" || fail "the text report lacks: $line"
    done <"$work/commands"
    # The odd bytes: decoded from the JSON as they were, but NUL dropped and what is not UTF-8
    # made U+FFFD; in the text report no control character but tab and newline.
    "$reader" "$work/report.txt.json" field host /nvidia-smi stdout | head -n 4 >"$work/decoded"
    printf 'quote " backslash \\ tab\tend\n\033[1mbold\033[0m \001\nbad: \357\277\275 ok: \302\260C overlong: \357\277\275\357\277\275 cut: \357\277\275\357\277\275\nnul::end\n' \
      >"$work/expected"
    cmp -s "$work/decoded" "$work/expected" ||
      fail "nvidia-smi's odd bytes decode as $(od -c "$work/decoded" | head -n 8)"
    if LC_ALL=C grep -q '[[:cntrl:]]' <(tr -d '\t' <"$work/report.txt"); then
      fail "the text report holds control characters"
    fi
    [[ $("$reader" "$work/report.txt.json" top ok) == true ]] || fail "ok is not true"
    [[ $("$reader" "$work/report.txt.json" top mode) == bundle ]] || fail "mode is not bundle"
    # Every command that reads or writes coordination state names a file of the run's folder,
    # so that nothing of the host's changes a verdict or is changed.
    run=$(run_folder)
    [[ $run == "$work/tmp/gpu-machine-check."* ]] || fail "the run's folder is '$run'"
    coordinated=0
    while IFS= read -r line; do
      [[ $line =~ nvidia-gpu-discovery(\.sh)?\ [0-9] || $line =~ flink-gpu\ (discover|exec|status|check|watch|share|drain|release) ]] ||
        continue
      coordinated=$((coordinated + 1))
      [[ $line == *"--coordination-file $run/"* || $line == *"--coordination-file=$run/"* ]] ||
        fail "not on a coordination file of the run's folder: $line"
    done <"$work/commands"
    [[ $coordinated -ge 20 ]] || fail "only $coordinated commands of the discovery and flink-gpu"
    # The MANIFEST names the commit of the source the bundle was made from.
    source_dir=$(cd "$(dirname "$0")/../.." && pwd)
    if head=$(git -C "$source_dir" rev-parse HEAD 2>/dev/null); then
      grep -q "^commit: $head\(-dirty\)\?\$" "$work/bundle/MANIFEST" ||
        fail "the MANIFEST does not name commit $head: $(grep '^commit:' "$work/bundle/MANIFEST")"
    fi
    grep -q '^version: ' <("$reader" "$work/report.txt.json" top manifest) ||
      fail "the JSON report lacks the bundle's MANIFEST"
    # The bundle's programs need glibc alone.
    for program in bin/flink-gpu plugins/external-resource-gpu/nvidia-gpu-discovery \
      tools/nvml-vs-nvidia-smi tools/cuda-mps-client; do
      needed=$(readelf -d "$work/bundle/$program" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
      [[ -n $needed ]] || fail "$program: readelf -d lists nothing"
      for library in $needed; do
        case $library in
          libc.so.6 | libm.so.6 | libdl.so.2 | libpthread.so.0 | ld-linux*.so.*) ;;
          *) fail "$program needs $library (readelf -d)" ;;
        esac
      done
      while read -r library _; do
        case ${library##*/} in
          linux-vdso.so.1 | libc.so.6 | libm.so.6 | libdl.so.2 | libpthread.so.0 | ld-linux*.so.*) ;;
          *) fail "$program needs $library (ldd)" ;;
        esac
      done < <(ldd "$work/bundle/$program")
      readelf -S "$work/bundle/$program" | grep -q '\.debug_\|\.symtab' &&
        fail "$program is not stripped"
    done
    size=$(du -sb "$work/bundle" | cut -f1)
    [[ $size -le $((64 * 1048576)) ]] || fail "the bundle is $size bytes, over 64 MiB"
    # The MPS client without CUDA, and its usage.
    "$work/bundle/tools/cuda-mps-client" x 2>"$work/client.err"
    [[ $? -eq 2 ]] && grep -q '^usage: cuda-mps-client MIB SECONDS' "$work/client.err" ||
      fail "cuda-mps-client x: $(cat "$work/client.err")"
    if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
      "$work/bundle/tools/cuda-mps-client" 1 0 2>"$work/client.err"
      [[ $? -eq 2 ]] && grep -q 'libcuda.so.1' "$work/client.err" ||
        fail "cuda-mps-client without libcuda.so.1: $(cat "$work/client.err")"
    fi
    # Usage errors: exit 2 and nothing run.
    run_check -- --bundle
    expect_status 2
    run_check -- --stand-in-smi "$work/no-such-folder"
    expect_status 2
    (cd "$work" && env -i PATH="$work/tools" "$work/bundle/gpu-machine-check.sh" \
      --bundle "$work/no-such-bundle" >/dev/null 2>"$work/stderr")
    [[ $? -eq 2 ]] && grep -q 'no bundle at' "$work/stderr" ||
      fail "a missing bundle: $(cat "$work/stderr")"
    ;;

  mig_host)
    cat >"$work/mig-host.json" <<'EOF'
{"comment": "2 GPUs, GPU 0 in MIG mode with two instances",
 "devices": [
  {"uuid": "GPU-aaaaaaaa-0000-4000-8000-000000000000", "name": "NVIDIA H200", "pci_bus_id": "00000000:19:00.0", "memory_total_mib": 143771, "minor_number": 0, "mig_enabled": true,
   "mig": [{"uuid": "MIG-11111111-0000-4000-8000-000000000000", "name": "NVIDIA H200 MIG 1g.18gb", "memory_total_mib": 16384, "gpu_instance_id": 9, "compute_instance_id": 0},
           {"uuid": "MIG-22222222-0000-4000-8000-000000000000", "name": "NVIDIA H200 MIG 1g.18gb", "memory_total_mib": 16384, "gpu_instance_id": 10, "compute_instance_id": 0}]},
  {"uuid": "GPU-bbbbbbbb-0000-4000-8000-000000000000", "name": "NVIDIA H200", "pci_bus_id": "00000000:3B:00.0", "memory_total_mib": 143771, "minor_number": 1, "mig_enabled": false}]}
EOF
    make_smi "$work/mig-host.json" "$work/smi"
    printf '0|  MIG 1g.18gb     Device  0: (UUID: MIG-11111111-0000-4000-8000-000000000000)\n0|  MIG 1g.18gb     Device  1: (UUID: MIG-22222222-0000-4000-8000-000000000000)\n' \
      >"$work/smi/mig.txt"
    # shellcheck disable=SC2046
    run_check -- $(with_stand_ins "$work/mig-host.json" "$work/smi")
    expect_status 0
    expect_within 60
    expect_verdicts "pass host
pass links
pass compare
pass discovery
pass coordination
pass all-gpus
$nobody nobody
pass mig
pass mask
pass topology
pass check
pass status
pass watch
skipped mps"
    "$reader" "$work/report.txt.json" field mig 0 stdout >"$work/units"
    [[ $(cat "$work/units") == "MIG-11111111-0000-4000-8000-000000000000,MIG-22222222-0000-4000-8000-000000000000,1" ]] ||
      fail "the MIG units: $(cat "$work/units")"
    ;;

  disagreeing_smi)
    # nvidia-smi tells another UUID for GPU 1 and another bus id for GPU 3 than NVML does.
    make_smi "$hosts/islands-8.json" "$work/smi"
    sed -i 's/GPU-a0000001-1111/GPU-c0000001-1111/; s/00000000:5D:00.0/00000000:5E:00.0/' \
      "$work/smi/gpus.csv"
    # shellcheck disable=SC2046
    run_check -- $(with_stand_ins "$hosts/islands-8.json" "$work/smi")
    expect_status 1
    expect_within 60
    expect_verdicts "pass host
pass links
fail compare
pass discovery
pass coordination
pass all-gpus
$nobody nobody
skipped mig
pass mask
pass topology
pass check
pass status
pass watch
skipped mps"
    expect_reason compare "NVML and nvidia-smi disagree: GPU 1 UUID: NVML GPU-a0000001-1111-4222-8333-444400000001, nvidia-smi GPU-c0000001-1111-4222-8333-444400000001; GPU 3 PCI bus id: NVML 00000000:5D:00.0, nvidia-smi 00000000:5E:00.0"
    ;;

  missing_nvidia_smi)
    for folder in /usr/bin /usr/local/bin /usr/local/nvidia/bin /usr/lib/wsl/lib /opt/nvidia/bin; do
      if [[ -x $folder/nvidia-smi ]]; then
        echo "skipped: this host has $folder/nvidia-smi, where the check looks after PATH"
        exit 77
      fi
    done
    run_check -- --stand-in-nvml "$fake_nvml" --stand-in-host "$hosts/islands-8.json"
    expect_status 1
    expect_within 60
    expect_verdicts "fail host
pass links
fail compare
pass discovery
pass coordination
skipped all-gpus
skipped nobody
skipped mig
skipped mask
fail topology
pass check
pass status
pass watch
skipped mps"
    expect_reason host "nvidia-smi was not found"
    expect_reason compare "nvidia-smi was not found"
    expect_reason all-gpus "no GPU count to check against"
    ;;

  broken_nvml)
    make_smi "$hosts/islands-8.json" "$work/smi"
    printf 'not an ELF file\n' >"$work/libnvidia-ml.so.1"
    run_check -- --stand-in-nvml "$work/libnvidia-ml.so.1" --stand-in-smi "$work/smi"
    expect_status 1
    expect_within 60
    expect_verdicts "pass host
pass links
fail compare
pass discovery
pass coordination
pass all-gpus
$nobody nobody
skipped mig
pass mask
fail topology
fail check
pass status
fail watch
skipped mps"
    expect_reason compare "cannot be loaded"
    expect_reason watch "before SIGTERM"
    ;;

  hanging_step)
    make_smi "$hosts/islands-8.json" "$work/smi"
    # shellcheck disable=SC2046
    run_check GPU_CHECK_STEP_TIMEOUT=8 STAND_IN_SMI_HANG=topo GPU_CHECK_WATCH_SECONDS=30 -- \
      $(with_stand_ins "$hosts/islands-8.json" "$work/smi")
    expect_status 1
    expect_within 60
    expect_verdicts "pass host
pass links
pass compare
pass discovery
pass coordination
pass all-gpus
$nobody nobody
skipped mig
pass mask
timeout topology
pass check
pass status
pass watch
skipped mps"
    expect_reason topology "nvidia-smi topo -m did not end within"
    [[ $("$reader" "$work/report.txt.json" field topology " topo -m" timed_out) == true ]] ||
      fail "topo -m is not marked timed out"
    took=$("$reader" "$work/report.txt.json" field topology " topo -m" duration_ms)
    # Stopped at what was left of the check's limit of 8 s (the check ran other commands first;
    # a loaded machine may take longer to stop it), not at the whole run's.
    [[ $took -ge 4000 && $took -le 40000 ]] || fail "topo -m was stopped after $took ms, not about 8 s"
    grep -qF 'GPU_CHECK_WATCH_SECONDS=30 is more than half the check'"'"'s limit of 8 s: watch runs 4 s' \
      <("$reader" "$work/report.txt.json" check watch notes) || fail "watch was not cut to 4 s"
    took=$("$reader" "$work/report.txt.json" field watch 0 duration_ms)
    # SIGTERM after 4 s, not after the 30 s asked for.
    [[ $took -ge 3500 && $took -le 20000 ]] || fail "watch ran $took ms, not 4 s"
    ;;

  run_limit)
    make_smi "$hosts/islands-8.json" "$work/smi"
    # 12 s: the host check runs six commands before -L, and on a loaded machine (make test's
    # first tests, two to a core) they took 4 s; the run's limit must fall on the hung -L, not
    # before it. Well within the check's own limit of 60 s, which a run that waited for the
    # hung command would reach.
    # shellcheck disable=SC2046
    run_check GPU_CHECK_STEP_TIMEOUT=60 GPU_CHECK_TOTAL_TIMEOUT=12 STAND_IN_SMI_HANG=-L -- \
      $(with_stand_ins "$hosts/islands-8.json" "$work/smi")
    expect_status 1
    expect_within 45
    expect_verdicts "timeout host
timeout links
timeout compare
timeout discovery
timeout coordination
timeout all-gpus
timeout nobody
timeout mig
timeout mask
timeout topology
timeout check
timeout status
timeout watch
timeout mps"
    expect_reason host "nvidia-smi -L did not end within"
    expect_reason links "not run: the run's limit of 12 s was reached"
    ;;

  full_mode)
    # The full mode's flow, with stand-ins for cmake and ctest (a real build is the main build's
    # business) and a build folder laid out as a build tree, of the bundle's programs.
    make_smi "$hosts/islands-8.json" "$work/smi"
    mkdir -p "$work/build/bin" "$work/build/plugins" "$work/stubs"
    cp "$work/bundle/bin/flink-gpu" "$work/bundle/tools/"* "$work/build/bin/"
    cp -R "$work/bundle/plugins/external-resource-gpu" "$work/build/plugins/"
    printf '#!/bin/sh\necho "stand-in $0 $*"\nexit "${STUB_EXIT:-0}"\n' >"$work/stubs/cmake"
    printf '#!/bin/sh\necho "stand-in $0 $*"\nexit "${STUB_CTEST_EXIT:-0}"\n' >"$work/stubs/ctest"
    chmod +x "$work/stubs/cmake" "$work/stubs/ctest"
    ln -s "$work/stubs/cmake" "$work/stubs/ctest" "$work/tools/"
    run_full() {
      local start=$SECONDS
      (cd "$work" && env -i PATH="$work/tools" HOME="$work" GPU_CHECK_WATCH_SECONDS=2 \
        NVML_CHECK_RUNS=3 "$@" "$work/bundle/gpu-machine-check.sh" --report "$work/report.txt" \
        --stand-in-nvml "$fake_nvml" --stand-in-host "$hosts/islands-8.json" \
        --stand-in-smi "$work/smi" "$work/build" >"$work/stdout" 2>"$work/stderr")
      status=$?
      elapsed_s=$((SECONDS - start))
    }
    # Some tests fail: reported, and every check runs.
    run_full STUB_CTEST_EXIT=8
    expect_status 1
    expect_within 60
    expect_verdicts "pass build
fail tests
pass host
pass links
pass compare
pass discovery
pass coordination
pass all-gpus
$nobody nobody
skipped mig
pass mask
pass topology
pass check
pass status
pass watch
skipped mps"
    expect_reason tests "some tests failed (ctest exited with 8)"
    grep -qF "\$ cmake --build $work/build -j " "$work/report.txt" || fail "the build's command is not in the report"
    [[ $("$reader" "$work/report.txt.json" top mode) == full ]] || fail "mode is not full"
    # The build fails: nothing else can run.
    run_full STUB_EXIT=1
    expect_status 1
    expect_verdicts "fail build
skipped tests
skipped host
skipped links
skipped compare
skipped discovery
skipped coordination
skipped all-gpus
skipped nobody
skipped mig
skipped mask
skipped topology
skipped check
skipped status
skipped watch
skipped mps"
    expect_reason mask "the build failed"
    ;;

  mps_host)
    make_smi "$hosts/islands-8.json" "$work/smi"
    cp "$(dirname "$smi_stand_in")/mps/nvidia-cuda-mps-control" "$work/smi/"
    # The stand-in daemon's FIFO (not a tool the check needs).
    ln -s "$(command -v mkfifo)" "$work/tools/mkfifo"
    [[ -f $fake_cuda ]] || { echo "no stand-in libcuda.so.1: '$fake_cuda'" >&2; exit 2; }
    # shellcheck disable=SC2046
    run_check FAKE_MPS_LOG="$work/mps.log" LD_LIBRARY_PATH="$(dirname "$fake_cuda")" -- \
      $(with_stand_ins "$hosts/islands-8.json" "$work/smi")
    expect_status 0
    expect_within 60
    expect_verdicts "pass host
pass links
pass compare
pass discovery
pass coordination
pass all-gpus
$nobody nobody
skipped mig
pass mask
pass topology
pass check
pass status
pass watch
pass mps"
    # The daemon: started, asked for its servers, told to quit; by the check itself.
    [[ $(cat "$work/mps.log") == $'-d\nget_server_list\nquit' ]] ||
      fail "the daemon was asked: $(tr '\n' ' ' <"$work/mps.log")"
    # The commands, in order: share, -d, nvidia-smi, get_server_list, status, the third exec,
    # the two clients, the one beyond its share, quit. Each share is 143771 / 2 = 71885 MiB.
    field() { "$reader" "$work/report.txt.json" field mps "$@"; }
    [[ $(field 5 command) == *" exec -n 1 --share "*" -- true" && $(field 5 exit) == 1 ]] ||
      fail "the third exec: $(field 5 command): exit $(field 5 exit)"
    grep -q 'not enough free GPU shares: 1 requested, 0 free' <(field 5 stderr) ||
      fail "the third exec was not refused for want of shares: $(field 5 stderr)"
    held='^client [0-9]+: allocated 35942 MiB'$'\n''client [0-9]+: released on SIGTERM$'
    for n in 6 7; do
      [[ $(field $n command) == *" exec -n 1 --share "*"/tools/cuda-mps-client 35942 "* &&
        $(field $n exit) == 0 ]] || fail "client $n: $(field $n command): exit $(field $n exit)"
      [[ $(field $n stdout) =~ $held ]] ||
        fail "client $n printed: $(field $n stdout)"
    done
    [[ $(field 8 command) == *" exec -n 1 --share "*"/tools/cuda-mps-client 72909 0" &&
      $(field 8 exit) == 3 ]] || fail "beyond the share: $(field 8 command): exit $(field 8 exit)"
    grep -q 'allocating 72909 MiB failed: CUDA error 2' <(field 8 stdout) ||
      fail "beyond the share: $(field 8 stdout)"
    # Both clients held their share at once, and ended on the check's SIGTERM, not their time.
    [[ $("$reader" "$work/report.txt.json" check mps duration_ms) -le 20000 ]] ||
      fail "the mps check took $("$reader" "$work/report.txt.json" check mps duration_ms) ms"
    ;;

  closed_stdout)
    # The docs' way: the stand-in's own folder, which has no gpus.csv (the host JSON is read).
    smi_folder=$(dirname "$smi_stand_in")
    [[ ! -e $smi_folder/gpus.csv ]] || { echo "$smi_folder/gpus.csv should not exist" >&2; exit 2; }
    expected="pass host
pass links
pass compare
pass discovery
pass coordination
pass all-gpus
$nobody nobody
skipped mig
pass mask
pass topology
pass check
pass status
pass watch
skipped mps"
    start=$SECONDS
    # shellcheck disable=SC2046
    (cd "$work" && env -i PATH="$work/tools" HOME="$work" TMPDIR="$work/tmp" \
      GPU_CHECK_WATCH_SECONDS=2 NVML_CHECK_RUNS=3 "$work/bundle/gpu-machine-check.sh" \
      --bundle "$work/bundle" --report "$work/report.txt" \
      $(with_stand_ins "$hosts/islands-8.json" "$smi_folder") 2>"$work/stderr" |
      head -n 1 >"$work/stdout"
      exit "${PIPESTATUS[0]}")
    status=$?
    elapsed_s=$((SECONDS - start))
    expect_status 0
    expect_within 60
    expect_verdicts "$expected"
    [[ $(cat "$work/stdout") == "gpu-machine-check: report in $work/report.txt (and .json)" ]] ||
      fail "the first line: $(cat "$work/stdout")"
    grep -q '^result: PASSED: ' "$work/report.txt" || fail "the text report has no result"
    expect_no_leftovers
    # stdout and stderr both into a pipe that nobody reads any more, from the first write on.
    rm -f "$work/report.txt" "$work/report.txt.json"
    mkfifo "$work/dropped"
    exec 5<>"$work/dropped"  # a reader, so that opening the writer does not block
    exec 6>"$work/dropped"
    exec 5<&-  # no reader left: every write to 6 fails (EPIPE, SIGPIPE)
    start=$SECONDS
    # shellcheck disable=SC2046
    (cd "$work" && env -i PATH="$work/tools" HOME="$work" TMPDIR="$work/tmp" \
      GPU_CHECK_WATCH_SECONDS=2 NVML_CHECK_RUNS=3 "$work/bundle/gpu-machine-check.sh" \
      --bundle "$work/bundle" --report "$work/report.txt" \
      $(with_stand_ins "$hosts/islands-8.json" "$smi_folder") >&6 2>&6)
    status=$?
    elapsed_s=$((SECONDS - start))
    exec 6>&-
    expect_status 0
    expect_within 60
    expect_verdicts "$expected"
    grep -q '^result: PASSED: ' "$work/report.txt" || fail "the text report has no result"
    ;;

  hung_smi_ignoring_term)
    mkdir "$work/smi"
    printf '#!/bin/sh\ntrap "" TERM\nwhile :; do sleep 1; done\n' >"$work/smi/nvidia-smi"
    chmod +x "$work/smi/nvidia-smi"
    # shellcheck disable=SC2046
    run_check GPU_CHECK_STEP_TIMEOUT=8 -- $(with_stand_ins "$hosts/islands-8.json" "$work/smi")
    expect_status 1
    expect_within 60
    expect_verdicts "timeout host
pass links
fail compare
pass discovery
pass coordination
skipped all-gpus
skipped nobody
skipped mig
skipped mask
timeout topology
pass check
pass status
pass watch
skipped mps"
    expect_reason host "nvidia-smi did not end within"
    # The comparison's nvidia-smi was stopped by the tool itself, at NVIDIA_SMI_TIMEOUT (half
    # of the 8 s, or of 7 s when a second began before the command), not by timeout.
    expect_reason compare "the comparison could not be made (exit 2)"
    took=$("$reader" "$work/report.txt.json" field compare 0 duration_ms)
    [[ $took -ge 3400 && $took -le 7900 ]] || fail "the comparison ended after $took ms"
    expect_reason all-gpus "nvidia-smi's GPU list was not run: the host check's time was up: no GPU count to check against"
    expect_no_leftovers
    ;;

  as_nobody)
    if [[ $(id -u) -ne 0 || ! -e $work/tools/setpriv ]]; then
      echo "skipped: needs root and setpriv"
      exit 77
    fi
    make_smi "$hosts/islands-8.json" "$work/smi"
    # The whole run as nobody, in a folder of nobody's: the nobody check is skipped, saying so.
    mkdir -m 777 "$work/nobody"
    start=$SECONDS
    # shellcheck disable=SC2046
    (cd "$work/nobody" && setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups -- \
      env -i PATH="$work/tools" HOME="$work/nobody" TMPDIR="$work/tmp" GPU_CHECK_WATCH_SECONDS=2 \
      NVML_CHECK_RUNS=3 "$work/bundle/gpu-machine-check.sh" --bundle "$work/bundle" \
      --report "$work/nobody/report.txt" $(with_stand_ins "$hosts/islands-8.json" "$work/smi") \
      >"$work/stdout" 2>"$work/stderr")
    status=$?
    elapsed_s=$((SECONDS - start))
    cp "$work/nobody/report.txt" "$work/nobody/report.txt.json" "$work/"
    expect_status 0
    expect_within 60
    expect_verdicts "pass host
pass links
pass compare
pass discovery
pass coordination
pass all-gpus
skipped nobody
skipped mig
pass mask
pass topology
pass check
pass status
pass watch
skipped mps"
    expect_reason nobody "this run is nobody's already (all-gpus ran as nobody)"
    [[ $("$reader" "$work/report.txt.json" check all-gpus title) == "every GPU as nobody: none left out, no warning" ]] ||
      fail "all-gpus did not run as nobody: $("$reader" "$work/report.txt.json" check all-gpus title)"
    expect_no_leftovers
    # As root with a TMPDIR only root may enter: the run's folder goes under /tmp, and nobody
    # can run the copies there.
    mkdir -m 700 "$work/private"
    # shellcheck disable=SC2046
    run_check TMPDIR="$work/private" -- $(with_stand_ins "$hosts/islands-8.json" "$work/smi")
    expect_status 0
    expect_verdicts "pass host
pass links
pass compare
pass discovery
pass coordination
pass all-gpus
pass nobody
skipped mig
pass mask
pass topology
pass check
pass status
pass watch
skipped mps"
    run=$(run_folder)
    [[ $run == /tmp/gpu-machine-check.* ]] || fail "the run's folder was $run, not under /tmp"
    [[ ! -e $run ]] || fail "the run left $run"
    grep -qF "(not under TMPDIR: TMPDIR=$work/private is not a folder that other users (nobody) can enter)" \
      <("$reader" "$work/report.txt.json" check host notes) || fail "no note of the private TMPDIR"
    [[ -z $(ls -A "$work/private") ]] || fail "the run wrote into the private TMPDIR"
    ;;

  host_state_inside)
    # In the test's own mount namespace, /var/tmp a tmpfs: the host's coordination file with a
    # drained GPU 0, GPU 1 declared shared and held (whole: a declaration does not keep
    # coordination mode from it) by a running owner.
    make_smi "$hosts/islands-8.json" "$work/smi"
    state=/var/tmp/flink-gpu-coordination
    export FLINK_GPU_NVML_LIBRARY=$fake_nvml FAKE_NVML_DEVICES=$hosts/islands-8.json
    "$work/bundle/bin/flink-gpu" drain --gpu 0 --reason "the host's own drain" >/dev/null &&
      "$work/bundle/bin/flink-gpu" share --gpu 1 --replicas 2 >/dev/null || fail "cannot seed $state"
    sleep 600 &
    owner=$!
    leftover_pids+=("$owner")
    [[ $("$work/bundle/plugins/external-resource-gpu/nvidia-gpu-discovery.sh" 1 \
      --enable-coordination-mode --owner-pid "$owner" 2>/dev/null) == 1 ]] || fail "the record of GPU 1 was not made"
    unset FLINK_GPU_NVML_LIBRARY FAKE_NVML_DEVICES
    before=$(cd /var/tmp && find . -printf '%p %s %T@\n' | sort && cat flink-gpu-coordination*)
    # shellcheck disable=SC2046
    run_check -- $(with_stand_ins "$hosts/islands-8.json" "$work/smi")
    expect_status 0
    expect_within 60
    expect_verdicts "pass host
pass links
pass compare
pass discovery
pass coordination
pass all-gpus
$nobody nobody
skipped mig
pass mask
pass topology
pass check
pass status
pass watch
skipped mps"
    after=$(cd /var/tmp && find . -printf '%p %s %T@\n' | sort && cat flink-gpu-coordination*)
    [[ $after == "$before" ]] || fail "the run changed /var/tmp:"$'\n'"$before"$'\n'"---"$'\n'"$after"
    [[ $("$reader" "$work/report.txt.json" field all-gpus 0 stdout) == 0,1,2,3,4,5,6,7 ]] ||
      fail "all-gpus: $("$reader" "$work/report.txt.json" field all-gpus 0 stdout)"
    kill "$owner"
    ;;

  failed_start)
    # A number that dash cannot hold: refused before anything is written.
    run_check GPU_CHECK_STEP_TIMEOUT=99999999999999999999 --
    expect_status 2
    grep -q 'GPU_CHECK_STEP_TIMEOUT must be a whole number from 1 to 999999' "$work/stderr" ||
      fail "the refusal: $(cat "$work/stderr")"
    [[ ! -e $work/report.txt && ! -e $work/report.txt.json ]] || fail "a report was written"
    run_check NVML_CHECK_RUNS=1001 --
    expect_status 2
    [[ ! -e $work/report.txt && ! -e $work/report.txt.json ]] || fail "a report was written"
    # A report that cannot be written: no run's folder left.
    (cd "$work" && env -i PATH="$work/tools" TMPDIR="$work/tmp" "$work/bundle/gpu-machine-check.sh" \
      --bundle "$work/bundle" --report "$work/no-such-folder/report.txt" >/dev/null 2>"$work/stderr")
    [[ $? -eq 2 ]] && grep -q 'cannot write the report' "$work/stderr" ||
      fail "an unwritable report: $(cat "$work/stderr")"
    ;;

  *)
    echo "unknown case $case_name" >&2
    exit 2
    ;;
esac
finish
