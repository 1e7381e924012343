#!/usr/bin/env bash
#
# Default GPU discovery script of the GPU external-resource driver.
#
# The driver runs it as
#
#     nvidia-gpu-discovery.sh <amount> [--enable-coordination-mode] [--coordination-file PATH]
#
# and expects, within its time-out, either
#   - exit status 0 and ONE line on stdout: the indices of <amount> GPUs,
#     comma-separated, exactly as nvidia-smi reports them (e.g. "0,1"), or
#   - exit status 1 and a message on stderr whose first line names the cause.
#
# GPUs are listed with `nvidia-smi --query-gpu=index --format=csv,noheader`.
# Only lines that are a plain non-negative integer count as GPU indices; any
# other line nvidia-smi prints (errors, warnings) is passed on to stderr.
#
# Coordination mode (sharing GPUs between processes on one host through a
# coordination file) is not supported yet by this version of the script.
# The word "null", which the driver passes when no arguments are configured,
# is ignored.
#
# Environment:
#   NVIDIA_SMI_TIMEOUT  seconds to wait for nvidia-smi (default 8, so that it
#                       ends before the driver's own 10 s time-out).

set -u

readonly DEFAULT_SMI_TIMEOUT=8

# Lines printed on stderr after the main message (details, then notes), so
# that the first stderr line always names the cause of a failure.
details=()
notes=()

print_trailer() {
    local line
    for line in ${details[@]+"${details[@]}"} ${notes[@]+"${notes[@]}"}; do
        printf '%s\n' "$line" >&2
    done
}

fail() {
    printf '%s\n' "$1" >&2
    print_trailer
    exit 1
}

trim() {
    local s=$1
    s=${s#"${s%%[![:space:]]*}"}
    s=${s%"${s##*[![:space:]]}"}
    printf '%s' "$s"
}

# --- command line ---------------------------------------------------------

amount=${1-}
if [[ ! $amount =~ ^[0-9]+$ ]] || [[ $amount =~ ^0+$ ]]; then
    fail "invalid amount '$amount': expected a positive integer"
fi
while [[ $amount == 0* ]]; do
    amount=${amount#0}
done
(( $# > 0 )) && shift

coordination_flag=
while (( $# > 0 )); do
    case $1 in
        --enable-coordination-mode | --enable-coordination)
            coordination_flag=$1
            ;;
        --coordination-file)
            if (( $# < 2 )); then
                notes+=("note: --coordination-file given without a path; ignored")
            else
                shift
            fi
            ;;
        --coordination-file=*)
            ;;
        null | '')
            ;;
        *)
            notes+=("note: ignoring unknown argument '$1'")
            ;;
    esac
    shift
done

if [[ -n $coordination_flag ]]; then
    fail "coordination mode is not supported yet by this version of the script ($coordination_flag was given); run without it"
fi

smi_timeout=${NVIDIA_SMI_TIMEOUT:-$DEFAULT_SMI_TIMEOUT}
if [[ ! $smi_timeout =~ ^[1-9][0-9]{0,4}$ ]]; then
    notes+=("note: ignoring NVIDIA_SMI_TIMEOUT='$smi_timeout' (not a positive integer); using ${DEFAULT_SMI_TIMEOUT} s")
    smi_timeout=$DEFAULT_SMI_TIMEOUT
fi

# --- run nvidia-smi -------------------------------------------------------

if ! smi=$(command -v nvidia-smi); then
    details+=("searched PATH=${PATH-}")
    details+=("the NVIDIA driver is not installed, or nvidia-smi is not on the PATH of the process running this script")
    fail "nvidia-smi was not found: no NVIDIA driver on this host"
fi

smi_command=("$smi" --query-gpu=index --format=csv,noheader)
if command -v timeout >/dev/null 2>&1; then
    smi_command=(timeout --kill-after=1 "$smi_timeout" "${smi_command[@]}")
fi

smi_output=$("${smi_command[@]}" 2>&1 </dev/null)
smi_status=$?

# timeout(1) exits 124 when the time ran out, 137 when it also had to SIGKILL.
timed_out=false
if [[ ${smi_command[0]} == timeout ]] && (( smi_status == 124 || smi_status == 137 )); then
    timed_out=true
fi

# --- read its output ------------------------------------------------------

indices=()
first_line=
no_devices=false
while IFS= read -r raw_line; do
    line=$(trim "$raw_line")
    [[ -z $line ]] && continue
    if [[ $line =~ ^[0-9]+$ ]]; then
        indices+=("$line")
        continue
    fi
    [[ -z $first_line ]] && first_line=$line
    [[ $line == *"No devices were found"* ]] && no_devices=true
    details+=("nvidia-smi: $line")
done <<< "$smi_output"

if (( ${#indices[@]} == 0 )); then
    if [[ $no_devices == true ]]; then
        fail "no NVIDIA GPU found: nvidia-smi printed \"No devices were found\""
    elif [[ $timed_out == true ]]; then
        fail "nvidia-smi did not answer within ${smi_timeout} s and was stopped"
    elif (( smi_status != 0 )); then
        fail "nvidia-smi failed (exit code ${smi_status}): ${first_line:-(no output)}"
    elif [[ -n $first_line ]]; then
        fail "no NVIDIA GPU found: nvidia-smi printed no GPU index: ${first_line}"
    else
        fail "no NVIDIA GPU found: nvidia-smi listed no GPU"
    fi
fi

if [[ $timed_out == true ]]; then
    details=("warning: nvidia-smi did not answer within ${smi_timeout} s; using the ${#indices[@]} GPU index(es) it printed before" ${details[@]+"${details[@]}"})
elif (( smi_status != 0 )); then
    details=("warning: nvidia-smi exited with code ${smi_status} but listed ${#indices[@]} GPU(s); using them" ${details[@]+"${details[@]}"})
fi

found=$(IFS=,; printf '%s' "${indices[*]}")

# An amount too long for shell arithmetic is certainly more than we found.
if (( ${#amount} > 9 || ${#indices[@]} < amount )); then
    fail "only ${#indices[@]} GPU(s) found, ${amount} requested (found: ${found})"
fi

selected=$(IFS=,; printf '%s' "${indices[*]:0:amount}")
printf '%s\n' "$selected"
print_trailer
exit 0
