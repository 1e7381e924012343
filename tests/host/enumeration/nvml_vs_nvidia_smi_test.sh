#!/usr/bin/env bash
# tools/nvml-vs-nvidia-smi on a stand-in host: the stand-in libnvidia-ml.so.1 (through
# $FLINK_GPU_NVML_LIBRARY) and a stand-in nvidia-smi that prints what the files beside it say.
# Checks that agreement exits 0 (bus ids compared case-insensitively), each kind of disagreement
# exits 1 naming it, and an unusable NVML exits 2. This proves the checker's logic on a CPU-only
# machine; scripts/gpu-machine-check.sh runs it for real.
#
# usage: nvml_vs_nvidia_smi_test.sh <nvml-vs-nvidia-smi> <stand-in libnvidia-ml.so.1>
set -euo pipefail

checker=$1
fake_nvml=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/nvml-vs-smi-test.XXXXXX")
trap 'rm -rf "$work"' EXIT

failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# The NVML side: GPU 0 with two MIG instances, GPU 1 without MIG.
cat >"$work/host.json" <<'EOF'
{"devices": [
  {"uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000000", "name": "NVIDIA H200",
   "pci_bus_id": "00000000:19:00.0", "memory_total_mib": 143771, "minor_number": 0,
   "mig_enabled": true,
   "mig": [{"uuid": "MIG-11111111-0000-0000-0000-000000000000", "name": "NVIDIA H200 MIG 1g.18gb",
            "memory_total_mib": 16384, "gpu_instance_id": 9, "compute_instance_id": 0},
           null,
           {"uuid": "MIG-22222222-0000-0000-0000-000000000000", "name": "NVIDIA H200 MIG 1g.18gb",
            "memory_total_mib": 16384, "gpu_instance_id": 10, "compute_instance_id": 0}]},
  {"uuid": "GPU-bbbbbbbb-0000-0000-0000-000000000000", "name": "NVIDIA H200",
   "pci_bus_id": "00000000:3B:00.0", "memory_total_mib": 143771, "minor_number": 1,
   "mig_enabled": false}]}
EOF
export FLINK_GPU_NVML_LIBRARY=$fake_nvml
export FAKE_NVML_DEVICES=$work/host.json
unset FAKE_NVML_CALL_LOG

# The nvidia-smi side: answers the GPU query from query.txt and -L from list.txt beside it.
smi=$work/nvidia-smi
cat >"$smi" <<EOF
#!/bin/sh
case "\$1" in
  --query-gpu=*) cat '$work/query.txt' ;;
  -L) cat '$work/list.txt' ;;
  *) echo "stand-in nvidia-smi: unexpected arguments: \$*" >&2; exit 2 ;;
esac
EOF
chmod +x "$smi"

agreeing_smi() {
  # nvidia-smi's own bus id letters may differ in case from NVML's: still the same GPU.
  cat >"$work/query.txt" <<'EOF'
0, GPU-aaaaaaaa-0000-0000-0000-000000000000, NVIDIA H200, 00000000:19:00.0, 143771
1, GPU-bbbbbbbb-0000-0000-0000-000000000000, NVIDIA H200, 00000000:3b:00.0, 143771
EOF
  cat >"$work/list.txt" <<'EOF'
GPU 0: NVIDIA H200 (UUID: GPU-aaaaaaaa-0000-0000-0000-000000000000)
  MIG 1g.18gb     Device  0: (UUID: MIG-11111111-0000-0000-0000-000000000000)
  MIG 1g.18gb     Device  1: (UUID: MIG-22222222-0000-0000-0000-000000000000)
GPU 1: NVIDIA H200 (UUID: GPU-bbbbbbbb-0000-0000-0000-000000000000)
EOF
}

# run <expected exit code> <text expected in the output> [checker args...]
run() {
  local expected=$1 text=$2
  shift 2
  local output status=0
  output=$("$checker" --nvidia-smi "$smi" --runs 3 "$@" 2>&1) || status=$?
  if [[ $status -ne $expected ]]; then
    fail "exit $status, expected $expected; output:"$'\n'"$output"
  elif [[ $output != *"$text"* ]]; then
    fail "output lacks '$text':"$'\n'"$output"
  fi
}

agreeing_smi
run 0 "AGREE: GPU count, indices, UUIDs, PCI bus ids and MIG UUIDs"
run 0 "NVML / nvidia-smi = "

agreeing_smi
sed -i 's/GPU-bbbbbbbb/GPU-cccccccc/' "$work/query.txt"
run 1 "GPU 1 UUID: NVML GPU-bbbbbbbb-0000-0000-0000-000000000000, nvidia-smi GPU-cccccccc-0000-0000-0000-000000000000"

agreeing_smi
sed -i 's/00000000:3b:00.0/00000000:5D:00.0/' "$work/query.txt"
run 1 "GPU 1 PCI bus id: NVML 00000000:3B:00.0, nvidia-smi 00000000:5D:00.0"

agreeing_smi
sed -i '/^1, /d' "$work/query.txt"
run 1 "GPU count: NVML 2, nvidia-smi 1"

agreeing_smi
sed -i 's/143771$/143770/' "$work/query.txt"
run 0 "note: GPU 0 memory: NVML 143771 MiB, nvidia-smi 143770 MiB"

agreeing_smi
sed -i '/MIG-22222222/d' "$work/list.txt"
run 1 "MIG UUIDs: NVML [MIG-11111111"

agreeing_smi
FLINK_GPU_NVML_LIBRARY=$work/none/libnvidia-ml.so.1 run 2 "error: NVML is not usable: dlopen("

agreeing_smi
printf 'Failed to initialize NVML: Driver/library version mismatch\n' >"$work/query.txt"
run 2 "Driver/library version mismatch"

agreeing_smi
run 2 "usage:" --runs 0

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all checks passed"
