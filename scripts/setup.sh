#!/usr/bin/env bash
# Installs the Debian packages dsv4-stage builds against, only those missing
# (idempotent). Runs apt-get as root, or through sudo when available.
set -euo pipefail

# clang + libclang-rt-14-dev: the libFuzzer targets scripts/test.sh runs briefly (docs/fuzzing.md).
packages=(build-essential cmake pkg-config libopenmpi-dev openmpi-bin libyaml-cpp-dev
          libcxxopts-dev doctest-dev nlohmann-json3-dev libspdlog-dev clang libclang-rt-14-dev
          libicu-dev libcpp-httplib-dev
          libboost-dev)  # libboost-dev: Boost.Math chi-square (spec sampling test)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node and npm run the tokenizer oracle and the OpenAI-client tests (npm packages go into
# the build folder, never globally); Debian's when no other node is installed.
command -v npm >/dev/null || missing+=(nodejs npm)
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present" >&2
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
