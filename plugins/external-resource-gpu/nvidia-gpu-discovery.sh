#!/bin/sh
# Default GPU discovery script of the GPU external-resource driver: Flink's
# discovery-script.path points here. It only execs the nvidia-gpu-discovery
# program installed beside it, with the same arguments, so that every existing
# configuration (Flink's Java driver included) gets the program unchanged:
#
#     nvidia-gpu-discovery.sh <amount> [options]
#     nvidia-gpu-discovery.sh --help       (or -h: the options; only as the first argument)
#
# <amount>: how many GPUs, always the first argument (Flink passes it so). The options:
#
#     --enable-coordination-mode   allocate through the coordination file, for the
#                                  worker that runs this script (also --enable-coordination)
#     --coordination-file PATH     that file (default: $FLINK_GPU_COORDINATION_FILE,
#                                  else /var/tmp/flink-gpu-coordination)
#     --gpus LIST                  the host's GPUs, instead of asking NVML or nvidia-smi
#     --owner-pid PID              the process the GPUs are recorded for (default: the
#                                  worker, this script's parent)
#     --mig                        hand out MIG instances instead of GPUs in MIG mode
#     --placement topology|index   the best-connected free GPUs (default), or the first
#     --health skip|warn|ignore    unhealthy or drained GPUs: skip (default), warn, ignore
#     --share                      one share of each of <amount> GPUs declared shared
#                                  (flink-gpu share); needs coordination mode
#     --share-placement pack|spread  with --share: shared GPUs first (default), or unshared
#
# Other arguments are ignored with a note (`null`, Flink's "no arguments", silently).
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
