#!/bin/sh
# Intel GPU discovery script of the GPU external-resource driver: the driver's
# `vendor: intel` (or discovery-script.path) points here. Like nvidia-gpu-discovery.sh
# it only execs the program installed beside it, with the same arguments:
#
#     intel-gpu-discovery.sh <amount> [options]
#     intel-gpu-discovery.sh --help       (or -h: the options; only as the first argument)
#
# <amount>: how many GPUs, always the first argument (Flink passes it so). The options:
#
#     --enable-coordination-mode   allocate through the coordination file, for the
#                                  worker that runs this script (also --enable-coordination)
#     --coordination-file PATH     that file (default: $FLINK_GPU_COORDINATION_FILE,
#                                  else /var/tmp/flink-gpu-coordination)
#     --owner-pid PID              the process the GPUs are recorded for (default: the
#                                  worker, this script's parent)
#     --placement topology|index   read; the first free GPUs are taken
#     --health skip|warn|ignore    ignored, with a note (no health records for them yet)
#
# --gpus, --mig, --share and --share-placement are NVIDIA's: the first three are errors here.
# Other arguments are ignored with a note (`null`, Flink's "no arguments", silently).
# The program reads the host's Intel GPUs from sysfs and prints them as the
# vendor's runtime numbers them in this process (docs/amd-and-intel.md).

case $0 in
    */*) program=${0%/*}/intel-gpu-discovery ;;
    *) program=./intel-gpu-discovery ;;
esac
if [ ! -x "$program" ]; then
    # Called through a symbolic link to this script: look beside the real file.
    real=$(readlink -f -- "$0" 2>/dev/null) && program=${real%/*}/intel-gpu-discovery
fi
if [ ! -x "$program" ]; then
    echo "intel-gpu-discovery.sh: the program $program is missing or not executable; reinstall the external-resource-gpu plugin" >&2
    exit 1
fi
exec "$program" "$@"
