#!/usr/bin/env bash
# The layering of src/: every folder of src/ is a layer, the README's "Layers of src/" block
# lists them from the bottom up, and a file may include headers of its own layer and of the
# layers below it, never of one above. Public headers (include/flink/) include no header of src/.
#
# The README is the one list: a new folder of src/ fails this test until it is placed there.
#
# Usage: check_layers.sh <source dir>
set -euo pipefail
root=${1:?usage: check_layers.sh <source dir>}
readme=$root/README.md
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# The layers, bottom first: the src/<name>/ entries between the markers, in order.
block=$(sed -n '/<!-- layers: bottom first -->/,/<!-- \/layers -->/p' "$readme")
[ -n "$block" ] || { echo "FAIL: $readme has no <!-- layers: bottom first --> block" >&2; exit 1; }
mapfile -t layers < <(grep -o '^src/[a-z]*/' <<<"$block" | sed 's#^src/##; s#/$##')
[ "${#layers[@]}" -gt 0 ] || { echo "FAIL: the layers block lists no src/<folder>/" >&2; exit 1; }
declare -A rank=()
for i in "${!layers[@]}"; do
  name=${layers[$i]}
  [ -z "${rank[$name]+x}" ] || fail "src/$name/ is listed twice in the layers block"
  rank[$name]=$i
done

# Every folder of src/ has its place, and every place is a folder.
for dir in "$root"/src/*/; do
  name=$(basename "$dir")
  [ -n "${rank[$name]+x}" ] || fail "src/$name/ is not in the README's layers block"
done
for name in "${layers[@]}"; do
  [ -d "$root/src/$name" ] || fail "the layers block lists src/$name/, which does not exist"
done

# No include reaches up.
while IFS= read -r -d '' file; do
  relative=${file#"$root"/src/}
  own=${relative%%/*}
  [ -n "${rank[$own]+x}" ] || continue  # reported above
  while IFS=: read -r line included; do
    target=${included%%/*}
    [ -n "${rank[$target]+x}" ] || continue  # not a folder of src/ (flink/..., a system header)
    if [ "${rank[$target]}" -gt "${rank[$own]}" ]; then
      fail "src/$relative:$line includes \"$included\": src/$target/ stands above src/$own/"
    fi
  done < <(grep -n -o '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*"' "$file" |
           sed 's/:[^"]*"/:/; s/"$//')
done < <(find "$root/src" -type f \( -name '*.h' -o -name '*.cpp' \) -print0)

# The public headers stand on their own.
while IFS= read -r -d '' file; do
  while IFS=: read -r line included; do
    case $included in
      flink/*) ;;
      *) fail "${file#"$root"/}:$line includes \"$included\", which is not a public header" ;;
    esac
  done < <(grep -n -o '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*"' "$file" |
           sed 's/:[^"]*"/:/; s/"$//')
done < <(find "$root/include" -type f -name '*.h' -print0)

if [ "$failures" -gt 0 ]; then
  echo "$failures layering fault(s); the layers, bottom first: ${layers[*]}" >&2
  exit 1
fi
echo "layers of src/, bottom first: ${layers[*]}; no include reaches up"
