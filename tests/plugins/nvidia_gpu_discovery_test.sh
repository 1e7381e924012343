#!/usr/bin/env bash
#
# Tests for plugins/external-resource-gpu/nvidia-gpu-discovery.sh.
#
#     bash tests/plugins/nvidia_gpu_discovery_test.sh [path-to-script]
#
# Each case puts a stand-in `nvidia-smi` (a generated shell script that prints
# given text and exits with a given code) first on PATH, runs the discovery
# script and checks its exact stdout, its exit code and text on its stderr.
# Prints "ok - NAME" or "not ok - NAME: DETAILS" per case, then
# "N passed, M failed"; exits non-zero if any case failed.

set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
script=${1:-$here/../../plugins/external-resource-gpu/nvidia-gpu-discovery.sh}
if [[ ! -f $script ]]; then
    echo "discovery script not found: $script" >&2
    exit 2
fi
script=$(cd "$(dirname "$script")" && pwd)/$(basename "$script")

work=$(mktemp -d "${TMPDIR:-/tmp}/nvidia_gpu_discovery_test.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT

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

# run_script PATH [ARGS...]: runs the script with the given PATH; sets out, err,
# rc and elapsed_ms. stdout is kept exactly, trailing newline included.
run_script() {
    local path=$1
    shift
    local start end
    start=$(date +%s%N)
    PATH=$path "$BASH" "$script" "$@" > "$work/stdout" 2> "$work/stderr" < /dev/null
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

if [[ -x $script ]] && [[ $(head -n 1 "$script") == '#!/usr/bin/env bash' ]]; then
    pass "script is executable with a bash shebang"
else
    fail_case "script is executable with a bash shebang" "mode or first line wrong"
fi

if "$BASH" -n "$script" 2> "$work/syntax"; then
    pass "script parses"
else
    fail_case "script parses" "$(cat "$work/syntax")"
fi

# --- plain mode --------------------------------------------------------------

with_smi '0\n1\n2\n3\n' 0 2
check "four GPUs, amount 2" 0 "0,1" ""

if [[ $(cat "$smi_dir/args.txt" 2>/dev/null) == "--query-gpu=index --format=csv,noheader" ]]; then
    pass "nvidia-smi is asked for indices only"
else
    fail_case "nvidia-smi is asked for indices only" \
        "arguments were '$(cat "$smi_dir/args.txt" 2>/dev/null)'"
fi

make_smi '0\n1\n2\n3\n' 0
PATH="$smi_dir:/usr/bin:/bin" "$script" 2 > "$work/stdout" 2> "$work/stderr" < /dev/null
rc=$?
out=$(cat "$work/stdout"; printf x)
out=${out%x}
err=$(cat "$work/stderr")
check "script runs directly through its shebang" 0 "0,1" ""

with_smi '0\n1\n2\n3\n' 0 2 null
check "args '2 null'" 0 "0,1" ""
if [[ -z $err ]]; then
    pass "'null' is ignored silently"
else
    fail_case "'null' is ignored silently" "stderr was $(printf '%q' "$err")"
fi

with_smi '0\n1\n2\n3\n' 0 2 --device-type nvidia
check "unknown argument tolerated" 0 "0,1" "--device-type"

with_smi '0\n1\n2\n3\n' 0 2 --coordination-file /tmp/gpu-coordination
check "--coordination-file without coordination mode" 0 "0,1" ""

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

# A PATH holding only the tools the script may use, none of them nvidia-smi,
# so the case holds even on a host with a real driver installed.
tools=$work/tools
mkdir -p "$tools"
for tool in env timeout; do
    tool_path=$(command -v "$tool") && ln -s "$tool_path" "$tools/$tool"
done
run_script "$tools" 1
check "nvidia-smi missing" 1 "" "" "nvidia-smi was not found"

# --- invalid amount -----------------------------------------------------------

for amount in 0 -1 two 1.5 ''; do
    with_smi '0\n1\n' 0 "$amount"
    check "invalid amount '$amount'" 1 "" "" "invalid amount '$amount': expected a positive integer"
done
make_smi '0\n1\n' 0
run_script "$smi_dir:/usr/bin:/bin"
check "missing amount" 1 "" "" "invalid amount '': expected a positive integer"

# --- coordination mode --------------------------------------------------------

for flag in --enable-coordination-mode --enable-coordination; do
    with_smi '0\n1\n' 0 1 "$flag" --coordination-file /tmp/gpu-coordination
    check "$flag is refused" 1 "" "" "coordination mode is not supported"
done

# --- nvidia-smi hangs ---------------------------------------------------------

if command -v timeout > /dev/null 2>&1; then
    make_smi '' 0 'exec sleep 30'
    NVIDIA_SMI_TIMEOUT=1 run_script "$smi_dir:/usr/bin:/bin" 1
    check "hanging nvidia-smi" 1 "" "" "did not answer within 1 s"
    if (( elapsed_ms < 5000 )); then
        pass "hanging nvidia-smi is stopped quickly"
    else
        fail_case "hanging nvidia-smi is stopped quickly" "took ${elapsed_ms} ms"
    fi

    make_smi '' 0 'sleep 30'
    NVIDIA_SMI_TIMEOUT=1 run_script "$smi_dir:/usr/bin:/bin" 1
    check "hanging nvidia-smi with a child process" 1 "" "" "did not answer"
    if (( elapsed_ms < 5000 )); then
        pass "hanging nvidia-smi's child is stopped too"
    else
        fail_case "hanging nvidia-smi's child is stopped too" "took ${elapsed_ms} ms"
    fi
else
    echo "# skipping the hang cases: timeout(1) is not installed"
fi

printf '%d passed, %d failed\n' "$passed" "$failed"
(( failed == 0 ))
