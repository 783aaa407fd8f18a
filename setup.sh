#!/usr/bin/env bash
# Sets up persolve on Debian/Ubuntu: installs the build dependencies that
# are missing (apt-get), configures the build in ./build and compiles it.
# CUDA is used when a toolkit (nvcc) is found; without it the CPU backend
# builds alone. Extra arguments go to `meson setup`, e.g. -Dcuda=disabled.
#
# --python also builds the Python extension (import persolve) into
# build/python and lets `meson test` run its suite: it makes a virtual
# environment .venv with the Python packages of python/requirements.txt
# (from PyPI: nanobind, numpy, h5py, matplotlib, pypulseq, pytest, ...) and
# configures the build with its interpreter (-Dpython_exe). Without it the
# extension is built only when nanobind is importable by python3, and the
# python suite is skipped otherwise.
set -euo pipefail
cd "$(dirname "$0")"

with_python=0
args=()
for a in "$@"; do
    if [ "$a" = "--python" ]; then with_python=1; else args+=("$a"); fi
done

packages=(build-essential meson ninja-build pkg-config libhdf5-dev libcmocka-dev)
if [ $with_python -eq 1 ] && ! python3 - <<'PY' 2>/dev/null
import ensurepip, os, sysconfig, venv
assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
PY
then
    packages+=(python3-dev python3-venv)
fi
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

if [ $with_python -eq 1 ]; then
    if [ ! -x .venv/bin/python3 ]; then
        echo "setup: making .venv for the Python package"
        python3 -m venv .venv
    fi
    .venv/bin/python3 -m pip install -q --disable-pip-version-check -r python/requirements.txt
    args+=("-Dpython_exe=$PWD/.venv/bin/python3")
fi

if [ -f build/build.ninja ]; then
    meson setup --reconfigure build ${args[@]+"${args[@]}"} >/dev/null
else
    meson setup build ${args[@]+"${args[@]}"}
fi
ninja -C build
