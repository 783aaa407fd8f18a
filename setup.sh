#!/usr/bin/env bash
# Sets up persolve on Debian/Ubuntu: installs the build dependencies that
# are missing (apt-get), configures the build in ./build and compiles it.
# CUDA is used when a toolkit (nvcc) is found; without it the CPU backend
# builds alone. Extra arguments go to `meson setup`, e.g. -Dcuda=disabled.
set -euo pipefail
cd "$(dirname "$0")"

packages=(build-essential meson ninja-build pkg-config libhdf5-dev libcmocka-dev)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    echo "setup: installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ -f build/build.ninja ]; then
    meson setup --reconfigure build "$@" >/dev/null
else
    meson setup build "$@"
fi
ninja -C build
