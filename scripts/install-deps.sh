#!/usr/bin/env bash
# Installs everything kiln needs to build and test on Debian 12 (bookworm).
# Idempotent: packages already present are skipped, so it is safe to run before every build.
set -euo pipefail

packages=(
    build-essential cmake ninja-build pkg-config git
    llvm-19-dev libclang-rt-19-dev # LLVM 19 is the pinned code generator version
    zlib1g-dev libzstd-dev libedit-dev libxml2-dev libffi-dev libcurl4-openssl-dev
    libsqlite3-dev sqlite3
    nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
    libomp-dev libxgboost-dev libdlpack-dev
    ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
    clang-format clang-tidy # checked in CI by scripts/test.sh
    libopenblas-dev libdnnl-dev libhalide14-0-dev # reference libraries for bench/
)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#packages[@]} packages present"
    exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
