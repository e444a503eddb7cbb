"""Force calls to relax a third set of 16 drug-like molecules from force-field geometries.

The workflow and table of ``asebo bench druglike`` on 16 other molecules (21 to 49
atoms; the SMILES is on each file's comment line; RDKit ETKDGv3 with seed 3 and
MMFF94), shipped in ``asebo/data/druglike3`` to check choices made on the Baker set
and the first two drug-like sets; the Lindh prior's stiffness was chosen over all
six shipped sets together.
"""

from asebo.benchmarks import _relaxation_table
from asebo.benchmarks.druglike import OPTIMIZERS, run

__all__ = ["DEFAULT_DIR", "add_arguments", "run"]

DEFAULT_DIR = _relaxation_table.DATA_DIR / "druglike3"


def add_arguments(parser):
    _relaxation_table.add_arguments(parser, DEFAULT_DIR, OPTIMIZERS)
