# Shared part of GPU discovery scripts: source it from a custom discovery
# script and end that script with gpu_discovery, so that custom scripts get the
# same allocation (and coordination between the workers of a host) as the
# default nvidia-gpu-discovery.sh. For example:
#
#     #!/usr/bin/env bash
#     . "$(dirname "$0")"/gpu-discovery-common.sh
#     indexes=$(my-gpu-tool --list-indexes)      # e.g. "0 1 2 3" or "0,1,2,3"
#     gpu_discovery "$indexes" "$1" coordination /var/tmp/flink-gpu-coordination
#
#     gpu_discovery "<indexes>" <amount> [coordination] [coordination-file]
#
# <indexes>: the host's GPUs, separated by spaces, commas or newlines.
# <amount>: how many to hand out (the first argument the driver gives the script).
# The third argument `coordination` (or `true`, or --enable-coordination-mode)
# allocates them through the coordination file (default
# /var/tmp/flink-gpu-coordination) for the worker that started the custom
# script; anything else gives the first <amount> GPUs.
#
# gpu_discovery runs the program with --gpus, --owner-pid $PPID and, as asked,
# --enable-coordination-mode and --coordination-file; the coordination file is
# otherwise $FLINK_GPU_COORDINATION_FILE, else /var/tmp/flink-gpu-coordination.
# The program's other options (--mig, --placement topology|index, --health
# skip|warn|ignore, --share, --share-placement pack|spread) are listed by
# `nvidia-gpu-discovery.sh --help`; a script that needs them runs the program
# itself, as gpu_discovery does.
#
# It prints the allocated GPUs on one line, or the cause of a failure on
# stderr, and returns the program's exit status (0 or 1): as the last command of
# the script, that is the script's answer. The work is done by the
# nvidia-gpu-discovery program, found beside this file.
#
# Works in bash and in POSIX shells; defines only gpu_discovery and
# variables starting with _gpu_discovery.
#
# flink-gpu's own copy: `cmake --install` tells it from a Flink distribution's by this line.

# Where this file is: bash knows it even when sourced from elsewhere; other
# shells only know the sourcing script ($0), expected to sit beside it.
if [ -n "${BASH_SOURCE:-}" ]; then
    _gpu_discovery_self=$BASH_SOURCE
else
    _gpu_discovery_self=$0
fi
case $_gpu_discovery_self in
    */*) _gpu_discovery_dir=${_gpu_discovery_self%/*} ;;
    *) _gpu_discovery_dir=. ;;
esac
# Made absolute now, so that a script that changes directory later still finds it.
case $_gpu_discovery_dir in
    /*) ;;
    *) _gpu_discovery_dir=$(cd -- "$_gpu_discovery_dir" 2> /dev/null && pwd) ;;
esac
_gpu_discovery_program=$_gpu_discovery_dir/nvidia-gpu-discovery
unset _gpu_discovery_self _gpu_discovery_dir

gpu_discovery() {
    if [ ! -x "$_gpu_discovery_program" ]; then
        echo "gpu_discovery: the program $_gpu_discovery_program is missing or not executable; reinstall the external-resource-gpu plugin" >&2
        return 1
    fi
    # The custom script's parent is the worker that owns the GPUs; the program's
    # own parent would be this shell, which ends right after.
    _gpu_discovery_mode=
    case ${3-} in
        coordination | true | --enable-coordination-mode | --enable-coordination)
            _gpu_discovery_mode=--enable-coordination-mode ;;
    esac
    if [ -n "${4-}" ]; then
        "$_gpu_discovery_program" "${2-}" --gpus "${1-}" --owner-pid "$PPID" \
            $_gpu_discovery_mode --coordination-file "$4"
    else
        "$_gpu_discovery_program" "${2-}" --gpus "${1-}" --owner-pid "$PPID" \
            $_gpu_discovery_mode
    fi
}
