#!/usr/bin/env bash
# Installs the Debian packages this project builds with, and only those that are missing.
# Run by `make` before every build; a no-op (one dpkg query) when everything is there.
set -euo pipefail

packages=(
  cmake make g++ clang libclang-rt-14-dev  # compilers; clang for the ASan/UBSan and fuzz build
  clang-format git                         # style check
  libspdlog-dev libfmt-dev                 # logging
  libcli11-dev                             # command line
  nlohmann-json3-dev                       # JSON output
  libyaml-cpp-dev                          # config.yaml
  libgtest-dev libgmock-dev                # tests
  libbenchmark-dev                         # benchmarks
  prometheus                               # promtool, for the metrics tests
  dpkg-dev lintian                         # make package (CPack's DEB) and its check
)

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
