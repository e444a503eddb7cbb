#!/usr/bin/env bash
# Gives the plain mpiexec, mpirun and mpicc to MPICH, for which scripts/test.sh builds
# GPAW (scripts/gpaw-siteconfig.py), where Open MPI came only as a dependency.
#
# Debian 12's libscalapack-mpich2.2 depends on mpi-default-bin, which depends on
# openmpi-bin; Open MPI's alternatives (priority 50) then win over MPICH's (40), and
# `mpiexec -n 2 gpaw python ...` starts Open MPI's launcher for a GPAW linked to MPICH.
# An Open MPI installed on purpose (not marked automatic by apt) keeps its names.
set -euo pipefail

[ "$(apt-mark showauto openmpi-bin 2>/dev/null)" = openmpi-bin ] || exit 0
sudo_cmd=""
[ "$(id -u)" = 0 ] || sudo_cmd="sudo"
# the group and MPICH's member of it: mpirun (with mpiexec), mpi (mpicc, mpicxx, ...)
for group in mpirun:mpirun.mpich mpi:mpicc.mpich; do
    name="${group%%:*}"
    mpich="/usr/bin/${group#*:}"
    current="$(update-alternatives --query "$name" 2>/dev/null || true)"
    grep -qx "Alternative: $mpich" <<<"$current" || continue  # MPICH not installed
    grep -qx "Value: $mpich" <<<"$current" && continue  # MPICH's already
    $sudo_cmd update-alternatives --quiet --set "$name" "$mpich"
    echo "$name: $mpich (MPICH, for which GPAW is built) in place of Open MPI's"
done
