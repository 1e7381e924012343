#!/usr/bin/env bash
# The layering of src/. docs/architecture.md lists the layers from the bottom up, between the
# markers <!-- layers: bottom first --> and <!-- /layers -->, one `src/<folder>/` a line; a folder
# may be nested (src/host/nvml/). A file belongs to the deepest listed folder that holds it, and
# may include headers of its own layer and of the layers below, never of one above.
#
# An include is resolved as the compiler resolves it from src/ and include/: "host/nvml/Nvml.h" is
# src/host/nvml/, and "flink/<pkg>/X.h" counts as an include of src/flink/<pkg>/, whether X.h is a
# private header there or the public header it implements. Beyond the order, two rules:
#   - src/host/ is the GPU machinery and knows nothing of Flink: no file under it includes a
#     "flink/…" header, public or private.
#   - The public headers (include/flink/) include no header of src/, only each other.
#
# docs/architecture.md is the one list: a new folder of src/ fails this test until it is placed.
#
# Usage: check_layers.sh <source dir>
set -euo pipefail
root=${1:?usage: check_layers.sh <source dir>}
doc=$root/docs/architecture.md
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
[ -f "$doc" ] || { echo "FAIL: $doc does not exist" >&2; exit 1; }

# The layers, bottom first: the src/<path>/ entries between the markers, in order.
block=$(sed -n '/<!-- layers: bottom first -->/,/<!-- \/layers -->/p' "$doc")
[ -n "$block" ] || { echo "FAIL: $doc has no <!-- layers: bottom first --> block" >&2; exit 1; }
mapfile -t layers < <(grep -o '^src/[a-z/]*/' <<<"$block" | sed 's#^src/##; s#/$##')
[ "${#layers[@]}" -gt 0 ] || { echo "FAIL: the layers block lists no src/<folder>/" >&2; exit 1; }
declare -A rank=()
for i in "${!layers[@]}"; do
  name=${layers[$i]}
  [ -z "${rank[$name]+x}" ] || fail "src/$name/ is listed twice in the layers block"
  rank[$name]=$i
done

# layer_of <path below src/>: sets layer to the deepest listed folder holding it, or to nothing.
# In the shell itself: it runs for every include of every file.
layer_of() {
  local path=$1
  layer=
  while [[ $path == */* ]]; do
    path=${path%/*}
    if [ -n "${rank[$path]+x}" ]; then
      layer=$path
      return
    fi
  done
}

# Every folder of src/ that holds a source lies in a layer, and every layer is a folder.
while IFS= read -r -d '' dir; do
  relative=${dir#"$root"/src/}
  compgen -G "$dir/*.h" >/dev/null || compgen -G "$dir/*.cpp" >/dev/null || continue
  layer_of "$relative/x"
  [ -n "$layer" ] ||
    fail "src/$relative/ is not in the layers block of docs/architecture.md"
done < <(find "$root/src" -mindepth 1 -type d -print0)
for name in "${layers[@]}"; do
  [ -d "$root/src/$name" ] || fail "the layers block lists src/$name/, which does not exist"
done

# includes <folder> <name pattern>...: every #include "path" of the files below the folder, one
# grep for all of them, as the file's name, a NUL, then "line:#include "path"" (the loops below
# take the path out: a sed here would cut at a ':' in the file's name).
includes() {
  local folder=$1
  shift
  grep -r -a -n -o -Z "${@/#/--include=}" '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*"' \
    "$folder"
}

# No include reaches up; host/ includes nothing of Flink.
while IFS= read -r -d '' file && IFS=: read -r line included; do
  included=${included#*\"}
  included=${included%\"}
  relative=${file#"$root"/src/}
  layer_of "$relative"
  own=$layer
  [ -n "$own" ] || continue  # reported above
  if [[ $own == host || $own == host/* ]] && [[ $included == flink/* ]]; then
    fail "src/$relative:$line includes \"$included\": src/host/ knows nothing of Flink"
    continue
  fi
  layer_of "$included"
  target=$layer
  [ -n "$target" ] || continue  # not a header of src/ (a header beside the file, a system one)
  if [ "${rank[$target]}" -gt "${rank[$own]}" ]; then
    fail "src/$relative:$line includes \"$included\": src/$target/ stands above src/$own/"
  fi
done < <(includes "$root/src" '*.h' '*.cpp')

# The public headers stand on their own.
while IFS= read -r -d '' file && IFS=: read -r line included; do
  included=${included#*\"}
  included=${included%\"}
  case $included in
    flink/*) [ -f "$root/include/$included" ] ||
               fail "${file#"$root"/}:$line includes \"$included\", which is not a public header" ;;
    *) fail "${file#"$root"/}:$line includes \"$included\", which is not a public header" ;;
  esac
done < <(includes "$root/include" '*.h')

if [ "$failures" -gt 0 ]; then
  echo "$failures layering fault(s); the layers, bottom first: ${layers[*]}" >&2
  exit 1
fi
echo "layers of src/, bottom first: ${layers[*]}; no include reaches up, host/ includes no Flink"
