#!/usr/bin/env bash
# scripts/build-times.sh on a .ninja_log written here: the last build of each output counts, steps
# are summed per target, the largest first, and a folder without a log is named.
# Usage: build_times_test.sh SCRIPT
set -euo pipefail
script=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$work/tree" "$work/empty"
{
  printf '# ninja log v5\n'
  printf '0\t9000\t0\tsrc/CMakeFiles/flink-gpu-core.dir/a.cpp.o\t1\n'     # built again below
  printf '0\t2500\t0\tsrc/CMakeFiles/flink-gpu-core.dir/a.cpp.o\t2\n'
  printf '100\t1600\t0\tsrc/CMakeFiles/flink-gpu-core.dir/b.cpp.o\t3\n'
  printf '0\t6000\t0\ttests/CMakeFiles/flink-gpu-tests.dir/t.cpp.o\t4\n'
  printf '6000\t7300\t0\tbin/flink-gpu-tests\t5\n'
} >"$work/tree/.ninja_log"

output=$(bash "$script" "$work/tree" "$work/empty" 2>&1)
expected="$work/tree/.ninja_log: 11 s over 4 steps
      6.0 s     1  flink-gpu-tests
      4.0 s     2  flink-gpu-core
      1.3 s     1  (links and other steps)
$work/empty: no .ninja_log (not a Ninja build, or never built)"
[[ $output == "$expected" ]] || fail "output:
$output
expected:
$expected"
echo "build-times.sh: per-target sums as expected"
