#!/bin/sh
# Default GPU discovery script of the GPU external-resource driver: Flink's
# discovery-script.path points here. It only execs the nvidia-gpu-discovery
# program installed beside it, with the same arguments, so that every existing
# configuration (Flink's Java driver included) gets the program unchanged:
#
#     nvidia-gpu-discovery.sh <amount> [--enable-coordination-mode]
#                             [--coordination-file PATH] [--gpus LIST] [--owner-pid PID]
#
# exec keeps the worker as the program's parent, which coordination mode records
# as the owner of the GPUs. Kept to POSIX sh builtins: its start-up is part of
# every discovery.
#
# flink-gpu's own copy: `cmake --install` tells it from a Flink distribution's by this line.

case $0 in
    */*) program=${0%/*}/nvidia-gpu-discovery ;;
    *) program=./nvidia-gpu-discovery ;;
esac
if [ ! -x "$program" ]; then
    # Called through a symbolic link to this script: look beside the real file.
    real=$(readlink -f -- "$0" 2>/dev/null) && program=${real%/*}/nvidia-gpu-discovery
fi
if [ ! -x "$program" ]; then
    echo "nvidia-gpu-discovery.sh: the program $program is missing or not executable; reinstall the external-resource-gpu plugin" >&2
    exit 1
fi
exec "$program" "$@"
