"""Force calls to relax 12 drug-like molecules from force-field geometries.

The workflow of most DFT users: a geometry from SMILES by RDKit (ETKDGv3) and MMFF94,
refined by quantum chemistry. Runs every molecule of the set shipped in
``asebo/data/druglike`` (20 to 63 atoms; the SMILES is on each file's comment line)
with each optimizer to ``--fmax`` with GFN2-xTB and prints the same table as
``asebo bench baker``. Sella, the internal-coordinate optimizer to compare with,
needs ``pip install 'asebo[sella]'``.
"""

from asebo.benchmarks import _relaxation_table

DEFAULT_DIR = _relaxation_table.DATA_DIR / "druglike"
OPTIMIZERS = ["bo", "bfgs", "lbfgs"]


def add_arguments(parser):
    _relaxation_table.add_arguments(parser, DEFAULT_DIR, OPTIMIZERS)


def run(args):
    _relaxation_table.run(args)
