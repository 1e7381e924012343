#!/usr/bin/env bash
# Where a Ninja build's time went, by target: the seconds of every compile and link that Ninja
# logged in BUILD_DIR/.ninja_log (its last build of each output), summed per target, the largest
# first. Each step's time is wall-clock, so on a busy machine it includes waiting for a core; the
# sum over steps is about the CPU time a build of BUILD_DIR from nothing costs. make test builds
# the sanitizer trees at nice 19 beside the tests: their sums there include that waiting, so build
# a tree on its own (make tsan-tree, make sanitize-tree) for its CPU time.
#
# Usage: scripts/build-times.sh [BUILD_DIR ...]   (default: build build-tsan build-sanitize)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ $# -gt 0 ]] || set -- build build-tsan build-sanitize
for dir in "$@"; do
  log=$dir/.ninja_log
  if [[ ! -f $log ]]; then
    echo "$dir: no .ninja_log (not a Ninja build, or never built)" >&2
    continue
  fi
  python3 - "$log" <<'PY'
import collections
import re
import sys

path = sys.argv[1]
steps = {}
with open(path) as log:
    for line in log:
        if line.startswith("#"):
            continue
        start, end, _, output, _ = line.rstrip("\n").split("\t")
        steps[output] = (int(end) - int(start)) / 1000  # the last build of each output
by_target = collections.defaultdict(lambda: [0.0, 0])
for output, seconds in steps.items():
    match = re.search(r"CMakeFiles/([^/]+)\.dir/", output)
    target = match.group(1) if match else "(links and other steps)"
    by_target[target][0] += seconds
    by_target[target][1] += 1
total = sum(seconds for seconds, _ in by_target.values())
print(f"{path}: {total:.0f} s over {len(steps)} steps")
for target, (seconds, count) in sorted(by_target.items(), key=lambda item: -item[1][0]):
    if seconds >= 1:
        print(f"  {seconds:7.1f} s  {count:4d}  {target}")
PY
done
