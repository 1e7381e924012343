#!/usr/bin/env bash
# Grows the checked-in corpus of each fuzzer: runs it for SECONDS from fuzz/corpus/<name>/, then
# merges what it found into fuzz/corpus/<name>/found/, keeping only inputs that reach an edge the
# corpus does not (libFuzzer's -merge=1, edges alone: -use_counters=0). make test's fuzz tests
# start from the whole folder, so each run begins where the runs of this script left off.
#
# Usage: fuzz/grow-corpus.sh BUILD_DIR [SECONDS] [NAME ...]
#   BUILD_DIR   a tree configured with FLINK_GPU_FUZZ=ON and built (make test's build-sanitize/)
#   SECONDS     how long each fuzzer runs (default 150); two run at a time. found/ only grows:
#               to start it again, empty it and run this for longer
#   NAME ...    the fuzzers (default: every one, e.g. script_output share_allocation)
set -euo pipefail
usage() {
  echo "$1" >&2
  echo "usage: $0 BUILD_DIR [SECONDS] [NAME ...]" >&2
  exit 2
}
[[ $# -ge 1 ]] || usage "BUILD_DIR is missing"
[[ -d $1 ]] || usage "$1: no such folder (BUILD_DIR)"
build=$(realpath "$1")
seconds=${2:-150}
# libFuzzer reads a -max_total_time that is not a number as 0, which is no limit at all.
[[ $seconds =~ ^[1-9][0-9]{0,5}$ ]] ||
  usage "SECONDS must be a whole number of seconds from 1 to 999999, not '$seconds'"
shift $(($# >= 2 ? 2 : 1))
caller=$PWD
cd "$(dirname "${BASH_SOURCE[0]}")"
[[ $# -gt 0 ]] || set -- $(ls corpus)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

grow() {
  local name=$1 fuzzer=$build/bin/${1}_fuzzer
  [[ -x $fuzzer ]] || { echo "$fuzzer: not built (FLINK_GPU_FUZZ=ON, clang)" >&2; return 1; }
  mkdir -p "$scratch/$name" "corpus/$name/found"
  # A crash's input is written where -artifact_prefix says: in the folder this was run from, named
  # in the log shown.
  "$fuzzer" -max_total_time="$seconds" -max_len=4096 -timeout=10 -artifact_prefix="$caller/$name-" \
    "$scratch/$name" "corpus/$name" >"$scratch/$name.log" 2>&1 ||
    { echo "$name: the fuzzer failed; its log:" >&2; tail -40 "$scratch/$name.log" >&2; return 1; }
  "$fuzzer" -merge=1 -use_counters=0 "corpus/$name" "$scratch/$name" >"$scratch/$name.merge" 2>&1 ||
    { echo "$name: the merge failed; its log:" >&2; tail -40 "$scratch/$name.merge" >&2; return 1; }
  # -merge=1 writes into the first folder given: move what it added there into found/.
  local file
  for file in "corpus/$name"/*; do
    [[ -f $file && $(basename "$file") =~ ^[0-9a-f]{40}$ ]] && mv "$file" "corpus/$name/found/"
  done
  echo "$name: $(grep -o 'MERGE-OUTER: [0-9]* new files.*' "$scratch/$name.merge" || echo 'nothing new')"
}

status=0
while [[ $# -gt 0 ]]; do
  grow "$1" & first=$!
  second=""
  if [[ $# -gt 1 ]]; then grow "$2" & second=$!; fi
  wait "$first" || status=1
  [[ -z $second ]] || wait "$second" || status=1
  shift $(($# > 1 ? 2 : 1))
done
exit $status
