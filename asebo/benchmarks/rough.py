"""Force calls to relax 40 small molecules from rough starts: raw 3D embeddings.

Each start is an RDKit ETKDGv3 embedding of a SMILES (seed 11 or 23, on the file's
comment line) with no force-field relaxation: bond lengths and angles as the
embedding left them, like the Baker set's starts, on molecules of 6 to 27 atoms
(amino acids, heterocycles, esters, a dipeptide...). Shipped in ``asebo/data/rough`` to check
what the Baker set says on other molecules (the Lindh prior's stiffness was chosen
over all six shipped sets together); the table is that of ``asebo bench baker``.
"""

from asebo.benchmarks import _relaxation_table
from asebo.benchmarks.druglike import OPTIMIZERS, run

__all__ = ["DEFAULT_DIR", "add_arguments", "run"]

DEFAULT_DIR = _relaxation_table.DATA_DIR / "rough"


def add_arguments(parser):
    _relaxation_table.add_arguments(parser, DEFAULT_DIR, OPTIMIZERS)
