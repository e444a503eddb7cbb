#!/usr/bin/env bash
# Installs everything the tests need on a fresh Debian machine and runs the default tests.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! dpkg -s libxc-dev libopenblas-dev >/dev/null 2>&1; then
    sudo_cmd=""
    [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    $sudo_cmd apt-get install -y -qq libxc-dev libopenblas-dev
fi
python3 -m pip install -q torch==2.13.0
CC=g++ python3 -m pip install -q -e '.[test,gpaw]'
python3 -m pytest -m "not slow" "$@"
