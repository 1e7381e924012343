#!/usr/bin/env bash
# Installs the Debian packages this project builds with, and only those that are missing.
# Run by `make` before every build; a no-op (one dpkg query) when everything is there.
#
# Usage: install-deps.sh [run|all]
#   run  what `make run` needs: the compiler and the libraries of flink-gpu and the discovery
#        program
#   all  (the default) everything `make test` needs besides: the tests, the sanitizer and fuzz
#        builds, the benchmarks, the style check, the metrics and package checks
set -euo pipefail

profile=${1:-all}
run_packages=(
  cmake make ninja-build g++               # compiler and build tools
  libspdlog-dev libfmt-dev                 # logging
  libcli11-dev                             # command line
  nlohmann-json3-dev                       # JSON output
  libyaml-cpp-dev                          # config.yaml
)
test_packages=(
  clang libclang-rt-14-dev                 # the ASan/UBSan, TSan and fuzz builds
  clang-format git                         # style check
  python3                                  # the documentation's examples (tests/docs/), make bench
  procps                                   # ps, pgrep, pkill (Flink's script's pattern, the
                                           # gpu-check and promise tests); not in a minimal Debian
  libgtest-dev libgmock-dev                # tests
  libbenchmark-dev                         # benchmarks
  prometheus                               # promtool, for the metrics tests
  dpkg-dev lintian                         # make package (CPack's DEB) and its check
  help2man                                 # the package's manual page, flink-gpu(1)
  systemd                                  # systemd-analyze, which verifies the package's units
  zsh                                      # parses the zsh completion script
)
case $profile in
  run) packages=("${run_packages[@]}") ;;
  all) packages=("${run_packages[@]}" "${test_packages[@]}") ;;
  *) echo "usage: $0 [run|all]" >&2; exit 2 ;;
esac

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)
  [[ $status == installed ]] || missing+=("$package")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "Installing missing packages: ${missing[*]}"
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "error: these packages are missing and this user cannot install them: ${missing[*]}" >&2
    echo "Run as root: apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
