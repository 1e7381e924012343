#!/usr/bin/env bash
#
# Tests for the default discovery: plugins/external-resource-gpu/nvidia-gpu-discovery.sh,
# the nvidia-gpu-discovery program it execs, and gpu-discovery-common.sh, as built or installed
# together in one folder.
#
#     bash tests/plugins/nvidia_gpu_discovery_test.sh [path-to-nvidia-gpu-discovery.sh
#                                                      [path-to-stand-in-libnvidia-ml.so.1]]
#
# Each case puts a stand-in `nvidia-smi` (a generated shell script that prints
# given text and exits with a given code) first on PATH, or gives the GPUs with
# --gpus, runs the discovery script and checks its exact stdout, its exit code
# and text on its stderr. Coordination cases use coordination files in a
# temporary folder and `sleep` processes as owners. The --select cases play a host of two kinds of
# GPU through the stand-in NVML (tests/fixtures/nvml/), when its path is given. Prints "ok - NAME" or
# "not ok - NAME: DETAILS" per case, then "N passed, M failed"; exits non-zero
# if any case failed.

set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
script=${1:-$here/../../plugins/external-resource-gpu/nvidia-gpu-discovery.sh}
if [[ ! -f $script ]]; then
    echo "discovery script not found: $script" >&2
    exit 2
fi
script=$(cd "$(dirname "$script")" && pwd)/$(basename "$script")
plugin_dir=$(dirname "$script")
program=$plugin_dir/nvidia-gpu-discovery
common=$plugin_dir/gpu-discovery-common.sh
fake_nvml=${2-}

work=$(mktemp -d "${TMPDIR:-/tmp}/nvidia_gpu_discovery_test.XXXXXX") || exit 2
# The program asks NVML before nvidia-smi: on a GPU host the real libnvidia-ml.so.1 would answer
# instead of the stand-ins. A library that does not exist leaves nvidia-smi to answer, silently.
export FLINK_GPU_NVML_LIBRARY=$work/no-nvml/libnvidia-ml.so.1
# Owner processes started by the coordination cases, ended on the way out.
owners=()
cleanup() {
    local pid
    for pid in ${owners[@]+"${owners[@]}"}; do
        kill "$pid" 2> /dev/null
    done
    rm -rf "$work"
}
trap cleanup EXIT

passed=0
failed=0
case_number=0

# Results of the last run_script.
out=
err=
rc=
elapsed_ms=

pass() {
    passed=$((passed + 1))
    printf 'ok - %s\n' "$1"
}

fail_case() {
    failed=$((failed + 1))
    printf 'not ok - %s: %s\n' "$1" "$2"
}

# make_smi TEXT EXIT_CODE [BODY]: creates a fresh directory holding a stand-in
# nvidia-smi that records its arguments, prints TEXT (as printf %b would) and
# exits with EXIT_CODE; BODY, if given, runs before it exits. Sets smi_dir.
make_smi() {
    local text=$1 code=$2 body=${3-}
    case_number=$((case_number + 1))
    smi_dir=$work/case$case_number
    mkdir -p "$smi_dir"
    printf '%b' "$text" > "$smi_dir/output.txt"
    {
        printf '#!/bin/sh\n'
        printf 'printf "%%s\\n" "$*" > "%s/args.txt"\n' "$smi_dir"
        printf 'cat "%s/output.txt"\n' "$smi_dir"
        [[ -n $body ]] && printf '%s\n' "$body"
        printf 'exit %d\n' "$code"
    } > "$smi_dir/nvidia-smi"
    chmod +x "$smi_dir/nvidia-smi"
}

# run_script PATH [ARGS...]: runs the script (through its shebang, as the drivers
# do) with the given PATH; sets out, err, rc and elapsed_ms. stdout is kept
# exactly, trailing newline included.
run_script() {
    run_command "$1" "$script" "${@:2}"
}

# run_command PATH COMMAND [ARGS...]: as run_script, for any command.
run_command() {
    local path=$1
    shift
    local start end
    start=$(date +%s%N)
    PATH=$path "$@" > "$work/stdout" 2> "$work/stderr" < /dev/null
    rc=$?
    end=$(date +%s%N)
    elapsed_ms=$(( (end - start) / 1000000 ))
    out=$(cat "$work/stdout"; printf x)
    out=${out%x}
    err=$(cat "$work/stderr")
}

# check NAME EXPECTED_RC EXPECTED_STDOUT_LINE STDERR_SUBSTRING [FIRST_LINE_SUBSTRING]
# EXPECTED_STDOUT_LINE is the single line expected on stdout ("" for none).
check() {
    local name=$1 want_rc=$2 want_out=$3 want_err=$4 want_first=${5-}
    local want_stdout=
    [[ -n $want_out ]] && want_stdout=$want_out$'\n'
    local problems=()
    if [[ $rc != "$want_rc" ]]; then
        problems+=("exit code $rc, expected $want_rc")
    fi
    if [[ $out != "$want_stdout" ]]; then
        problems+=("stdout $(printf '%q' "$out"), expected $(printf '%q' "$want_stdout")")
    fi
    if [[ -n $want_err && $err != *"$want_err"* ]]; then
        problems+=("stderr lacks '$want_err'")
    fi
    if [[ -n $want_first && ${err%%$'\n'*} != *"$want_first"* ]]; then
        problems+=("first stderr line lacks '$want_first'")
    fi
    if (( ${#problems[@]} == 0 )); then
        pass "$name"
    else
        local joined
        joined=$(IFS=';'; printf '%s' "${problems[*]}")
        fail_case "$name" "$joined; stderr was: $(printf '%q' "$err")"
    fi
}

# with_smi TEXT EXIT_CODE ARGS...: runs the script with a stand-in first on PATH.
with_smi() {
    local text=$1 code=$2
    shift 2
    make_smi "$text" "$code"
    run_script "$smi_dir:/usr/bin:/bin" "$@"
}

# --- the script itself -----------------------------------------------------

if [[ -x $script ]] && [[ $(head -n 1 "$script") == '#!/bin/sh' ]]; then
    pass "script is executable with a sh shebang"
else
    fail_case "script is executable with a sh shebang" "mode or first line wrong"
fi

if sh -n "$script" 2> "$work/syntax" && sh -n "$common" 2>> "$work/syntax"; then
    pass "scripts parse"
else
    fail_case "scripts parse" "$(cat "$work/syntax")"
fi

if [[ -x $program && ! -d $program ]]; then
    pass "the program is beside the script"
else
    fail_case "the program is beside the script" "$program is not an executable file"
fi

# --- plain mode --------------------------------------------------------------

with_smi '0\n1\n2\n3\n' 0 2
check "four GPUs, amount 2" 0 "0,1" ""

query="--query-gpu=index,uuid,name,pci.bus_id,memory.total --format=csv,noheader,nounits"
if [[ $(cat "$smi_dir/args.txt" 2>/dev/null) == "$query" ]]; then
    pass "nvidia-smi is asked for the GPUs' properties as CSV"
else
    fail_case "nvidia-smi is asked for the GPUs' properties as CSV" \
        "arguments were '$(cat "$smi_dir/args.txt" 2>/dev/null)'"
fi

h200_0='0, GPU-5b8a0f2c-1d3e-4f50-8a6b-7c8d9e0f1a2b, NVIDIA H200, 00000000:19:00.0, 143771'
h200_1='1, GPU-6c9b1a3d-2e4f-5061-9b7c-8d9e0f1a2b3c, NVIDIA H200, 00000000:3B:00.0, 143771'
with_smi "$h200_0\n$h200_1\n" 0 2
check "GPU lines with properties give their indices" 0 "0,1" ""
if [[ -z $err ]]; then
    pass "GPU lines with properties are not warned about"
else
    fail_case "GPU lines with properties are not warned about" "stderr was $(printf '%q' "$err")"
fi

with_smi '0, [N/A], Tesla V100, PCIe, 32GB, [N/A], [Not Supported]\n1, [N/A], [N/A], [N/A], [N/A]\n' 0 2
check "unknown properties and a name with commas" 0 "0,1" ""

# A GPU that fell off the bus, in either of nvidia-smi's ways: left out, named on stderr.
with_smi "$h200_0\n1, [GPU is lost], [GPU is lost], [GPU is lost], [GPU is lost]\nUnable to determine the device handle for GPU 0000:5D:00.0: Unknown Error\n" 15 1
check "lost GPUs are left out, whatever the exit code" 0 "0" "GPU 0000:5D:00.0 left out"
if [[ $err == *"GPU 1 left out: uuid is [GPU is lost]"* ]]; then
    pass "a GPU whose fields say it is lost is named"
else
    fail_case "a GPU whose fields say it is lost is named" "stderr was $(printf '%q' "$err")"
fi
with_smi "$h200_0\nUnable to determine the device handle for GPU 0000:5D:00.0: Unknown Error\n" 15 2
check "a lost GPU is not counted" 1 "" "only 1 GPU(s) found, 2 requested"

with_smi '0\n1\n' 0 1 --mig
check "--mig is a known argument" 0 "0" ""
if [[ $err == *"unknown argument '--mig'"* ]]; then
    fail_case "--mig is not noted as unknown" "stderr was $(printf '%q' "$err")"
else
    pass "--mig is not noted as unknown"
fi

make_smi '0\n1\n2\n3\n' 0
run_command "$smi_dir:/usr/bin:/bin" "$BASH" "$script" 2
check "script runs under bash too" 0 "0,1" ""

make_smi '0\n1\n2\n3\n' 0
ln -s "$script" "$work/linked-discovery.sh"
run_command "$smi_dir:/usr/bin:/bin" "$work/linked-discovery.sh" 2
check "script runs through a symbolic link" 0 "0,1" ""

mkdir -p "$work/lonely"
cp "$script" "$work/lonely/"
run_command "/usr/bin:/bin" "$work/lonely/$(basename "$script")" 2
check "script without its program" 1 "" "" "nvidia-gpu-discovery is missing"

with_smi '0\n1\n2\n3\n' 0 2 null
check "args '2 null'" 0 "0,1" ""
if [[ -z $err ]]; then
    pass "'null' is ignored silently"
else
    fail_case "'null' is ignored silently" "stderr was $(printf '%q' "$err")"
fi

with_smi '0\n1\n2\n3\n' 0 2 --device-type nvidia
check "unknown argument tolerated" 0 "0,1" "--device-type"

# A misspelt option of ours is an error: ignored, it would hand the GPUs out uncoordinated.
with_smi '0\n1\n2\n3\n' 0 2 --enable-coordination-mod --coordination-file "$work/misspelt"
check "a misspelt option is an error naming it" 1 "" "the default discovery's options: " \
    "unknown option '--enable-coordination-mod': did you mean '--enable-coordination-mode'?"
if [[ ! -e $smi_dir/args.txt && ! -e $work/misspelt ]]; then
    pass "a misspelt option stops the discovery before anything is looked at"
else
    fail_case "a misspelt option stops the discovery before anything is looked at" \
        "nvidia-smi ran or the coordination file was made"
fi
with_smi '0\n1\n2\n3\n' 0 2 --enable-coordination-mode --coordination-fle="$work/misspelt"
check "a misspelt --name=value option is an error naming it" 1 "" "" \
    "unknown option '--coordination-fle=$work/misspelt': did you mean '--coordination-file'?"
with_smi '0\n1\n2\n3\n' 0 2 --mig=yes
check "a flag given a value is an error" 1 "" "" "unknown option '--mig=yes': '--mig' takes no value"

with_smi '0\n1\n2\n3\n' 0 2 --coordination-file "$work/plain-coordination"
check "--coordination-file without coordination mode" 0 "0,1" ""
if [[ ! -e $work/plain-coordination ]]; then
    pass "plain mode does not touch the coordination file"
else
    fail_case "plain mode does not touch the coordination file" "it was created"
fi

with_smi '0\n1\n2\n3\n' 0 4
check "all four GPUs" 0 "0,1,2,3" ""

with_smi '0\n1\n2\n3\n' 0 1
check "amount 1" 0 "0" ""

with_smi "$(seq 0 15)\n" 0 12
check "sixteen GPUs, amount 12" 0 "0,1,2,3,4,5,6,7,8,9,10,11" ""

with_smi '3\n10\n7\n' 0 2
check "indices print as given" 0 "3,10" ""

with_smi ' 0 \r\n\n  1\r\n' 0 2
check "whitespace and CRLF around indices" 0 "0,1" ""

# --- nvidia-smi errors -------------------------------------------------------

with_smi 'No devices were found\n' 6 1
check "no devices (exit 6)" 1 "" '"No devices were found"' "no NVIDIA GPU found"

with_smi 'Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 535.161\n' 18 1
check "driver/library version mismatch (exit 18)" 1 "" "NVML library version: 535.161" \
    "Driver/library version mismatch"
if [[ ${err%%$'\n'*} == *"exit code 18"* ]]; then
    pass "failure names nvidia-smi's exit code"
else
    fail_case "failure names nvidia-smi's exit code" "first stderr line: ${err%%$'\n'*}"
fi

with_smi 'WARNING: infoROM is corrupted at gpu 0000:0B:00.0\n0\n1\n' 14 2
check "infoROM warning before indices (exit 14)" 0 "0,1" \
    "nvidia-smi: WARNING: infoROM is corrupted at gpu 0000:0B:00.0"
if [[ $err == *"14"* ]]; then
    pass "non-zero exit with indices is warned about"
else
    fail_case "non-zero exit with indices is warned about" "stderr was $(printf '%q' "$err")"
fi

with_smi '' 0 1
check "nvidia-smi prints nothing" 1 "" "" "no NVIDIA GPU found"

with_smi '' 9 1
check "nvidia-smi fails silently" 1 "" "" "exit code 9"

make_smi 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.\n' 9
mv "$smi_dir/nvidia-smi" "$smi_dir/smi.sh"
printf '#!/bin/sh\nexec "%s/smi.sh" "$@" 1>&2\n' "$smi_dir" > "$smi_dir/nvidia-smi"
chmod +x "$smi_dir/nvidia-smi"
run_script "$smi_dir:/usr/bin:/bin" 1
check "error text on nvidia-smi's stderr" 1 "" "" "could not communicate with the NVIDIA driver"

# --- too few GPUs -------------------------------------------------------------

with_smi '0\n1\n' 0 3
check "two GPUs, amount 3" 1 "" "" "only 2 GPU(s) found, 3 requested"

with_smi '0\n1\n' 0 99999999999999999999
check "huge amount" 1 "" "" "only 2"

# --- nvidia-smi missing -------------------------------------------------------

# An empty folder as PATH. The program also looks in the folders drivers install
# nvidia-smi into, so on a host with a real driver the case cannot be made.
installed_smi=
for folder in /usr/bin /usr/local/bin /usr/local/nvidia/bin /usr/lib/wsl/lib /opt/nvidia/bin; do
    [[ -x $folder/nvidia-smi ]] && installed_smi=$folder/nvidia-smi
done
mkdir -p "$work/empty"
run_script "$work/empty" 1
if [[ -z $installed_smi ]]; then
    check "nvidia-smi missing" 1 "" "looked in $work/empty, /usr/bin" "nvidia-smi was not found"
    if [[ $err == *"/opt/nvidia/bin"* ]]; then
        pass "the places looked in are listed"
    else
        fail_case "the places looked in are listed" "stderr was $(printf '%q' "$err")"
    fi
else
    echo "# skipping 'nvidia-smi missing': this host has $installed_smi"
    if [[ $err != *"nvidia-smi was not found"* ]]; then
        pass "nvidia-smi found outside PATH"
    else
        fail_case "nvidia-smi found outside PATH" "stderr was $(printf '%q' "$err")"
    fi
fi

# --- invalid amount -----------------------------------------------------------

for amount in 0 -1 two 1.5 ''; do
    with_smi '0\n1\n' 0 "$amount"
    check "invalid amount '$amount'" 1 "" "" "invalid amount '$amount': expected a positive integer"
done
make_smi '0\n1\n' 0
run_script "$smi_dir:/usr/bin:/bin"
check "missing amount" 1 "" "" "invalid amount '': expected a positive integer"

# --- --help -----------------------------------------------------------------------

# The options parseDiscoveryArguments reads (DiscoveryArguments.cpp), each of which the usage and
# the script's header comment must list.
every_option=(--enable-coordination-mode --enable-coordination --coordination-file --gpus
    --owner-pid --mig --placement --health --share --share-placement)
vendor_options=(--enable-coordination-mode --enable-coordination --coordination-file
    --owner-pid --placement --health)

# check_usage NAME EXPECTED_FIRST_LINE OPTION...: the last run printed its usage, exit 0.
check_usage() {
    local name=$1 first=$2
    shift 2
    local problems=() option
    [[ $rc == 0 ]] || problems+=("exit code $rc")
    [[ -z $err ]] || problems+=("stderr $(printf '%q' "$err")")
    [[ ${out%%$'\n'*} == "$first" ]] || problems+=("first line $(printf '%q' "${out%%$'\n'*}")")
    for option in "$@"; do
        [[ $out == *"  $option"* || $out == *"also $option"* ]] || problems+=("no $option")
    done
    if (( ${#problems[@]} == 0 )); then
        pass "$name"
    else
        fail_case "$name" "$(IFS=';'; printf '%s' "${problems[*]}")"
    fi
}

for flag in --help -h; do
    run_script "/usr/bin:/bin" "$flag"
    check_usage "nvidia-gpu-discovery.sh $flag prints its options" \
        "Usage: nvidia-gpu-discovery.sh AMOUNT [OPTIONS]" "${every_option[@]}"
    run_command "/usr/bin:/bin" "$program" "$flag"
    check_usage "the program's $flag prints its options" \
        "Usage: nvidia-gpu-discovery.sh AMOUNT [OPTIONS]" "${every_option[@]}"
done
for vendor in amd intel; do
    if [[ ! -x $plugin_dir/$vendor-gpu-discovery ]]; then
        fail_case "$vendor-gpu-discovery.sh --help" "$plugin_dir/$vendor-gpu-discovery is not built"
        continue
    fi
    run_command "/usr/bin:/bin" "$plugin_dir/$vendor-gpu-discovery.sh" --help
    check_usage "$vendor-gpu-discovery.sh --help prints its options" \
        "Usage: $vendor-gpu-discovery.sh AMOUNT [OPTIONS]" "${vendor_options[@]}"
    run_command "/usr/bin:/bin" "$plugin_dir/$vendor-gpu-discovery.sh" -h
    check_usage "$vendor-gpu-discovery.sh -h prints its options" \
        "Usage: $vendor-gpu-discovery.sh AMOUNT [OPTIONS]" "${vendor_options[@]}"
done

# Only as the first argument: after the amount, --help is an argument like any other.
with_smi '0\n1\n' 0 1 --help
check "--help after the amount is no request for help" 0 "0" "ignoring unknown argument '--help'"

# The header comment of each script names every option the program takes.
for file in nvidia-gpu-discovery.sh amd-gpu-discovery.sh intel-gpu-discovery.sh \
    gpu-discovery-common.sh; do
    [[ -f $plugin_dir/$file ]] || continue
    missing=()
    header=$(sed -n '/^#/p' "$plugin_dir/$file")
    for option in "${every_option[@]}" FLINK_GPU_COORDINATION_FILE; do
        [[ $header == *"$option"* ]] || missing+=("$option")
    done
    if (( ${#missing[@]} == 0 )); then
        pass "$file's header lists every option"
    else
        fail_case "$file's header lists every option" "missing ${missing[*]}"
    fi
done

# --- coordination mode ---------------------------------------------------------

# start_owner: starts a process that lives until the test ends; sets owner_pid.
start_owner() {
    sleep 600 &
    owner_pid=$!
    owners+=("$owner_pid")
}

# Sets dead_pid to the pid of a process that has exited (and been reaped).
sleep 0 &
dead_pid=$!
wait "$dead_pid"

# records FILE: the file's records as "gpu pid", sorted (the order of lines is
# not part of the format), joined by ';'.
records() {
    awk 'NF { print $1, $2 }' "$1" 2> /dev/null | LC_ALL=C sort | paste -sd ';' -
}

# check_records NAME FILE EXPECTED
check_records() {
    local actual
    actual=$(records "$2")
    if [[ $actual == "$3" ]]; then
        pass "$1"
    else
        fail_case "$1" "records '$actual', expected '$3'"
    fi
}

coord=$work/coordination
mkdir -p "$coord"
start_owner
first=$owner_pid
start_owner
second=$owner_pid
start_owner
third=$owner_pid

shared=$coord/shared
with_smi '0\n1\n2\n3\n' 0 1 --enable-coordination-mode --coordination-file "$shared" \
    --owner-pid "$first"
check "coordination: first owner" 0 "0" ""
run_script "$smi_dir:/usr/bin:/bin" 1 --enable-coordination-mode --coordination-file "$shared" \
    --owner-pid "$first"
check "coordination: asking again takes another GPU, as Flink's script does" 0 "1" ""
run_script "$smi_dir:/usr/bin:/bin" 2 --enable-coordination-mode --coordination-file "$shared" \
    --owner-pid "$second"
check "coordination: a second owner gets other GPUs" 0 "2,3" ""
run_script "$smi_dir:/usr/bin:/bin" 1 --enable-coordination-mode --coordination-file "$shared" \
    --owner-pid "$third"
check "coordination: no GPU left" 1 "" "GPU 3 is held by process $second" \
    "not enough free GPUs: 1 requested, 0 free"
check_records "coordination: the file records each GPU's owner" "$shared" \
    "0 $first;1 $first;2 $second;3 $second"

# Four owners at once, eight GPUs: each gets two, none twice.
concurrent_owners=()
for _ in 1 2 3 4; do
    start_owner
    concurrent_owners+=("$owner_pid")
done
callers=()
for owner in "${concurrent_owners[@]}"; do
    PATH=/usr/bin:/bin "$script" 2 --gpus 0,1,2,3,4,5,6,7 --enable-coordination-mode \
        --coordination-file "$coord/concurrent" --owner-pid "$owner" \
        > "$work/concurrent.$owner" 2>&1 < /dev/null &
    callers+=($!)
done
concurrent_failures=0
for caller in "${callers[@]}"; do
    wait "$caller" || concurrent_failures=$((concurrent_failures + 1))
done
granted=$(cat "${concurrent_owners[@]/#/$work/concurrent.}" | tr ',' '\n' | sort -n | tr '\n' ' ')
if (( concurrent_failures == 0 )) && [[ $granted == "0 1 2 3 4 5 6 7 " ]]; then
    pass "coordination: concurrent owners get disjoint GPUs"
else
    fail_case "coordination: concurrent owners get disjoint GPUs" \
        "$concurrent_failures failed; granted: $granted"
fi

printf '0 %s\n1 %s\n' "$dead_pid" "$dead_pid" > "$coord/dead-owner"
run_script "/usr/bin:/bin" 2 --gpus 0,1 --enable-coordination-mode \
    --coordination-file "$coord/dead-owner" --owner-pid "$first"
check "coordination: a dead owner's GPUs are taken over" 0 "0,1" \
    "took back GPU 0 from process $dead_pid"
check_records "coordination: the dead owner's records are replaced" "$coord/dead-owner" \
    "0 $first;1 $first"

run_script "/usr/bin:/bin" 1 --gpus 0,1 --enable-coordination --coordination-file "$coord/custom" \
    --owner-pid "$second"
check "coordination: --enable-coordination" 0 "0" ""
check_records "coordination: a custom coordination file is created" "$coord/custom" "0 $second"

run_script "/usr/bin:/bin" 1 --gpus 0,1 --enable-coordination-mode \
    --coordination-file="$coord/default-owner"
check "coordination: --coordination-file=PATH" 0 "0" ""
check_records "coordination: the owner is the process that started the discovery" \
    "$coord/default-owner" "0 $$"

printf 'untouched\n' > "$coord/target"
ln -s "$coord/target" "$coord/link"
run_script "/usr/bin:/bin" 1 --gpus 0,1 --enable-coordination-mode \
    --coordination-file "$coord/link" --owner-pid "$first"
check "coordination: a symbolic link as coordination file is refused" 1 "" "" "$coord/link"
if [[ $(cat "$coord/target") == untouched ]]; then
    pass "coordination: the link's target is not written"
else
    fail_case "coordination: the link's target is not written" \
        "it holds $(printf '%q' "$(cat "$coord/target")")"
fi

printf 'not a record\n\n0 %s\nsomething else entirely\n' "$dead_pid" > "$coord/junk"
run_script "/usr/bin:/bin" 2 --gpus 0,1,2 --enable-coordination-mode \
    --coordination-file "$coord/junk" --owner-pid "$first"
# GPU 0's owner is gone, but GPUs no record names go first (Flink's order).
check "coordination: junk lines are tolerated" 0 "1,2" "note: ignoring line 1 of $coord/junk"

run_script "/usr/bin:/bin" 1 --gpus 0,1 --enable-coordination-mode \
    --coordination-file "$coord/dead-requester" --owner-pid "$dead_pid"
check "coordination: an owner that is not running" 1 "" "" "owner process $dead_pid is not running"

run_script "/usr/bin:/bin" 3 --gpus 0,1 --enable-coordination-mode \
    --coordination-file "$coord/too-few" --owner-pid "$first"
check "coordination: fewer GPUs than asked" 1 "" "" "only 2 GPU(s) found, 3 requested"

# --- --share --------------------------------------------------------------------

# check_first_line NAME EXPECTED_RC EXPECTED_FIRST_STDERR_LINE: nothing on stdout, and the first
# stderr line exactly as given (the program's rule: the cause, without an "error:" prefix).
check_first_line() {
    local name=$1 want_rc=$2 want_first=$3
    local first=${err%%$'\n'*}
    if [[ $rc == "$want_rc" && -z $out && $first == "$want_first" ]]; then
        pass "$name"
    else
        fail_case "$name" "exit code $rc, stdout $(printf '%q' "$out"), first stderr line $(printf '%q' "$first"), expected exit $want_rc and $(printf '%q' "$want_first")"
    fi
}

make_smi '0\n1\n' 0
run_script "$smi_dir:/usr/bin:/bin" 1 --share
check_first_line "--share: without coordination mode" 1 \
    "--share needs coordination mode (--enable-coordination-mode): a share exists only as a record of the coordination file"
run_script "$smi_dir:/usr/bin:/bin" 1 --enable-coordination-mode --coordination-file \
    "$coord/share-mig" --share --mig --owner-pid "$first"
check_first_line "--share: with --mig" 1 \
    "--share and --mig cannot be combined: MIG instances are not shared"
run_script "$smi_dir:/usr/bin:/bin" 1 --enable-coordination-mode --coordination-file \
    "$coord/share-placement" --share --share-placement tight --owner-pid "$first"
check_first_line "--share-placement: not pack or spread" 1 \
    "invalid --share-placement 'tight': expected pack or spread"
if [[ ! -e $coord/share-mig && ! -e $coord/share-placement ]]; then
    pass "--share: bad arguments write no coordination file"
else
    fail_case "--share: bad arguments write no coordination file" "$(ls "$coord")"
fi

shares=$coord/shares
run_script "$smi_dir:/usr/bin:/bin" 1 --enable-coordination-mode --coordination-file "$shares" \
    --share --owner-pid "$first"
check_first_line "--share: no GPU declared shared" 1 \
    "no GPU of this host is declared shared (flink-gpu share)"

# GPU 0 declared shared two ways, as `flink-gpu share --gpu 0 --replicas 2` writes it beside the
# coordination file (nvidia-smi's stand-in tells no UUID: by index).
printf '# flink-gpu sharing declarations\nshared\tgpu=0\treplicas=2\tsince=%s\tuid=%s\n' \
    "$(date +%s)" "$(id -u)" > "$shares.sharing"
run_script "$smi_dir:/usr/bin:/bin" 1 --enable-coordination-mode --coordination-file "$shares" \
    --share --owner-pid "$first"
check "--share: a share of the declared GPU" 0 "0" ""
share_line=$(head -n 1 "$shares" 2> /dev/null)
spaces=${share_line//[^ ]/}
if [[ $share_line == "0 $first"$'\t'* && $share_line == *$'\t'share=0/2* && ${#spaces} == 1 ]]; then
    pass "--share: recorded in Flink's form with share=0/2"
else
    fail_case "--share: recorded in Flink's form with share=0/2" \
        "the file holds $(printf '%q' "$(cat "$shares" 2> /dev/null)")"
fi
run_script "$smi_dir:/usr/bin:/bin" 1 --enable-coordination-mode --coordination-file "$shares" \
    --share --share-placement spread --owner-pid "$second"
check "--share --share-placement spread: the other share" 0 "0" ""
if grep -q "^0 $second"$'\t'".*"$'\t'"share=1/2" "$shares"; then
    pass "--share: the second owner holds share 1/2"
else
    fail_case "--share: the second owner holds share 1/2" \
        "the file holds $(printf '%q' "$(cat "$shares")")"
fi
run_script "$smi_dir:/usr/bin:/bin" 1 --enable-coordination-mode --coordination-file "$shares" \
    --share --owner-pid "$third"
check_first_line "--share: every share held" 1 "not enough free GPU shares: 1 requested, 0 free"
# Flink's script reads a share line as its GPU taken: a whole request gets GPU 1.
run_script "$smi_dir:/usr/bin:/bin" 1 --enable-coordination-mode --coordination-file "$shares" \
    --owner-pid "$third"
check "--share: a whole request passes over the shared GPU" 0 "1" ""

# --- --gpus ----------------------------------------------------------------------

run_script "/usr/bin:/bin" 2 --gpus "3, 01 GPU-6f2a3c1e-0b1d-4c4b-9a59-2f0d84d3d8b1"
check "--gpus: commas and spaces, indices without leading zeros" 0 "3,1" ""

run_script "/usr/bin:/bin" 1 --gpus 0,x
check "--gpus: not a GPU" 1 "" "" "invalid GPU 'x' in --gpus"

run_script "/usr/bin:/bin" 1 --gpus
check "--gpus: without a list" 1 "" "" "--gpus needs a list"

run_script "/usr/bin:/bin" 1 --gpus 0 --owner-pid abc
check "--owner-pid: not a pid" 1 "" "" "invalid --owner-pid 'abc'"

# --- gpu-discovery-common.sh -------------------------------------------------------

custom=$work/custom/custom.sh
mkdir -p "$work/custom"
{
    printf '#!%s\n' "$BASH"
    printf '. "%s"\n' "$common"
    # shellcheck disable=SC2016
    printf 'gpu_discovery "$CUSTOM_GPUS" "$1" "${2-}" "${3-}"\n'
} > "$custom"
chmod +x "$custom"

CUSTOM_GPUS="0 1 2 3" run_command "/usr/bin:/bin" "$custom" 2
check "gpu_discovery: plain mode" 0 "0,1" ""

CUSTOM_GPUS=$'0\n1\n2\n' run_command "/usr/bin:/bin" "$custom" 3
check "gpu_discovery: newline-separated indexes" 0 "0,1,2" ""

CUSTOM_GPUS="0,1" run_command "/usr/bin:/bin" "$custom" 3
check "gpu_discovery: too few" 1 "" "" "only 2 GPU(s) found, 3 requested"

CUSTOM_GPUS="0 1 2 3" run_command "/usr/bin:/bin" "$custom" 2 coordination "$coord/common"
check "gpu_discovery: coordination mode" 0 "0,1" ""
# The custom script's parent (this shell) owns them, not the script itself.
check_records "gpu_discovery: the worker owns the GPUs" "$coord/common" "0 $$;1 $$"
printf '0 %s\n' "$second" > "$coord/common-held"
CUSTOM_GPUS="0 1 2 3" run_command "/usr/bin:/bin" "$custom" 2 coordination "$coord/common-held"
check "gpu_discovery: coordination skips held GPUs" 0 "1,2" ""

# A POSIX sh custom script beside the program and the common script, as Flink's
# custom scripts are installed.
mkdir -p "$work/sh-custom"
ln -s "$program" "$work/sh-custom/nvidia-gpu-discovery"
ln -s "$common" "$work/sh-custom/gpu-discovery-common.sh"
# shellcheck disable=SC2016
printf '#!/bin/sh\n. "$(dirname "$0")"/gpu-discovery-common.sh\ncd /\ngpu_discovery "0,1,2" "$1" "${2-}" "${3-}"\n' \
    > "$work/sh-custom/custom.sh"
chmod +x "$work/sh-custom/custom.sh"
run_command "/usr/bin:/bin" "$work/sh-custom/custom.sh" 2
check "gpu_discovery: from a POSIX sh script" 0 "0,1" ""
# Sourced through a relative path, then the script changes directory.
# shellcheck disable=SC2016
run_command "/usr/bin:/bin" sh -c 'cd "$1" && exec sh ./custom.sh 1' sh "$work/sh-custom"
check "gpu_discovery: sourced through a relative path" 0 "0" ""
run_command "/usr/bin:/bin" "$work/sh-custom/custom.sh" 1 true "$coord/sh-common"
check "gpu_discovery: 'true' turns coordination on" 0 "0" ""
check_records "gpu_discovery: coordination from a POSIX sh script" "$coord/sh-common" "0 $$"

# --- nvidia-smi hangs ---------------------------------------------------------

make_smi '' 0 'exec sleep 30'
NVIDIA_SMI_TIMEOUT=1 run_script "$smi_dir:/usr/bin:/bin" 1
check "hanging nvidia-smi" 1 "" "" "did not answer within 1 s"
if (( elapsed_ms < 7000 )); then  # not the 30 s sleep, nor the default limit of 8 s
    pass "hanging nvidia-smi is stopped quickly"
else
    fail_case "hanging nvidia-smi is stopped quickly" "took ${elapsed_ms} ms"
fi

make_smi '' 0 'sleep 30'
NVIDIA_SMI_TIMEOUT=1 run_script "$smi_dir:/usr/bin:/bin" 1
check "hanging nvidia-smi with a child process" 1 "" "" "did not answer within 1 s"
if (( elapsed_ms < 7000 )); then  # not the 30 s sleep, nor the default limit of 8 s
    pass "hanging nvidia-smi's child is stopped too"
else
    fail_case "hanging nvidia-smi's child is stopped too" "took ${elapsed_ms} ms"
fi

make_smi '0\n1\n' 0
NVIDIA_SMI_TIMEOUT=soon run_script "$smi_dir:/usr/bin:/bin" 1
check "NVIDIA_SMI_TIMEOUT not a number" 0 "0" "note: ignoring NVIDIA_SMI_TIMEOUT='soon'"

# --- --select, as Flink runs the script -------------------------------------------------------

# flink_runs ARGS...: runs the script as Flink's Java driver does for a resource whose
# discovery-script.args are ARGS after the amount (one string, split on spaces), on the stand-in
# host of two L4s and two H100s (GPU 3 in MIG mode: a 3g.40gb and two 1g.10gb instances).
flink_runs() {
    local amount=$1 args
    read -ra args <<< "$2"
    FLINK_GPU_NVML_LIBRARY=$fake_nvml FAKE_NVML_DEVICES=$here/../fixtures/nvml/hosts/mixed-4.json \
        run_script "/usr/bin:/bin" "$amount" "${args[@]}"
}

if [[ -n $fake_nvml ]]; then
    mig_3g=MIG-b0000003-0000-4000-8000-000000000002
    mig_1g_a=MIG-b0000003-0000-4000-8000-000000000009
    mig_1g_b=MIG-b0000003-0000-4000-8000-00000000000a

    flink_runs 2 "--select name~H100"
    check "select: name~H100 keeps the H100s" 0 "2,3" ""
    flink_runs 2 "--select name~l4,compute_capability<9.0"
    check "select: the L4s by name and compute capability" 0 "0,1" ""
    # GPU 3's memory is for root alone in MIG mode (the host's caller is not privileged).
    flink_runs 1 "--select compute_capability>8.9,numa_node>=1,memory.total>23034"
    check "select: numbers compare as numbers; a key unknown is noted" 0 "2" \
        "note: --select: GPU 3 does not tell memory.total, so memory.total>23034 never matches it"
    flink_runs 1 "--select pci.bus_id=0000:c1:00.0"
    check "select: a PCI bus id in lspci's spelling" 0 "3" ""
    flink_runs 3 "--select name~H100"
    check "select: the shortfall counts the GPUs that match" 1 "" "" \
        "only 2 GPUs match name~H100, 3 requested (matching: 2,3)"

    # MIG units: the instances and the GPUs not in MIG mode.
    flink_runs 2 "--mig --select mig=yes,name~1g"
    check "select: MIG instances by kind and profile" 0 "$mig_1g_a,$mig_1g_b" ""
    flink_runs 1 "--mig --select mig=yes,memory.total>=20000"
    check "select: a MIG instance by its own memory" 0 "$mig_3g" ""
    flink_runs 3 "--mig --select mig=no"
    check "select: mig=no keeps whole GPUs, never one in MIG mode" 0 "0,1,2" ""
    flink_runs 3 "--mig --select mig=yes,name~1g"
    check "select: the shortfall of MIG instances" 1 "" "" \
        "only 2 MIG instances match mig=yes,name~1g, 3 requested"
    # Without --mig no MIG instance is a unit: the shortfall says why none matches.
    flink_runs 1 "--select mig=yes"
    check "select: mig=yes without --mig says --mig makes instances units" 1 "" "" \
        "no GPU matches mig=yes, 1 requested (MIG instances are units only with --mig)"
    flink_runs 1 "--select name~1g,mig!=no"
    check "select: mig!=no without --mig says so too" 1 "" "" \
        "no GPU matches name~1g,mig!=no, 1 requested (MIG instances are units only with --mig)"

    # A selector of any length is cut where a message quotes it.
    long_name=$(printf 'x%.0s' {1..5000})
    flink_runs 1 "--select name~$long_name"
    check "select: a long selector is cut in the shortfall" 1 "" "" \
        "no GPU matches name~${long_name:0:195}... (4805 more bytes), 1 requested"
    if (( ${#err} > 1000 )); then
        fail_case "select: a long selector's error is short" "${#err} bytes of stderr"
    else
        pass "select: a long selector's error is short"
    fi

    # Two resources of one TaskManager, gpu-h100 and gpu-l4, over ONE coordination file; then a
    # second TaskManager: each gets GPUs of its resource's kind, none twice.
    start_owner
    tm1=$owner_pid
    start_owner
    tm2=$owner_pid
    kinds=$coord/two-kinds
    flink_runs 1 "--enable-coordination-mode --coordination-file $kinds --owner-pid $tm1 --select name~H100"
    check "select: gpu-h100 of TaskManager 1" 0 "2" ""
    flink_runs 2 "--enable-coordination-mode --coordination-file $kinds --owner-pid $tm1 --select name~L4"
    check "select: gpu-l4 of TaskManager 1, over the same file" 0 "0,1" ""
    flink_runs 1 "--enable-coordination-mode --coordination-file $kinds --owner-pid $tm2 --select name~H100"
    check "select: gpu-h100 of TaskManager 2 gets the other H100" 0 "3" ""
    flink_runs 1 "--enable-coordination-mode --coordination-file $kinds --owner-pid $tm2 --select name~L4"
    check "select: no L4 left for TaskManager 2" 1 "" "GPU 0 is held by process $tm1" \
        "not enough free GPUs matching name~L4: 1 requested, 0 free, 2 held"
    check_records "select: one file records both kinds, each GPU once" "$kinds" \
        "0 $tm1;1 $tm1;2 $tm1;3 $tm2"

    # Each error form: exit 1, the cause first, quoting the term.
    keys="the keys are name, uuid, pci.bus_id, memory.total, compute_capability, vendor, numa_node, mig"
    for bad in "nme~H100|--select: unknown key 'nme' in 'nme~H100'; $keys" \
        "name|--select: 'name' has no operator" \
        "name==H100|--select: '==' in 'name==H100' is not an operator" \
        "name>H100|--select: '>' in 'name>H100' does not apply to name, a text: use =, != or ~" \
        "memory.total>=80GB|--select: '80GB' in 'memory.total>=80GB' is not a number" \
        "mig=maybe|--select: 'maybe' in 'mig=maybe' is not yes or no" \
        "compute_capability>=sm_90|--select: 'sm_90' in 'compute_capability>=sm_90' is not a compute capability: write MAJOR.MINOR"; do
        flink_runs 1 "--select ${bad%%|*}"
        check "select: error for ${bad%%|*}" 1 "" "" "${bad#*|}"
    done
else
    pass "select: skipped, no stand-in NVML given"
fi

# Without NVML a key nvidia-smi does not tell never matches, and one note says so.
make_smi '0, GPU-c0000000-1111-4222-8333-444400000000, NVIDIA H100 80GB HBM3, 00000000:41:00.0, 81559\n' 0
run_script "$smi_dir:/usr/bin:/bin" 1 --select compute_capability">="9.0
check "select: a key nvidia-smi does not tell never matches" 1 "" \
    "note: --select: GPU 0 does not tell compute_capability, so compute_capability>=9.0 never matches it" \
    "no GPU matches compute_capability>=9.0, 1 requested"
run_script "$smi_dir:/usr/bin:/bin" 1 --select name~H100
check "select: nvidia-smi's names are matched" 0 "0" ""

printf '%d passed, %d failed\n' "$passed" "$failed"
(( failed == 0 ))
