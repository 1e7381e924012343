#!/bin/sh
# AMD GPU discovery script of the GPU external-resource driver: the driver's
# `vendor: amd` (or discovery-script.path) points here. Like nvidia-gpu-discovery.sh
# it only execs the program installed beside it, with the same arguments:
#
#     amd-gpu-discovery.sh <amount> [--enable-coordination-mode]
#                             [--coordination-file PATH] [--owner-pid PID]
#
# The program reads the host's AMD GPUs from sysfs and prints them as the
# vendor's runtime numbers them in this process (docs/amd-and-intel.md).

case $0 in
    */*) program=${0%/*}/amd-gpu-discovery ;;
    *) program=./amd-gpu-discovery ;;
esac
if [ ! -x "$program" ]; then
    # Called through a symbolic link to this script: look beside the real file.
    real=$(readlink -f -- "$0" 2>/dev/null) && program=${real%/*}/amd-gpu-discovery
fi
if [ ! -x "$program" ]; then
    echo "amd-gpu-discovery.sh: the program $program is missing or not executable; reinstall the external-resource-gpu plugin" >&2
    exit 1
fi
exec "$program" "$@"
