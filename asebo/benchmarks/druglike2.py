"""Force calls to relax a second set of 12 drug-like molecules from force-field geometries.

The same workflow and table as ``asebo bench druglike`` on other molecules (20 to 41
atoms; the SMILES is on each file's comment line; RDKit ETKDGv3 with seed 0 and
MMFF94), shipped in ``asebo/data/druglike2``: what is chosen on the first set and on
the Baker set is checked here, on molecules it was not chosen on.
"""

from asebo.benchmarks import _relaxation_table
from asebo.benchmarks.druglike import OPTIMIZERS, run

__all__ = ["DEFAULT_DIR", "add_arguments", "run"]

DEFAULT_DIR = _relaxation_table.DATA_DIR / "druglike2"


def add_arguments(parser):
    _relaxation_table.add_arguments(parser, DEFAULT_DIR, OPTIMIZERS)
