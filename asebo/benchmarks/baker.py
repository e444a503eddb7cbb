"""Force calls to relax the 30 Baker molecules: BOOptimizer against ASE's optimizers.

Runs every molecule of the Baker set (J. Baker, J. Comput. Chem. 14, 1085 (1993);
shipped in ``asebo/data/baker``) with each optimizer to ``--fmax`` with GFN2-xTB,
side by side in one run, and prints the force calls per molecule, the totals, the
ratio of each total to BFGS's, failures, and energies that end more than 0.01 eV
above the best one found.
"""

from asebo.benchmarks import _relaxation_table

DEFAULT_DIR = _relaxation_table.DATA_DIR / "baker"
OPTIMIZERS = ["bo", "bfgs", "lbfgs", "fire", "gpmin"]


def add_arguments(parser):
    _relaxation_table.add_arguments(parser, DEFAULT_DIR, OPTIMIZERS)


def run(args):
    _relaxation_table.run(args)
