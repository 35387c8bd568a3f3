#!/usr/bin/env bash
# Installs every Debian package placer needs to build, test and run. Idempotent; run as root
# (or with sudo available) on a fresh Debian 12 machine. Nothing else is downloaded, ever.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git
  libonnx-dev libprotobuf-dev protobuf-compiler   # ONNX import + shape inference
  nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libmetis-dev libscotch-dev coinor-libcbc-dev coinor-libclp-dev
  libtorch-dev libopenblas0                       # neural policies, executor (OpenBLAS: 25x faster than reference BLAS)
  python3 python3-onnx python3-numpy               # acceptance checks and doc scripts
  libonnx-testdata                                 # ONNX's own per-op test models: the importer's conformance test
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then echo "install-deps: all ${#packages[@]} packages present"; exit 0; fi
SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "install-deps: installed ${#missing[@]} packages"
