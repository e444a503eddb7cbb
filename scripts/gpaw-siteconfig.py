"""GPAW build options: MPI (MPICH) and ScaLAPACK, for relaxations under ``mpiexec``.

Read by GPAW's setup.py through ``GPAW_CONFIG`` (``scripts/test.sh`` sets it). GPAW
26 distributes its subspace matrices over the domain decomposition with BLACS, so a
GPAW built with MPI but without ScaLAPACK stops at the first parallel SCF step. Needs
``apt-get install mpich libmpich-dev libscalapack-mpich-dev``.
"""

# flake8: noqa: F821 (``libraries`` is defined by GPAW's setup.py)
mpi = True
compiler = "mpicxx.mpich"  # by name: libscalapack-mpich-dev also brings Open MPI
scalapack = True
libraries += ["blas", "scalapack-mpich"]
