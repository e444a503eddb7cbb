"""Force calls to relax the 22 complexes of the S22 set: molecules held by weak forces.

Hydrogen-bonded, dispersion-bound and mixed dimers of 6 to 30 atoms (P. Jurečka,
J. Šponer, J. Černý and P. Hobza, Phys. Chem. Chem. Phys. 8, 1985 (2006)), at their
reference geometries as ASE ships them (``ase.collections.s22``), copied to
``asebo/data/s22``. The Lindh model barely couples two molecules, so the motions
of one against the other are the soft directions here; the table is that of
``asebo bench baker``.
"""

from asebo.benchmarks import _relaxation_table
from asebo.benchmarks.druglike import OPTIMIZERS, run

__all__ = ["DEFAULT_DIR", "add_arguments", "run"]

DEFAULT_DIR = _relaxation_table.DATA_DIR / "s22"


def add_arguments(parser):
    _relaxation_table.add_arguments(parser, DEFAULT_DIR, OPTIMIZERS)
