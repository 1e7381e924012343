#!/bin/sh
# A discovery script for hosts without NVIDIA GPUs, to try the driver and flink-gpu with:
#   fixed-gpus.sh <amount> [<comma-separated GPU indices, default 0>]
# prints the first <amount> of the given indices on one line, as the protocol asks.
amount=$1
gpus=${2:-0}
case $gpus in null) gpus=0 ;; esac
echo "$gpus" | tr ',' '\n' | head -n "$amount" | paste -sd, -
