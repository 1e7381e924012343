#!/usr/bin/env bash
# check_layers.sh itself: it must refuse an include that reaches up (a nested layer and a
# "flink/…" include too), any include of Flink from src/host/, a folder of src/ that
# docs/architecture.md does not place, and a public header that includes src/; and pass a tree
# that is right.
set -euo pipefail
checker=${1:?usage: check_layers_test.sh <check_layers.sh>}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

tree() {  # tree <name>: low/ at the bottom, host/gpu/ above it, flink/api/ on top
  local dir=$work/$1
  mkdir -p "$dir/docs" "$dir/src/low" "$dir/src/host/gpu" "$dir/src/flink/api" "$dir/include/flink/api"
  printf '# x\n<!-- layers: bottom first -->\n```\nsrc/low/        the bottom\nsrc/host/gpu/   above it\nsrc/flink/api/  on top\n```\n<!-- /layers -->\n' >"$dir/docs/architecture.md"
  printf '#pragma once\n#include <string>\n' >"$dir/src/low/Low.h"
  printf '#include "host/gpu/Gpu.h"\n#include "low/Low.h"\n' >"$dir/src/host/gpu/Gpu.cpp"
  printf '#pragma once\n' >"$dir/src/host/gpu/Gpu.h"
  printf '#include "flink/api/Api.h"\n#include "flink/api/Private.h"\n#include "host/gpu/Gpu.h"\n' >"$dir/src/flink/api/Api.cpp"
  printf '#pragma once\n' >"$dir/src/flink/api/Private.h"
  printf '#pragma once\n#include "flink/api/Other.h"\n' >"$dir/include/flink/api/Api.h"
  printf '#pragma once\n' >"$dir/include/flink/api/Other.h"
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
printf '#pragma once\n#include "host/gpu/Gpu.h"\n' >"$up/src/low/Low.h"
expect_failure "$up" 'src/low/Low.h:2 includes "host/gpu/Gpu.h": src/host/gpu/ stands above src/low/'

# A ':' in a file's name is part of the name, not the end of it.
colon=$(tree colon)
printf '#pragma once\n#include "host/gpu/Gpu.h"\n' >"$colon/src/low/co:lon.h"
expect_failure "$colon" 'src/low/co:lon.h:2 includes "host/gpu/Gpu.h": src/host/gpu/ stands above src/low/'

spaced=$(tree spaced)
printf '#pragma once\n#  include   "host/gpu/Gpu.h"\n' >"$spaced/src/low/Low.h"
expect_failure "$spaced" 'src/host/gpu/ stands above src/low/'

# From the bottom, a public header of flink/ counts as its folder of src/flink/.
public_up=$(tree public_up)
printf '#pragma once\n#include "flink/api/Api.h"\n' >"$public_up/src/low/Low.h"
expect_failure "$public_up" 'src/low/Low.h:2 includes "flink/api/Api.h": src/flink/api/ stands above src/low/'

# host/ never includes Flink: a public header, or a private one of src/flink/.
host_public=$(tree host_public)
printf '#include "flink/api/Api.h"\n' >"$host_public/src/host/gpu/Gpu.cpp"
expect_failure "$host_public" 'src/host/gpu/Gpu.cpp:1 includes "flink/api/Api.h": src/host/ knows nothing of Flink'
host_private=$(tree host_private)
printf '#pragma once\n#include "flink/api/Private.h"\n' >"$host_private/src/host/gpu/Gpu.h"
expect_failure "$host_private" 'src/host/gpu/Gpu.h:2 includes "flink/api/Private.h": src/host/ knows nothing of Flink'

unplaced=$(tree unplaced)
mkdir "$unplaced/src/extra"
printf '#pragma once\n' >"$unplaced/src/extra/Extra.h"
expect_failure "$unplaced" 'src/extra/ is not in the layers block of docs/architecture.md'
unplaced_nested=$(tree unplaced_nested)
mkdir "$unplaced_nested/src/host/other"
printf '#pragma once\n' >"$unplaced_nested/src/host/other/Other.h"
expect_failure "$unplaced_nested" 'src/host/other/ is not in the layers block'

public=$(tree public)
printf '#pragma once\n#include "low/Low.h"\n' >"$public/include/flink/api/Api.h"
expect_failure "$public" 'include/flink/api/Api.h:2 includes "low/Low.h", which is not a public header'
public_private=$(tree public_private)
printf '#pragma once\n#include "flink/api/Private.h"\n' >"$public_private/include/flink/api/Api.h"
expect_failure "$public_private" 'includes "flink/api/Private.h", which is not a public header'

gone=$(tree gone)
rm -r "$gone/src/host/gpu"
expect_failure "$gone" 'lists src/host/gpu/, which does not exist'

echo "check_layers.sh refuses what it must"
