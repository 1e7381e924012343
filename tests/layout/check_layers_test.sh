#!/usr/bin/env bash
# check_layers.sh itself: it must refuse an include that reaches up, a folder of src/ that the
# README does not place, and a public header that includes src/; and pass a tree that is right.
set -euo pipefail
checker=${1:?usage: check_layers_test.sh <check_layers.sh>}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

tree() {  # tree <name>: a small source tree, low/ below high/
  local dir=$work/$1
  mkdir -p "$dir/src/low" "$dir/src/high" "$dir/include/flink"
  printf '# x\n<!-- layers: bottom first -->\n```\nsrc/low/   the bottom\nsrc/high/  above it\n```\n<!-- /layers -->\n' >"$dir/README.md"
  printf '#pragma once\n#include <string>\n' >"$dir/src/low/Low.h"
  printf '#include "high/High.h"\n#include "low/Low.h"\n' >"$dir/src/high/High.cpp"
  printf '#pragma once\n#include "flink/Other.h"\n' >"$dir/include/flink/Api.h"
  echo "$dir"
}

expect_failure() {  # expect_failure <dir> <text the report must hold>
  local output
  if output=$(bash "$checker" "$1" 2>&1); then
    echo "FAIL: check_layers.sh passed $1, expected: $2" >&2
    exit 1
  fi
  if ! grep -qF -- "$2" <<<"$output"; then
    echo "FAIL: check_layers.sh's report lacks '$2':" >&2
    echo "$output" >&2
    exit 1
  fi
}

good=$(tree good)
bash "$checker" "$good" >/dev/null || { echo "FAIL: a right tree was refused" >&2; exit 1; }

up=$(tree up)
printf '#pragma once\n#include "high/High.h"\n' >"$up/src/low/Low.h"
expect_failure "$up" 'src/low/Low.h:2 includes "high/High.h": src/high/ stands above src/low/'

spaced=$(tree spaced)
printf '#pragma once\n#  include   "high/High.h"\n' >"$spaced/src/low/Low.h"
expect_failure "$spaced" 'src/high/ stands above src/low/'

unplaced=$(tree unplaced)
mkdir "$unplaced/src/extra"
expect_failure "$unplaced" 'src/extra/ is not in the README'"'"'s layers block'

public=$(tree public)
printf '#pragma once\n#include "low/Low.h"\n' >"$public/include/flink/Api.h"
expect_failure "$public" 'include/flink/Api.h:2 includes "low/Low.h", which is not a public header'

gone=$(tree gone)
rm -r "$gone/src/high"
expect_failure "$gone" 'lists src/high/, which does not exist'

echo "check_layers.sh refuses what it must"
