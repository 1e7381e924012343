#!/usr/bin/env bash
# For a host with NVIDIA GPUs and a driver: builds the project, runs every test, then checks that
# the two sources of the default discovery agree on the real hardware, and how long each takes.
#
#   scripts/gpu-machine-check.sh [BUILD_DIR]      (default: build-gpu-check)
#
# Steps, each under a "== " heading:
#   1. the host: nvidia-smi's summary, the driver version, the libnvidia-ml the loader finds
#   2. configure and build (Release with debug info, warnings as errors, no benchmarks); the
#      Debian packages must be there already (scripts/install-deps.sh installs them), since a GPU
#      host often has no network
#   3. ctest, every test (a failure is reported and the script goes on to step 4)
#   4. tools/nvml-vs-nvidia-smi: NvmlEnumerator against NvidiaSmiEnumerator — GPU count,
#      indices, UUIDs, PCI bus ids, MIG UUIDs — and the median time of NVML enumeration against
#      one nvidia-smi run, with their ratio
#   5. the discovery program as Flink runs it (nvidia-gpu-discovery.sh 1), and which shared
#      libraries the program needs (glibc only: libstdc++ and libgcc are linked in)
#   6. what only a real host can answer: every GPU as root and as `nobody` (NVML gives some
#      answers to privileged callers only; no GPU may be left out, no warning printed), a
#      MIG-enabled GPU if there is one (as nobody: its instances listed, the parent's memory
#      unknown without a warning), and an inherited CUDA_VISIBLE_DEVICES (the mask's own
#      entries printed, its UUID prefix resolved, NoDevFiles refused, exec passing it on with
#      CUDA_DEVICE_ORDER=PCI_BUS_ID)
#   7. the topology: `flink-gpu topology` (from NVML) next to `nvidia-smi topo -m`, for a person
#      to compare cell by cell, its JSON form, and what the placement rule hands out for 1, 2
#      and half the GPUs against --placement index (nothing is held: plain mode)
#   8. sharing under MPS, where nvidia-cuda-mps-control and a C compiler are there: GPU 0
#      declared in 2 shares behind a control daemon of a fresh pipe directory, two
#      `exec --share` clients holding memory at once (nvidia-smi's process list and the daemon's
#      get_server_list shown beside `flink-gpu status`), then a client asking more than its share
#      (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT) must fail to allocate; skipped where MPS is not there
#
# Exit status: 0 when the build, every test and the comparison pass; 1 when a test failed, the
# two sources disagree or a real-host check failed; 2 when the build or a source failed. Set NVML_CHECK_RUNS to change the
# number of timed runs (default 10).
set -uo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${1:-$repo_root/build-gpu-check}
runs=${NVML_CHECK_RUNS:-10}
jobs=$(nproc 2>/dev/null || echo 2)

step() { printf '\n== %s\n' "$*"; }
die() {
  echo "gpu-machine-check: $*" >&2
  exit 2
}

# The checks are about the real library and the real nvidia-smi: nothing may point elsewhere.
unset FLINK_GPU_NVML_LIBRARY FAKE_NVML_DEVICES FAKE_NVML_CALL_LOG NVIDIA_SMI_TIMEOUT
# Nor may a mask of the shell that runs this limit what the checks see (step 6 sets its own).
unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER

step "host"
uname -a
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi || echo "(nvidia-smi exited with $?)"
  nvidia-smi --query-gpu=index,uuid,name,pci.bus_id,driver_version,mig.mode.current \
    --format=csv || true
  nvidia-smi -L || true
else
  echo "nvidia-smi is not on PATH ($PATH); the discovery also looks in its usual folders"
fi
ldconfig -p 2>/dev/null | grep -F 'libnvidia-ml.so' || echo "ldconfig lists no libnvidia-ml.so"

step "build ($build_dir)"
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
if [[ -f $build_dir/CMakeCache.txt ]]; then
  generator=()  # keep the generator the folder was made with
fi
cmake -S "$repo_root" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFLINK_GPU_WERROR=ON -DFLINK_GPU_BENCH=OFF || die "cmake failed to configure"
cmake --build "$build_dir" -j "$jobs" || die "the build failed"

step "tests (ctest)"
tests_status=0
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" || tests_status=$?
[[ $tests_status -eq 0 ]] || echo "gpu-machine-check: some tests failed (ctest exited with $tests_status)"

step "NVML vs nvidia-smi"
checker=$build_dir/bin/nvml-vs-nvidia-smi
[[ -x $checker ]] || die "$checker was not built"
compare_status=0
"$checker" --runs "$runs" || compare_status=$?
case $compare_status in
  0) ;;
  1) echo "gpu-machine-check: NVML and nvidia-smi disagree (see above)" ;;
  *) echo "gpu-machine-check: the comparison could not be made (exit $compare_status)" ;;
esac

step "the discovery program"
program_dir=$build_dir/plugins/external-resource-gpu
if command -v ldd >/dev/null 2>&1; then
  ldd "$program_dir/nvidia-gpu-discovery" || true
fi
discovery_status=0
"$program_dir/nvidia-gpu-discovery.sh" 1 || discovery_status=$?
echo "(nvidia-gpu-discovery.sh 1 exited with $discovery_status)"

step "real host: users, MIG, an inherited CUDA_VISIBLE_DEVICES"
real_status=0
real_fail() {
  echo "gpu-machine-check: FAILED: $*"
  real_status=1
}
flink_gpu=$build_dir/bin/flink-gpu
gpu_count=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | grep -c '^[0-9]')
mig_gpus=$(nvidia-smi --query-gpu=index,mig.mode.current --format=csv,noheader 2>/dev/null |
  grep -ci 'enabled')
echo "GPUs: $gpu_count, in MIG mode: $mig_gpus"
# The program links only glibc: a copy in a folder anyone can read runs as nobody too (the build
# folder may be under a home that nobody cannot enter).
shared=$(mktemp -d) && chmod 755 "$shared"
cp "$program_dir/nvidia-gpu-discovery" "$program_dir/nvidia-gpu-discovery.sh" "$shared/"
chmod 755 "$shared"/*
as_nobody=()
if [[ $(id -u) -eq 0 ]]; then
  if command -v setpriv >/dev/null 2>&1; then
    as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
    getent group nogroup >/dev/null || as_nobody=(setpriv --reuid=nobody --regid=nobody --clear-groups --)
  elif command -v runuser >/dev/null 2>&1; then
    as_nobody=(runuser -u nobody --)
  fi
fi
# One discovery of every GPU (or MIG unit, with --mig): its answer, its stderr, its exit code.
discover_all() {
  local who=$1
  shift
  local out err rc
  err=$(mktemp)
  out=$("$@" 2>"$err")
  rc=$?
  echo "[$who] $* -> exit $rc: $out"
  sed "s/^/[$who] stderr: /" "$err"
  if [[ $rc -ne 0 ]]; then
    real_fail "$who: the discovery failed"
  elif grep -q 'left out' "$err"; then
    real_fail "$who: a GPU was left out (lost, or denied to this user)"
  elif grep -qi 'warning' "$err"; then
    real_fail "$who: the discovery warned (a MIG GPU's memory for non-root must be quietly unknown)"
  fi
  rm -f "$err"
}
if [[ $gpu_count -gt 0 ]]; then
  discover_all "$(id -un)" "$shared/nvidia-gpu-discovery.sh" "$gpu_count"
  if [[ ${#as_nobody[@]} -gt 0 ]]; then
    discover_all nobody "${as_nobody[@]}" "$shared/nvidia-gpu-discovery.sh" "$gpu_count"
  else
    echo "(not root, or neither setpriv nor runuser: the check as nobody is skipped)"
  fi
  if [[ $mig_gpus -gt 0 ]]; then
    instances=$(nvidia-smi -L | grep -c 'MIG ')
    # Every unit: each MIG instance, and each GPU not in MIG mode.
    units=$((instances + gpu_count - mig_gpus))
    echo "MIG instances listed by nvidia-smi -L: $instances; units with --mig: $units"
    discover_all "$(id -un) --mig" "$shared/nvidia-gpu-discovery.sh" "$units" --mig
    [[ ${#as_nobody[@]} -gt 0 ]] &&
      discover_all "nobody --mig" "${as_nobody[@]}" "$shared/nvidia-gpu-discovery.sh" "$units" --mig
    "$flink_gpu" discover --mig -n 1 --format json || real_fail "flink-gpu discover --mig failed"
  else
    echo "(no GPU in MIG mode: the MIG checks are skipped)"
  fi

  # The scheduler's mask: the last GPU by index, GPU 0 by a UUID prefix.
  uuid0=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | tr -d ' ')
  prefix0=${uuid0:0:12}
  last=$((gpu_count - 1))
  if [[ $gpu_count -ge 2 ]]; then mask="$last,$prefix0"; want="$last,$prefix0"; n=2; else
    mask="$prefix0"; want="$prefix0"; n=1; fi
  got=$(CUDA_VISIBLE_DEVICES=$mask "$shared/nvidia-gpu-discovery.sh" "$n")
  echo "CUDA_VISIBLE_DEVICES=$mask: the discovery printed '$got'"
  [[ $got == "$want" ]] || real_fail "under CUDA_VISIBLE_DEVICES=$mask expected '$want', got '$got'"
  json=$(CUDA_VISIBLE_DEVICES=$mask "$flink_gpu" discover -n "$n" --format json)
  echo "$json"
  [[ $json == *"\"uuid\":\"$uuid0\""* ]] || real_fail "the JSON does not name $uuid0 for $prefix0"
  if CUDA_VISIBLE_DEVICES=NoDevFiles "$shared/nvidia-gpu-discovery.sh" 1 2>"$shared/err"; then
    real_fail "CUDA_VISIBLE_DEVICES=NoDevFiles was not refused"
  else
    grep -q 'CUDA_VISIBLE_DEVICES=NoDevFiles' "$shared/err" ||
      real_fail "the refusal does not name CUDA_VISIBLE_DEVICES: $(cat "$shared/err")"
  fi
  visible=$(CUDA_VISIBLE_DEVICES=$mask "$flink_gpu" exec -n "$n" \
    --coordination-file "$shared/coordination" -- sh -c 'echo "$CUDA_VISIBLE_DEVICES $CUDA_DEVICE_ORDER"')
  echo "exec under CUDA_VISIBLE_DEVICES=$mask: $visible"
  [[ $visible == "$want PCI_BUS_ID" ]] || real_fail "exec gave '$visible', expected '$want PCI_BUS_ID'"
fi
rm -rf "$shared"

step "topology: flink-gpu topology (NVML) next to nvidia-smi topo -m"
topology_status=0
"$build_dir/bin/flink-gpu" topology || topology_status=$?
echo "(flink-gpu topology exited with $topology_status)"
echo "-- nvidia-smi topo -m:"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi topo -m || echo "(nvidia-smi topo -m exited with $?)"
else
  echo "(nvidia-smi is not on PATH)"
fi
echo "-- flink-gpu topology --format json:"
"$build_dir/bin/flink-gpu" topology --format json || true
gpu_count=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
for amount in 1 2 $((gpu_count / 2)); do
  [[ $amount -ge 1 && $amount -le $gpu_count ]] || continue
  echo "-- $amount GPU(s): topology: $("$program_dir/nvidia-gpu-discovery" "$amount" 2>&1 | head -1)" \
    "index: $("$program_dir/nvidia-gpu-discovery" "$amount" --placement index 2>&1 | head -1)"
done

step "sharing under MPS"
mps_status=0
mps_dir=$(mktemp -d /tmp/flink-gpu-mps-check.XXXXXX)
if ! command -v nvidia-cuda-mps-control >/dev/null 2>&1 || ! command -v cc >/dev/null 2>&1; then
  echo "skipped: nvidia-cuda-mps-control or cc is not on PATH"
  mps_status=skipped
else
  # A CUDA client of the driver API, without the CUDA toolkit: allocates MIB MiB on its one
  # visible device, says so, holds it SECONDS, exits 0; exits 3 when the allocation fails.
  cat >"$mps_dir/client.c" <<'CLIENT'
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
typedef int (*init_t)(unsigned);
typedef int (*device_get_t)(int*, int);
typedef int (*ctx_create_t)(void**, unsigned, int);
typedef int (*mem_alloc_t)(unsigned long long*, size_t);
int main(int argc, char** argv) {
  if (argc != 3) return 2;
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (!cuda) { fprintf(stderr, "client: %s\n", dlerror()); return 2; }
  init_t init = (init_t)dlsym(cuda, "cuInit");
  device_get_t device_get = (device_get_t)dlsym(cuda, "cuDeviceGet");
  ctx_create_t ctx_create = (ctx_create_t)dlsym(cuda, "cuCtxCreate_v2");
  mem_alloc_t mem_alloc = (mem_alloc_t)dlsym(cuda, "cuMemAlloc_v2");
  int device = 0, rc;
  void* context = NULL;
  unsigned long long pointer = 0;
  if ((rc = init(0)) || (rc = device_get(&device, 0)) || (rc = ctx_create(&context, 0, device))) {
    fprintf(stderr, "client: CUDA set-up failed: %d\n", rc);
    return 2;
  }
  rc = mem_alloc(&pointer, (size_t)atoll(argv[1]) << 20);
  if (rc) { printf("client %d: allocating %s MiB failed: CUDA error %d\n", getpid(), argv[1], rc); return 3; }
  printf("client %d: allocated %s MiB\n", getpid(), argv[1]);
  fflush(stdout);
  sleep((unsigned)atoi(argv[2]));
  return 0;
}
CLIENT
  if ! cc -O1 -o "$mps_dir/client" "$mps_dir/client.c" -ldl; then
    echo "cannot build the CUDA client"; mps_status=1
  else
    cli=$build_dir/bin/flink-gpu
    coord=$mps_dir/coordination
    pipe=$mps_dir/pipe
    mkdir -p "$pipe" "$mps_dir/log"
    uuid0=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | tr -d ' ')
    "$cli" share --gpu 0 --replicas 2 --mps "$pipe" --coordination-file "$coord" || mps_status=1
    share_mib=$(sed -n 's/.*\tmemory=\([0-9]*\).*/\1/p' "$coord.sharing" | head -1)
    echo "each share: ${share_mib:-?} MiB"
    CUDA_MPS_PIPE_DIRECTORY=$pipe CUDA_MPS_LOG_DIRECTORY=$mps_dir/log CUDA_VISIBLE_DEVICES=$uuid0 \
      nvidia-cuda-mps-control -d || mps_status=1
    small=$(( ${share_mib:-2048} / 2 ))
    for n in 1 2; do
      timeout 60 "$cli" exec --share --coordination-file "$coord" -- \
        "$mps_dir/client" "$small" 15 >"$mps_dir/client$n.out" 2>&1 &
    done
    for _ in $(seq 1 40); do
      [[ $(cat "$mps_dir"/client?.out 2>/dev/null | grep -c allocated) -ge 2 ]] && break
      sleep 0.5
    done
    cat "$mps_dir"/client?.out
    [[ $(cat "$mps_dir"/client?.out | grep -c allocated) -eq 2 ]] ||
      { echo "FAILED: two MPS clients did not both allocate"; mps_status=1; }
    echo "-- nvidia-smi:"; nvidia-smi || true
    echo "-- get_server_list:"; echo get_server_list | CUDA_MPS_PIPE_DIRECTORY=$pipe nvidia-cuda-mps-control || true
    echo "-- flink-gpu status:"; "$cli" status --coordination-file "$coord" || true
    third=$("$cli" exec --share --coordination-file "$coord" -- true 2>&1)
    echo "a third exec --share while two hold: $third"
    [[ $third == *"not enough free GPU shares"* ]] || { echo "FAILED: a third share was given"; mps_status=1; }
    wait
    over=$(( ${share_mib:-2048} + 1024 ))
    over_out=$(timeout 60 "$cli" exec --share --coordination-file "$coord" -- "$mps_dir/client" "$over" 0 2>&1)
    over_rc=$?
    echo "a client asking $over MiB of a ${share_mib:-?} MiB share: exit $over_rc: $over_out"
    [[ $over_rc -eq 3 ]] || { echo "FAILED: the allocation beyond the share did not fail"; mps_status=1; }
    echo quit | CUDA_MPS_PIPE_DIRECTORY=$pipe nvidia-cuda-mps-control || true
  fi
fi
rm -rf "$mps_dir"

step "summary"
echo "tests:      $([[ $tests_status -eq 0 ]] && echo passed || echo "FAILED ($tests_status)")"
echo "comparison: $([[ $compare_status -eq 0 ]] && echo agree || echo "FAILED ($compare_status)")"
echo "discovery:  $([[ $discovery_status -eq 0 ]] && echo ok || echo "FAILED ($discovery_status)")"
echo "real host:  $([[ $real_status -eq 0 ]] && echo ok || echo FAILED)"
echo "topology:   $([[ $topology_status -eq 0 ]] && echo ok || echo "FAILED ($topology_status)")"
case $mps_status in
  0) echo "MPS shares: ok" ;;
  skipped) echo "MPS shares: skipped" ;;
  *) echo "MPS shares: FAILED" ;;
esac
if [[ $compare_status -ge 2 ]]; then
  exit 2
fi
if [[ $tests_status -ne 0 || $compare_status -ne 0 || $discovery_status -ne 0 ||
  $real_status -ne 0 || $topology_status -ne 0 || $mps_status == 1 ]]; then
  exit 1
fi
exit 0
