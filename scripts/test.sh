#!/usr/bin/env bash
# Installs everything the tests need on a fresh Debian machine, runs the linter and the
# default tests. Arguments go to pytest; '--all' runs the slow tests too.
set -euo pipefail
cd "$(dirname "$0")/.."

# libxc and OpenBLAS for GPAW; MPICH and ScaLAPACK so that GPAW is built to run
# under mpiexec (scripts/gpaw-siteconfig.py)
packages="libxc-dev libopenblas-dev mpich libmpich-dev libscalapack-mpich-dev"
if ! dpkg -s $packages >/dev/null 2>&1; then
    sudo_cmd=""
    [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    $sudo_cmd apt-get install -y -qq $packages
fi
# libscalapack-mpich-dev brings Open MPI too, which takes the plain mpiexec: MPICH's
scripts/mpich-alternatives.sh
# PyTorch's CPU build, from its wheel index where that can be reached
scripts/install-torch.sh
GPAW_CONFIG="$PWD/scripts/gpaw-siteconfig.py" CC=g++ \
    python3 -m pip install -q -e '.[test,learn,campaign,gpaw,ml,sella,geometric]'
# the project's own Python files, not a user's script saved in the clone
python_folders="asebo calculators docs examples scripts tests"
python3 -m ruff check $python_folders
python3 -m ruff format --check $python_folders
markers="not slow"
if [ "${1:-}" = "--all" ]; then
    markers=""
    shift
fi
python3 -m pytest -m "$markers" "$@"
